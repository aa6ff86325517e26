"""The exchange's folders, who owns them, and how much a student may keep there.

The hub (as root natively, in its container in Docker) creates every folder of the
exchange above the students' own ones, and each student's folders when their server
first starts::

    <root>/                               root  0755
    <root>/<course>/                      root  0755
    <root>/<course>/outbound/             grader 0755        releases; students read
    <root>/<course>/inbound/              root:grader-group 0751   the grader lists, students only pass
    <root>/<course>/inbound/<student>/    student:grader-group 2770
    <root>/<course>/feedback/             root  0711
    <root>/<course>/feedback/<student>/   grader:student-group 2750
    <views>/                              root  0711         (native only)
    <views>/<student>/                    root:student-group 0750
    <views>/<student>/<course>/           root:student-group 0750, three root-owned symlinks:
        outbound -> <root>/<course>/outbound, inbound -> .../inbound/<student>,
        feedback -> .../feedback/<student>

Root never follows a path that a student or the grader can write. Every folder is
opened relative to its parent's descriptor with ``O_NOFOLLOW | O_DIRECTORY`` and its
owner and mode are set on that descriptor (``fchown``/``fchmod``); symlinks are made
under a temporary name and renamed into place. Every folder root creates entries in is
root-owned and writable by root alone, so nobody can swap an entry between our check
and our use. An entry that is not what it should be (a symlink where a folder belongs,
a file, a folder where a symlink belongs) is removed (symlinks: they hold no data) or
set aside under a hidden name (anything else: nothing is lost) when its parent is
root's own, and refused with ``LayoutError`` otherwise.

"root" above is whoever runs the hub: natively as root that is root; natively without
root everything belongs to that one user (a demo: no isolation); in Docker the hub
container's root creates the folders with the containers' ids (1000:100), and the
isolation comes from what each container has mounted.

What a student may keep there (``ExchangeLimits``) lives in attention_platform/exchange/submit.py:
the student's image carries that module alone.
"""

from __future__ import annotations

import contextlib
import errno
import os
import pwd
import secrets
import stat
import time
from dataclasses import dataclass

OPEN_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# fchown()'s "leave the group as it is": for folders whose mode gives their group nothing more
# than everyone has, so a group the storage chose (fsGroup, setgid parents) is kept.
ANY_GROUP = -1


class LayoutError(RuntimeError):
    """The exchange cannot be laid out safely; the message says what and where."""


@dataclass(frozen=True)
class Ids:
    uid: int
    gid: int

    @classmethod
    def of_user(cls, name: str) -> "Ids":
        entry = pwd.getpwnam(name)
        return cls(entry.pw_uid, entry.pw_gid)


def is_plain_name(name: str) -> bool:
    """A name that is one path component and not hidden (hidden names are the layout's own)."""
    return bool(name) and name not in (".", "..") and "/" not in name and "\0" not in name \
        and not name.startswith(".")


def open_dir(parent_fd: int, name: str) -> int:
    """The folder ``name`` in ``parent_fd``, never through a symlink (ELOOP/ENOTDIR otherwise)."""
    return os.open(name, OPEN_DIR, dir_fd=parent_fd)


def pass_through(parent_fd: int, name: str) -> int:
    """Like ``open_dir`` for a folder we may only pass through (mode --x): a handle to look names up in."""
    return os.open(name, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=parent_fd)


def kind_of(mode: int) -> str:
    """What a file of this mode is, in words for a TA or a log line."""
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISREG(mode):
        return "a file"
    if stat.S_ISFIFO(mode):
        return "a named pipe"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "an unknown kind of file"


class ExchangeLayout:
    """Creates and repairs the exchange's folders for one course (see the module's table)."""

    def __init__(self, root: os.PathLike | str, course: str, *, grader: Ids | None = None,
                 views: os.PathLike | str | None = None, log=None):
        if not is_plain_name(course):
            raise LayoutError(f"course id {course!r} cannot be a folder name")
        self.root = os.path.abspath(root)
        self.course = course
        self.views = os.path.abspath(views) if views is not None else None
        self.owner = Ids(os.geteuid(), os.getegid())
        self.grader = grader or self.owner
        self.log = log

    # ------------------------------------------------------------------ public
    def prepare_course(self) -> None:
        """The exchange root, the course folder and its outbound/, inbound/ and feedback/."""
        with self._course() as _fds:
            pass

    def prepare_student(self, student: str, ids: Ids | None = None) -> None:
        """``student``'s inbound and feedback folders and, natively, their view."""
        if not is_plain_name(student):
            raise LayoutError(f"user name {student!r} cannot be an exchange folder name")
        ids = ids or self.owner
        with self._course() as fds:
            os.close(self._ensure_dir(fds["inbound"], student, Ids(ids.uid, self.grader.gid), 0o2770))
            os.close(self._ensure_dir(fds["feedback"], student, Ids(self.grader.uid, ids.gid), 0o2750))
        if self.views is not None:
            self._prepare_view(student, ids)

    # ------------------------------------------------------------------ layout
    @contextlib.contextmanager
    def _course(self):
        fds = {}
        try:
            fds["root"] = self._ensure_top(self.root, 0o755)
            fds["course"] = self._ensure_dir(fds["root"], self.course, Ids(self.owner.uid, ANY_GROUP), 0o755)
            fds["outbound"] = self._ensure_dir(fds["course"], "outbound", self.grader, 0o755)
            fds["inbound"] = self._ensure_dir(fds["course"], "inbound", Ids(self.owner.uid, self.grader.gid), 0o751)
            fds["feedback"] = self._ensure_dir(fds["course"], "feedback", Ids(self.owner.uid, ANY_GROUP), 0o711)
            yield fds
        finally:
            for fd in fds.values():
                os.close(fd)

    def _prepare_view(self, student: str, ids: Ids) -> None:
        course_dir = os.path.join(self.root, self.course)
        targets = {
            "outbound": os.path.join(course_dir, "outbound"),
            "inbound": os.path.join(course_dir, "inbound", student),
            "feedback": os.path.join(course_dir, "feedback", student),
        }
        views_fd = self._ensure_top(self.views, 0o711)
        try:
            user_fd = self._ensure_dir(views_fd, student, Ids(self.owner.uid, ids.gid), 0o750)
            try:
                view_fd = self._ensure_dir(user_fd, self.course, Ids(self.owner.uid, ids.gid), 0o750)
                try:
                    for name, target in targets.items():
                        self._ensure_symlink(view_fd, name, target)
                finally:
                    os.close(view_fd)
            finally:
                os.close(user_fd)
        finally:
            os.close(views_fd)

    # ------------------------------------------------------------------ primitives
    def _ensure_top(self, path: str, mode: int) -> int:
        """A top folder (exchange root, views root) whose parent the administrator chose.

        The parent's path is the deployment's configuration and is followed as given; the
        top folder itself is not followed if it is a symlink.
        """
        parent, name = os.path.split(path)
        os.makedirs(parent, mode=0o755, exist_ok=True)
        parent_fd = os.open(parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            return self._ensure_dir(parent_fd, name, Ids(self.owner.uid, ANY_GROUP), mode)
        finally:
            os.close(parent_fd)

    def _parent_is_ours(self, parent_fd: int) -> bool:
        """Only root can create, rename or remove entries in it: what we see there stays so."""
        st = os.fstat(parent_fd)
        return st.st_uid == self.owner.uid and not st.st_mode & 0o022

    def _where(self, parent_fd: int, name: str) -> str:
        try:
            return os.path.join(os.readlink(f"/proc/self/fd/{parent_fd}"), name)
        except OSError:
            return name

    def _ensure_dir(self, parent_fd: int, name: str, ids: Ids, mode: int) -> int:
        """Open (creating it if needed) the folder ``name`` and give it ``ids`` and ``mode``."""
        for _attempt in range(3):
            try:
                # 0700 until its owner and mode are set: nobody uses it half-made.
                os.mkdir(name, 0o700, dir_fd=parent_fd)
            except FileExistsError:
                pass
            try:
                fd = open_dir(parent_fd, name)
            except OSError as exc:
                if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
                    raise
                self._displace(parent_fd, name, "a folder")
                continue
            try:
                st = os.fstat(fd)
                if st.st_uid != ids.uid or ids.gid not in (ANY_GROUP, st.st_gid):
                    if not self._parent_is_ours(parent_fd) and st.st_uid != self.owner.uid:
                        raise LayoutError(f"{self._where(parent_fd, name)} belongs to uid {st.st_uid}, not to the "
                                          f"hub's uid {self.owner.uid}, and is not inside a folder of the hub's own: "
                                          "refusing to take it over (give it to the hub's user)")
                    os.fchown(fd, ids.uid, ids.gid)
                if stat.S_IMODE(os.fstat(fd).st_mode) != mode:
                    os.fchmod(fd, mode)
            except BaseException:
                os.close(fd)
                raise
            return fd
        raise LayoutError(f"{self._where(parent_fd, name)} keeps being replaced while it is being set up")

    def _ensure_symlink(self, parent_fd: int, name: str, target: str) -> None:
        try:
            st = os.stat(name, dir_fd=parent_fd, follow_symlinks=False)
        except FileNotFoundError:
            st = None
        if st is not None and stat.S_ISLNK(st.st_mode) and st.st_uid == self.owner.uid \
                and os.readlink(name, dir_fd=parent_fd) == target:
            return
        if st is not None and stat.S_ISDIR(st.st_mode):
            self._displace(parent_fd, name, "a symbolic link")  # rename() cannot replace a folder by a link
        temporary = f".{name}.new-{secrets.token_hex(6)}"
        os.symlink(target, temporary, dir_fd=parent_fd)
        try:
            os.rename(temporary, name, src_dir_fd=parent_fd, dst_dir_fd=parent_fd)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temporary, dir_fd=parent_fd)
            raise

    def _displace(self, parent_fd: int, name: str, expected: str) -> None:
        """Get an unexpected entry out of the way without following or losing it."""
        where = self._where(parent_fd, name)
        try:
            st = os.stat(name, dir_fd=parent_fd, follow_symlinks=False)
        except FileNotFoundError:
            return
        if not self._parent_is_ours(parent_fd):
            raise LayoutError(f"{where} is {kind_of(st.st_mode)} where {expected} belongs, and its parent folder is "
                              "writable by others: refusing to touch it (move it away by hand)")
        if stat.S_ISLNK(st.st_mode):
            os.unlink(name, dir_fd=parent_fd)  # unlinkat() removes the link itself, never its target
            self._note(f"{where} was a symbolic link where {expected} belongs: removed (not followed)")
            return
        aside = ".displaced-{}-{}-{}".format(name, time.strftime("%Y%m%dT%H%M%S"), secrets.token_hex(3))
        os.rename(name, aside, src_dir_fd=parent_fd, dst_dir_fd=parent_fd)
        self._note(f"{where} was {kind_of(st.st_mode)} where {expected} belongs: moved aside to {aside}")

    def _note(self, message: str) -> None:
        if self.log is not None:
            self.log.warning("exchange layout: %s", message)
