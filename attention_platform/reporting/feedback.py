"""The student's feedback page: what it says at the top, and how each graded cell reads.

nbgrader's feedback page listed "Test cell (Score: 0.0 / 2.0)" per check, showed failure
messages in one-line boxes that scroll sideways, "(1 points)", raw tracebacks under
unanswered cells and no total for the assignment. ``FeedbackSummary`` (a preprocessor that
runs after nbgrader's ``GetGrades`` in ``generate_feedback``) gathers what the page needs into
``resources["attention"]`` and each graded cell's ``metadata["attention"]``; the template
``templates/attention_feedback/index.html.j2`` lays it out:

* at the top, the assignment's total and one line per notebook (each a link to its own page,
  so every page is also the index of the submission), then one row per graded item of this
  notebook: its full title (from the check registry, never cut), ✓/✗/– as text, its points
  ("1 point"), and for a failed check the misconception in one line, linking to the cell;
* at each check cell, the teaching message, whole and wrapped; no code of the check;
* an answer still holding its stub reads "not answered", without a traceback; a written
  answer a TA has not graded yet reads "waiting for a TA".

Titles and misconceptions come from the assignment's checks in ``grader_tests.registry`` (the
grader's copy); messages are the judges' own, which name shapes and ideas, never the hidden inputs.
"""

from __future__ import annotations

import os
import re

from nbgrader.preprocessors import NbGraderPreprocessor
from nbgrader.utils import is_grade, is_solution
from traitlets import Unicode

from attention_platform.course import variants
from attention_platform.course.assignment_checks import by_notebook_order, checks_by_grade_id
from attention_platform.grading.preprocessors import is_check_cell
from attention_platform.reporting import read_once
from attention_platform.reporting.rubrics import rubrics_beside_answers

PASSED, FAILED, NOT_ANSWERED, WAITING, GRADED = "passed", "failed", "not answered", "waiting for a TA", "graded"
MARKS = {PASSED: "✓", FAILED: "✗", NOT_ANSWERED: "–", WAITING: "…", GRADED: "✓"}
_STUB = re.compile(r"^\s*raise\s+NotImplementedError\b", re.MULTILINE)
_COMMENT_TITLE = re.compile(r"^#\s*Hidden check[^:]*:\s*(.+)$", re.MULTILINE)


def points(value) -> str:
    """``1 point``, ``2 points``, ``1.5 points``."""
    number = float(value or 0)
    text = f"{number:g}"
    return f"{text} point" if number == 1 else f"{text} points"


def score_of(got, out_of) -> str:
    return f"{float(got or 0):g} of {points(out_of)}"


def is_unanswered(cell) -> bool:
    if cell.cell_type == "markdown":
        return "YOUR ANSWER HERE" in cell.source
    return bool(_STUB.search(cell.source))


def _failure_message(cell) -> str:
    for output in cell.get("outputs", []):
        if output.get("output_type") == "error":
            return str(output.get("evalue", "")).strip() or str(output.get("ename", "failed"))
    return ""


def _heading_before(nb, index: int) -> str:
    for cell in reversed(nb.cells[:index]):
        if cell.cell_type == "markdown":
            for line in cell.source.splitlines():
                if line.startswith("#"):
                    return line.lstrip("#").strip()
    return ""


def _variant(config, assignment: str, student: str, course: str = "") -> str:
    """The id of the student's own numbers in ``assignment`` ("" when they had the release's), by the key
    and switch of ``course`` (default: the CourseDirectory's root)."""
    from nbgrader.coursedir import CourseDirectory

    return variants.variant_id(course or CourseDirectory(config=config).root, assignment, student)


class FeedbackSummary(NbGraderPreprocessor):
    """Collects the feedback page's summary (see the module docstring)."""

    not_answered_marker = Unicode(
        "NotImplementedError",
        help="A failed check whose message names this was failed because the answer is still a stub: "
             "its row reads 'not answered' rather than naming a misconception.",
    ).tag(config=True)
    variants_course = Unicode(
        "",
        help="The course directory whose variant key and switches name the student's variant on the page; "
             "empty: the CourseDirectory's root. Feedback on submit makes its pages in a scratch course and "
             "sets its real course here.",
    ).tag(config=True, in_page_key="variant")  # the variant it finds is in a kept page's key (page_reuse)

    def variant(self, assignment: str, student: str) -> str:
        """The variant id this page names (page_reuse keeps it in a kept page's key)."""
        return _variant(self.config, assignment, student, self.variants_course)

    def preprocess(self, nb, resources):
        from nbgrader.api import Gradebook

        info = resources["nbgrader"]
        checks = checks_by_grade_id(info["assignment"])
        stubs_left = any(is_solution(c) and is_unanswered(c) for c in nb.cells)
        rows = []
        for cell in nb.cells:
            if cell.cell_type == "code" and not is_check_cell(cell):
                self._shorten_errors(cell, stubs_left)
        with Gradebook(info["db_url"]) as gb:
            for index, cell in enumerate(nb.cells):
                if not is_grade(cell) and not (is_solution(cell) and is_unanswered(cell)):
                    continue
                grade_id = cell.metadata.nbgrader.get("grade_id", "")
                if is_solution(cell) and is_unanswered(cell):
                    cell.outputs = [] if cell.cell_type == "code" else cell.get("outputs", [])
                if not is_grade(cell):
                    cell.metadata["attention"] = {"kind": "answer", "state": NOT_ANSWERED, "mark": MARKS[NOT_ANSWERED]}
                    continue
                grade = gb.find_grade(grade_id, info["notebook"], info["assignment"], info["student"])
                max_score = float(grade.max_score or 0)
                if is_check_cell(cell):
                    row = self._check_row(cell, grade, max_score, checks.get(grade_id), stubs_left)
                else:
                    row = self._answer_row(nb, index, cell, grade, max_score)
                row.update(grade_id=grade_id, points=points(max_score), mark=MARKS[row["state"]],
                           score=score_of(row["got"], max_score) if row["got"] is not None else "")
                cell.metadata["attention"] = row
                rows.append(row)
            folder = resources.get("metadata", {}).get("path", "")
            resources["attention"] = {"rows": rows, **self._totals(gb, info, folder),
                                      "variant": self.variant(info["assignment"], info["student"])}
        return nb, resources

    def _shorten_errors(self, cell, stubs_left: bool) -> None:
        """An error in the student's own cells reads as one line, never a traceback; one that only
        says a stub was called (a "try it" cell below an unanswered one) says so."""
        for output in cell.get("outputs", []):
            if output.get("output_type") != "error":
                continue
            first = (str(output.get("evalue", "")).strip().splitlines() or [""])[0]
            if stubs_left and output.get("ename") == "NotImplementedError":
                line = "Not run to the end: it calls code that is still a stub (NotImplementedError)."
            else:
                line = f"{output.get('ename', 'Error')}: {first}" if first else str(output.get("ename", "Error"))
            output["traceback"] = [line]

    def _check_row(self, cell, grade, max_score, check, stubs_left) -> dict:
        got = grade.manual_score if grade.manual_score is not None else grade.auto_score
        title = check.title if check is not None else (_COMMENT_TITLE.findall(cell.source) or [cell.metadata.nbgrader.grade_id])[0]
        message = _failure_message(cell)
        if got is not None and float(got) >= max_score:
            state = PASSED
        elif stubs_left and self.not_answered_marker in message:
            state = NOT_ANSWERED
        else:
            state = FAILED
        figures = [{"png": o["data"]["image/png"], "alt": o.get("metadata", {}).get("image/png", {}).get("alt", title)}
                   for o in cell.get("outputs", []) if o.get("output_type") == "display_data"
                   and "image/png" in o.get("data", {}) and o.get("metadata", {}).get("attention_course")]
        cell.outputs = []  # the page shows the verdict and the message itself, never a traceback
        return {"kind": "check", "title": title, "state": state, "got": got if got is not None else 0, "figures": figures,
                "misconception": check.misconception if (check is not None and state == FAILED) else "",
                "message": message if state == FAILED else ""}

    def _answer_row(self, nb, index, cell, grade, max_score) -> dict:
        title = _heading_before(nb, index) or cell.metadata.nbgrader.get("grade_id", "")
        if is_solution(cell) and is_unanswered(cell):
            return {"kind": "written", "title": title, "state": NOT_ANSWERED, "got": 0, "misconception": "", "message": ""}
        got = grade.manual_score if grade.manual_score is not None else grade.auto_score
        if grade.needs_manual_grade and grade.manual_score is None:
            return {"kind": "written", "title": title, "state": WAITING, "got": None, "misconception": "", "message": ""}
        return {"kind": "written", "title": title, "state": GRADED, "got": got or 0, "misconception": "", "message": ""}

    def _totals(self, gb, info, folder: str) -> dict:
        """The page's summary of the whole submission and of this notebook (the submission's part is
        read once for all of its pages where the gradebook is held: :mod:`.read_once`)."""
        whole = read_once.once(info["db_url"], ("totals", info["assignment"], info["student"], folder),
                               lambda: self._submission_totals(gb, info, folder))
        notebooks = [{**notebook, "current": notebook["name"] == info["notebook"]} for notebook in whole["notebooks"]]
        return {**whole, "notebooks": notebooks, "notebook_score": score_of(info.get("score"), info.get("max_score"))}

    def _submission_totals(self, gb, info, folder: str) -> dict:
        submission = gb.find_submission(info["assignment"], info["student"])
        order = by_notebook_order(info["assignment"])
        notebooks, waiting = [], 0.0
        for notebook in sorted(submission.notebooks, key=lambda n: order(n.name)):
            pending = sum(float(g.max_score or 0) for g in notebook.grades
                          if g.needs_manual_grade and g.manual_score is None)
            waiting += pending
            # nbgrader scores a notebook missing from the submission 0: the page says "not submitted"
            submitted = not folder or os.path.exists(os.path.join(folder, notebook.name + ".ipynb"))
            notebooks.append({"name": notebook.name, "href": f"{notebook.name}.html",
                              "submitted": submitted, "out_of": points(notebook.max_score),
                              "score": score_of(notebook.score, notebook.max_score), "waiting": points(pending) if pending else ""})
        return {"assignment": info["assignment"], "total": score_of(submission.score, submission.max_score),
                "late": self._late(gb, info, submission),
                "waiting": points(waiting) if waiting else "", "notebooks": notebooks}


    def _late(self, gb, info, submission) -> str:
        """How late the submission was by the student's own deadline, and what that cost; "" if on time."""
        from nbgrader.coursedir import CourseDirectory

        from attention_platform.deadlines.standing import Deadlines, DeadlinesError

        if submission.timestamp is None:
            return ""
        try:
            deadlines = Deadlines(CourseDirectory(config=self.config).root, db_url=info["db_url"], gradebook=gb)
        except DeadlinesError:
            return ""  # the grade stands as the gradebook has it; the TA's log says what is wrong
        found = deadlines.standing(info["assignment"], info["student"], submission.timestamp, submission.timestamp)
        return late_note(found, float(submission.late_submission_penalty or 0),
                         float(submission.score or 0), float(submission.max_score or 0))


def late_note(found, penalty: float, score: float, out_of: float) -> str:
    """The feedback page's sentence on a late submission (``found``: its Standing); "" if on time."""
    if found.state not in ("late", "closed"):
        return ""
    late = f"Submitted {found.late_text()} after your deadline, {found.deadline_text()}"
    after = f"; your total after it is {score_of(max(0.0, score - penalty), out_of)}" if penalty else ""
    if found.state == "closed":
        return f"{late}, after this assignment closed to you: it does not count{after}."
    if found.policy is not None and found.policy.kind == "late_days":
        return f"{late}: it used {found.late_days_text()}, without penalty."
    if found.policy is not None:
        return f"{late}: {found.penalty_percent:g}% of the score is taken under this assignment's late policy " \
               f"({points(penalty)}){after}."
    return f"{late}: the late penalty is {points(penalty)}{after}." if penalty else f"{late}."


class FormgradeSummary(NbGraderPreprocessor):
    """The TA's submission view: the same one-row-per-check summary as the student's feedback,
    read from the autograded notebook's check cells (``resources["attention_formgrade"]``), and
    each written answer's rubric on the answer (``rubrics.rubrics_beside_answers``)."""

    def preprocess(self, nb, resources):
        checks = checks_by_grade_id(str(resources.get("assignment_id", "")))  # nbgrader's submission view sets it
        rubrics_beside_answers(nb)  # each rubric above its answer's score box, as the rubric
        rows = []
        stubs_left = any(is_solution(c) and is_unanswered(c) for c in nb.cells)
        for cell in nb.cells:
            if not is_check_cell(cell):
                continue
            grade_id = cell.metadata.nbgrader.get("grade_id", "")
            check = checks.get(grade_id)
            message = _failure_message(cell)
            ran = any(o.get("output_type") in ("stream", "error") for o in cell.get("outputs", []))
            if not ran:
                state = "not run"
            elif not message:
                state = PASSED
            elif stubs_left and "NotImplementedError" in message:
                state = NOT_ANSWERED
            else:
                state = FAILED
            rows.append({"grade_id": grade_id, "state": state, "mark": MARKS.get(state, "?"),
                         "title": check.title if check is not None else grade_id,
                         "points": points(cell.metadata.nbgrader.get("points", 0)),
                         "misconception": check.misconception if (check is not None and state == FAILED) else "",
                         "message": message if state == FAILED else ""})
        resources["attention_formgrade"] = rows
        resources["attention_variant"] = _variant(self.config, str(resources.get("assignment_id", "")),
                                                  str(resources.get("student", "")))
        return nb, resources
