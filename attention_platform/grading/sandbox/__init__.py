"""Running untrusted submissions in a fresh, confined process tree.

Two halves that never trust each other:

* ``zygote`` (untrusted side once it forks): a warm Python that imported torch once.
  For every submission it forks; the child enters new mount, network, PID, IPC
  and UTS namespaces, pivots into a tmpfs root holding only read-only system and
  venv directories plus a private working copy, joins its own pids/memory cgroup,
  sets rlimits, drops to an unprivileged per-sandbox uid, installs a system-call
  filter (``syscall_filter``) and only then runs student code. See ``zygote.py``
  for the exact layers.
* ``client`` (trusted side): starts the zygote, asks for sandboxes, talks to each
  one over its own socket with size-bounded frames and wall-clock deadlines, and
  kills the sandbox's whole cgroup when it is done or over time. It never
  unpickles or evaluates anything a sandbox sends.

``grading`` builds on the client: run one notebook's cells in a sandbox, run the
probe of every hidden check there, and judge the responses here.
"""

import importlib

# Exported lazily: a student's server imports ``protocol`` and ``files`` of this package (Validate's
# client) and must not load the sandbox's client, which it neither needs nor has in its image.
_EXPORTS = {"Sandbox": "client", "SandboxDied": "client", "SandboxTimeout": "client", "SandboxUnavailable": "client",
            "Zygote": "client", "get_zygote": "client", "SandboxLimits": "limits"}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
