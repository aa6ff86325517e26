"""The gradebook's late penalty under the assignment's late policy: nbgrader's plug-in, per notebook.

nbgrader's ``AssignLatePenalties`` asks its ``plugin_class`` for each notebook of a submission later
than the gradebook's due date. :class:`LatePolicyPenalty` answers from the student's standing at
the submission's time (their extension, the assignment's policy): ``penalty_percent`` of the
notebook's score under ``penalty``; nothing while late days last; the whole score for a
submission received after the assignment closed to them (collect does not take one; a submission
filed by hand may be). An assignment without a late policy keeps nbgrader's own plug-in and its
``LateSubmissionPlugin.penalty_method``.
"""

from __future__ import annotations

from nbgrader.plugins import LateSubmissionPlugin

from .standing import Deadlines


class LatePolicyPenalty(LateSubmissionPlugin):
    """nbgrader's late-penalty plug-in, reading the late policy of attention_platform/deadlines."""

    def late_submission_penalty(self, student_id: str, score: float, total_seconds_late: float):
        from nbgrader.coursedir import CourseDirectory

        grading = self.parent  # AssignLatePenalties, inside its gradebook session
        assignment = grading.assignment_id
        deadlines = Deadlines(CourseDirectory(config=self.config).root, db_url=grading.db_url,
                              gradebook=grading.gradebook)
        if assignment not in deadlines.policies:
            return super().late_submission_penalty(student_id, score, total_seconds_late)
        submitted = grading.gradebook.find_submission(assignment, student_id).timestamp
        found = deadlines.standing(assignment, student_id, submitted, submitted)
        if not found.counts:
            self.log.warning("%s's submission of %s was received after it closed to them: it scores nothing",
                             student_id, assignment)
            return score
        self.log.info("%s's submission of %s is %s late: %g%% of the score taken (%s)", student_id, assignment,
                      found.late_by, found.penalty_percent, found.policy.kind)
        return score * found.penalty_percent / 100
