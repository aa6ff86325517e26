"""Every assignment of the course and every hidden check, by id: the only door the platform uses.

An assignment's checks are its catalogue's definitions bound to the probes that run in the sandbox and
the request builders and judges that run here. Check ids are unique across the course and are the
nbgrader grade ids of the test cells that run them (``grade_id == "check_" + id``). The layout an
assignment follows is on the instructors' page docs/instructors/writing-an-assignment.md."""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from functools import cached_property
from types import ModuleType
from typing import Callable

from . import discovery
from .catalogue import GRADE_ID_PREFIX, HiddenCheck
from .judging import JudgeFailure, Message, Verdict
from .reasons import screened

# The modules the sandbox loads its probes from: every assignment's ``probes``.
PROBE_MODULES = tuple(discovery.module_name(name, discovery.PROBES) for name in discovery.assignment_names())
# Replaced by empty modules inside a sandbox: a notebook importing a reference finds nothing in it.
REFERENCE_MODULES = tuple(discovery.module_name(name, discovery.REFERENCE) for name in discovery.assignment_names()
                          if discovery.has_module(name, discovery.REFERENCE))


@dataclass(frozen=True)
class Check:
    definition: HiddenCheck
    build_request: Callable[[int], Message]
    probe: Callable[[dict, Message], Message]
    judge_response: Callable[[Message, Message], None]
    assignment: str = ""

    @property
    def id(self) -> str:
        return self.definition.id

    @property
    def title(self) -> str:
        return self.definition.title

    @property
    def points(self) -> int:
        return self.definition.points

    @property
    def misconception(self) -> str:
        return self.definition.misconception

    @property
    def notebook(self) -> str:
        return self.definition.notebook

    def judge(self, request: Message, response: Message) -> Verdict:
        """Pass, or fail with the teaching message (the judge's ``JudgeFailure``). The judge reads the
        reply's errors as reasons of a fixed form only (``reasons.screened``)."""
        try:
            self.judge_response(request, screened(response))
        except JudgeFailure as failure:
            return Verdict(False, str(failure))
        return Verdict(True)

    def default_seed(self) -> int:
        """A fixed per-check seed, so the stock path grades reproducibly."""
        import zlib

        return zlib.crc32(self.id.encode()) & 0x7FFFFFFF

    def run_in_process(self, namespace: dict, seed: int | None = None) -> Verdict:
        """Probe and judge back to back (the stock, in-kernel path)."""
        request = self.build_request(self.default_seed() if seed is None else seed)
        return self.judge(request, self.probe(namespace, request))


class UnknownAssignment(LookupError):
    """An assignment name the course has no checks for."""


@dataclass(frozen=True)
class AssignmentChecks:
    """One assignment as the platform sees it: its parts (one per notebook, in the order students work
    through them), its checks and written answers, the answers that prove the checks, and what its
    feedback pages draw (``pictures``, or None) and how each student's numbers are drawn (``variants``,
    or None: grader_tests/variants.py)."""

    name: str
    parts: tuple
    checks: list
    # Loaded when asked: the proofs and the pictures import what grading an attempt never needs.
    load_proofs: Callable[[], tuple[list, list]] = field(default=lambda: ([], []), repr=False, compare=False)
    pictures_module: str | None = None
    variants_module: str | None = None

    @cached_property
    def wheats(self) -> list:
        return self.load_proofs()[0]

    @cached_property
    def chaffs(self) -> list:
        return self.load_proofs()[1]

    @cached_property
    def pictures(self) -> ModuleType | None:
        return importlib.import_module(self.pictures_module) if self.pictures_module else None

    @cached_property
    def variants(self) -> ModuleType | None:
        return importlib.import_module(self.variants_module) if self.variants_module else None

    @property
    def notebooks(self) -> tuple[str, ...]:
        return tuple(part.notebook for part in self.parts)

    @property
    def notebook_checks(self) -> dict[str, list[Check]]:
        by_id = {check.id: check for check in self.checks}
        return {part.notebook: [by_id[c.id] for c in part.checks] for part in self.parts if part.checks}

    @property
    def written(self) -> list:
        return [answer for part in self.parts for answer in part.written]

    @property
    def auto_points(self) -> int:
        return sum(part.auto_points for part in self.parts)

    @property
    def ta_points(self) -> int:
        return sum(part.ta_points for part in self.parts)

    @property
    def points(self) -> int:
        return self.auto_points + self.ta_points


class DuplicateCheck(ValueError):
    """Two checks of the course with one id: a grade id must name one check."""


def _proofs_of(name: str) -> Callable[[], tuple[list, list]]:
    def load() -> tuple[list, list]:
        if not discovery.has_module(name, discovery.ANSWERS):
            return [], []
        answers = importlib.import_module(discovery.module_name(name, discovery.ANSWERS))
        return list(getattr(answers, "WHEATS", [])), list(getattr(answers, "CHAFFS", []))

    return load


def _discover(name: str) -> AssignmentChecks:
    """One assignment's catalogue bound to its probes and judges; a check without exactly one of each
    is an error naming it."""
    catalogue = importlib.import_module(discovery.module_name(name, discovery.CATALOGUE))
    probes = importlib.import_module(discovery.module_name(name, discovery.PROBES))
    judges_module = importlib.import_module(discovery.module_name(name, discovery.JUDGES))
    parts = tuple(catalogue.PARTS)
    definitions = [check for part in parts for check in part.checks]
    probe_by_id = {entry.id: entry.probe for entry in probes.CHECKS}
    judge_by_id = {entry.id: entry for entry in judges_module.JUDGES}
    ids = [check.id for check in definitions]
    for what, found, count in (("probe", probe_by_id, len(probes.CHECKS)),
                               ("judge", judge_by_id, len(judges_module.JUDGES))):
        if set(found) != set(ids) or count != len(ids) or len(set(ids)) != len(ids):
            raise ValueError(f"assignment {name!r}: every check of its catalogue needs exactly one {what}; "
                             f"without one: {sorted(set(ids) - set(found))}, without a check: "
                             f"{sorted(set(found) - set(ids))}, duplicated ids: "
                             f"{sorted({i for i in ids if ids.count(i) > 1})}")
    checks = [Check(d, judge_by_id[d.id].build_request, probe_by_id[d.id], judge_by_id[d.id].judge, name)
              for d in definitions]
    pictures = (discovery.module_name(name, discovery.PICTURES)
                if discovery.has_module(name, discovery.PICTURES) else None)
    variants = (discovery.module_name(name, discovery.VARIANTS)
                if discovery.has_module(name, discovery.VARIANTS) else None)
    return AssignmentChecks(name, parts, checks, _proofs_of(name), pictures, variants)


def _course() -> dict[str, AssignmentChecks]:
    found = {name: _discover(name) for name in discovery.assignment_names()}
    owner: dict[str, str] = {}
    for name, checks in found.items():
        for check in checks.checks:
            if check.id in owner:
                raise DuplicateCheck(f"check id {check.id!r} is defined by both {owner[check.id]!r} and {name!r}; "
                                     "a check id must be unique across the course (it is the test cell's grade id)")
            owner[check.id] = name
    return found


ASSIGNMENTS: dict[str, AssignmentChecks] = _course()
ALL_CHECKS: list[Check] = [check for found in ASSIGNMENTS.values() for check in found.checks]
CHECKS: dict[str, Check] = {check.id: check for check in ALL_CHECKS}


def assignment(name: str) -> AssignmentChecks:
    """The assignment called ``name``, or :class:`UnknownAssignment` naming the ones there are."""
    try:
        return ASSIGNMENTS[name]
    except KeyError:
        known = ", ".join(ASSIGNMENTS) or "none"
        raise UnknownAssignment(f"no assignment called {name!r} has hidden checks in grader_tests/ "
                                f"(the course has: {known})") from None


def picture_modules() -> list[ModuleType]:
    """The ``pictures`` of every assignment that draws some on its feedback pages. One provides
    ``ANCHOR_CHECK`` (the check whose feedback carries the picture), ``TEACHING_PROBE`` (the probe asked
    for what is drawn), ``teaching()`` (its request first), ``teaching_picture(reply)`` (a PNG and its
    alt text, or None), ``warm()`` and ``save_measurements()``."""
    return [found.pictures for found in ASSIGNMENTS.values() if found.pictures is not None]


def check_for_grade_id(grade_id: str) -> Check | None:
    if grade_id.startswith(GRADE_ID_PREFIX):
        return CHECKS.get(grade_id[len(GRADE_ID_PREFIX):])
    return None
