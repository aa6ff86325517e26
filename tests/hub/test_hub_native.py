"""The native hub's preparation: ``hide_course_secrets`` (students lose access to the checkout's
secrets, its owner keeps it), the ports it needs (a busy one is named before anything starts), the
cgroup each server gets and what its own /tmp shows of the machine's (the spawner's caps and /tmp on
a real hub: tests/hub/test_hub_api.py), and every assignment of the course generated and released."""

from __future__ import annotations

import json
import os
import shutil
import socket
import stat
import subprocess
import sys
from hashlib import sha256

import pytest

from attention_platform.hub.native import SECRET_PATHS, DemoClass, hide_course_secrets, prepare
from attention_platform.hub.native_spawner import (TmpKeepRefused, cgroup_name, check_tmp_keep, kept_under_tmp,
                                                   unclaimed_port)
from attention_platform.venv import environment, program
from grader_tests.registry import ASSIGNMENTS, assignment
from hub_helpers import REPO, free_hub_port, free_port

OWNER = 4242  # a developer's uid: not root, not a student


@pytest.mark.skipif(os.geteuid() != 0, reason="chowning the sample checkout needs root (CI is root)")
@pytest.mark.root
def test_secrets_lose_other_access_and_keep_their_owner(tmp_path):
    (tmp_path / "grader_tests").mkdir()
    (tmp_path / "grader_tests" / "reference.py").write_text("SOLUTION = 1\n")
    (tmp_path / "gradebook.db").write_text("")
    (tmp_path / "release").mkdir()
    for path in (tmp_path / "grader_tests", tmp_path / "gradebook.db", tmp_path / "release"):
        os.chown(path, OWNER, OWNER)
        path.chmod(0o755 if path.is_dir() else 0o644)

    hide_course_secrets(tmp_path, log=lambda _: None)

    for name, mode in (("grader_tests", 0o750), ("gradebook.db", 0o640)):
        info = (tmp_path / name).stat()
        assert (info.st_uid, stat.S_IMODE(info.st_mode)) == (OWNER, mode), name
    assert stat.S_IMODE((tmp_path / "release").stat().st_mode) == 0o755  # what students are given
    assert "release" not in SECRET_PATHS and "attention_platform" not in SECRET_PATHS


@pytest.mark.parametrize("offset, named", [(0, "the hub (--port)"), (1, "the proxy's API (--port + 1)"),
                                           (81, "the hub's own server (--port + 81)")])
def test_a_busy_port_is_named_before_the_hub_prepares_anything(tmp_path, offset, named):
    port = free_hub_port()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", port + offset))
        taken.listen()
        done = subprocess.run([program("attention-course"), "hub", "--state-dir", str(tmp_path / "state"),
                               "--port", str(port)], env=environment(), capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"{named}: {port + offset}" in done.stderr
    assert not (tmp_path / "state").exists()  # no accounts, no course: nothing was prepared


def test_two_servers_started_at_one_moment_never_get_one_port():
    # the kernel names the same free port twice, as it did to two of 30 spawns at once; the second is
    # given the next port it names, and a stopped server's port is free again
    handed_out: set[int] = set()
    named = iter([37439, 37439, 41000, 37439])
    first = unclaimed_port(handed_out, draw=lambda: next(named))
    second = unclaimed_port(handed_out, draw=lambda: next(named))
    assert (first, second) == (37439, 41000)
    handed_out.discard(first)
    assert unclaimed_port(handed_out, draw=lambda: next(named)) == 37439
    with pytest.raises(RuntimeError, match="no port free"):
        unclaimed_port(handed_out, draw=lambda: 37439, tries=3)


def test_every_server_has_a_cgroup_of_its_own():
    """A server's start empties its cgroup: two servers sharing one would stop each other."""
    servers = [("alice", ""), ("alice", "second"), ("alice", "Second"), ("alice", "a/../b"), ("bob", ""),
               ("alice-second", ""), (f"alice-{sha256(b'second').hexdigest()[:12]}", "")]
    names = [cgroup_name(user, server) for user, server in servers]
    assert len(set(names)) == len(servers)
    assert names[0] == "server-alice" and all(name.startswith("server-") and "/" not in name for name in names)


@pytest.mark.parametrize("paths, kept", [
    (["/srv/course", "/usr/lib/python3"], []),  # nothing under /tmp: nothing to bind back
    (["/tmp/ci/main", "/tmp/ci/main/.venv", "/tmp/ci/main/build/hub"], ["/tmp/ci/main"]),  # inside a kept one
    (["/tmp/state/exchange", "/tmp/state", "/tmp/states"], ["/tmp/state", "/tmp/states"]),  # a prefix is not a parent
    (["/tmp/a/../b", "/tmp/b/", "", "/tmp"], ["/tmp/b"]),  # written differently, empty, /tmp itself
])
def test_a_servers_tmp_keeps_each_path_it_needs_once(paths, kept):
    assert kept_under_tmp(paths) == kept


@pytest.mark.skipif(os.geteuid() != 0, reason="chowning a folder to a student's uid needs root (CI is root)")
@pytest.mark.root
def test_root_binds_nothing_a_user_could_have_put_in_tmp(tmp_path):
    """Any account can create entries in the machine's /tmp: a kept path reached through a student's
    folder or a link is refused with a message, before a server starts."""
    (tmp_path / "state" / "exchange").mkdir(parents=True)
    check_tmp_keep([str(tmp_path / "state"), str(tmp_path / "not-there-yet")])  # root's all the way, or missing
    (tmp_path / "planted").mkdir()
    os.chown(tmp_path / "planted", 20001, 20001)  # a hub user's uid
    (tmp_path / "planted" / "state").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "state")
    for path in (tmp_path / "planted" / "state", tmp_path / "link"):
        with pytest.raises(TmpKeepRefused, match="STUDENT_TMP_SIZE=0"):
            check_tmp_keep([str(path)])


@pytest.mark.skipif(os.geteuid() != 0, reason="a mount namespace of its own needs root (CI is root)")
@pytest.mark.root
def test_a_servers_own_tmp_shows_only_what_it_needs_of_the_machines(tmp_path):
    """In a mount namespace of its own, as the spawner's preexec does: /tmp is a fresh tmpfs with the
    kept path bound back (its contents live, the folders above it with the machine's mode) and
    nothing else of the machine's /tmp, another account's files included."""
    (tmp_path / "course" / "state").mkdir(parents=True)
    (tmp_path / "course").chmod(0o711)
    (tmp_path / "course" / "state" / "answers.txt").write_text("kept")
    other = tmp_path / "someone-elses.txt"
    other.write_text("not for you")
    scratch = f"/tmp/scratch-{os.getpid()}-{tmp_path.name}"  # written in the server's own /tmp only
    code = (
        "import json, os, sys\n"
        "from attention_platform.hub.native_spawner import private_tmp\n"
        "private_tmp(8 << 20, [sys.argv[1]])\n"
        "state = sys.argv[1]\n"
        "print(json.dumps({'kept': open(state + '/answers.txt').read(),\n"
        "                  'mode': oct(os.stat(os.path.dirname(state)).st_mode & 0o7777),\n"
        "                  'other': os.path.exists(sys.argv[2]), 'size': os.statvfs('/tmp').f_blocks * os.statvfs('/tmp').f_frsize,\n"
        "                  'tmp': sorted(os.listdir('/tmp'))}))\n"
        "open(state + '/written.txt', 'w').write('through the bind')\n"
        "open(sys.argv[3], 'w').write('mine')\n")
    done = subprocess.run(["unshare", "--mount", "--propagation", "private", sys.executable, "-c", code,
                           str(tmp_path / "course" / "state"), str(other), scratch], capture_output=True, text=True,
                          env=environment(), timeout=60)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert seen["kept"] == "kept" and seen["mode"] == "0o711" and seen["other"] is False
    assert seen["size"] == 8 << 20 and seen["tmp"] == [tmp_path.relative_to("/tmp").parts[0]]
    assert (tmp_path / "course" / "state" / "written.txt").read_text() == "through the bind"
    assert not os.path.exists(scratch)


def test_the_lab_learns_each_assignments_order_without_the_launcher_importing_torch():
    """The order is in the hub's environment, so it is read before the hub starts: from the catalogues
    alone, never through the checks' judges (which import torch, seconds before the login page answers)."""
    script = ("import json, sys; from attention_platform.hub.native import notebook_order_setting; "
              "print(json.dumps([notebook_order_setting(), 'torch' in sys.modules]))")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True)
    order, imported_torch = json.loads(done.stdout)
    assert json.loads(order) == {name: list(assignment(name).notebooks) for name in sorted(ASSIGNMENTS)}
    assert not imported_torch


@pytest.mark.skipif(os.geteuid() != 0, reason="the launcher prepares real accounts as root")
@pytest.mark.root
@pytest.mark.hub
@pytest.mark.slow
def test_the_launcher_releases_every_assignment_and_tells_the_lab_its_order():
    state = REPO / "build" / "release-every-assignment"  # the grader's nbgrader reaches it (tmp_path: root's 0700)
    if state.exists():
        shutil.rmtree(state)
    said = []
    hub = prepare(state, port=free_hub_port(), formgrader_port=free_port(), demo=DemoClass(size=1), log=said.append)
    outbound = hub.exchange / hub.course / "outbound"
    for name in sorted(ASSIGNMENTS):
        assert sorted(path.stem for path in (outbound / name).glob("*.ipynb")) == sorted(assignment(name).notebooks)
    assert json.loads(hub.env["ATTENTION_NOTEBOOK_ORDER"]) == {name: list(assignment(name).notebooks)
                                                               for name in sorted(ASSIGNMENTS)}
    assert any(line.startswith("released to ") and all(name in line for name in ASSIGNMENTS) for line in said), said


@pytest.mark.skipif(os.geteuid() != 0, reason="the launcher prepares real accounts as root")
@pytest.mark.root
@pytest.mark.hub
@pytest.mark.slow
def test_the_login_page_answers_before_the_assignments_and_services_are_started(security_hub):
    """`make start`: the login page first; the release (nbgrader commands of seconds each), the broker's
    warm-up and the grader's services follow, and the launcher says when everything is up. (Read on the
    security hub's launcher, which ran that command; its student may have fetched the assignment already.)"""
    said = security_hub.log()
    login = said.index("its login page answers on " + security_hub.url)
    assert login < said.index("released to ") < said.index("Everything started in ") < said.index("Press Ctrl-C")
    assert "student1" in said[login:said.index("released to ")]  # the logins are printed with the login page
    session = security_hub.session("student1")
    session.spawn()
    first = sorted(ASSIGNMENTS)[0]
    fetched = session.assignment_action("fetch", first)
    assert fetched["success"] or session.contents(first).status_code == 200, fetched
