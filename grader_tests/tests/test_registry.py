"""The registry is the platform's one door to the assignments: what it answers for each one."""

import pytest

from grader_tests import registry
from grader_tests.proofs import Proof


@pytest.mark.parametrize("name", sorted(registry.ASSIGNMENTS))
def test_an_assignment_lists_its_notebooks_checks_and_proofs(name):
    found = registry.assignment(name)
    assert found.notebooks and len(set(found.notebooks)) == len(found.notebooks)
    assert [c.id for c in found.checks] == [c.id for nb in found.notebooks for c in found.notebook_checks.get(nb, [])]
    assert all(check.assignment == name and registry.CHECKS[check.id] is check for check in found.checks)
    assert found.points == found.auto_points + found.ta_points == sum(p.points for p in found.parts)
    assert found.wheats and found.chaffs and all(isinstance(p, Proof) for p in found.wheats + found.chaffs)
    assert {p.target for p in found.chaffs} == {c.id for c in found.checks}, "every check needs a chaff"
    assert {p.notebook for p in found.wheats + found.chaffs} <= set(found.notebooks)


def test_check_ids_are_unique_across_the_course():
    ids = [check.id for a in registry.ASSIGNMENTS.values() for check in a.checks]
    assert len(ids) == len(set(ids)) == len(registry.CHECKS)


def test_an_unknown_assignment_is_named_with_the_ones_there_are():
    with pytest.raises(registry.UnknownAssignment) as raised:
        registry.assignment("week_two")
    assert "'week_two'" in str(raised.value) and "self_attention" in str(raised.value)


@pytest.mark.parametrize("grade_id, expected", [("check_sqrt_d_scale", "sqrt_d_scale"), ("check_nope", None),
                                                ("sqrt_d_scale", None), ("meaning_answer", None)])
def test_a_grade_id_finds_its_check(grade_id, expected):
    found = registry.check_for_grade_id(grade_id)
    assert (found.id if found else None) == expected
