"""Faults at the exchange, with submissions in flight. No hub needed.

* the exchange volume is full / read-only at submit time: the student reads a clear
  "NOT received" message and nothing half-written lands in the inbound (stock nbgrader,
  run on the same full volume, does leave a partial folder: the control that shows the
  test can fail);
* a TA collects while students are still submitting: nothing partial is ever collected,
  and the last collect has every student's newest submission;
* two TAs autograde the same assignment at once: the gradebook stays consistent.

Root mounts a tiny tmpfs (full) and a read-only bind mount; without root the same faults
come from RLIMIT_FSIZE and a read-only directory mode.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
from pathlib import Path

import nbformat
import pytest

from attention_platform.course.directory import copy_course, write_submission
from grader_tests.self_attention.answers import BUGGY, CORRECT, NOTEBOOK, with_answer
from tests.fault_helpers import ASSIGNMENT, COURSE, add_ballast, make_exchange, submission_digest, write_marker

ROOT = os.geteuid() == 0
STOCK_SUBMIT = 'c = get_config()\nc.ExchangeFactory.submit = "nbgrader.exchange.default.submit.ExchangeSubmit"\n'


@contextlib.contextmanager
def tiny_volume(path: Path, kilobytes: int):
    """``path`` becomes a tmpfs of ``kilobytes`` (root), unmounted afterwards."""
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={kilobytes}k,mode=2770", "tmpfs", str(path)], check=True)
    try:
        yield
    finally:
        subprocess.run(["umount", "-l", str(path)], check=True)


@contextlib.contextmanager
def read_only(path: Path):
    if ROOT:
        subprocess.run(["mount", "--bind", str(path), str(path)], check=True)
        try:
            subprocess.run(["mount", "-o", "remount,ro,bind", str(path)], check=True)
            yield
        finally:
            subprocess.run(["umount", "-l", str(path)], check=True)
    else:
        mode = path.stat().st_mode
        path.chmod(0o550)
        try:
            yield
        finally:
            path.chmod(mode)


def _size_kb(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()) // 1024


@pytest.mark.parametrize("submit_class", ["ours", "stock"])
@pytest.mark.root
def test_full_exchange_at_submit_leaves_nothing_and_says_so(tmp_path, submit_class):
    ex = make_exchange(tmp_path, ["ann"])
    work = ex.home("ann") / ASSIGNMENT
    add_ballast(work, 64)  # larger than the volume: the copy runs out of space half-way
    if submit_class == "stock":
        (ex.home("ann") / "nbgrader_config.py").write_text(STOCK_SUBMIT)
    if ROOT:  # a real full volume
        with tiny_volume(ex.inbound("ann"), kilobytes=max(8, _size_kb(work) // 2)):
            [result] = ex.submit("ann")
            left = ex.entries("ann")
    else:  # no mount without root: the same failure (a write refused half-way) from RLIMIT_FSIZE
        [result] = ex.submit("ann", max_file_bytes=_size_kb(work) * 512)
        left = ex.entries("ann")
    assert result["success"] is False
    if submit_class == "stock":
        # The control: stock nbgrader leaves a half-written submission where collect looks.
        assert left and not left[0].startswith("."), left
        return
    assert left == [], f"half-written submission left in the inbound: {left}"
    message = result["value"].strip().splitlines()[-1]
    assert "NOT received" in message and ("full" in message or "larger" in message), message
    # Space again: the retry arrives, once, intact.
    [retry] = ex.submit("ann")
    assert retry["success"], retry["value"]
    [sub] = ex.submissions("ann")
    assert submission_digest(sub) == submission_digest(work)
    assert ex.entries("ann") == [sub.name]


def test_read_only_exchange_at_submit_says_so_and_writes_nothing(tmp_path):
    ex = make_exchange(tmp_path, ["ann"])
    with read_only(ex.inbound("ann")):
        [result] = ex.submit("ann")
    assert result["success"] is False
    message = result["value"].strip().splitlines()[-1]
    assert "NOT received" in message and ("read-only" in message or "not allowed" in message), message
    assert ex.entries("ann") == []
    [retry] = ex.submit("ann")
    assert retry["success"], retry["value"]
    assert len(ex.submissions("ann")) == 1


def test_identical_retry_files_nothing_new(tmp_path):
    """What a student does when the answer to Submit never came back: press it again."""
    ex = make_exchange(tmp_path, ["ann"])
    first, again = ex.submit("ann", count=2)
    assert first["success"] and again["success"], (first, again)
    assert len(ex.submissions("ann")) == 1
    # the student's own record (their Assignments list) shows the one submission once
    record = ex.home("ann") / ".local/share/jupyter/nbgrader_cache" / COURSE
    assert len(list(record.glob(f"ann+{ASSIGNMENT}+*"))) == 1
    write_marker(ex.home("ann") / ASSIGNMENT, "changed")
    [changed] = ex.submit("ann")
    assert changed["success"] and len(ex.submissions("ann")) == 2


@pytest.mark.slow
def test_collect_while_students_submit_never_collects_a_partial_submission(tmp_path):
    students = ["ann", "bo", "cy"]
    rounds = 3
    ex = make_exchange(tmp_path, students)
    for s in students:
        add_ballast(ex.home(s) / ASSIGNMENT, 1024)  # 1 MB a notebook: copies take long enough to race
    course = copy_course(tmp_path / "course")
    # Each student submits every few seconds, so collects (seconds each) overlap submits.
    submitters = {s: ex.submit_async(s, rounds, marker=s, pause=3) for s in students}
    seen = []  # (student, timestamp, digest) of every collected submission
    problems = []
    try:
        for _ in range(600):  # bounded wait for the first submission to land
            if any(ex.submissions(s) for s in students) or any(p.poll() is not None for p in submitters.values()):
                break
            time.sleep(0.1)
        for _ in range(12):  # bounded: a collect takes seconds
            collect = ex.nbgrader(course, "collect", ASSIGNMENT, "--update")
            assert collect.returncode == 0, collect.stderr[-3000:]
            for s in students:
                folder = course / "submitted" / s / ASSIGNMENT
                if not folder.is_dir():
                    continue
                stamp = folder / "timestamp.txt"
                if not stamp.exists():
                    problems.append(f"{s}: collected without timestamp.txt")
                    continue
                seen.append((s, stamp.read_text().strip(), submission_digest(folder)))
            if all(p.poll() is not None for p in submitters.values()):
                break
    finally:
        outputs = {s: p.communicate(timeout=300) for s, p in submitters.items()}
    for s, (out, err) in outputs.items():
        assert submitters[s].returncode == 0, err[-3000:]
        assert out.count('"success": true') == rounds, out + err
    final = ex.nbgrader(course, "collect", ASSIGNMENT, "--update")
    assert final.returncode == 0, final.stderr[-3000:]

    inbound = {}
    for s in students:
        assert not [e for e in ex.entries(s) if e.startswith(".")], ex.entries(s)
        subs = ex.submissions(s)
        assert len(subs) == rounds, subs
        for sub in subs:
            inbound[(s, (sub / "timestamp.txt").read_text().strip())] = submission_digest(sub)
        newest = max(subs, key=lambda p: p.name.split("+")[2])
        folder = course / "submitted" / s / ASSIGNMENT
        assert (folder / "timestamp.txt").read_text().strip() == (newest / "timestamp.txt").read_text().strip()
        assert submission_digest(folder) == submission_digest(newest)
        nb = nbformat.read(folder / NOTEBOOK, as_version=4)
        assert nb.metadata["load_marker"] == f"{s}-{rounds - 1}"
    assert seen, "no collect ran while students were submitting"
    for s, stamp, digest in seen:
        if inbound.get((s, stamp)) != digest:
            problems.append(f"{s}: collected {stamp} differs from what was submitted at that time")
    assert not problems, problems


@pytest.mark.slow
@pytest.mark.root
def test_two_tas_autograde_at_once_keep_the_gradebook_consistent(tmp_path, released_course):
    from nbgrader.api import Gradebook

    from attention_platform.course.directory import check_scores

    course = released_course(tmp_path / "course", ASSIGNMENT)
    release = nbformat.read(course / "release" / ASSIGNMENT / NOTEBOOK, as_version=4)
    answers = {"ann": CORRECT[0], "bo": BUGGY[0], "cy": BUGGY[1]}
    for student, answer in answers.items():
        write_submission(course, student, with_answer(release, answer.code), assignment=ASSIGNMENT, name=NOTEBOOK)
    env = dict(os.environ, PATH=str(Path(os.sys.executable).parent) + os.pathsep + os.environ.get("PATH", ""))
    tas = [subprocess.Popen([str(Path(os.sys.executable).parent / "nbgrader"), "autograde", ASSIGNMENT],
                            cwd=course, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
           for _ in range(2)]
    logs = [ta.communicate(timeout=900)[0] for ta in tas]
    for ta, log in zip(tas, logs):
        assert ta.returncode == 0, log[-4000:]

    scores = check_scores(course, assignment=ASSIGNMENT, notebook=NOTEBOOK)
    from tests.gradebooks import CELLS, scores_for  # noqa: E402 (heavy import, only here)

    for student, answer in answers.items():
        expected = scores_for(answer.name) if answer in BUGGY else {g: m for g, m in CELLS.items()}
        assert scores[student] == expected, student
    with Gradebook("sqlite:///" + str(course / "gradebook.db"), COURSE) as gb:
        assignment = gb.find_assignment(ASSIGNMENT)
        subs = gb.assignment_submissions(ASSIGNMENT)
        assert sorted(s.student_id for s in subs) == sorted(answers)
        for sub in subs:
            assert len(sub.notebooks) == len(assignment.notebooks)
            for nb in sub.notebooks:
                source_nb = gb.find_notebook(nb.name, ASSIGNMENT)
                assert len(nb.grades) == len(source_nb.grade_cells), (sub.student_id, nb.name)
                assert len({g.name for g in nb.grades}) == len(nb.grades)
            stamp = (course / "autograded" / sub.student_id / ASSIGNMENT / "timestamp.txt").read_text().strip()
            submitted = (course / "submitted" / sub.student_id / ASSIGNMENT / "timestamp.txt").read_text().strip()
            assert stamp == submitted
            assert (course / "autograded" / sub.student_id / ASSIGNMENT / NOTEBOOK).exists()
