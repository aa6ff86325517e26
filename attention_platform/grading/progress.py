"""Which notebook of a submission is being autograded right now, for the formgrader's progress.

The formgrader autogrades one submission at a time on a worker thread
(``attention_platform/formgrader/formgrader_extras.py``); ``SandboxedExecute`` reports each notebook it
starts and finishes here, and the formgrader's progress API reads it. In-process and bounded:
one entry per (assignment, student), dropped when the submission is done.
"""

from __future__ import annotations

import threading
import time

_LOCK = threading.Lock()
_RUNNING: dict[tuple[str, str], dict] = {}


def started(assignment: str, student: str, notebook: str, total: int) -> None:
    with _LOCK:
        entry = _RUNNING.setdefault((assignment, student), {"done": 0, "since": time.time()})
        entry.update(notebook=notebook, total=max(total, entry["done"] + 1))


def finished(assignment: str, student: str) -> None:
    with _LOCK:
        entry = _RUNNING.get((assignment, student))
        if entry is not None:
            entry["done"] += 1


def clear(assignment: str, student: str) -> None:
    with _LOCK:
        _RUNNING.pop((assignment, student), None)


def current(assignment: str, student: str) -> dict | None:
    """``{"notebook", "done", "total", "seconds"}`` while autograding, else None."""
    with _LOCK:
        entry = _RUNNING.get((assignment, student))
        if entry is None:
            return None
        return {"notebook": entry.get("notebook", ""), "done": entry["done"], "total": entry.get("total", 0),
                "seconds": round(time.time() - entry["since"], 1)}
