"""Wakes the student's held status requests when the grader writes into their feedback folder.

The grader writes each status and deadline to a new file and renames it over the old one
(:func:`attention_platform.attempts.status.replace_json`), so a rename into the folder is the news a
held request waits for. Linux's inotify reports it the moment it happens: a held request then costs
nothing while nothing changes, where looking at the folder on a timer costs every open Assignments
tab a little CPU several times a second, all day.

:func:`watch` gives a :class:`FolderWatch` for a folder; every held request of one folder in this
server shares it (one inotify instance), and it is closed when the last of them ends. It gives None
where inotify cannot be had -- not Linux, the user's limit of inotify instances or watches reached,
the folder missing or not a folder, more than ``MOST_FOLDERS`` folders watched at once -- and on
a network file system, where a write by another machine raises no event here: the caller then looks
at the folder on a timer (:func:`attention_platform.lab.feedback_on_submit.changed_answer`).
"""

from __future__ import annotations

import asyncio
import ctypes
import os
import struct

from attention_platform.attempts import deadline_file
from attention_platform.attempts import status as status_file

# <sys/inotify.h>
IN_CLOSE_WRITE, IN_MOVED_FROM, IN_MOVED_TO, IN_CREATE, IN_DELETE = 0x8, 0x40, 0x80, 0x100, 0x200
IN_DELETE_SELF, IN_MOVE_SELF, IN_UNMOUNT, IN_Q_OVERFLOW, IN_IGNORED = 0x400, 0x800, 0x2000, 0x4000, 0x8000
IN_ONLYDIR, IN_EXCL_UNLINK = 0x01000000, 0x04000000
IN_NONBLOCK, IN_CLOEXEC = os.O_NONBLOCK, os.O_CLOEXEC

ENTRY_EVENTS = IN_CLOSE_WRITE | IN_MOVED_FROM | IN_MOVED_TO | IN_CREATE | IN_DELETE
FOLDER_GONE = IN_DELETE_SELF | IN_MOVE_SELF | IN_UNMOUNT | IN_IGNORED
WATCHED_NAMES = (status_file.PREFIX, deadline_file.PREFIX)  # page files come and go unseen
EVENT_HEADER = struct.Struct("iIII")  # wd, mask, cookie, len (of the name that follows)
READ_BYTES = 64 << 10  # read at a time: a bound on what one wake-up allocates, whatever the kernel queued
MOST_FOLDERS = 8  # folders watched at once by one server: a student asking about many courses gets the timer

# statfs f_type of file systems whose files other machines write without an inotify event here
NETWORK_FILE_SYSTEMS = frozenset({
    0x6969,  # NFS
    0xFF534D42, 0xFE534D42, 0x517B,  # CIFS, SMB2, SMB
    0x65735546,  # FUSE (sshfs, cloud buckets, ...)
    0x01021997,  # 9p
    0x00C36400,  # Ceph
    0x0BD00BD0,  # Lustre
    0x47504653,  # GPFS
    0x5346414F,  # AFS
})

_watches: dict[tuple[int, str], "FolderWatch"] = {}  # (id of the event loop, folder) -> its watch


def _libc():
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.inotify_init1.argtypes = (ctypes.c_int,)
        libc.inotify_add_watch.argtypes = (ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32)
        libc.statfs.argtypes = (ctypes.c_char_p, ctypes.c_void_p)
        return libc
    except (OSError, AttributeError):  # not Linux's C library
        return None


_LIBC = _libc()


def file_system_type(folder: str) -> int | None:
    """``statfs(2)``'s ``f_type`` of ``folder``'s file system (its first field, a C long), or None."""
    if _LIBC is None:
        return None
    buffer = ctypes.create_string_buffer(256)  # struct statfs is 120 bytes on 64-bit Linux
    if _LIBC.statfs(os.fsencode(folder), buffer) != 0:
        return None
    return ctypes.c_long.from_buffer(buffer).value & 0xFFFFFFFF


def what_happened(data: bytes) -> tuple[bool, bool]:
    """Of one read of inotify events: whether one is news a held request must read (a status or a
    deadline entered, replaced or left; the folder itself gone; events lost), and whether the folder
    is gone (no event will come). A truncated or malformed record is news: the worst is a read for
    nothing."""
    news = gone = False
    offset = 0
    while offset < len(data):
        if offset + EVENT_HEADER.size > len(data):
            return True, gone
        _wd, mask, _cookie, length = EVENT_HEADER.unpack_from(data, offset)
        offset += EVENT_HEADER.size
        if offset + length > len(data):
            return True, gone
        name = data[offset:offset + length].split(b"\0", 1)[0].decode("utf-8", "replace")
        offset += length
        gone = gone or bool(mask & FOLDER_GONE)
        news = news or bool(mask & (FOLDER_GONE | IN_Q_OVERFLOW)) or bool(
            mask & ENTRY_EVENTS and name.startswith(WATCHED_NAMES))
    return news, gone


class FolderWatch:
    """One inotify instance on one folder, shared by the held requests of this event loop."""

    def __init__(self, folder: str, fd: int, loop: asyncio.AbstractEventLoop):
        self.folder, self.fd, self.loop = folder, fd, loop
        self.users = 0
        self.gone = False  # the folder was removed or moved: events no longer come
        self._news = asyncio.Event()
        loop.add_reader(fd, self._readable)

    def _readable(self) -> None:
        news = False
        while True:
            try:
                data = os.read(self.fd, READ_BYTES)
            except BlockingIOError:
                break
            except OSError:
                news = self.gone = True
                break
            if not data:
                break
            seen, gone = what_happened(data)
            news, self.gone = news or seen, self.gone or gone
        if news:
            self._news.set()
            self._news = asyncio.Event()

    async def news(self, timeout: float) -> bool:
        """True once something a held request must read happened in the folder, False after ``timeout``."""
        if self.gone:
            return True
        try:
            await asyncio.wait_for(self._news.wait(), timeout)
        except asyncio.TimeoutError:
            return False
        return True

    def _close(self) -> None:
        self.loop.remove_reader(self.fd)
        os.close(self.fd)


def _open(folder: str) -> int | None:
    """An inotify descriptor watching ``folder``'s entries, or None where that cannot be had."""
    if _LIBC is None or file_system_type(folder) in NETWORK_FILE_SYSTEMS:
        return None
    fd = _LIBC.inotify_init1(IN_NONBLOCK | IN_CLOEXEC)
    if fd < 0:  # EMFILE: the user's max_user_instances reached
        return None
    # Through links: natively the student's view of the exchange reaches their feedback folder through
    # root's link (exchange_layout); this server runs as the student and only ever reads what it watches.
    mask = ENTRY_EVENTS | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR | IN_EXCL_UNLINK
    if _LIBC.inotify_add_watch(fd, os.fsencode(folder), mask) < 0:  # ENOENT, ENOTDIR, ENOSPC, EACCES
        os.close(fd)
        return None
    return fd


class watch:
    """``async with watch(folder) as changes``: ``changes`` is the folder's :class:`FolderWatch`, or
    None where it cannot be watched. Enter before reading the folder, so that nothing written after
    the read goes unnoticed."""

    def __init__(self, folder: str):
        self.folder = os.path.abspath(folder)
        self.shared: FolderWatch | None = None

    async def __aenter__(self) -> FolderWatch | None:
        loop = asyncio.get_running_loop()
        key = (id(loop), self.folder)
        shared = _watches.get(key)
        if shared is None or shared.gone:
            if len(_watches) >= MOST_FOLDERS and key not in _watches:
                return None
            fd = _open(self.folder)
            if fd is None:
                return None
            if shared is not None:  # gone: its users keep the old one until they leave
                _watches.pop(key)
            shared = _watches[key] = FolderWatch(self.folder, fd, loop)
        shared.users += 1
        self.shared = shared
        return shared

    async def __aexit__(self, *exc) -> bool:
        shared, self.shared = self.shared, None
        if shared is not None:
            shared.users -= 1
            if shared.users == 0:
                key = (id(shared.loop), shared.folder)
                if _watches.get(key) is shared:
                    del _watches[key]
                shared._close()
        return False


def watched_folders() -> int:
    """How many folders this process watches now (for tests: none once every held request ended)."""
    return len(_watches)

