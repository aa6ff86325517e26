"""Sub-commands of ``attention-course`` that measure what a user waits for.

* ``bench-autograde [-n 100] [--assignment A]``: stock ``nbgrader autograde`` against the batch
  command on the same generated class; identical grades, both throughputs,
  their ratio and the submit-to-feedback latency of a warm grader;
* ``bench-submission [--assignment A]``: one full submission (every notebook), stock against sandboxed;
* ``bench-feedback-on-submit``: feedback on submit's latency on a real hub;
* ``load-test``: the deadline rush against the hub;
* ``bench-start-up-tricks [--assignment A]``: what each start-up trick buys of a TA's autograde of one
  submission and of a student's server start.

Each takes the assignment as an option and defaults to the course's first.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from attention_platform.course.assignments import add_assignment_option, first_assignment
from attention_platform.course.notebooks import COURSE_ROOT


def register(commands) -> None:
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

    on_submit = commands.add_parser(
        "bench-feedback-on-submit",
        help="N students submit at once on a fresh native hub (as root): p50/p95 submit-to-result latency of "
             "feedback on submit against the TA's collect, autograde and feedback on the same submissions")
    on_submit.add_argument("-n", "--students", type=int, default=5, help="students submitting at once (default 5)")
    on_submit.add_argument("--rounds", type=int, default=3, help="times they all submit (default 3)")
    on_submit.add_argument("--spread", type=float, default=0.0,
                           help="seconds over which each round's presses of Submit are spread evenly (default 0: at once)")
    on_submit.add_argument("--port", type=int, default=8500, help="port of the hub started for the benchmark (127.0.0.1)")
    on_submit.add_argument("--state-dir", type=Path, default=COURSE_ROOT / "build" / "bench-feedback-on-submit",
                       help="state directory of the hub (replaced)")
    add_assignment_option(on_submit)
    on_submit.set_defaults(run=_bench_feedback_on_submit)

    load = commands.add_parser("load-test", help="N simulated students log in, spawn, fetch, validate and submit "
                                                 "at once; per-step latency, then a lost/duplicate check")
    load.add_argument("-n", "--students", type=int, default=50, help="simulated students (default 50)")
    load.add_argument("--ramp", type=float, default=60.0, help="seconds over which students arrive (default 60)")
    load.add_argument("--resubmit-share", type=float, default=0.3, help="share of students submitting 2-3 times")
    load.add_argument("--seed", type=int, default=7, help="seed of the students' random choices")
    load.add_argument("--port", type=int, default=8400, help="port of the hub started for the test (127.0.0.1)")
    load.add_argument("--state-dir", type=Path, default=COURSE_ROOT / "build" / "load",
                      help="state directory of the hub (replaced unless --url is given)")
    load.add_argument("--url", default=None, help="drive an already running native hub (its --state-dir) instead")
    load.add_argument("--no-autograde", action="store_true", help="skip the autograde + gradebook check")
    add_assignment_option(load)
    load.set_defaults(run=_load_test)

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


def _bench_autograde(args: argparse.Namespace) -> int:
    from attention_platform.benchmarks.grading import run_benchmark

    return run_benchmark(args.workdir, args.submissions, jobs=args.jobs, latency_runs=args.latency_runs,
                         assignment=args.assignment or first_assignment())


def _bench_submission(args: argparse.Namespace) -> int:
    from attention_platform.benchmarks.grading import run_submission_benchmark

    return run_submission_benchmark(args.workdir, runs=args.runs, assignment=args.assignment or first_assignment())


def _bench_feedback_on_submit(args) -> int:
    from attention_platform.benchmarks.feedback_on_submit import main

    return main(args)


def _load_test(args) -> int:
    from attention_platform.benchmarks.loadtest import main

    return main(args)


def _bench_start_up_tricks(args: argparse.Namespace) -> int:
    from attention_platform.benchmarks.start_up_tricks import SCENARIOS, TRICKS, run

    unknown = {trick for arm in args.trick or () for trick in arm.split("+")} - set(TRICKS)
    if unknown:
        print(f"attention-course bench-start-up-tricks: no trick {', '.join(sorted(unknown))}; "
              f"the tricks: {', '.join(TRICKS)}", file=sys.stderr)
        return 1
    run(args.course, args.assignment or first_assignment(), args.workdir, rounds=args.rounds,
        scenarios=tuple(args.scenario or SCENARIOS), tricks=tuple(args.trick or TRICKS))
    return 0
