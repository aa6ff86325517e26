"""The native hub's spawner (as root): each user's server as their own Unix account, in cgroups of its own.

Docker and Kubernetes give a student's server a container with a memory cap (``STUDENT_MEM_LIMIT``)
whose processes all end with it. Natively, ``LocalProcessSpawner`` does neither: a kernel that
allocates without bound meets the machine's OOM killer, which may pick another student's kernel or
the hub, and a process that left the server's session (``nohup … &``, ``setsid``) outlives the
server and the hub. Here every server starts in ``attention-servers-<hub>/server-<user>`` (memory and pids
cgroups, the sandboxes' code in attention_platform/grading/sandbox/cgroups.py with another folder):

* the memory cap is the spawner's ``mem_limit``, so a runaway kernel is killed inside its own cgroup
  (JupyterLab says the kernel died) and nobody else's process is touched;
* ``pids_limit`` caps its processes and threads (a fork bomb stays in its own cgroup);
* stopping the server kills whatever is left in the cgroup, detached processes included, and a
  server that starts finds its cgroup empty (whatever an earlier server left, e.g. one that died on
  its own, is killed first);
* its ``/dev/shm`` is a tmpfs of its own (``shm_size``, as a container's), in a mount namespace of its
  own: what it puts there is not seen by other users and goes when its last process does (the
  machine's /dev/shm would keep it, in memory, after the server stopped);
* so is its ``/tmp`` (``tmp_size``): on the machine's, shared by every account, a file a student's
  code writes is readable by the others unless the code asks otherwise, another student can put a
  file of theirs in its way beforehand, and it stays after the server stops. What the server needs
  under the machine's /tmp (``tmp_keep``: a checkout there, the hub's state) is bound back in.

Without usable cgroups (a read-only hierarchy, no memory controller) servers start without them,
as before, and the hub logs why once.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import stat

from jupyterhub.spawner import LocalProcessSpawner, set_user_setuid
from jupyterhub.traitlets import ByteSpecification
from traitlets import Integer, List, Unicode

from attention_platform.grading.sandbox import cgroups, linux
from attention_platform.settings import settings

PARENT = "attention-servers"  # beside the sandboxes' attention-sandbox, in the hub's own cgroup
UNLIMITED_MEMORY = 1 << 62  # what "no mem_limit" is written as

_GROUPS: dict[str, cgroups.Cgroups | None] = {}  # set up once per hub process (None: unavailable)


def server_cgroups(log) -> cgroups.Cgroups | None:
    """The cgroups users' servers go in, set up on first use; None (logged once) if unavailable."""
    if "groups" not in _GROUPS:
        try:
            _GROUPS["groups"] = cgroups.setup(str(settings().attention_cgroup_root),
                                              parent=server_parent())
        except cgroups.CgroupUnavailable as exc:
            log.warning("users' servers start without a memory cap or cgroup of their own: %s", exc)
            _GROUPS["groups"] = None
    return _GROUPS["groups"]


def server_parent(state_dir: str | os.PathLike | None = None) -> str:
    """``attention-servers-<hub>``: this hub's servers' folder (cgroups.of_hub says why one per hub)."""
    return cgroups.of_hub(PARENT, state_dir if state_dir is not None else settings().hub_state_dir)


def cgroup_name(username: str, server_name: str = "") -> str:
    """``server-<user>`` for a user's default server; a named server (if a deployment allows them) gets
    its own, so that starting one never empties another's (``+`` is in no user name: accounts.py)."""
    if not server_name:
        return f"server-{username}"
    return f"server-{username}+{hashlib.sha256(server_name.encode()).hexdigest()[:12]}"


def kept_under_tmp(paths, tmp: str = "/tmp") -> list[str]:
    """Of ``paths`` (absolute, as the server uses them), those under ``tmp``, each once and none
    inside another, outermost first: what a server's own /tmp must show as the machine's does."""
    kept: list[str] = []
    for path in sorted({os.path.normpath(p) for p in paths if p}, key=len):
        inside = os.path.commonpath([path, tmp]) == tmp and path != tmp
        if inside and not any(os.path.commonpath([path, outer]) == outer for outer in kept):
            kept.append(path)
    return kept


class TmpKeepRefused(PermissionError):
    """A path in ``tmp_keep`` that root will not bind into a server's /tmp; the message says why."""


def _walk(machine_tmp: int, path: str, tmp: str = "/tmp"):
    """Yield (the path in the server's /tmp, an O_PATH fd of the machine's, its stat) for each
    component of ``path`` below ``tmp``, outermost first, never following a link: any account can
    create entries in the machine's /tmp, so each one on the way must be root's (and no link), or
    the walk refuses. Nothing at all (the path is missing): nothing is yielded."""
    parts = os.path.relpath(path, tmp).split(os.sep)
    fds = [machine_tmp]
    try:
        for depth, part in enumerate(parts):
            try:
                fds.append(os.open(part, os.O_PATH | os.O_NOFOLLOW, dir_fd=fds[-1]))
            except FileNotFoundError:
                return
            info = os.fstat(fds[-1])
            here = os.path.join(tmp, *parts[:depth + 1])
            if stat.S_ISLNK(info.st_mode) or info.st_uid != 0:
                raise TmpKeepRefused(f"{here}, which a server needs (tmp_keep), is a link or not root's, and a "
                                     "user could have put it there: move it out of /tmp or set STUDENT_TMP_SIZE=0")
            yield here, fds[-1], info
    finally:
        for fd in fds[1:]:
            os.close(fd)


def check_tmp_keep(kept: list[str]) -> None:
    """Raise :class:`TmpKeepRefused` (in the hub, where its message reaches the log) for a path the
    server's start would refuse to bind."""
    machine_tmp = os.open("/tmp", os.O_PATH | os.O_DIRECTORY)
    try:
        for path in kept:
            for _ in _walk(machine_tmp, path):
                pass
    finally:
        os.close(machine_tmp)


def private_tmp(size: int, kept: list[str]) -> None:
    """In the caller's own mount namespace (as root, before the server starts): a tmpfs of ``size``
    bytes on /tmp, and each of ``kept`` bound back from the machine's /tmp at the same place, the
    folders above it made with the machine's owner and mode."""
    machine_tmp = os.open("/tmp", os.O_PATH | os.O_DIRECTORY)
    try:
        linux.mount("tmpfs", "/tmp", "tmpfs", linux.MS_NOSUID | linux.MS_NODEV, f"size={size},mode=1777")
        for path in kept:
            for here, fd, info in _walk(machine_tmp, path):
                if here == path:
                    if stat.S_ISDIR(info.st_mode):
                        os.mkdir(here, 0o700)
                    else:
                        os.close(os.open(here, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
                    linux.mount(f"/proc/self/fd/{fd}", here, None, linux.MS_BIND | linux.MS_REC)
                elif not os.path.isdir(here):  # made for an earlier path already
                    os.mkdir(here, 0o700)
                    os.chown(here, info.st_uid, info.st_gid)
                    os.chmod(here, stat.S_IMODE(info.st_mode))
    finally:
        os.close(machine_tmp)


# Ports given to servers of this hub (one process) that have not stopped since.
_HANDED_OUT: set[int] = set()


def unclaimed_port(handed_out: set[int] = _HANDED_OUT, draw=None, tries: int = 100) -> int:
    """A port the kernel calls free now that no server of this hub was given before it stopped. The kernel
    may tell two spawns of one moment the same free port, before either server binds it: the second
    server then cannot start, and the hub, finding the first one answering there, sends its user to
    someone else's server."""
    from jupyterhub.utils import random_port

    for _ in range(tries):
        port = (draw or random_port)()
        if port not in handed_out:
            handed_out.add(port)
            return port
    raise RuntimeError(f"no port free for a server after {tries} tries")


class CourseLocalSpawner(LocalProcessSpawner):
    """A real Unix user's server, its home ``<homes_dir>/<user>`` whatever /etc/passwd says (several
    state directories, tests and demos, share the accounts), in cgroups of its own, with its own
    /dev/shm."""

    homes_dir = Unicode(
        help="Folder holding each user's home (<homes_dir>/<user>), set as $HOME and the server's "
             "working directory.",
    ).tag(config=True)
    pids_limit = Integer(
        1024,
        help="Most processes and threads a user's server may have at once, kernels and terminals included "
             "(pids cgroup). A server with no kernel running has about 7; each kernel adds its own.",
    ).tag(config=True)
    shm_size = ByteSpecification(
        "256M",
        help="Size of the server's own /dev/shm (a tmpfs in its own mount namespace; its pages count "
             "against mem_limit). 0: the machine's /dev/shm, shared with every user.",
    ).tag(config=True)
    tmp_size = ByteSpecification(
        "512M",
        help="Size of the server's own /tmp (a tmpfs in its own mount namespace, emptied when the server "
             "stops; its pages count against mem_limit). 0: the machine's /tmp, shared with every user.",
    ).tag(config=True)
    tmp_keep = List(
        Unicode(),
        help="Paths the server needs that may lie under the machine's /tmp (its Python, the checkout, the "
             "hub's state, the exchange): bound into its own /tmp at the same place. Paths elsewhere need "
             "nothing. Each one and the folders above it must be root's.",
    ).tag(config=True)

    def _home(self, name: str) -> str:
        return os.path.join(self.homes_dir, name)

    def user_env(self, env):
        env = super().user_env(env)
        env["HOME"] = self._home(self.user.name)
        return env

    def make_preexec_fn(self, name):
        drop_privileges = set_user_setuid(name, chdir=False)  # it would chdir to the passwd home
        home = self._home(name)
        groups = server_cgroups(self.log)
        cgroup = cgroup_name(name, self.name)
        shm_size, tmp_size = int(self.shm_size or 0), int(self.tmp_size or 0)
        kept = kept_under_tmp(self.tmp_keep)
        if tmp_size:
            check_tmp_keep(kept)  # the preexec checks again; its own error would reach no one

        def preexec():  # in the server's process, as root, before it becomes the user
            if groups is not None:
                groups.join(cgroup, os.getpid())
            if shm_size or tmp_size:
                linux.unshare(linux.CLONE_NEWNS)
                linux.mount(None, "/", None, linux.MS_REC | linux.MS_PRIVATE)  # nothing propagates back out
            if shm_size:
                linux.mount("tmpfs", "/dev/shm", "tmpfs", linux.MS_NOSUID | linux.MS_NODEV | linux.MS_NOEXEC,
                            f"size={shm_size},mode=1777")
            if tmp_size:
                private_tmp(tmp_size, kept)
            drop_privileges()
            os.chdir(home)

        return preexec

    handed_out_port = 0  # the port unclaimed_port gave this server, until it stops

    async def start(self):
        groups = server_cgroups(self.log)
        if groups is not None:
            name = cgroup_name(self.user.name, self.name)
            await self._empty(groups, name)
            groups.create(name, int(self.mem_limit or UNLIMITED_MEMORY), self.pids_limit)
        if self.port == 0:  # else the port was configured: LocalProcessSpawner would draw one as below
            self.port = self.handed_out_port = unclaimed_port()
        try:
            return await super().start()
        except BaseException:
            self._release_port()
            raise

    def _release_port(self) -> None:
        _HANDED_OUT.discard(self.handed_out_port)
        self.handed_out_port = 0

    async def stop(self, now=False):
        try:
            await super().stop(now=now)
        finally:
            self._release_port()
        groups = server_cgroups(self.log)
        if groups is not None:
            await self._empty(groups, cgroup_name(self.user.name, self.name))

    async def _empty(self, groups: cgroups.Cgroups, name: str, wait: float = 5.0) -> None:
        """Kill every process left in the server's cgroup and remove it (retried while they exit)."""
        for _ in range(int(wait / 0.05)):
            groups.kill(name)
            if groups.remove(name):
                return
            await asyncio.sleep(0.05)
        self.log.warning("the cgroup %s of %s's server is still busy after %g s", name, self.user.name, wait)
