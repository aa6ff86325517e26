"""Several nbgrader steps of a course in one process: the hub's launcher generates every assignment and
imports the roster, later releases every assignment, each in one process of the grader's.

Each ``nbgrader`` command spends most of its time importing nbgrader and loading the course's
configuration; run in one process, the steps pay that once. The configuration is read as the
``nbgrader`` command reads it (the Jupyter config path, then the course directory's
``nbgrader_config.py``) and each step is nbgrader's own, through its API.

``python -m attention_platform.course.nbgrader_steps generate [--roster CSV] ASSIGNMENT...`` and
``... release ASSIGNMENT...``, run in the course directory; the first step that fails stops the rest
with its log and status 1.
"""

from __future__ import annotations

import argparse
import csv
import sys
from collections.abc import Iterable
from pathlib import Path

# Columns of a student in nbgrader's gradebook that a roster may set (``nbgrader db student import``'s).
ROSTER_COLUMNS = ("first_name", "last_name", "email", "lms_user_id")


class StepFailed(RuntimeError):
    """An nbgrader step failed; the message holds its log."""


def course_api():
    """nbgrader's API on the course directory of the working directory, configured as the ``nbgrader``
    command would be."""
    from nbgrader.apps import NbGraderAPI
    from nbgrader.apps.baseapp import NbGrader

    app = NbGrader()
    app.initialize([])
    return NbGraderAPI(coursedir=app.coursedir, parent=app)


def _checked(step: str, result: dict) -> None:
    if not result.get("success"):
        raise StepFailed(f"nbgrader {step} failed:\n{result.get('log', '')}{result.get('error', '')}")


def generate(api, assignments: Iterable[str], roster: Path | None = None) -> None:
    """``nbgrader generate_assignment --force`` of each assignment, then ``nbgrader db student import``
    of ``roster`` (a CSV with an ``id`` column)."""
    for assignment in assignments:
        _checked(f"generate_assignment {assignment}", api.generate_assignment(assignment, force=True, create=True))
    if roster is not None:
        with open(roster, newline="") as rows, api.gradebook as gradebook:
            for row in csv.DictReader(rows):
                fields = {key: row.get(key) or None for key in ROSTER_COLUMNS if key in row}
                gradebook.update_or_create_student(row["id"], **fields)


def release(api, assignments: Iterable[str]) -> None:
    """``nbgrader release_assignment`` of each assignment."""
    for assignment in assignments:
        _checked(f"release_assignment {assignment}", api.release_assignment(assignment))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m attention_platform.course.nbgrader_steps")
    steps = parser.add_subparsers(dest="step", required=True)
    generating = steps.add_parser("generate", help="generate each assignment, then import the roster")
    generating.add_argument("--roster", type=Path, help="CSV of students (nbgrader db student import's format)")
    generating.add_argument("assignments", nargs="*")
    releasing = steps.add_parser("release", help="release each assignment")
    releasing.add_argument("assignments", nargs="*")
    args = parser.parse_args(argv)
    try:
        if args.step == "generate":
            generate(course_api(), args.assignments, args.roster)
        else:
            release(course_api(), args.assignments)
    except StepFailed as failure:
        print(failure, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
