"""Every hidden check of the course, by id: its definition (``catalogue``) bound to the probe that
runs in the sandbox (``sandbox_probes``) and the request builder and judge that run here (the
``*_judges`` modules). Check ids are the nbgrader grade ids of the test cells that run them
(``grade_id == "check_" + id``)."""

from __future__ import annotations

from dataclasses import dataclass
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
    return [Check(definition, judges[definition.id].build_request, probes[definition.id], judges[definition.id].judge)
            for definition in catalogue.HIDDEN_CHECKS]


ALL_CHECKS: list[Check] = _bind()
CHECKS: dict[str, Check] = {check.id: check for check in ALL_CHECKS}
# Notebook (nbgrader notebook id) -> the checks its hidden test cells run, in the notebook's order.
NOTEBOOK_CHECKS: dict[str, list[Check]] = {
    part.notebook: [CHECKS[c.id] for c in part.checks] for part in catalogue.PARTS if part.checks
}


def check_for_grade_id(grade_id: str) -> Check | None:
    if grade_id.startswith(GRADE_ID_PREFIX):
        return CHECKS.get(grade_id[len(GRADE_ID_PREFIX):])
    return None
