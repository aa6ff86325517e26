"""``attention-course prove-checks``: every hidden check of an assignment proved against its answers.

For each notebook of an assignment that has hidden checks, the proofs are:

* the instructor's source notebook passes every check of the notebook, at the check's default seed
  and at fresh ones (the sandboxed grader draws its own seeds, so a check must not depend on ours);
* each wheat (a right answer) passes every check at every seed;
* each chaff (one misconception) fails exactly its ``fails`` at the default seed, and its target at
  every seed;
* every check has a chaff that targets it;
* the release (the source with its solutions cleared, as ``nbgrader generate_assignment`` does)
  fails every check.

Every proof runs the notebook's code cells in this process, in the notebook's folder, as a kernel
would (``grader_tests.proofs.run_cells``), except the cells the assignment's
``answers.PROOF_SKIP_CELLS`` names: cells that only plot or time, which no check reads.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import os
import secrets
import sys
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import nbformat

from attention_platform.console import progress_bar

FRESH_SEEDS = 3


@dataclass(frozen=True)
class Outcome:
    """One proof's result: what was expected, what happened, and, when they differ, why (the
    teaching message a student would see, or what stopped the proof)."""

    assignment: str
    notebook: str
    proof: str
    expected: str
    got: str
    why: str = ""

    @property
    def passed(self) -> bool:
        return self.expected == self.got


def fresh_seeds(count: int = FRESH_SEEDS) -> list[int]:
    return [secrets.randbits(31) for _ in range(count)]


def _listed(ids) -> str:
    return ", ".join(sorted(ids)) if ids else "nothing"


@contextlib.contextmanager
def _as_a_kernel(folder: Path):
    """Student cells run in the notebook's folder (they read its data files), quietly, without a
    display; what they change of the process (threads, figures, the folder) is put back."""
    import torch

    os.environ.setdefault("MPLBACKEND", "Agg")
    cwd, threads = os.getcwd(), torch.get_num_threads()
    os.chdir(folder)
    try:
        with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()), \
                contextlib.redirect_stderr(io.StringIO()):
            warnings.simplefilter("ignore")
            yield
    finally:
        os.chdir(cwd)
        torch.set_num_threads(threads)
        pyplot = sys.modules.get("matplotlib.pyplot")
        if pyplot is not None:
            pyplot.close("all")


def release_of(source: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """The student's copy of ``source``: its solution regions replaced by nbgrader's stub."""
    from nbgrader.preprocessors import ClearSolutions

    release, _ = ClearSolutions().preprocess(nbformat.from_dict(source), {})
    return release


def proof_skip_cells(checks_package: str) -> frozenset:
    """The grade ids of the cells the assignment's ``answers.PROOF_SKIP_CELLS`` lets proofs skip."""
    try:
        answers = importlib.import_module(f"{checks_package}.answers")
    except ModuleNotFoundError as missing:
        if missing.name not in (checks_package, f"{checks_package}.answers"):
            raise
        return frozenset()
    return frozenset(getattr(answers, "PROOF_SKIP_CELLS", ()))


class NotebookProver:
    """The proofs of one notebook: each answer typed into its source, run, then checked."""

    def __init__(self, assignment, notebook: str, folder: Path, seeds: list, skip: frozenset):
        self.assignment, self.notebook, self.folder = assignment, notebook, folder
        self.checks = assignment.notebook_checks[notebook]
        self.seeds, self.skip = seeds, skip
        self.source = nbformat.read(folder / f"{notebook}.ipynb", as_version=4)

    def outcome(self, proof: str, expected: str, got: str, why: str = "") -> Outcome:
        return Outcome(self.assignment.name, self.notebook, proof, expected, got, "" if expected == got else why)

    def run(self, nb: nbformat.NotebookNode) -> dict:
        from grader_tests.proofs import run_cells

        with _as_a_kernel(self.folder):
            return run_cells(nb, skip=self.skip)

    def failing(self, namespace: dict, seed, checks=None) -> dict[str, str]:
        with _as_a_kernel(self.folder):
            return {check.id: verdict.message for check in (checks or self.checks)
                    if not (verdict := check.run_in_process(namespace, seed)).passed}

    def answered(self, proof: str, expected: str, apply) -> tuple[dict | None, Outcome | None]:
        """The namespace of the source with an answer typed in, or the outcome saying why there is none."""
        try:
            nb = apply(self.source)
        except ValueError as exc:  # an edit that does not apply: the notebook changed under the proof
            return None, self.outcome(proof, expected, "not typed in", str(exc))
        return self.run(nb), None

    def passes_everywhere(self, proof: str, apply) -> Outcome:
        expected = "passes every check"
        namespace, stopped = self.answered(proof, expected, apply)
        if stopped:
            return stopped
        errors = namespace["__errors__"]
        if errors:
            cell, error = next(iter(errors.items()))
            return self.outcome(proof, expected, f"cell {cell} raised", f"{type(error).__name__}: {error}")
        for seed in self.seeds:
            failed = self.failing(namespace, seed)
            if failed:
                check, message = next(iter(failed.items()))
                at = "" if seed is None else f" (seed {seed})"
                return self.outcome(proof, expected, f"fails {_listed(failed)}{at}", f"{check}: {message}")
        return self.outcome(proof, expected, expected)

    def fails_as_documented(self, chaff) -> Outcome:
        expected = f"fails {_listed(chaff.fails)}"
        namespace, stopped = self.answered(chaff.name, expected, chaff.apply)
        if stopped:
            return stopped
        failed = self.failing(namespace, None)
        if set(failed) != set(chaff.fails):
            got = f"fails {_listed(failed)}" if failed else "passes every check"
            return self.outcome(chaff.name, expected, got, self._why_not(failed, chaff))
        target = [check for check in self.checks if check.id == chaff.target]
        for seed in self.seeds[1:]:
            if not self.failing(namespace, seed, target):
                return self.outcome(chaff.name, expected, f"passes {chaff.target} (seed {seed})",
                                    f"{chaff.target} passed this wrong answer at seed {seed}")
        return self.outcome(chaff.name, expected, expected)

    @staticmethod
    def _why_not(failed: dict, chaff) -> str:
        unexpected = set(failed) - set(chaff.fails)
        if unexpected:
            check = sorted(unexpected)[0]
            return f"{check} failed it too: {failed[check]}"
        missed = sorted(set(chaff.fails) - set(failed))
        return f"{', '.join(missed)} passed this wrong answer"

    def release_fails_everything(self) -> Outcome:
        expected = "fails every check"
        failed = self.failing(self.run(release_of(self.source)), None)
        passed = [check.id for check in self.checks if check.id not in failed]
        if passed:
            return self.outcome("release", expected, f"passes {_listed(passed)}",
                                f"{passed[0]} passes the unanswered notebook")
        return self.outcome("release", expected, expected)


def unproved(assignment) -> list[Outcome]:
    """A check no chaff targets, and a proof of a notebook without hidden checks."""
    outcomes = []
    chaffed = {proof.target for proof in assignment.chaffs}
    for check in assignment.checks:
        if check.id not in chaffed:
            outcomes.append(Outcome(assignment.name, check.notebook, f"chaff for {check.id}", "a chaff targets it",
                                    "none", f"no chaff in answers.CHAFFS has target={check.id!r}"))
    known = set(assignment.notebook_checks)
    for proof in assignment.wheats + assignment.chaffs:
        if proof.notebook not in known:
            outcomes.append(Outcome(assignment.name, proof.notebook, proof.name, "a notebook with hidden checks",
                                    "no such notebook", f"{proof.notebook!r} is not one of {_listed(known)}"))
    return outcomes


def proof_count(assignment) -> int:
    """How many proofs :func:`proved` runs (for its progress bar)."""
    return sum(2 + sum(p.notebook == notebook for p in assignment.wheats + assignment.chaffs)
               for notebook in assignment.notebook_checks)


def proved(assignment, course: Path, seeds: list, checks_package: str) -> Iterator[Outcome]:
    """The proofs of every notebook of ``assignment`` (a registry entry), from ``course/source``, one by one."""
    skip = proof_skip_cells(checks_package)
    folder = course / "source" / assignment.name
    for notebook in assignment.notebook_checks:
        prover = NotebookProver(assignment, notebook, folder, seeds, skip)
        yield prover.passes_everywhere("instructor's solution", lambda nb: nb)
        for wheat in assignment.wheats:
            if wheat.notebook == notebook:
                yield prover.passes_everywhere(wheat.name, wheat.apply)
        for chaff in assignment.chaffs:
            if chaff.notebook == notebook:
                yield prover.fails_as_documented(chaff)
        yield prover.release_fails_everything()


def table(outcomes: list[Outcome]) -> str:
    header = ("assignment", "notebook", "proof", "expected", "got")
    rows = [header] + [(o.assignment, o.notebook, o.proof, o.expected, o.got) for o in outcomes]
    widths = [max(len(row[i]) for row in rows) for i in range(len(header) - 1)]
    return "\n".join("  ".join(cell.ljust(width) for cell, width in zip(row, widths)) + "  " + row[-1]
                     for row in rows)


def failures_text(outcomes: list[Outcome]) -> str:
    failed = [o for o in outcomes if not o.passed]
    lines = [f"{len(failed)} of {len(outcomes)} proofs failed:"]
    lines += [f"- {o.assignment}/{o.notebook}: {o.proof}: expected {o.expected}, got {o.got}. Why: {o.why}"
              for o in failed]
    return "\n".join(lines)


def checks_from(course: Path | None):
    """The registry of the course's hidden checks: those of ``course/grader_tests`` when a course is
    named (put first on the import path), else the ones Python imports; and the course they are in."""
    if course is not None:
        course = Path(course).resolve()
        loaded = sys.modules.get("grader_tests")
        if loaded is not None and Path(loaded.__file__).resolve().parent != course / "grader_tests":
            raise SystemExit(f"prove-checks: the hidden checks of {Path(loaded.__file__).parent} are loaded "
                             f"already; run the command from {course} or with PYTHONPATH={course}")
        sys.path.insert(0, str(course))
    from grader_tests import registry

    return registry, Path(registry.__file__).resolve().parents[1]


def prove_checks(names: list[str], seeds: list[int] | None = None, course: Path | None = None,
                 out=None, err=None) -> int:
    """The command: prove the named assignments (every one when none is named); 0 when every proof
    holds, 1 naming each that failed and why, 2 for an assignment the course does not have."""
    out, err = out or sys.stdout, err or sys.stderr
    registry, course = checks_from(course)
    try:
        chosen = [registry.assignment(name) for name in names] or list(registry.ASSIGNMENTS.values())
    except registry.UnknownAssignment as unknown:
        print(f"prove-checks: {unknown}", file=err)
        return 2
    seeds = [None, *(fresh_seeds() if seeds is None else seeds)]
    print(f"Proving {', '.join(a.name for a in chosen)} at each check's default seed and at "
          f"{'seed' if len(seeds) == 2 else 'seeds'} {', '.join(map(str, seeds[1:]))} (give them again with "
          "--seed to repeat this run).", file=out)
    outcomes = [outcome for assignment in chosen for outcome in unproved(assignment)]
    with progress_bar(sum(map(proof_count, chosen)), "proving", stream=err, unit="proof") as bar:
        for assignment in chosen:
            for outcome in proved(assignment, course, seeds, f"{registry.__package__}.{assignment.name}"):
                outcomes.append(outcome)
                bar.update()
    print(table(outcomes), file=out)
    if all(outcome.passed for outcome in outcomes):
        print(f"All {len(outcomes)} proofs hold.", file=out)
        return 0
    print(failures_text(outcomes), file=err)
    return 1
