"""The native hub over HTTP: the README's first command, real JupyterHub, real chp,
real single-user servers and formgrader, real nbgrader, as root with real Unix users.

Runs on the hub the browser test used (tests/conftest.py). A third student fetches,
validates and submits through the endpoints the Assignments tab uses; then the
protections: 403 on the formgrader, on other students' servers and on enrolling, no
way into another student's exchange folders (real Unix users), students' servers
refuse to be framed, the grader's JupyterLab has no terminals or kernels, collect
reads the per-student layout; last, Ctrl-C stops everything within seconds without
losing a submission.
"""

from __future__ import annotations

import os
import pwd
import re
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest

from attention_platform.course.notebooks import COURSE_ROOT
from grader_tests.self_attention.answers import release_notebook
from attention_platform.hub.native import DemoClass
from attention_platform.hub.native_spawner import server_parent
from grader_tests.self_attention.answers import BUGGY, class_cell, with_answer
from broker_helpers import process_status
from hub_helpers import COURSE

pytestmark = [
    pytest.mark.slow,
    pytest.mark.hub,
    pytest.mark.root,
    pytest.mark.skipif(os.geteuid() != 0, reason="the hub's real Unix users need root (CI is root)"),
]

ASSIGNMENT = "self_attention"
NOTEBOOK = f"{ASSIGNMENT}/{ASSIGNMENT}.ipynb"
BUGGY_ANSWER = next(a for a in BUGGY if a.name == "no_scale")


@pytest.fixture
def hub(native_hub):
    return native_hub  # tests/conftest.py: shared with the browser test, which runs first


def as_user(user: str, code: str) -> subprocess.CompletedProcess:
    """Run Python as a hub account's Unix user (what its kernel or terminal could do)."""
    entry = pwd.getpwnam(user)
    return subprocess.run([sys.executable, "-c", code], user=entry.pw_uid, group=entry.pw_gid, extra_groups=[],
                          capture_output=True, text=True, timeout=60, env={"PATH": "/usr/bin:/bin"})


def _singleuser_processes(user: str, of_hub=None) -> list[int]:
    """The pids of ``user``'s servers (of ``of_hub`` alone if given: its servers run in its state folder)."""
    uid = pwd.getpwnam(user).pw_uid
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if os.stat(f"/proc/{pid}").st_uid == uid and b"jupyterhub-singleuser" in open(f"/proc/{pid}/cmdline", "rb").read() \
                    and (of_hub is None or os.readlink(f"/proc/{pid}/cwd").startswith(f"{of_hub.state}/")):
                found.append(int(pid))
        except OSError:
            continue  # it exited meanwhile
    return found


def ensure_released(hub) -> None:
    """The instructor releases from the formgrader unless the browser test already did."""
    if not (hub.state / "exchange" / COURSE / "outbound" / ASSIGNMENT).is_dir():
        reply = hub.session("instructor").formgrader("POST", f"assignment/{ASSIGNMENT}/release").json()
        assert reply["success"], reply


def test_submit_over_http_and_the_protections(hub, record_property):
    ensure_released(hub)
    s3 = hub.session("student3")
    record_property("spawn_seconds", round(s3.spawn(), 1))

    # student3's server runs in this hub's home for student3 (the Unix account's passwd home
    # may belong to another hub's state directory)
    servers = _singleuser_processes("student3", hub)
    assert servers and {os.readlink(f"/proc/{pid}/cwd") for pid in servers} == {str(hub.state / "home" / "student3")}
    # it started with the garbage collector paused and froze what start-up made (jupyter_config/student/jupyterhub-singleuser)
    frozen = re.findall(r"student3's server started: (\d+) objects kept out",
                        (hub.state / "jupyterhub.log").read_text(errors="replace"))
    assert frozen and int(frozen[-1]) > 100_000, frozen

    # student3's server: no formgrader, and it refuses to be framed
    assert s3.get("/user/student3/formgrader").status_code == 404
    lab = s3.get("/user/student3/lab")
    assert "frame-ancestors 'none'" in lab.headers["Content-Security-Policy"]

    # fetch, answer, validate, submit through the Assignments tab's endpoints
    statuses = {a["assignment_id"]: a["status"] for a in s3.assignments()}
    assert statuses[ASSIGNMENT] == "released" and set(statuses.values()) == {"released"}, statuses
    assert s3.assignment_action("fetch", ASSIGNMENT)["success"]
    s3.save_notebook(NOTEBOOK, nbformat.from_dict(with_answer(release_notebook(), BUGGY_ANSWER.code)))
    validated = s3.post("/user/student3/attention/validate", data={"path": NOTEBOOK})
    assert validated.json()["ran"] and validated.json()["ok"], validated.text  # runs; says nothing of the checks
    assert s3.assignment_action("submit", ASSIGNMENT)["success"]

    # a student is refused the formgrader and another student's server and files: by that server
    # itself, so it runs (with it stopped the hub answers 404 instead, whatever ran before this test)
    assert s3.get(f"/services/{COURSE}/formgrader").status_code == 403
    for other in ("student1", "student2"):
        hub.session(other).spawn()
        assert s3.get(f"/user/{other}/lab").status_code == 403
        assert s3.get(f"/user/{other}/api/contents/{NOTEBOOK}").status_code == 403

    # the exchange: nobody reads, lists or writes another student's folders (real Unix permissions)
    x = hub.state / "exchange" / COURSE
    (mine,) = os.listdir(x / "inbound" / "student3")
    for path in (x / "inbound", x / "inbound" / "student3", x / "feedback" / "student3",
                 hub.state / "exchange-views" / "student3", hub.state / "course"):
        denied = as_user("student1", f"import os; os.listdir({str(path)!r})")
        assert "PermissionError" in denied.stderr, (path, denied.stdout, denied.stderr)
    peek = as_user("student1", f"open({str(x / 'inbound' / 'student3' / mine / (ASSIGNMENT + '.ipynb'))!r}).read()")
    assert "PermissionError" in peek.stderr
    planted = as_user("student1", f"import os; os.mkdir({str(x / 'inbound' / 'student3' / 'fake')!r})")
    assert "PermissionError" in planted.stderr
    overwrite = as_user("student1", f"open({str(x / 'outbound' / ASSIGNMENT / 'evil.txt')!r}, 'w')")
    assert "PermissionError" in overwrite.stderr
    assert as_user("student3", f"import os; print(os.listdir({str(x / 'inbound' / 'student3')!r}))").returncode == 0

    # the checkout the hub runs from: a student's kernel neither imports the hidden checks
    # (the venv's editable install points at them) nor reads the instructor notebooks or git history
    leak = as_user("student1", "import grader_tests.self_attention.reference; print('LEAKED')")
    assert leak.returncode != 0 and "LEAKED" not in leak.stdout, leak.stdout + leak.stderr
    for secret in ("grader_tests/self_attention/reference.py", f"source/{NOTEBOOK}", ".git/HEAD"):
        read = as_user("student1", f"open({str(COURSE_ROOT / secret)!r}).read()")
        assert "PermissionError" in read.stderr, (secret, read.stdout, read.stderr)
    assert as_user("student1", "import attention_platform.exchange.submit").returncode == 0  # its submit needs this

    # the TA's formgrader: the formgrader only (every endpoint and role: test_formgrader_gate.py); collect
    ta = hub.session("ta")
    page = ta.get(f"/services/{COURSE}/formgrader")
    assert page.status_code == 200 and "script-src 'nonce-" in page.headers["Content-Security-Policy"]
    assert ta.get(f"/services/{COURSE}/api/terminals").status_code == 404
    assert ta.get(f"/services/{COURSE}/api/kernelspecs").status_code == 404
    # instructors only: generating, releasing/unreleasing, creating assignments and students
    for method, api in (("POST", f"assignment/{ASSIGNMENT}/unrelease"), ("POST", f"assignment/{ASSIGNMENT}/release"),
                        ("POST", f"assignment/{ASSIGNMENT}/assign"), ("PUT", "assignment/homework2"),
                        ("PUT", "student/mallory")):
        refused = ta.formgrader(method, api, json={})
        assert refused.status_code == 403, (method, api, refused.status_code)
    assert (hub.state / "exchange" / COURSE / "outbound" / ASSIGNMENT).is_dir()  # still released
    assert ta.formgrader("POST", f"assignment/{ASSIGNMENT}/collect").json()["success"]
    # the class list names every student (nbgrader shows "None, None" for a student it only met at collect)
    roster = {row["id"]: (row["last_name"], row["first_name"]) for row in ta.formgrader("GET", "students").json()}
    assert set(DemoClass().students) <= set(roster), roster
    assert all(last and first for last, first in roster.values()), roster
    collected = hub.state / "course" / "submitted" / "student3" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"
    assert class_cell(nbformat.read(collected, 4)).source == class_cell(with_answer(release_notebook(), BUGGY_ANSWER.code)).source

    # enrolling students is the instructor's: a TA or a student may not touch the course group
    for who in (ta, s3):
        denied = who.hub_api("POST", f"/groups/nbgrader-{COURSE}/users", json={"users": ["student3"]})
        assert denied.status_code == 403, (who.username, denied.status_code)
    prof = hub.session("instructor")
    assert prof.hub_api("POST", f"/groups/nbgrader-{COURSE}/users", json={"users": ["student3"]}).status_code == 200


def _cgroup(pid: int, controller: str) -> str | None:
    """The folder of ``pid``'s cgroup of ``controller`` (cgroup v1, as on this machine)."""
    for line in open(f"/proc/{pid}/cgroup"):
        _, controllers, path = line.rstrip("\n").split(":", 2)
        if controller in controllers.split(","):
            return f"/sys/fs/cgroup/{controller}{path}"
    return None


def test_a_students_server_is_capped_and_takes_every_process_it_started_when_it_stops(hub):
    """Natively, as in Docker: the student's server has a memory cap of its own (a runaway kernel dies
    alone) that it cannot leave, a /dev/shm and a /tmp of its own, and stopping it stops everything
    it started, a process that left its session included."""
    student = hub.session("student3").login()
    student.spawn()
    [server] = _singleuser_processes("student3", hub)
    memory = _cgroup(server, "memory")
    assert memory is not None and memory.endswith(f"/{server_parent(hub.state)}/server-student3"), memory
    assert int(open(f"{memory}/memory.limit_in_bytes").read()) == 1 << 30  # STUDENT_MEM_LIMIT=1G
    assert open(f"{_cgroup(server, 'pids')}/pids.max").read().strip() == "1024"  # STUDENT_PIDS_LIMIT

    unique = f"{os.getpid()}-{time.monotonic_ns()}"
    notes, scratch = f"/dev/shm/student3-notes-{unique}", f"/tmp/student3-scratch-{unique}"
    # Another student's file in the machine's /tmp, readable by all as a default umask leaves it.
    theirs = Path(f"/tmp/student4-answers-{unique}")
    theirs.write_text("their answers")
    os.chown(theirs, 20099, 20099)  # a hub user's uid (20000-29999)
    try:
        detached = student.run_in_kernel(
            "import os, subprocess\n"
            f"open({notes!r}, 'w').write('my answers')\n"
            f"open({scratch!r}, 'w').write('my scratch')\n"
            "shm, tmp = os.statvfs('/dev/shm'), os.statvfs('/tmp')\n"
            "print(subprocess.Popen(['sleep', '600'], start_new_session=True, stdin=subprocess.DEVNULL,"
            " stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).pid, shm.f_blocks * shm.f_frsize,"
            f" tmp.f_blocks * tmp.f_frsize, int(os.path.exists({str(theirs)!r})))")
    finally:
        theirs.unlink()
    assert detached["status"] == "ok", detached
    sleeper, shm_bytes, tmp_bytes, saw_theirs = map(int, detached["stdout"].split())
    assert process_status(sleeper) and _cgroup(sleeper, "memory") == memory
    # its /dev/shm (STUDENT_SHM_SIZE=256M) and /tmp (STUDENT_TMP_SIZE=512M) are its own: nothing it
    # puts there is on the machine's, nothing another account put in the machine's /tmp is seen
    assert shm_bytes == 256 << 20 and not os.path.exists(notes)
    assert tmp_bytes == 512 << 20 and not os.path.exists(scratch) and saw_theirs == 0

    # The cap is not the student's to leave: the cgroup files are root's, so neither a move into
    # another cgroup nor a cgroup of its own below the server's is open to them.
    pids = _cgroup(server, "pids")
    targets = [f"/sys/fs/cgroup/{controller}/cgroup.procs" for controller in ("memory", "pids")]  # the roots
    targets += [f"{os.path.dirname(group)}/cgroup.procs" for group in (memory, pids)] + [f"{memory}/mine/"]
    escape = student.run_in_kernel(
        "import os\n"
        "for target in %r:\n"
        "    try:\n"
        "        if target.endswith('/'):\n"
        "            os.mkdir(target)\n"
        "        else:\n"
        "            with open(target, 'w') as f:\n"
        "                f.write(str(os.getpid()))\n"
        "        print('done', target)\n"
        "    except OSError as exc:\n"
        "        print(type(exc).__name__, target)\n"
        "print(' '.join(f'/sys/fs/cgroup/{kind}{path.strip()}' for _, kind, path in"
        " (line.split(':', 2) for line in open('/proc/self/cgroup')) if kind in ('memory', 'pids')))" % targets)
    assert escape["status"] == "ok", escape
    *attempts, still_in = escape["stdout"].splitlines()
    assert attempts == [f"PermissionError {target}" for target in targets], attempts
    assert sorted(still_in.split()) == sorted([memory, pids])

    # At most 2 GiB, in 64 MiB steps, each written so that it is really used: past 1 GiB the
    # cgroup's own OOM killer stops the kernel; the server and the sleeper live on.
    runaway = student.run_in_kernel(
        "chunks = []\n"
        "for _ in range(32):\n"
        "    chunks.append(bytearray(64 << 20))\n"
        "    chunks[-1][::4096] = b'x' * len(range(0, 64 << 20, 4096))\n"
        "print('survived', len(chunks))")
    assert runaway["status"] == "died", runaway
    assert process_status(server) and process_status(sleeper)
    oom = dict(line.split() for line in open(f"{memory}/memory.oom_control") if line.strip())
    assert int(oom["oom_kill"]) >= 1, (oom, open(f"{memory}/memory.max_usage_in_bytes").read(), runaway)

    stopped = student.hub_api("DELETE", "/users/student3/server")
    assert stopped.status_code in (202, 204), stopped.text
    deadline = time.monotonic() + 30
    while student.hub_api("GET", "/users/student3").json().get("servers") and time.monotonic() < deadline:
        time.sleep(0.25)
    assert not student.hub_api("GET", "/users/student3").json().get("servers")
    status = process_status(sleeper)
    assert status is None or status["State"].strip().startswith("Z"), "the detached process outlived the server"
    assert not os.path.exists(memory), "the server's cgroup was left behind"


def test_a_students_server_on_one_hub_outlives_their_server_starting_on_another(hub, security_hub):
    """Two hubs started from one session (two courses of a machine, or a demo beside the tests) share
    their Unix accounts: a student's server starting on one never empties the cgroup of their server
    on the other (each start kills what an earlier server of that name left)."""
    first = hub.session("student2")
    first.spawn()
    [server] = _singleuser_processes("student2", hub)
    second = security_hub.session("student2")
    stopped = second.hub_api("DELETE", "/users/student2/server")  # so that the spawn below is a start
    assert stopped.status_code in (202, 204, 400), stopped.text
    deadline = time.monotonic() + 30
    while second.hub_api("GET", "/users/student2").json().get("servers") and time.monotonic() < deadline:
        time.sleep(0.25)
    second.spawn()
    assert process_status(server), "starting student2's server on another hub killed this hub's"
    assert first.get("/user/student2/api/status").status_code == 200
    assert _cgroup(server, "memory") != _cgroup(_singleuser_processes("student2", security_hub)[0], "memory")
    # nor do the two hubs' graders share one memory cap (each was OOM-killed for the other's memory)
    graders = [_launchers_child(h, b"feedback-on-submit") for h in (hub, security_hub)]
    assert all(graders) and _cgroup(graders[0], "memory") != _cgroup(graders[1], "memory"), graders


def _launchers_child(hub, argument: bytes) -> int | None:
    """The pid of the process the hub's launcher started with ``argument`` in its command line."""
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            status = open(f"/proc/{pid}/status").read()
            parent = int(next(line for line in status.splitlines() if line.startswith("PPid:")).split()[1])
            if parent == hub.process.pid and argument in open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0"):
                return int(pid)
        except (OSError, StopIteration):
            continue
    return None


def test_the_hub_finds_its_formgrader_up_when_it_starts(hub):
    """The hub checks its external service, the formgrader, before it serves its first page, for the
    service's 1 s timeout: the launcher starts the formgrader once the login page answers, so that check
    fails at every start by design, and the hub's log does not call it a problem."""
    log = (hub.state / "jupyterhub.log").read_text(errors="replace")
    assert "JupyterHub is now running" in log
    assert [line for line in log.splitlines() if "Cannot connect to" in line] == []


def test_ctrl_c_stops_everything_within_seconds_and_keeps_submissions(hub, record_property):
    submissions = sorted((hub.state / "exchange" / COURSE / "inbound").glob("*/*"))
    seconds = hub.ctrl_c()
    record_property("stop_seconds", seconds)  # ~4-6 s on an idle 2-core machine; a figure, not a test
    assert "stopped in" in hub.log()
    # each server shut its kernels down before it ended: none was left to notice its parent gone
    assert "Parent appears to have exited" not in (hub.state / "jupyterhub.log").read_text()
    left = subprocess.run(["pgrep", "-f", str(hub.state)], capture_output=True, text=True).stdout
    assert left == "", f"processes still running: {left}"
    assert sorted((hub.state / "exchange" / COURSE / "inbound").glob("*/*")) == submissions
    assert len(submissions) >= 1
