"""``attention-course feedback-on-submit`` (the grader account's process that grades on submit) and
``attempts`` (every attempt as CSV)."""

from __future__ import annotations

from pathlib import Path


def register(commands) -> None:
    fos = commands.add_parser(
        "feedback-on-submit",
        help="the course's feedback-on-submit grader (run as the grader account beside the formgrader): grades "
             "each new submission as the assignment's policy says and tells the student")
    fos.add_argument("--course", type=Path, default=Path.cwd(),
                     help="the nbgrader course directory (its nbgrader_config.py holds the policies)")
    fos.add_argument("--exchange", type=Path, default=None,
                     help="the exchange root holding <course id>/inbound and /feedback "
                          "(default: NBGRADER_EXCHANGE_ROOT)")
    fos.set_defaults(run=_serve)

    attempts = commands.add_parser(
        "attempts", help="every attempt graded on submit (feedback on submit), as CSV: received, state, points, "
                         "whether it counts")
    attempts.add_argument("--course", type=Path, default=Path.cwd(), help="the nbgrader course directory")
    attempts.add_argument("--assignment", default=None, help="only this assignment")
    attempts.set_defaults(run=_attempts)


def _serve(args) -> int:
    import sys

    from attention_platform.course.directory import NotACourse, require_course

    from attention_platform.settings import settings

    exchange = args.exchange or str(settings().nbgrader_exchange_root)
    try:
        course = require_course(args.course)
    except NotACourse as exc:
        print(f"attention-course feedback-on-submit: {exc}", file=sys.stderr)
        return 1
    from attention_platform.feedback_on_submit.service import main

    return main(course, Path(exchange))


def _attempts(args) -> int:
    import sys

    from nbgrader.coursedir import CourseDirectory

    from attention_platform.course.directory import NotACourse, require_course
    from attention_platform.attempts.ledger import export_csv
    from attention_platform.attempts.policy import load_config

    try:
        course = require_course(args.course)
    except NotACourse as exc:
        print(f"attention-course attempts: {exc}", file=sys.stderr)
        return 1
    coursedir = CourseDirectory(config=load_config(course), root=str(course))
    export_csv(coursedir.db_url, sys.stdout, args.assignment)
    return 0
