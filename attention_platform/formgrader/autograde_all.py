"""Autograde all, in the formgrader (TAs and instructors; behind formgrader_gate.py).

``formgrader/api/attention/autograde_all/<assignment>``: POST starts the batch grader
(attention_platform/grading/batch.py, the one ``attention-course autograde-batch`` runs) over every
collected submission of the assignment; GET says how it goes: how many students are done, whose
notebooks are in the sandbox now, and at the end the summary (graded, failed with what a TA can do,
written answers waiting for a TA). One run per assignment: a second POST while one runs answers
that run's state.

The batch runs in a process of its own (``python -m attention_platform.formgrader.autograde_all``),
never on the formgrader's event loop or in its process: the batch points nbgrader's gradebook at
its own shared session while it runs, and a crash of the batch leaves the formgrader serving. The
process writes one JSON line per progress step on its stdout; this module reads them on a thread.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

from tornado import web

RUNNING, DONE, REFUSED, CRASHED = "running", "done", "refused", "crashed"
_LAST_WORDS = 20  # lines of the batch's stderr kept to say why it stopped

# What a TA can do about a submission the batch could not grade, by the start of its status.
ADVICE = {
    "rejected": "the submitted file is not a notebook the grader can read: ask the student to submit again",
    "missing": "a notebook was not submitted: it scores 0; nothing to do unless the student sent it another way",
    "stopped": "the sandbox stopped the student's code (time or memory limit): the checks it reached are graded, "
               "the rest score 0",
    "error": "grading this submission failed: run `attention-course autograde-batch {assignment} --student "
             "{student}` in the course directory to see why",
}


def advice(status: str, assignment: str, student: str) -> str:
    kind = status.split(":", 1)[0].split(" ", 1)[0]
    return ADVICE.get(kind, ADVICE["error"]).format(assignment=assignment, student=student)


class AutogradeAll:
    """One run of the batch over an assignment, followed from its progress lines."""

    def __init__(self, course_root: str, assignment: str):
        self.course_root, self.assignment = course_root, assignment
        self.state, self.done, self.total, self.grading = RUNNING, 0, 0, []
        self.outcomes: list[dict] = []
        self.reason = ""
        self.started, self.finished = time.time(), None
        self._lock = threading.Lock()

    def start(self) -> None:
        threading.Thread(target=self._run, name=f"autograde-all-{self.assignment}", daemon=True).start()

    def _command(self) -> list[str]:
        return [sys.executable, "-m", __name__, "--course", self.course_root, self.assignment]

    def _run(self) -> None:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
        try:
            process = subprocess.Popen(self._command(), cwd=self.course_root, env=env, stdin=subprocess.DEVNULL,
                                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        except OSError as exc:
            self._end(CRASHED, f"the batch grader could not start: {exc}")
            return
        last_words: list[str] = []
        stderr = threading.Thread(target=_tail, args=(process.stderr, last_words), daemon=True)
        stderr.start()
        for line in process.stdout:
            try:
                self._apply(json.loads(line))
            except (ValueError, TypeError, KeyError):
                continue  # not a progress line (a library printing): the run goes on
        process.wait()
        stderr.join(timeout=5)
        if self.state == RUNNING:
            said = " ".join(last_words[-3:]).strip() or f"exit status {process.returncode}"
            self._end(CRASHED, f"the batch grader stopped before the end ({said}); grades saved so far are kept: "
                               f"run Autograde all again, or `attention-course autograde-batch {self.assignment}` "
                               "in the course directory to see the whole message")

    def _apply(self, event: dict) -> None:
        with self._lock:
            if "refused" in event:
                self.state, self.reason, self.finished = REFUSED, str(event["refused"]), time.time()
            elif "outcomes" in event:
                self.outcomes = [dict(o, advice=advice(o["status"], self.assignment, o["student"]) if o["status"] != "ok"
                                      else "") for o in event["outcomes"]]
                self.state, self.finished = DONE, time.time()
            else:
                self.done, self.total, self.grading = int(event["done"]), int(event["total"]), list(event["grading"])

    def _end(self, state: str, reason: str) -> None:
        with self._lock:
            self.state, self.reason, self.finished = state, reason, time.time()

    def snapshot(self) -> dict:
        with self._lock:
            return {"assignment": self.assignment, "state": self.state, "done": self.done, "total": self.total,
                    "grading": list(self.grading), "outcomes": list(self.outcomes), "reason": self.reason,
                    "seconds": round((self.finished or time.time()) - self.started, 1)}


def _tail(stream, kept: list[str]) -> None:
    for line in stream:
        kept.append(line.strip())
        del kept[:-_LAST_WORDS]


_RUNS: dict[tuple[str, str], AutogradeAll] = {}
_RUNS_LOCK = threading.Lock()


def start(course_root: str, assignment: str) -> tuple[AutogradeAll, bool]:
    """The assignment's run: a new one, or the one still running (then ``False``)."""
    key = (str(course_root), assignment)
    with _RUNS_LOCK:
        run = _RUNS.get(key)
        if run is not None and run.state == RUNNING:
            return run, False
        run = _RUNS[key] = AutogradeAll(str(course_root), assignment)
    run.start()
    return run, True


def latest(course_root: str, assignment: str) -> AutogradeAll | None:
    with _RUNS_LOCK:
        return _RUNS.get((str(course_root), assignment))


def _waiting_for_a_ta(api, gradebook, coursedir, assignment: str) -> dict[str, float]:
    """``{student: points of written answers still to grade by hand}``, from the gradebook."""
    from attention_platform.formgrader.formgrader_extras import submission_states

    states = submission_states(api, gradebook, coursedir, assignment)
    return {student: s["waiting_points"] for student, s in sorted(states.items()) if s["waiting_points"]}


def _handler():
    from nbgrader.server_extensions.formgrader.base import BaseApiHandler

    class AutogradeAllHandler(BaseApiHandler):
        def _answer(self, run: AutogradeAll | None, started: bool | None = None) -> None:
            if run is None:
                self.write(json.dumps({"assignment": None, "state": "none"}))
                return
            found = run.snapshot()
            if started is not None:
                found["started"] = started
            if found["state"] == DONE:
                found["waiting"] = _waiting_for_a_ta(self.api, self.gradebook, self.coursedir, run.assignment)
            self.write(json.dumps(found))

        @web.authenticated
        def get(self, assignment_id):
            self._answer(latest(self.coursedir.root, assignment_id))

        @web.authenticated
        def post(self, assignment_id):
            self._answer(*start(self.coursedir.root, assignment_id))

    return AutogradeAllHandler


def handlers(base_url: str) -> list:
    """The routes this module serves (each also in formgrader_gate.ROUTES)."""
    from jupyter_server.utils import url_path_join as join

    from attention_platform.formgrader.formgrader_gate import _ID

    return [(join(base_url, rf"formgrader/api/attention/autograde_all/(?P<assignment_id>{_ID})/?"), _handler())]


# --------------------------------------------------------------------------- the batch's process

def _report(done: int, total: int, grading: list[str], finished) -> None:
    print(json.dumps({"done": done, "total": total, "grading": grading}), flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="the batch grader for the formgrader's Autograde all: "
                                                 "progress and outcomes as JSON lines on stdout")
    parser.add_argument("--course", type=Path, required=True)
    parser.add_argument("assignment")
    args = parser.parse_args(argv)

    from attention_platform import start_up_gc, third_party_patches
    from attention_platform.course.directory import NotACourse
    from attention_platform.grading.sandbox.client import SandboxUnavailable

    start_up_gc.pause()  # until the first notebook is finished, as the command line does
    third_party_patches.defer_iri_syntax()
    from attention_platform.grading.batch import BatchError, autograde_batch

    try:
        outcomes = autograde_batch(args.course, args.assignment, progress=False, log=None, on_progress=_report)
    except (BatchError, NotACourse, SandboxUnavailable) as exc:
        print(json.dumps({"refused": str(exc)}), flush=True)
        return 1
    print(json.dumps({"outcomes": [{"student": o.student, "score": o.score, "max_score": o.max_score,
                                    "status": o.status, "failed_checks": len(o.failed)} for o in outcomes]}),
          flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
