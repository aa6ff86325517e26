"""``attention-course demo``: a sample class of every assignment graded end to end."""

from __future__ import annotations

from pathlib import Path

from attention_platform.course.assignments import assignment_name
from attention_platform.course.notebooks import COURSE_ROOT


def register(commands) -> None:
    demo = commands.add_parser("demo", help="grade a sample class of every assignment end to end and print a grade "
                                            "table per assignment")
    demo.add_argument("--workdir", type=Path, default=COURSE_ROOT / "build" / "demo",
                      help="scratch course directory (replaced on every run)")
    demo.add_argument("--assignment", type=assignment_name, action="append", default=None,
                      help="only this assignment (repeatable; default: every one)")
    demo.set_defaults(run=_demo)


def _demo(args) -> int:
    from attention_platform.course.demo import run_demo

    run_demo(args.workdir, args.assignment)
    return 0
