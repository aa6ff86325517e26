"""The idle culler service of jupyter_config/jupyterhub_config.py stops a server nobody uses.

A hub of its own with ``CULL_IDLE_TIMEOUT`` of a few seconds (the deployment's is an
hour): a student opens JupyterLab and walks away; the culler, holding only the scopes
the README lists, must stop that server, and the student's files stay.
"""

from __future__ import annotations

import os
import re
import time
from datetime import datetime, timezone

import pytest

from hub_helpers import launch_hub

pytestmark = [
    pytest.mark.slow,
    pytest.mark.hub,
    pytest.mark.root,
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
        # Idle since the last activity the hub knows of (the spawn, on a loaded machine seconds
        # before our save): that is what the culler measures, so the test measures it too.
        server = student.hub_api("GET", "/users/student1").json()["servers"][""]
        last_activity = datetime.fromisoformat(server["last_activity"].replace("Z", "+00:00"))
        idle_since = time.monotonic()

        while time.monotonic() - idle_since < 120:
            servers = student.hub_api("GET", "/users/student1").json().get("servers", {})
            if not servers:
                break
            time.sleep(1)
        else:
            pytest.fail("the idle culler left the server running for 120 s:\n"
                        + (hub.state / "jupyterhub.log").read_text(errors="replace")[-3000:])
        culled_after = (datetime.now(timezone.utc) - last_activity).total_seconds()
        record_property("culled_after_seconds", round(culled_after, 1))
        assert culled_after >= IDLE_SECONDS - 1  # idle as long as configured, not culled at once
        hub_log = (hub.state / "jupyterhub.log").read_text(errors="replace")
        inactive = re.search(r"Culling server student1 \(inactive for (\d+):(\d+):(\d+)\)", hub_log)
        assert inactive, hub_log[-3000:]
        hours, minutes, seconds = map(int, inactive.groups())
        assert hours * 3600 + minutes * 60 + seconds >= IDLE_SECONDS
        assert kept.read_text() == "my notes"
