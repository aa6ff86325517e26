"""``attention-course new-assignment`` and ``prove-checks``: writing an assignment and proving its checks."""

from __future__ import annotations

from pathlib import Path


def register(commands) -> None:
    prove = commands.add_parser(
        "prove-checks", help="prove an assignment's hidden checks against the instructor's solution, its wheats "
                             "and chaffs, and the release (every assignment when none is named)")
    prove.add_argument("assignments", nargs="*", metavar="ASSIGNMENT", help="assignment names (default: all)")
    prove.add_argument("--seed", type=int, action="append", dest="seeds", metavar="SEED",
                       help="a seed to prove the checks at besides each check's default seed (repeatable; default: "
                            "three fresh seeds, printed so a failing run can be repeated)")
    prove.add_argument("--course", type=Path, default=None,
                       help="the course directory whose grader_tests/ and source/ to prove (default: the course "
                            "whose grader_tests Python imports, such as the current directory's)")
    prove.set_defaults(run=_prove)

    scaffold = commands.add_parser(
        "new-assignment", help="scaffold a new assignment: its source notebook and its hidden checks' package with "
                               "one example check, a wheat and a chaff")
    scaffold.add_argument("assignment", metavar="ASSIGNMENT", help="the new assignment's name (a Python identifier)")
    scaffold.add_argument("--course", type=Path, default=Path.cwd(),
                          help="the course directory (default: the current directory)")
    scaffold.set_defaults(run=_scaffold)


def _prove(args) -> int:
    from attention_platform.authoring.prove import prove_checks

    return prove_checks(args.assignments, args.seeds, args.course)


def _scaffold(args) -> int:
    from attention_platform.authoring.scaffold import new_assignment

    return new_assignment(args.assignment, args.course)
