"""Which first-time costs a warm worker pays before it forks, chosen from the notebooks it will run.

Some of torch's and matplotlib's work happens only the first time a feature is used: the
first optimizer step imports ``torch._dynamo`` (slow: more than grading a whole notebook), the
first figure loads fonts and the PNG writer. A worker that pays them once, before forking, spares
every sandbox that uses the feature; a worker that pays them for notebooks that never use
the feature delays its own start and makes every sandbox it forks dearer (a larger address
space to copy and tear down, paid by every sandbox). So the hub's broker pays for every
connection only those its course's notebooks need (``--first-uses``; the native hub passes
``needed_by_course``), and each grader's connection asks for any other it needs and pays it
itself: ``autograde-batch`` and nbgrader's autograde (the formgrader's too) those of the assignment
they grade, asking for more when a later assignment needs them; the feedback-on-submit grader those
of each attempt's assignment; the Validate service, which takes any notebook of the course, the
course's. The Docker and Kubernetes brokers take theirs from ATTENTION_SANDBOX_FIRST_USES.
The choice is a speed hint and nothing else: a sandbox that meets a feature its worker did not
warm pays the first use itself and gets the same result.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterable
from pathlib import Path

# Each optional warm-up, and the words in a notebook that say it will be needed.
NEEDED_WHEN = {
    "optimizers": re.compile(r"\boptim\b"),  # torch.optim, `from torch import optim`, optim.AdamW
    "figures": re.compile(r"\bmatplotlib\b|\bplt\b"),
}
ALL = tuple(sorted(NEEDED_WHEN))
MAX_NOTEBOOK_BYTES = 8 << 20  # a source notebook larger than this is not looked into
# The grader may be root; source/ is the instructors' to write. A name that is not a regular file of
# sane size (a link, a named pipe that would block the read, a device) is not read.
OPEN_NOTEBOOK = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
OPEN_FOLDER = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC  # a link in its place is not entered


def needed_by(texts: Iterable[str]) -> tuple[str, ...]:
    """The optional warm-ups that any of ``texts`` (notebook files as text) would use."""
    texts = list(texts)
    return tuple(name for name in ALL if any(NEEDED_WHEN[name].search(text) for text in texts))


def needed_by_folder(folder: Path, dir_fd: int | None = None) -> tuple[str, ...]:
    """The warm-ups the notebooks in ``folder`` (relative to ``dir_fd`` if given) need; all of them if
    it is not a folder (a link in its place included), or holds no notebook, or one that is not a
    regular file of at most MAX_NOTEBOOK_BYTES (unknown work)."""
    try:
        fd = os.open(folder, OPEN_FOLDER, dir_fd=dir_fd)
    except OSError:
        return ALL
    try:
        with os.scandir(fd) as entries:
            names = sorted(e.name for e in entries if e.name.endswith(".ipynb") and not e.name.startswith("."))
        texts = [_notebook_text(name, dir_fd=fd) for name in names]
    finally:
        os.close(fd)
    if not texts or None in texts:
        return ALL
    return needed_by(texts)


def _notebook_text(path, dir_fd: int | None = None) -> str | None:
    try:
        fd = os.open(path, OPEN_NOTEBOOK, dir_fd=dir_fd)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_NOTEBOOK_BYTES:
            return None
        return os.read(fd, MAX_NOTEBOOK_BYTES).decode("utf-8", errors="replace")
    finally:
        os.close(fd)


def needed_by_assignment(course: Path, assignment: str) -> tuple[str, ...]:
    """The warm-ups ``assignment``'s source notebooks need, looked for in nbgrader's default source
    directory: reading the course's configuration to find another would take as long as the early
    start saves (it imports the course's preprocessors), and a course that moved it gets them all."""
    return needed_by_folder(Path(course) / "source" / assignment)


def needed_by_course(course: Path) -> tuple[str, ...]:
    """The warm-ups any assignment in the course's default source directory needs (each folder of
    ``source/`` read as ``needed_by_assignment`` reads it); all of them if there is none. The reader
    may be root (the native hub starts the broker with this) and source/ is the instructors': it is
    read through folder descriptors opened without following links, so a link in place of source/
    or of an assignment's folder, even one swapped in while it is read, is not entered."""
    try:
        source = os.open(Path(course) / "source", OPEN_FOLDER)
    except OSError:
        return ALL
    needed: set[str] = set()
    try:
        with os.scandir(source) as entries:
            names = sorted(entry.name for entry in entries if entry.is_dir(follow_symlinks=False))
        for name in names:
            needed.update(needed_by_folder(name, dir_fd=source))  # a link swapped in by now: all
    finally:
        os.close(source)
    if not names:
        return ALL
    return tuple(name for name in ALL if name in needed)


def parse(argument: str) -> tuple[str, ...]:
    """The zygote's command-line form ("optimizers,figures", or "" for none) back to names."""
    names = tuple(name for name in argument.split(",") if name)
    unknown = sorted(set(names) - set(ALL))
    if unknown:
        raise ValueError(f"unknown warm-up(s) {', '.join(unknown)}; known: {', '.join(ALL)}")
    return names
