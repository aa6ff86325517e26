"""What Validate tells a student: which answers are still to do, which cells raise, the verdicts
of the public checks (where the warm Validate ran them), and that the hidden checks are *not* run.

nbgrader's own Validate runs the notebook and looks only at its test cells; ours hold no
code in the student's copy (the hidden checks are added back at grading), so it said
"Success! Your notebook passes all the tests" for an untouched notebook. This module is the
one place that decides what Validate says, from the notebook as the student wrote it and the
same notebook after it ran:

* ``ValidationReport.from_notebooks(written, executed)`` builds the verdict;
* ``report.to_json()`` is what the Lab's Validate button shows (headline, one item per
  problem, the note about hidden checks);
* ``validate_file(path)`` runs a notebook with nbgrader's Validator settings and returns
  the report (the student's Jupyter Server calls it; a faster, sandboxed runner can call
  ``ValidationReport.from_notebooks`` with its own executed copy).

Nothing here runs or reveals a hidden check; a public check's verdict comes only from the validate
service's judges (``PublicCheck``), never from what the notebook printed.
"""

from __future__ import annotations

import ast
import re
from dataclasses import asdict, dataclass, field

import nbformat

HIDDEN_CHECKS_NOTE = (
    "Validate runs your notebook from top to bottom, then its public checks; it does not run the hidden "
    "checks. They run after you submit, and your feedback shows each one with ✓ or a message."
)
# Where Validate ran in a kernel (no validate service: Docker, Kubernetes, or the service was unreachable).
NO_PUBLIC_CHECKS_NOTE = (
    "This Validate ran your notebook in a plain kernel, so no check ran, not even the public ones: they need "
    "the course's validate service, which this server cannot reach. Every check, public or hidden, runs "
    "after you submit, and your feedback shows each one with ✓ or a message."
)
READY = "Your notebook runs without errors — hidden checks run after you submit."
STUB = re.compile(r"^\s*raise\s+NotImplementedError\b", re.MULTILINE)
UNANSWERED_MARKDOWN = "YOUR ANSWER HERE"


@dataclass
class Problem:
    cell: int  # 1-based position in the notebook
    kind: str  # "unanswered" | "raises"
    where: str  # how a student finds the cell: its first line, or the heading above it
    message: str  # one kind sentence saying what to do

    @property
    def text(self) -> str:
        return f"Cell {self.cell} ({self.where}): {self.message}"


@dataclass(frozen=True)
class PublicCheck:
    """One public check as Validate shows it: the catalogue's title and the judge's verdict, both
    written by the validate service (``attention_platform.grading.validate_service``)."""

    title: str
    passed: bool
    message: str  # why it failed ("" if it passed)

    @property
    def text(self) -> str:
        return f"✓ {self.title}" if self.passed else f"✗ {self.title} {self.message}"


@dataclass
class ValidationReport:
    notebook: str
    problems: list[Problem] = field(default_factory=list)
    ran: bool = True  # False when the notebook could not be run at all
    run_error: str = ""
    public_checks: list[PublicCheck] | None = None  # None: run in a kernel, which runs no check

    @property
    def failing_checks(self) -> list[PublicCheck]:
        return [check for check in self.public_checks or [] if not check.passed]

    @property
    def ok(self) -> bool:
        return self.ran and not self.problems and not self.failing_checks

    @property
    def note(self) -> str:
        return NO_PUBLIC_CHECKS_NOTE if self.public_checks is None else HIDDEN_CHECKS_NOTE

    @property
    def headline(self) -> str:
        if not self.ran:
            return f"Validate could not run {self.notebook}: {self.run_error}"
        if self.ok:
            return READY  # its public checks, all passed, are listed below it
        unanswered = sum(p.kind == "unanswered" for p in self.problems)
        raising = len(self.problems) - unanswered
        failing = len(self.failing_checks)
        parts = []
        if unanswered:
            parts.append(f"{unanswered} answer{'s' if unanswered != 1 else ''} still to write")
        if raising:
            parts.append(f"{raising} cell{'s' if raising != 1 else ''} raising an error")
        if failing:
            parts.append(f"{failing} public check{'s' if failing != 1 else ''} failing")
        return f"Not ready yet: {_join(parts)}."

    def to_json(self) -> dict:
        return {"notebook": self.notebook, "ok": self.ok, "ran": self.ran, "headline": self.headline,
                "problems": [dict(asdict(p), text=p.text) for p in self.problems],
                "public_checks": [dict(asdict(c), text=c.text) for c in self.public_checks or []],
                "note": self.note}

    def text(self) -> str:
        lines = ([self.headline] + [f"  - {p.text}" for p in self.problems]
                 + [f"  {c.text}" for c in self.public_checks or []] + [self.note])
        return "\n".join(lines)

    # ------------------------------------------------------------------ building one

    @classmethod
    def from_notebooks(cls, written: nbformat.NotebookNode, executed: nbformat.NotebookNode | None,
                       name: str = "notebook") -> "ValidationReport":
        """``written``: the notebook as saved; ``executed``: the same after a top-to-bottom run
        (None: it was not run). Every unanswered solution cell is named; every cell whose run
        raised is named once, with its error's first line."""
        report = cls(notebook=name)
        headings = _headings(written)
        unanswered: set[int] = set()
        for index, cell in enumerate(written.cells):
            if not _is_answer(cell):
                continue
            stubs = _stubbed(cell)
            if stubs is not None:
                unanswered.add(index)
                report.problems.append(Problem(index + 1, "unanswered", _where(cell, headings[index]), stubs))
        if executed is not None:
            for index, cell in enumerate(executed.cells):
                error = _first_error(cell)
                if error is None or index in unanswered:
                    continue
                if error.startswith("NotImplementedError") and unanswered:
                    continue  # the stub above, called from a cell that only tries it out
                report.problems.append(Problem(index + 1, "raises", _where(cell, headings[index]),
                                               f"running it raised {error}. Fix it and run the notebook again "
                                               "from the top (Kernel → Restart Kernel and Run All Cells)."))
        report.problems.sort(key=lambda p: p.cell)
        return report


def _is_answer(cell) -> bool:
    meta = cell.get("metadata", {}).get("nbgrader", {})
    return bool(meta.get("solution"))


def _stubbed(cell) -> str | None:
    """What is still to do in an answer cell, or None if it looks answered."""
    if cell.cell_type == "markdown":
        if UNANSWERED_MARKDOWN in cell.source:
            return "your written answer is still to do: replace “YOUR ANSWER HERE” with it."
        return None
    if not STUB.search(cell.source):
        return None
    names = _stubbed_functions(cell.source)
    if names:
        listed = _join(names)
        verb = "raises" if len(names) == 1 else "raise"
        return f"{listed} still {verb} NotImplementedError: replace each stub with your code."
    return "the cell still raises NotImplementedError: replace the stub with your code."


def _stubbed_functions(source: str) -> list[str]:
    """Qualified names of the functions whose body still raises NotImplementedError."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    found: list[str] = []

    def raises_stub(fn) -> bool:
        return any(isinstance(node, ast.Raise) and _names_not_implemented(node.exc) for node in ast.walk(fn))

    def visit(body, prefix):
        for node in body:
            if isinstance(node, ast.ClassDef):
                visit(node.body, prefix + node.name + ".")
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and raises_stub(node):
                found.append(prefix + node.name)

    visit(tree.body, "")
    return found


def _names_not_implemented(exc) -> bool:
    target = exc.func if isinstance(exc, ast.Call) else exc
    return isinstance(target, ast.Name) and target.id == "NotImplementedError"


def _first_error(cell) -> str | None:
    for output in cell.get("outputs", []) if cell.cell_type == "code" else []:
        if output.get("output_type") == "error":
            value = str(output.get("evalue", "")).strip().splitlines()
            first = value[0] if value else ""
            first = first if len(first) <= 200 else first[:200] + "…"
            return f"{output.get('ename', 'Error')}: {first}" if first else str(output.get("ename", "Error"))
    return None


def _headings(nb) -> list[str]:
    """For each cell, the last markdown heading at or above it."""
    current, out = "", []
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            for line in cell.source.splitlines():
                if line.startswith("#"):
                    current = line.lstrip("#").strip()
                    break
        out.append(current)
    return out


def _where(cell, heading: str) -> str:
    if cell.cell_type == "code":
        for line in cell.source.splitlines():
            stripped = line.strip()
            if stripped and not stripped.startswith("#"):
                start = stripped if len(stripped) <= 50 else stripped[:50] + "…"
                return f"under “{heading}”, starting “{start}”" if heading else f"starting “{start}”"
    return f"under “{heading}”" if heading else "a written answer"


def _join(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def validate_file(path: str, config=None, validator_class=None) -> ValidationReport:
    """Run the notebook at ``path`` as nbgrader's Validate does (same kernel settings, from the
    notebook's folder) and report on it. ``validator_class``: nbgrader's ``Validator`` or one
    that runs the cells elsewhere (a hub user's server passes ``hub.warm_validate.WarmValidator``,
    which runs them in a warm sandbox); the report is built the same way from what it returns."""
    import os

    from nbgrader import utils
    from nbgrader.validator import Validator

    from attention_platform import bounded_json

    name = os.path.basename(path)
    try:
        written = bounded_json.read_notebook(path)
    except bounded_json.TooComplex as exc:
        return ValidationReport(notebook=name, ran=False, run_error=f"it is too large or complex to validate ({exc})")
    validator_class = validator_class or Validator
    validator = validator_class(config=config) if config is not None else validator_class()
    if validator.has_trait("validating"):  # the sandbox gets the notebook under its own name
        validator.validating = name
    try:
        with utils.chdir(os.path.dirname(os.path.abspath(path))):
            executed = validator._preprocess(nbformat.from_dict(written))
    except Exception as exc:  # noqa: BLE001 - a kernel that would not start is reported, not raised
        report = ValidationReport.from_notebooks(written, None, name)
        report.ran = False
        if isinstance(exc, bounded_json.TooComplex):  # what its cells printed, back from the sandbox
            report.run_error = f"it is too large or complex to validate ({exc})"
        else:
            report.run_error = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0][:200] if str(exc).strip() else ''}"
        return report
    report = ValidationReport.from_notebooks(written, executed, name)
    if validator.has_trait("public_checks"):  # None when the warm path fell back to a kernel
        report.public_checks = validator.public_checks
    return report
