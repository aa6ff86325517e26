"""Reading the course notebooks (typing answers into them: ``grader_tests.proofs``)."""

from __future__ import annotations

from pathlib import Path

import nbformat

# ASSIGNMENT, NOTEBOOK(S) and the answer helpers are the self-attention assignment's, kept here only for
# the modules that still serve that one assignment alone (the rest take the assignment as an argument).
from grader_tests.self_attention.answers import (ANSWERED_METHODS, ASSIGNMENT, CLASS_CELL_ID, NOTEBOOK, NOTEBOOKS,
                                                 PART_NOTEBOOKS, class_cell, class_namespace, with_answer,
                                                 with_methods)
from grader_tests.proofs import run_cells, solved, with_edits

COURSE_ROOT = Path(__file__).resolve().parents[2]


def release_notebook(course_root: Path = COURSE_ROOT, notebook: str = NOTEBOOK) -> nbformat.NotebookNode:
    return nbformat.read(course_root / "release" / ASSIGNMENT / notebook, as_version=4)


def source_notebook(course_root: Path = COURSE_ROOT, notebook: str = NOTEBOOK) -> nbformat.NotebookNode:
    return nbformat.read(course_root / "source" / ASSIGNMENT / notebook, as_version=4)

__all__ = ["ANSWERED_METHODS", "ASSIGNMENT", "CLASS_CELL_ID", "NOTEBOOK", "NOTEBOOKS", "PART_NOTEBOOKS", "class_cell",
           "class_namespace", "run_cells", "solved", "with_answer", "with_edits", "with_methods"]
