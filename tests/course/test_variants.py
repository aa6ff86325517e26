"""The course's variant key, the per-assignment switch and ``attention-course variants``
(attention_platform/course/variants.py, attention_platform/exchange/commands.py). Fetching and grading
variants through the real exchange: tests/hub/test_exchange_variants.py."""

from __future__ import annotations

import os
import stat

import pytest

from attention_platform.cli import main as cli
from attention_platform.course import variants
from attention_platform.course.directory import copy_course
from grader_tests.registry import ASSIGNMENTS, CHECKS

WITH = "self_attention"
WITHOUT = "multi_head_attention"


@pytest.fixture
def course(tmp_path):
    return copy_course(tmp_path / "course")


def test_the_key_is_made_once_readable_by_its_owner_alone(course):
    assert not (course / variants.KEY_FILE).exists()
    key = variants.course_key(course)
    path = course / variants.KEY_FILE
    assert len(key) == variants.KEY_BYTES and stat.S_IMODE(path.stat().st_mode) == 0o600
    assert variants.course_key(course) == key
    path.chmod(0o644)  # readable by others: refused, not used
    with pytest.raises(variants.VariantsError, match="only its owner can read"):
        variants.course_key(course)


def test_variants_are_off_until_switched_on_and_differ_per_student_and_key(course):
    assert variants.seed(course, WITH, "ann") is None and variants.variant_id(course, WITH, "ann") == ""
    variants.switch(course, WITH, True)
    ann, bo = (variants.seed(course, WITH, s) for s in ("ann", "bo"))
    assert ann != bo and variants.seed(course, WITH, "ann") == ann
    hook = ASSIGNMENTS[WITH].variants
    assert hook.cells(ann) != hook.cells(bo)
    assert hook.cells(CHECKS["by_hand_dot"].default_seed()) != hook.cells(ann)  # the release's numbers
    shown = variants.variant_id(course, WITH, "ann")
    assert len(shown) == 8 and variants.course_key(course).hex()[:8] != shown
    variants.regenerate(course)
    assert variants.seed(course, WITH, "ann") != ann and variants.variant_id(course, WITH, "ann") != shown
    variants.switch(course, WITH, False)
    assert variants.seed(course, WITH, "ann") is None


def test_an_assignment_without_a_varying_part_cannot_be_switched_on(course, capsys):
    assert ASSIGNMENTS[WITHOUT].variants is None
    assert cli(["variants", "on", WITHOUT, "--course", str(course)]) == 1
    assert "has no part whose numbers vary" in capsys.readouterr().err
    assert cli(["variants", "show", "--course", str(course)]) == 0
    assert f"{WITHOUT}: none" in capsys.readouterr().out


def test_regenerating_is_refused_while_submissions_exist_unless_forced(course, capsys):
    assert cli(["variants", "on", WITH, "--course", str(course)]) == 0
    key = variants.course_key(course)
    (course / "submitted" / "ann" / WITH).mkdir(parents=True)
    assert cli(["variants", "regenerate", "--course", str(course)]) == 1
    assert "ann/self_attention" in capsys.readouterr().err and variants.course_key(course) == key
    assert cli(["variants", "regenerate", "--force", "--course", str(course)]) == 0
    assert variants.course_key(course) != key


def test_a_switch_file_edited_into_nonsense_is_named(course):
    (course / variants.SWITCH_FILE).write_text('{"self_attention": "yes"}')
    with pytest.raises(variants.VariantsError, match="true or false"):
        variants.is_on(course, WITH)
    assert os.path.exists(course / variants.SWITCH_FILE)
