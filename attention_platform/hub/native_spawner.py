"""The native hub's spawner (as root): each user's server as their own Unix account, in cgroups of its own.

Docker and Kubernetes give a student's server a container with a memory cap (``STUDENT_MEM_LIMIT``)
whose processes all end with it. Natively, ``LocalProcessSpawner`` does neither: a kernel that
allocates without bound meets the machine's OOM killer, which may pick another student's kernel or
the hub, and a process that left the server's session (``nohup … &``, ``setsid``) outlives the
server and the hub. Here every server starts in ``attention-servers/server-<user>`` (memory and pids
cgroups, the sandboxes' code in attention_platform/grading/sandbox/cgroups.py with another folder):

* the memory cap is the spawner's ``mem_limit``, so a runaway kernel is killed inside its own cgroup
  (JupyterLab says the kernel died) and nobody else's process is touched;
* ``pids_limit`` caps its processes and threads (a fork bomb stays in its own cgroup);
* stopping the server kills whatever is left in the cgroup, detached processes included, and a
  server that starts finds its cgroup empty (whatever an earlier server left, e.g. one that died on
  its own, is killed first);
* its ``/dev/shm`` is a tmpfs of its own (``shm_size``, as a container's), in a mount namespace of its
  own: what it puts there is not seen by other users and goes when its last process does (the
  machine's /dev/shm would keep it, in memory, after the server stopped).

Without usable cgroups (a read-only hierarchy, no memory controller) servers start without them,
as before, and the hub logs why once.
"""

from __future__ import annotations

import asyncio
import hashlib
import os

from jupyterhub.spawner import LocalProcessSpawner, set_user_setuid
from jupyterhub.traitlets import ByteSpecification
from traitlets import Integer, Unicode

from attention_platform.grading.sandbox import cgroups, linux

PARENT = "attention-servers"  # beside the sandboxes' attention-sandbox, in the hub's own cgroup
UNLIMITED_MEMORY = 1 << 62  # what "no mem_limit" is written as

_GROUPS: dict[str, cgroups.Cgroups | None] = {}  # set up once per hub process (None: unavailable)


def server_cgroups(log) -> cgroups.Cgroups | None:
    """The cgroups users' servers go in, set up on first use; None (logged once) if unavailable."""
    if "groups" not in _GROUPS:
        try:
            _GROUPS["groups"] = cgroups.setup(os.environ.get("ATTENTION_CGROUP_ROOT", cgroups.CGROUP_ROOT),
                                              parent=PARENT)
        except cgroups.CgroupUnavailable as exc:
            log.warning("users' servers start without a memory cap or cgroup of their own: %s", exc)
            _GROUPS["groups"] = None
    return _GROUPS["groups"]


def cgroup_name(username: str, server_name: str = "") -> str:
    """``server-<user>`` for a user's default server; a named server (if a deployment allows them) gets
    its own, so that starting one never empties another's (``+`` is in no user name: accounts.py)."""
    if not server_name:
        return f"server-{username}"
    return f"server-{username}+{hashlib.sha256(server_name.encode()).hexdigest()[:12]}"


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
        shm_size = int(self.shm_size or 0)

        def preexec():  # in the server's process, as root, before it becomes the user
            if groups is not None:
                groups.join(cgroup, os.getpid())
            if shm_size:
                linux.unshare(linux.CLONE_NEWNS)
                linux.mount(None, "/", None, linux.MS_REC | linux.MS_PRIVATE)  # nothing propagates back out
                linux.mount("tmpfs", "/dev/shm", "tmpfs", linux.MS_NOSUID | linux.MS_NODEV | linux.MS_NOEXEC,
                            f"size={shm_size},mode=1777")
            drop_privileges()
            os.chdir(home)

        return preexec

    async def start(self):
        groups = server_cgroups(self.log)
        if groups is not None:
            name = cgroup_name(self.user.name, self.name)
            await self._empty(groups, name)
            groups.create(name, int(self.mem_limit or UNLIMITED_MEMORY), self.pids_limit)
        return await super().start()

    async def stop(self, now=False):
        await super().stop(now=now)
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
