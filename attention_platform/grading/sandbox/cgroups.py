"""Where a sandbox's cgroups live (cgroup v1 pids and memory controllers)."""

from __future__ import annotations

import os

CGROUP_ROOT = "/sys/fs/cgroup"
CGROUP_PARENT = "attention-sandbox"


def memory_cgroup_base() -> str | None:
    """This process's memory cgroup directory (cgroup v1), where sandboxes nest."""
    try:
        for line in open("/proc/self/cgroup"):
            _, controllers, path = line.rstrip("\n").split(":", 2)
            if "memory" in controllers.split(","):
                return os.path.join(CGROUP_ROOT, "memory", path.lstrip("/"))
    except OSError:
        pass
    return None


def cgroup_dirs(name: str) -> dict[str, str]:
    dirs = {"pids": os.path.join(CGROUP_ROOT, "pids", CGROUP_PARENT, name)}
    base = memory_cgroup_base()
    if base:
        dirs["memory"] = os.path.join(base, CGROUP_PARENT, name)
    return dirs
