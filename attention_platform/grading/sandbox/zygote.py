"""The warm worker: imports torch once, then forks one confined sandbox per submission.

Run by ``client.Zygote`` as root: ``python -m attention_platform.grading.sandbox.zygote FD [WARM]``
where FD is its control socket and WARM the optional warm-ups of ``first_use`` to pay before
forking ("optimizers,figures"; all of them when absent). It imports torch (and the pickle-free
wire codec) but nothing of the hidden checks, the reference or the course: whatever a sandbox
inherits from it by ``fork`` holds no secret.

For every ``spawn`` request it hands out a sandbox, forked ahead of the request (``ZygoteServer``)
or on it; each sandbox is one process, forked into a PID namespace of its own (PID 1 there, so
when it exits the kernel kills everything left in its namespace), which

1. leaves the zygote's session, dies with it (``PR_SET_PDEATHSIG``), joins a fresh
   pids cgroup (``pids.max``) and memory cgroup (``memory.limit_in_bytes``);
2. unshares mount, network, IPC and UTS namespaces: no interface but a
   down loopback, so no network at all; PIDs of the host are invisible;
3. builds a new root on tmpfs: read-only, nosuid, nodev binds of /usr, /lib*
   and the venv (torch, numpy); a minimal /etc and /dev; a size-capped tmpfs
   /tmp and /home/student (the submission's own working copy and nothing
   else); then ``pivot_root`` and a detached unmount of the old root, so the
   course directory, gradebook, grader_tests/, other submissions and the
   exchange do not exist in its view;
4. mounts its own /proc, sets rlimits (CPU seconds, address space, processes,
   file size, open files, no core dumps), drops every group and switches to an
   unprivileged uid/gid that is unique to this sandbox, sets ``no_new_privs``,
   installs its system-call filter (``syscall_filter``: no new namespaces, mounts,
   keyrings, eBPF, tracing, ...) and only then reads commands and runs student code.

The zygote, its parent, tells the grader how it ended (exit code or signal) when asked to kill it.
(Each sandbox is one process, not two: a process A that did steps 1-3 and forked B into the new
PID namespace to do step 4 would wait for B and report its exit on the sandbox's socket, where B
could forge it, and copying and tearing down A's torch-sized address space would cost every
sandbox.)

The trusted client enforces wall-clock deadlines and kills the whole cgroup.
"""

from __future__ import annotations

import ast
import base64
import builtins
import contextlib
import io
import json
import math
import os
import resource
import select
import signal
import socket
import sys
import tempfile
import time
import traceback
import warnings

from attention_platform import start_up_gc

from . import cgroups, first_use, syscall_filter
from .linux import (CLONE_NEWIPC, CLONE_NEWNET, CLONE_NEWNS, CLONE_NEWPID, CLONE_NEWUTS, MNT_DETACH, MS_BIND,
                    MS_NODEV, MS_NOEXEC, MS_NOSUID, MS_PRIVATE, MS_RDONLY, MS_REC, MS_REMOUNT, PR_SET_NO_NEW_PRIVS,
                    PR_SET_PDEATHSIG, SYS_PIVOT_ROOT)
from .linux import check as _check, libc as _libc, mount as _mount, prctl as _prctl, setns as _setns, unshare as _unshare
from .huge_pages import HugePages
from .limits import BROKER_CAPS, UID_BASE, UID_SPAN, SandboxLimits, asdict, clamp
from .uids import UidClaims

# System directories a sandbox sees, read-only (symlinks such as /bin -> usr/bin are copied as links).
SYSTEM_PATHS = ("/usr", "/lib", "/lib64", "/lib32", "/libx32", "/bin", "/sbin")
ETC_FILES = ("/etc/ld.so.cache", "/etc/localtime")
DEV_NODES = ("null", "zero", "full", "random", "urandom")

_WIRE = None  # grader_tests.wire, imported by main()


# --------------------------------------------------------------------------- the new root

def _bind(path: str, root: str, *, readonly: bool = True) -> None:
    target = root + path
    if os.path.islink(path):
        os.makedirs(os.path.dirname(target), exist_ok=True)
        os.symlink(os.readlink(path), target)
        return
    if os.path.isdir(path):
        os.makedirs(target, exist_ok=True)
    else:
        os.makedirs(os.path.dirname(target), exist_ok=True)
        open(target, "a").close()
    _mount(path, target, None, MS_BIND | MS_REC)
    if readonly:
        _mount(None, target, None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)


def _build_root(root: str, spec: dict) -> None:
    uid = spec["uid"]
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    _mount("tmpfs", root, "tmpfs", MS_NOSUID | MS_NODEV, "size=4m,mode=755")
    for path in SYSTEM_PATHS:
        if os.path.lexists(path):
            _bind(path, root)
    size = spec["tmpfs_mb"]
    # /tmp and /dev/shm as on any system (root's, sticky, world-writable); the home is the student's.
    for path, mode, owner in (("/tmp", "1777", 0), ("/dev/shm", "1777", 0), ("/home/student", "700", uid)):
        os.makedirs(root + path, exist_ok=True)
        _mount("tmpfs", root + path, "tmpfs", MS_NOSUID | MS_NODEV, f"size={size}m,mode={mode},uid={owner},gid={owner}")
    # After the tmpfs mounts, so that a venv under /tmp (a CI checkout) stays visible; its
    # parent folders are root's and the sticky bit keeps the student from renaming them.
    for path in spec["ro_paths"]:
        if os.path.exists(path):
            _bind(path, root)
    os.makedirs(root + "/etc", exist_ok=True)
    for path in ETC_FILES:
        if os.path.exists(path):
            _bind(path, root)
    with open(root + "/etc/passwd", "w") as f:
        f.write(f"root:x:0:0::/:/usr/sbin/nologin\nstudent:x:{uid}:{uid}::/home/student:/usr/sbin/nologin\n")
    with open(root + "/etc/group", "w") as f:
        f.write(f"root:x:0:\nstudent:x:{uid}:\n")
    os.makedirs(root + "/dev", exist_ok=True)
    for node in DEV_NODES:
        if os.path.exists("/dev/" + node):
            _bind("/dev/" + node, root, readonly=False)
    os.symlink("/proc/self/fd", root + "/dev/fd")
    os.makedirs(root + "/proc", exist_ok=True)
    os.chdir(root)
    os.mkdir(".oldroot")
    _check(_libc.syscall(SYS_PIVOT_ROOT, b".", b".oldroot"), "pivot_root")
    os.chdir("/")
    _check(_libc.umount2(b"/.oldroot", MNT_DETACH), "umount old root")
    os.rmdir("/.oldroot")
    _mount(None, "/", None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)


def _drop_privileges(spec: dict) -> None:
    _mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    limits = {
        resource.RLIMIT_CPU: (spec["cpu_seconds"], spec["cpu_seconds"] + 1),
        resource.RLIMIT_AS: (spec["address_space_mb"] << 20,) * 2,
        resource.RLIMIT_NPROC: (spec["nproc"],) * 2,
        resource.RLIMIT_FSIZE: (spec["fsize_mb"] << 20,) * 2,
        resource.RLIMIT_NOFILE: (spec["nofile"],) * 2,
        resource.RLIMIT_CORE: (0, 0),
    }
    for kind, value in limits.items():
        resource.setrlimit(kind, value)
    uid = spec["uid"]
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)
    _prctl(PR_SET_NO_NEW_PRIVS, 1)
    _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)  # cleared by the uid change, so set again
    os.chdir("/home/student")
    os.environ.clear()
    os.environ.update(HOME="/home/student", PATH=spec["path"], LANG="C.UTF-8", TMPDIR="/tmp",
                      MPLBACKEND="Agg", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", USER="student")
    null = os.open("/dev/null", os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.close(null)


def _sandbox_child(sock: socket.socket, spec: dict, root: str, groups: cgroups.Cgroups,
                   call_filter: syscall_filter.Filter) -> None:
    """The sandbox's process, PID 1 of the PID namespace it was forked into (``ZygoteServer._fork``):
    confine itself as root, drop to the sandbox's uid, then serve the grader. Never returns."""
    os.setsid()
    _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    groups.join(spec["cgroup"], os.getpid())  # an error here is a setup failure: no limits, no sandbox
    layers = [f"cgroup:{controller}" for controller in ("memory", "pids")] + [f"limits:{groups.version}"]
    _check(_libc.unshare(CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS), "unshare")
    layers += ["ns:mount", "ns:net", "ns:pid", "ns:ipc", "ns:uts"]
    _libc.sethostname(b"sandbox", 7)
    _build_root(root, spec)
    layers += ["pivot_root:tmpfs", "ro-binds"]
    _drop_privileges(spec)
    layers += ["rlimits", f"uid:{os.getuid()}", "no_new_privs"]
    call_filter.install()
    layers.append("seccomp")
    from .protocol import send_json

    send_json(sock, {"op": "ready", "layers": layers, "pid_in_namespace": os.getpid()})
    Worker(sock, spec).serve()
    os._exit(0)


# --------------------------------------------------------------------------- untrusted worker (the sandbox, after step 4)

class _Capture(io.TextIOBase):
    """A bounded stand-in for sys.stdout/sys.stderr that records stream outputs."""

    def __init__(self, name: str, sink: "_Outputs"):
        self.name, self.sink = name, sink

    def writable(self):
        return True

    def write(self, text):
        text = str(text)
        self.sink.stream(self.name, text)
        return len(text)


class _Outputs:
    def __init__(self, limit: int):
        self.items: list[dict] = []
        self.size, self.limit, self.truncated = 0, limit, False

    def _room(self, text: str) -> str:
        if self.truncated:
            return ""
        if self.size + len(text) > self.limit:
            text = text[: max(0, self.limit - self.size)]
            self.truncated = True
        self.size += len(text)
        return text

    def stream(self, name: str, text: str) -> None:
        text = self._room(text)
        if not text:
            return
        if self.items and self.items[-1].get("output_type") == "stream" and self.items[-1]["name"] == name:
            self.items[-1]["text"] += text
        else:
            self.items.append({"output_type": "stream", "name": name, "text": text})

    def data(self, kind: str, value) -> None:
        text = self._room(_safe_repr(value))
        if text:
            self.items.append({"output_type": kind, "data": {"text/plain": text}})


def _flush_figures(outputs: "_Outputs", limit: int, max_bytes: int) -> None:
    """What IPython's inline backend does at the end of a cell: every open matplotlib
    figure becomes a PNG display output, then all are closed. At most ``limit`` per cell,
    each at most ``max_bytes``."""
    plt = sys.modules.get("matplotlib.pyplot")
    if plt is None:
        return
    try:
        numbers = list(plt.get_fignums())
        for number in numbers[:limit]:
            figure = plt.figure(number)
            buffer = io.BytesIO()
            figure.savefig(buffer, format="png", bbox_inches="tight")
            if buffer.tell() > max_bytes:
                outputs.stream("stdout", f"\n[a figure of {buffer.tell():,} bytes is larger than the {max_bytes:,} "
                                         "the grader shows: try a smaller figsize or dpi]\n")
                continue
            outputs.items.append({"output_type": "display_data",
                                  "data": {"image/png": base64.b64encode(buffer.getvalue()).decode("ascii"),
                                           "text/plain": _safe_repr(figure)}})
        if len(numbers) > limit:
            outputs.stream("stdout", f"\n[{len(numbers) - limit} more figures not shown: the grader keeps {limit} per cell]\n")
        plt.close("all")
    except BaseException:  # noqa: BLE001 - a broken figure costs the student its picture, nothing else
        pass


def _safe_repr(value) -> str:
    try:
        return repr(value)[:20000]
    except BaseException as exc:  # noqa: BLE001 - a student's __repr__ may do anything
        return f"<unprintable {type(value).__name__}: {type(exc).__name__}>"


def _transform(source: str) -> str:
    """IPython magics and shell escapes (%, !) do nothing in the grader."""
    lines = []
    for line in source.splitlines():
        stripped = line.lstrip()
        if stripped.startswith(("%", "!")):
            line = line[: len(line) - len(stripped)] + "pass  # " + stripped
        lines.append(line)
    return "\n".join(lines)


class Worker:
    """Runs inside the sandbox, as the sandbox user. Everything here is reachable by student
    code, so nothing here is trusted by the grader: it only produces data."""

    def __init__(self, sock: socket.socket, spec: dict):
        self.sock, self.spec = sock, spec
        self.namespace = {"__name__": "__main__", "__builtins__": builtins}
        self.probes: dict = {}
        self.count = 0

    def serve(self) -> None:
        from .protocol import recv_frame, send_json

        while True:
            kind, msg = recv_frame(self.sock)
            if kind != b"J":
                continue
            op = msg.get("op")
            if op == "files":
                send_json(self.sock, {"op": "files", "written": self.write_files(msg["files"])})
            elif op == "cell":
                send_json(self.sock, {"op": "cell", "outputs": self.run_cell(msg["source"])})
            elif op == "probes":
                send_json(self.sock, {"op": "probes", **self.load_probes(msg)})
            elif op == "probe":
                _, request = recv_frame(self.sock)
                self.run_probe(msg["check"], request)
            elif op == "bye":
                os._exit(0)

    def write_files(self, files: list) -> int:
        """The submission's own working copy, into /home/student (relative paths only)."""
        import base64

        written = 0
        for name, data in files:
            parts = [p for p in str(name).split("/") if p not in ("", ".", "..")]
            if not parts:
                continue
            try:
                if len(parts) > 1:
                    os.makedirs(os.path.join(*parts[:-1]), exist_ok=True)
                with open(os.path.join(*parts), "wb") as f:
                    f.write(base64.b64decode(data))
                written += 1
            except OSError:
                pass
        return written

    def run_cell(self, source: str) -> list[dict]:
        outputs = _Outputs(self.spec["output_chars"])
        self.count += 1
        saved = sys.stdout, sys.stderr
        sys.stdout, sys.stderr = _Capture("stdout", outputs), _Capture("stderr", outputs)
        self.namespace["display"] = lambda *values, **_: [outputs.data("display_data", v) for v in values] and None
        try:
            tree = ast.parse(_transform(source), f"<cell {self.count}>")
            last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
            exec(compile(tree, f"<cell {self.count}>", "exec"), self.namespace)
            if last is not None:
                value = eval(compile(ast.Expression(last.value), f"<cell {self.count}>", "eval"), self.namespace)
                if value is not None:
                    outputs.data("execute_result", value)
        except BaseException as exc:  # noqa: BLE001 - SystemExit and KeyboardInterrupt are student errors too
            try:
                lines = traceback.format_exception(type(exc), exc, exc.__traceback__.tb_next if exc.__traceback__ else None)
                tb = "".join(lines)[-8000:].splitlines()
                ename, evalue = type(exc).__name__, str(exc)[:2000]
            except BaseException:  # noqa: BLE001
                ename, evalue, tb = "Error", "", ["Error"]
            outputs.items.append({"output_type": "error", "ename": ename, "evalue": evalue, "traceback": tb})
        finally:
            _flush_figures(outputs, self.spec.get("images_per_cell", 0), self.spec.get("image_bytes", 0))
            sys.stdout, sys.stderr = saved
        if outputs.truncated:
            outputs.items.append({"output_type": "stream", "name": "stdout",
                                  "text": f"\n[output truncated by the grader after {outputs.limit} characters]\n"})
        return outputs.items

    def load_probes(self, msg: dict) -> dict:
        """Phase 2: the probe code arrives only after every student cell ran and its
        output was collected. Modules are served from what the grader sent: its code objects
        compiled from the sources when this is the same Python (same bytecode magic), else the sources;
        the stubs (the reference) are empty modules: the reference never enters a sandbox."""
        import importlib
        import importlib.abc
        import importlib.machinery
        import importlib.util
        import marshal

        sources, stubs = dict(msg["modules"]), set(msg["stubs"])
        packages = {"grader_tests", *msg.get("packages", ())}
        same_python = msg.get("magic") == importlib.util.MAGIC_NUMBER.hex()
        compiled = msg.get("compiled") if same_python and isinstance(msg.get("compiled"), dict) else {}

        class GraderSources(importlib.abc.MetaPathFinder, importlib.abc.Loader):
            def find_spec(self, name, path=None, target=None):
                if name in packages or name in sources or name in stubs:
                    return importlib.machinery.ModuleSpec(name, self, is_package=name in packages,
                                                          origin=f"<grader:{name}>")
                return None

            def create_module(self, spec):
                return None

            def exec_module(self, module):
                if module.__name__ in packages:
                    module.__path__ = []
                elif module.__name__ in compiled:
                    exec(marshal.loads(base64.b64decode(compiled[module.__name__])), module.__dict__)
                elif module.__name__ in sources:
                    exec(compile(sources[module.__name__], f"<grader:{module.__name__}>", "exec"), module.__dict__)
                else:
                    module.__doc__ = "not available inside the sandbox"

        try:
            # Exactly the modules served here, whatever a cell left under those names. Not a scan of
            # sys.modules: walking its ~3,000 names writes to each one's page (reference counts), and
            # after the fork every such page is copied, in every sandbox. (Student code shares this
            # interpreter and could patch anything anyway; the verdicts are decided outside.)
            for name in (*packages, *sources, *stubs):
                sys.modules.pop(name, None)
            sys.meta_path.insert(0, GraderSources())
            self.probes = {}
            for name in msg["checks_modules"]:
                for check in importlib.import_module(name).CHECKS:
                    self.probes[check.id] = check.probe
            return {"ok": True}
        except BaseException as exc:  # noqa: BLE001
            return {"ok": False, "error": f"{type(exc).__name__}: {exc}"[:500]}

    def run_probe(self, check_id: str, request_blob: bytes) -> None:
        from .protocol import WIRE, send_frame, send_json

        sink = _Outputs(0)
        saved = sys.stdout, sys.stderr
        sys.stdout = sys.stderr = _Capture("stdout", sink)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                request = _WIRE.decode(request_blob)
                response = self.probes[check_id](self.namespace, request)
                blob = _WIRE.encode(response)
        except BaseException as exc:  # noqa: BLE001 - SystemExit from student code fails the check
            sys.stdout, sys.stderr = saved
            send_json(self.sock, {"op": "probe_error", "error": f"{type(exc).__name__}: {exc}"[:500]})
            return
        sys.stdout, sys.stderr = saved
        send_frame(self.sock, WIRE, blob)


# --------------------------------------------------------------------------- the zygote loop

def warm_up(first_uses: tuple[str, ...] = first_use.ALL) -> None:
    """Import what every sandbox needs once, before any fork: torch and the wire codec; pay the
    first-use costs named in ``first_uses`` (see ``first_use``; "figures" imports matplotlib)."""
    global _WIRE
    start_up_gc.pause()
    import torch

    torch.set_num_threads(1)
    # Agg renders the PNGs that _flush_figures sends back, and plt.show() must not warn that Agg
    # cannot show -- whether matplotlib is imported here or by a notebook.
    os.environ["MPLBACKEND"] = "Agg"
    warnings.filterwarnings("ignore", message=r".*(non-interactive|non-GUI backend).*", category=UserWarning)
    _first_use(first_uses)
    import grader_tests.wire as wire  # the codec only; no check, judge or reference

    _WIRE = wire
    assert "grader_tests.registry" not in sys.modules and not any(name.endswith(".reference") for name in sys.modules
                                                                  if name.startswith("grader_tests."))
    # Every object imported so far outlives every sandbox: out of the collector's reach, a sandbox's
    # garbage collection no longer writes to (and so copies) each of their pages after the fork.
    start_up_gc.resume()


def _first_use(first_uses: tuple[str, ...]) -> None:
    """Pay once, here, what every sandbox paid on its own the first time a notebook computed, trained
    or drew: seeding and printing a tensor, a forward and backward pass (always: a few ms), then each
    optional warm-up named in ``first_uses`` (``first_use``) not paid yet. A sandbox forked afterwards
    finds them loaded."""
    if not _PAID:
        _first_tensor_ops()
        _PAID.add("tensor ops")
    for name in first_uses:
        if name not in _PAID:
            FIRST_USES[name]()
            _PAID.add(name)


def _first_tensor_ops() -> None:
    """Nothing a notebook can observe changes (sandboxes have no GPU, so seeding touches the CPU
    generator only): torch's seed and generator state are restored to the worker's own."""
    import torch
    from torch import nn
    from torch.nn import functional as F

    with torch.random.fork_rng(devices=[]):
        model = nn.Sequential(nn.Embedding(8, 4), nn.Linear(4, 4), nn.LayerNorm(4), nn.Linear(4, 8))
        tokens = torch.randint(0, 8, (2, 3))
        logits = model(tokens)
        scores = (logits @ logits.transpose(-2, -1)) / math.sqrt(8)
        mask = torch.tril(torch.ones(3, 3, dtype=torch.bool))
        weights = scores.masked_fill(~mask, float("-inf")).softmax(dim=-1)
        (F.cross_entropy(logits.reshape(-1, 8), tokens.reshape(-1)) + weights.sum() * 0).backward()
        with torch.no_grad():
            F.scaled_dot_product_attention(scores[:, None], scores[:, None], scores[:, None], is_causal=True)
        # Nearly every notebook seeds torch and prints a tensor; their first calls set up torch's
        # dynamo-disabled wrapper and the tensor printer: a few milliseconds a sandbox when each pays it.
        torch.manual_seed(0)
        repr(weights.detach().round(decimals=2))


def _first_optimizer_steps() -> None:
    """A step of each common optimizer: the first imports ``torch._dynamo``, which is slow.
    Seed and generator state restored as in ``_first_tensor_ops``."""
    import torch
    from torch import nn

    with torch.random.fork_rng(devices=[]):
        model = nn.Linear(4, 2)
        for optimizer in (torch.optim.AdamW(model.parameters()), torch.optim.Adam(model.parameters()),
                          torch.optim.SGD(model.parameters(), lr=0.1)):
            model.zero_grad()
            model(torch.ones(3, 4)).square().mean().backward()
            optimizer.step()


def _first_figure() -> None:
    """matplotlib imported (slow; with its font cache read here, so no sandbox builds one) and a
    figure drawn and saved as a notebook's would be (fonts and the PNG writer load then); no figure
    stays open and no setting is touched. A worker that skips it leaves both to the sandboxes that draw."""
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, 2)
    axes[0].imshow([[0.0, 1.0], [1.0, 0.0]], cmap="viridis")
    figure.colorbar(axes[0].images[0], ax=axes[0])
    axes[1].loglog([1, 2, 4], [1, 4, 16], marker="o", label="T²")
    axes[1].set_xlabel("T")
    axes[1].set_title("warm-up")
    axes[1].legend()
    figure.savefig(io.BytesIO(), format="png", bbox_inches="tight")
    plt.close("all")


FIRST_USES = {"optimizers": _first_optimizer_steps, "figures": _first_figure}  # first_use.ALL, by name
_PAID: set[str] = set()  # what this process paid already (_first_use), inherited by whatever it forks


def send_reply(ctrl: socket.socket, message: dict, fds: list[int] = ()) -> None:
    """A framed JSON reply on the control socket, with file descriptors if any."""
    from .protocol import JSON, frame

    socket.send_fds(ctrl, [frame(JSON, json.dumps(message).encode())], list(fds))


def _exit_unreaped(pid: int):
    """``os.waitid``'s record of our child ``pid`` if it has exited, None while it runs; read without
    reaping it, so its pid stays ours (ZygoteServer.reap). ChildProcessError if it is not our child."""
    return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)


def _running(pid: int) -> bool:
    """Whether our child ``pid`` has not exited (a sandbox forked ahead may wait for hours; if
    something killed it meanwhile, the next request gets a fresh one instead of a dead one)."""
    try:
        return _exit_unreaped(pid) is None
    except ChildProcessError:
        return False


def _how_it_ended(pid: int, wait: float) -> dict | None:
    """``{"code": n}`` or ``{"signal": n}`` if our child ``pid`` has exited (waiting up to ``wait``
    seconds for that), else None."""
    if wait > 0:
        with contextlib.suppress(OSError):
            pidfd = os.pidfd_open(pid)
            try:
                select.select([pidfd], [], [], wait)  # readable once the process has exited
            finally:
                os.close(pidfd)
    try:
        info = _exit_unreaped(pid)
    except ChildProcessError:
        return None
    if info is None:
        return None
    return {"code": info.si_status} if info.si_code == os.CLD_EXITED else {"signal": info.si_status}


class _Refused(Exception):
    """Why no sandbox can be made now: the grader is told this sentence."""


class ZygoteServer:
    """Serves one grader's control connection: ``spawn`` a sandbox (limits clamped to
    ``caps``, everything else chosen here), ``kill`` one of ours. It only ever acts on
    sandboxes it forked itself.

    After each ``spawn`` it forks the next sandbox ahead of the next request, with the same
    limits: a new sandbox's first moments go to waiting, not computing (joining its cgroups waits
    for an RCU grace period of the kernel's cgroup lock), and that wait then
    passes while the grader uses the sandbox it has. The sandbox forked ahead is one like any
    other (its own uid, cgroups, namespaces and root; no student's data until a grader asks for
    it), handed out only on this connection, only for the same limits and only if still running,
    else killed.

    Sandboxes are killed by pid, as root. A sandbox's process is reaped only after that kill (until
    then an exited one is a zombie, which keeps its pid), so the pid killed is never another
    process's: SIGCHLD stays at its default, never a handler that reaps whatever exited."""

    MAX_LIVE = 64  # sandboxes at once per grader connection
    HUGE_PAGES_AFTER = 8  # sandboxes forked before the zygote's memory moves onto huge pages (huge_pages.py)
    EXIT_WAIT = 0.5  # seconds a sandbox whose socket closed gets to finish exiting (one that runs on is killed)

    def __init__(self, ctrl: socket.socket, groups: cgroups.Cgroups, caps: SandboxLimits, root: str):
        self.ctrl, self.groups, self.caps, self.root = ctrl, groups, caps, root
        self.live: dict[int, str] = {}  # pid of a sandbox's process -> its cgroup name
        self.dying: set[str] = set()  # cgroups killed, not yet removed
        self.unreaped: set[int] = set()  # sandbox processes killed, not yet reaped
        self.ahead: tuple[dict, int, dict, socket.socket] | None = None  # (limits, pid, spec, our end)
        self.count = 0
        self.pid = os.getpid()  # this zygote's: in its sandboxes' cgroup names, where its uid search starts
        self.uids = UidClaims()  # each sandbox's uid, held machine-wide until its processes are reaped
        self.claimed: dict[str, tuple[int, int]] = {}  # a forked sandbox's cgroup name -> (its uid, its pid)
        self.ended: set[str] = set()  # killed sandboxes whose cgroups are gone: their uids go once reaped
        self.huge_pages = HugePages()
        self.call_filter = syscall_filter.Filter()  # assembled once; each sandbox installs it
        # Where the zygote's children go back to after each sandbox's fork (_fork_into_new_pid_namespace).
        self.own_pid_namespace = os.open("/proc/self/ns/pid", os.O_RDONLY | os.O_CLOEXEC)

    def spec_for(self, limits: dict) -> dict:
        """The next sandbox's spec, its uid claimed (:mod:`.uids`); _Refused if none can be."""
        self.count += 1
        spec = dict(limits)
        try:  # the search starts at a different uid for each zygote, so claims rarely meet
            uid = self.uids.claim(UID_BASE + (self.pid * 7 + self.count) % UID_SPAN)
        except OSError as exc:
            raise _Refused(f"no uid for the sandbox: {exc.strerror or exc}") from None
        spec.update(
            uid=uid,
            cgroup=f"sbx-{self.pid}-{self.count}",
            ro_paths=visible_prefixes(),
            path=os.path.join(sys.prefix, "bin") + ":/usr/bin:/bin",
        )
        return spec

    def spawn(self, requested: dict) -> None:
        limits = asdict(clamp(requested if isinstance(requested, dict) else {}, self.caps))
        ahead, self.ahead = self.ahead, None
        if ahead is not None and (ahead[0] != limits or not _running(ahead[1])):
            self._discard(ahead)
            ahead = None
        if ahead is None and len(self.live) >= self.MAX_LIVE:
            send_reply(self.ctrl, {"op": "refused", "error": f"more than {self.MAX_LIVE} sandboxes at once"})
            return
        try:
            _, pid, spec, ours = ahead or self._fork(limits)
        except _Refused as refused:
            send_reply(self.ctrl, {"op": "refused", "error": str(refused)})
            return
        self.live[pid] = spec["cgroup"]
        send_reply(self.ctrl, {"op": "spawned", "pid": pid, "spec": spec, "forked_ahead": ahead is not None},
                   [ours.fileno()])
        ours.close()
        if len(self.live) < self.MAX_LIVE:
            try:
                self.ahead = self._fork(limits)
            except _Refused:
                pass  # the next spawn forks its own and says why it cannot

    def warm(self, names) -> None:
        """Pay the optional first uses (``first_use`` names) this connection's grader asked for that
        this worker has not paid, before its sandboxes: a broker pays for every connection only those
        its course needs (``--first-uses``), because each makes every sandbox forked after it dearer
        (a larger address space to copy and tear down), whether the notebooks use it or not.
        Replies ``warmed``, or ``refused`` with the reason."""
        if not isinstance(names, list) or not all(isinstance(name, str) for name in names):
            send_reply(self.ctrl, {"op": "refused", "error": "a warm-up request names a list of warm-ups"})
            return
        unknown = sorted(set(names) - set(FIRST_USES))
        if unknown:
            send_reply(self.ctrl, {"op": "refused", "error": f"unknown warm-up(s) {', '.join(unknown)[:200]}; "
                                                             f"known: {', '.join(first_use.ALL)}"})
            return
        if any(name not in _PAID for name in names) and self.ahead is not None:
            self._discard(self.ahead)  # forked before the warm-up: it would lack it
            self.ahead = None
        start_up_gc.pause()  # what the warm-up makes is frozen with the rest (see warm_up)
        try:
            _first_use(tuple(names))
        except Exception as exc:  # noqa: BLE001 - e.g. matplotlib missing: the grader is told, the worker lives
            send_reply(self.ctrl, {"op": "refused", "error": f"the warm-up failed: {type(exc).__name__}: {exc}"[:500]})
            return
        finally:
            start_up_gc.resume()
        send_reply(self.ctrl, {"op": "warmed", "first_uses": sorted(_PAID & set(FIRST_USES))})

    def _fork(self, limits: dict) -> tuple[dict, int, dict, socket.socket]:
        """Fork a sandbox with ``limits``: (limits, pid of its process, spec, our end of its socket)."""
        spec = self.spec_for(limits)
        try:
            self.groups.create(spec["cgroup"], spec["memory_mb"] << 20, spec["nproc"])
        except OSError as exc:
            self.uids.release(spec["uid"])
            raise _Refused(f"cannot create the sandbox's {self.groups.version} cgroup: {exc.strerror or exc}") from None
        ends = ()
        try:
            ends = parent_end, child_end = socket.socketpair()
            pid = self._fork_into_new_pid_namespace()
        except OSError as exc:
            for end in ends:
                end.close()
            self.groups.remove(spec["cgroup"])
            self.uids.release(spec["uid"])
            raise _Refused(f"cannot start a sandbox process: {exc.strerror or exc}") from None
        if pid == 0:
            code = 0
            try:
                self.ctrl.close()
                parent_end.close()
                os.dup2(child_end.fileno(), 3)
                child_end.close()
                os.closerange(4, 1 << 16)
                _sandbox_child(socket.socket(fileno=3), spec, self.root, self.groups, self.call_filter)
            except BaseException:  # noqa: BLE001
                code = 127
                try:
                    from .protocol import send_json as send

                    send(socket.socket(fileno=3), {"op": "setup_failed", "error": traceback.format_exc()[-2000:]})
                except BaseException:  # noqa: BLE001
                    pass
            os._exit(code)
        child_end.close()
        self.claimed[spec["cgroup"]] = (spec["uid"], pid)
        return limits, pid, spec, parent_end

    def _fork_into_new_pid_namespace(self) -> int:
        """``os.fork``, the child PID 1 of a PID namespace of its own. ``unshare(CLONE_NEWPID)`` moves
        only the children forked next, and only one namespace per process can be pending, so the
        zygote sets its own namespace back for its children (``setns``) right after the fork."""
        _unshare(CLONE_NEWPID)
        try:
            pid = os.fork()
        except BaseException:
            _setns(self.own_pid_namespace, CLONE_NEWPID)
            raise
        if pid:
            _setns(self.own_pid_namespace, CLONE_NEWPID)
        return pid

    def _discard(self, ahead: tuple[dict, int, dict, socket.socket]) -> None:
        """Kill a sandbox forked ahead that no one will use."""
        _, pid, spec, ours = ahead
        ours.close()
        self._kill_process(pid)
        self.groups.kill(spec["cgroup"])
        self.dying.add(spec["cgroup"])

    def _kill_process(self, pid: int) -> None:
        """SIGKILL our unreaped child ``pid`` (a sandbox's PID 1: its namespace dies with it)
        and reap it later: a zombie ignores the signal."""
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:  # not a child of ours any more: nothing to reap
            return
        self.unreaped.add(pid)

    def kill(self, pid, closed: bool = False, reply: bool = True) -> None:
        """Kill one of our sandboxes; tell the grader whether it ran out of memory and, if it had
        ended on its own, how (its exit code or signal: the grader's explanation of a death comes
        from here, never from the sandbox) -- unless it asked for no ``reply`` (a sandbox it is done
        with). ``closed``: the grader saw the sandbox's socket close, so its process is exiting --
        give it a moment to finish before looking."""
        name = self.live.pop(pid, None) if isinstance(pid, int) else None
        if name is None:
            if reply:
                send_reply(self.ctrl, {"op": "killed", "known": False})
            return
        ended = _how_it_ended(pid, wait=self.EXIT_WAIT if closed else 0.0) if reply else None
        self._kill_process(pid)
        self.groups.kill(name)
        exceeded = self.groups.memory_exceeded(name) if reply else None  # read before the cgroup goes
        self.dying.add(name)
        self.reap()
        if reply:
            answer = {"op": "killed", "known": True, "memory_exceeded": exceeded}
            if ended is not None:
                answer["ended"] = ended
            send_reply(self.ctrl, answer)

    def reap(self) -> None:
        """Reap killed processes that have exited; remove the cgroups of killed sandboxes whose
        processes are gone."""
        for pid in list(self.unreaped):
            try:
                done = os.waitpid(pid, os.WNOHANG)[0] == pid
            except ChildProcessError:
                done = True
            if done:
                self.unreaped.discard(pid)
        for name in list(self.dying):
            self.groups.kill(name)
            if self.groups.remove(name):
                self.dying.discard(name)
                self.ended.add(name)
        for name in list(self.ended):  # a zombie still counts against its uid's allowances
            uid, pid = self.claimed.get(name, (None, None))
            if pid not in self.unreaped:
                self.ended.discard(name)
                self.claimed.pop(name, None)
                self.uids.release(uid)

    def close(self) -> None:
        if self.ahead is not None:
            self._discard(self.ahead)
            self.ahead = None
        for pid in list(self.live):
            name = self.live.pop(pid)
            self._kill_process(pid)
            self.groups.kill(name)
            self.dying.add(name)
        for _ in range(200):
            self.reap()
            if not self.dying and not self.unreaped and not self.ended:
                break
            time.sleep(0.01)
        os.close(self.own_pid_namespace)

    def serve(self) -> None:
        from .protocol import FrameError, recv_frame

        try:
            while True:
                collapsing = self.count >= self.HUGE_PAGES_AFTER and not self.huge_pages.done
                waiting = self.dying or self.unreaped
                ready, _, _ = select.select([self.ctrl], [], [], 0 if collapsing else 0.02 if waiting else None)
                self.reap()
                if not ready:
                    if collapsing:  # a chunk at a time, between requests
                        self.huge_pages.step()
                    continue
                try:
                    _, msg = recv_frame(self.ctrl, max_bytes=1 << 16)
                except (FrameError, OSError):
                    break  # the grader went away: its sandboxes go with it
                if not isinstance(msg, dict):
                    continue
                if msg.get("op") == "spawn":
                    self.spawn(msg.get("limits"))
                elif msg.get("op") == "warm":
                    self.warm(msg.get("first_uses"))
                elif msg.get("op") == "kill":
                    self.kill(msg.get("pid"), closed=msg.get("closed") is True, reply=msg.get("reply") is not False)
        finally:
            self.close()


def visible_prefixes() -> list[str]:
    """The Python installations every sandbox sees, read-only, besides SYSTEM_PATHS."""
    return sorted({sys.prefix, sys.base_prefix} - {"/usr"})


def hidden_checks_problem() -> str | None:
    """Why grading must not start if the hidden checks would be readable inside every
    sandbox (e.g. installed into the interpreter's site-packages under /usr), else None."""
    import importlib.util

    spec = importlib.util.find_spec("grader_tests")
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = os.path.realpath(list(spec.submodule_search_locations)[0])
    for visible in (*SYSTEM_PATHS, *visible_prefixes()):
        if folder == visible or folder.startswith(os.path.realpath(visible).rstrip("/") + "/"):
            return (f"the hidden checks ({folder}) lie inside {visible}, which every sandbox can read: "
                    "install grader_tests outside the Python installation the sandbox sees")
    return None


def sandbox_root_dir() -> str:
    root = tempfile.mkdtemp(prefix="attention-sandbox-root-")
    os.chmod(root, 0o755)
    return root


def limit_groups() -> tuple[cgroups.Cgroups | None, str | None]:
    """(cgroups, None), or (None, why the sandbox's memory/pids limits cannot be applied)."""
    try:  # ATTENTION_CGROUP_ROOT: another cgroup mount, for tests of the refusal
        from attention_platform.settings import settings

        groups = cgroups.setup(str(settings().attention_cgroup_root))
    except cgroups.CgroupUnavailable as exc:
        return None, f"the grading sandbox cannot limit memory and processes: {exc}"
    except OSError as exc:
        return None, f"the grading sandbox cannot read this machine's cgroups: {exc}"
    groups.remove_stale(keep=lambda name: _zygote_alive(name))
    return groups, None


def _zygote_alive(name: str) -> bool:
    parts = name.split("-")
    return len(parts) == 3 and parts[0] == "sbx" and parts[1].isdigit() and os.path.exists(f"/proc/{parts[1]}")


def main(argv: list[str]) -> int:
    """A zygote for the grader process that started it (as root), on the control socket FD."""
    ctrl = socket.socket(fileno=int(argv[1]))  # the zygote exits when the grader closes this
    warm_up(first_use.parse(argv[2]) if len(argv) > 2 else first_use.ALL)
    groups, problem = limit_groups()
    problem = problem or hidden_checks_problem() or syscall_filter.unsupported()
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # never ignored (auto-reaped): see ZygoteServer
    try:
        if problem:
            send_reply(ctrl, {"op": "unavailable", "error": problem})
            return 1
        send_reply(ctrl, {"op": "ready", "pid": os.getpid(), "limits": groups.version})
    except OSError:  # the grader went away while we imported torch
        return 0
    root = sandbox_root_dir()
    ZygoteServer(ctrl, groups, BROKER_CAPS, root).serve()
    try:
        os.rmdir(root)
    except OSError:
        pass
    return 0


if __name__ == "__main__":
    status = main(sys.argv)
    sys.stdout.flush()
    sys.stderr.flush()
    # Every sandbox is gone and nothing is left to write: skip the interpreter's teardown of torch
    # (slow for torch's many objects, and the grader waits for it when it closes the zygote at its exit).
    os._exit(status)
