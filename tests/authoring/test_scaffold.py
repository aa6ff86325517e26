"""``attention-course new-assignment``: a scaffolded assignment is proved, released and graded as it
is, in a scratch copy of the course whose grader_tests is the one every command imports; a broken
check or a chaff that is no mistake makes ``prove-checks`` fail naming the proof; a bad name is
refused before anything is written."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

import nbformat
import pytest

from attention_platform.venv import environment, program
from grader_tests.proofs import solved

REPOSITORY = Path(__file__).resolve().parents[2]
NEW = "row_shares"  # the scaffolded assignment


def _copy_course(dest: Path) -> Path:
    for name in ("source", "grader_tests"):
        shutil.copytree(REPOSITORY / name, dest / name,
                        ignore=shutil.ignore_patterns("__pycache__", ".ipynb_checkpoints"))
    shutil.copy2(REPOSITORY / "nbgrader_config.py", dest / "nbgrader_config.py")
    return dest


def _in_course(course: Path, *command: str, timeout: float = 600) -> subprocess.CompletedProcess:
    """``command`` run in ``course`` with its grader_tests first on the import path."""
    env = environment(PYTHONPATH=os.pathsep.join(filter(None, [str(course), os.environ.get("PYTHONPATH")])))
    return subprocess.run(command, cwd=course, env=env, capture_output=True, text=True, timeout=timeout)


def _course_command(course: Path, *args: str) -> subprocess.CompletedProcess:
    return _in_course(course, sys.executable, "-m", "attention_platform.cli", *args)


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    course = _copy_course(tmp_path_factory.mktemp("course"))
    made = _course_command(course, "new-assignment", NEW)
    assert made.returncode == 0, made.stderr
    return course


def test_the_scaffold_writes_the_notebook_and_the_checks_package(course):
    assert (course / "source" / NEW / f"{NEW}.ipynb").is_file()
    for name in ("__init__.py", "catalogue.py", "probes.py", "judges.py", "answers.py", "tests/test_proofs.py"):
        assert (course / "grader_tests" / NEW / name).is_file(), name
    nb = nbformat.read(course / "source" / NEW / f"{NEW}.ipynb", as_version=4)
    nbformat.validate(nb)
    check_cell = nb.cells[-1]
    assert check_cell.metadata.nbgrader["grade_id"] == f"check_{NEW}_example"
    assert f'grade("{NEW}_example", globals())' in check_cell.source
    assert any("### BEGIN SOLUTION" in cell.source for cell in nb.cells if cell.cell_type == "code")


def test_its_graded_cells_are_those_its_catalogue_writes(course):
    drift = _in_course(course, sys.executable, "-c", "from pathlib import Path; "
                       "from attention_platform.course.graded_cells import drifted; "
                       f"print(drifted({NEW!r}, Path('.')))")
    assert drift.returncode == 0, drift.stderr
    assert drift.stdout.strip() == "[]"


@pytest.mark.slow  # the prove-checks command, in a process of its own
def test_the_scaffolded_assignment_is_proved(course):
    proved = _course_command(course, "prove-checks", NEW, "--seed", "5")
    assert proved.returncode == 0, proved.stdout + proved.stderr
    for proof in ("instructor's solution", "divided_by_unsqueezed_sum", "normalised_over_columns", "release"):
        assert proof in proved.stdout


@pytest.mark.slow  # pytest, then the prove-checks command, in processes of their own
def test_its_own_test_runs_the_proofs(course):
    tested = _in_course(course, sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                        f"grader_tests/{NEW}/tests")
    assert tested.returncode == 0, tested.stdout + tested.stderr


@pytest.mark.slow  # the prove-checks command, in a process of its own, once per broken proof
@pytest.mark.parametrize("file, old, new, proof, why", [
    # A judge that expects columns to sum to 1: the instructor's own answer fails, with the check's words.
    ("judges.py", "judge_value(rows, x / x.sum(dim=-1, keepdim=True)",
     "judge_value(rows, x / x.sum(dim=0, keepdim=True)", "instructor's solution",
     "has the right shape but not the right values"),
    # A chaff that is the right answer: its target passes it.
    ("answers.py", '"return x / x.sum(dim=0, keepdim=True)"', '"return x / x.sum(dim=1, keepdim=True)"',
     "normalised_over_columns", f"{NEW}_example passed this wrong answer"),
])
def test_a_broken_proof_fails_the_command_naming_it(course, file, old, new, proof, why):
    path = course / "grader_tests" / NEW / file
    kept = path.read_text()
    assert old in kept
    path.write_text(kept.replace(old, new))
    try:
        proved = _course_command(course, "prove-checks", NEW, "--seed", "5")
    finally:
        path.write_text(kept)
    assert proved.returncode == 1, proved.stdout + proved.stderr
    failure = next(line for line in proved.stderr.splitlines() if line.startswith(f"- {NEW}/{NEW}: {proof}:"))
    assert why in failure


def test_an_unknown_assignment_is_refused_with_the_known_ones(course):
    proved = _course_command(course, "prove-checks", "week_nine")
    assert proved.returncode == 2
    assert "'week_nine'" in proved.stderr and NEW in proved.stderr


@pytest.mark.parametrize("name, why", [
    ("2nd_week", "is not a usable assignment name"),
    ("Layer-Norm", "is not a usable assignment name"),
    ("class", "is not a usable assignment name"),
    ("", "is not a usable assignment name"),
    ("../escape", "is not a usable assignment name"),
    (NEW, "exists already"),
    ("catalogue", "exists already"),  # a module of grader_tests
    ("json", "is the name of a Python module"),
    ("torch", "is the name of a Python module"),
])
def test_a_bad_name_is_refused_and_nothing_is_written(course, capsys, name, why):
    from attention_platform.cli import main

    before = sorted(str(path) for path in course.rglob("*") if "__pycache__" not in path.parts)
    assert main(["new-assignment", name, "--course", str(course)]) == 2
    assert why in capsys.readouterr().err
    assert sorted(str(path) for path in course.rglob("*") if "__pycache__" not in path.parts) == before


def test_a_folder_that_is_no_course_is_refused(tmp_path, capsys):
    from attention_platform.cli import main

    assert main(["new-assignment", "fresh", "--course", str(tmp_path)]) == 2
    assert "no nbgrader course" in capsys.readouterr().err
    assert not any(tmp_path.iterdir())


@pytest.mark.slow
@pytest.mark.root  # autograde grades in real sandboxes
def test_the_solved_release_gets_full_marks_from_nbgrader(course):
    released = _in_course(course, program("nbgrader"), "generate_assignment", NEW, "--force")
    assert released.returncode == 0, released.stdout + released.stderr
    release = nbformat.read(course / "release" / NEW / f"{NEW}.ipynb", as_version=4)
    source = nbformat.read(course / "source" / NEW / f"{NEW}.ipynb", as_version=4)
    folder = course / "submitted" / "ada" / NEW
    folder.mkdir(parents=True)
    nbformat.write(solved(release, source), folder / f"{NEW}.ipynb")
    (folder / "timestamp.txt").write_text(datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f %Z"))
    graded = _in_course(course, program("nbgrader"), "autograde", NEW, "--force")
    assert graded.returncode == 0, graded.stdout + graded.stderr

    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gradebook:
        submission = gradebook.find_submission_notebook(NEW, NEW, "ada")
        scores = {grade.name: (grade.score, grade.max_score) for grade in submission.grades}
    assert scores[f"check_{NEW}_example"] == (1.0, 1.0)
    assert scores["rows_answer"][1] == 1.0  # the written answer waits for a TA
