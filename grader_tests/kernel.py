"""Running a hidden check inside the notebook's kernel (the stock nbgrader path).

A hidden test cell is one line, ``grade("sqrt_d_scale", globals())``. On failure
it raises ``CheckFailed``, whose IPython rendering is only the teaching message:
no traceback, no frames of this package, nothing of the check's code.
"""

from __future__ import annotations

import contextlib
import io
import warnings

from .registry import CHECKS


class CheckFailed(AssertionError):
    def __init__(self, title: str, message: str):
        super().__init__(message)
        self.title = title
        self.message = message

    def _render_traceback_(self) -> list[str]:  # IPython's hook for custom tracebacks
        return [f"CheckFailed: {self.title}", self.message]


def grade(check_id: str, namespace: dict) -> None:
    """Run one hidden check against the student's definitions in ``namespace``."""
    check = CHECKS[check_id]
    # A harmless warning or stray print to stderr from student code must not cost points
    # (nbgrader zeroes a test cell with any stderr output).
    with warnings.catch_warnings(), contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        verdict = check.run_in_process(namespace)
    if not verdict.passed:
        raise CheckFailed(check.title, verdict.message) from None
    print(f"✓ Passed: {check.title}")
