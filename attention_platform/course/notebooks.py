"""Reading the course notebooks and writing answers into them.

A student's answer is Python source defining ``forward`` and
``attention_weights`` (and any helpers) at column 0. ``with_answer`` puts it in
place of the two stubbed methods of the released ``SelfAttention`` cell, which is
what a student does by typing into the notebook.
"""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import nbformat

COURSE_ROOT = Path(__file__).resolve().parents[2]
ASSIGNMENT = "self_attention"
NOTEBOOK = "self_attention.ipynb"
CLASS_CELL_ID = "self_attention_class"
ANSWERED_METHODS = ("forward", "attention_weights")
# The assignment's further parts, each its own notebook (see grader_tests.registry.NOTEBOOK_CHECKS).
PART_NOTEBOOKS = ("02_by_hand.ipynb", "03_head_and_bias.ipynb", "04_shapes_and_cost.ipynb",
                  "05_experiments.ipynb", "06_explain.ipynb")
NOTEBOOKS = (NOTEBOOK, *PART_NOTEBOOKS)


def release_notebook(course_root: Path = COURSE_ROOT, notebook: str = NOTEBOOK) -> nbformat.NotebookNode:
    return nbformat.read(course_root / "release" / ASSIGNMENT / notebook, as_version=4)


def source_notebook(course_root: Path = COURSE_ROOT, notebook: str = NOTEBOOK) -> nbformat.NotebookNode:
    return nbformat.read(course_root / "source" / ASSIGNMENT / notebook, as_version=4)


def class_cell(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    for cell in nb.cells:
        if cell.metadata.get("nbgrader", {}).get("grade_id") == CLASS_CELL_ID:
            return cell
    raise LookupError(f"no cell with grade_id {CLASS_CELL_ID!r}")


def with_methods(class_source: str, answer: str) -> str:
    """Replace ``forward`` and ``attention_weights`` of the class in ``class_source``
    by the definitions in ``answer`` (column-0 defs, helpers allowed). A method of the
    class that ``answer`` defines again (``__init__``, say, to register a buffer) is
    replaced too, as a student would edit it."""
    tree = ast.parse(class_source)
    cls = next(node for node in tree.body if isinstance(node, ast.ClassDef))
    redefined = {n.name for n in ast.parse(textwrap.dedent(answer)).body if isinstance(n, ast.FunctionDef)}
    present = {n.name for n in cls.body if isinstance(n, ast.FunctionDef)}
    if not set(ANSWERED_METHODS) <= present:
        raise ValueError("the class cell must define forward and attention_weights")
    methods = [n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name in set(ANSWERED_METHODS) | redefined]
    lines = class_source.splitlines()
    first = min(m.lineno - 1 - len(m.decorator_list) for m in methods)
    drop = set()
    for method in methods:
        drop.update(range(method.lineno - 1 - len(method.decorator_list), method.end_lineno))
    indented = textwrap.indent(textwrap.dedent(answer).strip("\n"), "    ").splitlines()
    kept = [line for i, line in enumerate(lines) if i not in drop]
    insert_at = first - sum(1 for i in drop if i < first)
    out = kept[:insert_at] + indented + kept[insert_at:]
    return "\n".join(out).rstrip() + "\n"


def with_answer(nb: nbformat.NotebookNode, answer: str | None) -> nbformat.NotebookNode:
    """A copy of ``nb`` whose class cell carries ``answer`` (None: left as released)."""
    copy = nbformat.from_dict(nb)
    if answer is not None:
        cell = class_cell(copy)
        cell.source = with_methods(cell.source, answer)
    return copy


def class_namespace(nb: nbformat.NotebookNode) -> dict:
    """Execute the notebook's import and class cells; return the resulting globals."""
    namespace: dict = {"__name__": "__student__"}
    for cell in nb.cells:
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if grade_id in ("imports", CLASS_CELL_ID):
            exec(compile(cell.source, f"<{grade_id}>", "exec"), namespace)
    return namespace


# --------------------------------------------------------------------------- the further parts
# A part answer is a list of edits (grade_id, old, new) to the instructor's cells: the instructor
# solution with one misconception (or another idiom) typed in.

def _grade_id(cell) -> str | None:
    return cell.metadata.get("nbgrader", {}).get("grade_id")


def with_edits(nb: nbformat.NotebookNode, edits=()) -> nbformat.NotebookNode:
    """A copy of ``nb`` with each ``(grade_id, old, new)`` edit applied (``old`` must occur)."""
    copy = nbformat.from_dict(nb)
    for grade_id, old, new in edits:
        cell = next((c for c in copy.cells if _grade_id(c) == grade_id), None)
        if cell is None or old not in cell.source:
            raise ValueError(f"edit does not apply: {old!r} not in cell {grade_id!r}")
        cell.source = cell.source.replace(old, new)
    return copy


def solved(release: nbformat.NotebookNode, source: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """``release`` with every answer cell filled in from ``source`` (the solution markers dropped),
    which is what a student who wrote the instructor's solution would submit."""
    answers = {_grade_id(c): c.source for c in source.cells if c.metadata.get("nbgrader", {}).get("solution")}
    copy = nbformat.from_dict(release)
    for cell in copy.cells:
        if _grade_id(cell) in answers:
            cell.source = "\n".join(line for line in answers[_grade_id(cell)].splitlines()
                                    if line.strip() not in ("### BEGIN SOLUTION", "### END SOLUTION"))
    return copy


def run_cells(nb: nbformat.NotebookNode, skip: frozenset = frozenset()) -> dict:
    """Execute the notebook's code cells except grade (check) cells and ``skip``, as a kernel would:
    a failing cell is recorded in ``__errors__`` and the next one runs. IPython magics are ignored."""
    namespace: dict = {"__name__": "__student__", "__errors__": {}}
    for cell in nb.cells:
        meta = cell.metadata.get("nbgrader", {})
        if cell.cell_type != "code" or meta.get("grade") or _grade_id(cell) in skip:
            continue
        source = "\n".join("" if line.lstrip().startswith(("%", "!")) else line for line in cell.source.splitlines())
        try:
            exec(compile(source, f"<{_grade_id(cell)}>", "exec"), namespace)
        except Exception as exc:  # a failing student cell does not stop the notebook
            namespace["__errors__"][_grade_id(cell)] = exc
    return namespace
