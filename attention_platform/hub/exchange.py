"""A per-student exchange layout for nbgrader's pluggable exchange (grader side only).

Stock nbgrader keeps every submission in one shared ``inbound/`` folder and all
feedback in one ``feedback/`` folder. When every account or container has the same
UID, anyone can then read and overwrite anyone's work (nbgrader #1225, #1885).
Here each student owns one folder in each::

    <root>/<course>/outbound/<assignment>/          released files (students: read-only)
    <root>/<course>/inbound/<student>/<student>+<assignment>+<timestamp>+<random>/
    <root>/<course>/feedback/<student>/<hash>.html

A student is given a *view* of the exchange in which ``inbound`` and ``feedback``
are their own folders (a bind mount in Docker, a symlink natively), so the
student side runs stock nbgrader unchanged. Only the grader needs the two classes
below: ``collect`` reads every student's folder and ``release_feedback`` writes
into the student's own feedback folder. The folder a submission sits in is the
identity that counts: a submission whose name claims another student is skipped.
"""

from __future__ import annotations

import glob
import os
import re
import shutil

from nbgrader.api import Gradebook, MissingEntry
from nbgrader.exchange.default.collect import ExchangeCollect, groupby
from nbgrader.exchange.default.release_assignment import ExchangeReleaseAssignment
from nbgrader.exchange.default.release_feedback import ExchangeReleaseFeedback
from nbgrader.utils import check_mode, notebook_hash


class PerStudentReleaseAssignment(ExchangeReleaseAssignment):
    """Release without opening the exchange root to everyone.

    Stock nbgrader forces the root to 0777 because students write into the shared
    ``inbound/``; here nobody but the grader writes above the students' own folders.
    """

    def ensure_root(self):
        if not os.path.isdir(self.root):
            os.makedirs(self.root, mode=0o755)
        if not check_mode(self.root, write=True, execute=True):
            self.fail("Unwritable exchange directory: {}".format(self.root))


class PerStudentCollect(ExchangeCollect):
    """Collect the newest submission of each student from ``inbound/<student>/``."""

    def _path_to_record(self, path):
        record = super()._path_to_record(path)
        # The copy source is relative to inbound/: "<student>/<submission folder>".
        record["filename"] = os.path.relpath(path, self.inbound_path)
        return record

    def init_src(self):
        if self.coursedir.course_id == "":
            self.fail("No course id specified. Re-run with --course flag.")
        self.course_path = os.path.join(self.root, self.coursedir.course_id)
        self.inbound_path = os.path.join(self.course_path, "inbound")
        if not os.path.isdir(self.inbound_path):
            self.fail("Course not found: {}".format(self.inbound_path))
        if not check_mode(self.inbound_path, read=True, execute=True):
            self.fail("You don't have read permissions for the directory: {}".format(self.inbound_path))
        student_id = self.coursedir.student_id if self.coursedir.student_id else "*"
        pattern = os.path.join(self.inbound_path, student_id, "*+{}+*".format(self.coursedir.assignment_id))
        records = []
        for path in glob.glob(pattern):
            folder_owner = os.path.basename(os.path.dirname(path))
            record = self._path_to_record(path)
            if record["username"] != folder_owner:
                self.log.warning("Skipping %s: it names student %r but sits in %r's folder",
                                 path, record["username"], folder_owner)
                continue
            records.append(record)
        usergroups = groupby(records, lambda item: item["username"])

        with Gradebook(self.coursedir.db_url, self.coursedir.course_id) as gb:
            try:
                self.duedate = gb.find_assignment(self.coursedir.assignment_id).duedate
            except MissingEntry:
                self.duedate = None
        if self.duedate is None or not self.before_duedate:
            self.src_records = [self._sort_by_timestamp(v)[0] for v in usergroups.values()]
        else:
            self.src_records = []
            for v in usergroups.values():
                ordered = self._sort_by_timestamp(v)
                before = [r for r in ordered if r["timestamp"] <= self.duedate]
                self.src_records.append(before[0] if before else ordered[0])
        counted = counted_attempts(self.config, self.coursedir, self.coursedir.assignment_id)
        for record in [r for r in self.src_records if r["username"] in counted]:
            self.log.info("Keeping %s's submission of %s: under feedback on submit the attempt that counts ('%s') "
                          "is already there (received %s UTC); newer submissions that were not graded do not count",
                          record["username"], self.coursedir.assignment_id, counted[record["username"]][0],
                          counted[record["username"]][1].strftime("%Y-%m-%d %H:%M:%S"))
            self.src_records.remove(record)


def counted_attempts(config, coursedir, assignment: str) -> dict:
    """``{student: (policy's counts, time received)}`` of students whose attempt that counts the
    feedback-on-submit grader has installed as their submission (policy ``last`` or ``best``):
    collect leaves those alone (attention_platform/feedback_on_submit)."""
    from attention_platform.feedback_on_submit.ledger import Ledger
    from attention_platform.feedback_on_submit.policy import FeedbackOnSubmit, PolicyError

    try:
        policy = FeedbackOnSubmit(config=config).policy_for(assignment)
    except PolicyError:
        return {}
    if policy.counts not in ("last", "best"):
        return {}
    ledger = Ledger(coursedir.db_url)
    try:
        return {row["student"]: (policy.counts, row["received_at"]) for row in ledger.attempts(assignment)
                if row["counted"]}
    finally:
        ledger.close()


class PerStudentReleaseFeedback(ExchangeReleaseFeedback):
    """Release each student's feedback into ``feedback/<student>/`` only."""

    def init_dest(self):
        if self.coursedir.course_id == "":
            self.fail("No course id specified. Re-run with --course flag.")
        self.course_path = os.path.join(self.root, self.coursedir.course_id)
        self.outbound_feedback_path = os.path.join(self.course_path, "feedback")
        self.dest_path = self.outbound_feedback_path
        if not os.path.isdir(self.outbound_feedback_path):
            os.makedirs(self.outbound_feedback_path, mode=0o711)

    def copy_files(self):
        exclude = set(filter(None, (self.coursedir.student_id_exclude or "").split(",")))
        regexp = re.escape(os.path.sep).join([
            self.coursedir.format_path(self.coursedir.feedback_directory, "(?P<student_id>.*)",
                                       self.coursedir.assignment_id, escape=True),
            "(?P<notebook_id>.*).html",
        ])
        for html_file in glob.glob(os.path.join(self.src_path, "*.html")):
            match = re.match(regexp, html_file)
            if match is None:
                self.log.error("Could not match %r with regexp %r", html_file, regexp)
                continue
            student_id, notebook_id = match.group("student_id"), match.group("notebook_id")
            if student_id in exclude:
                continue
            feedback_dir = os.path.dirname(html_file)
            with open(os.path.join(feedback_dir, "timestamp.txt")) as fh:
                timestamp = fh.read()
            with open(os.path.join(feedback_dir, "submission_secret.txt")) as fh:
                secret = fh.read()
            student_dir = os.path.join(self.dest_path, student_id)
            if not os.path.isdir(student_dir):
                # Natively the hub creates it with the student's group; this is the fallback.
                os.makedirs(student_dir, mode=0o750)
            checksum = notebook_hash(secret=secret, notebook_id=notebook_id)
            tmp = os.path.join(student_dir, "{}-tmp.html".format(checksum))
            shutil.copy(html_file, tmp)
            os.chmod(tmp, 0o640)
            final = os.path.join(student_dir, "{}.html".format(checksum))
            shutil.move(tmp, final)  # atomic replace: a student never reads half a file
            self.log.info("Released feedback for student '%s' on '%s/%s/%s' (%s) to %s", student_id,
                          self.coursedir.course_id, self.coursedir.assignment_id, notebook_id, timestamp, final)
