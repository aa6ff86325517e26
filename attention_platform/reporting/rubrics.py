"""A written answer's rubric: for the TA who grades it, never for the student.

The course's convention (docs/instructors/assignment.md): a TA-graded answer cell is followed by a
locked markdown cell ``rubric_<answer id>`` whose rubric sits between ``### BEGIN MARK SCHEME`` and
``### END MARK SCHEME``. The release keeps only the cell's note to students; autograde restores the
whole cell from the instructor's copy. Here:

* :func:`rubrics_beside_answers` (the TA's submission view, via ``FormgradeSummary``): each rubric
  goes to its answer cell (``metadata["attention_rubric"]``), shown above the answer's score box
  as the rubric, and its own cell leaves the view;
* :class:`DropRubrics` (the feedback page): rubric cells leave the student's page altogether:
  their mark scheme is the TA's, and the note left of them speaks of grading still to come.
"""

from __future__ import annotations

from nbgrader.preprocessors import NbGraderPreprocessor

RUBRIC_PREFIX = "rubric_"
BEGIN, END = "BEGIN MARK SCHEME", "END MARK SCHEME"


def rubric_of(cell) -> str | None:
    """The answer id a rubric cell is for, or None if ``cell`` is no rubric cell."""
    grade_id = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id", "")
    if cell.cell_type != "markdown" or not grade_id.startswith(RUBRIC_PREFIX):
        return None
    return grade_id[len(RUBRIC_PREFIX):]


def mark_scheme(source: str) -> str:
    """The text between the mark scheme's delimiters ('' if there is none)."""
    lines, inside, kept = source.splitlines(), False, []
    for line in lines:
        if BEGIN in line:
            inside = True
        elif END in line:
            inside = False
        elif inside:
            kept.append(line)
    return "\n".join(kept).strip()


def rubrics_beside_answers(nb):
    """``nb`` with each rubric's mark scheme on its answer cell and the rubric cells taken out."""
    answers = {cell.metadata.nbgrader["grade_id"]: cell for cell in nb.cells
               if cell.get("metadata", {}).get("nbgrader", {}).get("grade_id") and rubric_of(cell) is None}
    kept = []
    for cell in nb.cells:
        answer_id = rubric_of(cell)
        if answer_id is None:
            kept.append(cell)
        elif answer_id in answers and mark_scheme(cell.source):
            answers[answer_id].metadata["attention_rubric"] = mark_scheme(cell.source)
        # a rubric whose answer is gone, or without a mark scheme, has nothing for the TA either
    nb.cells = kept
    return nb


class DropRubrics(NbGraderPreprocessor):
    """The feedback page without rubric cells (see the module docstring)."""

    def preprocess(self, nb, resources):
        nb.cells = [cell for cell in nb.cells if rubric_of(cell) is None]
        return nb, resources
