"""The benchmarks and the load test work on any assignment: the class they generate is the
assignment's released notebooks with its own wheats and chaffs typed in (course/samples.py)."""

import nbformat
import pytest

from attention_platform.course.notebooks import COURSE_ROOT
from attention_platform.course.samples import proofs_of
from attention_platform.benchmarks import grading as bench
from attention_platform.benchmarks.loadtest import Homework
from grader_tests import registry
from grader_tests.proofs import run_cells

ASSIGNMENTS = sorted(registry.ASSIGNMENTS)


@pytest.mark.parametrize("name", ASSIGNMENTS)
def test_a_load_test_student_hands_in_the_first_notebook_with_a_proof_typed_in(name):
    work = Homework.of(name)
    found = registry.assignment(name)
    assert work.notebook == found.notebooks[0]
    release = nbformat.read(COURSE_ROOT / "release" / work.path, as_version=4)
    wheats, chaffs = proofs_of(found, work.notebook)
    assert list(work.answers) == wheats + chaffs
    for i, proof in enumerate(work.answers[:3]):
        typed = work.answered(release, i)
        assert nbformat.writes(typed) != nbformat.writes(release), proof.name
        assert not run_cells(typed)["__errors__"], proof.name  # every cell a student runs runs


@pytest.mark.slow  # nbgrader generate_assignment
@pytest.mark.parametrize("name", ASSIGNMENTS)
def test_the_benchmarks_generated_class_is_the_assignments_proofs(tmp_path, name):
    copies, roster, notebook = bench.prepare(tmp_path, 6, name, log=lambda *_: None)
    assert notebook == registry.assignment(name).notebooks[0]
    wheats, chaffs = proofs_of(registry.assignment(name), notebook)
    assert {p for p in roster.values() if p} <= set(wheats + chaffs) and None in roster.values()
    release = nbformat.read(tmp_path / "course" / "release" / name / f"{notebook}.ipynb", as_version=4)
    for course in copies.values():
        for student, proof in roster.items():
            handed = nbformat.read(course / "submitted" / student / name / f"{notebook}.ipynb", as_version=4)
            assert (nbformat.writes(handed) == nbformat.writes(release)) == (proof is None), student
