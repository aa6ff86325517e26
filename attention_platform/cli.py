"""``attention-course``: the platform's command line."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

# Before nbformat or nbgrader import jsonschema: see grading/commands.py (1.1 CPU-s per command).
sys.modules.setdefault("rfc3987_syntax", None)

from attention_platform.course.notebooks import COURSE_ROOT  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="attention-course", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)

    demo = commands.add_parser("demo", help="grade the bundled sample class end to end and print the grade table")
    demo.add_argument("--workdir", type=Path, default=COURSE_ROOT / "build" / "demo",
                      help="scratch course directory (replaced on every run)")

    hub = commands.add_parser("hub", help="start the course's JupyterHub on 127.0.0.1 (no Docker); Ctrl-C stops it")
    hub.add_argument("--state-dir", type=Path, default=COURSE_ROOT / "build" / "hub",
                     help="hub database, exchange, course copy and demo homes (kept between runs)")
    hub.add_argument("--port", type=int, default=8000, help="port of the hub's proxy on 127.0.0.1")
    hub.add_argument("--formgrader-port", type=int, default=9999, help="port of the formgrader service on 127.0.0.1")
    hub.add_argument("--course-root", type=Path, default=COURSE_ROOT,
                     help="course checkout whose source/ and nbgrader_config.py the hub serves (default: this one)")
    hub.add_argument("--no-release", action="store_true",
                     help="generate the assignment but let the instructor release it from the formgrader")

    from attention_platform.hub.loadtest import add_command as add_load_test  # the deadline rush on the native hub (issue #7)

    add_load_test(commands)

    from attention_platform.hub.validate_service import add_command as add_validate_service  # Validate in warm sandboxes

    add_validate_service(commands)

    from attention_platform.reporting.commands import add_report_commands  # misconception report and grade exports (issue #6)

    add_report_commands(commands)

    from attention_platform.grading.commands import COMMANDS as GRADING_COMMANDS, add_grading_commands  # sandboxed grading (issue #4)

    add_grading_commands(commands)

    args = parser.parse_args(argv)
    if args.command in GRADING_COMMANDS:
        from attention_platform.grading.commands import run_grading_command

        return run_grading_command(args)
    if args.command in ("report", "export-checks", "export-canvas", "feedback"):
        from attention_platform.reporting.commands import run_report_command

        return run_report_command(args)
    if args.command == "validate-service":
        from attention_platform.hub.validate_service import main as validate_service

        return validate_service(args)
    if args.command == "load-test":
        from attention_platform.hub.loadtest import main as load_test

        return load_test(args)
    if args.command == "demo":
        from attention_platform.course.demo import run_demo

        run_demo(args.workdir)
    elif args.command == "hub":
        from attention_platform.hub.native import run

        return run(args.state_dir, port=args.port, formgrader_port=args.formgrader_port, release=not args.no_release,
                   course_root=args.course_root)
    return 0


if __name__ == "__main__":
    sys.exit(main())
