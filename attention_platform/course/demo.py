"""The main job on its embedded default: a whole grading round on sample work, per assignment.

Copies the course to a scratch directory and, for every assignment (or the one named), generates
the student release, files a sample class made of the assignment's own proofs (samples.py), runs
``nbgrader autograde`` and ``generate_feedback`` there, and prints a per-student, per-check grade
table. The real course's gradebook is never touched.
"""

from __future__ import annotations

import time
from pathlib import Path

from attention_platform.course import samples
from attention_platform.course.directory import check_scores, copy_course, nbgrader, write_submission
from grader_tests.registry import ASSIGNMENTS, AssignmentChecks, assignment


def _label(check) -> str:
    return f"{check.id} ({check.points:g})"


def grade_table(assignment: AssignmentChecks, scores: dict[str, dict[str, float | None]]) -> str:
    """One row per check of ``assignment`` by its full id and points, under its notebook's name; one
    column per student; totals last. ``scores`` is ``check_scores(..., notebook=None)``'s: grade ids
    prefixed by their notebook, a notebook not handed in shown as ``-``.

    Checks are rows (not columns) so their names are never cut to fit a column."""
    students = sorted(scores)
    checks = assignment.checks
    total = sum(check.points for check in checks)
    label = max([len(_label(c)) for c in checks] + [len(n) + 6 for n in assignment.notebooks] + [len("check (points)")])
    width = max([len(s) for s in students] + [len(f"{total:g}/{total:g}")])
    head = f"{'check (points)':<{label}} " + " ".join(f"{s:>{width}}" for s in students)
    lines = [head, "-" * len(head)]
    for notebook, notebook_checks in assignment.notebook_checks.items():
        lines.append(f"{notebook}.ipynb")
        for check in notebook_checks:
            cells = [scores[s].get(f"{notebook}/{check.definition.grade_id}") for s in students]
            lines.append(f"{_label(check):<{label}} "
                         + " ".join(f"{'-' if c is None else format(c, 'g'):>{width}}" for c in cells))
    got = [sum(scores[s].get(f"{c.notebook}/{c.definition.grade_id}") or 0 for c in checks) for s in students]
    lines.append("-" * len(head))
    lines.append(f"{'total':<{label}} " + " ".join(f"{format(g, 'g') + '/' + format(total, 'g'):>{width}}" for g in got))
    return "\n".join(lines)


def class_legend(students: list[samples.SampleStudent]) -> str:
    """What each sample student handed in, and which check a chaff is meant to fail."""
    lines = []
    for student in students:
        aimed = f", a misconception the check {student.proof.target} exists for" if student.proof and \
            student.proof.target else ""
        which = f" in {student.proof.notebook}.ipynb" if student.proof else " in every notebook"
        lines.append(f"  {student.name:<6} {student.answer}{which}{aimed}")
    return "\n".join(lines)


def written_answers_note(assignment: AssignmentChecks) -> str:
    """Which parts also have written answers, and what they are worth (from the catalogue)."""
    numbers = [str(part.number) for part in assignment.parts if part.written]
    if not numbers:
        return ""
    which = numbers[0] if len(numbers) == 1 else ", ".join(numbers[:-1]) + " and " + numbers[-1]
    return (f"(part{'s' if len(numbers) > 1 else ''} {which} also {'have' if len(numbers) > 1 else 'has'} written "
            f"answers, {assignment.ta_points} points in all, graded by a TA in the formgrader)")


def file_sample_class(course: Path, assignment: AssignmentChecks) -> list[samples.SampleStudent]:
    """File the assignment's sample class in ``course`` (its release generated) as ``nbgrader collect`` would."""
    students = samples.sample_class(assignment)
    for student in students:
        for notebook in student.notebooks or assignment.notebooks:
            write_submission(course, student.name, samples.handed_in(course, assignment.name, notebook, student.proof,
                                                                     student.untouched),
                             assignment=assignment.name, name=f"{notebook}.ipynb")
    return students


def grade_assignment(course: Path, name: str, log=print) -> dict[str, dict[str, float | None]]:
    """Release, file the sample class, autograde and generate feedback for one assignment; print its table."""
    found = assignment(name)
    nbgrader(course, "generate_assignment", name, "--force", check=True)
    log(f"{name}: release generated in {course / 'release' / name}")
    students = file_sample_class(course, found)
    log(f"{name}: {len(students)} sample submissions filed; autograding (real kernels)…")
    log(class_legend(students))
    nbgrader(course, "autograde", name, "--force", check=True)
    nbgrader(course, "generate_feedback", name, "--force", check=True)
    # nbgrader records a notebook not handed in as scored 0: the table shows it as not handed in.
    handed = {student.name: student.notebooks or found.notebooks for student in students}
    scores = {student: {key: score for key, score in grades.items() if key.split("/")[0] in handed[student]}
              for student, grades in check_scores(course, assignment=name, notebook=None).items()}
    log("")
    log(grade_table(found, scores))
    note = written_answers_note(found)
    if note:
        log(note)
    log(f"feedback: {course / 'feedback'}/<student>/{name}/<notebook>.html")
    log("")
    return scores


def run_demo(workdir: Path, assignments: list[str] | None = None,
             log=print) -> dict[str, dict[str, dict[str, float | None]]]:
    """Grade the sample class of each of ``assignments`` (default: every one) in a scratch course;
    returns the scores by assignment."""
    started = time.monotonic()
    course = copy_course(workdir)
    log(f"course copied to {course}")
    scores = {name: grade_assignment(course, name, log) for name in (assignments or list(ASSIGNMENTS))}
    log(f"done in {time.monotonic() - started:.1f} s")
    return scores
