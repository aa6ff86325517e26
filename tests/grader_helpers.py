"""The feedback-on-submit grader as tests drive it, and the check of a policy parser's errors.

A grader script (tests/feedback_on_submit/test_best_keeps_written_work.py,
test_feedback_on_submit_deadlines.py) builds a ``Service`` on a copy of the course, hands
submissions into inbound folders and grades them with :func:`drain`, in a process of its own with
a private sandbox worker (:func:`run_grader_script`). :func:`refused_saying` is what every policy
parser (feedback on submit's, the late policy's) must do with a broken policy.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from concurrent.futures import FIRST_COMPLETED, wait
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent


def drain(service, assignment: str, students=("ann",), attempts: int = 1, timeout: float = 600) -> None:
    """The grader's loop (scan, dispatch, each finished attempt completed) until the ``students``
    have at least ``attempts`` attempts of ``assignment``, none queued, graded or being finished."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        service.scan()
        service.dispatch()
        if service.running:
            done, _ = wait(list(service.running), timeout=0.2, return_when=FIRST_COMPLETED)
            for future in done:
                service.completed(future)
            continue
        states = [r["state"] for student in students for r in service.ledger.attempts(assignment, student)]
        if len(states) >= attempts and not service.finishing and all(s not in ("queued", "grading") for s in states):
            return
        time.sleep(0.2)
    raise SystemExit("the grader did not finish")


def run_grader_script(code: str, policies: dict) -> dict:
    """What the grader script ``code`` printed last (one JSON line), run under the feedback-on-submit
    ``policies`` with a private sandbox worker; the script may import this module."""
    env = {**os.environ, "PATH": f"{os.path.dirname(sys.executable)}:{os.environ['PATH']}",  # nbgrader runs alembic
           "ATTENTION_FEEDBACK_ON_SUBMIT": json.dumps(policies)}
    env.pop("ATTENTION_SANDBOX_SOCKET", None)
    script = f"import sys\nsys.path.append({str(TESTS)!r})\n{code}"
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=900, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def refused_saying(parse, error: type[Exception], raw, says: str, assignment: str = "self_attention") -> None:
    """``parse(assignment, raw)`` refuses ``raw`` with ``error``, whose message names the assignment
    and says ``says``."""
    with pytest.raises(error) as caught:
        parse(assignment, raw)
    assert says in str(caught.value) and assignment in str(caught.value)
