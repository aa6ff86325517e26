"""Reading the course notebooks (typing answers into them: ``grader_tests.proofs``)."""

from __future__ import annotations

from pathlib import Path

import nbformat

from grader_tests.self_attention.answers import ANSWERED_METHODS, CLASS_CELL_ID, class_cell, class_namespace, with_answer, with_methods
from grader_tests.proofs import run_cells, solved, with_edits

COURSE_ROOT = Path(__file__).resolve().parents[2]
ASSIGNMENT = "self_attention"
NOTEBOOK = "self_attention.ipynb"
# The assignment's further parts, each its own notebook.
PART_NOTEBOOKS = ("02_by_hand.ipynb", "03_head_and_bias.ipynb", "04_shapes_and_cost.ipynb",
                  "05_experiments.ipynb", "06_explain.ipynb")
NOTEBOOKS = (NOTEBOOK, *PART_NOTEBOOKS)


def release_notebook(course_root: Path = COURSE_ROOT, notebook: str = NOTEBOOK) -> nbformat.NotebookNode:
    return nbformat.read(course_root / "release" / ASSIGNMENT / notebook, as_version=4)


def source_notebook(course_root: Path = COURSE_ROOT, notebook: str = NOTEBOOK) -> nbformat.NotebookNode:
    return nbformat.read(course_root / "source" / ASSIGNMENT / notebook, as_version=4)

__all__ = ["ANSWERED_METHODS", "CLASS_CELL_ID", "class_cell", "class_namespace", "run_cells", "solved",
           "with_answer", "with_edits", "with_methods"]
