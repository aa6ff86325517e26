"""Every assignment of the registry gets the course's feedback page: its notebooks listed in its own
order, its own checks with their titles and misconceptions. Real ``nbgrader generate_assignment``
and ``generate_feedback`` on a copy of the course; the scores are put in the gradebook directly
(grading itself is tests/grading/'s), so no sandbox runs here."""

from __future__ import annotations

import re
import shutil
from html import unescape

import pytest
from nbgrader.api import Gradebook

from attention_platform.course.directory import nbgrader
from grader_tests.registry import ASSIGNMENTS, GRADE_ID_PREFIX, assignment

pytestmark = pytest.mark.slow  # real nbgrader commands

STUDENT = "ana"


@pytest.mark.parametrize("name", sorted(ASSIGNMENTS))
def test_each_assignment_has_its_feedback_page(tmp_path, released_course, name):
    registered = assignment(name)
    first_failed = registered.checks[0]
    course = released_course(tmp_path / "course", name)
    # As autograde leaves it: the notebooks in autograded/, a score for every graded cell
    shutil.copytree(course / "release" / name, course / "autograded" / STUDENT / name)
    with Gradebook("sqlite:///" + str(course / "gradebook.db")) as gb:
        gb.update_or_create_student(STUDENT)
        gb.add_submission(name, STUDENT)
        for notebook, checks in registered.notebook_checks.items():
            for check in checks:
                grade = gb.find_grade(GRADE_ID_PREFIX + check.id, notebook, name, STUDENT)
                grade.auto_score = 0.0 if check is first_failed else float(check.points)
        gb.db.commit()
    nbgrader(course, "generate_feedback", name, "--force", check=True)

    main = registered.notebooks[0]
    html = (course / "feedback" / STUDENT / name / f"{main}.html").read_text()
    scores = html.split('id="notebook-scores"', 1)[1].split("</table>", 1)[0]
    listed = [re.sub(r"<[^>]+>", "", cell).removesuffix(" (this page)")
              for cell in re.findall(r"<tr[^>]*>\s*<td>(.*?)</td>", scores.split("<tbody>", 1)[1])]
    assert listed == list(registered.notebooks)
    summary = html.split('id="check-summary"', 1)[1].split("</table>", 1)[0]
    rows = re.findall(r'<tr [^>]*data-grade-id="([^"]+)" data-state="([^"]+)"', summary)
    checks = registered.notebook_checks.get(main, [])
    assert [grade_id for grade_id, _ in rows] == [GRADE_ID_PREFIX + c.id for c in checks]
    shown = " ".join(unescape(re.sub(r"<[^>]+>", " ", html)).split())
    for check in checks:
        assert check.title in shown
    if first_failed in checks:
        assert dict(rows)[GRADE_ID_PREFIX + first_failed.id] == "failed"
        assert "Idea to revisit: " + first_failed.misconception in shown


@pytest.mark.parametrize("name", sorted(ASSIGNMENTS))
def test_the_tas_submission_view_titles_each_assignments_checks(name):
    """The formgrader's submission view (FormgradeSummary, given the resources nbgrader's submission
    handler gives it) rows each check of the assignment's main notebook under its title."""
    import nbformat
    from nbformat.v4 import new_output

    from attention_platform.course.notebooks import COURSE_ROOT
    from attention_platform.reporting.feedback import FormgradeSummary

    registered = assignment(name)
    main = registered.notebooks[0]
    nb = nbformat.read(COURSE_ROOT / "release" / name / f"{main}.ipynb", as_version=4)
    checks = registered.notebook_checks.get(main, [])
    for cell in nb.cells:  # as autograde leaves them: every check ran and passed
        if cell.metadata.get("nbgrader", {}).get("grade_id", "").startswith(GRADE_ID_PREFIX):
            cell.outputs = [new_output("stream", name="stdout", text="ok\n")]
    _, resources = FormgradeSummary().preprocess(nb, {"assignment_id": name, "notebook_id": main})
    assert [(row["grade_id"], row["title"], row["state"]) for row in resources["attention_formgrade"]] == \
        [(GRADE_ID_PREFIX + c.id, c.title, "passed") for c in checks]
