"""A sandbox's uid is its own on the machine while any process of it lives.

A uid is more than who owns a file: the kernel counts processes and threads (``RLIMIT_NPROC``),
pending signals and inotify instances per uid, machine-wide. Two sandboxes under one uid would share
those allowances, and one student's fork bomb would leave another student's sandbox unable to start
a thread. Every zygote on the machine (one per grader connection of each broker, and root's own)
claims the uid of each sandbox it forks with an exclusive ``flock`` on a file of root's folder
:data:`CLAIMS`, and holds it until that sandbox's processes are gone and reaped. A zygote that dies
drops its locks with it, and its sandboxes die with it (``PR_SET_PDEATHSIG``, the cgroup kill).
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat

from .limits import UID_BASE, UID_SPAN

CLAIMS = "/run/attention-sandbox-uids"  # root's alone: every zygote of the machine looks here


class UidClaims:
    """The uids one zygote holds, each by an open, locked file named after it in ``folder``."""

    def __init__(self, folder: str = CLAIMS):
        self.held: dict[int, int] = {}  # uid -> the locked file's descriptor
        self.problem: str | None = None  # why no uid can be claimed here, if so
        self.folder_fd = -1
        try:
            self.folder_fd = _root_folder(folder)
        except OSError as exc:
            self.problem = f"the sandboxes' uids cannot be claimed in {folder}: {exc.strerror or exc}"

    def claim(self, first: int) -> int:
        """The first uid from ``first`` on (round the span) that no sandbox of the machine holds, now
        held by this zygote; OSError (EAGAIN) when every one is held, or the folder's problem."""
        if self.problem:
            raise OSError(errno.EPERM, self.problem)
        for step in range(UID_SPAN):
            uid = UID_BASE + (first - UID_BASE + step) % UID_SPAN
            if uid in self.held:
                continue
            fd = os.open(str(uid), os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=self.folder_fd)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:  # another zygote's sandbox has it
                os.close(fd)
                continue
            self.held[uid] = fd
            return uid
        raise OSError(errno.EAGAIN, f"all {UID_SPAN} sandbox uids are in use on this machine")

    def release(self, uid: int) -> None:
        fd = self.held.pop(uid, None)
        if fd is not None:
            os.close(fd)  # the lock goes with the last descriptor of its open file


def _root_folder(path: str) -> int:
    """``path`` as an open folder that only root can change, made if missing; PermissionError if it is
    anything else (a link, or another owner's or writable by others: its locks could be forged)."""
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    info = os.fstat(fd)
    if info.st_uid != 0 or stat.S_IMODE(info.st_mode) & 0o022:
        os.close(fd)
        raise PermissionError(errno.EPERM, "it is not root's alone")
    return fd
