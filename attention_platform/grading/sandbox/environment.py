"""The environment a warm worker runs with: of its starter's, only what the worker needs.

Every sandbox is a fork of a warm worker -- the private one a root grader starts, or the sandbox
broker, whose every connection's worker is a fork of it -- and student code can read all of its own
memory, so all of the worker's: its initial environment block (the strings at the top of its stack,
whatever ``os.environ`` says later) and the copies Python made of it. The process that starts a
worker often holds secrets in its environment: the hub's and the formgrader's API tokens, the
gradebook's database URL with its password, the course's secret seed (a compose entrypoint passes
the container's whole environment on). So a worker starts with the environment built here, and the
broker, started by whatever a deployment uses, re-executes itself with it before it reads anything
(``broker.main``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping

FIRST_USES_ENV = "ATTENTION_SANDBOX_FIRST_USES"  # the broker's --first-uses as the deployments set it
# Passed on from the starter when set: where Python finds this package and the wire codec, where the
# sandboxes' cgroups go, and the broker's setting for the first uses it pays.
KEPT = ("PATH", "PYTHONPATH", "ATTENTION_CGROUP_ROOT", FIRST_USES_ENV)
# Always: one thread per sandbox for torch's math libraries, no bytecode files written by a worker.
FIXED = {"LANG": "C.UTF-8", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "PYTHONDONTWRITEBYTECODE": "1"}
# What Python itself may add at start-up (PEP 538: LC_CTYPE, where the C.UTF-8 locale is missing).
ADDED_BY_PYTHON = ("LC_CTYPE",)


def worker_environment(starter: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment a warm worker gets from a starter whose environment is ``starter`` (this
    process's by default): the KEPT names it sets, the FIXED ones, nothing else."""
    starter = os.environ if starter is None else starter
    env = {name: starter[name] for name in KEPT if name in starter}
    env.setdefault("PATH", "/usr/bin:/bin")
    return {**env, **FIXED}


def is_worker_environment(env: Mapping[str, str]) -> bool:
    """Whether ``env`` is already what ``worker_environment`` makes of it (give or take what Python adds
    at start-up): the broker re-executes itself until it is, so once."""
    return {k: v for k, v in env.items() if k not in ADDED_BY_PYTHON} == worker_environment(env)
