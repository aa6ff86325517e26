"""Memory and process limits for sandboxes (and natively for users' servers), through cgroup v1 or v2.

The zygote calls :func:`setup` once, as root. It returns a ``Cgroups`` object for
the hierarchy this machine (or container) offers, or raises
:class:`CgroupUnavailable` with one sentence saying what is missing: the grader
then refuses to grade rather than run student code without limits.

* **v1** (``/sys/fs/cgroup/{memory,pids}``): a folder ``attention-sandbox/<name>``
  under this process's own cgroup of each controller.
* **v2** (``/sys/fs/cgroup`` is a cgroup2 mount): a *delegated subtree*. A non-root
  cgroup may not both hold processes and hand controllers to its children, so the
  processes of our cgroup first move into a leaf (``attention-init``), then
  ``memory`` and ``pids`` are enabled for ``attention-sandbox/<name>``. At the real
  root of the hierarchy (a host without cgroup namespaces) nothing is moved.

Users' servers on the native hub use the same code with another folder (``parent``):
``attention-servers-<hub>/server-<user>`` (attention_platform/hub/native_spawner.py).
"""

from __future__ import annotations

import errno
import hashlib
import os
import signal
import time

CGROUP_ROOT = "/sys/fs/cgroup"
PARENT = "attention-sandbox"  # every sandbox cgroup sits in a folder of this name (the default parent)
INIT_LEAF = "attention-init"  # v2: where the processes of our own cgroup move


class CgroupUnavailable(Exception):
    """Neither cgroup v1 nor v2 limits can be applied here; the message says why."""


def _write(path: str, value: str) -> None:
    with open(path, "w") as f:
        f.write(value)


def _read(path: str) -> str:
    with open(path) as f:
        return f.read()


def own_cgroups(proc_file: str = "/proc/self/cgroup") -> dict[str, str]:
    """``{controller or "": path}`` of this process ("" is the cgroup v2 entry)."""
    found: dict[str, str] = {}
    for line in _read(proc_file).splitlines():
        _, controllers, path = line.split(":", 2)
        for name in controllers.split(",") if controllers else [""]:
            found[name] = path
    return found


def _own_dir(mount: str, path: str) -> str:
    """Our cgroup folder under ``mount``. Inside a container without a cgroup
    namespace /proc shows the host's path while the mount *is* our cgroup."""
    candidate = os.path.join(mount, path.lstrip("/"))
    return candidate if os.path.isdir(candidate) else mount


def _kill_procs(folder: str) -> bool:
    """SIGKILL every process in ``folder``; True if any was found.

    The pids are read first and signalled after, and a pid read may meanwhile have exited, been
    reaped (a sandbox's own init reaps its children) and been given to another process: so each is
    pinned with a pidfd, checked to be in this cgroup still, and signalled through that pidfd."""
    try:
        pids = _read(os.path.join(folder, "cgroup.procs")).split()
    except OSError:
        return False
    tail = "/" + "/".join(os.path.normpath(folder).split(os.sep)[-2:])  # <parent>/<name>
    for pid in pids:
        try:
            pinned = os.pidfd_open(int(pid))
        except (ProcessLookupError, ValueError):
            continue
        try:
            if any(line.rstrip("\n").endswith(tail) for line in _read(f"/proc/{pid}/cgroup").splitlines()):
                signal.pidfd_send_signal(pinned, signal.SIGKILL)
        except (ProcessLookupError, FileNotFoundError):
            pass
        finally:
            os.close(pinned)
    return bool(pids)


class Cgroups:
    """One sandbox cgroup per name, in every folder of ``bases``."""

    version = ""

    def __init__(self, bases: dict[str, str], parent: str = PARENT):
        self.bases = bases  # controller (or "unified") -> the folder holding ``parent``
        self.parent = parent

    def dirs(self, name: str) -> list[str]:
        return [os.path.join(base, self.parent, name) for base in self.bases.values()]

    def create(self, name: str, memory_bytes: int, pids_max: int) -> None:
        raise NotImplementedError

    def join(self, name: str, pid: int) -> None:
        for folder in self.dirs(name):
            _write(os.path.join(folder, "cgroup.procs"), str(pid))

    def kill(self, name: str) -> bool:
        """Kill everything in the sandbox's cgroups; True while something was still there."""
        busy = False
        for folder in self.dirs(name):
            busy = _kill_procs(folder) or busy
        return busy

    def memory_exceeded(self, name: str) -> bool:
        raise NotImplementedError

    def remove(self, name: str) -> bool:
        """Remove the sandbox's folders; False if one is still busy (retry later)."""
        done = True
        for folder in self.dirs(name):
            try:
                os.rmdir(folder)
            except FileNotFoundError:
                pass
            except OSError:
                done = False
        return done

    def remove_stale(self, keep=lambda name: False) -> None:
        """Remove sandbox cgroups left behind by a zygote that died (``keep``: still in use)."""
        for base in self.bases.values():
            parent = os.path.join(base, self.parent)
            for name in os.listdir(parent) if os.path.isdir(parent) else ():
                if not keep(name):
                    _kill_procs(os.path.join(parent, name))
                    try:
                        os.rmdir(os.path.join(parent, name))
                    except OSError:
                        pass

    def _check_writable(self) -> None:
        """Create and remove one probe cgroup, so a read-only or foreign hierarchy
        is found at start-up, not at the first student."""
        probe = f"probe-{os.getpid()}"
        try:
            self.create(probe, 64 << 20, 8)
        except OSError as exc:
            raise CgroupUnavailable(f"cannot create a {self.version} cgroup under "
                                    f"{', '.join(self.bases.values())}: {exc.strerror}") from None
        finally:
            self.remove(probe)


class CgroupsV1(Cgroups):
    version = "cgroup v1"

    def create(self, name: str, memory_bytes: int, pids_max: int) -> None:
        for controller, base in self.bases.items():
            folder = os.path.join(base, self.parent, name)
            os.makedirs(folder, exist_ok=True)
            if controller == "pids":
                _write(os.path.join(folder, "pids.max"), str(pids_max))
            else:
                _write(os.path.join(folder, "memory.limit_in_bytes"), str(memory_bytes))
                try:  # swap counted too where the kernel accounts it
                    _write(os.path.join(folder, "memory.memsw.limit_in_bytes"), str(memory_bytes))
                except OSError:
                    pass

    def memory_exceeded(self, name: str) -> bool:
        folder = os.path.join(self.bases["memory"], self.parent, name)
        try:
            control = dict(line.split() for line in _read(os.path.join(folder, "memory.oom_control")).splitlines()
                           if line.strip())
            return int(control.get("oom_kill", 0)) > 0 or int(_read(os.path.join(folder, "memory.failcnt"))) > 0
        except (OSError, ValueError):
            return False


class CgroupsV2(Cgroups):
    version = "cgroup v2"

    def create(self, name: str, memory_bytes: int, pids_max: int) -> None:
        folder = os.path.join(self.bases["unified"], self.parent, name)
        os.makedirs(folder, exist_ok=True)
        _write(os.path.join(folder, "memory.max"), str(memory_bytes))
        if os.path.exists(os.path.join(folder, "memory.swap.max")):
            _write(os.path.join(folder, "memory.swap.max"), "0")
        _write(os.path.join(folder, "pids.max"), str(pids_max))

    def kill(self, name: str) -> bool:
        folder = os.path.join(self.bases["unified"], self.parent, name)
        try:  # kernel >= 5.14: one write kills the whole tree, forks in flight included
            _write(os.path.join(folder, "cgroup.kill"), "1")
        except OSError:
            pass
        return _kill_procs(folder)

    def memory_exceeded(self, name: str) -> bool:
        folder = os.path.join(self.bases["unified"], self.parent, name)
        try:
            events = dict(line.split() for line in _read(os.path.join(folder, "memory.events")).splitlines()
                          if line.strip())
            return int(events.get("oom_kill", 0)) > 0 or int(events.get("max", 0)) > 0
        except (OSError, ValueError):
            return False


def _setup_v1(root: str, mine: dict[str, str], parent: str) -> Cgroups:
    bases = {}
    for controller in ("pids", "memory"):
        mount = os.path.join(root, controller)
        if not os.path.isdir(mount) or controller not in mine:
            raise CgroupUnavailable(f"cgroup v1 has no {controller} controller mounted at {mount}")
        bases[controller] = _own_dir(mount, mine[controller])
        try:
            os.makedirs(os.path.join(bases[controller], parent), exist_ok=True)
        except OSError as exc:
            raise CgroupUnavailable(f"cannot create {os.path.join(bases[controller], parent)} "
                                    f"(cgroup v1 {controller}): {exc.strerror}") from None
    groups = CgroupsV1(bases, parent)
    groups._check_writable()
    return groups


def _enable(folder: str, controllers: tuple[str, ...]) -> None:
    _write(os.path.join(folder, "cgroup.subtree_control"), " ".join("+" + c for c in controllers))


def _setup_v2(root: str, mine: dict[str, str], parent: str) -> Cgroups:
    needed = ("memory", "pids")
    base = _own_dir(root, mine.get("", "/"))
    available = _read(os.path.join(base, "cgroup.controllers")).split()
    missing = [c for c in needed if c not in available]
    if missing:
        raise CgroupUnavailable(f"cgroup v2 at {base} does not delegate the {' and '.join(missing)} "
                                f"controller{'s' if len(missing) > 1 else ''} (cgroup.controllers: "
                                f"{' '.join(available) or 'empty'})")
    try:
        if os.path.exists(os.path.join(base, "cgroup.type")):  # not the real root: no internal processes
            leaf = os.path.join(base, INIT_LEAF)
            os.makedirs(leaf, exist_ok=True)
            for _ in range(50):  # processes may fork while we move them
                pids = _read(os.path.join(base, "cgroup.procs")).split()
                if not pids:
                    break
                for pid in pids:
                    try:
                        _write(os.path.join(leaf, "cgroup.procs"), pid)
                    except OSError as exc:
                        if exc.errno != errno.ESRCH:
                            raise
                time.sleep(0.01)
        _enable(base, needed)
        os.makedirs(os.path.join(base, parent), exist_ok=True)
        _enable(os.path.join(base, parent), needed)
    except OSError as exc:
        raise CgroupUnavailable(f"cannot delegate memory and pids under {base} (cgroup v2): "
                                f"{exc.strerror or exc}") from None
    groups = CgroupsV2({"unified": base}, parent)
    groups._check_writable()
    return groups


def locate(root: str = CGROUP_ROOT, proc_file: str = "/proc/self/cgroup", parent: str = PARENT) -> Cgroups:
    """Where this process's sandboxes' cgroups are, without creating or changing anything
    (for tests and diagnostics; the zygote uses :func:`setup`)."""
    mine = own_cgroups(proc_file)
    if os.path.exists(os.path.join(root, "cgroup.controllers")):
        return CgroupsV2({"unified": _own_dir(root, mine.get("", "/"))}, parent)
    return CgroupsV1({c: _own_dir(os.path.join(root, c), mine.get(c, "/")) for c in ("pids", "memory")}, parent)


def of_hub(parent: str, state_dir: str | os.PathLike) -> str:
    """``<parent>-<hub>``: a folder of one hub alone, named after its state directory. Hubs started from
    one cgroup (two courses on a machine, a demo beside the tests) share the Unix accounts and the
    services' names; in one folder a server that starts would kill the same user's server on another
    hub, and the hubs' graders would share one memory cap."""
    state = os.path.realpath(state_dir)
    return f"{parent}-{hashlib.sha256(state.encode()).hexdigest()[:10]}"


def setup(root: str = CGROUP_ROOT, proc_file: str = "/proc/self/cgroup", parent: str = PARENT) -> Cgroups:
    """The cgroup hierarchy sandboxes (or, with another ``parent``, servers) get their limits from,
    ready to use, or :class:`CgroupUnavailable` saying why neither v1 nor v2 can be used."""
    mine = own_cgroups(proc_file)
    if os.path.exists(os.path.join(root, "cgroup.controllers")):
        return _setup_v2(root, mine, parent)
    try:
        return _setup_v1(root, mine, parent)
    except CgroupUnavailable as v1_error:
        unified = os.path.join(root, "unified")  # hybrid hosts mount cgroup2 here
        if os.path.exists(os.path.join(unified, "cgroup.controllers")):
            try:
                return _setup_v2(unified, mine, parent)
            except CgroupUnavailable as v2_error:
                raise CgroupUnavailable(f"{v1_error}; and {v2_error}") from None
        raise
