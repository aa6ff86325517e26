"""``attention-course variants``: each student's own numbers in an assignment's by-hand part.

* ``variants show [ASSIGNMENT]``: which assignments give variants and whether they are on;
* ``variants on|off ASSIGNMENT``: switch (also in the formgrader's policy form), then write or remove
  every student's own copy in the exchange;
* ``variants write ASSIGNMENT``: write every student's own copy again (students whose server first
  started after the release);
* ``variants regenerate [--force]``: a new course key, so every variant changes (between terms);
  refused while a submission of an assignment with variants exists, unless forced.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from attention_platform.course.assignments import assignment_name
from attention_platform.course.notebooks import COURSE_ROOT


def register(commands) -> None:
    top = commands.add_parser("variants", help="per-student numbers in the by-hand parts: switch, write, regenerate")
    top.set_defaults(run=_run)
    actions = top.add_subparsers(dest="action", required=True, metavar="ACTION")
    for name, text in (("show", "which assignments give variants, and whether they are on"),
                       ("on", "give every student their own numbers in ASSIGNMENT"),
                       ("off", "everyone works with the release's numbers in ASSIGNMENT"),
                       ("write", "write every student's own copy of ASSIGNMENT into the exchange again"),
                       ("regenerate", "a new course key: every student's numbers change")):
        action = actions.add_parser(name, help=text)
        if name in ("on", "off", "write"):
            action.add_argument("assignment", type=assignment_name, help="the assignment (its nbgrader id)")
        if name == "regenerate":
            action.add_argument("--force", action="store_true",
                                help="even though submissions exist: their variant ids and hidden checks change "
                                     "with the key, so a regrade grades them against numbers they never saw")
        action.add_argument("--course", type=Path, default=COURSE_ROOT, help="course directory (default: this checkout)")
        action.set_defaults(run=_run)


def _run(args: argparse.Namespace) -> int:
    from attention_platform.course import variants
    from attention_platform.course.directory import NotACourse, require_course

    try:
        course = require_course(args.course)
        if args.action == "show":
            switches = variants.read_switches(course)
            for name in _assignments():
                state = ("on" if switches.get(name) else "off") if variants.offered(name) else "none (no by-hand part)"
                print(f"{name}: {state}")
            return 0
        if args.action == "regenerate":
            submitted = submissions_with_variants(course)
            if submitted and not args.force:
                print(f"attention-course variants regenerate: refused: {len(submitted)} submissions of assignments "
                      f"with variants exist ({', '.join(submitted[:5])}). A new key changes every student's numbers; "
                      "their hidden checks would then judge numbers they never saw. Regenerate between terms, "
                      "or pass --force.", file=sys.stderr)
                return 1
            variants.regenerate(course)
            print("A new key: every student's numbers have changed. Write their copies again with "
                  "`attention-course variants write ASSIGNMENT` for each assignment whose variants are on.")
            return 0
        if args.action in ("on", "off"):
            variants.switch(course, args.assignment, args.action == "on")
        written = write_copies(course, args.assignment)
        copies = ("each student's own copy is written when it is released" if written is None
                  else f"own copies written for {written} students")
        print(f"{args.assignment}: variants {'on' if variants.is_on(course, args.assignment) else 'off'}; {copies}")
        return 0
    except (NotACourse, variants.VariantsError, OSError) as exc:
        print(f"attention-course variants {args.action}: {exc}", file=sys.stderr)
        return 1


def _assignments() -> list[str]:
    from grader_tests.registry import ASSIGNMENTS

    return list(ASSIGNMENTS)


def submissions_with_variants(course: Path) -> list[str]:
    """``student/assignment`` of every collected submission of an assignment whose variants are on."""
    from attention_platform.course import variants

    submitted = course / "submitted"
    on = [name for name in _assignments() if variants.is_on(course, name)]
    return sorted(f"{student.name}/{name}" for student in (submitted.iterdir() if submitted.is_dir() else [])
                  for name in on if (student / name).is_dir())


def write_copies(course: Path, assignment: str) -> int | None:
    """Every student's own copy of ``assignment`` in the course's exchange (removed when variants are off);
    None when the assignment is not released (its release writes them)."""
    import logging

    from nbgrader.coursedir import CourseDirectory

    from attention_platform.exchange.personal_release import issue
    from attention_platform.grading.batch import load_course_config
    from attention_platform.settings import settings

    coursedir = CourseDirectory(config=load_course_config(course), root=str(course))
    root = str(settings().nbgrader_exchange_root)
    if not os.path.isdir(os.path.join(root, coursedir.course_id, "outbound", assignment)):
        return None
    release = coursedir.format_path(coursedir.release_directory, ".", assignment)
    if not os.path.isdir(release):
        raise FileNotFoundError(f"{assignment} is in the exchange but has no release in {release}: generate it again")
    return issue(root, coursedir.course_id, course, release, assignment, logging.getLogger("attention-course"))
