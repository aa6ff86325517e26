"""The trusted side of the sandbox: reach a zygote, spawn and drive sandboxes.

Nothing a sandbox sends is executed or unpickled here: frames are size-capped
JSON or ``grader_tests.wire`` messages, every read has a deadline, and a
sandbox that overruns is killed with its whole cgroup (by the zygote, which
owns the sandbox's processes and cgroups). This side needs no privilege when
it talks to the root sandbox broker (``broker.py``).
"""

from __future__ import annotations

import atexit
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

from attention_platform import bounded_json

from . import first_use, protocol
from .environment import worker_environment
from .limits import SandboxLimits, asdict

PACKAGE_PARENT = Path(__file__).resolve().parents[3]  # where ``attention_platform`` can be imported from


def _bounded_json(payload) -> None:
    """A sandbox's JSON reply (outputs, errors) costs the grader a few times its size at most, as a
    probe reply does: its values are counted before it is parsed, at most 1,024 and one per 16 bytes
    received; cell outputs nest deeper than a probe reply's header."""
    allowed = 1024 + len(payload) // 16
    bounds = bounded_json.Bounds(max_bytes=len(payload), max_depth=64, max_containers=allowed, max_items=allowed)
    try:
        bounded_json.check_shape(payload, bounds, "the reply")
    except bounded_json.TooComplex as exc:
        raise protocol.FrameError(str(exc)) from None


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


SOCKET_ENV = "ATTENTION_SANDBOX_SOCKET"  # where an unprivileged grader finds the root sandbox broker


class Zygote:
    """The grader's handle on a warm worker (torch imported once) that forks sandboxes.

    ``Zygote()`` starts a private one as a child process (the grader is root);
    ``Zygote.connect(path)`` talks to the root sandbox broker over its Unix socket
    (the grader is not root). Either way the zygote chooses each sandbox's uid,
    cgroup and visible paths and clamps the limits asked for to its own caps.
    """

    def __init__(self, python: str | None = None, start_timeout: float = 180.0,
                 first_uses: tuple[str, ...] | None = None):
        """``first_uses``: the optional warm-ups (``first_use.ALL`` names) to pay before forking; all if None."""
        ours, theirs = socket.socketpair()
        env = worker_environment()  # nothing secret of this grader's: every sandbox can read the worker's memory
        command = [python or sys.executable, "-m", "attention_platform.grading.sandbox.zygote", str(theirs.fileno())]
        if first_uses is not None:
            command.append(",".join(first_uses))
        self.process = subprocess.Popen(
            command,
            pass_fds=[theirs.fileno()], cwd=str(PACKAGE_PARENT), env=env, stdin=subprocess.DEVNULL,
        )
        theirs.close()
        self._attach(ours, start_timeout)
        self.asked.update(first_use.ALL if first_uses is None else first_uses)  # paid at its start

    @classmethod
    def connect(cls, path: str, start_timeout: float = 180.0,
                first_uses: tuple[str, ...] = first_use.ALL) -> "Zygote":
        """``first_uses``: the optional warm-ups this connection's zygote pays before its first sandbox,
        if the broker did not pay them for everyone at its start; asked for now, paid while this
        process goes on."""
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.connect(path)
        except OSError as exc:
            sock.close()
            raise SandboxUnavailable(f"the sandbox broker at {path} cannot be reached ({exc.strerror or exc}); "
                                     "it runs as root beside the formgrader") from None
        zygote = cls.__new__(cls)
        zygote.process = None
        zygote._attach(sock, start_timeout)
        if first_uses:
            zygote._send_warm(sorted(set(first_uses)))  # if the broker closed at once, wait_ready reads why
        return zygote

    def _attach(self, ctrl: socket.socket, start_timeout: float) -> None:
        self.lock = threading.Lock()
        self.ctrl = ctrl
        self.broken = False
        self.start_deadline = time.monotonic() + start_timeout
        self.pid = None  # known once the zygote said it is ready (it imports torch meanwhile)
        self.limits_kind = None
        self.asked: set[str] = set()  # the optional warm-ups asked of this zygote so far (``warm``)
        self.warms_unread = 0  # warm requests sent whose answer is not read yet: read before the next reply

    def warm(self, first_uses) -> None:
        """Ask the zygote to pay, before the sandboxes it forks from now on, the optional warm-ups
        (``first_use`` names) in ``first_uses`` not asked for yet; without waiting for them (a new
        sandbox waits, the zygote pays them first). A broker's zygote starts with those its broker
        paid for every connection (``broker.py --first-uses``), a private one with those it was started with."""
        missing = sorted(set(first_uses) - self.asked)
        if not missing:
            return
        with self.lock:
            if not self._send_warm(missing):
                self.broken = True
                raise SandboxUnavailable("the sandbox zygote stopped answering (its control socket closed)")

    def _send_warm(self, names: list[str]) -> bool:
        try:
            protocol.send_json(self.ctrl, {"op": "warm", "first_uses": names})
        except OSError:
            return False
        self.asked.update(names)
        self.warms_unread += 1
        return True

    def _read_warmed(self, deadline: float) -> None:
        """Read the answers to the warm requests sent (callers hold the lock): each ``warmed``, or the
        reason the zygote refused."""
        while self.warms_unread:
            try:
                answer, _ = protocol.recv_frame_with_fds(self.ctrl, deadline)
            except (protocol.FrameError, OSError) as exc:
                self.broken = True
                raise SandboxUnavailable(f"the sandbox zygote did not finish its warm-up ({exc})") from None
            self.warms_unread -= 1
            if not isinstance(answer, dict) or answer.get("op") != "warmed":
                self.broken = True
                error = answer.get("error") if isinstance(answer, dict) else answer
                raise SandboxUnavailable(f"the sandbox zygote refused its warm-up: {str(error)[:1000]}")

    def _request(self, message: dict, timeout: float) -> tuple[dict, list[int]]:
        """One request and its reply on the control socket (callers hold the lock)."""
        self._read_warmed(time.monotonic() + self.WARM_TIMEOUT)
        try:
            protocol.send_json(self.ctrl, message)
            reply, fds = protocol.recv_frame_with_fds(self.ctrl, time.monotonic() + timeout)
        except (protocol.FrameError, OSError) as exc:
            self.broken = True
            raise SandboxUnavailable(f"the sandbox zygote stopped answering ({exc})") from None
        if not isinstance(reply, dict):
            self.broken = True
            raise SandboxUnavailable("the sandbox zygote sent a malformed reply")
        return reply, fds

    WARM_TIMEOUT = 180.0  # seconds a warm-up asked for after the start may take (a few, unless the machine is loaded)

    def wait_ready(self) -> None:
        """Block until the zygote finished importing and the warm-ups asked for so far (called by the
        first spawn)."""
        if self.pid is not None:
            return
        try:
            ready, _ = protocol.recv_frame_with_fds(self.ctrl, self.start_deadline)
        except (protocol.FrameError, OSError) as exc:
            self.broken = True
            raise SandboxUnavailable(f"the sandbox zygote did not start ({exc})") from None
        if not isinstance(ready, dict) or ready.get("op") != "ready":
            self.broken = True
            error = ready.get("error") if isinstance(ready, dict) else ready
            raise SandboxUnavailable(str(error)[:1000])
        self._read_warmed(self.start_deadline)
        self.pid, self.limits_kind = ready["pid"], ready.get("limits")

    def spawn(self, limits: SandboxLimits | None = None) -> "Sandbox":
        limits = limits or SandboxLimits()
        with self.lock:
            self.wait_ready()
            reply, fds = self._request({"op": "spawn", "limits": asdict(limits)}, 30)
        if reply.get("op") != "spawned" or len(fds) != 1:
            for fd in fds:
                os.close(fd)
            raise SandboxUnavailable(f"the sandbox zygote refused a sandbox: {str(reply.get('error'))[:500]}")
        spec = reply["spec"]
        granted = SandboxLimits(**{k: spec[k] for k in asdict(SandboxLimits())})
        return Sandbox(socket.socket(fileno=fds[0]), reply["pid"], spec, granted, zygote=self,
                       forked_ahead=bool(reply.get("forked_ahead")))

    def kill_sandbox(self, pid: int, closed: bool = False) -> tuple[bool | None, dict | None]:
        """Have the zygote kill one of its sandboxes: (whether it ran out of memory, None if unknown;
        how it ended on its own, ``{"code": n}`` or ``{"signal": n}``, None if it was still running).
        ``closed``: its socket closed, so it is probably exiting (the zygote waits a moment for it)."""
        with self.lock:
            try:
                reply, _ = self._request({"op": "kill", "pid": pid, "closed": closed}, 30)
            except SandboxUnavailable:
                return None, None
        if not reply.get("known"):
            return None, None
        ended = reply.get("ended")
        return bool(reply.get("memory_exceeded")), ended if isinstance(ended, dict) else None

    def release_sandbox(self, pid: int) -> None:
        """Have the zygote kill one of its sandboxes that is done, without waiting for its answer
        (nobody asks how a sandbox that was told "bye" ended): the grading thread goes on at once,
        and the zygote sends no reply that would be in the way of the next one."""
        with self.lock:
            try:
                protocol.send_json(self.ctrl, {"op": "kill", "pid": pid, "reply": False})
            except OSError:
                self.broken = True  # the zygote is gone, and its sandboxes with it

    def close(self) -> None:
        try:
            self.ctrl.close()
        finally:
            if self.process is not None:
                try:
                    self.process.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    self.process.kill()
                    self.process.wait()

    def alive(self) -> bool:
        if self.broken:
            return False
        return self.process is None or self.process.poll() is None


_ZYGOTE: Zygote | None = None
_ZYGOTE_LOCK = threading.Lock()


def get_zygote(first_uses: tuple[str, ...] | None = None) -> Zygote:
    """The process-wide zygote, started or connected on first use (and again if it died):
    the broker named by ATTENTION_SANDBOX_SOCKET if set, else a private one when root.
    ``first_uses``: the optional warm-ups the zygote this call starts or connects to pays before
    its first sandbox; all of them if None (a process grading any notebook)."""
    global _ZYGOTE
    with _ZYGOTE_LOCK:
        if _ZYGOTE is None or not _ZYGOTE.alive():
            from attention_platform.settings import settings

            path = settings().attention_sandbox_socket
            if path:
                _ZYGOTE = Zygote.connect(path, first_uses=first_use.ALL if first_uses is None else first_uses)
            elif os.geteuid() == 0:
                _ZYGOTE = Zygote(first_uses=first_uses)
            else:
                raise SandboxUnavailable(
                    "grading needs the sandbox broker: this process is not root and "
                    f"{SOCKET_ENV} names no broker socket")
            atexit.register(_ZYGOTE.close)
        return _ZYGOTE


@dataclass
class Sandbox:
    """One confined process tree serving one submission."""

    sock: socket.socket
    pid: int  # the sandbox's process in the host PID namespace (a child of the zygote)
    spec: dict
    limits: SandboxLimits
    zygote: Zygote | None = None
    forked_ahead: bool = False  # forked by the zygote before this sandbox was asked for (ZygoteServer)
    layers: list = field(default_factory=list)
    started: float = field(default_factory=time.monotonic)
    closed: bool = False
    exit_report: dict | None = None  # how its process ended on its own, as its zygote saw it
    memory_failed: bool | None = None
    # Commands sent ahead (``send``) and not yet answered, and those still waiting for room to be sent.
    unanswered: deque = field(default_factory=deque)  # of (bytes sent, when sent)
    unsent: deque = field(default_factory=deque)  # of frames
    unsendable: bool = False  # a send failed: nothing more is sent

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

    def _deadline(self, timeout: float | None, since: float) -> tuple[float, str]:
        per_call = since + (timeout if timeout is not None else self.limits.cell_timeout)
        if per_call <= self.deadline:
            return per_call, f"it ran longer than the {self.limits.cell_timeout:g} s allowed per cell"
        return self.deadline, f"the notebook ran longer than the {self.limits.notebook_timeout:g} s allowed in all"

    # A command sent ahead of its predecessor's reply waits in the sandbox's socket, so the sandbox
    # starts it the moment it has answered the one before, without sleeping until the grader has read
    # that answer and sent the next. Each sleep and wake-up of a process costs CPU time (on virtual
    # CPUs, more than a small command's own work), and a graded notebook is ~20 commands. At most
    # SEND_AHEAD_BYTES are ever unanswered, well under a socket's buffer: the grader's send never
    # blocks, so a sandbox blocked on sending a long reply cannot deadlock it.
    SEND_AHEAD_BYTES = 32 * 1024

    def send(self, message: dict, *, wire_payload: bytes | None = None) -> None:
        """Queue a command (sent now if there is room); ``reply`` returns the answers in order. Never
        raises: a sandbox that stopped reading says why at the ``reply`` that needs the command."""
        data = protocol.frame(protocol.JSON, json.dumps(message).encode())
        if wire_payload is not None:
            data += protocol.frame(protocol.WIRE, wire_payload)
        self.unsent.append(data)
        self._send_ahead()

    def reply(self, timeout: float | None = None):
        """The reply frame (kind, payload) to the oldest unanswered command. It gets ``timeout``
        (``cell_timeout`` by default) from when the sandbox could start it -- its predecessor's reply
        or its own sending, whichever came later -- within ``notebook_timeout``. A sandbox that
        overruns or dies is killed and the ``SandboxError`` says why, for the student."""
        if self.closed:
            raise SandboxDied(self.death_reason())
        why = ""
        try:
            if not self.unanswered:
                self._send_ahead(at_least_one=True)
                if not self.unanswered:
                    raise protocol.PeerClosed("the sandbox stopped reading its commands")
            deadline, why = self._deadline(timeout, self.unanswered[0][1])
            answer = protocol.recv_frame(self.sock, deadline, self.limits.max_frame_bytes, check_json=_bounded_json)
        except protocol.Timeout:
            self.kill()
            raise SandboxTimeout(f"stopped by the grader: {why}") from None
        except protocol.PeerClosed:
            self.kill(closed=True)  # the zygote reads the memory cgroup before removing it
            raise SandboxDied(self.death_reason()) from None
        except (protocol.FrameError, OSError) as exc:
            self.kill()
            raise SandboxDied(f"the sandbox sent something the grader cannot read ({exc})") from None
        self.unanswered.popleft()
        if self.unanswered:  # it starts now, if it was sent before this answer
            size, sent = self.unanswered[0]
            self.unanswered[0] = (size, max(sent, time.monotonic()))
        self._send_ahead()
        return answer

    def call(self, message: dict, *, wire_payload: bytes | None = None, timeout: float | None = None):
        """``send`` then ``reply``, with nothing else unanswered."""
        assert not self.unanswered and not self.unsent, "call() while commands sent ahead are unanswered"
        self.send(message, wire_payload=wire_payload)
        return self.reply(timeout)

    def _send_ahead(self, at_least_one: bool = False) -> None:
        """Send queued commands while the unanswered ones stay within SEND_AHEAD_BYTES; a larger one goes
        alone, when everything before it is answered (``at_least_one``). Stops for good at the first
        failure (the sandbox closed its end): a command half sent must not be followed by another."""
        while self.unsent and not self.unsendable:
            size = len(self.unsent[0])
            room = self.SEND_AHEAD_BYTES - sum(sent for sent, _ in self.unanswered)
            if size > room and not (at_least_one and not self.unanswered):
                return
            try:
                self.sock.sendall(self.unsent.popleft())
            except OSError:
                self.unsendable = True
                return
            self.unanswered.append((size, time.monotonic()))
            at_least_one = False

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

    def kill(self, closed: bool = False, *, asking: bool = True) -> None:
        """Kill every process of this sandbox now (the zygote does it: the sandbox's
        processes and cgroups are root's); remember whether memory ran out and how the process
        ended if it had already (``closed``: its socket closed), unless not ``asking``. Idempotent."""
        if self.closed:
            return
        self.closed = True
        self.unsent.clear()
        self.unanswered.clear()
        try:
            self.sock.close()
        except OSError:
            pass
        if self.zygote is None:
            return
        if asking:
            self.memory_failed, self.exit_report = self.zygote.kill_sandbox(self.pid, closed)
        else:
            self.zygote.release_sandbox(self.pid)

    def memory_exceeded(self) -> bool:
        """Did the memory cgroup OOM-kill or refuse memory? (known once the sandbox was killed)"""
        return bool(self.memory_failed)

    def close(self) -> None:
        if not self.closed:
            try:
                protocol.send_json(self.sock, {"op": "bye"})
            except OSError:
                pass
        self.kill(asking=False)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


__all__ = ["Sandbox", "SandboxDied", "SandboxError", "SandboxLimits", "SandboxTimeout", "SandboxUnavailable",
           "SOCKET_ENV", "Zygote", "get_zygote"]
