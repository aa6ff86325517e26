"""Faults on the live native hub, with submissions in flight.

* a student's server is killed (SIGKILL) in the middle of a submit: the student's browser
  gets an error, nothing appears in the inbound, and the retry after the server is started
  again arrives exactly once;
* the hub is restarted (Ctrl-C, as in the terminal, then ``attention-course hub`` on the same
  state) while one student submits and another has work saved: logins and files survive,
  servers are re-spawned cleanly, and every accepted submission is collected once, intact.

Real hub, proxy, single-user servers, nbgrader and collect; a submission is made slow to
copy (large files in the assignment folder) so the fault lands while it is being written.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import nbformat
import psutil
import pytest

from tests.hub_helpers import COURSE, launch_hub

pytestmark = [pytest.mark.slow, pytest.mark.hub, pytest.mark.root,
              pytest.mark.skipif(not (Path(__file__).resolve().parents[2] / "node_modules/.bin/configurable-http-proxy")
                                 .exists(), reason="configurable-http-proxy missing: make system-deps")]

ASSIGNMENT = "self_attention"
NB = f"{ASSIGNMENT}/{ASSIGNMENT}.ipynb"
NAME = "test-hub-faults"
PREFIX = "fault-"


@pytest.fixture(scope="module")
def hub_box():
    """A dict holding the running hub; the restart test swaps it. Stopped at the end."""
    with pytest.MonkeyPatch.context() as mp, contextlib.ExitStack() as stack:
        mp.setenv("HUB_DEMO_PREFIX", PREFIX)  # our own Unix accounts: no clash with other hubs
        box = {"stack": stack}
        box["hub"] = stack.enter_context(launch_hub(NAME))
        yield box


def inbound(hub, user) -> Path:
    return hub.state / "exchange" / COURSE / "inbound" / user


def complete(hub, user) -> list[Path]:
    folder = inbound(hub, user)
    return sorted(p for p in folder.iterdir() if not p.name.startswith(".")) if folder.is_dir() else []


def ready_student(hub, user):
    session = hub.session(user)
    session.spawn()
    listing = session.assignment_action("fetch", ASSIGNMENT)
    assert listing["success"], listing
    return session


def save_answer(hub, session, marker: str) -> bytes:
    """Write an answer as the browser does; returns the bytes now on the student's disk."""
    model = session.contents(NB).json()
    nb = nbformat.from_dict(model["content"])
    nb.metadata["fault_marker"] = marker
    session.save_notebook(NB, nb)
    return (hub.state / "home" / session.username / NB).read_bytes()


def add_ballast(hub, user, megabytes: int = 80) -> None:  # nbgrader accepts up to 100 MB
    """Large files in the student's assignment folder: copying the submission takes a while."""
    import pwd

    folder = hub.state / "home" / user / ASSIGNMENT
    entry = pwd.getpwnam(user) if os.geteuid() == 0 else None
    block = b"\1" * (1 << 20)
    for i in range(4):
        path = folder / f"data-{i}.bin"
        with open(path, "wb") as fh:
            for _ in range(megabytes // 4):
                fh.write(block)
        if entry:
            os.chown(path, entry.pw_uid, entry.pw_gid)


def submit_in_background(session):
    result = {}

    def run():
        try:
            reply = session.post(f"/user/{session.username}/assignments/submit",
                                 data={"course_id": COURSE, "assignment_id": ASSIGNMENT})
            result["status"] = reply.status_code
            result["body"] = reply.text
        except Exception as exc:  # noqa: BLE001 - a dropped connection is one possible outcome
            result["error"] = repr(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, result


def wait_for_partial(hub, user, timeout: float = 120) -> bool:
    folder = inbound(hub, user)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if folder.is_dir() and any(e.startswith(".partial-") for e in os.listdir(folder)):
            return True
        time.sleep(0.005)
    return False


def accepted(result) -> bool:
    if result.get("status") != 200:
        return False
    import json

    try:
        body = json.loads(result["body"])
    except ValueError:
        return False
    return isinstance(body, dict) and body.get("success") is True


def server_processes(user):
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        try:
            if "jupyterhub-singleuser" in " ".join(proc.info["cmdline"] or []) and \
                    proc.environ().get("JUPYTERHUB_USER") == user:
                found.append(proc)
        except (psutil.Error, OSError):
            continue
    return found


def collect(hub) -> subprocess.CompletedProcess:
    from attention_platform.benchmarks.loadtest import grader_env

    env, kwargs = grader_env(hub.state)
    return subprocess.run([str(Path(sys.executable).parent / "nbgrader"), "collect", ASSIGNMENT, "--update"],
                          env=env, capture_output=True, text=True, timeout=600, **kwargs)


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_server_killed_mid_submit_then_the_retry_arrives_once(hub_box):
    hub = hub_box["hub"]
    user = f"{PREFIX}student1"
    session = ready_student(hub, user)
    saved = save_answer(hub, session, "killed-then-retried")
    add_ballast(hub, user)

    thread, result = submit_in_background(session)
    assert wait_for_partial(hub, user), "the submit never started writing"
    servers = server_processes(user)
    assert servers, "no single-user server found for " + user
    for proc in servers:
        proc.send_signal(signal.SIGKILL)
    thread.join(180)
    assert not thread.is_alive()
    # The person affected is told: the request failed (the proxy answers for a dead server).
    assert not accepted(result), result
    assert complete(hub, user) == [], "a killed submit left a visible submission"

    session.spawn()  # the student opens the hub again: the dead server is noticed and restarted
    thread, result = submit_in_background(session)
    thread.join(300)
    assert accepted(result), result
    [sub] = complete(hub, user)
    assert sha(sub / f"{ASSIGNMENT}.ipynb") == hashlib.sha256(saved).hexdigest()

    done = collect(hub)
    assert done.returncode == 0, done.stderr[-3000:]
    collected = hub.state / "course" / "submitted" / user / ASSIGNMENT
    assert sha(collected / f"{ASSIGNMENT}.ipynb") == hashlib.sha256(saved).hexdigest()
    assert (collected / "timestamp.txt").read_text() == (sub / "timestamp.txt").read_text()
    assert sorted(p.name for p in collected.glob("data-*.bin")) == [f"data-{i}.bin" for i in range(4)]


def test_hub_restarted_while_students_work(hub_box):
    hub = hub_box["hub"]
    steady, busy = f"{PREFIX}student2", f"{PREFIX}student3"
    a = ready_student(hub, steady)
    first = save_answer(hub, a, "before-restart")
    reply = a.assignment_action("submit", ASSIGNMENT)
    assert isinstance(reply, dict) and reply.get("success"), reply
    b = ready_student(hub, busy)
    b_saved = save_answer(hub, b, "in-flight")
    add_ballast(hub, busy)

    thread, result = submit_in_background(b)
    assert wait_for_partial(hub, busy), "the submit never started writing"
    hub.ctrl_c()  # while the submit is being written
    thread.join(180)
    assert not thread.is_alive()
    assert not [p for p in complete(hub, busy) if not (p / "timestamp.txt").exists()]

    port = int(hub.url.rsplit(":", 1)[1])
    hub = hub_box["stack"].enter_context(launch_hub(NAME, fresh=False, port=port))
    hub_box["hub"] = hub
    # State survived: the students are still logged in (the same browser cookies work).
    for session in (a, b):
        me = session.hub_api("GET", "/user")
        assert me.status_code == 200 and me.json()["name"] == session.username, me.text
        session.spawn()
    # Their work survived in their homes.
    assert (hub.state / "home" / steady / NB).read_bytes() == first
    assert a.contents(NB).json()["content"]["metadata"]["fault_marker"] == "before-restart"
    second = save_answer(hub, a, "after-restart")
    reply = a.assignment_action("submit", ASSIGNMENT)
    assert isinstance(reply, dict) and reply.get("success"), reply
    thread, retry = submit_in_background(b)  # the busy student presses Submit again
    thread.join(300)
    assert accepted(retry), retry

    assert len(complete(hub, steady)) == 2
    [b_sub] = complete(hub, busy)  # once, whether or not the in-flight submit had finished
    assert sha(b_sub / f"{ASSIGNMENT}.ipynb") == hashlib.sha256(b_saved).hexdigest()
    done = collect(hub)
    assert done.returncode == 0, done.stderr[-3000:]
    course = hub.state / "course" / "submitted"
    assert sha(course / steady / ASSIGNMENT / f"{ASSIGNMENT}.ipynb") == hashlib.sha256(second).hexdigest()
    assert sha(course / busy / ASSIGNMENT / f"{ASSIGNMENT}.ipynb") == hashlib.sha256(b_saved).hexdigest()
    print(f"\nin-flight submit at hub restart: {'accepted' if accepted(result) else result}")
