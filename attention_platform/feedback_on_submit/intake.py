"""Taking one submission out of a student's inbound folder: the grader's own copy, and its time.

Everything in ``inbound/<student>/`` was written by that student, possibly by hand, and stays
theirs to change after the grader has looked. So the grader copies a submission once, the
moment it sees it, and grades, archives and (if it counts) installs only that copy:

* every folder is opened relative to its parent's descriptor with ``O_NOFOLLOW`` and every
  file with ``O_NOFOLLOW | O_NONBLOCK`` and checked with ``fstat``: symbolic links, pipes,
  devices and sockets are skipped (and named in the attempt's notes), nothing is followed;
* within limits (entries, bytes per file and in all, folder depth): a submission over them is
  not graded, with a sentence saying which limit;
* the time the attempt counts at is the kernel's: the newest inode change time (``ctime``) of
  the submission folder and everything in it, which only the kernel sets and no ``touch``
  moves backwards. The time the student's side wrote (``timestamp.txt``) is kept as the
  gradebook's time only when the kernel's corroborates it (see :func:`gradebook_time`).
"""

from __future__ import annotations

import datetime as dt
import errno
import os
import shutil
import stat
from dataclasses import dataclass, field
from pathlib import Path

from nbgrader.utils import parse_utc

from .policy import UTC

OPEN_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
OPEN_FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
SMALL = 4096  # timestamp.txt and submission_secret.txt are one short line each


class IntakeError(Exception):
    """The submission is not graded; the message says why, for the student."""


@dataclass
class Limits:
    entries: int = 2000
    file_bytes: int = 50_000_000
    total_bytes: int = 100_000_000
    depth: int = 10


@dataclass
class Intake:
    folder: Path  # the grader's copy
    newest_ctime_ns: int = 0
    claim: str = ""  # timestamp.txt as written
    secret: str = ""  # submission_secret.txt (names the feedback pages, as nbgrader's do)
    entries: int = 0
    bytes: int = 0
    notes: list = field(default_factory=list)

    @property
    def received(self) -> dt.datetime:
        return dt.datetime.fromtimestamp(self.newest_ctime_ns / 1e9, UTC)


def _describe(mode: int) -> str:
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISFIFO(mode):
        return "a named pipe"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "not a regular file"


def take(parent_fd: int, name: str, dest: Path, limits: Limits | None = None) -> Intake:
    """Copy the submission folder ``name`` in the folder open at ``parent_fd`` to ``dest``
    (created, must not exist). Raises IntakeError when it is not graded, FileNotFoundError
    when it is gone."""
    limits = limits or Limits()
    try:
        top = os.open(name, OPEN_DIR, dir_fd=parent_fd)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise IntakeError("the submission is not a folder") from None
        raise
    found = Intake(folder=dest)
    dest.mkdir(mode=0o700)
    try:
        device = os.fstat(top).st_dev
        found.newest_ctime_ns = os.fstat(top).st_ctime_ns
        _copy_dir(top, dest, "", 0, device, found, limits)
        found.newest_ctime_ns = max(found.newest_ctime_ns, os.fstat(top).st_ctime_ns)
    except BaseException:
        shutil.rmtree(dest, ignore_errors=True)
        raise
    finally:
        os.close(top)
    for small in ("timestamp.txt", "submission_secret.txt"):
        path = dest / small
        if path.is_file() and path.stat().st_size <= SMALL:
            text = path.read_text(errors="replace").strip()
            if small == "timestamp.txt":
                found.claim = text
            else:
                found.secret = text
    return found


def _copy_dir(fd: int, dest: Path, prefix: str, depth: int, device: int, found: Intake, limits: Limits) -> None:
    if depth > limits.depth:
        raise IntakeError(f"its folders are nested more than {limits.depth} levels deep")
    with os.scandir(fd) as entries:
        names = sorted(entry.name for entry in entries)
    for name in names:
        found.entries += 1
        if found.entries > limits.entries:
            raise IntakeError(f"it holds more than {limits.entries} files and folders")
        rel = prefix + name
        st = os.stat(name, dir_fd=fd, follow_symlinks=False)
        found.newest_ctime_ns = max(found.newest_ctime_ns, st.st_ctime_ns)
        if stat.S_ISDIR(st.st_mode):
            try:
                sub = os.open(name, OPEN_DIR, dir_fd=fd)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR):  # swapped for something else meanwhile
                    found.notes.append(f"{rel}: skipped, it changed while it was read")
                    continue
                raise
            try:
                if os.fstat(sub).st_dev != device:
                    found.notes.append(f"{rel}: skipped, another file system is mounted there")
                    continue
                (dest / name).mkdir(mode=0o700)
                _copy_dir(sub, dest / name, rel + "/", depth + 1, device, found, limits)
            finally:
                os.close(sub)
            continue
        if not stat.S_ISREG(st.st_mode):
            found.notes.append(f"{rel}: skipped, it is {_describe(st.st_mode)}")
            continue
        try:
            src = os.open(name, OPEN_FILE, dir_fd=fd)
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENXIO, errno.ENOENT):
                found.notes.append(f"{rel}: skipped, it changed while it was read")
                continue
            raise
        try:
            info = os.fstat(src)
            if not stat.S_ISREG(info.st_mode):
                found.notes.append(f"{rel}: skipped, it is {_describe(info.st_mode)}")
                continue
            if info.st_size > limits.file_bytes:
                raise IntakeError(f"{rel} is {info.st_size / 1e6:.1f} MB, more than the "
                                  f"{limits.file_bytes / 1e6:.0f} MB a file may be")
            found.newest_ctime_ns = max(found.newest_ctime_ns, info.st_ctime_ns)
            copied = 0
            with open(dest / name, "xb") as out:
                while True:
                    block = os.read(src, 1 << 20)
                    if not block:
                        break
                    copied += len(block)
                    found.bytes += len(block)
                    if copied > limits.file_bytes or found.bytes > limits.total_bytes:
                        raise IntakeError(f"it holds more than {limits.total_bytes / 1e6:.0f} MB"
                                          if found.bytes > limits.total_bytes else
                                          f"{rel} grew beyond {limits.file_bytes / 1e6:.0f} MB while it was read")
                    out.write(block)
        finally:
            os.close(src)


def gradebook_time(intake: Intake, tolerance: float) -> dt.datetime:
    """The time the gradebook records for the attempt: what the student was shown (their
    timestamp.txt) when the exchange's time corroborates it — at most ``tolerance`` seconds
    earlier, never later than one clock tick — else the exchange's time."""
    received = intake.received
    try:
        claim = parse_utc(intake.claim).replace(tzinfo=UTC) if intake.claim else None
    except (ValueError, OverflowError):
        claim = None
    if claim is not None and received - dt.timedelta(seconds=tolerance) <= claim <= received + dt.timedelta(seconds=1):
        return claim
    return received
