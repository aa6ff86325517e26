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


def _with_rubrics_restored(course, name: str, notebook: str):
    """The released notebook as autograde leaves it: rubric cells back from the instructor's copy."""
    import nbformat

    source = nbformat.read(course / "source" / name / f"{notebook}.ipynb", as_version=4)
    nb = nbformat.read(course / "release" / name / f"{notebook}.ipynb", as_version=4)
    rubrics = {c.metadata.nbgrader["grade_id"]: c for c in source.cells
               if c.metadata.get("nbgrader", {}).get("grade_id", "").startswith("rubric_")}
    nb.cells = [rubrics.get(c.metadata.get("nbgrader", {}).get("grade_id", ""), c) for c in nb.cells]
    return nb, rubrics


def _rubric_lines(rubrics) -> list[str]:
    """A few words of each rubric's mark scheme, as they read on a page."""
    from attention_platform.reporting.rubrics import mark_scheme

    return [" ".join(unescape(re.sub(r"^[-*]\s+|[*_`]", "", mark_scheme(c.source).splitlines()[0])).split())[:40]
            for c in rubrics.values()]


@pytest.mark.parametrize("name", sorted(ASSIGNMENTS))
def test_released_feedback_carries_no_rubric(tmp_path, released_course, name):
    """Rubric cells are the TA's: neither their mark scheme nor what the release left of them (a note
    that grading is to come) is on the student's feedback page."""
    import nbformat

    registered = assignment(name)
    course = released_course(tmp_path / "course", name)
    rubric_words = []
    for notebook in registered.notebooks:
        nb, rubrics = _with_rubrics_restored(course, name, notebook)
        rubric_words += _rubric_lines(rubrics)
        (course / "autograded" / STUDENT / name).mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, course / "autograded" / STUDENT / name / f"{notebook}.ipynb")
    assert rubric_words, f"{name} has rubrics"
    with Gradebook("sqlite:///" + str(course / "gradebook.db")) as gb:
        gb.update_or_create_student(STUDENT)
        gb.add_submission(name, STUDENT)
    nbgrader(course, "generate_feedback", name, "--force", check=True)
    for notebook in registered.notebooks:
        html = (course / "feedback" / STUDENT / name / f"{notebook}.html").read_text()
        shown = " ".join(unescape(re.sub(r"<[^>]+>", " ", html)).split())
        for leak in ["MARK SCHEME", "Rubric for TAs", *rubric_words]:
            assert leak not in shown, f"{notebook}.html shows {leak!r}"


@pytest.mark.parametrize("name", sorted(ASSIGNMENTS))
def test_the_tas_submission_view_shows_each_rubric_above_its_score_box(tmp_path, name):
    """The TA reads the rubric as the rubric, above the answer's score box, without the mark-scheme
    delimiters and not as a cell under the student's text."""
    from nbgrader.server_extensions.formgrader import handlers
    from traitlets.config import Config

    from attention_platform.course.notebooks import COURSE_ROOT
    from attention_platform.formgrader.formgrader_extras import formgrade_exporter

    notebook = next(n for n in assignment(name).notebooks
                    if _with_rubrics_restored(COURSE_ROOT, name, n)[1])
    nb, rubrics = _with_rubrics_restored(COURSE_ROOT, name, notebook)
    config = Config()  # as nbgrader's formgrader configures its exporter (formgrader.py)
    config.HTMLExporter.template_name = "formgrade"
    config.HTMLExporter.extra_template_basedirs = [handlers.template_path]
    html, _ = formgrade_exporter(config).from_notebook_node(nb, resources={
        "assignment_id": name, "notebook_id": notebook, "submission_id": "s1", "index": 0, "total": 1,
        "base_url": "", "student": STUDENT, "last_name": None, "first_name": None, "notebook_path": ""})
    assert "MARK SCHEME" not in html
    for grade_id, words in zip(rubrics, _rubric_lines(rubrics)):
        answer = grade_id.removeprefix("rubric_")
        box = re.search(rf'<aside [^>]*aria-labelledby="rubric-{answer}"', html).start()
        score = re.search(rf'<input [^>]*id="{answer}"', html).start()
        assert box < score, f"the rubric of {answer} comes after its score box"
        between = " ".join(unescape(re.sub(r"<[^>]+>", " ", html[box:score])).split())
        assert words in between and "Rubric for" in between
    assert "it is added to this cell when your work is graded" not in html  # the students' note is not the rubric
