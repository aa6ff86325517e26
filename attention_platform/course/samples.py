"""The bundled class of sample submissions the demo grades.

Each student's answer is taken from the proven catalogues in
``grader_tests.self_attention.answers``; ``None`` submits the release untouched."""

from __future__ import annotations

from grader_tests.self_attention.answers import BUGGY, CORRECT

_BY_NAME = {answer.name: answer for answer in BUGGY + CORRECT}

SAMPLE_CLASS: dict[str, str | None] = {
    "ada": "reference_style",
    "ben": "no_scale",
    "chloe": "softmax_over_queries",
    "dev": "inverted_mask_large_negative",
    "eve": "mask_after_softmax",
    "gia": "einsum",
    "finn": None,
}


def sample_answer(student: str) -> str | None:
    name = SAMPLE_CLASS[student]
    return None if name is None else _BY_NAME[name].code


def expected_failures(student: str, all_check_ids: set[str]) -> set[str]:
    """The checks a sample student fails, from the catalogue's proven fail sets."""
    name = SAMPLE_CLASS[student]
    if name is None:
        return set(all_check_ids)
    return set(_BY_NAME[name].fails)
