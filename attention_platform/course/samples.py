"""Sample students of an assignment, made of the answers that prove its hidden checks.

An assignment's wheats (right answers) and chaffs (one misconception each, with the exact checks it
fails) are typed into the instructor's notebooks (``grader_tests.proofs.Proof``); what a student who
wrote one hands in is the released notebook with every answer cell filled in from that copy. The
demo grades such a class, the benchmarks and the load test generate larger ones."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import nbformat

from grader_tests.proofs import Proof, solved

# Who hands in what in the demo: the instructor's answers, the first wheat, then a chaff each,
# then the untouched release.
NAMES = ("ada", "gia", "ben", "chloe", "dev", "eve", "finn")
CHAFF_STUDENTS = 4


@dataclass(frozen=True)
class SampleStudent:
    name: str
    answer: str  # what the demo's table calls the answer handed in
    proof: Proof | None = None  # None: the instructor's answers, or nothing typed in if ``untouched``
    untouched: bool = False

    @property
    def notebooks(self) -> tuple[str, ...] | None:
        """The notebook ids handed in: the proof's alone; None for every notebook of the assignment."""
        return (self.proof.notebook,) if self.proof else None


def typed_in(release: nbformat.NotebookNode, source: nbformat.NotebookNode,
             proof: Proof | None) -> nbformat.NotebookNode:
    """``release`` as a student who wrote ``proof`` hands it in (None: the instructor's answers)."""
    return solved(release, proof.apply(source) if proof else source)


def handed_in(course: Path, assignment: str, notebook: str, proof: Proof | None = None,
              untouched: bool = False) -> nbformat.NotebookNode:
    """The file a student hands in for ``notebook`` (an nbgrader notebook id) of the course's release."""
    release = nbformat.read(course / "release" / assignment / f"{notebook}.ipynb", as_version=4)
    if untouched:
        return release
    return typed_in(release, nbformat.read(course / "source" / assignment / f"{notebook}.ipynb", as_version=4), proof)


def sample_class(assignment) -> list[SampleStudent]:
    """The demo's class for ``assignment`` (a ``grader_tests.registry.AssignmentChecks``): the
    instructor's answers, the first wheat, chaffs aimed at different checks, and the release as
    fetched; the names are fixed, so a class reads the same on every run."""
    students = [SampleStudent(NAMES[0], "the instructor's answers")]
    if assignment.wheats:
        students.append(SampleStudent(NAMES[1], assignment.wheats[0].name, assignment.wheats[0]))
    targets: set[str] = set()
    chaffs = []
    for chaff in assignment.chaffs:
        if chaff.target not in targets and len(chaffs) < CHAFF_STUDENTS:
            targets.add(chaff.target)
            chaffs.append(chaff)
    students += [SampleStudent(name, chaff.name, chaff) for name, chaff in zip(NAMES[2:], chaffs)]
    students.append(SampleStudent(NAMES[-1], "nothing (the release as fetched)", untouched=True))
    return students


def proofs_of(assignment, notebook: str) -> tuple[list[Proof], list[Proof]]:
    """The wheats and the chaffs typed into ``notebook``: what a generated class is made of."""
    return ([p for p in assignment.wheats if p.notebook == notebook],
            [p for p in assignment.chaffs if p.notebook == notebook])
