"""The root sandbox broker, used by an unprivileged grader as the formgrader uses it.

A real broker runs as root on a socket in a root-owned folder; clients run as
other Unix accounts in their own processes and reach it only through that socket.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from attention_platform.grading.sandbox import SandboxLimits, Zygote, cgroups
from attention_platform.grading.sandbox.limits import BROKER_CAPS, UID_BASE, UID_SPAN
from broker_helpers import (GRADER, LOADED, STRANGER, as_user, assert_an_exited_sandbox_keeps_its_pid, ensure_user,
                            sandbox_cgroups, start_broker, uid_processes)

pytestmark = [pytest.mark.root, pytest.mark.skipif(os.geteuid() != 0, reason="the broker runs as root")]


@pytest.fixture
def run_folder():
    """A root-owned folder others may traverse (pytest's own tmp_path is root's 0700)."""
    folder = Path(tempfile.mkdtemp(prefix="attention-broker-test-"))
    folder.chmod(0o755)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="module")
def broker(sandbox_broker):
    shared = sandbox_broker()
    return shared.socket, shared.grader


@pytest.fixture(scope="module")
def lean_broker(sandbox_broker):
    """A broker that pays no first use for everyone (``--first-uses none``), as the native hub starts
    it for a course whose notebooks neither train nor draw."""
    shared = sandbox_broker("--first-uses", "none")
    return shared.socket, shared.grader


CLIENT = """
import json, os, sys
from attention_platform.grading.sandbox import SandboxLimits, SandboxUnavailable, Zygote
try:
    zygote = Zygote.connect({path!r})
    with zygote.spawn(SandboxLimits(**{limits!r})) as sb:
        _, reply = sb.call({{"op": "cell", "source": {source!r}}})
        print(json.dumps({{"uid": os.getuid(), "spec": sb.spec, "limits": sb.limits.__dict__,
                          "outputs": reply["outputs"]}}))
except SandboxUnavailable as exc:
    print(json.dumps({{"unavailable": exc.reason}}))
"""


def client(path, user, source="print(6 * 7)", limits=None, env=None) -> dict:
    return as_user(user, CLIENT.format(path=str(path), source=source, limits=limits or {}), env=env)


def test_an_unprivileged_grader_gets_a_confined_sandbox(broker):
    path, grader = broker
    result = client(path, grader, "import os\nprint(os.getuid(), open('/proc/self/status').read().count('CapEff:\\t0000000000000000'))")
    assert result["uid"] == grader.pw_uid != 0
    sandbox_uid = result["spec"]["uid"]
    assert UID_BASE <= sandbox_uid < UID_BASE + UID_SPAN
    assert result["outputs"][0]["text"].split() == [str(sandbox_uid), "1"]


def test_a_sandbox_that_exited_keeps_its_pid_until_the_grader_closes_it(broker):
    path, _ = broker
    zygote = Zygote.connect(str(path))  # root may connect too; its server is a connection's like any other
    try:
        assert_an_exited_sandbox_keeps_its_pid(zygote, SandboxLimits(cell_timeout=3, notebook_timeout=8))
    finally:
        zygote.close()


def test_any_other_account_is_refused(broker, tmp_path):
    path, _ = broker
    stranger = ensure_user(STRANGER)
    os.chmod(path, 0o666)  # even if the socket's mode let it in, the broker checks the peer's uid
    try:
        result = client(path, stranger)
    finally:
        os.chmod(path, 0o660)
    assert result == {"unavailable": f"uid {stranger.pw_uid} may not use the sandbox broker"}


def test_limits_asked_for_are_clamped_to_the_brokers_caps(broker):
    path, grader = broker
    result = client(path, grader, "print('ok')", limits={"memory_mb": 10 ** 7, "nproc": 10 ** 6, "cell_timeout": 9})
    assert result["limits"]["memory_mb"] == BROKER_CAPS.memory_mb
    assert result["limits"]["nproc"] == BROKER_CAPS.nproc
    assert result["limits"]["cell_timeout"] == 9


WARMED = """
import json, time
from attention_platform.grading.sandbox import SandboxUnavailable, Zygote
try:
    zygote = Zygote.connect({path!r}, first_uses={first_uses!r})
    time.sleep({pause!r})  # a grader importing what it grades with, meanwhile
    with zygote.spawn() as sb:
        _, reply = sb.call({{"op": "cell", "source": {source!r}}})
    print(json.dumps({{"loaded": reply["outputs"][0]["text"].split()}}))
except SandboxUnavailable as exc:
    print(json.dumps({{"unavailable": exc.reason}}))
"""


@pytest.mark.parametrize("first_uses, loaded", [
    ((), ["torch"]),  # the core notebook's batch: a sandbox forked from the smaller worker
    (("figures",), ["matplotlib.pyplot", "torch"]),
    (("figures", "optimizers"), ["matplotlib.pyplot", "torch._dynamo", "torch"]),
])
def test_a_connection_pays_the_warm_ups_its_grader_asks_for_and_no_other(lean_broker, first_uses, loaded):
    path, grader = lean_broker
    result = as_user(grader, WARMED.format(path=str(path), first_uses=first_uses, source=LOADED, pause=0))
    assert result == {"loaded": loaded}


@pytest.mark.parametrize("first_uses", [(), ("figures", "optimizers")])
def test_the_first_uses_a_broker_paid_at_its_start_are_every_connections(broker, first_uses):
    """The second asks for what is paid already: its answer follows the connection's ``ready`` at once,
    and both wait in the socket until the grader reads them."""
    path, grader = broker  # started with the default, --first-uses all
    result = as_user(grader, WARMED.format(path=str(path), first_uses=first_uses, source=LOADED, pause=1))
    assert result == {"loaded": ["matplotlib.pyplot", "torch._dynamo", "torch"]}


def test_a_first_use_the_broker_does_not_know_stops_it_before_it_starts(tmp_path):
    done = subprocess.run([sys.executable, "-m", "attention_platform.grading.sandbox.broker", "--socket",
                           str(tmp_path / "s.sock"), "--allow-uid", "1", "--first-uses", "figures,compile"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert "unknown warm-up(s) compile; known: figures, optimizers" in done.stderr


@pytest.mark.parametrize("setting, flag, loaded", [
    ("none", (), ["torch"]),  # a course whose notebooks neither train nor draw
    ("figures", (), ["matplotlib.pyplot", "torch"]),
    ("", (), ["matplotlib.pyplot", "torch._dynamo", "torch"]),  # set but empty: the default, all
    ("all", ("--first-uses", "none"), ["torch"]),  # the command line wins over the environment
])
def test_the_deployments_set_the_brokers_first_uses_in_its_environment(run_folder, setting, flag, loaded):
    """docker-compose.yml and deploy/kubernetes/course.yaml configure the broker through
    ATTENTION_SANDBOX_FIRST_USES; a connection that asks for nothing sees what the broker paid."""
    grader = ensure_user(GRADER)
    process, path = start_broker(run_folder, grader, env={"ATTENTION_SANDBOX_FIRST_USES": setting}, extra=flag)
    try:
        result = as_user(grader, WARMED.format(path=str(path), first_uses=(), source=LOADED, pause=0))
    finally:
        process.terminate()
        process.wait(20)
    assert result == {"loaded": loaded}


def test_a_first_use_the_deployment_names_wrongly_stops_the_broker_and_names_the_setting(tmp_path):
    done = subprocess.run([sys.executable, "-m", "attention_platform.grading.sandbox.broker", "--socket",
                           str(tmp_path / "s.sock"), "--allow-uid", "1"],
                          env={**os.environ, "ATTENTION_SANDBOX_FIRST_USES": "figures,plots"},
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert "ATTENTION_SANDBOX_FIRST_USES: unknown warm-up(s) plots; known: figures, optimizers" in done.stderr
    assert not (tmp_path / "s.sock").exists()


@pytest.mark.parametrize("first_uses, reason", [
    (("figures", "compile"), "refused its warm-up: unknown warm-up(s) compile; known: figures, optimizers"),
    (("figures", "../../bin/sh"), "unknown warm-up(s) ../../bin/sh; known"),
])
def test_a_warm_up_the_broker_does_not_know_is_refused_by_name(broker, first_uses, reason):
    path, grader = broker
    result = as_user(grader, WARMED.format(path=str(path), first_uses=first_uses, source="print(1)", pause=0))
    assert reason in result["unavailable"]


FROZEN_AND_DRAWING = "import gc, sys\nprint(gc.get_freeze_count(), 'matplotlib.pyplot' in sys.modules)"


def test_a_warm_up_asked_for_later_reaches_the_next_sandbox_with_what_it_made_frozen(lean_broker):
    """The sandbox forked ahead before the warm-up is not handed out after it; what the warm-up
    imported is frozen like the rest of the worker's start-up (attention_platform/start_up_gc.py)."""
    path, _ = lean_broker
    zygote = Zygote.connect(str(path), first_uses=())

    def seen_in_a_sandbox() -> tuple[int, str]:
        with zygote.spawn() as sandbox:
            _, reply = sandbox.call({"op": "cell", "source": FROZEN_AND_DRAWING})
        frozen, drawing = reply["outputs"][0]["text"].split()
        return int(frozen), drawing

    try:
        before = seen_in_a_sandbox()  # and the zygote forks the next one ahead
        zygote.warm(("figures",))  # as the formgrader does when it grades an assignment that draws
        zygote.warm(("figures",))  # asked for already: nothing is sent
        after = seen_in_a_sandbox()
        unread = zygote.warms_unread
    finally:
        zygote.close()
    assert unread == 0  # the answer was read before the spawn's
    assert (before[1], after[1]) == ("False", "True")
    assert after[0] > before[0] + 10_000


def test_a_warm_up_already_paid_keeps_the_sandbox_forked_ahead(lean_broker):
    path, _ = lean_broker
    zygote = Zygote.connect(str(path), first_uses=("figures",))
    try:
        zygote.spawn().close()  # and the zygote forks the next one ahead
        with zygote.lock:
            assert zygote._send_warm(["figures"])  # as a second grader thread could, before it saw the first
        sandbox = zygote.spawn()
        sandbox.close()
    finally:
        zygote.close()
    assert sandbox.forked_ahead


KILL_OTHERS = """
import json, os
from attention_platform.grading.sandbox import Zygote
zygote = Zygote.connect({path!r})
zygote.wait_ready()
with zygote.lock:
    replies = [zygote._request({{"op": "kill", "pid": pid}}, 10)[0] for pid in {pids!r}]
print(json.dumps(replies))
"""


def test_a_grader_can_kill_only_its_own_sandboxes(broker, tmp_path):
    path, grader = broker
    bystander = subprocess.Popen(["sleep", "60"])
    try:
        replies = as_user(grader, KILL_OTHERS.format(path=str(path), pids=[bystander.pid, 1, os.getpid()]))
        assert replies == [{"op": "killed", "known": False}] * 3
        assert bystander.poll() is None
    finally:
        bystander.kill()


ABANDON = """
import json, os
from attention_platform.grading.sandbox import Zygote
zygote = Zygote.connect({path!r})
sb = zygote.spawn()
sb.call({{"op": "cell", "source": "import os, time\\nfor _ in range(3):\\n    os.fork() == 0 and time.sleep(120)"}})
print(json.dumps({{"uid": sb.spec["uid"], "zygote": zygote.pid}}), flush=True)
os._exit(0)  # the grader dies without closing anything (and the broker has forked the next sandbox ahead)
"""


def test_a_grader_that_dies_takes_its_sandboxes_with_it(broker):
    path, grader = broker
    abandoned = as_user(grader, ABANDON.format(path=str(path)))
    assert uid_processes(abandoned["uid"], wait=10) == []
    assert sandbox_cgroups(abandoned["zygote"]) == []  # the one forked ahead included


def test_without_root_and_without_a_broker_grading_refuses_instead_of_scoring_zero():
    grader = ensure_user(GRADER)
    result = as_user(grader, """
        import json
        from attention_platform.grading.sandbox import SandboxUnavailable, get_zygote
        try:
            get_zygote()
            print(json.dumps({"started": True}))
        except SandboxUnavailable as exc:
            print(json.dumps({"unavailable": exc.reason}))
    """)
    assert "not root" in result["unavailable"] and "ATTENTION_SANDBOX_SOCKET" in result["unavailable"]


def test_a_socket_folder_others_can_write_is_refused(tmp_path):
    grader = ensure_user(GRADER)
    tmp_path.chmod(0o777)
    done = subprocess.run([sys.executable, "-m", "attention_platform.grading.sandbox.broker", "--socket",
                           str(tmp_path / "s.sock"), "--allow-uid", str(grader.pw_uid)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode != 0 and "writable by root only" in done.stderr


@pytest.fixture
def cgroup2_without_controllers(tmp_path):
    """A cgroup2 hierarchy that delegates no memory or pids controller (as a v2 host
    or container that was not given them would)."""
    mount = tmp_path / "cgroup2"
    mount.mkdir()
    if subprocess.run(["mount", "-t", "cgroup2", "none", str(mount)]).returncode:
        pytest.skip("cannot mount a cgroup2 hierarchy here")
    yield mount
    subprocess.run(["umount", "-l", str(mount)])


def test_cgroup_v2_without_memory_and_pids_is_refused_with_a_reason(cgroup2_without_controllers):
    controllers = (cgroup2_without_controllers / "cgroup.controllers").read_text().split()
    assert "memory" not in controllers  # on this cgroup v1 machine they belong to the v1 hierarchies
    with pytest.raises(cgroups.CgroupUnavailable, match=r"cgroup v2 at .* does not delegate the memory and pids"):
        cgroups.setup(str(cgroup2_without_controllers), proc_file="/proc/self/cgroup")


def test_a_broker_that_cannot_limit_memory_refuses_every_grader(run_folder, cgroup2_without_controllers):
    grader = ensure_user(GRADER)
    process, path = start_broker(run_folder, grader, env={"ATTENTION_CGROUP_ROOT": str(cgroup2_without_controllers)})
    try:
        result = client(path, grader)
    finally:
        process.terminate()
        process.wait(20)
    assert result["unavailable"].startswith("the grading sandbox cannot limit memory and processes: cgroup v2")


def test_hidden_checks_installed_where_sandboxes_read_stop_grading(monkeypatch):
    from attention_platform.course.notebooks import COURSE_ROOT
    from attention_platform.grading.sandbox import zygote

    assert zygote.hidden_checks_problem() is None  # the checkout: not visible inside a sandbox
    # as in an image that pip-installed grader_tests into the interpreter's site-packages
    monkeypatch.setattr(zygote, "visible_prefixes", lambda: [str(COURSE_ROOT)])
    assert "every sandbox can read" in zygote.hidden_checks_problem()
