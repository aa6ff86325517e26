"""Which assignments the course has: every package under ``grader_tests/`` with a ``catalogue.py``.

Found by looking at the folder, not by importing: a package is an assignment because of its layout
(docs/instructors/writing-an-assignment.md), and finding them costs nothing. Its name is the nbgrader
assignment id (``source/<name>/``).
"""

from __future__ import annotations

import importlib
from pathlib import Path
from types import ModuleType

HERE = Path(__file__).resolve().parent
CATALOGUE, PROBES, JUDGES, ANSWERS, REFERENCE, PICTURES, VARIANTS = (
    "catalogue", "probes", "judges", "answers", "reference", "pictures", "variants")


def assignment_names(root: Path = HERE) -> list[str]:
    """The assignments' names, sorted."""
    return sorted(path.parent.name for path in root.glob(f"*/{CATALOGUE}.py")
                  if path.parent.name.isidentifier() and (path.parent / "__init__.py").is_file())


def module_name(assignment: str, part: str) -> str:
    return f"{__package__}.{assignment}.{part}"


def has_module(assignment: str, part: str, root: Path = HERE) -> bool:
    return (root / assignment / f"{part}.py").is_file()


def probe_modules() -> list[ModuleType]:
    """Every assignment's ``probes`` module, imported."""
    return [importlib.import_module(module_name(name, PROBES)) for name in assignment_names()]


def notebook_order(assignment: str) -> tuple[str, ...]:
    """The assignment's notebook ids in the order students work through them, read from its catalogue
    alone: what a process needs that must not wait for the judges' imports (torch)."""
    catalogue = importlib.import_module(module_name(assignment, CATALOGUE))
    return tuple(part.notebook for part in catalogue.PARTS)
