"""The assignment a command works on, as its command line names it.

A name is checked against the course's hidden checks (``grader_tests.registry``) when the command line
is read, so a typo stops the command before it reads or writes anything, with the registry's message
naming the assignments there are (argparse's usage error, status 2). The registry is imported only
then: building the parser stays light. An account that may not read the hidden checks (a TA's own, where
they are the grader account's alone) gets the name as given: the command's own check of the course then
says in one line which file it may not read and whose account to use."""

from __future__ import annotations

import argparse


def assignment_name(name: str) -> str:
    """argparse ``type=``: ``name`` if the course has an assignment of that name."""
    try:
        from grader_tests.registry import UnknownAssignment, assignment
    except (ImportError, OSError):  # hidden from this account
        return name
    try:
        return assignment(name).name
    except UnknownAssignment as unknown:
        raise argparse.ArgumentTypeError(str(unknown)) from None


def first_assignment() -> str:
    """The default of the benchmarks and the load test: the first assignment in name order."""
    from grader_tests.registry import ASSIGNMENTS

    return next(iter(ASSIGNMENTS))


def add_assignment_option(parser: argparse.ArgumentParser) -> None:
    """``--assignment A`` of a benchmark or the load test (default: :func:`first_assignment`)."""
    parser.add_argument("--assignment", type=assignment_name, default=None,
                        help="the assignment whose notebooks the simulated students hand in "
                             "(default: the course's first, in name order)")
