"""The main job on its embedded default: a whole grading round on sample work.

Copies the course to a scratch directory, generates the student release, files
the bundled sample submissions, runs ``nbgrader autograde`` and
``generate_feedback`` there, and prints a per-student, per-check grade table.
The real course's gradebook is never touched.
"""

from __future__ import annotations

import time
from pathlib import Path

import nbformat

from attention_platform.course import samples
from attention_platform.course.directory import check_scores, copy_course, nbgrader, write_submission
from attention_platform.course.notebooks import ASSIGNMENT, NOTEBOOK, PART_NOTEBOOKS, solved, with_answer
from grader_tests.self_attention.catalogue import ASSIGNMENT_TA_POINTS, PARTS
from grader_tests.registry import GRADE_ID_PREFIX, assignment

NOTEBOOK_CHECKS = assignment("self_attention").notebook_checks

ALL_CHECKS = NOTEBOOK_CHECKS["self_attention"]  # the table's columns: the core notebook's checks
# Sample students who also hand in the further parts (02–06), with the instructor's solutions.
PART_STUDENTS = ("ada",)


def grade_table(scores: dict[str, dict[str, float | None]]) -> str:
    """One row per check, by its full id and points, one column per student; totals last.

    Checks are rows (not columns) so their names are never cut to fit a column."""
    students = sorted(scores)
    total = sum(check.points for check in ALL_CHECKS)
    label = max([len(f"{c.id} ({c.points:g})") for c in ALL_CHECKS] + [len("check (points)")])
    width = max([len(s) for s in students] + [len(f"{total:g}/{total:g}")])
    head = f"{'check (points)':<{label}} " + " ".join(f"{s:>{width}}" for s in students)
    lines = [head, "-" * len(head)]
    for check in ALL_CHECKS:
        cells = [scores[s].get(GRADE_ID_PREFIX + check.id) for s in students]
        lines.append(f"{f'{check.id} ({check.points:g})':<{label}} "
                     + " ".join(f"{'-' if c is None else format(c, 'g'):>{width}}" for c in cells))
    got = [sum(scores[s].get(GRADE_ID_PREFIX + c.id) or 0 for c in ALL_CHECKS) for s in students]
    lines.append("-" * len(head))
    lines.append(f"{'total':<{label}} " + " ".join(f"{format(g, 'g') + '/' + format(total, 'g'):>{width}}" for g in got))
    return "\n".join(lines)


def parts_table(scores: dict[str, dict[str, float | None]]) -> str:
    """Per student and part notebook: points so far (written answers count once a TA grades them)."""
    stems = [n.removesuffix(".ipynb") for n in PART_NOTEBOOKS]
    lines = [f"{'student':<8} " + " ".join(f"{s[:18]:>18}" for s in stems)]
    for student in sorted(scores):
        cells = []
        for stem in stems:
            grades = [v for k, v in scores[student].items() if k.startswith(stem + "/")]
            cells.append(format(sum(v or 0 for v in grades), "g") if grades else "-")
        lines.append(f"{student:<8} " + " ".join(f"{c:>18}" for c in cells))
    lines.append(written_answers_note())
    return "\n".join(lines)


def written_answers_note() -> str:
    """Which parts also have written answers, and what they are worth (from the catalogue)."""
    numbers = [str(part.number) for part in PARTS if part.written]
    which = numbers[0] if len(numbers) == 1 else ", ".join(numbers[:-1]) + " and " + numbers[-1]
    return (f"(part{'s' if len(numbers) > 1 else ''} {which} also {'have' if len(numbers) > 1 else 'has'} written "
            f"answers, {ASSIGNMENT_TA_POINTS} points in all, graded by a TA in the formgrader)")


def run_demo(workdir: Path, log=print) -> dict[str, dict[str, float | None]]:
    started = time.monotonic()
    course = copy_course(workdir)
    log(f"course copied to {course}")
    nbgrader(course, "generate_assignment", ASSIGNMENT, "--force", check=True)
    release = nbformat.read(course / "release" / ASSIGNMENT / NOTEBOOK, as_version=4)
    log(f"release generated: {course / 'release' / ASSIGNMENT / NOTEBOOK}")
    for student in samples.SAMPLE_CLASS:
        write_submission(course, student, with_answer(release, samples.sample_answer(student)))
    for name in PART_NOTEBOOKS:
        part = solved(nbformat.read(course / "release" / ASSIGNMENT / name, as_version=4),
                      nbformat.read(course / "source" / ASSIGNMENT / name, as_version=4))
        for student in PART_STUDENTS:
            write_submission(course, student, part, name=name)
    log(f"{len(samples.SAMPLE_CLASS)} sample submissions filed; autograding (real kernels)…")
    nbgrader(course, "autograde", ASSIGNMENT, "--force", check=True)
    nbgrader(course, "generate_feedback", ASSIGNMENT, "--force", check=True)
    scores = check_scores(course)
    log("")
    log(grade_table(scores))
    log("")
    log(parts_table({s: g for s, g in check_scores(course, notebook=None).items() if s in PART_STUDENTS}))
    log("")
    log(f"feedback: {course / 'feedback'}/<student>/{ASSIGNMENT}/{NOTEBOOK.replace('.ipynb', '.html')}")
    log(f"done in {time.monotonic() - started:.1f} s")
    return scores
