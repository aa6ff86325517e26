"""release/ is exactly what nbgrader generates from source/."""

import json
from pathlib import Path

import pytest

from attention_platform.course.directory import copy_course, nbgrader
from attention_platform.course.notebooks import ASSIGNMENT, COURSE_ROOT, NOTEBOOK, NOTEBOOKS


@pytest.mark.slow
def test_committed_release_matches_a_fresh_generation(tmp_path: Path):
    course = copy_course(tmp_path / "course")
    result = nbgrader(course, "generate_assignment", ASSIGNMENT, "--force")
    assert result.returncode == 0, result.stderr[-2000:]
    for notebook in NOTEBOOKS:
        fresh = json.loads((course / "release" / ASSIGNMENT / notebook).read_text())
        committed = json.loads((COURSE_ROOT / "release" / ASSIGNMENT / notebook).read_text())
        assert committed == fresh, f"release/ is stale ({notebook}): run `make release` and commit it"
    data = "data/corpus.txt"
    assert (course / "release" / ASSIGNMENT / data).read_bytes() == (COURSE_ROOT / "release" / ASSIGNMENT / data).read_bytes()


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
