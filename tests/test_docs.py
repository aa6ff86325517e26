"""The documentation site builds without a warning, and every page names only what exists.

The pages are the README, the changelog and `docs/`: each relative link must lead to a file, and each
repository path written in backticks (`attention_platform/hub/native.py`, `tests/deploy/`) must exist.
Product text elsewhere is checked by tests/test_product_text.py."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"
PAGES = sorted([REPO / "README.md", REPO / "CHANGELOG.md", *DOCS.rglob("*.md")])
TOP_LEVEL = ("attention_platform/", "grader_tests/", "jupyter_config/", "docker/", "deploy/", "scripts/", "tests/", "docs/",
             "source/", "release/")
TOP_FILES = {"Makefile", "nbgrader_config.py", "docker-compose.yml", "pyproject.toml", "requirements.lock",
             ".env.example", "CHANGELOG.md", "README.md"}
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
CODE = re.compile(r"`([^`\n]+)`")
# paths a page names that are made at run time (build output, a state directory), not kept in git
MADE_AT_RUN_TIME = ("build/",)


def relative_links(text: str) -> list[str]:
    return [target for target in LINK.findall(text) if not re.match(r"[a-z]+:", target) and not target.startswith("#")]


def named_paths(text: str) -> list[str]:
    """Repository paths written in backticks: ones that start with a top-level folder, or a top-level file."""
    found = []
    for code in CODE.findall(text):
        candidate = code.strip().split("::")[0].rstrip(".,;:")
        if " " in candidate or any(c in candidate for c in "*{}<>$|=()"):
            continue
        if candidate.startswith(TOP_LEVEL) or candidate in TOP_FILES:
            found.append(candidate)
    return found


def missing(text: str, folder: Path) -> list[str]:
    """What a page whose text is ``text``, standing in ``folder``, links to or names that does not exist."""
    problems = []
    for target in relative_links(text):
        path = target.split("#")[0]
        if path and not (folder / path).exists():
            problems.append(f"link to {target} leads nowhere")
    for path in named_paths(text):
        if not path.startswith(MADE_AT_RUN_TIME) and not (REPO / path).exists():
            problems.append(f"names {path}, which does not exist")
    return problems


def test_every_link_and_named_path_exists():
    assert [f"{page.relative_to(REPO)}: {problem}" for page in PAGES
            for problem in missing(page.read_text(), page.parent)] == []


@pytest.mark.parametrize("text, expected", [
    ("see [the guide](docs/nowhere.md)", ["link to docs/nowhere.md leads nowhere"]),
    ("in `attention_platform/no_such_module.py`", ["names attention_platform/no_such_module.py, which does not exist"]),
    ("`tests/test_docs.py::test_x` and [docs](docs/index.md#top)", []),
    ("`build/hub/jupyterhub.log` and `grader_tests/*_probes.py` and [web](https://example.org)", []),
])
def test_the_check_finds_what_it_is_for(text, expected):
    assert missing(text, REPO) == expected


def test_the_site_builds_without_warnings(tmp_path):
    result = subprocess.run([sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html",
                             str(DOCS), str(tmp_path / "html")], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-4000:]
    assert (tmp_path / "html" / "index.html").exists()


def test_the_readme_is_a_short_entry_point():
    lines = (REPO / "README.md").read_text().splitlines()
    assert len(lines) <= 150, f"README.md has {len(lines)} lines; move the detail to its reader's page in docs/"
