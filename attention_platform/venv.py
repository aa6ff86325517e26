"""Programs of the environment this interpreter runs in (the project's venv), for subprocesses.

nbgrader, jupyterhub and our own ``attention-course`` are console scripts beside
``sys.executable``; a subprocess must find them, and their own children must find their
siblings (nbgrader starts ``jupyter``), even when the venv is not activated.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path

BIN = Path(sys.executable).parent


def activate() -> None:
    """Put this environment's bin first on this process's PATH, as activating the venv would: the
    programs our dependencies start by name (nbgrader runs ``alembic`` when it creates a gradebook,
    ``jupyter`` for its kernels) are then found when a command is run as ``.venv/bin/...``."""
    path = os.environ.get("PATH", "")
    if str(BIN) not in path.split(os.pathsep):
        os.environ["PATH"] = str(BIN) + os.pathsep + path if path else str(BIN)


def program(name: str) -> str:
    """Absolute path of the console script ``name`` of this environment."""
    return str(BIN / name)


def environment(base: Mapping[str, str] | None = None, **extra: str) -> dict[str, str]:
    """``base`` (default: this process's environment) with this environment's bin first on PATH."""
    base = os.environ if base is None else base
    return {**base, "PATH": str(BIN) + os.pathsep + base.get("PATH", ""), **extra}
