"""Reads of a gradebook that nobody writes for a while, made once.

Each of an attempt's feedback pages (one per notebook) reads what the gradebook holds of the whole
submission: every notebook's score and the total for the page's summary, every grade and comment
for the page's reuse key. In feedback on submit that gradebook is the attempt's own copy, set
aside: nothing writes it while its pages are made. The caller says so with :func:`holding`, and
inside that block each such read (:func:`once`) is made by the first page and shared by the rest.

Outside a block every read is made afresh: the TA's ``generate_feedback`` reads the course
gradebook, which the formgrader may write while the pages are made.
"""

from __future__ import annotations

import contextlib
import threading

_held = threading.local()


@contextlib.contextmanager
def holding(db_url: str):
    """Until the block ends, this thread's reads of ``db_url`` through :func:`once` are made once each.
    Only for a gradebook that nothing writes until then."""
    outer = getattr(_held, "reads", None)
    _held.reads = (db_url, {})
    try:
        yield
    finally:
        _held.reads = outer


def once(db_url: str, key: tuple, read):
    """``read()``, or inside a :func:`holding` block of ``db_url`` the answer it gave for ``key`` the
    first time. What it returns is shared: callers do not change it. An exception is not kept: the
    next call reads again."""
    held = getattr(_held, "reads", None)
    if held is None or held[0] != db_url:
        return read()
    answers = held[1]
    if key not in answers:
        answers[key] = read()
    return answers[key]
