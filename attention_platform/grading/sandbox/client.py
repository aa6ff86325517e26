"""The trusted side of the sandbox: start the zygote, spawn and drive sandboxes.

Nothing a sandbox sends is executed or unpickled here: frames are size-capped
JSON or ``grader_tests.wire`` messages, every read has a deadline, and a
sandbox that overruns is killed with its whole cgroup.
"""

from __future__ import annotations

import atexit
import itertools
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field

from . import protocol
from .cgroups import CGROUP_PARENT, cgroup_dirs


@dataclass
class SandboxLimits:
    """Bounds of one sandbox (one submission). Wall-clock bounds are enforced here,
    the others by the kernel inside the sandbox."""

    cell_timeout: float = 60.0  # wall-clock seconds per cell (and per probe)
    notebook_timeout: float = 300.0  # wall-clock seconds for the whole submission
    cpu_seconds: int = 120  # RLIMIT_CPU of every process in the sandbox
    memory_mb: int = 1024  # memory cgroup limit (RSS the sandbox itself allocates)
    address_space_mb: int = 4096  # RLIMIT_AS (torch alone maps ~650 MB)
    nproc: int = 32  # pids cgroup and RLIMIT_NPROC (threads count)
    fsize_mb: int = 16  # RLIMIT_FSIZE: largest file a sandbox may write
    nofile: int = 128  # RLIMIT_NOFILE
    tmpfs_mb: int = 32  # size of /tmp, /dev/shm and /home/student each
    output_chars: int = 100_000  # captured stdout/stderr/display per cell
    images_per_cell: int = 8  # matplotlib figures sent back as PNG per cell (the rest are counted, not shown)
    image_bytes: int = 500_000  # largest PNG kept (8 of them fit a frame); a bigger one becomes a note
    max_frame_bytes: int = 8 * 1024 * 1024  # largest message accepted from a sandbox


class SandboxError(Exception):
    """A sandbox stopped answering; ``reason`` is a sentence for the student."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class SandboxTimeout(SandboxError):
    pass


class SandboxDied(SandboxError):
    pass


class SandboxUnavailable(SandboxError):
    """The grader could not build a sandbox at all (e.g. not root, no namespaces): an
    infrastructure failure, never a student's zero."""


_UIDS = itertools.count()
# Removes the cgroups of finished sandboxes off the grading path (their processes are already killed).
_REAPER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sandbox-reaper")
UID_BASE = 61000  # sandboxes run as uid/gid UID_BASE + n (n < UID_SPAN), never a real account
UID_SPAN = 2000


class Zygote:
    """A warm worker process (torch imported once) that forks sandboxes on request."""

    def __init__(self, python: str | None = None, start_timeout: float = 180.0):
        self.lock = threading.Lock()
        ours, theirs = socket.socketpair()
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8",
               "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "PYTHONDONTWRITEBYTECODE": "1"}
        self.process = subprocess.Popen(
            [python or sys.executable, "-m", "attention_platform.grading.sandbox.zygote", str(theirs.fileno())],
            pass_fds=[theirs.fileno()], cwd=os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(__file__)))),
            env=env, stdin=subprocess.DEVNULL,
        )
        theirs.close()
        self.ctrl = ours
        cleanup_stale_cgroups()
        self.start_deadline = time.monotonic() + start_timeout
        self.pid = None  # known once the zygote said it is ready (it imports torch meanwhile)

    def wait_ready(self) -> None:
        """Block until the zygote finished importing (called by the first spawn)."""
        if self.pid is not None:
            return
        _, ready = protocol.recv_frame(self.ctrl, self.start_deadline)
        if ready.get("op") != "ready":
            raise RuntimeError(f"zygote did not start: {ready!r}")
        self.pid = ready["pid"]

    def spawn(self, limits: SandboxLimits | None = None) -> "Sandbox":
        limits = limits or SandboxLimits()
        n = next(_UIDS)
        uid = UID_BASE + (os.getpid() * 7 + n) % UID_SPAN
        spec = {k: v for k, v in asdict(limits).items()}
        spec.update(
            uid=uid,
            cgroup=f"sbx-{os.getpid()}-{n}",
            ro_paths=sorted({sys.prefix, sys.base_prefix} - {"/usr"}),
            path=os.path.join(sys.prefix, "bin") + ":/usr/bin:/bin",
        )
        with self.lock:
            self.wait_ready()
            protocol.send_json(self.ctrl, {"op": "spawn", "spec": spec})
            self.ctrl.settimeout(30)
            data, fds, _, _ = socket.recv_fds(self.ctrl, 4096, 1)
        reply = json.loads(data)
        sock = socket.socket(fileno=fds[0])
        return Sandbox(sock, reply["pid"], spec, limits)

    def close(self) -> None:
        try:
            self.ctrl.close()
        finally:
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def alive(self) -> bool:
        return self.process.poll() is None


_ZYGOTE: Zygote | None = None
_ZYGOTE_LOCK = threading.Lock()


def get_zygote() -> Zygote:
    """The process-wide warm zygote, started on first use (and again if it died)."""
    global _ZYGOTE
    with _ZYGOTE_LOCK:
        if _ZYGOTE is None or not _ZYGOTE.alive():
            _ZYGOTE = Zygote()
            atexit.register(_ZYGOTE.close)
        return _ZYGOTE


@dataclass
class Sandbox:
    """One confined process tree serving one submission."""

    sock: socket.socket
    pid: int  # process A in the host PID namespace
    spec: dict
    limits: SandboxLimits
    layers: list = field(default_factory=list)
    started: float = field(default_factory=time.monotonic)
    closed: bool = False
    exit_report: dict | None = None
    memory_failed: bool | None = None

    def __post_init__(self):
        self.deadline = self.started + self.limits.notebook_timeout
        try:
            _, ready = protocol.recv_frame(self.sock, time.monotonic() + 30, 1 << 16)
        except protocol.FrameError as exc:
            self.kill()
            raise SandboxUnavailable(f"the sandbox could not start ({exc})") from None
        if ready.get("op") != "ready":
            self.kill()
            raise SandboxUnavailable(f"the sandbox could not start: {str(ready.get('error', ready))[-600:]}")
        self.layers = ready["layers"]

    # ------------------------------------------------------------------ talking

    def _deadline(self, timeout: float | None) -> tuple[float, str]:
        per_call = time.monotonic() + (timeout if timeout is not None else self.limits.cell_timeout)
        if per_call <= self.deadline:
            return per_call, f"it ran longer than the {self.limits.cell_timeout:g} s allowed per cell"
        return self.deadline, f"the notebook ran longer than the {self.limits.notebook_timeout:g} s allowed in all"

    def call(self, message: dict, *, wire_payload: bytes | None = None, timeout: float | None = None):
        """Send a command; return the sandbox's reply frame (kind, payload)."""
        if self.closed:
            raise SandboxDied(self.death_reason())
        deadline, why = self._deadline(timeout)
        try:
            protocol.send_json(self.sock, message)
            if wire_payload is not None:
                protocol.send_frame(self.sock, protocol.WIRE, wire_payload)
            while True:
                kind, reply = protocol.recv_frame(self.sock, deadline, self.limits.max_frame_bytes)
                if kind == protocol.JSON and reply.get("op") == "exit":
                    self.exit_report = reply
                    raise protocol.PeerClosed("exited")
                return kind, reply
        except protocol.Timeout:
            self.kill()
            raise SandboxTimeout(f"stopped by the grader: {why}") from None
        except protocol.PeerClosed:
            self._collect_exit()
            reason = self.death_reason()  # before kill(): it reads the memory cgroup
            self.kill()
            raise SandboxDied(reason) from None
        except (protocol.FrameError, OSError) as exc:
            self.kill()
            raise SandboxDied(f"the sandbox sent something the grader cannot read ({exc})") from None

    def _collect_exit(self) -> None:
        if self.exit_report is not None:
            return
        try:
            kind, reply = protocol.recv_frame(self.sock, time.monotonic() + 2, 1 << 16)
            if kind == protocol.JSON and reply.get("op") == "exit":
                self.exit_report = reply
        except (protocol.FrameError, OSError):
            pass

    def death_reason(self) -> str:
        report = self.exit_report or {}
        if self.memory_exceeded():
            return f"the notebook's process was stopped: it used more than the {self.limits.memory_mb} MB of memory allowed"
        sig = report.get("signal")
        if sig is not None:
            name = signal.Signals(sig).name if sig in signal.Signals._value2member_map_ else str(sig)
            if sig == signal.SIGXCPU:
                return f"the notebook's process was stopped: it used more than {self.limits.cpu_seconds} s of CPU time"
            if sig == signal.SIGKILL and time.monotonic() - self.started >= self.limits.cpu_seconds:
                return f"the notebook's process was stopped (CPU-time limit of {self.limits.cpu_seconds} s)"
            return f"the notebook's process died ({name})"
        if "code" in report:
            return f"the notebook's process exited (exit code {report['code']}), e.g. through sys.exit() or os._exit()"
        return "the notebook's process stopped unexpectedly"

    # ------------------------------------------------------------------ ending

    def kill(self, wait: bool = False) -> None:
        """Kill every process of this sandbox now; remove its cgroups in the background
        (or before returning, with ``wait``). Idempotent."""
        if self.closed:
            return
        self.closed = True
        try:
            os.kill(self.pid, signal.SIGKILL)  # A; B and its namespace die with it (PDEATHSIG)
        except ProcessLookupError:
            pass
        try:
            self.sock.close()
        except OSError:
            pass
        if wait:
            self._reap()
        else:
            _REAPER.submit(self._reap)

    def _reap(self) -> None:
        dirs = cgroup_dirs(self.spec["cgroup"])
        for _ in range(400):
            busy = False
            for path in dirs.values():
                try:
                    pids = open(os.path.join(path, "cgroup.procs")).read().split()
                except OSError:
                    continue
                for pid in pids:
                    busy = True
                    try:
                        os.kill(int(pid), signal.SIGKILL)
                    except (ProcessLookupError, ValueError):
                        pass
            if not busy:
                break
            time.sleep(0.005)
        self.memory_failed = self.memory_exceeded()
        for path in dirs.values():
            for _ in range(200):
                try:
                    os.rmdir(path)
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.01)

    def memory_exceeded(self) -> bool:
        """Did the memory cgroup OOM-kill or refuse memory? (remembered after the cgroup is gone)"""
        if self.memory_failed is not None:
            return self.memory_failed
        path = cgroup_dirs(self.spec["cgroup"]).get("memory")
        if path is None:
            return False
        try:
            control = dict(line.split() for line in open(os.path.join(path, "memory.oom_control")) if line.strip())
            failcnt = int(open(os.path.join(path, "memory.failcnt")).read())
            return int(control.get("oom_kill", 0)) > 0 or failcnt > 0
        except (OSError, ValueError):
            return False

    def close(self) -> None:
        if not self.closed:
            try:
                protocol.send_json(self.sock, {"op": "bye"})
            except OSError:
                pass
        self.kill()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def cleanup_stale_cgroups() -> None:
    """Remove sandbox cgroups left by a grader process that no longer exists."""
    for base in {os.path.dirname(p) for p in cgroup_dirs("x").values()}:
        if not os.path.isdir(base):
            continue
        for name in os.listdir(base):
            parts = name.split("-")
            if len(parts) != 3 or parts[0] != "sbx" or not parts[1].isdigit():
                continue
            if os.path.exists(f"/proc/{parts[1]}"):
                continue  # its grader still runs
            try:
                os.rmdir(os.path.join(base, name))
            except OSError:
                pass


__all__ = ["CGROUP_PARENT", "Sandbox", "SandboxDied", "SandboxError", "SandboxLimits", "SandboxTimeout",
           "SandboxUnavailable", "Zygote",
           "get_zygote"]
