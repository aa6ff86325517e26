"""How an assignment proves its hidden checks: answers typed into the instructor's notebook.

Every assignment's ``answers`` module lists ``WHEATS`` (right answers, often in another idiom than the
instructor's: every check passes them) and ``CHAFFS`` (one misconception each: ``target`` is the check
that exists for it, ``fails`` the exact set of checks that fail, target included). Each is a
:class:`Proof`: the instructor's source notebook with the answer typed in, which is what a student who
wrote it would submit. ``attention-course prove-checks`` and each assignment's ``tests`` run them.

Pure nbformat and Python: nothing here imports the platform, so the proofs run wherever the checks do.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import nbformat

SOLUTION_MARKERS = ("### BEGIN SOLUTION", "### END SOLUTION")


@dataclass(frozen=True)
class Proof:
    """One answer that proves checks: ``apply(source_notebook)`` returns the notebook with it typed in."""

    name: str
    notebook: str  # nbgrader notebook id: the file name without .ipynb
    apply: Callable[[nbformat.NotebookNode], nbformat.NotebookNode] = field(compare=False, repr=False)
    target: str | None = None  # a chaff's check
    fails: frozenset = field(default_factory=frozenset)  # a chaff's failing checks, target included

    @property
    def is_chaff(self) -> bool:
        return self.target is not None


def wheat(name: str, notebook: str, *edit_list) -> Proof:
    """A right answer made of text edits ``(grade_id, old, new)`` to the instructor's cells."""
    return Proof(name, notebook, edits(*edit_list))


def chaff(name: str, notebook: str, target: str, also: set, *edit_list) -> Proof:
    """A wrong answer made of text edits; ``also`` names the checks that fail besides ``target``."""
    return Proof(name, notebook, edits(*edit_list), target, frozenset(set(also) | {target}))


def grade_id(cell) -> str | None:
    return cell.metadata.get("nbgrader", {}).get("grade_id")


def edits(*edit_list) -> Callable[[nbformat.NotebookNode], nbformat.NotebookNode]:
    """``apply`` for a proof made of text edits ``(grade_id, old, new)``."""
    return lambda nb: with_edits(nb, edit_list)


def with_edits(nb: nbformat.NotebookNode, edit_list=()) -> nbformat.NotebookNode:
    """A copy of ``nb`` with each ``(grade_id, old, new)`` edit applied (``old`` must occur)."""
    copy = nbformat.from_dict(nb)
    for cell_id, old, new in edit_list:
        cell = next((c for c in copy.cells if grade_id(c) == cell_id), None)
        if cell is None or old not in cell.source:
            raise ValueError(f"edit does not apply: {old!r} not in cell {cell_id!r}")
        cell.source = cell.source.replace(old, new)
    return copy


def solved(release: nbformat.NotebookNode, source: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """``release`` with every answer cell filled in from ``source`` (the solution markers dropped),
    which is what a student who wrote the instructor's solution would submit."""
    answers = {grade_id(c): c.source for c in source.cells if c.metadata.get("nbgrader", {}).get("solution")}
    copy = nbformat.from_dict(release)
    for cell in copy.cells:
        if grade_id(cell) in answers:
            cell.source = "\n".join(line for line in answers[grade_id(cell)].splitlines()
                                    if line.strip() not in SOLUTION_MARKERS)
    return copy


def run_cells(nb: nbformat.NotebookNode, skip: frozenset = frozenset()) -> dict:
    """Execute the notebook's code cells except grade (check) cells and ``skip``, as a kernel would:
    a failing cell is recorded in ``__errors__`` and the next one runs. IPython magics are ignored."""
    namespace: dict = {"__name__": "__student__", "__errors__": {}}
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if cell.cell_type != "code" or meta.get("grade") or grade_id(cell) in skip:
            continue
        source = "\n".join("" if line.lstrip().startswith(("%", "!")) else line for line in cell.source.splitlines())
        try:
            exec(compile(source, f"<{grade_id(cell)}>", "exec"), namespace)
        except Exception as exc:  # a failing student cell does not stop the notebook
            namespace["__errors__"][grade_id(cell)] = exc
    return namespace
