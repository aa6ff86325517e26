"""Sub-commands of ``attention-course`` for sandboxed grading.

* ``autograde-batch ASSIGNMENT [--jobs N]``: grade every submission in parallel
  into the standard gradebook, with a progress bar and a summary table;
* ``bench-autograde [-n 100] [--assignment A]``: stock ``nbgrader autograde`` against the batch
  command on the same generated class; identical grades, both throughputs,
  their ratio and the submit-to-feedback latency of a warm grader;
* ``bench-submission [--assignment A]``: one full submission (every notebook), stock against sandboxed.

The assignment is required where a TA grades (as for nbgrader's own commands: a course has several, and
grading the wrong one is worse than being asked); the benchmarks default to the first.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from attention_platform.course.assignments import add_assignment_option, assignment_name, first_assignment
from attention_platform.course.notebooks import COURSE_ROOT


def register(commands) -> None:
    batch = commands.add_parser("autograde-batch", help="autograde a whole class in sandboxes, in parallel, "
                                "into the standard nbgrader gradebook")
    batch.add_argument("assignment", type=assignment_name, help="the assignment to grade (its nbgrader id)")
    batch.add_argument("--jobs", "-j", type=int, default=None, help="submissions graded at once (default: cores + 1)")
    batch.add_argument("--course", type=Path, default=COURSE_ROOT, help="course directory (default: this checkout)")
    batch.add_argument("--student", action="append", default=None, help="only this student (repeatable)")
    batch.add_argument("--no-progress", action="store_true", help="no progress bar")
    batch.set_defaults(run=_autograde_batch)

    bench = commands.add_parser("bench-autograde", help="stock nbgrader autograde vs autograde-batch on a generated "
                                "class: grades identical, throughputs, ratio, submit-to-feedback latency")
    bench.add_argument("-n", "--submissions", type=int, default=100, help="size of the generated class")
    bench.add_argument("--jobs", "-j", type=int, default=None, help="parallel jobs of the batch command")
    bench.add_argument("--workdir", type=Path, default=COURSE_ROOT / "build" / "bench",
                       help="scratch course directory (replaced on every run)")
    bench.add_argument("--latency-runs", type=int, default=20, help="single submissions timed on the warm grader")
    add_assignment_option(bench)
    bench.set_defaults(run=_bench_autograde)

    full = commands.add_parser("bench-submission", help="one full submission graded by stock nbgrader, "
                               "sandboxed nbgrader, autograde-batch and a warm grader: times, grades identical")
    full.add_argument("--workdir", type=Path, default=COURSE_ROOT / "build" / "bench-submission",
                      help="scratch course directory (replaced on every run)")
    full.add_argument("--runs", type=int, default=3, help="submissions timed on the warm grader")
    add_assignment_option(full)
    full.set_defaults(run=_bench_submission)

    from attention_platform.benchmarks.start_up_tricks import SCENARIOS, TRICKS

    tricks = commands.add_parser("bench-start-up-tricks", help="what each start-up trick buys of a TA's autograde of "
                                 "one submission and of a student's server start: A/B, interleaved, medians")
    tricks.add_argument("--course", type=Path, default=COURSE_ROOT, help="course directory (default: this checkout)")
    tricks.add_argument("--rounds", type=int, default=5, help="runs of each arm (default: %(default)s)")
    tricks.add_argument("--scenario", action="append", choices=tuple(SCENARIOS), default=None,
                        help="only this scenario (repeatable; default: both)")
    tricks.add_argument("--trick", action="append", default=None, metavar="TRICK[+TRICK]",
                        help=f"only this trick off in turn, or these together (repeatable; default: each of "
                             f"{', '.join(TRICKS)})")
    tricks.add_argument("--workdir", type=Path, default=COURSE_ROOT / "build" / "bench-start-up-tricks",
                        help="scratch course directory (replaced on every run)")
    add_assignment_option(tricks)
    tricks.set_defaults(run=_bench_start_up_tricks)


def _autograde_batch(args: argparse.Namespace) -> int:
    from attention_platform import start_up_gc, third_party_patches
    from attention_platform.course.directory import NotACourse, require_course
    from attention_platform.grading.sandbox import first_use
    from attention_platform.grading.sandbox.client import SandboxUnavailable, get_zygote

    start_up_gc.pause()  # until the first notebook is finished (_BatchRun._finish)
    third_party_patches.defer_iri_syntax()  # before nbgrader imports jsonschema, for callers not from the CLI
    try:
        require_course(args.course)  # a mistyped --course is named at once, not after the worker's start
        # The warm worker imports torch (and pays the first uses the notebooks need) while this
        # process imports nbgrader and the course's configuration.
        get_zygote(first_use.needed_by_assignment(args.course, args.assignment))
    except (NotACourse, SandboxUnavailable) as exc:  # e.g. a TA's shell without the broker's socket
        return _refused(exc)
    from attention_platform.grading.batch import BatchError, autograde_batch

    try:
        outcomes = autograde_batch(args.course, args.assignment, jobs=args.jobs, students=args.student,
                                   progress=not args.no_progress)
    except BatchError as exc:
        return _refused(exc)
    return 0 if all(not o.status.startswith("error") for o in outcomes) else 1


def _bench_start_up_tricks(args: argparse.Namespace) -> int:
    from attention_platform.benchmarks.start_up_tricks import SCENARIOS, TRICKS, run

    unknown = {trick for arm in args.trick or () for trick in arm.split("+")} - set(TRICKS)
    if unknown:
        print(f"attention-course bench-start-up-tricks: no trick {', '.join(sorted(unknown))}; "
              f"the tricks: {', '.join(TRICKS)}", file=sys.stderr)
        return 1
    run(args.course, args.assignment or first_assignment(), args.workdir, rounds=args.rounds, scenarios=tuple(args.scenario or SCENARIOS),
        tricks=tuple(args.trick or TRICKS))
    return 0


def _refused(reason: Exception) -> int:
    """Nothing was graded: the reason in one line (it says what to do), status 1."""
    print(f"attention-course autograde-batch: {reason}", file=sys.stderr)
    return 1


def _bench_autograde(args: argparse.Namespace) -> int:
    from attention_platform.benchmarks.grading import run_benchmark

    return run_benchmark(args.workdir, args.submissions, jobs=args.jobs, latency_runs=args.latency_runs,
                         assignment=args.assignment or first_assignment())


def _bench_submission(args: argparse.Namespace) -> int:
    from attention_platform.benchmarks.grading import run_submission_benchmark

    return run_submission_benchmark(args.workdir, runs=args.runs, assignment=args.assignment or first_assignment())
