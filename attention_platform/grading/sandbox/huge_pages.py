"""The zygote's heap moved onto 2 MB pages, so that forking a sandbox costs less.

Every sandbox is a ``fork`` of the zygote, which holds hundreds of MB of private memory (torch,
matplotlib). On 4 kB pages the kernel copies a page-table entry per page at each fork and drops
them again at each exit: most of a sandbox's confinement CPU (``perf``: ``copy_page_range``,
``unmap_page_range``). Collapsed into 2 MB pages, the same memory needs 512 times fewer entries;
a sandbox that writes to a page still gets its own copy of those 4 kB alone (the kernel
splits the shared huge page on a copy-on-write fault).

``madvise(MADV_COLLAPSE)`` (Linux 6.1) does it synchronously, whatever the machine's THP setting,
without marking the memory for huge pages later: what a student's code allocates in a sandbox is
left on ordinary pages. It copies the memory once, which takes a while for hundreds of MB, so it is
done a chunk at a time while the zygote waits for requests, and only once the zygote has forked
several sandboxes (``ZygoteServer.HUGE_PAGES_AFTER``): a submission's ``nbgrader autograde``, six
notebooks at most, never pays for it; a class's batch and a resident broker do, once, and it pays
back within a few dozen sandboxes. Where the kernel refuses (older kernels, ``PR_SET_THP_DISABLE``,
seccomp), nothing changes but the speed.
"""

from __future__ import annotations

import ctypes
import errno

HUGE_PAGE = 2 << 20
CHUNK = 4 * HUGE_PAGE  # collapsed per idle moment: small, so a request arriving meanwhile waits little
RETRIES = 3  # for a chunk whose pages were busy (EAGAIN: e.g. still shared with a sandbox being torn down)
MADV_COLLAPSE = 25

_libc = ctypes.CDLL(None, use_errno=True)
_libc.madvise.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)


def private_memory_spans(maps: str) -> list[tuple[int, int]]:
    """The 2 MB-aligned spans inside the process's private, writable, anonymous mappings (its heap
    and the anonymous maps of malloc and Python's allocator) of a ``/proc/PID/maps`` text."""
    spans = []
    for line in maps.splitlines():
        fields = line.split()
        if len(fields) < 5 or fields[1] != "rw-p" or (len(fields) > 5 and fields[5] != "[heap]"):
            continue
        start, end = (int(bound, 16) for bound in fields[0].split("-"))
        low, high = -(-start // HUGE_PAGE) * HUGE_PAGE, end // HUGE_PAGE * HUGE_PAGE
        if high > low:
            spans.append((low, high))
    return spans


def chunks(spans: list[tuple[int, int]], size: int = CHUNK) -> list[tuple[int, int]]:
    """``spans`` cut into pieces of at most ``size`` bytes (``size`` a multiple of HUGE_PAGE)."""
    return [(low, min(low + size, high)) for start, high in spans for low in range(start, high, size)]


def supported() -> bool:
    """Whether this kernel knows MADV_COLLAPSE and may be asked (an empty range: it only checks the
    advice; EINVAL before Linux 6.1, EPERM where seccomp forbids madvise)."""
    return _libc.madvise(0, 0, MADV_COLLAPSE) == 0


class HugePages:
    """Collapses this process's private memory onto huge pages, one chunk per :meth:`step`."""

    def __init__(self):
        self.pending: list[tuple[int, int, int]] | None = None  # (start, end, tries left); None: not started
        self.collapsed = 0  # bytes
        self.refused = 0  # chunks the kernel would not collapse

    @property
    def done(self) -> bool:
        return self.pending == []

    def step(self) -> None:
        """Collapse the next chunk (the first call lists the spans). Never raises."""
        if self.pending is None:
            if not supported():
                self.pending = []
                return
            try:
                with open("/proc/self/maps") as f:
                    self.pending = [(low, high, RETRIES) for low, high in chunks(private_memory_spans(f.read()))]
            except OSError:
                self.pending = []
            return
        if not self.pending:
            return
        low, high, tries = self.pending.pop(0)
        if _libc.madvise(low, high - low, MADV_COLLAPSE) == 0:
            self.collapsed += high - low
            return
        if ctypes.get_errno() == errno.EAGAIN and tries > 0:
            self.pending.append((low, high, tries - 1))  # again once the rest is done
            return
        self.refused += 1  # e.g. EINVAL for a span with nothing in it yet: it stays unpopulated
