"""`make demo`'s grade table names every check in full (it used to cut them to 8 characters)."""

from attention_platform.course.demo import ALL_CHECKS, grade_table
from grader_tests.registry import GRADE_ID_PREFIX


def test_every_check_is_named_in_full_with_its_points_and_each_students_total():
    scores = {"ada": {GRADE_ID_PREFIX + c.id: c.points for c in ALL_CHECKS},
              "a-long-student-name": {GRADE_ID_PREFIX + ALL_CHECKS[0].id: 0}}
    table = grade_table(scores).splitlines()
    for check in ALL_CHECKS:
        (row,) = [line for line in table if line.startswith(f"{check.id} ({check.points:g})")]
        cells = row.split()[2:]
        assert cells[1] == format(check.points, "g")  # ada, in the second column (names are sorted)
        assert cells[0] == ("0" if check is ALL_CHECKS[0] else "-")
    total = sum(c.points for c in ALL_CHECKS)
    assert table[-1].split()[1:] == [f"0/{total:g}", f"{total:g}/{total:g}"]
    assert "a-long-student-name" in table[0]
