"""release/ is exactly what nbgrader generates from source/."""

import json
from pathlib import Path

import pytest

from attention_platform.course.directory import copy_course, nbgrader
from attention_platform.course.notebooks import COURSE_ROOT
from grader_tests import registry
from grader_tests.self_attention.answers import ASSIGNMENT, NOTEBOOK, NOTEBOOKS


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(registry.ASSIGNMENTS))
def test_committed_release_matches_a_fresh_generation(tmp_path: Path, name):
    course = copy_course(tmp_path / "course")
    result = nbgrader(course, "generate_assignment", name, "--force")
    assert result.returncode == 0, result.stderr[-2000:]
    fresh_files = sorted(p.relative_to(course / "release") for p in (course / "release" / name).rglob("*") if p.is_file())
    committed_files = sorted(p.relative_to(COURSE_ROOT / "release") for p in (COURSE_ROOT / "release" / name).rglob("*")
                             if p.is_file())
    assert fresh_files == committed_files, "release/ is stale: run `make release` and commit it"
    for path in fresh_files:
        fresh, committed = (course / "release" / path).read_bytes(), (COURSE_ROOT / "release" / path).read_bytes()
        if path.suffix == ".ipynb":
            fresh, committed = json.loads(fresh), json.loads(committed)
        assert committed == fresh, f"release/ is stale ({path}): run `make release` and commit it"


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
