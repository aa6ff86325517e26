"""Each student's own numbers in an assignment's by-hand part: the course's key, the switch, the seed.

A student's variant is drawn from ``HMAC-SHA256(key, "<assignment>/<student>")`` by the assignment's
``variants`` hook (grader_tests/variants.py): nothing a student can choose, and nothing they can
compute without the key. The key is 32 random bytes in ``<course>/variant_key``, created on first
use, mode 0600, owned by the grader account (which owns the course directory); it is never copied
into a release, the exchange, a feedback page or a sandbox. Whether an assignment gives variants is
switched in ``<course>/variants.json`` (``{assignment: true | false}``, beside the feedback-on-submit
policies, off when absent): off, everyone works with the release's numbers.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import stat
from pathlib import Path
from typing import Callable

from attention_platform.attempts import course_files

KEY_FILE = "variant_key"
SWITCH_FILE = "variants.json"
KEY_BYTES = 32
MAX_SWITCH_BYTES = 64 * 1024  # one flag per assignment


class VariantsError(RuntimeError):
    """The key or the switch cannot be used; the message says what to do."""


def offered(assignment: str) -> bool:
    """Whether ``assignment`` has a part whose numbers vary (a ``variants`` hook)."""
    from grader_tests.registry import ASSIGNMENTS  # the judges' imports: only when asked

    found = ASSIGNMENTS.get(assignment)
    return found is not None and found.variants is not None


def _read_key(where: Path) -> bytes | None:
    remedy = "run `attention-course variants regenerate` to make a new one"
    try:
        key = course_files.read_bytes(where, KEY_BYTES)
    except course_files.CourseFileError as exc:
        raise VariantsError(f"the course's variant key: {exc}; {remedy}") from None
    if key is None:
        return None
    if os.stat(where, follow_symlinks=False).st_mode & 0o077:  # the grader's own folder: nobody swaps it
        raise VariantsError(f"the course's variant key {where} must be a file only its owner can read "
                            f"(mode 0600): {remedy}")
    if len(key) != KEY_BYTES:
        raise VariantsError(f"the course's variant key {where} is not {KEY_BYTES} bytes: {remedy}")
    return key


def _write_key(where: Path) -> bytes:
    key = secrets.token_bytes(KEY_BYTES)
    course_files.write_bytes(where, key, 0o600)
    return key


def course_key(course_dir) -> bytes:
    """The course's key, made on first use."""
    where = Path(course_dir) / KEY_FILE
    return _read_key(where) or _write_key(where)


def regenerate(course_dir) -> None:
    """A new key: every student's numbers change (callers check that nothing is submitted yet)."""
    _write_key(Path(course_dir) / KEY_FILE)


def read_switches(course_dir) -> dict[str, bool]:
    where = Path(course_dir) / SWITCH_FILE
    try:
        saved = course_files.read_object(where, MAX_SWITCH_BYTES, "{assignment: true or false}")
    except course_files.CourseFileError as exc:
        raise VariantsError(str(exc)) from None
    if not all(isinstance(v, bool) for v in saved.values()):
        raise VariantsError(f"{where} must hold {{assignment: true or false}}; switch variants again in the "
                            "formgrader or with `attention-course variants on|off`")
    return saved


def switch(course_dir, assignment: str, on: bool) -> None:
    """Turn ``assignment``'s variants on or off (an assignment without a varying part cannot be on)."""
    if on and not offered(assignment):
        raise VariantsError(f"assignment {assignment!r} has no part whose numbers vary (no variants hook in "
                            f"grader_tests/{assignment}/): everyone works with the release's numbers")
    saved = read_switches(course_dir)
    saved[assignment] = on
    course_files.write_object(Path(course_dir) / SWITCH_FILE, saved)


def is_on(course_dir, assignment: str) -> bool:
    # The switch first: with variants off nothing imports the hidden checks, which an exchange-only
    # grader account running release or collect may not read.
    return bool(read_switches(course_dir).get(assignment, False)) and offered(assignment)


def _digest(key: bytes, assignment: str, student: str) -> bytes:
    return hmac.new(key, f"{assignment}/{student}".encode(), hashlib.sha256).digest()


def seed(course_dir, assignment: str, student: str) -> int | None:
    """The seed of ``student``'s variant of ``assignment``; None when the assignment gives none."""
    if not student or not is_on(course_dir, assignment):
        return None
    # Imported here: nbgrader_config.py imports this module through the feedback page, and an account
    # that may run nbgrader without reading grader_tests/ (an exchange-only grader) must still load it.
    from grader_tests.variants import variant_seed

    return variant_seed(_digest(course_key(course_dir), assignment, student))


def variant_id(course_dir, assignment: str, student: str) -> str:
    """What the TA and the student see of a variant: 8 hex digits of a hash of its keyed digest, which
    names the variant and says nothing of the key; "" when the student works with the release's numbers."""
    if not student or not is_on(course_dir, assignment):
        return ""
    return hashlib.sha256(_digest(course_key(course_dir), assignment, student)).hexdigest()[:8]


def checks(assignment: str) -> frozenset[str]:
    """The ids of the checks that judge the varying numbers."""
    from grader_tests.registry import assignment as registered

    return frozenset(registered(assignment).variants.CHECKS) if offered(assignment) else frozenset()


def notebook(assignment: str) -> str | None:
    """The notebook id whose numbers vary, or None."""
    from grader_tests.registry import assignment as registered

    return registered(assignment).variants.NOTEBOOK if offered(assignment) else None


def cells(course_dir, assignment: str, student: str) -> tuple[str, dict[str, str], dict] | None:
    """``(notebook id, {grade id: source}, {grade id: [(old, new)]})`` of ``student``'s input cells and
    the numbers their instructions quote; None without a variant."""
    chosen = seed(course_dir, assignment, student)
    if chosen is None:
        return None
    from grader_tests.registry import assignment as registered

    hook = registered(assignment).variants
    return hook.NOTEBOOK, hook.cells(chosen), hook.edits(chosen)


def seeds_for(course_dir, assignment: str, student: str, base: Callable[[object], int]) -> Callable[[object], int]:
    """``base`` (the course's seed of each check), but ``student``'s variant seed for the checks that
    judge the varying numbers: the expected answers are derived here, never read from the notebook."""
    chosen = seed(course_dir, assignment, student)
    if chosen is None:
        return base
    varying = checks(assignment)
    return lambda check: chosen if check.id in varying else base(check)


def write_cells(nb, course_dir, assignment: str, student: str, notebook_id: str) -> None:
    """Put ``student``'s own numbers into the input cells of ``nb`` (after autograde restored the locked
    cells from the instructor's copy, which holds the release's numbers)."""
    found = cells(course_dir, assignment, student)
    if found is None or found[0] != notebook_id:
        return
    _, sources, edits = found
    for cell in nb.cells:
        grade_id = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
        if grade_id in sources:
            cell.source = sources[grade_id]
        for old, new in edits.get(grade_id, []):
            cell.source = cell.source.replace(old, new)
