"""``attention-course``: the platform's command line.

Every command is registered the same way: a package's ``commands.py`` has a ``register(commands)``
that adds its sub-parsers and names, with ``set_defaults(run=...)``, the function that runs each.
Those modules import nothing heavy: torch, nbgrader and the hub load only when their command runs.
"""

from __future__ import annotations

import argparse
import sys

from attention_platform import third_party_patches, venv
from attention_platform.settings import settings_or_exit

# Before nbformat or nbgrader import jsonschema (whose IRI parser is slow to build, paid by every
# command otherwise; the venv's .pth does the same, this covers an install without it).
third_party_patches.defer_iri_syntax()

from attention_platform.authoring import commands as authoring_commands  # noqa: E402
from attention_platform.benchmarks import commands as benchmarks_commands  # noqa: E402
from attention_platform.course import commands as course_commands  # noqa: E402
from attention_platform.exchange import commands as exchange_commands  # noqa: E402
from attention_platform.feedback_on_submit import commands as feedback_on_submit_commands  # noqa: E402
from attention_platform.grading import commands as grading_commands  # noqa: E402
from attention_platform.hub import commands as hub_commands  # noqa: E402
from attention_platform.hub import lms_sync as lms_sync_commands  # noqa: E402
from attention_platform.reporting import commands as reporting_commands  # noqa: E402

COMMAND_GROUPS = (course_commands, hub_commands, grading_commands, reporting_commands, feedback_on_submit_commands,
                  authoring_commands, benchmarks_commands, exchange_commands, lms_sync_commands)


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="attention-course", description="The self-attention course's platform: "
                                  "a demo, the hub, sandboxed grading, feedback on submit, reports and exports.")
    commands = top.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for group in COMMAND_GROUPS:
        group.register(commands)
    return top


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    settings_or_exit(f"attention-course {args.command}")  # a wrong setting stops every command before it starts
    venv.activate()
    try:
        return args.run(args) or 0
    except PermissionError as exc:  # e.g. a TA's own account, where the course is the grader account's
        raise SystemExit(f"attention-course {args.command}: permission denied: {exc.filename or exc}. This account "
                         "may not use that file: run the command as the course's grader account or an instructor, "
                         "or name a path this account may write") from None


def run() -> None:
    """The ``attention-course`` script: :func:`main`'s status is the process's."""
    sys.exit(main())


if __name__ == "__main__":
    run()
