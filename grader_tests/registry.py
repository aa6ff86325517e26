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

from . import by_hand_judges, catalogue, experiment_judges, head_judges, sandbox_probes, self_attention_judges
from . import shapes_judges
from .catalogue import GRADE_ID_PREFIX, HiddenCheck
from .judging import JudgeFailure, Message, Verdict
from .reasons import screened

# The module the sandbox loads its probes from (see sandbox_probes).
PROBE_MODULE = sandbox_probes.__name__


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


def _bind() -> list[Check]:
    probes = {entry.id: entry.probe for entry in sandbox_probes.CHECKS}
    judges = {entry.id: entry for module in (self_attention_judges, by_hand_judges, head_judges, shapes_judges,
                                             experiment_judges) for entry in module.JUDGES}
    ids = [check.id for check in catalogue.HIDDEN_CHECKS]
    assert set(probes) == set(judges) == set(ids) and len(probes) == len(sandbox_probes.CHECKS), \
        "every check in the catalogue needs exactly one probe and one judge"
    return [Check(definition, judges[definition.id].build_request, probes[definition.id], judges[definition.id].judge,
                  "self_attention")
            for definition in catalogue.HIDDEN_CHECKS]


class UnknownAssignment(LookupError):
    """An assignment name the course has no checks for."""


@dataclass(frozen=True)
class AssignmentChecks:
    """One assignment as the platform sees it: its parts (one per notebook, in the order students work
    through them), its checks and written answers, the answers that prove the checks, and what its
    feedback pages draw (``pictures``, or None)."""

    name: str
    parts: tuple
    checks: list
    # Loaded when asked: the proofs and the pictures import what grading an attempt never needs.
    load_proofs: Callable[[], tuple[list, list]] = field(default=lambda: ([], []), repr=False, compare=False)
    pictures_module: str | None = None

    @cached_property
    def wheats(self) -> list:
        return self.load_proofs()[0]

    @cached_property
    def chaffs(self) -> list:
        return self.load_proofs()[1]

    @cached_property
    def pictures(self) -> ModuleType | None:
        return importlib.import_module(self.pictures_module) if self.pictures_module else None

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


def _self_attention_proofs() -> tuple[list, list]:
    from . import answers, answers_parts
    from .proofs import Proof, edits

    def typed(answer):
        return lambda nb: answers.with_answer(nb, answer.code)

    core = [Proof(a.name, "self_attention", typed(a), a.target, a.fails) for a in answers.CORRECT + answers.BUGGY]
    parts = [Proof(a.name, a.notebook, edits(*a.edits), a.target, a.fails)
             for a in answers_parts.CORRECT + answers_parts.BUGGY]
    proofs = core + parts
    return [p for p in proofs if not p.is_chaff], [p for p in proofs if p.is_chaff]


ALL_CHECKS: list[Check] = _bind()
CHECKS: dict[str, Check] = {check.id: check for check in ALL_CHECKS}
# Notebook (nbgrader notebook id) -> the checks its hidden test cells run, in the notebook's order.
NOTEBOOK_CHECKS: dict[str, list[Check]] = {
    part.notebook: [CHECKS[c.id] for c in part.checks] for part in catalogue.PARTS if part.checks
}


def _self_attention() -> AssignmentChecks:
    return AssignmentChecks("self_attention", catalogue.PARTS, ALL_CHECKS, _self_attention_proofs,
                            f"{__package__}.pictures")


ASSIGNMENTS: dict[str, AssignmentChecks] = {"self_attention": _self_attention()}


def assignment(name: str) -> AssignmentChecks:
    """The assignment called ``name``, or :class:`UnknownAssignment` naming the ones there are."""
    try:
        return ASSIGNMENTS[name]
    except KeyError:
        known = ", ".join(ASSIGNMENTS) or "none"
        raise UnknownAssignment(f"no assignment called {name!r} has hidden checks in grader_tests/ "
                                f"(the course has: {known})") from None


def check_for_grade_id(grade_id: str) -> Check | None:
    if grade_id.startswith(GRADE_ID_PREFIX):
        return CHECKS.get(grade_id[len(GRADE_ID_PREFIX):])
    return None
