"""What proves a hidden check: answers typed into the instructor's notebook.

A ``Proof`` is one such answer. A *wheat* is right in another idiom and must pass every check of its
notebook; a *chaff* carries one misconception: ``target`` is the check that exists for it and
``fails`` the exact set of check ids that fail (target included), so a check that starts blaming
the wrong idea shows up. ``apply(source_nb)`` returns a copy of the instructor's notebook with the
answer in it; ``edits`` builds one from text edits of its cells.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import nbformat


@dataclass(frozen=True)
class Proof:
    name: str
    notebook: str  # nbgrader notebook id: the file name without .ipynb
    apply: Callable[[nbformat.NotebookNode], nbformat.NotebookNode]
    target: str | None = None
    fails: frozenset = field(default_factory=frozenset)


def edits(*changes: tuple[str, str, str]) -> Callable[[nbformat.NotebookNode], nbformat.NotebookNode]:
    """An ``apply`` that replaces, in the cell with each ``grade_id``, the text ``old`` by ``new``
    (``old`` must occur, so an edit that no longer applies fails loudly)."""

    def apply(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
        copy = nbformat.from_dict(nb)
        for grade_id, old, new in changes:
            cell = next((c for c in copy.cells if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id), None)
            if cell is None or old not in cell.source:
                raise ValueError(f"edit does not apply: {old!r} not in cell {grade_id!r}")
            cell.source = cell.source.replace(old, new)
        return copy

    return apply
