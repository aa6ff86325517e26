"""``attention-course new-assignment A``: a new assignment that is graded end to end from the start.

It writes, from the files in ``templates/`` with the name put in:

* ``source/A/A.ipynb``: the source notebook, with nbgrader's cells as the course's notebooks have them
  (an intro, the grading overview, an imports cell, one function to write inside a solution region,
  a written answer with its rubric, and the hidden-check cell of the example check);
* ``grader_tests/A/``: the assignment's hidden checks (catalogue, probes, judges, the answers that
  prove them: one wheat and one chaff) and ``tests/test_proofs.py``, which runs ``prove-checks A``.

``prove-checks A`` passes on what it writes, ``nbgrader generate_assignment A`` releases it, and the
solved release gets full marks; the guide (docs/instructors/writing-an-assignment.md) goes on from there.
"""

from __future__ import annotations

import importlib.util
import keyword
import re
import sys
from pathlib import Path

from attention_platform.course.directory import NotACourse, require_course

TEMPLATES = Path(__file__).with_name("templates")
PLACEHOLDER = "{{assignment}}"
TEMPLATE_SUFFIX = ".in"
NAME = re.compile(r"[a-z_][a-z0-9_]*")


class BadAssignmentName(ValueError):
    """A name the course cannot take for a new assignment (the message says why and what to do)."""


def refusal(name: str, course: Path) -> str | None:
    """Why ``course`` cannot take an assignment called ``name``, or None if it can."""
    if not NAME.fullmatch(name) or keyword.iskeyword(name):
        return (f"{name!r} is not a usable assignment name: use lower-case letters, digits and underscores, "
                "starting with a letter (a Python identifier that is no keyword), such as layer_norm")
    for taken in (course / "source" / name, course / "grader_tests" / name, course / "grader_tests" / f"{name}.py"):
        if taken.exists():
            return f"{taken} exists already: choose another name, or edit that assignment"
    if name in sys.stdlib_module_names or name in sys.builtin_module_names or importlib.util.find_spec(name):
        return (f"{name!r} is the name of a Python module, which a student's notebook or the checks could import "
                "by mistake: choose another name, such as week2_" + name)
    return None


def _rendered(template: Path, name: str) -> str:
    return template.read_text(encoding="utf-8").replace(PLACEHOLDER, name)


def destination(template: Path, name: str, course: Path) -> Path:
    relative = template.relative_to(TEMPLATES).with_suffix("")  # drops .in
    if relative.parts[0] == "checks":
        return course / "grader_tests" / name / Path(*relative.parts[1:])
    return course / "source" / name / f"{name}{relative.suffix}"


def scaffold(name: str, course: Path) -> list[Path]:
    """Write the new assignment ``name`` into ``course``; return the files written."""
    course = require_course(course)
    why = refusal(name, course)
    if why:
        raise BadAssignmentName(why)
    written = []
    for template in sorted(TEMPLATES.rglob(f"*{TEMPLATE_SUFFIX}")):
        path = destination(template, name, course)
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("x", encoding="utf-8") as file:  # never over an instructor's file
            file.write(_rendered(template, name))
        written.append(path)
    return written


def new_assignment(name: str, course: Path) -> int:
    """The command: 0 with the files written and what to do next; 2 with the reason a name is refused."""
    try:
        written = scaffold(name, course)
    except (BadAssignmentName, NotACourse) as refused:
        print(f"new-assignment: {refused}", file=sys.stderr)
        return 2
    course = require_course(course)
    print(f"Wrote the assignment {name}:")
    for path in written:
        print(f"  {path.relative_to(course)}")
    print(f"Next: attention-course prove-checks {name}   (its one example check holds)\n"
          f"      nbgrader generate_assignment {name}   (the student's copy in release/{name})\n"
          "Then make it yours: docs/instructors/writing-an-assignment.md")
    return 0
