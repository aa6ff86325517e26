"""Every hidden check of the course, by id. Check ids are the nbgrader grade ids
of the test cells that run them (``grade_id == "check_" + id``)."""

from __future__ import annotations

from . import by_hand_checks, experiment_checks, head_checks, self_attention_checks, shapes_checks
from .core import Check

GRADE_ID_PREFIX = "check_"

# Notebook (nbgrader notebook id) -> the checks its hidden test cells run.
NOTEBOOK_CHECKS: dict[str, list[Check]] = {
    "self_attention": self_attention_checks.CHECKS,
    "02_by_hand": by_hand_checks.CHECKS,
    "03_head_and_bias": head_checks.CHECKS,
    "04_shapes_and_cost": shapes_checks.CHECKS,
    "05_experiments": experiment_checks.CHECKS,
}
ALL_CHECKS: list[Check] = [check for checks in NOTEBOOK_CHECKS.values() for check in checks]
CHECKS: dict[str, Check] = {check.id: check for check in ALL_CHECKS}
assert len(CHECKS) == len(ALL_CHECKS), "check ids must be unique"


def check_for_grade_id(grade_id: str) -> Check | None:
    if grade_id.startswith(GRADE_ID_PREFIX):
        return CHECKS.get(grade_id[len(GRADE_ID_PREFIX):])
    return None
