"""Validate at the speed of the warm path: a student's notebook runs in a fresh sandbox forked
from the warm worker (torch already imported), not in a fresh kernel that imports torch again.

A fresh kernel per Validate (ipykernel's start and ``import torch``) would be most of the CPU a
student's whole session costs the hub, and slow under a rush; a sandbox forked from the broker's warm
worker has torch imported already (the figures: ``make load`` and the benchmarks page).

Two halves:

* :class:`ValidateService` — ``attention-course validate-service``, a process of the course's
  grader account beside the formgrader (natively started by ``attention-course hub``). It listens
  on a Unix socket that hub users' servers may open; the kernel tells it who is asking
  (``SO_PEERCRED``), and it serves only uids of the hub's users. Each request is one notebook and
  its folder's other files; it gets **a fresh sandbox per Validate** from the root sandbox broker
  (the same confinement and limits as grading: no network, its own uid, the course's limits), runs
  every code cell in order there (``grading.execute_notebook``), then the notebook's public checks
  (``HiddenCheck.public``) as grading runs them, and answers the notebook with its outputs and each
  public check's title and verdict. It runs no student code itself and opens no path a client
  names; the only verdicts it decides are the public checks' judges' (a hidden check never runs here). At
  most ``workers`` Validates run at once; students take turns (one running or waiting each, a
  second press while one waits is refused at once), so a rush queues fairly instead of
  starting fifty kernels. A uid's third connection open at once is refused before anything is read
  from it (``MAX_CONNECTIONS_PER_UID``).
* :func:`attention_platform.lab.warm_validate.executed_for_validate` — the student's server side:
  sends the notebook, returns the executed copy. nbgrader's Validate logic (which cells failed or
  changed) then runs on it in the student's own server, unchanged (``WarmExecute``). It lives in the
  student's module, which the student image carries, and needs nothing of this one.
  Where no service is configured (``ATTENTION_VALIDATE_SOCKET`` unset: Docker, Kubernetes) or it
  cannot be reached, Validate runs as before, in a kernel.

The one interface a Validate front end needs is ``executed_for_validate(nb, folder)``; the grading
queue of feedback on submit and this service both get their sandboxes through
``grading.sandbox.client.get_zygote`` (the broker), so there is one kind of warm worker.
"""

from __future__ import annotations

import base64
import logging
import os
import socket
import stat
import struct
import threading
import time
from collections import OrderedDict
from pathlib import Path

from attention_platform import bounded_json
from attention_platform.grading.sandbox.files import MAX_REQUEST_FILES

MAX_REQUEST_BYTES = 24 << 20  # a notebook and its folder's files (submission_files keeps 16 MB)
# A uid's connections open at once: its Validate and a second press to be told it is busy. Each is
# read whole (MAX_REQUEST_BYTES) and parsed on a thread of its own before its turn is checked, so
# without a cap one student's many connections could fill the service's memory and threads.
MAX_CONNECTIONS_PER_UID = 2
# The request around the notebook: an object of four members, the files as [name, base64] pairs. Its
# shape is checked before it is parsed, and the notebook's (bounded_json.NOTEBOOK) before nbformat
# reads it, so what a request makes the service allocate is bounded by its size, not its sender.
REQUEST_SHAPE = bounded_json.Bounds(max_bytes=MAX_REQUEST_BYTES, max_depth=3, max_containers=MAX_REQUEST_FILES + 2,
                                    max_items=3 * MAX_REQUEST_FILES + 16)
TOO_COMPLEX = "Your notebook is too large or complex to validate: "


def peer_uid(conn: socket.socket) -> int:
    _, uid, _ = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")))
    return uid


class Turns:
    """Students take turns: each uid has at most one Validate running or waiting; the next to run
    is the uid that has waited longest. ``acquire`` blocks until it is this uid's turn and a worker
    is free; False if this uid already has one (its second press is refused, not queued)."""

    def __init__(self, workers: int):
        self.workers = max(1, workers)
        self.running = 0
        self.waiting: "OrderedDict[int, threading.Event]" = OrderedDict()
        self.active: set[int] = set()
        self.lock = threading.Lock()

    def acquire(self, uid: int, timeout: float) -> bool | None:
        """True: run now (call ``release``); False: this uid already has one; None: timed out."""
        with self.lock:
            if uid in self.active or uid in self.waiting:
                return False
            if self.running < self.workers and not self.waiting:
                self.running += 1
                self.active.add(uid)
                return True
            event = self.waiting[uid] = threading.Event()
        if event.wait(timeout):
            return True
        with self.lock:
            if event.is_set():  # granted just as we gave up: take it
                return True
            self.waiting.pop(uid, None)
        return None

    def release(self, uid: int) -> None:
        with self.lock:
            self.active.discard(uid)
            if self.waiting:
                next_uid, event = self.waiting.popitem(last=False)
                self.active.add(next_uid)
                event.set()  # the worker slot passes to the student who waited longest
            else:
                self.running -= 1

    def queued(self) -> int:
        with self.lock:
            return len(self.waiting)


class ValidateService:
    """The grader account's Validate runner (see the module docstring)."""

    def __init__(self, course: Path, socket_path: Path, uid_range: tuple[int, int], *, workers: int = 2,
                 wait_seconds: float = 240.0, log: logging.Logger | None = None):
        from attention_platform.grading.batch import load_course_config
        from attention_platform.grading.sandbox import first_use
        from attention_platform.grading.sandboxed_execute import SandboxedExecute

        self.log = log or logging.getLogger("validate-service")
        self.socket_path, self.uid_range = Path(socket_path), uid_range
        # The course's sandbox limits, as grading uses them (c.SandboxedExecute in nbgrader_config.py).
        self.limits = SandboxedExecute(config=load_course_config(Path(course))).limits()
        # Validate takes any notebook of the course: its worker pays the first uses they need (first_use.py),
        # no more (each one paid makes every sandbox dearer) and no fewer (each sandbox would pay them).
        self.first_uses = first_use.needed_by_course(Path(course))
        self.turns = Turns(workers)
        self.wait_seconds = wait_seconds
        self.served = 0
        self.connections: dict[int, int] = {}  # uid -> connections open (MAX_CONNECTIONS_PER_UID)
        self.connections_lock = threading.Lock()

    def listen(self) -> socket.socket:
        """A socket every local account may open (the kernel names the peer; uids outside the hub's
        range are refused); its folder is root's and not writable by others, so it cannot be swapped."""
        folder = self.socket_path.parent
        info = os.lstat(folder)
        if not stat.S_ISDIR(info.st_mode) or info.st_mode & 0o022:
            raise SystemExit(f"{folder} must be a folder nobody else can write")
        if os.path.lexists(self.socket_path):
            os.unlink(self.socket_path)
        server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        server.bind(str(self.socket_path))
        os.chmod(self.socket_path, 0o666)
        server.listen(64)
        return server

    def serve_forever(self) -> None:
        from attention_platform.grading.sandbox.client import get_zygote
        from attention_platform.grading.sandbox.grading import probe_payload

        get_zygote(self.first_uses).wait_ready()  # the broker's warm worker, before the first student asks
        probe_payload()  # the public checks' probe code, compiled once before the first Validate
        server = self.listen()
        self.log.info("validate service on %s for uids %d-%d, %d at once", self.socket_path, *self.uid_range,
                      self.turns.workers)
        while True:
            conn, _ = server.accept()
            try:
                uid = peer_uid(conn)
            except OSError:
                conn.close()
                continue
            # Counted here, in the order connections arrive, before a thread reads anything.
            admitted = self._opened(uid)
            threading.Thread(target=self.handle, args=(conn, uid, admitted), daemon=True).start()

    def _opened(self, uid: int) -> bool:
        """Count a connection of ``uid``; False (not counted) if it has MAX_CONNECTIONS_PER_UID open."""
        with self.connections_lock:
            if self.connections.get(uid, 0) >= MAX_CONNECTIONS_PER_UID:
                return False
            self.connections[uid] = self.connections.get(uid, 0) + 1
            return True

    def _closed(self, uid: int) -> None:
        with self.connections_lock:
            left = self.connections.get(uid, 0) - 1
            if left > 0:
                self.connections[uid] = left
            else:
                self.connections.pop(uid, None)

    def handle(self, conn: socket.socket, uid: int, admitted: bool) -> None:
        from attention_platform.grading.sandbox import protocol

        try:
            with conn:
                if not (self.uid_range[0] <= uid <= self.uid_range[1]):
                    reply = {"op": "refused", "error": f"uid {uid} is not a hub user's"}
                elif not admitted:
                    reply = {"op": "busy",
                             "error": f"you have {MAX_CONNECTIONS_PER_UID} Validate connections open already"}
                else:
                    try:
                        _, request = protocol.recv_frame(conn, time.monotonic() + 60, MAX_REQUEST_BYTES,
                                                         check_json=bounded_json.checker(REQUEST_SHAPE, 'the request'))
                        reply = self.validate(uid, request)
                    except bounded_json.TooComplex as exc:
                        reply = {"op": "refused", "error": f"{TOO_COMPLEX}{exc}."}
                    except protocol.FrameError as exc:
                        reply = {"op": "refused", "error": f"unreadable request ({exc})"}
                protocol.send_json(conn, reply)
        except OSError:
            pass
        finally:
            if admitted:
                self._closed(uid)

    def validate(self, uid: int, request) -> dict:
        import nbformat

        from attention_platform.grading.sandbox.client import SandboxUnavailable, get_zygote
        from attention_platform.grading.sandbox.grading import execute_notebook, public_checks_of

        if not isinstance(request, dict) or request.get("op") != "validate":
            return {"op": "refused", "error": "not a validate request"}
        try:
            nb = bounded_json.reads_notebook(str(request.get("notebook", "")))
            files = {str(name): base64.b64decode(data) for name, data in request.get("files", [])}
        except bounded_json.TooComplex as exc:
            return {"op": "refused", "error": f"{TOO_COMPLEX}{exc}."}
        except Exception as exc:  # noqa: BLE001 - whatever a client sends, it is one refused request
            return {"op": "refused", "error": f"not a notebook ({type(exc).__name__})"}
        turn = self.turns.acquire(uid, self.wait_seconds)
        if turn is False:
            return {"op": "busy", "error": "your previous Validate is still running"}
        if turn is None:
            return {"op": "busy", "error": f"no Validate could start within {self.wait_seconds:.0f} s"}
        public_checks = public_checks_of(nb)
        try:
            started = time.monotonic()
            result = execute_notebook(nb, zygote=get_zygote(self.first_uses), limits=self.limits,
                                      filename=os.path.basename(str(request.get("name", ""))) or "notebook.ipynb",
                                      extra_files=files, public_checks=public_checks)
        except SandboxUnavailable as exc:
            return {"op": "unavailable", "error": exc.reason}
        finally:
            self.turns.release(uid)
        self.served += 1
        self.log.info("validated a notebook of uid %d in %.2f s%s", uid, time.monotonic() - started,
                      f" (stopped: {result.stopped})" if result.stopped else "")
        return {"op": "executed", "notebook": nbformat.writes(nb), "stopped": result.stopped,
                "public_checks": [_public_verdict(check, result.checks.get(check.id)) for check in public_checks]}


NOT_RUN = "It did not run: your notebook stopped before its last cell (see the cell named above)."


def _public_verdict(check, outcome) -> dict:
    """What Validate shows of one public check: its catalogue title and the judge's verdict, decided
    in this process (``outcome``: None if the notebook stopped before the checks could run)."""
    if outcome is None:
        return {"title": check.title, "passed": False, "message": NOT_RUN}
    return {"title": check.title, "passed": outcome.passed, "message": outcome.message}


# --------------------------------------------------------------------------- the command

def main(args) -> int:
    from attention_platform import third_party_patches

    third_party_patches.defer_iri_syntax()  # before nbformat imports jsonschema
    logging.basicConfig(level=logging.INFO, format="[ValidateService %(asctime)s] %(message)s")
    service = ValidateService(Path(args.course), Path(args.socket), (args.uid_min, args.uid_max),
                              workers=args.workers)
    try:
        service.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0
