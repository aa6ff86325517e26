"""One grading run at a time per course (attention_platform/grading/course_lock.py).

The race itself (two TAs' ``nbgrader autograde`` at once) is in tests/hub/test_faults_exchange.py;
it depends on timing. These tests do not: they hold the course's lock themselves and show that
each way of grading waits for it in the kernel (``/proc/locks`` lists it as blocked), grades
once it is let go, and replaces what another run wrote for the same submission meanwhile.
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import nbformat
import pytest

from attention_platform.course.directory import write_submission
from attention_platform.grading.course_lock import LOCK_FILE, course_grading_lock
from attention_platform.venv import environment, program
from grader_tests.self_attention.answers import ASSIGNMENT, CORRECT, NOTEBOOK, with_answer

pytestmark = pytest.mark.slow

GRADERS = [
    ("nbgrader autograde", lambda course: [program("nbgrader"), "autograde", ASSIGNMENT]),
    ("autograde-batch", lambda course: [program("attention-course"), "autograde-batch", ASSIGNMENT,
                                        "--course", str(course), "--no-progress"]),
]


@pytest.fixture(scope="module")
def generated(tmp_path_factory, released_course) -> Path:
    return released_course(tmp_path_factory.mktemp("lock") / "course", ASSIGNMENT)


@pytest.fixture
def course(generated, tmp_path) -> Path:
    """The generated course with one correct submission by ann, its own copy per test."""
    import shutil

    copy = tmp_path / "course"
    shutil.copytree(generated, copy, symlinks=True)
    release = nbformat.read(copy / "release" / ASSIGNMENT / NOTEBOOK, as_version=4)
    write_submission(copy, "ann", with_answer(release, CORRECT[0].code), assignment=ASSIGNMENT, name=NOTEBOOK)
    return copy


def blocked_on(lock: Path, pid: int) -> bool:
    """Whether ``pid`` waits in the kernel for a lock on ``lock`` (a ``->`` line of /proc/locks)."""
    inode = os.stat(lock).st_ino
    for line in Path("/proc/locks").read_text().splitlines():
        fields = line.split()
        if len(fields) > 5 and fields[1] == "->" and fields[5] == str(pid) and fields[6].endswith(f":{inode}"):
            return True
    return False


def wait_until_blocked(process: subprocess.Popen, lock: Path, limit: float = 300) -> None:
    give_up = time.monotonic() + limit
    while not blocked_on(lock, process.pid):
        if process.poll() is not None:
            pytest.fail(f"graded without waiting for the course's lock:\n{process.stdout.read()[-3000:]}")
        if time.monotonic() > give_up:
            process.kill()
            pytest.fail(f"never reached the course's lock in {limit:g} s")
        time.sleep(0.1)


@pytest.mark.parametrize("name, command", GRADERS, ids=[name for name, _ in GRADERS])
@pytest.mark.root
def test_grading_waits_for_the_course_lock_then_grades(course, name, command):
    graded = course / "autograded" / "ann" / ASSIGNMENT / NOTEBOOK
    with course_grading_lock(course):
        process = subprocess.Popen(command(course), cwd=course, env=environment(), stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT, text=True)
        wait_until_blocked(process, course / LOCK_FILE)
        assert not graded.exists(), f"{name} wrote its grading while another run held the course"
    log = process.communicate(timeout=600)[0]
    assert process.returncode == 0, log[-3000:]
    assert nbformat.read(graded, as_version=4).cells


@pytest.mark.root
def test_what_another_run_wrote_while_autograde_waited_is_written_anew(course):
    """nbgrader decided to grade ann before it waited; the copy the lock's holder wrote meanwhile
    is removed, not written into (nbgrader's writer could not open a read-only file unless root)."""
    graded = course / "autograded" / "ann" / ASSIGNMENT / NOTEBOOK
    with course_grading_lock(course):
        process = subprocess.Popen([program("nbgrader"), "autograde", ASSIGNMENT], cwd=course, env=environment(),
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        wait_until_blocked(process, course / LOCK_FILE)
        graded.parent.mkdir(parents=True, exist_ok=True)
        graded.write_text("written by the other TA's run")
        graded.chmod(0o444)
        planted = graded.stat().st_ino
    log = process.communicate(timeout=600)[0]
    assert process.returncode == 0, log[-3000:]
    assert graded.stat().st_ino != planted
    assert nbformat.read(graded, as_version=4).cells


def test_a_lock_file_that_is_a_link_is_refused(tmp_path):
    target = tmp_path / "elsewhere"
    target.write_text("")
    (tmp_path / LOCK_FILE).symlink_to(target)
    with pytest.raises(OSError):
        with course_grading_lock(tmp_path):
            pass
