"""Attack 3 on the real native hub (the README's `make start` command, as root, real Unix users).

A student replaces the exchange view the hub prepared for them with a symbolic link to the
course directory (gradebook, nbgrader_config.py: a directory they cannot read), then stops
and starts their server through the hub's REST API. The hub's pre-spawn step runs as root:
it must neither follow the link nor touch the target. Twice: on the view this hub made
(root's: the swap itself is refused) and on a view as the hub before this change left it
(the student's own: the swap succeeds, and root's step must replace the link, not follow it).
"""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path

import pytest

from attention_platform.exchange.exchange_layout import Ids
from grader_tests.registry import ASSIGNMENTS
from tests.fault_helpers import SWAP_FOR_LINK, run_as, snapshot
from tests.hub_helpers import COURSE

pytestmark = [pytest.mark.slow, pytest.mark.hub, pytest.mark.root,
              pytest.mark.skipif(os.geteuid() != 0, reason="the hub's real Unix users need root (CI is root)"),
              pytest.mark.skipif(not (Path(__file__).resolve().parents[2] / "node_modules/.bin/configurable-http-proxy")
                                 .exists(), reason="configurable-http-proxy missing: make system-deps")]

STUDENT = "student3"  # of the released course's hub for attacks, a student no other attack logs in as


@pytest.fixture(scope="module")
def hub(security_hub):
    return security_hub


def restart(session, timeout: float = 120) -> None:
    """Stop the student's server through the hub API, wait until it is gone, start it again."""
    stopped = session.hub_api("DELETE", f"/users/{session.username}/server")
    assert stopped.status_code in (202, 204), stopped.text
    deadline = time.monotonic() + timeout
    while session.hub_api("GET", f"/users/{session.username}").json().get("servers"):
        assert time.monotonic() < deadline, "the server did not stop"
        time.sleep(0.5)
    session.spawn()


def test_a_student_cannot_make_the_hubs_root_step_follow_their_link(hub):
    user = STUDENT
    ids = Ids.of_user(user)
    session = hub.session(user)
    session.spawn()
    view = hub.state / "exchange-views" / user / COURSE
    target = hub.state / "course"
    before = snapshot(target)

    for left_by in ("this hub", "the previous hub"):
        if left_by == "the previous hub":  # that hub gave the student their view folders
            for path in (view.parent, view):
                os.chown(path, ids.uid, ids.gid)
                path.chmod(0o700)
        attempt = run_as(ids, SWAP_FOR_LINK, str(view), str(target))
        assert attempt.returncode == 0, attempt.stderr

        restart(session)
        after = snapshot(target)
        assert (after["owner"], after["mode"]) == (before["owner"], before["mode"]), (left_by, attempt.stdout)
        assert not {"outbound", "inbound", "feedback"} & set(after["entries"]), after["entries"]
        leak = run_as(ids, "print(open(__import__('sys').argv[1]).read())", str(target / "gradebook.db"))
        assert "PermissionError" in leak.stderr, (left_by, leak.stdout, leak.stderr)
        # root's view: the kernel refuses the swap itself; the old hub's: it happened, and was not followed
        outcome = attempt.stdout.strip()
        assert outcome.startswith("refused" if left_by == "this hub" else "replaced"), (left_by, outcome)
        for path in (view.parent, view):
            st = os.lstat(path)
            assert stat.S_ISDIR(st.st_mode) and st.st_uid == 0 and stat.S_IMODE(st.st_mode) == 0o750, (left_by, path)
        assert os.readlink(view / "inbound") == str(hub.state / "exchange" / COURSE / "inbound" / user)
        # the student's Assignments tab still works through the repaired view
        assert {a["assignment_id"] for a in session.assignments()} == set(ASSIGNMENTS)  # the hub released each
    hub_log = (hub.state / "jupyterhub.log").read_text(errors="replace")
    assert "was a symbolic link where a folder belongs: removed (not followed)" in hub_log
