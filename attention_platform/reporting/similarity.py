"""The similarity report: pairs of students whose answers are unusually alike, for the TAs to look at.

What is compared is each student's *solution regions*: the code cells nbgrader marks as solutions, less
the lines the release itself put there (the class skeleton, ``# YOUR CODE HERE``, the prints). The
fingerprints are copydetect's (the method of MOSS): Pygments tokenizes the code, every identifier becomes
one letter, comments and whitespace go, and the winnowed hashes of its k-grams are kept, each with where
it came from so the page can mark the shared code in both cells.

Alike is weighed, not counted: independent correct answers of a short function are alike. A shared
fingerprint weighs log(students / students who have it), and nothing when a known correct answer has it
(the instructor's solution and the assignment's wheats, typed into the release as a student would:
``grader_tests.proofs``). Two more reasons come from outside the code and weigh by rarity too: the
same set of failing hidden checks (the same misconception) when few students fail exactly that set (read
from the gradebook), and the same numbers printed by a solution cell when no other student prints them
(a wrong number of a by-hand part reached twice). Where each student has numbers of their own (by-hand
variants, attention_platform/course/variants.py), students of different variants who print the same
numbers in that notebook are the strongest reason, however many share them: the numbers are wrong for
at least one of them.

The page points at what to look at and accuses no one (:data:`NOTICE`); it is built here with every
value escaped and carries no script.
"""

from __future__ import annotations

import html
import io
import itertools
import math
import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import nbformat

from attention_platform.course import variants

# copydetect's k-gram length and winnowing window, in characters of the normalised code: a solution
# region is a few lines, so both are far below copydetect's defaults (made for whole files).
K = 12
WINDOW = 3
# A fingerprint that more than this share of the class holds is common knowledge: it is left out of the
# pair count, which would otherwise grow with the square of the class.
COMMON_SHARE = 0.5
# Rarity cannot be told from a handful of submissions: a smaller class is weighed as one of this size.
SMALLEST_CLASS = 10
# A set of failing checks is rare when at most this share of the class fails exactly that set.
RARE_FAILURES_SHARE = 0.1
# A shared rare set of failing checks, and the same printed numbers, weigh as much as this many
# fingerprints that only the two students hold.
FAILED_SET_WEIGHT = 4.0
NUMBERS_WEIGHT = 6.0
# The same numbers in the notebooks of two different variants weigh this many times a rare printed number.
VARIANT_NUMBERS_FACTOR = 2.0
# What one cell and one notebook may cost to read: a region beyond this is cut (and said).
MAX_REGION_CHARS = 20_000
MAX_NOTEBOOK_BYTES = 20_000_000
MIB = 2**20
# Students named at most in the note of those left out of a report (the count says the rest).
MAX_NAMED_LEFT_OUT = 100
DEFAULT_PAIRS = 30

NOTICE = ("This report points at what to look at; it accuses no one. Answers can be alike for innocent "
          "reasons: a study group that talked about ideas, the same tutorial, the same hint from a TA, a "
          "short task with one natural answer. Read both cells, and talk with each student before "
          "drawing any conclusion.")

_NUMBER = re.compile(r"-?\d+\.\d+(?:[eE][-+]?\d+)?|-?\d+[eE][-+]?\d+")


class SimilarityError(Exception):
    """Bad input, with a message meant for the person asking for the report."""


@dataclass
class CellMatch:
    notebook: str
    cell: str  # the solution cell's nbgrader grade id
    weight: float
    first_code: str  # HTML: the first student's region, the shared code marked
    second_code: str
    rare: int  # fingerprints only these two students hold, and no known correct answer
    numbers: list[str] = field(default_factory=list)  # printed numbers only these two show


@dataclass
class Pair:
    first: str
    second: str
    score: float
    reasons: list[str]
    cells: list[CellMatch]


@dataclass
class SimilarityData:
    assignment: str
    generated: str
    students: list[str]
    pairs: list[Pair]
    notes: list[str] = field(default_factory=list)


# ---------------------------------------------------------------- reading the notebooks

def _solution_cells(nb: nbformat.NotebookNode) -> dict[str, nbformat.NotebookNode]:
    found = {}
    for cell in nb.cells:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if cell.get("cell_type") == "code" and meta.get("solution") and isinstance(meta.get("grade_id"), str):
            found.setdefault(meta["grade_id"], cell)
    return found


def _source(cell) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else str(source)


def solution_regions(handed_in: nbformat.NotebookNode, release: nbformat.NotebookNode) -> dict[str, str]:
    """``{grade id: the student's own code}`` for each solution cell of ``release``: the handed-in
    cell's lines less those the released cell has (the skeleton and its prints), blank lines dropped.
    Cells a student added or re-labelled are not the release's, so they are not read."""
    released = _solution_cells(release)
    regions = {}
    for grade_id, cell in _solution_cells(handed_in).items():
        if grade_id not in released:
            continue
        given = {line.strip() for line in _source(released[grade_id]).splitlines()}
        own = [line for line in _source(cell)[:MAX_REGION_CHARS].splitlines() if line.strip() and line.strip() not in given]
        if own:
            regions[grade_id] = "\n".join(own)
    return regions


def printed_numbers(handed_in: nbformat.NotebookNode, release: nbformat.NotebookNode) -> dict[str, tuple[str, ...]]:
    """``{grade id: the numbers the cell's saved outputs show, in order}`` for the release's solution cells."""
    released = _solution_cells(release)
    found = {}
    for grade_id, cell in _solution_cells(handed_in).items():
        if grade_id not in released:
            continue
        text = []
        for output in cell.get("outputs", []) or []:
            if output.get("output_type") == "stream":
                text.append(_source({"source": output.get("text", "")}))
            elif output.get("output_type") in ("execute_result", "display_data"):
                text.append(_source({"source": (output.get("data") or {}).get("text/plain", "")}))
        numbers = tuple(_NUMBER.findall("".join(text)[:MAX_REGION_CHARS]))
        if numbers:
            found[grade_id] = numbers
    return found


def _read(path: Path) -> nbformat.NotebookNode:
    if path.stat().st_size > MAX_NOTEBOOK_BYTES:
        raise ValueError(f"larger than {MAX_NOTEBOOK_BYTES // 1_000_000} MB")
    return nbformat.read(path, as_version=4)


# ---------------------------------------------------------------- fingerprints and weights

def _fingerprint(code: str):
    from copydetect import CodeFingerprint

    return CodeFingerprint("answer.py", K, WINDOW, fp=io.StringIO(code), language="python")


def _marked(code: str, slices) -> str:
    from copydetect.utils import highlight_overlap

    if len(slices) == 0 or slices.shape[-1] == 0:
        return html.escape(code)
    marked, _ = highlight_overlap(code, slices, "<mark>", "</mark>", escape_html=True)
    return marked


@dataclass
class _Class:
    """Every student's regions and their fingerprints, cell by cell."""

    regions: dict[str, dict[tuple[str, str], str]]  # student -> (notebook, cell) -> code
    fingerprints: dict[str, dict[tuple[str, str], object]] = field(default_factory=dict)

    def __post_init__(self):
        for student, cells in self.regions.items():
            self.fingerprints[student] = {where: _fingerprint(code) for where, code in cells.items()}

    def holders(self, where) -> dict[int, list[str]]:
        found = defaultdict(list)
        for student, cells in self.fingerprints.items():
            if where in cells:
                for h in cells[where].hashes:
                    found[h].append(student)
        return found


def compare(assignment: str, regions: dict[str, dict[tuple[str, str], str]],
            known: dict[tuple[str, str], list[str]], *,
            numbers: dict[str, dict[tuple[str, str], tuple[str, ...]]] | None = None,
            failed: dict[str, frozenset] | None = None, labels: dict[str, str] | None = None,
            variants_of: dict[str, str] | None = None, variant_notebook: str | None = None,
            limit: int = DEFAULT_PAIRS, notes: list[str] | None = None) -> SimilarityData:
    """Rank the pairs of students in ``regions`` (``{student: {(notebook, grade id): code}}``).

    ``known``: per cell, code whose fingerprints weigh nothing (the known correct answers' regions);
    ``numbers``: per student and cell, the numbers its outputs show; ``failed``: per student, the grade
    ids of the hidden checks that failed (None: no gradebook); ``labels``: a readable name for a grade id;
    ``variants_of``: per student, the id of their own numbers in ``variant_notebook`` ("" or absent: none)."""
    numbers, failed, labels, variants_of = numbers or {}, failed or {}, labels or {}, variants_of or {}
    students = sorted(set(regions) | set(numbers) | set(failed))
    size = max(len(students), SMALLEST_CLASS)
    known_hashes = {where: set().union(*(_fingerprint(code).hashes for code in codes)) if codes else set()
                    for where, codes in known.items()}
    found = _Class({s: regions.get(s, {}) for s in students})
    weights: dict[tuple[str, str], dict[tuple[str, str], float]] = defaultdict(lambda: defaultdict(float))
    rare: dict[tuple[str, str], Counter] = defaultdict(Counter)
    cells = sorted({where for cells in regions.values() for where in cells})
    for where in cells:
        for h, who in found.holders(where).items():
            if len(who) < 2 or len(who) > COMMON_SHARE * size or h in known_hashes.get(where, ()):
                continue
            weight = math.log(size / len(who))
            for pair in itertools.combinations(sorted(who), 2):
                weights[pair][where] += weight
                if len(who) == 2:
                    rare[pair][where] += 1
    shown_numbers = _rare_numbers(numbers, len(students))
    failed_sets = Counter(frozenset(f) for f in failed.values() if f)
    ranked = []
    for first, second in itertools.combinations(students, 2):
        cell_weights = weights.get((first, second), {})
        same_failed = failed.get(first) if failed.get(first) and failed.get(first) == failed.get(second) else None
        bonus = 0.0
        if same_failed and failed_sets[same_failed] <= max(2, RARE_FAILURES_SHARE * size):
            bonus = FAILED_SET_WEIGHT * math.log(size / failed_sets[same_failed])
        else:
            same_failed = None
        crossed = _crossed_variants(numbers, variants_of, variant_notebook, first, second)
        score = (sum(cell_weights.values()) + bonus
                 + NUMBERS_WEIGHT * math.log(size / 2) * (len(shown_numbers.get((first, second), ()))
                                                          + VARIANT_NUMBERS_FACTOR * len(crossed)))
        if score > 0:
            ranked.append((-score, first, second, cell_weights, same_failed, crossed))
    ranked.sort(key=lambda r: r[:3])
    pairs = [_pair(found, first, second, -negative, cell_weights, rare[(first, second)],
                   {**shown_numbers.get((first, second), {}), **crossed}, same_failed, failed_sets, labels,
                   (variants_of.get(first, ""), variants_of.get(second, "")) if crossed else None)
             for negative, first, second, cell_weights, same_failed, crossed in ranked[:limit]]
    return SimilarityData(assignment, datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), students,
                          pairs, list(notes or []))


def _crossed_variants(numbers: dict, variants_of: dict, notebook: str | None, first: str, second: str) -> dict:
    """``{cell: numbers}`` of ``notebook`` where two students of different variants show the same numbers."""
    ours, theirs = variants_of.get(first, ""), variants_of.get(second, "")
    if not (notebook and ours and theirs and ours != theirs):
        return {}
    mine, other = numbers.get(first, {}), numbers.get(second, {})
    return {where: shown for where, shown in mine.items() if where[0] == notebook and other.get(where) == shown}


def _rare_numbers(numbers: dict, size: int) -> dict[tuple[str, str], dict]:
    """``{pair: {cell: numbers}}`` where exactly two of more than two students' outputs of a cell show the
    same numbers."""
    by_cell: dict = defaultdict(lambda: defaultdict(list))
    for student, cells in numbers.items():
        for where, shown in cells.items():
            by_cell[where][shown].append(student)
    found: dict = defaultdict(dict)
    for where, shown in by_cell.items():
        for values, who in shown.items():
            if len(who) == 2 and size > 2:
                found[tuple(sorted(who))][where] = values
    return found


def _pair(found: _Class, first: str, second: str, score: float, cell_weights: dict, rare: Counter,
          shown_numbers: dict, same_failed, failed_sets: Counter, labels: dict,
          variant_ids: tuple[str, str] | None = None) -> Pair:
    from copydetect.detector import compare_files

    matches = []
    number_cells = {where: 0.0 for where in shown_numbers if where not in cell_weights}
    for where, weight in sorted({**cell_weights, **number_cells}.items(), key=lambda item: -item[1]):
        a, b = found.fingerprints[first].get(where), found.fingerprints[second].get(where)
        if a is not None and b is not None:
            _, _, (slices_a, slices_b) = compare_files(a, b)
            first_code, second_code = _marked(a.raw_code, slices_a), _marked(b.raw_code, slices_b)
        else:
            first_code = html.escape(found.regions[first].get(where, ""))
            second_code = html.escape(found.regions[second].get(where, ""))
        matches.append(CellMatch(where[0], where[1], weight, first_code, second_code, rare[where],
                                 list(shown_numbers.get(where, ()))))
    reasons = []
    coded = [m for m in matches if m.rare]
    if coded:
        reasons.append(f"the same code after renaming and without comments in {_cells(coded)}: "
                       f"{sum(m.rare for m in coded)} stretches of it no other student and no known correct "
                       "answer has")
    elif cell_weights:
        reasons.append(f"code in {_cells([m for m in matches if m.weight])} that few other students have and no "
                       "known correct answer has")
    if variant_ids:
        reasons.append(f"the same numbers although their variants differ ({variant_ids[0]}, {variant_ids[1]}): in "
                       f"{_cells([m for m in matches if m.numbers])} each was given numbers of their own, so these "
                       "are wrong for at least one of them (strong evidence)")
    elif shown_numbers:
        reasons.append(f"the same printed numbers in {_cells([m for m in matches if m.numbers])}, "
                       "which no other student's outputs show (strong evidence where the answer is a number)")
    if same_failed:
        named = ", ".join(labels.get(g, g) for g in sorted(same_failed))
        reasons.append(f"the same failing hidden checks ({named}), a combination {failed_sets[same_failed]} "
                       f"student(s) of the class share")
    return Pair(first, second, score, reasons, matches)


def _cells(matches: list[CellMatch]) -> str:
    return ", ".join(f"{m.notebook}/{m.cell}" for m in matches)


# ---------------------------------------------------------------- the course's files

def known_answers(course: Path, assignment: str, notebooks: tuple[str, ...],
                  notes: list[str] | None = None) -> dict[tuple[str, str], list[str]]:
    """Per solution cell, the regions of the instructor's solution and of each wheat of the assignment,
    typed into the release as a student who wrote it would hand it in. What this account may not read
    (the hidden checks, the instructor's source) is left out and said in ``notes``."""
    from attention_platform.course.samples import typed_in

    notes = notes if notes is not None else []
    try:
        from grader_tests import registry

        wheats = registry.assignment(assignment).wheats if assignment in registry.ASSIGNMENTS else []
    except (ImportError, OSError) as exc:
        wheats = []
        notes.append(f"the known correct answers of the hidden checks cannot be read here ({type(exc).__name__}): "
                     "only the instructor's solution counts as known")
    known: dict[tuple[str, str], list[str]] = defaultdict(list)
    for notebook in notebooks:
        release = _read(course / "release" / assignment / f"{notebook}.ipynb")
        try:
            source = _read(course / "source" / assignment / f"{notebook}.ipynb")
        except OSError as exc:
            notes.append(f"the instructor's {notebook}.ipynb cannot be read ({type(exc).__name__}): "
                         "its solution does not count as known")
            continue
        for proof in [None] + [w for w in wheats if w.notebook == notebook]:
            for grade_id, code in solution_regions(typed_in(release, source, proof), release).items():
                known[(notebook, grade_id)].append(code)
    return dict(known)


def _handed_in_bytes(folder: Path, notebooks: tuple[str, ...]) -> int:
    """What reading the student's notebooks in ``folder`` costs: the bytes of those small enough to be read."""
    total = 0
    for notebook in notebooks:
        path = folder / f"{notebook}.ipynb"
        try:
            size = path.stat().st_size if path.is_file() else 0
        except OSError:
            size = 0
        total += size if size <= MAX_NOTEBOOK_BYTES else 0
    return total


def _within_budget(folders: list[Path], notebooks: tuple[str, ...], budget: int,
                   notes: list[str]) -> list[Path]:
    """The students' folders whose notebooks, smallest first, fit the class's ``budget`` of bytes; the
    students left out are named in ``notes`` with their notebooks' size, so a class's largest notebooks
    cost their owners only."""
    sizes = {folder: _handed_in_bytes(folder, notebooks) for folder in folders}
    kept, left_out, spent = [], [], 0
    for folder in sorted(folders, key=lambda f: (sizes[f], f.parent.name)):
        if spent + sizes[folder] > budget:
            left_out.append(folder)
            continue
        spent += sizes[folder]
        kept.append(folder)
    if left_out:
        named = ", ".join(f"{f.parent.name} ({sizes[f] / MIB:.1f} MB)"
                          for f in sorted(left_out, key=lambda f: f.parent.name)[:MAX_NAMED_LEFT_OUT])
        more = f" and {len(left_out) - MAX_NAMED_LEFT_OUT} more" if len(left_out) > MAX_NAMED_LEFT_OUT else ""
        notes.append(f"{len(left_out)} student(s)' notebooks were not compared: the class's notebooks come to "
                     f"{sum(sizes.values()) / MIB:.1f} MB, more than the {budget // MIB} MB this report reads "
                     f"(ATTENTION_SIMILARITY_MAX_MB), so those of the students with the largest ones were left "
                     f"out: {named}{more}. They are in no pair below; raise ATTENTION_SIMILARITY_MAX_MB to "
                     "compare them.")
    return sorted(kept)


def collect(course: Path, assignment: str, *, db_url: str | None = None, limit: int = DEFAULT_PAIRS) -> SimilarityData:
    """The report for ``assignment`` from ``<course>/submitted/*/<assignment>/``; with ``db_url``, the
    gradebook's failing checks too (a gradebook that cannot be read is said in the notes). At most
    ``ATTENTION_SIMILARITY_MAX_MB`` of notebooks are read for the whole class (:func:`_within_budget`)."""
    from attention_platform.settings import settings

    course = Path(course)
    release_folder = course / "release" / assignment
    notebooks = tuple(sorted(p.stem for p in release_folder.glob("*.ipynb")))
    if not notebooks:
        raise SimilarityError(f"no release of {assignment!r} in {release_folder}: "
                              "run `nbgrader generate_assignment` first")
    releases = {nb: _read(release_folder / f"{nb}.ipynb") for nb in notebooks}
    notes: list[str] = []
    regions: dict[str, dict] = {}
    numbers: dict[str, dict] = {}
    submitted = course / "submitted"
    folders = sorted(submitted.glob(f"*/{assignment}")) if submitted.is_dir() else []
    for folder in _within_budget(folders, notebooks, settings().attention_similarity_max_mb * MIB, notes):
        student = folder.parent.name
        regions[student], numbers[student] = {}, {}
        for notebook, release in releases.items():
            path = folder / f"{notebook}.ipynb"
            if not path.is_file():
                continue
            try:
                handed_in = _read(path)
            except Exception as exc:  # noqa: BLE001 - one unreadable notebook costs its owner only
                notes.append(f"{student}'s {notebook}.ipynb could not be read ({type(exc).__name__}): left out")
                continue
            regions[student].update({(notebook, g): c for g, c in solution_regions(handed_in, release).items()})
            numbers[student].update({(notebook, g): n for g, n in printed_numbers(handed_in, release).items()})
    if len(regions) < 2:
        notes.append(f"{len(regions)} submission(s) of {assignment}: nothing to compare yet")
    failed, labels = None, {}
    if db_url:
        failed, labels = _failing_checks(db_url, assignment, course, notes)
    variant_notebook = variants.notebook(assignment) if variants.is_on(course, assignment) else None
    variants_of = {s: variants.variant_id(course, assignment, s) for s in regions} if variant_notebook else {}
    return compare(assignment, regions, known_answers(course, assignment, notebooks, notes), numbers=numbers,
                   failed=failed, labels=labels, variants_of=variants_of, variant_notebook=variant_notebook,
                   limit=limit, notes=notes)


def _failing_checks(db_url: str, assignment: str, course: Path, notes: list[str]):
    from attention_platform.reporting.report import ReportError, collect as read_gradebook

    try:
        data = read_gradebook(db_url, assignment, course=course, log=lambda _message: None)
    except ReportError as exc:
        notes.append(f"failing checks not compared: {exc}")
        return None, {}
    failed = {row.student_id: frozenset(row.failed) for row in data.students if row.status != "no submission"}
    return failed, {check.grade_id: check.label for check in data.checks}


# ---------------------------------------------------------------- the page

def render_html(data: SimilarityData, *, standalone: bool = True, back: str = "") -> str:
    e = html.escape
    parts = [
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>",
        f"<title>Similar answers: {e(data.assignment)}</title>",
        "<style>body{margin:1.5rem;font-family:sans-serif;max-width:90rem} .notice{background:#fcf8e3;"
        "border:1px solid #faebcc;padding:.8rem;max-width:60rem} .pair{border-top:1px solid #ccc;margin-top:1.5rem} "
        ".side{display:flex;gap:1rem} .side>div{flex:1;min-width:0} pre{background:#f7f7f7;padding:.5rem;"
        "overflow-x:auto;white-space:pre-wrap} mark{background:#ffe08a} .score{color:#666}</style></head><body>",
    ]
    if back:
        parts.append(f"<p><a href='{e(back)}'>← Formgrader</a></p>")
    parts += [f"<h1>Similar answers: {e(data.assignment)}</h1>",
              f"<p class='notice' id='notice'>{e(NOTICE)}</p>",
              f"<p>{len(data.students)} students' submissions compared on {e(data.generated)}. Only the code "
              "students wrote in the answer cells counts, after renaming every name and dropping comments; "
              "what the release gives and what known correct answers share counts for nothing, and the "
              "rarer a shared stretch is in the class, the more it counts. Marked: the code both cells have "
              "after renaming.</p>"]
    for note in data.notes:
        parts.append(f"<p class='note'>{e(note)}</p>")
    if not data.pairs:
        parts.append("<p id='no-pairs'>No pair of students stands out.</p>")
    for rank, pair in enumerate(data.pairs, 1):
        parts.append(f"<section class='pair' data-first='{e(pair.first)}' data-second='{e(pair.second)}'>"
                     f"<h2>{rank}. {e(pair.first)} and {e(pair.second)} "
                     f"<span class='score'>(weight {pair.score:.1f})</span></h2><ul class='reasons'>")
        parts += [f"<li>{e(reason)}</li>" for reason in pair.reasons]
        parts.append("</ul>")
        for match in pair.cells:
            parts.append(f"<h3>{e(match.notebook)} / {e(match.cell)}</h3><div class='side'>"
                         f"<div><p>{e(pair.first)}</p><pre>{match.first_code}</pre></div>"
                         f"<div><p>{e(pair.second)}</p><pre>{match.second_code}</pre></div></div>")
            if match.numbers:
                parts.append(f"<p>Both print: {e(', '.join(match.numbers[:20]))}</p>")
        parts.append("</section>")
    parts.append("</body></html>")
    return "".join(parts)


def summary_text(data: SimilarityData, out: Path | None = None) -> str:
    lines = [f"Similar answers in {data.assignment}: {len(data.students)} students, "
             f"{len(data.pairs)} pair(s) to look at", NOTICE]
    if out is not None:
        lines.append(f"  written to   {out}")
    lines += [f"  {rank:>3}. {p.first} and {p.second} (weight {p.score:.1f})" for rank, p in enumerate(data.pairs[:10], 1)]
    lines += [f"  note: {note}" for note in data.notes]
    return "\n".join(lines)
