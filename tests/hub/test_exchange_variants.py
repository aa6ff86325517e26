"""Per-student variants of the by-hand part through the real exchange, with real Unix users.

The grader account switches variants on and releases with nbgrader; two students fetch through their
own read-only views and see different numbers; a student whose folder appeared after the release is
told their copy is not ready, and gets it once the grader writes the copies again. A real nbgrader
autograde then grades each student's typed-in answers right on their own numbers and wrong on the
other's. Switched off, everyone fetches the release's numbers. The course's key is never in anything
a student can read.
"""

from __future__ import annotations

import os
import secrets
import shutil
import stat
import subprocess
from pathlib import Path

import nbformat
import pytest

from attention_platform.course import variants
from attention_platform.course.directory import check_scores, nbgrader, write_submission
from attention_platform.exchange.exchange_layout import Ids
from tests.fault_helpers import ASSIGNMENT, BIN, REPO, chown_tree, hub_pre_spawn, make_exchange, run_as, unix_user
from tests.hub.test_exchange_attacks import ex_student_nbgrader

pytestmark = [pytest.mark.slow, pytest.mark.root,
              pytest.mark.skipif(os.geteuid() != 0, reason="real Unix users need root (CI is root)")]

STUDENTS = ("var-ann", "var-bo")
LATE = "var-cy"  # their server first starts after the release
GRADER = "var-grader"
NOTEBOOK = "02_by_hand"
BY_HAND = ("by_hand_dot", "by_hand_scores", "by_hand_weights", "by_hand_context", "three_tokens")


@pytest.fixture(scope="module")
def accounts() -> dict[str, Ids]:
    homes = REPO / "build" / "exchange-variants-homes"
    return {name: unix_user(name, homes / name, system=name == GRADER) for name in (*STUDENTS, LATE, GRADER)}


@pytest.fixture
def released(released_course, accounts):
    top = REPO / "build" / "exchange-variants"  # every account passes through it (pytest's tmp is root's alone)
    top.mkdir(parents=True, exist_ok=True)
    top.chmod(0o755)
    scratch = top / secrets.token_hex(4)
    scratch.mkdir(mode=0o755)
    course = released_course(scratch / "course", ASSIGNMENT, [f"{NOTEBOOK}.ipynb"])
    course.chmod(0o700)
    grader = accounts[GRADER]
    chown_tree(course, grader)
    ex = make_exchange(scratch, STUDENTS, release=course / "release" / ASSIGNMENT,
                       users={s: accounts[s] for s in STUDENTS}, grader=grader)
    shutil.rmtree(ex.course / "outbound" / ASSIGNMENT)  # released below, by the grader
    # The grader's own copy of the hidden checks, as the hub installs it: a hub started from this
    # checkout takes "other" permissions off its grader_tests/ (hub/native.py, hide_course_secrets).
    shutil.copytree(REPO / "grader_tests", scratch / "grader-lib" / "grader_tests",
                    ignore=shutil.ignore_patterns("__pycache__"))
    chown_tree(scratch / "grader-lib", grader)
    for student in STUDENTS:
        shutil.rmtree(ex.home(student) / ASSIGNMENT)
    yield ex, course
    if not os.environ.get("KEEP_VARIANTS_SCRATCH"):
        shutil.rmtree(scratch, ignore_errors=True)


def grader_lib(ex) -> dict:
    return {"PYTHONPATH": str(ex.base / "grader-lib")}


def as_grader(ex, course: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / "attention-course"), *args, "--course", str(course)], cwd=course,
                          env={**ex.grader_env(), **grader_lib(ex)}, capture_output=True, text=True, timeout=600,
                          **ex.as_user(ex.grader))


def fetch(ex, accounts, student: str) -> subprocess.CompletedProcess:
    shutil.rmtree(ex.home(student) / ASSIGNMENT, ignore_errors=True)
    return ex_student_nbgrader(ex, student, accounts, "fetch_assignment", ASSIGNMENT)


def fetched(ex, student: str):
    return nbformat.read(ex.home(student) / ASSIGNMENT / f"{NOTEBOOK}.ipynb", as_version=4)


def cell(nb, grade_id: str) -> str:
    return next(c.source for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id)


def numbers(nb) -> tuple[str, str]:
    return cell(nb, "inputs"), cell(nb, "three_inputs")


def _literal(value) -> str:
    return f"torch.tensor({[[round(float(v), 4) for v in row] for row in value.tolist()]})"


def typed_in(nb):
    """``nb`` answered as a student working by hand would: every answer typed in as numbers to four
    decimals, computed from the numbers the notebook shows."""
    import math

    import torch

    shown: dict = {}
    for grade_id in ("imports", "inputs", "three_inputs"):
        exec(cell(nb, grade_id), shown)  # noqa: S102 - the test's own release
    x = shown["inputs"].double()
    scores = x @ x.T
    weights = scores.softmax(dim=-1)
    q, k, v = (shown["x3"].double() @ shown[name].double() for name in ("W_Q", "W_K", "W_V"))
    scores3 = q @ k.T / math.sqrt(2)
    weights3 = scores3.softmax(dim=-1)
    answers = {
        "dot_answer": f"journey_starts = {round(float(x[1] @ x[2]), 4)}",
        "scores_answer": f"attn_scores = {_literal(scores)}",
        "weights_answer": f"attn_weights = {_literal(weights)}",
        "context_answer": f"context_vectors = {_literal(weights @ x)}",
        "three_answer": "\n".join(f"{name} = {_literal(value)}" for name, value in (
            ("Q3", q), ("K3", k), ("V3", v), ("scores3", scores3), ("weights3", weights3), ("out3", weights3 @ v))),
    }
    answered = nbformat.from_dict(nb)
    for c in answered.cells:
        grade_id = c.metadata.get("nbgrader", {}).get("grade_id")
        if grade_id in answers:
            c.source = answers[grade_id]
    return answered


ANSWER_CELLS = ("dot_answer", "scores_answer", "weights_answer", "context_answer", "three_answer")  # BY_HAND's


def answer_source(nb, grade_id: str) -> str:
    return next(c.source for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id)


def by_hand_scores(course: Path) -> dict[str, dict[str, float]]:
    table = check_scores(course, assignment=ASSIGNMENT, notebook=NOTEBOOK)
    return {student: {check: table[student][f"check_{check}"] for check in BY_HAND} for student in table}


def readable_bytes(folder: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file() and not p.is_symlink())


def test_students_fetch_their_own_numbers_and_are_graded_on_them(released, accounts):
    ex, course = released
    release = nbformat.read(course / "release" / ASSIGNMENT / f"{NOTEBOOK}.ipynb", as_version=4)

    switched = as_grader(ex, course, "variants", "on", ASSIGNMENT)
    assert switched.returncode == 0, switched.stdout + switched.stderr
    done = ex.nbgrader(course, "release_assignment", ASSIGNMENT, env=grader_lib(ex))
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    key = course / variants.KEY_FILE
    assert stat.S_IMODE(key.stat().st_mode) == 0o600 and key.stat().st_uid == ex.grader.uid

    for student in STUDENTS:
        got = fetch(ex, accounts, student)
        assert got.returncode == 0, (got.stdout + got.stderr)[-3000:]
    ann, bo = (fetched(ex, s) for s in STUDENTS)
    assert numbers(ann) != numbers(bo)
    assert numbers(release) not in (numbers(ann), numbers(bo))
    for student, nb in zip(STUDENTS, (ann, bo)):
        _, own, _ = variants.cells(course, ASSIGNMENT, student)
        assert numbers(nb) == (own["inputs"], own["three_inputs"])

    # The key is in nothing a student can read, and nobody reads another's numbers.
    secret = key.read_bytes()
    for student in STUDENTS:
        seen = readable_bytes(ex.home(student)) + readable_bytes(ex.course / "feedback" / student) \
            + readable_bytes(ex.course / "outbound")
        assert secret not in seen and secret.hex().encode() not in seen
    peek = run_as(accounts["var-ann"], "import os, sys; os.listdir(sys.argv[1])",
                  str(ex.course / "feedback" / "var-bo" / "variants"))
    assert peek.returncode != 0 and "PermissionError" in peek.stderr

    # A student whose server started after the release is told so, and gets their own copy once written.
    hub_pre_spawn(ex.base, [LATE], grader_user=GRADER)
    ex.home(LATE).mkdir(parents=True, exist_ok=True)
    chown_tree(ex.home(LATE), accounts[LATE])
    refused = fetch(ex, accounts, LATE)
    assert refused.returncode != 0 and "Your own copy of self_attention is not ready yet" in refused.stdout + refused.stderr
    assert "wait a minute and fetch it again" in refused.stdout + refused.stderr
    assert not (ex.home(LATE) / ASSIGNMENT).exists()
    written = as_grader(ex, course, "variants", "write", ASSIGNMENT)
    assert written.returncode == 0 and "own copies written for 3 students" in written.stdout, written.stderr
    assert fetch(ex, accounts, LATE).returncode == 0
    assert numbers(fetched(ex, LATE)) not in (numbers(ann), numbers(bo), numbers(release))

    # Graded right on their own numbers, wrong on the other's (a real autograde, as root as in CI).
    full = {check: float(c.points) for check, c in ((check, _points(check)) for check in BY_HAND)}
    differing = {check for check, answer in zip(BY_HAND, ANSWER_CELLS)
                 if answer_source(typed_in(ann), answer) != answer_source(typed_in(bo), answer)}
    assert "by_hand_scores" in differing, differing  # the matrices differ whenever the numbers do
    for round_, (ann_nb, bo_nb) in enumerate(((ann, bo), (bo, ann))):
        write_submission(course, "var-ann", typed_in(ann_nb), name=f"{NOTEBOOK}.ipynb", assignment=ASSIGNMENT)
        write_submission(course, "var-bo", typed_in(bo_nb), name=f"{NOTEBOOK}.ipynb", assignment=ASSIGNMENT)
        graded = nbgrader(course, "autograde", ASSIGNMENT, "--force")
        assert graded.returncode == 0, graded.stderr[-3000:]
        # their own numbers are no edit for the TA to look at; the other's are
        assert ("was edited in this submission" in graded.stderr) == (round_ == 1), graded.stderr[-3000:]
        scores = by_hand_scores(course)
        for student in STUDENTS:
            if round_ == 0:
                assert scores[student] == full, (student, scores[student])
            else:  # wrong on each check whose answer differs between the two students' numbers (two
                # random variants can give one scalar the same value to four decimals)
                assert all(score == 0.0 for check, score in scores[student].items() if check in differing), \
                    (student, scores[student], differing)
        if round_ == 0:  # the feedback page names the student's variant, and nobody else's
            feedback = nbgrader(course, "generate_feedback", ASSIGNMENT, "--force")
            assert feedback.returncode == 0, feedback.stderr[-3000:]
            ids = {student: variants.variant_id(course, ASSIGNMENT, student) for student in STUDENTS}
            for student, other in (STUDENTS, STUDENTS[::-1]):
                page = (course / "feedback" / student / ASSIGNMENT / f"{NOTEBOOK}.html").read_text()
                assert f"(variant\n    {ids[student]})" in page and ids[other] not in page
                assert secret.hex() not in page

    # Switched off: everyone fetches the release's numbers again, and the personal copies are gone.
    off = as_grader(ex, course, "variants", "off", ASSIGNMENT)
    assert off.returncode == 0, off.stdout + off.stderr
    again = ex.nbgrader(course, "release_assignment", ASSIGNMENT, "--force", env=grader_lib(ex))
    assert again.returncode == 0, (again.stdout + again.stderr)[-3000:]
    for student in STUDENTS:
        assert fetch(ex, accounts, student).returncode == 0
        assert numbers(fetched(ex, student)) == numbers(release)
        assert not (ex.course / "feedback" / student / "variants" / ASSIGNMENT).exists()


def _points(check_id: str):
    from grader_tests.registry import CHECKS

    return CHECKS[check_id]
