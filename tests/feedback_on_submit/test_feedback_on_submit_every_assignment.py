"""Feedback on submit grades an attempt at every assignment of the registry: the grader (its engine,
in a process of its own with a private sandbox worker) grades a submission of each assignment
answered as the instructor would, in real sandboxes, and reports every check of that assignment,
in the assignment's notebook order, passed."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from grader_tests.registry import ASSIGNMENTS, assignment

pytestmark = [pytest.mark.slow, pytest.mark.root,
              pytest.mark.skipif(os.geteuid() != 0, reason="a private sandbox worker needs root")]

ENGINE_GRADES = """
import datetime as dt
import json
import shutil
from pathlib import Path

import nbformat

from attention_platform.feedback_on_submit.engine import Attempt, Engine
from attention_platform.feedback_on_submit.intake import Intake
from attention_platform.attempts.policy import Policy
from grader_tests.proofs import solved

course, name = Path({course!r}), {name!r}
folder = course.parent / "attempt"
shutil.copytree(course / "release" / name, folder)
for path in folder.glob("*.ipynb"):  # answered as the instructor would
    source = nbformat.read(course / "source" / name / path.name, as_version=4)
    nbformat.write(solved(nbformat.read(path, as_version=4), source), path)
engine = Engine(course).start()
engine.warm([name])
now = dt.datetime.now(dt.timezone.utc)
attempt = Attempt(1, name, "ana", f"ana+{{name}}+attempt", Intake(folder, timestamp=now), now,
                  Policy(name, feedback="checks"))
result = engine.grade(attempt)
print(json.dumps({{"score": result.score, "max_score": result.max_score, "notes": result.notes,
                  "checks": [[c["id"], c["notebook"], c["passed"]] for c in result.checks]}}))
"""


@pytest.mark.parametrize("name", sorted(ASSIGNMENTS))
def test_an_attempt_at_each_assignment_is_graded_with_its_own_checks(tmp_path, released_course, name):
    registered = assignment(name)
    course = released_course(tmp_path / "course", name)
    code = ENGINE_GRADES.format(course=str(course), name=name)
    env = {**os.environ, "PATH": f"{os.path.dirname(sys.executable)}:{os.environ['PATH']}"}  # nbgrader runs alembic
    env.pop("ATTENTION_SANDBOX_SOCKET", None)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=900, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert sorted(result["checks"]) == sorted([c.id, c.notebook, True] for c in registered.checks), result["notes"]
    graded_in_turn = list(dict.fromkeys(notebook for _, notebook, _ in result["checks"]))
    assert graded_in_turn == list(registered.notebook_checks)  # the assignment's order
    assert result["score"] == result["max_score"] == registered.auto_points
