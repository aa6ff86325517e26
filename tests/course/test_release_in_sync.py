"""release/ is exactly what nbgrader generates from source/."""

import json
from pathlib import Path

import pytest

from attention_platform.course.notebooks import COURSE_ROOT
from grader_tests.self_attention.answers import ASSIGNMENT, NOTEBOOK, NOTEBOOKS


# Every assignment of the course: a folder of source/.
ASSIGNMENTS = sorted(path.name for path in (COURSE_ROOT / "source").iterdir() if path.is_dir())


def _files(folder: Path) -> dict[str, Path]:
    return {str(path.relative_to(folder)): path for path in sorted(folder.rglob("*")) if path.is_file()}


@pytest.mark.slow
@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_committed_release_matches_a_fresh_generation(tmp_path: Path, released_course, assignment: str):
    course = released_course(tmp_path / "course", assignment)
    fresh, committed = _files(course / "release" / assignment), _files(COURSE_ROOT / "release" / assignment)
    assert sorted(committed) == sorted(fresh), f"release/{assignment} is stale: run `make release` and commit it"
    for name, path in fresh.items():
        if name.endswith(".ipynb"):
            same = json.loads(committed[name].read_text()) == json.loads(path.read_text())
        else:
            same = committed[name].read_bytes() == path.read_bytes()
        assert same, f"release/{assignment}/{name} is stale: run `make release` and commit it"


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_no_release_holds_a_solution_rubric_or_hidden_check(assignment: str):
    for name, path in _files(COURSE_ROOT / "release" / assignment).items():
        if name.endswith(".ipynb"):
            text = path.read_text()
            for secret in ("BEGIN SOLUTION", "BEGIN HIDDEN TESTS", "grader_tests", "MARK SCHEME"):
                assert secret not in text, f"release/{assignment}/{name} holds {secret!r}"


def test_release_contains_no_solution_or_hidden_check():
    text = (COURSE_ROOT / "release" / ASSIGNMENT / NOTEBOOK).read_text()
    for secret in ("BEGIN SOLUTION", "BEGIN HIDDEN TESTS", "grader_tests", "masked_fill(self.causal_mask"):
        assert secret not in text
    assert not (COURSE_ROOT / "release" / ASSIGNMENT / "grader_tests").exists()


@pytest.mark.parametrize("notebook", NOTEBOOKS[1:])
def test_part_releases_contain_no_solution_rubric_or_hidden_check(notebook):
    text = (COURSE_ROOT / "release" / ASSIGNMENT / notebook).read_text()
    for secret in ("BEGIN SOLUTION", "BEGIN HIDDEN TESTS", "grader_tests", "MARK SCHEME", "masked_fill(self.causal_mask",
                   "1 point —", "sorted(set(text))", "inputs @ inputs.T\n", "math.sqrt(self.head_size)"):
        assert secret not in text, secret
