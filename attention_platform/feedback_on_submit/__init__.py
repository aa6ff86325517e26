"""Feedback on submit: a submission graded within seconds, on the instructor's terms.

The instructor sets a policy per assignment in the course's ``nbgrader_config.py``
(``c.FeedbackOnSubmit.policies``, :mod:`attention_platform.attempts.policy`). The course's grader
account runs one more process beside the formgrader, the *feedback-on-submit grader*
(:mod:`.service`): it watches every student's inbound folder (the folder is the student's identity,
as for the TA's collect), grades each new submission through the same sandboxed pipeline as the
TA's autograde (:mod:`.engine`, built on ``grading/batch.py``), and writes what the policy lets the
student see into that student's own feedback folder (:mod:`attention_platform.attempts.status`),
where their JupyterLab's Assignments tab reads it (:mod:`attention_platform.lab.feedback_on_submit`).
Every graded attempt is recorded in the course's gradebook database
(:mod:`attention_platform.attempts.ledger`).
"""

from pathlib import Path

# The Lab extension of the student's Assignments tab (attention-feedback-on-submit: plain JavaScript).
LAB_EXTENSIONS = Path(__file__).resolve().parents[1] / "lab"
