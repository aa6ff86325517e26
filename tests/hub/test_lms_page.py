"""The formgrader's page of grades sent to the LMS (attention_platform/formgrader/lms_page.py) on the README's
hub: TAs read what was sent, when and the LMS's answer; only an instructor's Resend queues a score again;
a student reaches neither (nothing a student posts changes a score the LMS receives)."""

from __future__ import annotations

import os
import pwd

import pytest

from attention_platform.hub.native import grader_account
from attention_platform.lms.outbox import Outbox
from attention_platform.lms.worker import outbox_path
from hub_helpers import COURSE

PAGE = f"/services/{COURSE}/formgrader/lms"


@pytest.mark.slow
@pytest.mark.hub
@pytest.mark.root
def test_scores_sent_are_shown_and_only_an_instructor_resends(security_hub):
    path = outbox_path(security_hub.state / "course")
    outbox = Outbox(path)
    grader = pwd.getpwnam(grader_account(COURSE))
    os.chown(path, grader.pw_uid, grader.pw_gid)  # the grader's file, as the worker makes it
    try:
        outbox.queue("lms-probe-assignment", "student1", "lms-sub-1", 7.5, 10.0, False)
        [row] = outbox.due()
        outbox.delivered(row, "204 accepted <b>by</b> the LMS")
        form = {"assignment": "lms-probe-assignment", "student": "student1"}

        student = security_hub.session("student1")
        assert student.get(PAGE).status_code == 403
        assert student.post(PAGE + "/resend", data=form).status_code == 403
        ta = security_hub.session("ta")
        page = ta.get(PAGE)
        assert page.status_code == 200 and "7.5 / 10" in page.text and "lms-probe-assignment" in page.text
        assert "&lt;b&gt;by&lt;/b&gt;" in page.text  # the LMS's answer is shown, never rendered
        assert ">Resend<" not in page.text
        assert ta.post(PAGE + "/resend", data=form).status_code == 403
        assert outbox.rows()[0]["state"] == "sent"

        instructor = security_hub.session("instructor")
        assert ">Resend<" in instructor.get(PAGE).text
        reply = instructor.post(PAGE + "/resend", data=form, allow_redirects=False)
        assert reply.status_code == 303, reply.text[:300]
        assert outbox.rows()[0]["state"] == "queued"
        missing = instructor.post(PAGE + "/resend", data=dict(form, student="nobody-here"), allow_redirects=False)
        assert missing.status_code == 404
    finally:
        outbox.close()
        path.unlink()
