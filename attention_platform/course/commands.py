"""``attention-course demo``: the bundled sample class graded end to end."""

from __future__ import annotations

from pathlib import Path

from attention_platform.course.notebooks import COURSE_ROOT


def register(commands) -> None:
    demo = commands.add_parser("demo", help="grade the bundled sample class end to end and print the grade table")
    demo.add_argument("--workdir", type=Path, default=COURSE_ROOT / "build" / "demo",
                      help="scratch course directory (replaced on every run)")
    demo.set_defaults(run=_demo)


def _demo(args) -> int:
    from attention_platform.course.demo import run_demo

    run_demo(args.workdir)
    return 0
