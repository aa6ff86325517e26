"""The cheat-attempt catalogue (tests/cheats) against the sandboxed grader.

* fast: every cheat through ``grade_notebook`` (the one grading path), next to
  a scratch "course" with another student's work, a gradebook file and a
  canary: no check scores above the same answer without the payload, nothing
  secret reaches the outputs, nothing outside the sandbox changes, the run ends
  within its bound and says why it stopped;
* slow: the whole catalogue plus honest classmates through the real
  ``nbgrader autograde`` and ``generate_feedback`` (the configured sandboxed
  path): classmates' grades exact, gradebook intact, submissions kept,
  feedback written with a message for every cheat.
"""

from __future__ import annotations

import hashlib
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest

from attention_platform.course.directory import check_scores, write_submission
from grader_tests.self_attention.answers import release_notebook
from attention_platform.grading.sandbox import SandboxLimits, Zygote
from attention_platform.grading.sandbox.grading import grade_notebook
from broker_helpers import uid_processes
from cheats import ANSWERS, BASE, CHEATS, Cheat, Context
from grader_tests.self_attention.answers import ASSIGNMENT, NOTEBOOK, with_answer
from grader_tests.registry import ALL_CHECKS, GRADE_ID_PREFIX

pytestmark = pytest.mark.root  # every cheat runs in a real sandbox

LIMITS = SandboxLimits(cell_timeout=2, notebook_timeout=10, cpu_seconds=10, memory_mb=512, nproc=16,
                       output_chars=20_000)
NOTEBOOK_CHEATS = [c for c in CHEATS if c.name != "not_json"]

def _tree_digest(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """A scratch course tree with a classmate's work and secrets, a listener, a zygote."""
    course = tmp_path_factory.mktemp("victim-course")
    canary = "CANARY-" + secrets.token_hex(8)
    (course / "gradebook.db").write_text(f"gradebook {canary}")
    (course / "grader_tests").mkdir()
    (course / "grader_tests" / "reference.py").write_text(f"# {canary}")
    (course / "nbgrader_config.py").write_text(f"# {canary}")
    victim = course / "submitted" / "victim" / ASSIGNMENT
    victim.mkdir(parents=True)
    (victim / NOTEBOOK).write_text(f"classmate's work {canary}")
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    server.setblocking(False)
    ctx = Context(course=str(course), canary=canary, port=server.getsockname()[1])
    zygote = Zygote()
    release = release_notebook()
    base = {name: grade_notebook(with_answer(release, ANSWERS[name].code if name else None), zygote=zygote,
                                 limits=LIMITS) for name in {BASE, None} | {c.base for c in CHEATS}}
    before = _tree_digest(course)
    yield ctx, zygote, release, base, server, before
    zygote.close()
    server.close()


@pytest.mark.parametrize("cheat", NOTEBOOK_CHEATS, ids=lambda c: c.name)
def test_cheat_gains_nothing_harms_nobody_and_ends_in_bounds(world, cheat: Cheat):
    ctx, zygote, release, base, server, before = world
    nb = cheat.build(release, ctx)
    started = time.monotonic()
    result = grade_notebook(nb, zygote=zygote, limits=LIMITS)
    elapsed = time.monotonic() - started

    honest = base[cheat.base]
    for check_id, outcome in result.checks.items():
        assert not (outcome.passed and not honest.checks[check_id].passed), f"{cheat.name} gained {check_id}"
    assert result.score <= honest.score

    assert elapsed < LIMITS.notebook_timeout + 3, f"{cheat.name} ran {elapsed:.1f} s"
    if cheat.stops_sandbox:
        assert result.stopped, f"{cheat.name} should have been stopped"
        assert all(not c.passed and c.message for c in result.checks.values())
        assert all("could not" in c.message or "No hidden check could run" in c.message
                   for c in result.checks.values())
    failed = [c for c in result.checks.values() if not c.passed]
    assert all(c.message for c in failed), "every failed check carries a message"

    text = nbformat.writes(nb)
    assert ctx.canary not in text, f"{cheat.name} read something secret"
    assert "SPY-LEAK" not in text, "output printed after the hidden checks were loaded reached the notebook"
    assert _tree_digest(Path(ctx.course)) == before, f"{cheat.name} changed files outside its sandbox"
    with pytest.raises(BlockingIOError):
        server.accept()


@pytest.mark.parametrize("cheat", [c for c in CHEATS if c.forges], ids=lambda c: c.name)
def test_forged_verdicts_reach_the_judge_and_gain_nothing(world, cheat: Cheat):
    """The forging hook really rewrites what the judge receives (its message for the forged check
    changes), yet the check it aims at still fails: the judge reads no verdict from the sandbox."""
    ctx, zygote, release, base, _, _ = world
    result = grade_notebook(cheat.build(release, ctx), zygote=zygote, limits=LIMITS)
    honest = base[cheat.base].checks[cheat.forges]
    forged = result.checks[cheat.forges]
    assert not honest.passed and not forged.passed
    assert forged.message != honest.message, "the hook did not reach the reply"
    assert result.score <= base[cheat.base].score


def test_the_reference_never_enters_the_sandbox(world):
    ctx, zygote, release, base, _, _ = world
    cheat = next(c for c in CHEATS if c.name == "calls_the_reference")
    result = grade_notebook(cheat.build(release, ctx), zygote=zygote, limits=LIMITS)
    assert result.score == 0
    assert any("AttributeError" in c.message or "ModuleNotFoundError" in c.message for c in result.checks.values())


def test_fork_bomb_leaves_nothing_behind(world):
    """Every process the fork bomb made runs as its sandbox's uid (no capabilities, ``no_new_privs``),
    and none is left once its notebook is graded. (The next sandbox, forked ahead of the next request
    under another uid, waits idle meanwhile: not the bomb's.)"""
    ctx, zygote, release, _, _, _ = world
    cheat = next(c for c in CHEATS if c.name == "fork_bomb")
    nb = cheat.build(release, ctx)
    result = grade_notebook(nb, zygote=zygote, limits=LIMITS)
    assert "fork refused" in nbformat.writes(nb)
    [bomb_uid] = [int(layer.removeprefix("uid:")) for layer in result.layers if layer.startswith("uid:")]
    assert uid_processes(bomb_uid, wait=3) == []


# --------------------------------------------------------------------------- the real nbgrader path

VICTIMS = {"victim_ref": "reference_style", "victim_bug": "mask_after_softmax", "victim_base": BASE}


def _notebook_checks():
    from grader_tests import registry

    return registry.assignment("self_attention").notebook_checks[NOTEBOOK.removesuffix(".ipynb")]


def _expected(failing) -> dict[str, float]:
    return {GRADE_ID_PREFIX + c.id: 0.0 if c.id in failing else float(c.points) for c in _notebook_checks()}


def run_nbgrader(course: Path, *args: str, **env) -> subprocess.CompletedProcess:
    bindir = str(Path(sys.executable).parent)
    full_env = dict(os.environ, PATH=bindir + os.pathsep + os.environ.get("PATH", ""), **env)
    return subprocess.run([str(Path(bindir) / "nbgrader"), *args], cwd=course, env=full_env,
                          capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def graded_catalogue(tmp_path_factory, released_course):
    course = released_course(tmp_path_factory.mktemp("cheat-course") / "course", ASSIGNMENT, notebooks=[NOTEBOOK])
    release = nbformat.read(course / "release" / ASSIGNMENT / NOTEBOOK, as_version=4)
    canary = "CANARY-" + secrets.token_hex(8)
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    server.setblocking(False)
    ctx = Context(course=str(course), canary=canary, port=server.getsockname()[1])
    for student, answer in VICTIMS.items():
        nb = with_answer(release, ANSWERS[answer].code)
        nb.cells.append(nbformat.v4.new_markdown_cell(f"my notes {canary}"))
        write_submission(course, student, nb, assignment=ASSIGNMENT, name=NOTEBOOK)
    for cheat in CHEATS:
        write_submission(course, cheat.name, cheat.build(release, ctx), assignment=ASSIGNMENT, name=NOTEBOOK)
    submitted = _tree_digest(course / "submitted")
    twin = course.parent / "batch-course"  # the same class, for autograde-batch
    shutil.copytree(course, twin)
    limits = dict(NBGRADER_CELL_TIMEOUT="3", ATTENTION_NOTEBOOK_TIMEOUT="15")
    started = time.monotonic()
    autograde = run_nbgrader(course, "autograde", ASSIGNMENT, "--force", **limits)
    elapsed = time.monotonic() - started
    feedback = run_nbgrader(course, "generate_feedback", ASSIGNMENT, "--force")
    bindir = Path(sys.executable).parent
    batch = subprocess.run([str(bindir / "attention-course"), "autograde-batch", ASSIGNMENT, "--course", str(twin)],
                           env=dict(os.environ, PATH=f"{bindir}{os.pathsep}{os.environ['PATH']}", **limits),
                           capture_output=True, text=True, timeout=600)
    scores = check_scores(course, assignment=ASSIGNMENT, notebook=NOTEBOOK)
    yield course, ctx, autograde, feedback, elapsed, submitted, scores, server, (twin, batch)
    server.close()


@pytest.mark.slow
def test_nbgrader_autograde_of_the_catalogue(graded_catalogue):
    course, ctx, autograde, feedback, elapsed, submitted, scores, server, _ = graded_catalogue
    assert "Sandboxed grading of" in autograde.stderr, "nbgrader_config.py must select SandboxedExecute"
    # other students: exact grades, as if the cheats were not there
    for student, answer in VICTIMS.items():
        assert scores[student] == _expected(ANSWERS[answer].fails), student
    # 0 points gained by any cheat
    for cheat in CHEATS:
        honest = _expected(ANSWERS[cheat.base].fails if cheat.base else {c.id for c in _notebook_checks()})
        got = scores.get(cheat.name, {})
        for grade_id, points in got.items():
            assert (points or 0) <= honest[grade_id], f"{cheat.name} gained points on {grade_id}"
    # no data lost, gradebook intact, everyone but the broken file autograded
    assert _tree_digest(course / "submitted") == submitted
    import sqlite3

    assert sqlite3.connect(course / "gradebook.db").execute("PRAGMA integrity_check").fetchone() == ("ok",)
    for name in list(VICTIMS) + [c.name for c in NOTEBOOK_CHEATS]:
        assert (course / "autograded" / name / ASSIGNMENT / NOTEBOOK).exists(), name
    assert "not_json" in autograde.stderr
    # bounded: a cell timeout of 3 s means the two hangs cost seconds, not the batch
    print(f"nbgrader autograde of {len(CHEATS) + len(VICTIMS)} submissions: {elapsed:.1f} s")
    assert elapsed < 240
    # nothing secret in anything a student gets back, and a message for everyone
    assert feedback.returncode == 0, feedback.stderr[-2000:]
    for cheat in NOTEBOOK_CHEATS:
        page = (course / "feedback" / cheat.name / ASSIGNMENT / NOTEBOOK.replace(".ipynb", ".html")).read_text()
        autograded = (course / "autograded" / cheat.name / ASSIGNMENT / NOTEBOOK).read_text()
        assert ctx.canary not in page and ctx.canary not in autograded, cheat.name
        assert "SPY-LEAK" not in autograded
        assert 'id="check-summary"' in page and re.search(r'data-state="(passed|failed|not answered)"', page), cheat.name
        if cheat.stops_sandbox:
            assert "No hidden check could run" in page or "could not finish" in page, cheat.name
    with pytest.raises(BlockingIOError):
        server.accept()


@pytest.mark.slow
def test_autograde_batch_gives_the_same_grades_as_nbgrader_autograde(graded_catalogue):
    course, ctx, _, _, _, _, scores, _, (twin, batch) = graded_catalogue
    assert batch.returncode == 0, batch.stdout[-2000:] + batch.stderr[-2000:]
    assert check_scores(twin, assignment=ASSIGNMENT, notebook=NOTEBOOK) == scores, "batch and nbgrader autograde disagree"
    table = batch.stdout
    assert "victim_ref" in table and "rejected" in table and "submissions" in table
    assert f"{len(CHEATS) + len(VICTIMS)}/{len(CHEATS) + len(VICTIMS)}" in batch.stderr  # the progress bar's end
    for name in list(VICTIMS) + [c.name for c in NOTEBOOK_CHEATS]:
        assert (twin / "autograded" / name / ASSIGNMENT / NOTEBOOK).exists(), name
    assert not (twin / "autograded" / "not_json" / ASSIGNMENT / NOTEBOOK).exists()
