"""``attention-course feedback``: ``nbgrader generate_feedback`` for a class, with a progress
bar and a summary of who got feedback, instead of nbgrader's page of log lines.

nbgrader does the work (our feedback template and summary come from the course's
nbgrader_config.py); this module only follows its log to count students and to keep the
first errors for the summary.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

from attention_platform.console import progress_bar
from attention_platform.venv import environment, program

# nbgrader's log lines that name the student whose notebook it converts, or fails.
CONVERTING = re.compile(r"Converting notebook .*?/autograded/([^/]+)/")
FAILING = re.compile(r"error processing assignment(?::| '[^']*' for student) '?(?:.*?/autograded/)?([^/'\s]+)")
ERRORS_SHOWN = 3


def autograded_students(course: Path, assignment: str, only: list[str] | None = None) -> list[str]:
    students = sorted(p.parent.name for p in (course / "autograded").glob(f"*/{assignment}"))
    return [s for s in students if s in only] if only else students


def generate_feedback(course: Path, assignment: str, *, students: list[str] | None = None) -> int:
    """Run nbgrader generate_feedback in ``course``; print the summary; exit status."""
    started = time.monotonic()
    course = course.resolve()
    autograded = autograded_students(course, assignment, students)
    if not autograded:
        print(f"attention-course feedback: no autograded submission of {assignment} in {course} "
              "(run nbgrader autograde first)", file=sys.stderr)
        return 1
    cmd = [program("nbgrader"), "generate_feedback", assignment, "--force"]
    for student in students or ():
        cmd += ["--student", student]
    seen, failed, errors = set(), [], []
    proc = subprocess.Popen(cmd, cwd=course, env=environment(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)
    with progress_bar(len(autograded), f"feedback for {assignment}") as bar:
        for line in proc.stdout:
            converting = CONVERTING.search(line)
            if converting and converting.group(1) not in seen:
                seen.add(converting.group(1))
                bar.set_postfix_str(converting.group(1))
                bar.update()
            failing = FAILING.search(line)
            if failing and failing.group(1) not in failed:
                failed.append(failing.group(1))
            if "| ERROR]" in line and len(errors) < ERRORS_SHOWN:
                errors.append(line.strip())
        proc.wait()
    written = sorted(p.parent.name for p in (course / "feedback").glob(f"*/{assignment}")
                     if any(p.glob("*.html")) and p.parent.name in autograded)
    print(f"Feedback for {assignment}")
    print(f"  written to   {course / 'feedback'}/<student>/{assignment}/")
    print(f"  students     {len(written)} of {len(autograded)} autograded have feedback")
    if failed or proc.returncode:
        print(f"  failed       {', '.join(failed) or '(see nbgrader log)'}; nbgrader exit code {proc.returncode}")
        for line in errors:
            print(f"    {line[:110]}")
    print(f"  done in {time.monotonic() - started:.1f} s")
    return 0 if proc.returncode == 0 else 1
