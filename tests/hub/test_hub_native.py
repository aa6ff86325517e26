"""The native hub's preparation: ``hide_course_secrets`` (students lose access to the checkout's
secrets, its owner keeps it), the ports it needs (a busy one is named before anything starts) and
the cgroup each server gets (the spawner's caps themselves: tests/hub/test_hub_api.py)."""

from __future__ import annotations

import os
import socket
import stat
import subprocess
from hashlib import sha256

import pytest

from attention_platform.hub.native import SECRET_PATHS, hide_course_secrets
from attention_platform.hub.native_spawner import cgroup_name
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


def test_every_server_has_a_cgroup_of_its_own():
    """A server's start empties its cgroup: two servers sharing one would stop each other."""
    servers = [("alice", ""), ("alice", "second"), ("alice", "Second"), ("alice", "a/../b"), ("bob", ""),
               ("alice-second", ""), (f"alice-{sha256(b'second').hexdigest()[:12]}", "")]
    names = [cgroup_name(user, server) for user, server in servers]
    assert len(set(names)) == len(servers)
    assert names[0] == "server-alice" and all(name.startswith("server-") and "/" not in name for name in names)
