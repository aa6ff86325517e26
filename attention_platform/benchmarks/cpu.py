"""CPU-seconds spent by the machine and by a process with everything it started, read from /proc: what a
benchmark's round cost beside how long it took. With the machine's cores busy, the cost bounds the time:
work of C CPU-seconds on N cores takes at least C / N seconds, however it is scheduled."""

from __future__ import annotations

import os

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def _stat_fields(pid: int) -> list[str] | None:
    """The fields of /proc/<pid>/stat after the command name (which may hold spaces and parentheses)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            text = f.read()
    except OSError:  # gone, or never there
        return None
    return text[text.rindex(")") + 2:].split()


def process_seconds(pid: int) -> float:
    """CPU-seconds of ``pid`` and of the children it has reaped (user and system); 0.0 once it is gone."""
    fields = _stat_fields(pid)
    if fields is None:
        return 0.0
    utime, stime, cutime, cstime = (int(value) for value in fields[11:15])
    return (utime + stime + cutime + cstime) / CLOCK_TICKS


def _children() -> dict[int, list[int]]:
    """Every living process's children, by parent, from one look at /proc."""
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit() and (fields := _stat_fields(int(name))) is not None:
            children.setdefault(int(fields[1]), []).append(int(name))
    return children


def descendants(pid: int, children: dict[int, list[int]] | None = None) -> set[int]:
    """``pid`` and every living process below it (``children``: a look at /proc already made)."""
    children = _children() if children is None else children
    found, todo = set(), [pid]
    while todo:
        current = todo.pop()
        if current not in found:
            found.add(current)
            todo.extend(children.get(current, ()))
    return found


def command_line(pid: int) -> str:
    """``pid``'s command line, its arguments joined by spaces (the first 4 kB); '' once it is gone."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read(4096).replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


def own_seconds(pid: int) -> float:
    """CPU-seconds of ``pid`` itself (user and system), not of the children it reaped; 0.0 once it is gone."""
    fields = _stat_fields(pid)
    return 0.0 if fields is None else (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def marked_seconds(pid: int, marker: str) -> float:
    """CPU-seconds of every living process below ``pid`` whose command line holds ``marker``, each with
    every process below it (:func:`tree_seconds` of each, from one look at /proc)."""
    children = _children()
    marked = [member for member in descendants(pid, children) if member != pid and marker in command_line(member)]
    trees = set().union(*(descendants(member, children) for member in marked)) if marked else set()
    return sum(process_seconds(member) for member in trees)


def tree_seconds(pid: int) -> float:
    """CPU-seconds of ``pid`` and of every process below it, living or reaped by one of them. Of two
    readings the difference is what the tree spent between them: a process that ends in between is
    counted first by itself, then inside the parent that reaped it."""
    return sum(process_seconds(member) for member in descendants(pid))


def machine_seconds() -> float:
    """CPU-seconds the machine's cores have spent busy since boot (every state but idle and iowait)."""
    with open("/proc/stat") as f:
        values = [int(value) for value in f.readline().split()[1:]]
    idle, iowait = values[3], values[4]
    return (sum(values[:8]) - idle - iowait) / CLOCK_TICKS  # guest time is inside user time already
