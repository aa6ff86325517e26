"""``attention-course``: the platform's command line."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .notebooks import COURSE_ROOT


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="attention-course", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)

    demo = commands.add_parser("demo", help="grade the bundled sample class end to end and print the grade table")
    demo.add_argument("--workdir", type=Path, default=COURSE_ROOT / "build" / "demo",
                      help="scratch course directory (replaced on every run)")

    args = parser.parse_args(argv)
    if args.command == "demo":
        from .demo import run_demo

        run_demo(args.workdir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
