"""Feedback on submit's cost of one more attempt does not grow with the attempts already made.

The grader (its real loop: scan, fair queue, grading in sandboxes, feedback pages, what counts) grades
ten attempts of one student, one after another; per attempt it counts what it read of the attempts
ledger (the rows, and the statements sent to its tables) and of the scratch gradebook (its
statements, and how many read the instructor's cells, which do not change from one attempt to the
next). Counts, not clocks: the tenth attempt reads and asks as much as the second. Each attempt's
log line says where its time went. The way to a student's result (the grader's one interpreter, shared
by every attempt being graded) spends nothing on laying out JSON for a human reader: the graded
notebooks and every status it writes are encoded by the C encoder."""

from __future__ import annotations

import collections
import datetime as dt
import json
import logging
import os
import shutil
import sys
import threading
import time

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.root,
              pytest.mark.skipif(os.geteuid() != 0, reason="a private sandbox worker needs root")]

ATTEMPTS = 10


def _hand_in(service, course, student: str, assignment: str, k: int) -> None:
    """What the student's submit leaves in their inbound folder (made aside, then renamed in)."""
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f UTC")
    inbound = service.exchange / "inbound" / student
    made = inbound / f".making-{k}"
    shutil.copytree(course / "release" / assignment, made)
    (made / "timestamp.txt").write_text(stamp)
    (made / "submission_secret.txt").write_text(f"secret-of-{student}")
    os.rename(made, inbound / f"{student}+{assignment}+{stamp}+{k}")


def _settled(service, assignment: str, graded: int) -> bool:
    rows = service.ledger.attempts(assignment)
    return (sum(r["state"] == "graded" for r in rows) >= graded and not service.running and not service.finishing
            and not len(service.queue))


def test_the_tenth_attempt_reads_and_asks_as_much_as_the_second(tmp_path, monkeypatch, caplog, released_course):
    from sqlalchemy import event
    from sqlalchemy.engine import Engine as SQLEngine

    from attention_platform.attempts import ledger as ledger_module
    from attention_platform.benchmarks.feedback_on_submit import attempt_parts
    from attention_platform.feedback_on_submit.engine import PARTS
    from attention_platform.feedback_on_submit.service import Service
    from grader_tests.registry import assignment
    from grader_tests.self_attention.answers import ASSIGNMENT

    monkeypatch.setenv("ATTENTION_FEEDBACK_ON_SUBMIT",
                       json.dumps({ASSIGNMENT: {"feedback": "full", "attempts": None, "counts": "last"}}))
    monkeypatch.setenv("PATH", f"{os.path.dirname(sys.executable)}:{os.environ['PATH']}")  # nbgrader runs alembic
    monkeypatch.delenv("ATTENTION_SANDBOX_SOCKET", raising=False)  # a private sandbox worker
    course = released_course(tmp_path / "course", ASSIGNMENT)

    rows_read, statements = collections.Counter(), collections.Counter()
    read_row = ledger_module.row_dict

    def the_graders() -> bool:  # its loop and its workers, not this test's looks at the ledger
        return threading.current_thread() is not threading.main_thread()

    def counted_row(row):
        if the_graders():
            rows_read["ledger"] += 1
        return read_row(row)

    def counted_statement(conn, cursor, statement, parameters, context, executemany):
        if not the_graders():
            return
        if "attention_" in statement:
            statements["ledger"] += 1
        elif str(conn.engine.url).endswith("/attempts/gradebook.db"):  # the grader's scratch gradebook
            statements["scratch gradebook"] += 1
            statements["instructor's cells"] += statement.lstrip().startswith("SELECT") and "source_cell" in statement
    monkeypatch.setattr(ledger_module, "row_dict", counted_row)
    event.listen(SQLEngine, "before_cursor_execute", counted_statement)
    grading = threading.local()
    make_iterencode = json.encoder._make_iterencode  # Python's own encoder: what indent= takes

    def counted_iterencode(*args, **kwargs):
        if getattr(grading, "now", False):
            statements["JSON laid out on the way to the result"] += 1
        return make_iterencode(*args, **kwargs)

    monkeypatch.setattr(json.encoder, "_make_iterencode", counted_iterencode)

    caplog.set_level(logging.INFO, logger="feedback-on-submit")
    service = Service(course, tmp_path / "exchange")

    def observed(method):
        def observed_method(*args):
            was, grading.now = getattr(grading, "now", False), True
            try:
                return method(*args)
            finally:
                grading.now = was
        return observed_method

    service.work = observed(service.work)  # grading, up to the status that shows the result
    service.write_status = observed(service.write_status)  # and each status the student reads meanwhile
    for folder in ("inbound", "feedback"):
        (service.exchange / folder / "ann").mkdir(parents=True)
    stop = threading.Event()
    loop = threading.Thread(target=service.run, args=(stop,), name="grader-loop")
    loop.start()
    per_attempt = []
    try:
        deadline = time.monotonic() + 600
        while ASSIGNMENT not in service.since:  # on from the grader's first scan
            assert time.monotonic() < deadline and loop.is_alive()
            time.sleep(0.1)
        for k in range(1, ATTEMPTS + 1):
            rows_read.clear()
            statements.clear()
            _hand_in(service, course, "ann", ASSIGNMENT, k)
            while not _settled(service, ASSIGNMENT, k):
                assert time.monotonic() < deadline and loop.is_alive(), f"attempt {k} not graded"
                time.sleep(0.05)
            per_attempt.append({"ledger rows read": rows_read["ledger"], **statements})
    finally:
        stop.set()
        loop.join(timeout=120)
        event.remove(SQLEngine, "before_cursor_execute", counted_statement)
    shown = json.loads((service.exchange / "feedback" / "ann" / f"feedback-on-submit-{ASSIGNMENT}.json").read_text())
    assert [a["state"] for a in shown["attempts"]] == ["graded"] * ATTEMPTS and shown["attempts"][-1]["counted"]
    assert all(count == per_attempt[1] for count in per_attempt[1:]), per_attempt
    assert not any(count.get("JSON laid out on the way to the result") for count in per_attempt), per_attempt
    # the instructor's cells (what OverwriteCells checks each cell against, and each notebook's list of them
    # that it and RestoreCellMetadata read) are read by the first attempt; the next ones read none
    assert per_attempt[0]["instructor's cells"] >= len(assignment(ASSIGNMENT).notebooks), per_attempt
    assert not any(count.get("instructor's cells") for count in per_attempt[1:]), per_attempt
    # ... and the grader says where each attempt's time went, as bench-feedback-on-submit reads it
    log = tmp_path / "grader.log"
    log.write_text("".join(f"{record.getMessage()}\n" for record in caplog.records))
    parts = attempt_parts(log, 0)
    assert parts["attempts"] == ATTEMPTS and set(parts["mean"]) == set(PARTS), parts
    assert all(parts["mean"][part] > 0 for part in ("sandbox", "gradebook", "feedback pages", "status and ledger")), parts
    # ... with the sandbox's part split by notebook, so that a costly cell shows where it is
    by_notebook = parts["sandbox_by_notebook"]
    assert set(by_notebook) == set(assignment(ASSIGNMENT).notebooks) and all(by_notebook.values()), parts
    assert sum(by_notebook.values()) == pytest.approx(parts["mean"]["sandbox"], abs=1e-3), parts
