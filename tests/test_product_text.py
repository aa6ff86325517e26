"""What users and newcomers read (help strings, comments, Makefile, configs, README, docs) says what is:
it never points at our own tracker's issue numbers (it names the feature or the reason instead), and
never tells history — work rounds, "before: …" figures — which belongs in git and CHANGELOG.md."""

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PRODUCT = ("attention_platform", "grader_tests", "hub", "docker", "deploy", "scripts", "tests", "docs")
FILES = ("Makefile", "nbgrader_config.py", "docker-compose.yml", "pyproject.toml", "README.md")
ISSUE_REFERENCE = re.compile(r"\bissues?\s*#?\s*\d+(?:'s)?\b(?! (?:bytes|seconds|s\b))", re.IGNORECASE)


def _texts():
    for top in PRODUCT:
        for path in sorted((REPO / top).rglob("*")):
            if path.is_file() and path.suffix in {".py", ".js", ".sh", ".yml", ".yaml", ".html", ".toml", ".cfg",
                                                  ".Dockerfile", ".json", ".md"} and path != Path(__file__):
                yield path
    for name in FILES:
        yield REPO / name


def test_no_issue_numbers_in_product_text():
    found = [f"{path.relative_to(REPO)}:{n}" for path in _texts()
             for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1) if ISSUE_REFERENCE.search(line)]
    assert found == []


def test_the_pattern_catches_what_it_is_for():
    assert ISSUE_REFERENCE.search("the deadline rush (issue #7)")
    assert ISSUE_REFERENCE.search("see Issue # 12")
    assert ISSUE_REFERENCE.search("issue 18's targets")
    assert not ISSUE_REFERENCE.search("an issue with the exchange")


HISTORY = re.compile(r"\bround \d+\b|\b(?:this|newest|latest|previous) round\b|\bthe round before\b|\(before: [~\d]",
                     re.IGNORECASE)


def test_no_history_in_product_text():
    found = [f"{path.relative_to(REPO)}:{n}" for path in _texts()
             for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1) if HISTORY.search(line)]
    assert found == []


@pytest.mark.parametrize("line, is_history", [
    ("cold 39.5x in round 39", True),
    ("this round's bench figures", True),
    ("spawn p50 2.5 s (before: 3.8 s)", True),
    ("each student gets one attempt graded per round", False),
    ("rounds up to the next page", False),
    ("the TA's path, run the moment the last round is in", False),
    ("def run(before: str) -> dict:", False),
])
def test_the_history_pattern_catches_what_it_is_for(line, is_history):
    assert bool(HISTORY.search(line)) is is_history
