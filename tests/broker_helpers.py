"""The sandbox broker as tests start it, the accounts they talk to it as, what a zygote leaves
behind and how it kills: shared by the broker's own tests (tests/grading/test_sandbox_broker.py), the sandbox's
(tests/grading/test_sandbox_isolation.py) and the validate service's (tests/hub/test_validate_service.py)."""

from __future__ import annotations

import json
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path

GRADER = "attention-sbx-grader"  # stands in for the course's grader account
STRANGER = "attention-sbx-other"  # any other account on the machine
# A cell that prints which optional first uses its sandbox's worker had paid (first_use.py), and torch.
LOADED = "import sys\nprint(*sorted(m for m in ('torch._dynamo', 'matplotlib.pyplot') if m in sys.modules), 'torch')"

def process_status(pid: int) -> dict | None:
    """``/proc/PID/status`` as a dict, None if there is no such process."""
    try:
        return dict(line.split(":", 1) for line in open(f"/proc/{pid}/status") if ":" in line)
    except OSError:
        return None


def uid_processes(uid: int, wait: float = 2.0) -> list[int]:
    """Live (non-zombie) processes of ``uid``, after giving the kernel ``wait`` s to finish kills."""
    deadline = time.monotonic() + wait
    while True:
        found = [int(pid) for pid in filter(str.isdigit, os.listdir("/proc"))
                 if (status := process_status(int(pid))) and int(status["Uid"].split()[0]) == uid
                 and not status["State"].strip().startswith("Z")]
        if not found or time.monotonic() > deadline:
            return found
        time.sleep(0.05)


def sandbox_cgroups(zygote_pid: int, wait: float = 3.0) -> list[str]:
    """The sandbox cgroups a zygote (a private one, or the broker's server for one connection) still
    has, after giving it ``wait`` s to remove them."""
    from attention_platform.grading.sandbox import cgroups

    deadline = time.monotonic() + wait
    while True:
        found = [os.path.join(folder, name) for folder in map(os.path.dirname, cgroups.locate().dirs("-"))
                 if os.path.isdir(folder) for name in os.listdir(folder) if name.startswith(f"sbx-{zygote_pid}-")]
        if not found or time.monotonic() > deadline:
            return found
        time.sleep(0.05)


def take_pid(pid: int, tries: int = 50) -> subprocess.Popen | None:
    """A harmless process started with exactly ``pid``, or None if that pid stays taken: the next pid
    the kernel hands out is set through ``ns_last_pid`` (root), retried in case another process on
    the machine forked in between."""
    for _ in range(tries):
        with open("/proc/sys/kernel/ns_last_pid", "w") as f:
            f.write(str(pid - 1))
        process = subprocess.Popen(["sleep", "60"])
        if process.pid == pid:
            return process
        process.kill()
        process.wait()
    return None


def assert_an_exited_sandbox_keeps_its_pid(zygote, limits) -> None:
    """The zygote kills a sandbox by pid, as root, when the grader closes it. Had the sandbox already
    exited and been reaped, that pid could by then be another process's, and the kill would hit it;
    so a sandbox that exited stays unreaped (a zombie holds its pid) until the grader closes it."""
    from attention_platform.grading.sandbox import protocol

    control = subprocess.Popen(["true"])
    control.wait()  # reaped: its pid is free
    taken = take_pid(control.pid)
    assert taken is not None, "this machine did not let the test choose the next pid"
    taken.kill()
    taken.wait()

    sandbox = zygote.spawn(limits)
    protocol.send_json(sandbox.sock, {"op": "cell", "source": "import os; os._exit(3)"})  # no reply read
    deadline = time.monotonic() + 5
    while (status := process_status(sandbox.pid)) and not status["State"].strip().startswith("Z"):
        assert time.monotonic() < deadline, "the sandbox did not exit"
        time.sleep(0.02)
    victim = take_pid(sandbox.pid)
    try:
        sandbox.close()
        time.sleep(0.2)
        assert victim is None or victim.poll() is None, "closing the sandbox killed another process"
        assert victim is None, "the sandbox's pid was free for another process before the grader closed it"
        deadline = time.monotonic() + 3
        while process_status(sandbox.pid) is not None and time.monotonic() < deadline:
            time.sleep(0.02)
        assert process_status(sandbox.pid) is None, "the sandbox was never reaped"
    finally:
        if victim is not None:
            victim.kill()
            victim.wait()


def ensure_user(name: str) -> pwd.struct_passwd:
    try:
        return pwd.getpwnam(name)
    except KeyError:
        subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", name], check=True)
        return pwd.getpwnam(name)


def start_broker(folder: Path, allow: pwd.struct_passwd, env: dict | None = None,
                 extra: tuple[str, ...] = ()) -> tuple[subprocess.Popen, Path]:
    socket_path = folder / "sandbox.sock"
    process = subprocess.Popen(
        [sys.executable, "-m", "attention_platform.grading.sandbox.broker", "--socket", str(socket_path),
         "--allow-uid", str(allow.pw_uid), "--allow-gid", str(allow.pw_gid), *extra],
        env={**os.environ, **(env or {})}, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 120
    while not socket_path.exists():
        assert process.poll() is None, process.stdout.read()
        assert time.monotonic() < deadline, "the broker did not start"
        time.sleep(0.1)
    return process, socket_path


@dataclass(frozen=True)
class SharedBroker:
    """A running broker of :class:`SharedBrokers`: its socket, the root-owned folder it is in (others
    may traverse it; a test may put its own files there) and the grader account it serves."""

    socket: Path
    folder: Path
    grader: pwd.struct_passwd


class SharedBrokers:
    """Root sandbox brokers serving :data:`GRADER`, one per set of command-line options: the first
    test that asks for a configuration starts it, every later one shares it (each connection is its
    own grader to a broker, so tests do not see each other's warm-ups); :meth:`close` stops them."""

    def __init__(self):
        self._running: dict[tuple[str, ...], tuple[subprocess.Popen, SharedBroker]] = {}

    def __call__(self, *options: str) -> SharedBroker:
        if options in self._running:
            process, broker = self._running[options]
            assert process.poll() is None, f"the shared broker {options or '(default)'} exited: a test stopped it"
            return broker
        grader = ensure_user(GRADER)
        folder = Path(tempfile.mkdtemp(prefix="attention-broker-test-"))
        folder.chmod(0o755)  # root's, not writable by others: the broker checks
        process, socket_path = start_broker(folder, grader, extra=options)
        self._running[options] = (process, SharedBroker(socket_path, folder, grader))
        return self._running[options][1]

    def close(self) -> None:
        for process, broker in self._running.values():
            process.terminate()
            process.wait(20)
            shutil.rmtree(broker.folder, ignore_errors=True)
        self._running.clear()


def as_user(user: pwd.struct_passwd, code: str, env: dict | None = None, timeout: float = 120) -> dict:
    """Run ``code`` as ``user`` in a fresh interpreter; it prints one JSON line, returned here."""
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], user=user.pw_uid, group=user.pw_gid,
                          extra_groups=[], env={"PATH": "/usr/bin:/bin", **(env or {})}, cwd="/",
                          capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])
