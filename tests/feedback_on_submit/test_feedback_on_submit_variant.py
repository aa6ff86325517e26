"""Feedback on submit's page of a student with numbers of their own names their variant, as the TA's
page does: the id comes from the real course's key and switch, never from the scratch course the page
is made in (attention_platform/feedback_on_submit/engine.py, attention_platform/reporting/feedback.py),
and a page kept for reuse is not reused once the variant it names has changed (reporting/page_reuse.py),
while the TA's generate_feedback reuses the pages made on submit of the graded notebook it finds.

A real ``GenerateFeedback`` through ``Engine.feedback_pages`` on a released course; the attempt's
graded notebook is the release itself (no grading is needed for the page to say whose numbers it judged)."""

from __future__ import annotations

import datetime as dt
import shutil

import pytest

from attention_platform.attempts.policy import Policy
from attention_platform.course import variants
from attention_platform.feedback_on_submit.engine import Attempt, Engine, Result
from attention_platform.feedback_on_submit.intake import Intake
from grader_tests.registry import ASSIGNMENTS

WITH_VARIANTS = sorted(name for name in ASSIGNMENTS if variants.offered(name))
# nbgrader's own default: the course root is the directory a command runs in (the scratch course, for
# feedback on submit's pages)
ROOT_LEFT_TO_NBGRADER = '\nc.CourseDirectory.pop("root", None)\n'


def _pages(course, assignment: str) -> list[str]:
    """Feedback on submit's pages of ann's attempt (the release, as graded) in ``course``."""
    from nbgrader.api import Gradebook

    engine = Engine(course).start()
    try:
        engine.ensure_definition(assignment)
        graded = engine.work / "autograded" / "ann" / assignment
        if not graded.exists():
            shutil.copytree(course / "release" / assignment, graded)
            shutil.copytree(graded, engine.work / "submitted" / "ann" / assignment)
            with Gradebook(engine.scratch.db_url) as gb:
                gb.update_or_create_student("ann")
                gb.add_submission(assignment, "ann", timestamp=dt.datetime(2020, 1, 1))
        attempt = Attempt(id=1, assignment=assignment, student="ann", submission="ann", intake=Intake(folder=graded),
                          timestamp=dt.datetime(2020, 1, 1), policy=Policy(assignment=assignment, feedback="checks"))
        result = Result()
        engine.feedback_pages(attempt, result)
        assert result.notes == []
    finally:
        engine.close()
    pages = [page.read_text() for page in sorted((engine.work / "feedback" / "ann" / assignment).glob("*.html"))]
    assert pages
    return pages


@pytest.mark.parametrize("root_named", [True, False], ids=["course-config-names-its-root", "root-left-to-nbgrader"])
@pytest.mark.parametrize("assignment", WITH_VARIANTS)
def test_a_page_made_on_submit_names_the_students_variant_from_the_real_course(tmp_path, released_course,
                                                                                assignment, root_named):
    course = released_course(tmp_path / "course", assignment)
    if not root_named:
        with open(course / "nbgrader_config.py", "a") as config:
            config.write(ROOT_LEFT_TO_NBGRADER)
    variants.switch(course, assignment, True)
    expected = variants.variant_id(course, assignment, "ann")
    assert expected
    key = variants.course_key(course)
    for page in _pages(course, assignment):
        assert f"(variant\n    {expected})" in page
        assert key.hex() not in page.lower()


@pytest.mark.parametrize("assignment", WITH_VARIANTS)
def test_a_kept_page_is_not_reused_once_the_students_variant_changed(tmp_path, released_course, assignment):
    course = released_course(tmp_path / "course", assignment)
    variants.switch(course, assignment, True)
    first = variants.variant_id(course, assignment, "ann")
    assert all(first in page for page in _pages(course, assignment))
    variants.regenerate(course)  # forced by the instructor: ann's numbers change, her graded notebook does not
    second = variants.variant_id(course, assignment, "ann")
    assert second != first
    again = _pages(course, assignment)
    assert all(second in page and first not in page for page in again)
    variants.switch(course, assignment, False)
    assert all('id="variant"' not in page for page in _pages(course, assignment))


def _graded(pipeline, router, course_id: str, assignment: str, src, compact: bool) -> None:
    """ann's submission ``src`` through ``pipeline``'s autograde steps but the sandbox (the release has no
    output to judge): the same steps feedback on submit's attempt and the TA's autograde take."""
    with router.opened(pipeline.db_url, course_id) as (gb, session):
        dest = pipeline.autograded("ann", assignment)
        pipeline.stage(gb, "ann", assignment, src, dest, timestamp=dt.datetime(2020, 1, 1))
        session.commit()
        for path in sorted(src.glob("*.ipynb")):
            resources = pipeline.resources("ann", assignment, path.stem, dest)
            pipeline.finish(pipeline.read(path, resources), resources, dest, path.stem, compact=compact)
            session.commit()


@pytest.mark.parametrize("counts", ["collected", "installed"])
@pytest.mark.parametrize("assignment", sorted(ASSIGNMENTS))
def test_the_tas_generate_feedback_reuses_the_pages_made_on_submit(tmp_path, released_course, assignment, counts,
                                                                    monkeypatch):
    """The TA's generate_feedback of the graded notebook feedback on submit made its pages of makes none
    again, whether the TA collected and autograded that attempt (``collected``) or feedback on submit
    installed it as the one that counts (``last``, ``best``). Feedback on submit names the real course for
    the variant (``FeedbackSummary.variants_course``), the TA's nbgrader its own root; the variant is in the
    key either way."""
    from nbgrader.converters import GenerateFeedback
    from nbgrader.coursedir import CourseDirectory

    from attention_platform.attempts.policy import load_config
    from attention_platform.reporting.safe_html import FeedbackHTMLExporter

    course = released_course(tmp_path / "course", assignment)
    if variants.offered(assignment):
        variants.switch(course, assignment, True)
    engine = Engine(course).start()
    try:
        engine.ensure_definition(assignment)
        submitted = engine.scratch.submitted("ann", assignment)
        shutil.copytree(course / "release" / assignment, submitted)
        _graded(engine.scratch, engine.router, engine.course_id, assignment, submitted, compact=True)
        attempt = Attempt(id=1, assignment=assignment, student="ann", submission="ann",
                          intake=Intake(folder=tmp_path / "intake"), timestamp=dt.datetime(2020, 1, 1),
                          policy=Policy(assignment=assignment, feedback="full", counts="last"))
        engine.feedback_pages(attempt, Result())
        on_submit = {page.name: page.read_text() for page in engine.scratch.root.glob(f"feedback/ann/{assignment}/*.html")}
        archived = engine.archive(attempt)
        if counts == "installed":
            engine.install(1, "ann", assignment, dt.datetime(2020, 1, 1))
        else:  # the TA's collect and autograde
            shutil.copytree(archived / "submitted", engine.main.submitted("ann", assignment))
            _graded(engine.main, engine.router, engine.course_id, assignment,
                    engine.main.submitted("ann", assignment), compact=False)
    finally:
        engine.close()
    assert len(on_submit) == len(list((course / "release" / assignment).glob("*.ipynb")))
    made, render = [], FeedbackHTMLExporter._rendered
    monkeypatch.setattr(FeedbackHTMLExporter, "_rendered", lambda self, nb, resources, **kw: (
        made.append(resources["nbgrader"]["notebook"]) or render(self, nb, resources, **kw)))
    config = load_config(course)
    coursedir = CourseDirectory(config=config)
    coursedir.assignment_id, coursedir.student_id = assignment, "ann"
    app = GenerateFeedback(coursedir=coursedir, config=config)
    app.force = True
    app.start()
    assert made == [], f"the TA's generate_feedback made again the pages made on submit: {made}"
    assert {page.name: page.read_text() for page in (course / "feedback" / "ann" / assignment).glob("*.html")} == on_submit
