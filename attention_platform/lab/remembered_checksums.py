"""The Assignments tab's feedback checksums, computed once per version of a file.

nbgrader's listing of a student's submissions (``ExchangeList``, in the student's server) tells
whether each notebook's feedback is fetched, ready to fetch or updated by comparing the MD5 of the
feedback page in the exchange with the fetched copy's. It reads and hashes every such page anew
on every listing, for every submission in the student's cache: with feedback on submit every
graded attempt has a page per notebook (a few hundred kB each, with the teaching pictures), so a
listing's cost grows with the attempts the student has made, and the Lab lists right after each
Submit, when the whole class presses it in the same minute.

:class:`RememberedChecksums` keeps each file's MD5 under its identity as the open file reports it
(device, inode, size, modification and change times): a page the grader replaces (a new file
renamed over the old) or a copy rewritten in place has a new identity and is hashed again. The
file is opened first and its identity read from the open descriptor, so the remembered digest is
always of the file it is filed under; a file written to while it is read is hashed again the next
time. What is not a regular file is an error at once. At most ``most`` digests are kept, the least
recently used going first.
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat
import threading
from collections import OrderedDict

MOST_REMEMBERED = 1024  # digests kept: ten attempts' pages of a few assignments, and their fetched copies
CHUNK = 1 << 20  # bytes read at a time: a page is hashed without holding all of it


def identity(info: os.stat_result) -> tuple:
    return info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns


class RememberedChecksums:
    """``checksum(path)``: the hex MD5 of a file's bytes, as nbgrader's listing computes it,
    hashed only when the file's identity is new. ``hashed`` counts the files actually read."""

    def __init__(self, most: int = MOST_REMEMBERED):
        self.most = most
        self.hashed = 0
        self._digests: OrderedDict[tuple, str] = OrderedDict()
        self._lock = threading.Lock()

    def __call__(self, path) -> str:
        return self.checksum(path)

    def checksum(self, path) -> str:
        # without waiting on a pipe swapped in after nbgrader saw a file there (a student's own copy)
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise OSError(errno.EINVAL, "not a regular file", str(path))
            key = identity(info)
            with self._lock:
                if key in self._digests:
                    self._digests.move_to_end(key)
                    return self._digests[key]
            digest = hashlib.md5()
            while chunk := os.read(fd, CHUNK):
                digest.update(chunk)
            unchanged = identity(os.fstat(fd)) == key  # not written to while it was read
        finally:
            os.close(fd)
        with self._lock:
            self.hashed += 1
            if unchanged:
                self._digests[key] = digest.hexdigest()
                while len(self._digests) > self.most:
                    self._digests.popitem(last=False)
        return digest.hexdigest()


checksums = RememberedChecksums()  # the student's server's: one per process, whatever lists
