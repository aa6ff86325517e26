"""The course's identity, read from the environment when asked, never at import.

Every part of the platform (the course's and the hub's configuration files, the hub, the
formgrader service, the student's Lab, LTI, the load test) names the course through
:func:`course_id`, so one variable renames it everywhere. The student image's
``jupyter_config/student/nbgrader_config.py`` cannot import this package and repeats the default;
tests/course/test_settings.py keeps the two equal.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

# The nbgrader course id when $NBGRADER_COURSE_ID is unset: the formgrader's service name, the
# exchange's folder, the hub's groups (formgrade-<id>, nbgrader-<id>) and the grader's Unix account.
DEFAULT_COURSE_ID = "dl-attention"


def course_id(environ: Mapping[str, str] | None = None) -> str:
    """$NBGRADER_COURSE_ID of ``environ`` (default: this process's), else :data:`DEFAULT_COURSE_ID`."""
    environ = os.environ if environ is None else environ
    return environ.get("NBGRADER_COURSE_ID") or DEFAULT_COURSE_ID
