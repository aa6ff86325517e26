"""The red team's attacks on the exchange, each run as the attack itself (real Unix users, real nbgrader).

3   a student replaces the exchange view the hub made for them (or the grader replaces a
    student's inbound folder) with a symlink, and the hub's root pre-spawn step runs again.

Students act as their own Unix users (useradd, as the hub launcher does) through their
view, as their server's kernel could; the grader's commands are real ``nbgrader`` runs with
the grader config the hub ships, as root (today's hub) and as a dedicated unprivileged
grader account (the privilege model being introduced). Everything lives in a scratch folder
under build/, removed afterwards; destructive payloads carry caps (RLIMIT_FSIZE, timeouts,
sparse files).
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import stat

import pytest

from attention_platform.course.directory import copy_course
from attention_platform.hub.exchange_layout import Ids
from tests.fault_helpers import ASSIGNMENT, COURSE, REPO, SWAP_FOR_LINK, chown_tree, hub_pre_spawn, make_exchange, \
    run_as, snapshot, unix_user

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="real Unix users need root (CI is root)")

STUDENTS = ("xch-ann", "xch-bo", "xch-cy")
GRADER = "xch-grader"


@pytest.fixture(scope="module")
def accounts() -> dict[str, Ids]:
    homes = REPO / "build" / "exchange-attacks-homes"
    return {name: unix_user(name, homes / name, system=name == GRADER) for name in (*STUDENTS, GRADER)}


@pytest.fixture
def scratch(request):
    top = REPO / "build" / "exchange-attacks"
    top.mkdir(parents=True, exist_ok=True)
    top.chmod(0o755)
    path = top / "{}-{}".format(re.sub(r"[^A-Za-z0-9_-]", "-", request.node.name)[:50], secrets.token_hex(3))
    path.mkdir(mode=0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


# ---------------------------------------------------------------------------------------------- 3
@pytest.mark.parametrize("attacker, state_left_by", [("student", "this hub"), ("student", "the previous hub"),
                                                     ("grader", "this hub")])
def test_the_hubs_root_step_follows_no_link_a_student_or_the_grader_planted(scratch, accounts, attacker,
                                                                           state_left_by):
    def spawn(user):
        hub_pre_spawn(scratch, [user], grader_user=GRADER)

    ann, grader = accounts["xch-ann"], accounts[GRADER]
    # The target: a directory the attacker cannot read (the course directory: gradebook, config).
    target = copy_course(scratch / "course")
    (target / "gradebook.db").write_text("grades")
    chown_tree(target, grader)
    target.chmod(0o700)
    before = snapshot(target)

    spawn("xch-ann")  # the student's first server start
    view = scratch / "views" / "xch-ann" / COURSE
    if state_left_by == "the previous hub":  # what the hub before this change left: views owned by the student
        for path in (view.parent, view):
            os.chown(path, ann.uid, ann.gid)
            path.chmod(0o700)
    if attacker == "student":
        swapped, who = view, ann
    else:
        swapped, who = scratch / "exchange" / COURSE / "inbound" / "xch-ann", grader
    attempt = run_as(who, SWAP_FOR_LINK, str(swapped), str(target))
    assert attempt.returncode == 0, attempt.stderr
    print(f"\n{attacker} replacing {swapped.name}: {attempt.stdout.strip()}")

    spawn("xch-ann")  # the student stops and starts their server: root's step runs again
    assert snapshot(target) == before
    leak = run_as(ann, "print(open(__import__('sys').argv[1]).read())", str(target / "gradebook.db"))
    assert leak.returncode != 0 and "PermissionError" in leak.stderr
    for path in (view.parent, view):
        st = os.lstat(path)
        assert stat.S_ISDIR(st.st_mode) and st.st_uid == 0 and stat.S_IMODE(st.st_mode) == 0o750, path
    inbound = scratch / "exchange" / COURSE / "inbound" / "xch-ann"
    assert stat.S_ISDIR(os.lstat(inbound).st_mode) and os.lstat(inbound).st_uid == ann.uid
    assert os.readlink(view / "inbound") == str(inbound)
    for sub in ("outbound", "inbound", "feedback"):
        assert os.lstat(view / sub).st_uid == 0


def test_docker_mode_lays_out_the_same_folders_with_the_containers_ids(scratch):
    """Docker: one uid for every container (1000:100), isolation by mounts; the same layout code."""
    hub_pre_spawn(scratch, ["xch-ann"], mode="docker")
    course = scratch / "exchange" / COURSE
    expected = {course: (0, 0, 0o755), course / "outbound": (1000, 100, 0o755), course / "inbound": (0, 100, 0o751),
                course / "inbound" / "xch-ann": (1000, 100, 0o2770), course / "feedback": (0, 0, 0o711),
                course / "feedback" / "xch-ann": (1000, 100, 0o2750)}
    for path, (uid, gid, mode) in expected.items():
        st = os.lstat(path)
        assert stat.S_ISDIR(st.st_mode) and (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (uid, gid, mode), path
    assert not (scratch / "views").exists()  # bind mounts stand in for views


@pytest.mark.slow
def test_an_unprivileged_grader_lists_and_releases_without_writing_the_exchange_root(scratch, accounts):
    """The formgrader calls the exchange missing when nbgrader's listing fails; the root is root's now."""
    grader = accounts[GRADER]
    ex = make_exchange(scratch, ["xch-ann"], users={"xch-ann": accounts["xch-ann"]}, grader=grader)
    course = copy_course(scratch / "course")
    shutil.copytree(ex.course / "outbound" / ASSIGNMENT, course / "release" / ASSIGNMENT)
    chown_tree(course, grader)
    shutil.rmtree(ex.course / "outbound" / ASSIGNMENT)  # the grader releases it again, below

    released = ex.nbgrader(course, "release_assignment", ASSIGNMENT)
    assert released.returncode == 0, released.stderr[-3000:]
    listed = ex.nbgrader(course, "list")
    assert listed.returncode == 0 and f"{COURSE} {ASSIGNMENT}" in listed.stdout + listed.stderr, listed.stderr[-3000:]
    removed = ex.nbgrader(course, "list", "--remove")
    assert removed.returncode == 0, removed.stderr[-3000:]
    assert not (ex.course / "outbound" / ASSIGNMENT).exists()
    st = os.stat(ex.root)
    assert (st.st_uid, stat.S_IMODE(st.st_mode)) == (0, 0o755)
