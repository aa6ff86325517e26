"""``attention-course prove-checks`` on the course itself: every assignment's checks hold against the
instructor's notebooks, their wheats and chaffs and the release."""

from __future__ import annotations

import pytest

from attention_platform.cli import main
from grader_tests import registry

# One fresh seed besides each check's default: each assignment's own tests (grader_tests/<A>/tests) prove
# its checks at several; this proves that the command, run as an instructor runs it, holds on the course.
SEEDS = ["--seed", "2024"]


def test_an_unknown_assignment_exits_2_naming_the_known_ones(capsys):
    assert main(["prove-checks", "week_nine", *SEEDS]) == 2
    said = capsys.readouterr().err
    assert "'week_nine'" in said and all(name in said for name in registry.ASSIGNMENTS)


@pytest.mark.slow  # every notebook of every assignment, run once per answer that proves its checks
@pytest.mark.parametrize("name", sorted(registry.ASSIGNMENTS))
def test_every_assignment_of_the_course_is_proved(capsys, name):
    code = main(["prove-checks", name, *SEEDS])
    said = capsys.readouterr()
    assert code == 0, said.out + said.err
    assert "proofs hold" in said.out
