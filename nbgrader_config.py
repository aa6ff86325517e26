"""nbgrader configuration of the self-attention course.

This repository is the course directory: run nbgrader commands from its root.
Every setting can be overridden from the environment where one is named.
"""

import os

from nbconvert.preprocessors import ClearMetadataPreprocessor, CSSHTMLHeaderPreprocessor
from nbgrader import preprocessors as pp

from attention_platform.grading.preprocessors import (
    HideCheckCode, RestoreCellMetadata, RestoreCheckCells, SanitizeCheckOutputs,
)
from attention_platform.deadlines.late_penalty import LatePolicyPenalty
from attention_platform.grading.course_lock import after_autograde, before_autograde
from attention_platform.grading.sandboxed_execute import SandboxedExecute, start_sandbox_early
from attention_platform.reporting.feedback import FeedbackSummary
from attention_platform.reporting.rubrics import DropRubrics
from attention_platform.reporting.safe_html import FEEDBACK_TEMPLATES, FeedbackHTMLExporter
from attention_platform.settings import settings_or_exit

c = get_config()  # noqa: F821 (provided by traitlets when it loads this file)
# The deployment's settings (attention_platform/settings.py): a wrong one stops nbgrader here, naming it.
SETTINGS = settings_or_exit("nbgrader_config.py")

# The course root is wherever this file lives, so a copied course keeps working.
c.CourseDirectory.root = os.path.dirname(os.path.abspath(__file__))
# Course id: the hub's groups are formgrade-<id> and nbgrader-<id>.
c.CourseDirectory.course_id = SETTINGS.nbgrader_course_id
# Gradebook database; the hub deployment points this at PostgreSQL.
c.CourseDirectory.db_url = SETTINGS.nbgrader_db_url or "sqlite:///" + os.path.join(c.CourseDirectory.root, "gradebook.db")
# Shared exchange for release/submit/collect (local mode; the hub sets its own).
c.Exchange.root = str(SETTINGS.nbgrader_exchange_root)

# Kernel time per cell and in all: a submission that loops forever fails its cell, not the batch.
c.Execute.timeout = SETTINGS.nbgrader_cell_timeout

# A deleted check cell is restored from the instructor's copy and graded, not lost.
c.OverwriteCells.add_missing_cells = True
# TA rubrics live in locked markdown cells (grade id rubric_<answer>) inside ### BEGIN/END MARK SCHEME:
# stripped from the release, restored from the gradebook at autograde (so the formgrader shows them next
# to the answer) and stripped again from the feedback. They are not task cells, hence no enforcement.
c.ClearMarkScheme.enforce_metadata = False
# Before nbgrader's own sanitising: edited cell metadata is put back (see preprocessors.py).
c.Autograde.sanitize_preprocessors = [
    pp.ClearOutput,
    pp.DeduplicateIds,
    RestoreCellMetadata,
    pp.OverwriteKernelspec,
    RestoreCheckCells,  # nbgrader's OverwriteCells, quiet about check cells (always restored)
    pp.CheckCellMetadata,
]

# One autograde at a time writes the gradebook and autograded/ (two TAs at once would otherwise
# lose one's grading): each submission is graded holding the course's lock (grading/course_lock.py).
# Before waiting for it, the sandbox starts warming up, so the first notebook does not wait for torch.
def _before_autograde(**hook_args):
    start_sandbox_early(**hook_args)  # with the first uses of hook_args["assignment"]
    before_autograde(**hook_args)


c.Autograde.pre_convert_hook = _before_autograde
c.Autograde.post_convert_hook = after_autograde

# After execution: one-line errors and no stderr in check cells (see preprocessors.py).
# Student code runs in a fresh sandbox per submission (no network, own uid, only its own files,
# cgroup/rlimit bounds) and every check's verdict is judged outside it (attention_platform/grading/sandbox/).
# ATTENTION_AUTOGRADE_EXECUTE=stock runs nbgrader's in-kernel Execute instead (benchmark baseline).
STOCK_EXECUTE = SETTINGS.attention_autograde_execute == "stock"
c.SandboxedExecute.cell_timeout = c.Execute.timeout
c.Autograde.autograde_preprocessors = [
    pp.Execute if STOCK_EXECUTE else SandboxedExecute,
    SanitizeCheckOutputs,
    pp.IgnorePattern,
    ClearMetadataPreprocessor,
    pp.LimitOutput,
    pp.SaveAutoGrades,
    pp.AssignLatePenalties,
    pp.CheckCellMetadata,
]
# Late work is judged by the assignment's late policy and the student's extension (attention_platform/deadlines);
# an assignment without a late policy keeps nbgrader's LateSubmissionPlugin.penalty_method.
c.AssignLatePenalties.plugin_class = LatePolicyPenalty

# Feedback is a page built from student content: markdown, raw cells and outputs are sanitised
# and the page forbids every script (see attention_platform/reporting/safe_html.py).
c.GenerateFeedback.exporter_class = FeedbackHTMLExporter
# Our own page (attention_platform/reporting/templates/attention_feedback): the assignment's total and
# one row per check at the top, each check's message whole and wrapped, "not answered" for stubs.
c.FeedbackHTMLExporter.template_name = "attention_feedback"
c.FeedbackHTMLExporter.extra_template_basedirs = [FEEDBACK_TEMPLATES]
# Feedback shows each check's verdict and message, never its code, and no rubric cell (the TA's).
c.GenerateFeedback.preprocessors = [
    HideCheckCode,
    pp.ClearMarkScheme,
    DropRubrics,
    SanitizeCheckOutputs,
    pp.GetGrades,
    FeedbackSummary,
    CSSHTMLHeaderPreprocessor,
]
# Each feedback page made is kept (gzip) for whoever makes the same page again: the TA's generate_feedback
# reuses the pages feedback on submit made of the attempt that counts, when nothing has changed since.
c.FeedbackHTMLExporter.reused_pages_folder = os.path.join(c.CourseDirectory.root, "attempts", "feedback-pages")
