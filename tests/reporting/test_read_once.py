"""``read_once``: inside a ``holding`` block of a gradebook, a read is made once per key and shared;
outside it, or of another gradebook, or in another thread, every read is made afresh."""

from __future__ import annotations

import threading

import pytest

from attention_platform.reporting import read_once

HELD, OTHER = "sqlite:////aside/1/gradebook.db", "sqlite:////course/gradebook.db"


class Reads:
    def __init__(self):
        self.made = 0

    def __call__(self):
        self.made += 1
        return ["answer", self.made]


@pytest.mark.parametrize("case, url, inside, expected_reads", [
    ("the held gradebook, inside the block", HELD, True, 1),
    ("the held gradebook, outside any block", HELD, False, 3),
    ("another gradebook, inside the block", OTHER, True, 3),
])
def test_a_read_is_made_once_only_for_the_held_gradebook_inside_its_block(case, url, inside, expected_reads):
    read = Reads()
    if inside:
        with read_once.holding(HELD):
            answers = [read_once.once(url, ("submission", "ann"), read) for _ in range(3)]
    else:
        answers = [read_once.once(url, ("submission", "ann"), read) for _ in range(3)]
    assert read.made == expected_reads, case
    assert answers[-1] == ["answer", expected_reads]


def test_keys_are_apart_and_a_block_forgets_its_reads_when_it_ends():
    ann, bob = Reads(), Reads()
    with read_once.holding(HELD):
        read_once.once(HELD, ("submission", "ann"), ann)
        read_once.once(HELD, ("submission", "bob"), bob)
        read_once.once(HELD, ("submission", "ann"), ann)
    assert (ann.made, bob.made) == (1, 1)
    with read_once.holding(HELD):
        read_once.once(HELD, ("submission", "ann"), ann)
    assert ann.made == 2


def test_a_nested_block_ends_back_in_the_outer_one():
    outer, inner = Reads(), Reads()
    with read_once.holding(HELD):
        read_once.once(HELD, ("k",), outer)
        with read_once.holding(OTHER):
            read_once.once(OTHER, ("k",), inner)
            read_once.once(OTHER, ("k",), inner)
            read_once.once(HELD, ("k",), outer)  # not held in here: read again
        read_once.once(HELD, ("k",), outer)  # the outer block's answer
    assert (outer.made, inner.made) == (2, 1)


def test_a_read_that_fails_is_not_kept():
    calls = []

    def flaky():
        calls.append(1)
        if len(calls) == 1:
            raise LookupError("no submission yet")
        return "found"

    with read_once.holding(HELD):
        with pytest.raises(LookupError):
            read_once.once(HELD, ("k",), flaky)
        assert read_once.once(HELD, ("k",), flaky) == "found"
        assert read_once.once(HELD, ("k",), flaky) == "found"
    assert len(calls) == 2


def test_another_thread_is_not_in_this_threads_block():
    read = Reads()
    with read_once.holding(HELD):
        read_once.once(HELD, ("k",), read)
        worker = threading.Thread(target=lambda: read_once.once(HELD, ("k",), read))
        worker.start()
        worker.join()
        read_once.once(HELD, ("k",), read)
    assert read.made == 2
