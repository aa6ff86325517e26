"""Sub-commands of ``attention-course`` for sandboxed grading.

* ``autograde-batch ASSIGNMENT [--jobs N]``: grade every submission in parallel
  into the standard gradebook, with a progress bar and a summary table (its benchmarks are
  :mod:`attention_platform.benchmarks.commands`').

The assignment is required where a TA grades (as for nbgrader's own commands: a course has several, and
grading the wrong one is worse than being asked).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from attention_platform.course.assignments import assignment_name
from attention_platform.course.notebooks import COURSE_ROOT


def register(commands) -> None:
    batch = commands.add_parser("autograde-batch", help="autograde a whole class in sandboxes, in parallel, "
                                "into the standard nbgrader gradebook")
    batch.add_argument("assignment", type=assignment_name, help="the assignment to grade (its nbgrader id)")
    batch.add_argument("--jobs", "-j", type=int, default=None, help="submissions graded at once (default: cores + 1)")
    batch.add_argument("--course", type=Path, default=COURSE_ROOT, help="course directory (default: this checkout)")
    batch.add_argument("--student", action="append", default=None, help="only this student (repeatable)")
    batch.add_argument("--no-progress", action="store_true", help="no progress bar")
    batch.set_defaults(run=_autograde_batch)


def _autograde_batch(args: argparse.Namespace) -> int:
    from attention_platform import start_up_gc, third_party_patches
    from attention_platform.course.directory import NotACourse, require_course
    from attention_platform.grading.sandbox import first_use
    from attention_platform.grading.sandbox.client import SandboxUnavailable, get_zygote

    start_up_gc.pause()  # until the first notebook is finished (_BatchRun._finish)
    third_party_patches.defer_iri_syntax()  # before nbgrader imports jsonschema, for callers not from the CLI
    try:
        require_course(args.course)  # a mistyped --course is named at once, not after the worker's start
        # The warm worker imports torch (and pays the first uses the notebooks need) while this
        # process imports nbgrader and the course's configuration.
        get_zygote(first_use.needed_by_assignment(args.course, args.assignment))
    except (NotACourse, SandboxUnavailable) as exc:  # e.g. a TA's shell without the broker's socket
        return _refused(exc)
    from attention_platform.grading.batch import BatchError, autograde_batch

    try:
        outcomes = autograde_batch(args.course, args.assignment, jobs=args.jobs, students=args.student,
                                   progress=not args.no_progress)
    except BatchError as exc:
        return _refused(exc)
    return 0 if all(not o.status.startswith("error") for o in outcomes) else 1


def _refused(reason: Exception) -> int:
    """Nothing was graded: the reason in one line (it says what to do), status 1."""
    print(f"attention-course autograde-batch: {reason}", file=sys.stderr)
    return 1
