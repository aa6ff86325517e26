"""The hub's launcher runs nbgrader's steps of a course in one process each (course/nbgrader_steps.py):
what they write is what the ``nbgrader`` commands write."""

import sqlite3
import subprocess
import sys

import pytest

from attention_platform.course.directory import copy_course, source_assignments
from attention_platform.venv import environment

pytestmark = pytest.mark.slow


def steps(course, *args, exchange):
    return subprocess.run([sys.executable, "-m", "attention_platform.course.nbgrader_steps", *args], cwd=course,
                          env=environment(NBGRADER_EXCHANGE_ROOT=str(exchange)), capture_output=True, text=True)


def rows(course, query):
    with sqlite3.connect(course / "gradebook.db") as db:
        return sorted(db.execute(query).fetchall())


def test_every_assignment_generated_and_released_in_one_process_as_by_the_nbgrader_commands(tmp_path,
                                                                                            released_course):
    course, exchange = copy_course(tmp_path / "course"), tmp_path / "exchange"
    assignments = source_assignments(course)
    assert len(assignments) > 1
    roster = tmp_path / "roster.csv"
    roster.write_text("id,first_name,last_name,email\nstudent1,Demo,Student1,\nstudent2,Ada,,ada@example.org\n")

    generated = steps(course, "generate", "--roster", str(roster), *assignments, exchange=exchange)
    assert generated.returncode == 0, generated.stderr[-3000:]
    for assignment in assignments:
        by_command = released_course(tmp_path / f"by-command-{assignment}", assignment)
        ours = sorted(p.relative_to(course) for p in (course / "release" / assignment).rglob("*"))
        assert ours == sorted(p.relative_to(by_command) for p in (by_command / "release" / assignment).rglob("*"))
        for path in ours:
            if (course / path).is_file():
                assert (course / path).read_bytes() == (by_command / path).read_bytes(), path
        cells = "select notebook.name, base_cell.name, grade_cells.max_score from grade_cells join base_cell " \
                "using (id) join notebook on base_cell.notebook_id = notebook.id join assignment " \
                f"on notebook.assignment_id = assignment.id where assignment.name = '{assignment}'"
        assert rows(course, cells) == rows(by_command, cells) != []
    assert rows(course, "select id, first_name, last_name, email from student") == [
        ("student1", "Demo", "Student1", None), ("student2", "Ada", None, "ada@example.org")]

    released = steps(course, "release", *assignments, exchange=exchange)
    assert released.returncode == 0, released.stderr[-3000:]
    outbound = next(exchange.glob("*/outbound"))
    assert sorted(p.name for p in outbound.iterdir()) == assignments
    for assignment in assignments:
        assert sorted(p.name for p in (outbound / assignment).iterdir()) == \
            sorted(p.name for p in (course / "release" / assignment).iterdir())


def test_a_step_that_fails_stops_the_rest_and_says_why(tmp_path):
    course, exchange = copy_course(tmp_path / "course"), tmp_path / "exchange"
    first = source_assignments(course)[0]
    failed = steps(course, "generate", "no_such_assignment", first, exchange=exchange)
    assert failed.returncode == 1
    assert "generate_assignment no_such_assignment failed" in failed.stderr
    assert not (course / "release" / first).exists()


def test_the_steps_read_the_configuration_the_nbgrader_command_reads(tmp_path):
    """The Jupyter config path's nbgrader_config.py (the hub's grader: the per-student exchange) and the
    course directory's."""
    from hub_helpers import REPO

    course = copy_course(tmp_path / "course")
    read = subprocess.run(
        [sys.executable, "-c", "from attention_platform.course.nbgrader_steps import course_api; api = course_api(); "
                               "print(api.exchange.release_assignment.__name__, api.coursedir.root)"],
        cwd=course, env=environment(JUPYTER_CONFIG_PATH=str(REPO / "jupyter_config" / "grader")),
        capture_output=True, text=True)
    assert read.stdout.split() == ["PerStudentReleaseAssignment", str(course)], read.stderr[-3000:]
