"""``attention-course prove-checks`` on the course itself: every assignment's checks hold against the
instructor's notebooks, their wheats and chaffs and the release."""

from __future__ import annotations

import pytest

from attention_platform.authoring.prove import proof_count
from attention_platform.cli import main
from grader_tests import registry

# One fresh seed besides each check's default: each assignment's own tests (grader_tests/<A>/tests) prove
# every wheat and chaff of its checks at several, this one among them, and tests/authoring/test_scaffold.py
# proves the command on a new assignment; this proves that the command, run as an instructor runs it,
# holds on the course, with its assignment of fewest proofs (the others' would be proved a second time).
SEEDS = ["--seed", "2024"]
SMALLEST = min(registry.ASSIGNMENTS.values(), key=proof_count).name


def test_an_unknown_assignment_exits_2_naming_the_known_ones(capsys):
    assert main(["prove-checks", "week_nine", *SEEDS]) == 2
    said = capsys.readouterr().err
    assert "'week_nine'" in said and all(name in said for name in registry.ASSIGNMENTS)


@pytest.mark.slow  # every notebook of the assignment, run once per answer that proves its checks
def test_the_command_proves_an_assignment_of_the_course(capsys):
    code = main(["prove-checks", SMALLEST, *SEEDS])
    said = capsys.readouterr()
    assert code == 0, said.out + said.err
    assert "proofs hold" in said.out
