"""Per-student variants: how a check's seed says whose numbers a by-hand part uses.

An assignment whose numbers are the answer declares a ``variants`` module (found by the registry
like its ``pictures``): ``NOTEBOOK`` (the notebook id whose input cells vary), ``CHECKS`` (the ids of
the checks that judge those numbers), ``cells(seed)`` (``{grade id: source}`` of the input cells
for that seed) and ``edits(seed)`` (``{grade id: [(old, new)]}``: numbers the instructions quote). The grader derives the seed from the course's key, the assignment and the student
(attention_platform/course/variants.py); this package never sees the key. A variant's seed has
``VARIANT_BIT`` set; every other seed (``Check.default_seed``, the sandbox's per-check seeds) is
below it and stands for the numbers the release shows.
"""

from __future__ import annotations

VARIANT_BIT = 1 << 31


def is_variant(seed: int) -> bool:
    return bool(seed & VARIANT_BIT)


def variant_seed(digest: bytes) -> int:
    """The seed of the variant named by a keyed ``digest`` (at least four bytes)."""
    return VARIANT_BIT | (int.from_bytes(digest[:4], "big") & (VARIANT_BIT - 1))
