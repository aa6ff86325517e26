"""The sandbox's isolation layers, each observed from inside a real sandbox.

One warm zygote per module; every test spawns fresh sandboxes from it, runs
code in them through the same protocol the grader uses and checks what that
code could see or do, and that nothing of it outlives the sandbox.
"""

from __future__ import annotations

import base64
import ctypes
import errno
import json
import os
import re
import signal
import socket
import subprocess
import threading
import time

import pytest

from attention_platform.grading.sandbox import SandboxDied, SandboxLimits, SandboxTimeout, SandboxUnavailable, Zygote
from attention_platform.grading.sandbox import cgroups
from attention_platform.course.notebooks import COURSE_ROOT
from broker_helpers import assert_an_exited_sandbox_keeps_its_pid, process_status, sandbox_cgroups, uid_processes

LIMITS = SandboxLimits(cell_timeout=3, notebook_timeout=8, cpu_seconds=4, memory_mb=256, nproc=16, tmpfs_mb=8,
                       output_chars=10_000)


@pytest.fixture(scope="module")
def zygote():
    z = Zygote()
    yield z
    z.close()


def run(sandbox, source: str, timeout: float | None = None) -> str:
    """Run a cell; return its stdout, or 'ERROR Name: value' if it raised."""
    _, reply = sandbox.call({"op": "cell", "source": source}, timeout=timeout)
    text = ""
    for out in reply["outputs"]:
        if out["output_type"] == "stream":
            text += out["text"]
        elif out["output_type"] == "error":
            text += f"ERROR {out['ename']}: {out['evalue']}"
        else:
            text += out["data"]["text/plain"]
    return text


def put(sandbox, name: str, text: str) -> None:
    sandbox.call({"op": "files", "files": [[name, base64.b64encode(text.encode()).decode()]]})


def sandbox_ahead(zygote_pid: int, wait: float = 3.0, handed_out: tuple[int, ...] = ()) -> dict[int, int]:
    """{pid: uid} of the live (non-zombie) processes below the zygote, polled until they are one
    sandbox: one process, confined and running as its own uid. A sandbox just killed takes a moment
    to exit, and the one forked ahead a moment to drop root, so a count alone can match the wrong one:
    sandboxes ``handed_out`` (closed just before, and perhaps still dying) are never it."""
    deadline = time.monotonic() + wait
    while True:
        found = {pid: uid for pid, uid in _descendants(zygote_pid).items() if pid not in handed_out}
        uids = sorted(found.values())
        if (len(uids) == 1 and uids[0] >= 1000) or time.monotonic() > deadline:
            return found
        time.sleep(0.05)


def _descendants(pid: int) -> dict[int, int]:
    found, parents = {}, [pid]
    while parents:
        parent = parents.pop()
        try:
            tasks = os.listdir(f"/proc/{parent}/task")
        except OSError:
            continue
        for task in tasks:
            try:
                children = [int(c) for c in open(f"/proc/{parent}/task/{task}/children").read().split()]
            except OSError:
                continue
            for child in children:
                status = process_status(child)
                if status and not status["State"].strip().startswith("Z"):
                    found[child] = int(status["Uid"].split()[0])
                    parents.append(child)
    return found


def gone(processes: dict[int, int], wait: float = 3.0) -> bool:
    """Whether none of ``processes`` ({pid: uid}) is alive any more (a reused pid of another uid is not ours)."""
    deadline = time.monotonic() + wait
    while True:
        alive = [pid for pid, uid in processes.items()
                 if (status := process_status(pid)) and not status["State"].strip().startswith("Z")
                 and int(status["Uid"].split()[0]) == uid]
        if not alive or time.monotonic() > deadline:
            return not alive
        time.sleep(0.05)


@pytest.fixture
def fresh_zygote():
    """A zygote of this test's own (no warm-ups: these tests run no student code worth warming)."""
    z = Zygote(first_uses=())
    yield z
    z.close()


@pytest.mark.root
def test_the_next_sandbox_is_forked_ahead_and_is_one_like_any_other(fresh_zygote):
    first = fresh_zygote.spawn(LIMITS)
    assert not first.forked_ahead  # nothing was asked for before
    put(first, "secret.txt", "alice's work")
    run(first, "open('/tmp/x', 'w').write('alice tmp')")
    second = fresh_zygote.spawn(LIMITS)  # forked while the first one was being used
    try:
        assert second.forked_ahead
        assert second.spec["uid"] != first.spec["uid"] and second.spec["cgroup"] != first.spec["cgroup"]
        same_but_uid = lambda sb: [layer for layer in sb.layers if not layer.startswith("uid:")]  # noqa: E731
        assert same_but_uid(second) == same_but_uid(first) and f"uid:{second.spec['uid']}" in second.layers
        assert second.limits == first.limits
        out = run(second, "import os\nprint(os.getuid(), os.listdir('.'), 'x' in os.listdir('/tmp'), "
                          "sorted(int(p) for p in os.listdir('/proc') if p.isdigit()))")
        assert out.strip() == f"{second.spec['uid']} [] False [1]"  # (a CI checkout's venv shows under /tmp)
    finally:
        first.close()
        second.close()
    # What the zygote still holds: the one sandbox forked ahead (one process, already its own uid),
    # not yet handed out; it dies with the zygote.
    ahead = sandbox_ahead(fresh_zygote.process.pid, handed_out=(first.pid, second.pid))
    assert len(ahead) == 1 and list(ahead.values())[0] >= 1000, ahead
    zygote_pid = fresh_zygote.pid
    fresh_zygote.close()
    assert gone(ahead) and sandbox_cgroups(zygote_pid) == []


@pytest.mark.root
def test_a_sandbox_forked_ahead_for_other_limits_is_killed_not_handed_out(fresh_zygote):
    first = fresh_zygote.spawn(LIMITS)
    first.close()
    ahead = sandbox_ahead(fresh_zygote.process.pid, handed_out=(first.pid,))  # forked for LIMITS
    assert len(ahead) == 1, ahead
    bigger = SandboxLimits(**{**LIMITS.__dict__, "memory_mb": 2 * LIMITS.memory_mb})
    with fresh_zygote.spawn(bigger) as sb:
        assert not sb.forked_ahead and sb.limits.memory_mb == bigger.memory_mb
        assert run(sb, "print(6 * 7)") == "42\n"
    assert gone(ahead)
    with fresh_zygote.spawn(bigger) as sb:  # and the next one is forked ahead for the new limits
        assert sb.forked_ahead and sb.limits.memory_mb == bigger.memory_mb


@pytest.mark.root
def test_a_sandbox_forked_ahead_that_died_meanwhile_is_replaced_by_a_fresh_one(fresh_zygote):
    first = fresh_zygote.spawn(LIMITS)
    first.close()
    ahead = sandbox_ahead(fresh_zygote.process.pid, handed_out=(first.pid,))
    [process] = ahead
    os.kill(process, signal.SIGKILL)  # as an administrator's clean-up or the OOM killer might, while it waits
    assert gone(ahead)
    with fresh_zygote.spawn(LIMITS) as sb:
        assert not sb.forked_ahead
        assert run(sb, "print(6 * 7)") == "42\n"


@pytest.mark.skipif(not os.access("/sys/fs/cgroup/pids", os.W_OK), reason="needs a writable cgroup v1 pids hierarchy (CI)")
@pytest.mark.root
def test_a_worker_that_cannot_fork_refuses_that_sandbox_and_serves_the_next(fresh_zygote):
    """The machine out of processes (here: the worker's own pids cgroup full) refuses one sandbox
    with the reason, leaves no cgroup of it behind, and the worker goes on once processes are free."""
    fresh_zygote.spawn(LIMITS).close()
    worker = fresh_zygote.process.pid
    home = next(line.split(":", 2)[2].strip() for line in open(f"/proc/{worker}/cgroup") if line.split(":")[1] == "pids")
    full = f"/sys/fs/cgroup/pids/attention-test-full-{os.getpid()}"
    os.mkdir(full)
    try:
        with open(f"{full}/cgroup.procs", "w") as f:
            f.write(str(worker))
        with open(f"{full}/pids.max", "w") as f:
            f.write(open(f"{full}/pids.current").read())  # no room for one more process
        before = set(sandbox_cgroups(fresh_zygote.pid, wait=0))
        bigger = SandboxLimits(**{**LIMITS.__dict__, "memory_mb": 2 * LIMITS.memory_mb})  # not the one forked ahead
        with pytest.raises(SandboxUnavailable, match="cannot start a sandbox process: Resource temporarily unavailable"):
            fresh_zygote.spawn(bigger)
        assert not set(sandbox_cgroups(fresh_zygote.pid, wait=0)) - before  # the refused one's removed
        with open(f"{full}/pids.max", "w") as f:
            f.write("max")
        with fresh_zygote.spawn(bigger) as sb:
            assert run(sb, "print(6 * 7)") == "42\n"
    finally:
        if process_status(worker):
            with open(f"/sys/fs/cgroup/pids{home}/cgroup.procs", "w") as f:
                f.write(str(worker))
        fresh_zygote.close()
        os.rmdir(full)


@pytest.mark.root
def test_a_sandbox_that_exited_keeps_its_pid_until_the_grader_closes_it(fresh_zygote):
    assert_an_exited_sandbox_keeps_its_pid(fresh_zygote, LIMITS)


def test_killing_a_cgroup_spares_a_process_that_only_has_a_pid_it_listed(tmp_path):
    """cgroup v1 has no kill of a whole cgroup at once: the pids in ``cgroup.procs`` are read, then
    signalled one by one, and by then a pid may be another process's (the sandbox's own init reaps
    its children at once). Only a process still in the cgroup is killed."""
    bystander = subprocess.Popen(["sleep", "60"])
    folder = tmp_path / cgroups.PARENT / "sbx-0-1"
    folder.mkdir(parents=True)
    (folder / "cgroup.procs").write_text(f"{bystander.pid}\n")  # as if the pid had been reused
    try:
        assert cgroups._kill_procs(str(folder))  # it found a pid ...
        time.sleep(0.2)
        assert bystander.poll() is None  # ... and left the process alone: it is in no sandbox's cgroup
    finally:
        bystander.kill()
        bystander.wait()


@pytest.mark.root
def test_runs_as_an_unprivileged_uid_with_no_capabilities(zygote):
    with zygote.spawn(LIMITS) as sb:
        out = run(sb, "import os\nprint(os.getuid(), os.getgid(), os.getgroups())\n"
                      "print([l for l in open('/proc/self/status') if l.startswith(('CapEff', 'NoNewPrivs'))])")
        uid = sb.spec["uid"]
        assert out.startswith(f"{uid} {uid} []") and uid >= 1000
        assert "CapEff:\\t0000000000000000" in out and "NoNewPrivs:\\t1" in out
        assert {"ns:net", "ns:pid", "ns:mount", "cgroup:pids", "rlimits", "no_new_privs"} <= set(sb.layers)


@pytest.mark.root
def test_sees_only_its_own_working_copy_and_read_only_system_files(zygote):
    with zygote.spawn(LIMITS) as sb:
        put(sb, "mine.ipynb", "my work")
        course = str(COURSE_ROOT)
        out = run(sb, f"""
import os
print(sorted(os.listdir('.')), os.getcwd())
print(sorted(os.listdir({course!r})))
for path in [{course + '/gradebook.db'!r}, {course + '/grader_tests/self_attention/reference.py'!r}, {course + '/source'!r},
             '/srv/nbgrader/exchange', '/root', '/etc/shadow']:
    print(path, os.path.exists(path))
try:
    import grader_tests.self_attention.reference
except ImportError as exc:
    print('import refused', type(exc).__name__)
for path in ['/usr/evil', {course + '/.venv/evil'!r}, '/evil']:
    try:
        open(path, 'w')
    except OSError as exc:
        print('write refused', path, exc.strerror)
""")
        assert "['mine.ipynb'] /home/student" in out
        assert "['.venv']" in out, out  # of the course directory only the read-only venv is mounted
        assert " True" not in out, out
        assert "import refused ModuleNotFoundError" in out
        assert out.count("write refused") == 3 and "Read-only file system" in out


@pytest.mark.root
def test_has_no_network_at_all(zygote):
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    server.settimeout(0.5)
    port = server.getsockname()[1]
    with zygote.spawn(LIMITS) as sb:
        out = run(sb, f"""
import socket
for host, port in [('127.0.0.1', {port}), ('1.1.1.1', 53)]:
    try:
        socket.create_connection((host, port), timeout=1)
        print('connected', host)
    except OSError as exc:
        print('refused', host, exc)
print(open('/proc/net/dev').read().count(':'))
""")
    assert "connected" not in out and out.count("refused") == 2
    with pytest.raises(socket.timeout):
        server.accept()
    server.close()


@pytest.mark.root
def test_sees_only_its_own_processes(zygote):
    with zygote.spawn(LIMITS) as sb:
        out = run(sb, "import os\nprint(os.getpid(), sorted(int(p) for p in os.listdir('/proc') if p.isdigit()))")
    assert out.strip() == "1 [1]"


@pytest.mark.root
def test_wall_clock_bound_per_cell_kills_the_whole_tree(zygote):
    sb = zygote.spawn(LIMITS)
    uid = sb.spec["uid"]
    run(sb, "import os, time\nfor _ in range(3):\n    os.fork() == 0 and time.sleep(60)")
    started = time.monotonic()
    with pytest.raises(SandboxTimeout, match="per cell"):
        run(sb, "while True:\n    pass", timeout=1)
    assert time.monotonic() - started < 2.5
    assert uid_processes(uid) == []
    deadline = time.monotonic() + 3
    dirs = cgroups.locate().dirs(sb.spec["cgroup"])
    while any(os.path.exists(p) for p in dirs) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert dirs and not any(os.path.exists(p) for p in dirs), "cgroups removed"


@pytest.mark.root
def test_cpu_time_limit(zygote):
    limits = SandboxLimits(**{**LIMITS.__dict__, "cpu_seconds": 1, "cell_timeout": 30, "notebook_timeout": 30})
    with zygote.spawn(limits) as sb:
        with pytest.raises(SandboxDied, match="CPU"):
            run(sb, "while True:\n    pass")


@pytest.mark.root
def test_memory_limit(zygote):
    with zygote.spawn(LIMITS) as sb:
        with pytest.raises(SandboxDied, match="more than the 256 MB of memory"):
            run(sb, "blocks = []\nfor _ in range(32):\n    blocks.append(b'x' * (32 << 20))")


FORGED_EXIT = ("import json, os, struct\n"
               "body = b'J' + json.dumps({'op': 'exit', 'code': 0}).encode()\n"
               "os.write(3, struct.pack('>Q', len(body)) + body)\n")


@pytest.mark.parametrize("code, reason", [
    ("import os\nos._exit(3)", "exited (exit code 3)"),
    ("import ctypes\nctypes.string_at(0)", "died (SIGSEGV)"),
    # The sandbox's own word on how it ended is not taken: its zygote says what really happened.
    (FORGED_EXIT + "os._exit(3)", "exited (exit code 3)"),
], ids=["exit code", "signal", "forged exit report"])
@pytest.mark.root
def test_the_grader_says_how_a_sandbox_ended(zygote, code, reason):
    with zygote.spawn(LIMITS) as sb:
        with pytest.raises(SandboxDied, match=re.escape(reason)):
            sb.call({"op": "cell", "source": code})  # a forged frame is only this call's (malformed) reply ...
            sb.call({"op": "cell", "source": "print(1)"})  # ... and the next one finds the sandbox gone


@pytest.mark.root
def test_a_sandbox_that_closes_its_socket_and_runs_on_is_killed_without_waiting_for_it(zygote):
    """Its socket closed, the grader asks the worker how it ended; the worker waits a moment
    (ZygoteServer.EXIT_WAIT) for an exit that never comes, then kills it -- its processes go too."""
    with zygote.spawn(LIMITS) as sb:
        uid, started = sb.spec["uid"], time.monotonic()
        with pytest.raises(SandboxDied, match="stopped unexpectedly"):
            sb.call({"op": "cell", "source": "import os, time\nos.close(3)\ntime.sleep(60)"})
        assert time.monotonic() - started < 5
    deadline = time.monotonic() + 3
    while uid_processes(uid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert uid_processes(uid) == []


@pytest.mark.root
def test_a_sandbox_closed_after_bye_is_killed_without_the_grader_waiting_for_the_worker(zygote, monkeypatch):
    """Nobody asks how a finished sandbox ended: closing it sends the worker a kill that wants no
    answer, so the grading thread goes on at once (~2 ms sooner a notebook). The worker still kills it
    with its processes and cgroups, and the next request's answer is that request's own."""
    from attention_platform.grading.sandbox import protocol

    sb = zygote.spawn(LIMITS)
    uid, cgroup = sb.spec["uid"], sb.spec["cgroup"]
    assert run(sb, "import os\nif os.fork() == 0:\n    os.setsid(); import time; time.sleep(60)\nprint('forked')") == "forked\n"
    answers = []
    real = protocol.recv_frame_with_fds
    monkeypatch.setattr(protocol, "recv_frame_with_fds", lambda *args, **kw: answers.append(args) or real(*args, **kw))
    sb.close()
    assert answers == []  # no answer awaited from the worker
    monkeypatch.undo()
    with zygote.spawn(LIMITS) as after:
        assert run(after, "print(6 * 7)") == "42\n"
    assert uid_processes(uid) == []
    deadline = time.monotonic() + 3
    while any(path.endswith("/" + cgroup) for path in sandbox_cgroups(zygote.pid, wait=0)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(path.endswith("/" + cgroup) for path in sandbox_cgroups(zygote.pid, wait=0))


@pytest.mark.root
def test_process_limit(zygote):
    with zygote.spawn(LIMITS) as sb:
        out = run(sb, """
import os, time
children = 0
for _ in range(64):
    try:
        pid = os.fork()
    except OSError:
        break
    if pid == 0:
        time.sleep(20)
        os._exit(0)
    children += 1
print(children)
""")
        assert int(out) < LIMITS.nproc
        uid = sb.spec["uid"]
    assert uid_processes(uid) == []


@pytest.mark.root
def test_file_size_and_tmpfs_limits(zygote):
    with zygote.spawn(LIMITS) as sb:
        out = run(sb, """
import os
written = 0
try:
    with open('/tmp/fill', 'wb') as f:
        for _ in range(100):
            f.write(b'\\0' * (1 << 20))
            f.flush()
            written += 1
except OSError as exc:
    print('refused', written, exc.strerror)
""")
    assert out.startswith("refused") and int(out.split()[1]) <= LIMITS.tmpfs_mb


@pytest.mark.root
def test_output_is_bounded(zygote):
    with zygote.spawn(LIMITS) as sb:
        _, reply = sb.call({"op": "cell", "source": "for _ in range(100_000):\n    print('spam' * 50)"})
    text = "".join(o.get("text", "") for o in reply["outputs"])
    assert len(text) < LIMITS.output_chars + 200 and "truncated" in text


@pytest.mark.root
def test_concurrent_sandboxes_cannot_see_each_other(zygote):
    a, b = zygote.spawn(LIMITS), zygote.spawn(LIMITS)
    try:
        assert a.spec["uid"] != b.spec["uid"]
        put(a, "secret.txt", "alice's work")
        run(a, "open('/tmp/x', 'w').write('alice tmp')")
        out = run(b, "import os\nprint(os.listdir('.'), os.listdir('/tmp'), os.listdir('/proc'))")
        assert "secret" not in out and "'x'" not in out
    finally:
        a.close()
        b.close()


@pytest.mark.root
def test_sandboxes_run_in_parallel_threads(zygote):
    results = []

    def one():
        with zygote.spawn(LIMITS) as sb:
            results.append(run(sb, "print(sum(range(1000)))"))

    threads = [threading.Thread(target=one) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == ["499500\n"] * 4


# A sandbox can read all of its own memory -- everything it inherited from the worker it was forked
# from, the worker's initial environment block (the strings at the top of its stack) included. It
# looks for the secret by a short prefix and the secret's SHA-256, so that this code itself never
# holds the secret (the cell's source is in the sandbox's memory too).
SCAN_OWN_MEMORY = """
import ctypes, hashlib
prefix, digest, size, step = {prefix!r}.encode(), {digest!r}, {size!r}, 1 << 24
found = set()
for line in open("/proc/self/maps"):
    fields = line.split()
    if not fields[1].startswith("rw"):
        continue
    start, end = (int(x, 16) for x in fields[0].split("-"))
    for at in range(start, end, step):
        chunk = ctypes.string_at(at, min(step + size, end - at))
        i = chunk.find(prefix)
        while i >= 0:
            if hashlib.sha256(chunk[i:i + size]).hexdigest() == digest:
                found.add(fields[5] if len(fields) > 5 else "anonymous memory")
            i = chunk.find(prefix, i + 1)
print(sorted(found))
"""
SECRET_HOLDER = """
import json, os
from attention_platform.grading.sandbox import Zygote
zygote = Zygote.connect(os.environ["BROKER"]) if os.environ.get("BROKER") else Zygote()
with zygote.spawn() as sandbox:
    _, reply = sandbox.call({{"op": "cell", "source": {scan!r}}})
print(json.dumps({{"seen": reply["outputs"][0].get("text", reply["outputs"][0]).strip()}}))
"""


@pytest.mark.parametrize("worker", ["a root grader's own worker", "the sandbox broker's"])
@pytest.mark.root
def test_no_secret_in_the_environment_that_starts_the_worker_reaches_a_sandbox(tmp_path, worker):
    """A service token, a database URL or the course's secret seed in the environment of the process
    that starts the warm worker (the hub, a compose entrypoint, a TA's shell) must not be in the memory
    a student's code can read: every sandbox is a fork of that worker."""
    import hashlib
    import secrets
    import shutil
    import sys
    import tempfile
    from pathlib import Path

    from broker_helpers import GRADER, as_user, ensure_user, start_broker

    secret = "Zq7K" + secrets.token_hex(14)
    code = SECRET_HOLDER.format(scan=SCAN_OWN_MEMORY.format(prefix=secret[:4], size=len(secret),
                                                            digest=hashlib.sha256(secret.encode()).hexdigest()))
    if worker == "a root grader's own worker":
        env = {k: v for k, v in os.environ.items() if k != "ATTENTION_SANDBOX_SOCKET"}
        done = subprocess.run([sys.executable, "-c", code], env={**env, "ATTENTION_TEST_TOKEN": secret},
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-2000:]
        seen = done.stdout.strip().splitlines()[-1]
    else:
        grader = ensure_user(GRADER)
        folder = Path(tempfile.mkdtemp(prefix="attention-broker-test-"))
        folder.chmod(0o755)
        process, socket_path = start_broker(folder, grader, env={"ATTENTION_TEST_TOKEN": secret})
        try:
            seen = json.dumps(as_user(grader, code, env={"BROKER": str(socket_path)}))
        finally:
            process.terminate()
            process.wait(20)
            shutil.rmtree(folder, ignore_errors=True)
    assert json.loads(seen) == {"seen": "[]"}


@pytest.mark.parametrize("starter, worker", [
    ({"PATH": "/opt/py/bin:/usr/bin", "FORMGRADER_API_TOKEN": "t", "NBGRADER_DB_URL": "postgresql://u:pw@db/g",
      "ATTENTION_SECRET_SEED": "s", "HOME": "/root", "LD_PRELOAD": "/tmp/x.so"}, {"PATH": "/opt/py/bin:/usr/bin"}),
    ({}, {"PATH": "/usr/bin:/bin"}),  # a starter without PATH
    ({"PYTHONPATH": "/srv/grader-lib", "ATTENTION_CGROUP_ROOT": "/sys/fs/cgroup/x",
      "ATTENTION_SANDBOX_FIRST_USES": "none", "OMP_NUM_THREADS": "8", "LANG": "de_DE.UTF-8"},
     {"PATH": "/usr/bin:/bin", "PYTHONPATH": "/srv/grader-lib", "ATTENTION_CGROUP_ROOT": "/sys/fs/cgroup/x",
      "ATTENTION_SANDBOX_FIRST_USES": "none"}),  # the fixed settings win over the starter's
])
def test_a_worker_gets_only_the_settings_it_needs_of_its_starters_environment(starter, worker):
    from attention_platform.grading.sandbox.environment import FIXED, is_worker_environment, worker_environment

    assert worker_environment(starter) == {**worker, **FIXED}
    assert not is_worker_environment(starter)  # the broker re-executes itself ...
    assert is_worker_environment(worker_environment(starter))  # ... once
    # ... even where Python adds LC_CTYPE at its start (PEP 538: no C.UTF-8 locale on the machine)
    assert is_worker_environment({**worker_environment(starter), "LC_CTYPE": "C.UTF-8"})


# --------------------------------------------------------------------------- the system-call filter
# Student code asking the kernel for what only a namespace's root may do, or for the kernel's rarely
# used attack surface: a user namespace gives an unprivileged process every capability inside it
# (mount, netfilter, ...). Each call is made raw, through libc.syscall, with the machine's numbers
# (the kernel's ABI); each row prints the errno it got, or "ok".
SYSCALL_CELL = """
import ctypes, errno, mmap, os, platform
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
NR = {{
    "x86_64": dict(unshare=272, clone=56, clone3=435, mount=165, setns=308, keyctl=250, add_key=248, bpf=321,
                   ptrace=101, process_vm_readv=310, perf_event_open=298, userfaultfd=323, io_uring_setup=425,
                   socket=41),
    "aarch64": dict(unshare=97, clone=220, clone3=435, mount=40, setns=268, keyctl=219, add_key=217, bpf=280,
                    ptrace=117, process_vm_readv=270, perf_event_open=241, userfaultfd=282, io_uring_setup=425,
                    socket=198),
}}[platform.machine()]
CLONE_NEWUSER, CLONE_NEWNS, SIGCHLD = 0x10000000, 0x00020000, 17

def sys(name, *args):
    return libc.syscall(NR[name], *[ctypes.c_ulong(a) if isinstance(a, int) else a for a in args])

def outcome(result):
    return "ok" if result >= 0 else errno.errorcode[ctypes.get_errno()]

def forked(result):
    if result == 0:  # the child of a raw clone: nothing of Python's is safe here
        os._exit(0)
    if result > 0:
        os.waitpid(result, 0)
    return result

{attack}
"""
SYSCALL_ATTACKS = {
    "unshare(CLONE_NEWUSER)": "print(outcome(sys('unshare', CLONE_NEWUSER)))",
    "unshare(CLONE_NEWUSER | CLONE_NEWNS)": "print(outcome(sys('unshare', CLONE_NEWUSER | CLONE_NEWNS)))",
    "clone(CLONE_NEWUSER)": "print(outcome(forked(sys('clone', CLONE_NEWUSER | SIGCHLD, 0, 0, 0, 0))))",
    "clone3(CLONE_NEWUSER)": (  # struct clone_args: flags, pidfd, child_tid, parent_tid, exit_signal, ...
        "args = (ctypes.c_uint64 * 8)(CLONE_NEWUSER, 0, 0, 0, SIGCHLD)\n"
        "print(outcome(forked(sys('clone3', ctypes.byref(args), ctypes.sizeof(args)))))"),
    "mount in a user and mount namespace of its own": (
        "result = sys('unshare', CLONE_NEWUSER | CLONE_NEWNS)\n"
        "if result == 0:\n"
        "    result = sys('mount', b'none', b'/tmp', b'tmpfs', 0, None)\n"
        "print(outcome(result))"),
    "mount": "print(outcome(sys('mount', b'none', b'/tmp', b'tmpfs', 0, None)))",
    "setns": "print(outcome(sys('setns', os.open('/proc/self/ns/net', os.O_RDONLY), 0x40000000)))",
    "keyctl(KEYCTL_JOIN_SESSION_KEYRING)": "print(outcome(sys('keyctl', 1, None)))",
    "add_key": "print(outcome(sys('add_key', b'user', b'k', b'v', 1, 0xfffffffe)))",  # to the process keyring
    "bpf(BPF_MAP_CREATE)": (
        "attr = (ctypes.c_uint32 * 32)(2, 4, 4, 1)\n"  # an array map of one 4-byte value
        "print(outcome(sys('bpf', 0, ctypes.byref(attr), ctypes.sizeof(attr))))"),
    "ptrace(PTRACE_TRACEME)": "print(outcome(sys('ptrace', 0, 0, 0, 0)))",
    "ptrace(PTRACE_ATTACH) to its own child": (
        "child = os.fork()\n"
        "if child == 0:\n"
        "    import time; time.sleep(30); os._exit(0)\n"
        "result = sys('ptrace', 16, child, 0, 0)\n"
        "os.kill(child, 9); os.waitpid(child, 0)\n"
        "print(outcome(result))"),
    "process_vm_readv of itself": (
        "buffer = ctypes.create_string_buffer(8)\n"
        "local = (ctypes.c_void_p * 2)(ctypes.addressof(buffer), 8)\n"
        "remote = (ctypes.c_void_p * 2)(ctypes.addressof(buffer), 8)\n"
        "print(outcome(sys('process_vm_readv', os.getpid(), local, 1, remote, 1, 0)))"),
    "socket(AF_NETLINK, SOCK_RAW, NETLINK_NETFILTER)": "print(outcome(sys('socket', 16, 3, 12)))",
    # vsock (a virtual machine's line to its host) belongs to no network namespace
    "socket(AF_VSOCK, SOCK_STREAM)": "print(outcome(sys('socket', 40, 1, 0)))",
    "perf_event_open of its own task clock": (
        "attr = (ctypes.c_uint64 * 16)()\n"  # struct perf_event_attr: type, size, config, ..., flags
        "attr[0] = 1 | (ctypes.sizeof(attr) << 32)\n"  # PERF_TYPE_SOFTWARE, the struct's size
        "attr[1] = 1\n"  # PERF_COUNT_SW_TASK_CLOCK
        "attr[5] = 1 << 5 | 1 << 6\n"  # exclude_kernel, exclude_hv
        "print(outcome(sys('perf_event_open', ctypes.byref(attr), 0, -1 & 0xffffffff, -1 & 0xffffffff, 0)))"),
    "userfaultfd(UFFD_USER_MODE_ONLY)": "print(outcome(sys('userfaultfd', 1)))",
    "io_uring_setup": (  # its requests are never seen by the filter, so it would bypass every rule
        "params = (ctypes.c_uint32 * 30)()\n"
        "print(outcome(sys('io_uring_setup', 1, ctypes.byref(params))))"),
    "x32 unshare(CLONE_NEWUSER)": (  # the x32 ABI: x86_64's numbers with bit 30 set
        "libc.syscall.argtypes = None\n"
        "print(outcome(libc.syscall(ctypes.c_long(NR['unshare'] | 0x40000000), ctypes.c_ulong(CLONE_NEWUSER)))"
        " if platform.machine() == 'x86_64' else 'EPERM')"),
    "i386 unshare(CLONE_NEWUSER) through int 0x80": (
        # push rbx; mov ebx, CLONE_NEWUSER; mov eax, 310 (i386's unshare); int 0x80; pop rbx; ret
        "code = bytes.fromhex('53bb00000010b836010000cd805bc3')\n"
        "page = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)\n"
        "page.write(code)\n"
        "result = ctypes.CFUNCTYPE(ctypes.c_int)(ctypes.addressof(ctypes.c_char.from_buffer(page)))()\n"
        "print('ok' if result == 0 else errno.errorcode[-result])"),
}
EXPECTED = {name: "EPERM" for name in SYSCALL_ATTACKS} | {"clone3(CLONE_NEWUSER)": "ENOSYS"}


@pytest.mark.parametrize("attack", SYSCALL_ATTACKS)
@pytest.mark.root
def test_student_code_cannot_reach_the_kernels_namespace_and_rarely_used_calls(zygote, attack):
    if attack.startswith("i386") and os.uname().machine != "x86_64":
        pytest.skip("int 0x80 is x86's")
    with zygote.spawn(LIMITS) as sb:
        out = run(sb, SYSCALL_CELL.format(attack=SYSCALL_ATTACKS[attack]))
        assert out.strip() == EXPECTED[attack], out
        assert run(sb, "print(6 * 7)") == "42\n"  # refused, not killed


@pytest.mark.root
def test_an_honest_notebook_still_computes_with_threads_and_torch_under_the_filter(zygote):
    with zygote.spawn(LIMITS) as sb:
        assert "seccomp" in sb.layers
        out = run(sb, """
import socket, threading
import torch
torch.set_num_threads(2)
x = torch.randn(64, 64)
weights = (x @ x.T / 8).softmax(dim=-1)
results = []
threads = [threading.Thread(target=lambda: results.append(float((x @ x).sum()) == float((x @ x).sum())))
           for _ in range(3)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print(torch.allclose(weights.sum(-1), torch.ones(64)), results, torch.get_num_threads())
print([line.split()[1] for line in open('/proc/self/status') if line.startswith('Seccomp:')])
# the C library asks NETLINK_ROUTE which address families the machine has (AI_ADDRCONFIG)
print(socket.getaddrinfo('127.0.0.1', 80, flags=socket.AI_ADDRCONFIG)[0][4], socket.if_nameindex())
""")
        assert out.splitlines() == ["True [True, True, True] 2", "['2']", "('127.0.0.1', 80) [(1, 'lo')]"], out


# Each refused call made by root itself (every capability, which a namespace's root has inside it), in a
# mount namespace of its own so that nothing it mounts outlives it; once as it is (each call must not be
# refused then: else the row shows nothing) and once with the filter.
ROOT_CALLS = {
    "mount": lambda c, d: c.sys("mount", b"none", d.encode(), b"tmpfs", 0, None),
    "umount2": lambda c, d: c.sys("umount2", d.encode(), 0),  # what the row above mounted, if it could
    "pivot_root": lambda c, d: c.sys("pivot_root", d.encode(), d.encode()),
    "chroot": lambda c, d: c.sys("chroot", b"/"),
    "open_tree": lambda c, d: c.sys("open_tree", -100, b"/", 1),  # AT_FDCWD, OPEN_TREE_CLONE
    "fsopen": lambda c, d: c.sys("fsopen", b"tmpfs", 0),
    "unshare(CLONE_NEWNS)": lambda c, d: c.sys("unshare", 0x00020000),
    "setns to its own network namespace": lambda c, d: c.sys("setns", os.open("/proc/self/ns/net", os.O_RDONLY),
                                                             0x40000000),
    "keyctl": lambda c, d: c.sys("keyctl", 1, None),
    "bpf(BPF_MAP_CREATE)": lambda c, d: c.sys("bpf", 0, bytes((2, 0, 0, 0, 4, 0, 0, 0, 4, 0, 0, 0, 1)) + bytes(115),
                                              128),
    "syslog(SYSLOG_ACTION_SIZE_BUFFER)": lambda c, d: c.sys("syslog", 10, None, 0),
    "ptrace(PTRACE_TRACEME)": lambda c, d: c.sys("ptrace", 0, 0, 0, 0),
}


class _RawCalls:
    """System calls by name, through libc.syscall with the machine's numbers: "ok" or the errno's name."""

    def __init__(self):
        from attention_platform.grading.sandbox.syscall_filter import NUMBERS

        self.numbers = NUMBERS[os.uname().machine]
        self.libc = ctypes.CDLL(None, use_errno=True)
        self.libc.syscall.restype = ctypes.c_long

    def sys(self, name, *args):
        result = self.libc.syscall(self.numbers[name], *[ctypes.c_long(a) if isinstance(a, int) else a for a in args])
        return "ok" if result >= 0 else errno.errorcode[ctypes.get_errno()]


def _as_root_in_a_child(filtered: bool, folder: str) -> dict[str, str]:
    from attention_platform.grading.sandbox.linux import CLONE_NEWNS, MS_PRIVATE, MS_REC, mount, unshare
    from attention_platform.grading.sandbox.syscall_filter import Filter

    calls, syscall_filter = _RawCalls(), Filter()  # made before the fork: the child imports nothing
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(read)
            unshare(CLONE_NEWNS)
            mount(None, "/", None, MS_REC | MS_PRIVATE)
            if filtered:
                syscall_filter.install()
            os.write(write, json.dumps({name: call(calls, folder) for name, call in ROOT_CALLS.items()}).encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read) as f:
        text = f.read()
    os.waitpid(pid, 0)
    return json.loads(text)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root")
@pytest.mark.root
def test_the_filter_refuses_its_calls_even_to_root(tmp_path):
    plain, filtered = _as_root_in_a_child(False, str(tmp_path)), _as_root_in_a_child(True, str(tmp_path))
    assert not [name for name, outcome in plain.items() if outcome == "EPERM"], plain
    assert filtered == {name: "EPERM" for name in ROOT_CALLS}


def _header_numbers(path: str) -> dict[str, int]:
    return {m[1]: int(m[2]) for m in re.finditer(r"#define __NR(?:3264)?_(\w+)\s+(\d+)", open(path).read())}


@pytest.mark.parametrize("machine, header", [("x86_64", "/usr/include/x86_64-linux-gnu/asm/unistd_64.h"),
                                             ("aarch64", "/usr/include/asm-generic/unistd.h")])
def test_the_filters_call_numbers_are_the_kernels(machine, header):
    """The filter's numbers, checked against the kernel's headers where they are installed (a call newer
    than the headers is only checked to be numbered after the last one they know)."""
    from attention_platform.grading.sandbox.syscall_filter import NUMBERS

    if not os.path.exists(header):
        pytest.skip(f"no {header} here")
    known = _header_numbers(header)
    newest = max(known.values())
    assert {name: number for name, number in NUMBERS[machine].items() if name in known or number <= newest} == \
        {name: known.get(name) for name, number in NUMBERS[machine].items() if name in known or number <= newest}


# Student code writes the cell's reply itself: 7 MB of JSON that is two million empty lists.
JSON_BOMB = ("import os, struct\n"
             "body = b'J[' + b'[],' * ((7 << 20) // 3) + b'[]]'\n"
             "os.write(3, struct.pack('>Q', len(body)) + body)\n"
             "import time; time.sleep(60)\n")


def test_a_json_reply_of_millions_of_values_is_refused_before_it_is_parsed(zygote):
    """Parsed, it would have cost the grader some 130 MB for 7 MB received: it is refused unparsed,
    as the sandbox's own failure."""
    import tracemalloc

    with zygote.spawn(LIMITS) as sb:
        tracemalloc.start()
        try:
            with pytest.raises(SandboxDied, match="cannot read"):
                sb.call({"op": "cell", "source": JSON_BOMB})
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    assert peak < 4 * (7 << 20)
