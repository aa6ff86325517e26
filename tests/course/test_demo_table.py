"""`make demo` grades a sample class of every assignment, made of the assignment's own proofs, and
prints a table per assignment that names every check in full."""

import pytest

from attention_platform.course import demo, samples
from grader_tests import registry

ASSIGNMENTS = sorted(registry.ASSIGNMENTS)


def _key(check) -> str:
    return f"{check.notebook}/{check.definition.grade_id}"


@pytest.mark.parametrize("name", ASSIGNMENTS)
def test_every_check_is_named_in_full_with_its_points_and_each_students_total(name):
    found = registry.assignment(name)
    checks = found.checks
    scores = {"ada": {_key(c): c.points for c in checks}, "a-long-student-name": {_key(checks[0]): 0}}
    table = demo.grade_table(found, scores).splitlines()
    for check in checks:
        (row,) = [line for line in table if line.startswith(f"{check.id} ({check.points:g})")]
        cells = row.split()[2:]
        assert cells[1] == format(check.points, "g")  # ada, in the second column (names are sorted)
        assert cells[0] == ("0" if check is checks[0] else "-")
        assert table.index(f"{check.notebook}.ipynb") < table.index(row)  # under its notebook's name
    total = sum(c.points for c in checks)
    assert table[-1].split()[1:] == [f"0/{total:g}", f"{total:g}/{total:g}"]
    assert "a-long-student-name" in table[0]


@pytest.mark.parametrize("name", ASSIGNMENTS)
def test_the_sample_class_is_made_of_the_assignments_proofs(name):
    found = registry.assignment(name)
    students = samples.sample_class(found)
    proofs = [s.proof for s in students if s.proof]
    assert proofs[0] == found.wheats[0] and all(p in found.chaffs for p in proofs[1:])
    targets = [p.target for p in proofs[1:]]
    assert targets and len(set(targets)) == len(targets), "each chaff a different check's misconception"
    assert [s.name for s in students if s.proof is None] == ["ada", "finn"]
    assert len({s.name for s in students}) == len(students)


def _failed(scores: dict, checks) -> set[str]:
    return {c.id for c in checks if scores.get(_key(c)) != c.points}


@pytest.mark.slow
@pytest.mark.root  # nbgrader autograde grades in real sandboxes
def test_the_demo_grades_every_assignment_as_its_proofs_say(tmp_path):
    printed: list[str] = []
    graded = demo.run_demo(tmp_path / "demo", log=printed.append)
    assert sorted(graded) == ASSIGNMENTS
    text = "\n".join(printed)
    for name in ASSIGNMENTS:
        found = registry.assignment(name)
        assert all(f"{c.id} ({c.points:g})" in text for c in found.checks)
        for student in samples.sample_class(found):
            scores = graded[name][student.name]
            if student.untouched:
                continue
            if student.proof is None:  # the instructor's answers pass everything
                assert _failed(scores, found.checks) == set(), student
                continue
            mine = found.notebook_checks.get(student.proof.notebook, [])
            assert _failed(scores, mine) == set(student.proof.fails), student
            assert {key.split("/")[0] for key in scores} == {student.proof.notebook}, "the others were not handed in"
