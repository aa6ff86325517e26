"""Every hidden check of the course, by id. Check ids are the nbgrader grade ids
of the test cells that run them (``grade_id == "check_" + id``)."""

from __future__ import annotations

from . import self_attention_checks
from .core import Check

GRADE_ID_PREFIX = "check_"

ALL_CHECKS: list[Check] = [*self_attention_checks.CHECKS]
CHECKS: dict[str, Check] = {check.id: check for check in ALL_CHECKS}
assert len(CHECKS) == len(ALL_CHECKS), "check ids must be unique"


def check_for_grade_id(grade_id: str) -> Check | None:
    if grade_id.startswith(GRADE_ID_PREFIX):
        return CHECKS.get(grade_id[len(GRADE_ID_PREFIX):])
    return None
