"""The native hub's preparation: ``hide_course_secrets`` (students lose access to the checkout's
secrets, its owner keeps it) and the ports it needs (a busy one is named before anything starts)."""

from __future__ import annotations

import os
import socket
import stat
import subprocess

import pytest

from attention_platform.hub.native import SECRET_PATHS, hide_course_secrets
from attention_platform.venv import environment, program
from hub_helpers import free_hub_port

OWNER = 4242  # a developer's uid: not root, not a student


@pytest.mark.skipif(os.geteuid() != 0, reason="chowning the sample checkout needs root (CI is root)")
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


@pytest.mark.skipif(os.geteuid() != 0, reason="processes of other uids need root (CI is root)")
def test_stopping_ends_what_a_users_server_left_behind(tmp_path):
    """A student's kernel outlives its server when the hub stops the server first (it exits a second
    later, when it notices its parent is gone): stopping the hub waits for such a process of a hub
    user that names this hub's folder, and kills it if it lingers. Processes of other accounts, and
    of hub users that do not belong to this hub, are left alone."""
    import sys
    import time

    from attention_platform.hub.accounts import UidRange
    from attention_platform.hub.native import stop_leftovers

    state = tmp_path / "hub-state"
    state.mkdir()
    stubborn = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(60)"
    in_range = UidRange().last - 7

    def process(uid: int, *argv: str) -> subprocess.Popen:
        return subprocess.Popen([sys.executable, "-S", "-c", stubborn, *argv], user=uid, cwd="/")

    cases = [  # (process, must be ended)
        (process(in_range, str(state / "runtime" / "kernel-1.json")), True),
        (process(in_range, str(tmp_path / "hub-state-2" / "kernel-1.json")), False),  # another hub's
        (process(65534, str(state / "runtime" / "kernel-2.json")), False),  # not a hub user (nobody)
        (process(in_range), False),
    ]
    try:
        time.sleep(0.5)  # each has exec'd: its command line is the one above
        started = time.monotonic()
        ended = stop_leftovers(state, [UidRange()], grace=1.0)
        assert time.monotonic() - started < 5
        assert ended == [cases[0][0].pid]
        time.sleep(0.2)
        assert [proc.poll() is not None for proc, _ in cases] == [must for _, must in cases]
    finally:
        for proc, _ in cases:
            proc.kill()
            proc.wait()
