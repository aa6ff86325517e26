"""What users and newcomers read (help strings, comments, Makefile, configs, README, docs) says what is:
it never points at our own tracker's issue numbers (it names the feature or the reason instead), and
never tells history — work rounds, "before: …" figures — which belongs in git and CHANGELOG.md."""

import ast
import io
import re
import tokenize
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PRODUCT = ("attention_platform", "grader_tests", "jupyter_config", "docker", "deploy", "scripts", "tests", "docs")
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


# A figure measured on one machine on one day (CPU time, milliseconds, memory held, a speed-up) goes stale in a
# comment or docstring: the code says why in words that stay true, and the figures live on the benchmarks page.
# Settings, limits and facts of the design ("a 64 kB limit", "~3,000 names", "~100 bytes each") may stay.
MEASURED = re.compile(
    r"\d\s?CPU-(?:s|ms|µs|seconds)\b|\d\s?CPU seconds\b"  # CPU time
    r"|\d\s?(?:ms|µs)\b"  # milliseconds a step took
    r"|\d\s?s (?:of (?:a|an|its|the)|later|sooner|per|each)\b"  # seconds a step took
    r"|~\s?\d[\d.,]*\s?(?:s|seconds?|min|minutes|MB|MiB|GB|GiB)\b"  # about so long, about so much memory
    r"|\d\s?[-–]\s?\d[\d.]*\s?(?:s|MiB|GiB)\b"  # a range seen over runs
    r"|\b\d+(?:\.\d+)?x (?:slower|faster|sooner|dearer|cheaper)\b"  # a measured ratio
    r"|(?<!\w)\d[^.;:()]*\bon (?:this|our) machines?\b|(?<!\w)\d[^()]*\bhere\)"  # "on this machine", "(... here)"
    r"|\bmeasured (?:alone|here|on (?:this|our|one) machines?)\b|\bmeasured\b[^.]*`make (?:load|bench)`"
    r"|(?-i:\bMeasured\b)",  # "Measured: ..." opens a sentence of figures
    re.IGNORECASE)

# Where comments and docstrings are read for measured figures: the code we ship (not its tests).
MEASURED_FOLDERS = ("attention_platform", "jupyter_config", "docker", "deploy", "scripts")
MEASURED_FILES = ("nbgrader_config.py",)


def _shipped_code():
    paths = [REPO / name for name in MEASURED_FILES] + sorted(p for p in (REPO / "grader_tests").rglob("*.py") if "tests" not in p.parts)
    for top in MEASURED_FOLDERS:
        paths += sorted(path for path in (REPO / top).rglob("*") if path.is_file() and "node_modules" not in path.parts)
    for path in paths:
        name = path.relative_to(REPO).as_posix()
        yield name, path


def _python_notes(source: str):
    """(line, text) of every comment and every string standing alone as a statement (docstrings)."""
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            yield token.start[0], token.string
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            for offset, line in enumerate(node.value.value.splitlines()):
                yield node.lineno + offset, line


def _hash_comments(source: str):
    """(line, text) of every ``#`` comment of a shell script, a Dockerfile or a YAML file."""
    for n, line in enumerate(source.splitlines(), 1):
        found = re.search(r"(?:^|\s)#(.*)$", line)
        if found:
            yield n, found.group(1)


def _js_comments(source: str):
    for found in re.finditer(r"/\*.*?\*/|(?:^|\s)//[^\n]*", source, re.DOTALL):
        start = source.count("\n", 0, found.start()) + 1
        for offset, line in enumerate(found.group(0).splitlines()):
            yield start + offset, line


def _notes(path: Path):
    source = path.read_text(errors="replace")
    first = source.split("\n", 1)[0]
    if path.suffix == ".py" or (first.startswith("#!") and "python" in first):
        return _python_notes(source)
    if path.suffix in {".sh", ".yml", ".yaml", ".Dockerfile"} or path.name == "Dockerfile" or first.startswith("#!"):
        return _hash_comments(source)
    if path.suffix == ".js":
        return _js_comments(source)
    return ()




def test_no_measured_figures_in_comments_or_docstrings():
    found = [f"{name}:{n}: {text.strip()}" for name, path in _shipped_code()
             for n, text in _notes(path) if MEASURED.search(text)]
    assert found == []


@pytest.mark.parametrize("line, is_measured", [
    ("first optimizer step imports ``torch._dynamo`` (~0.9 CPU-s here), the first figure", True),
    ("after the fork every such page is copied -- 4 ms a sandbox.", True),
    ("grammar at import: 0.8 CPU-s on this machine, paid by every process", True),
    ("It copies the memory once (~2.5 ms per MB here), so it is done a chunk at a time", True),
    ("Drawing that panel with matplotlib cost ~35 ms a picture", True),
    ("a class's 1,500 judgements took twice the CPU time, measured alone", True),
    ("(~0.2 s on this machine, which the grader waits for when it closes the zygote)", True),
    ("0.15 s of a 100-student batch's end on this machine", True),
    ("so a format check gives the same answer, 0.8 s later", True),
    ("0.24 s per submission (`make bench`, autograde-batch -j 3)", True),
    ("a warm-up asked for after the start may take (~2 s here)", True),
    ("Measured (`make load`): 0.41-0.44 GiB while Validate runs the notebook", True),
    ("a kernel with torch holds ~250 MiB of what a working student uses", True),
    ("five during a cold start-up (~0.4 of its 2.8 CPU-seconds)", True),
    ("flat (grader_tests/judging.py); deepcopy is 20x slower", True),
    ("the student image (torch) is ~1 GB: pulled on every user node", True),
    ("Measured: a server with no kernel running has about 7.", True),
    ("importing it is slow, so it is deferred until a format check asks for it", False),
    ("a few milliseconds a sandbox, paid by every sandbox", False),
    ("two thirds of a sandbox's confinement CPU go to copying page tables", False),
    ("a body over 64 kB is refused from its length, unread", False),
    ("sys.modules: walking its ~3,000 names writes to each one's page", False),
    ("_VERDICTS_KEPT = 4096  # ~100 bytes each", False),
    ("cell_timeout: float = 60.0  # wall-clock seconds per cell (and per probe)", False),
    ("Idle kernels are stopped after 30 min, even with the tab open", False),
    ("the course's JupyterHub on this machine, no Docker", False),
    ("``jsonschema`` imports ``rfc3987_syntax`` (when the GPL ``rfc3987`` is absent, as here) to check", False),
    ("the heatmap panel could not be measured: two cells share a colour", False),
    ("a figure measured with matplotlib, then kept", False),
    ("a proxy that closes a connection idle for 5 s", False),
    ("it asks every 3 s while the tab is open", False),
])
def test_the_measured_pattern_catches_what_it_is_for(line, is_measured):
    assert bool(MEASURED.search(line)) is is_measured


def test_comments_and_docstrings_are_what_is_read_for_figures():
    source = ('x = 1  # 4 ms a sandbox\n\n\ndef f():\n    """Fast.\n\n    ~0.9 CPU-s here."""\n'
              '    log("4 ms a sandbox")\n')
    assert [line for line, text in _python_notes(source) if MEASURED.search(text)] == [1, 7]
    assert [line for line, _ in _hash_comments("run() {\n  echo $#  # 2 ms each\n}\n# setup\n")] == [2, 4]
