"""The cyclic garbage collector during a long start-up, and start-up's objects kept out of its reach
afterwards.

A grading process (the ``autograde-batch`` command, the feedback-on-submit grader, the sandbox
worker) starts by importing torch, nbgrader, SQLAlchemy and matplotlib: some 300,000 tracked
objects that live as long as the process (a student's Jupyter server, started by
``jupyter_config/student/jupyterhub-singleuser``, makes about as many the same way). With the collector on,
every full collection walks all of them again: five during a cold ``autograde-batch``'s start-up
and four during the sandbox worker's warm-up (a sizeable share of each one's CPU), and one every
few dozen submissions afterwards. Start-up makes little cyclic garbage (~11,000 objects, a
megabyte or two, after a cold batch's first notebook), so the collector stays off until start-up is
done; then everything alive is frozen (:func:`gc.freeze`: moved where no collection looks) and the
collector runs on what grading makes. The garbage start-up left is frozen with the rest rather than
collected: one full collection of that heap costs more CPU than the memory is worth.
"""

from __future__ import annotations

import gc

_paused = False


def pause() -> None:
    """Turn the collector off until :func:`resume`, at the start of a process's start-up. Does
    nothing if the collector is already off (whoever turned it off decides when it comes back)."""
    global _paused
    if gc.isenabled():
        gc.disable()
        _paused = True


def resume() -> int:
    """Start-up is done: freeze every object alive now and turn the collector back on -- if
    :func:`pause` turned it off; otherwise (and on every later call) do nothing. Returns how many
    objects were frozen (0 when nothing was done)."""
    global _paused
    if not _paused:
        return 0
    _paused = False
    before = gc.get_freeze_count()
    gc.freeze()
    gc.enable()
    return gc.get_freeze_count() - before
