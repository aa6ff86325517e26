"""Released courses, generated once per test run and copied for each test that asks.

``nbgrader generate_assignment`` of the same source writes the same release and gradebook every time
and costs seconds of CPU, so the ``released_course`` session fixture (tests/conftest.py) generates each
assignment (of all its notebooks, or of some alone) the first time a test asks and gives every test its
own copy, which it may change at will.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterable
from pathlib import Path

from attention_platform.course.directory import copy_course, nbgrader


class ReleasedCourses:
    """``released(dest, assignment, notebooks=None)``: the course copied to ``dest`` after one real
    ``nbgrader generate_assignment`` of ``assignment`` (its source holding only the ``notebooks`` named,
    when named); the generation runs once per (assignment, notebooks) in ``folder``."""

    def __init__(self, folder: Path):
        self._folder = folder
        self._generated: dict[tuple[str, tuple[str, ...] | None], Path] = {}

    def __call__(self, dest: Path, assignment: str, notebooks: Iterable[str] | None = None) -> Path:
        kept = None if notebooks is None else tuple(sorted(notebooks))
        key = (assignment, kept)
        if key not in self._generated:
            self._generated[key] = self._generate(self._folder / f"course-{len(self._generated)}", assignment, kept)
        if dest.exists():
            shutil.rmtree(dest)
        shutil.copytree(self._generated[key], dest, symlinks=True)
        return dest

    @staticmethod
    def _generate(course: Path, assignment: str, kept: tuple[str, ...] | None) -> Path:
        copy_course(course)
        if kept is not None:
            for other in (course / "source" / assignment).glob("*.ipynb"):
                if other.name not in kept:
                    other.unlink()
        done = nbgrader(course, "generate_assignment", assignment, "--force")
        if done.returncode != 0:
            raise RuntimeError(f"nbgrader generate_assignment {assignment} failed:\n{done.stderr[-2000:]}")
        return course
