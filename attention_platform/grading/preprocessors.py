"""nbgrader preprocessors that keep hidden checks hidden and grades fair.

Registered in ``nbgrader_config.py``: ``SanitizeCheckOutputs`` runs in autograde
right after execution and again in generate_feedback; ``HideCheckCode`` runs in
generate_feedback.
"""

from __future__ import annotations

from nbformat.notebooknode import NotebookNode
from nbgrader.preprocessors import NbGraderPreprocessor, OverwriteCells
from nbgrader.utils import is_grade, is_solution
from traitlets import Bool, Unicode


def is_check_cell(cell: NotebookNode) -> bool:
    """An autograded test cell: a grade cell that is not a student's answer."""
    return cell.cell_type == "code" and is_grade(cell) and not is_solution(cell)


class SanitizeCheckOutputs(NbGraderPreprocessor):
    """Reduce every check cell's outputs to what a student may see.

    nbgrader scores a test cell 0 if it wrote anything to stderr, so a correct
    answer that emits a harmless warning would lose its points; and a traceback
    shows the hidden check's code. This keeps the stdout, turns each error into
    one line ``Name: message`` and drops stderr."""

    drop_stderr = Bool(
        True, help="Remove stderr streams from check cells so a warning does not zero a passing check."
    ).tag(config=True)
    one_line_errors = Bool(
        True, help="Replace each check cell's traceback by 'ErrorName: message', hiding the check's code."
    ).tag(config=True)

    def preprocess_cell(self, cell, resources, index):
        if not is_check_cell(cell):
            return cell, resources
        outputs = []
        for output in cell.get("outputs", []):
            if self.drop_stderr and output.output_type == "stream" and output.name == "stderr":
                continue
            if self.one_line_errors and output.output_type == "error":
                output.traceback = [f"{output.ename}: {output.evalue}"]
            outputs.append(output)
        cell.outputs = outputs
        return cell, resources


class HideCheckCode(NbGraderPreprocessor):
    """Remove the hidden-test region from check cells of a feedback notebook.

    Only the comment naming the check and its points stays; nbgrader's own
    feedback keeps the hidden code (jupyter/nbgrader#917, #1363)."""

    begin = Unicode("### BEGIN HIDDEN TESTS", help="Line that opens a hidden-test region.").tag(config=True)
    end = Unicode("### END HIDDEN TESTS", help="Line that closes a hidden-test region.").tag(config=True)

    def preprocess_cell(self, cell, resources, index):
        if not is_check_cell(cell):
            return cell, resources
        kept, hidden = [], False
        for line in cell.source.splitlines():
            stripped = line.strip()
            if stripped == self.begin:
                hidden = True
            elif stripped == self.end:
                hidden = False
            elif not hidden:
                kept.append(line)
        cell.source = "\n".join(kept)
        return cell, resources


class RestoreCellMetadata(NbGraderPreprocessor):
    """Put the instructor's nbgrader metadata back on every known cell.

    A submission whose cell metadata was edited (points raised, a check cell
    turned into an ordinary cell, a grade id invented) is otherwise rejected by
    nbgrader with "Inconsistent checksums". Cells are matched by grade id; an
    id the instructor never wrote loses its nbgrader metadata, and cells that
    are gone are restored later by ``OverwriteCells.add_missing_cells``."""

    def preprocess(self, nb, resources):
        from nbgrader.api import Gradebook

        info = resources["nbgrader"]
        with Gradebook(info["db_url"]) as gb:
            source_nb = gb.find_notebook(info["notebook"], info["assignment"])
            source = {c.name: (c.cell_type, c.locked) for c in source_nb.source_cells}
            points = {c.name: c.max_score for c in source_nb.grade_cells}
            solutions = {c.name for c in source_nb.solution_cells}
            tasks = {c.name for c in source_nb.task_cells}
        for cell in nb.cells:
            meta = cell.metadata.get("nbgrader")
            if not isinstance(meta, dict):
                continue
            grade_id = meta.get("grade_id")
            if grade_id not in source and grade_id not in points:
                if meta.get("grade") or meta.get("solution") or meta.get("locked") or meta.get("task"):
                    self.log.warning("Dropping nbgrader metadata of unknown cell %r", grade_id)
                del cell.metadata["nbgrader"]
                continue
            meta["grade"] = grade_id in points
            meta["solution"] = grade_id in solutions
            meta["task"] = grade_id in tasks
            if grade_id in source:
                cell_type, locked = source[grade_id]
                meta["locked"] = bool(locked)
                if cell.cell_type != cell_type:
                    self.log.warning("Cell %r had its type changed; restoring %s", grade_id, cell_type)
                    cell.cell_type = cell_type
                    if cell_type == "code":
                        cell.setdefault("outputs", [])
                        cell.setdefault("execution_count", None)
                    else:
                        cell.pop("outputs", None)
                        cell.pop("execution_count", None)
            if grade_id in points:
                meta["points"] = points[grade_id]
            else:
                meta.pop("points", None)
        return nb, resources


class RestoreCheckCells(OverwriteCells):
    """nbgrader's OverwriteCells, without a warning for what happens to every submission.

    A locked cell of a submission as released never matches the instructor's copy: the release
    leaves out a check cell's hidden tests and a rubric cell's mark scheme. Stock nbgrader logged
    "Attribute 'checksum' for cell … has changed!" for each of them in every submission, burying the
    real warnings. Such a cell is still restored from the instructor's copy, and that is logged at
    debug level; a locked cell the student edited is restored too, with a warning that says where
    to look. A student with numbers of their own (attention_platform/course/variants.py) hands in
    input cells that hold them: no edit, and grading writes them back from the course's key."""

    def preprocess(self, nb, resources):
        from nbgrader.coursedir import CourseDirectory

        from attention_platform.course import variants

        who = resources.get("nbgrader", {})
        found = variants.cells(CourseDirectory(config=self.config).root, str(who.get("assignment", "")),
                               str(who.get("student", "")))
        self._own_numbers, self._own_edits = ((found[1], found[2]) if found is not None and found[0] == who.get("notebook")
                                              else ({}, {}))
        return super().preprocess(nb, resources)

    def _as_the_students_own(self, grade_id: str) -> bool:
        """Whether the submitted cell is the one the student's own numbers made of it."""
        if grade_id in self._own_numbers:
            return self._own_numbers[grade_id] == self._submitted_source
        if grade_id not in self._own_edits:
            return False
        own = self.gradebook.find_source_cell(grade_id, self.notebook_id, self.assignment_id).source
        for old, new in self._own_edits[grade_id]:
            own = own.replace(old, new)
        return own == self._submitted_source

    def preprocess_cell(self, cell, resources, cell_index):
        self._restoring_check = is_check_cell(cell)
        self._submitted_source = cell.source
        return super().preprocess_cell(cell, resources, cell_index)

    def report_change(self, name, attr, old, new):
        if attr == "checksum" and getattr(self, "_restoring_check", False):
            self.log.debug("Hidden-check cell %s restored from the instructor's copy", name)
            return
        if attr == "checksum" and self._as_the_students_own(name):
            self.log.debug("Locked cell %s: the student's own numbers, written back after the instructor's copy", name)
            return
        if attr == "checksum" and self._as_released(name):
            self.log.debug("Locked cell %s: its mark scheme restored from the instructor's copy", name)
            return
        if attr == "checksum":
            self.log.warning(
                "Locked cell %s of %s was edited in this submission; it is graded with the instructor's copy. "
                "If the student wrote work into it, that work is not graded: see their notebook in "
                "submitted/<student>/%s/ and grade it by hand.", name, self.notebook_id, self.assignment_id)
            return
        super().report_change(name, attr, old, new)

    def _as_released(self, grade_id: str) -> bool:
        """Whether the submitted cell is the instructor's with its mark scheme cleared, as released."""
        from nbformat.v4 import new_markdown_cell
        from nbgrader.preprocessors import ClearMarkScheme

        released = new_markdown_cell(self.gradebook.find_source_cell(grade_id, self.notebook_id, self.assignment_id).source)
        ClearMarkScheme(parent=self)._remove_mark_scheme_region(released)
        return released.source == getattr(self, "_submitted_source", None)
