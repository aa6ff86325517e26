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

from .client import Sandbox, SandboxDied, SandboxTimeout, SandboxUnavailable, Zygote, get_zygote
from .limits import SandboxLimits

__all__ = ["Sandbox", "SandboxDied", "SandboxLimits", "SandboxTimeout", "SandboxUnavailable", "Zygote", "get_zygote"]
