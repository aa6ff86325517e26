"""Feedback pages made in a process of their own, at a lower CPU priority than grading.

A page is nbconvert's HTML export of each notebook of an attempt: pure Python, about a quarter
of a second of a core per notebook. Made by the grader's own threads it held the interpreter
lock against the threads that grade and the one that takes submissions in, so a student who had
just submitted waited behind someone else's pages. Here one worker process (the course's
``GenerateFeedback``, through an :class:`~.engine.Engine` of its own on the same scratch course)
makes them, niced, so the kernel gives the cores to grading first.
"""

from __future__ import annotations

import logging
import os
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from multiprocessing import get_context
from pathlib import Path

from .engine import PAGE_MISSING

NICENESS = 10  # below grading and intake, which run at the grader's own priority

_engine = None  # the worker process's Engine


def _start_worker(course: Path, work: Path, exchange_feedback: Path | None) -> None:
    global _engine
    os.nice(NICENESS)
    logging.basicConfig(level=logging.INFO, format="[%(levelname)1.1s %(asctime)s feedback-on-submit pages] %(message)s")
    for noisy in ("traitlets", "nbgrader"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    from .engine import Engine

    _engine = Engine(course, work=work, exchange_feedback=exchange_feedback,
                     log=logging.getLogger("feedback-on-submit.pages")).start()


def _ready() -> bool:
    return _engine is not None


def _make(attempt, result):
    _engine.feedback_pages(attempt, result)
    return result.pages, result.notes


class PageMaker:
    """``make(attempt, result)``: the attempt's pages, as ``Engine.feedback_pages`` makes them, from
    the worker process (started at once, so that its imports are done before the first page)."""

    def __init__(self, engine, log: logging.Logger):
        self._args = (engine.course, engine.work, engine.exchange_feedback)
        self.log = log
        self.pool = self._pool()

    def _pool(self) -> ProcessPoolExecutor:
        pool = ProcessPoolExecutor(max_workers=1, mp_context=get_context("spawn"), initializer=_start_worker,
                                   initargs=self._args)
        pool.submit(_ready)
        return pool

    def make(self, attempt, result) -> None:
        """The attempt's pages into ``result``; if they cannot be made, a note instead, so that the
        attempt is archived and counted all the same."""
        try:
            pages, notes = self.pool.submit(_make, attempt, result).result()
        except BrokenProcessPool:
            self.log.error("the feedback pages' process died while making attempt %s's pages; it starts again",
                           attempt.id)
            self.pool = self._pool()
            result.notes.append(PAGE_MISSING)
            return
        except Exception:  # noqa: BLE001 - raised in the worker, which lives on: this attempt's pages only
            self.log.exception("the feedback pages of attempt %s could not be made", attempt.id)
            result.notes.append(PAGE_MISSING)
            return
        result.pages.update(pages)
        result.notes[:] = notes

    def close(self, *, at_once: bool = False) -> None:
        """Stop the worker process once the page it makes is made; ``at_once`` when none is waited
        for, rather than after the imports of its start-up."""
        if at_once:
            for worker in list(self.pool._processes.values()):  # the executor's own (its terminate_workers from 3.14)
                worker.terminate()
        self.pool.shutdown(wait=True, cancel_futures=True)
