"""The idle culler service of hub/jupyterhub_config.py stops a server nobody uses.

A hub of its own with ``CULL_IDLE_TIMEOUT`` of a few seconds (the deployment's is an
hour): a student opens JupyterLab and walks away; the culler, holding only the scopes
the README lists, must stop that server, and the student's files stay.
"""

from __future__ import annotations

import os
import time

import pytest

from hub_helpers import launch_hub

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(os.geteuid() != 0, reason="the hub's real Unix users need root (CI is root)"),
]

IDLE_SECONDS = 6


def test_an_idle_server_is_culled_and_the_home_kept(record_property):
    with launch_hub("cull-hub", env={"CULL_IDLE_TIMEOUT": str(IDLE_SECONDS)}) as hub:
        student = hub.session("student1")
        student.spawn()
        kept = hub.state / "home" / "student1" / "notes.txt"
        reply = student.put("/user/student1/api/contents/notes.txt",
                            json={"type": "file", "format": "text", "content": "my notes"})
        assert reply.status_code in (200, 201), reply.text
        idle_since = time.monotonic()

        while time.monotonic() - idle_since < 120:
            servers = student.hub_api("GET", "/users/student1").json().get("servers", {})
            if not servers:
                break
            time.sleep(1)
        else:
            pytest.fail("the idle culler left the server running for 120 s:\n"
                        + (hub.state / "jupyterhub.log").read_text(errors="replace")[-3000:])
        record_property("culled_after_seconds", round(time.monotonic() - idle_since, 1))
        assert time.monotonic() - idle_since >= IDLE_SECONDS - 1  # idle, not culled at once
        hub_log = (hub.state / "jupyterhub.log").read_text(errors="replace")
        assert "Culling server student1" in hub_log, hub_log[-3000:]
        assert kept.read_text() == "my notes"
