"""``attention-course hub`` (the course's JupyterHub on this machine) and ``validate-service`` (the
students' Validate in warm sandboxes, which the hub starts)."""

from __future__ import annotations

import os
from pathlib import Path

from attention_platform.course.notebooks import COURSE_ROOT


def register(commands) -> None:
    hub = commands.add_parser("hub", help="start the course's JupyterHub on 127.0.0.1 (no Docker); Ctrl-C stops it")
    hub.add_argument("--state-dir", type=Path, default=COURSE_ROOT / "build" / "hub",
                     help="hub database, exchange, course copy and demo homes (kept between runs)")
    hub.add_argument("--port", type=int, default=8000, help="port of the hub's proxy on 127.0.0.1")
    hub.add_argument("--formgrader-port", type=int, default=9999, help="port of the formgrader service on 127.0.0.1")
    hub.add_argument("--course-root", type=Path, default=COURSE_ROOT,
                     help="course checkout whose source/ and nbgrader_config.py the hub serves (default: this one)")
    hub.add_argument("--no-release", action="store_true",
                     help="generate the assignment but let the instructor release it from the formgrader")
    hub.set_defaults(run=_hub)

    validate = commands.add_parser("validate-service",
                                   help="run students' Validate in warm sandboxes (as the grader account)")
    validate.add_argument("--course", required=True, help="the course directory (its nbgrader_config.py sets the limits)")
    validate.add_argument("--socket", required=True, help="Unix socket hub users' servers connect to")
    validate.add_argument("--uid-min", type=int, default=20000, help="lowest uid served (the hub's users)")
    validate.add_argument("--uid-max", type=int, default=29999, help="highest uid served")
    validate.add_argument("--workers", type=int, default=os.cpu_count() or 2,
                          help="Validates running at once (default: the number of cores)")
    validate.set_defaults(run=_validate_service)


def _hub(args) -> int:
    from attention_platform.hub.native import run

    return run(args.state_dir, port=args.port, formgrader_port=args.formgrader_port, release=not args.no_release,
               course_root=args.course_root)


def _validate_service(args) -> int:
    from attention_platform.grading.validate_service import main

    return main(args)
