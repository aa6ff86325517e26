"""``attention-course bench-autograde``: stock nbgrader against the sandboxed batch grader.

1. A scratch copy of the course (the ``self_attention`` notebook) gets a generated
   class of N submissions, cycling through every buggy and every correct answer
   of ``grader_tests.answers`` plus untouched stubs.
2. Two identical copies of that course are graded: one with stock
   ``nbgrader autograde`` (``ATTENTION_AUTOGRADE_EXECUTE=stock``: nbgrader's
   in-kernel ``Execute``, one kernel per notebook, in series) and one with
   ``attention-course autograde-batch`` (a fresh sandbox per submission forked
   from a warm zygote, in parallel). Both are timed as whole commands, start-up
   included.
3. Every student's per-check scores must be identical in the two gradebooks.
4. Prints both throughputs and their ratio, then the submit-to-feedback latency
   on a warm grader: a student's submission lands in ``submitted/`` and the
   timer stops when its autograded notebook (every check's verdict and message)
   is written and its grades are in the gradebook; p50 and p90 over repeated runs.
"""

from __future__ import annotations

import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import nbformat

from attention_platform.course.directory import check_scores, copy_course, nbgrader, write_submission
from attention_platform.course.notebooks import ASSIGNMENT, NOTEBOOK, with_answer


def generated_class(n: int) -> dict[str, str | None]:
    """``{student: answer name or None}``: buggy, correct and empty, mixed."""
    from grader_tests.answers import BUGGY, CORRECT

    pool: list[str | None] = []
    for i in range(max(len(BUGGY), len(CORRECT))):
        if i < len(BUGGY):
            pool.append(BUGGY[i].name)
        if i < len(CORRECT):
            pool.append(CORRECT[i].name)
        if i % 8 == 0:
            pool.append(None)
    return {f"student{i:03d}": pool[i % len(pool)] for i in range(n)}


def prepare(workdir: Path, n: int, log=print) -> tuple[Path, Path, dict]:
    from grader_tests.answers import BUGGY, CORRECT

    answers = {a.name: a.code for a in BUGGY + CORRECT}
    base = copy_course(workdir / "course")
    for other in (base / "source" / ASSIGNMENT).glob("*.ipynb"):  # the graded notebook alone
        if other.name != NOTEBOOK:
            other.unlink()
    nbgrader(base, "generate_assignment", ASSIGNMENT, "--force", check=True)
    release = nbformat.read(base / "release" / ASSIGNMENT / NOTEBOOK, as_version=4)
    roster = generated_class(n)
    for student, answer in roster.items():
        write_submission(base, student, with_answer(release, answers[answer] if answer else None))
    stock, batch = workdir / "stock", workdir / "batch"
    for dest in (stock, batch):
        if dest.exists():
            shutil.rmtree(dest)
        shutil.copytree(base, dest)
    log(f"{n} submissions generated ({sum(1 for a in roster.values() if a is None)} empty) in {base}")
    return stock, batch, roster


def _cpu_children() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


CPUACCT = "/sys/fs/cgroup/cpuacct"


def _timed(cmd: list[str], cwd: Path, env: dict) -> tuple[float, float, subprocess.CompletedProcess]:
    """Wall-clock and CPU seconds of one command and every process it started. As root on cgroup v1
    the command runs in a cpuacct cgroup of its own, which also counts processes nobody waited for
    (a sandbox's inner process killed with its outer one is reaped by init, and its CPU time never
    reaches the command's children's rusage); otherwise the rusage of the processes it waited for."""
    group = None
    if os.geteuid() == 0 and os.path.isfile(os.path.join(CPUACCT, "cpuacct.usage")):
        group = os.path.join(CPUACCT, f"attention-bench-{os.getpid()}-{time.monotonic_ns()}")
        try:
            os.mkdir(group)
        except OSError:
            group = None

    def enter():
        with open(os.path.join(group, "cgroup.procs"), "w") as f:
            f.write(str(os.getpid()))

    started, cpu = time.monotonic(), _cpu_children()
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True,
                          preexec_fn=enter if group else None)
    wall, seconds = time.monotonic() - started, _cpu_children() - cpu
    if group:
        for _ in range(50):  # a sandbox's last process may still be exiting: its CPU counts too
            with open(os.path.join(group, "cgroup.procs")) as f:
                if not f.read().strip():
                    break
            time.sleep(0.1)
        with open(os.path.join(group, "cpuacct.usage")) as f:
            seconds = int(f.read()) / 1e9
        try:
            os.rmdir(group)
        except OSError:
            pass
    return wall, seconds, proc


def run_benchmark(workdir: Path, n: int = 100, *, jobs: int | None = None, latency_runs: int = 20, log=print) -> int:
    workdir = Path(workdir).resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    stock, batch, roster = prepare(workdir, n, log)
    bindir = Path(sys.executable).parent
    env = dict(os.environ, PATH=f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}")

    load_before = os.getloadavg()[0]
    log(f"stock: nbgrader autograde (in-kernel Execute, one kernel per notebook) over {n} submissions ...")
    stock_s, stock_cpu, stock_proc = _timed([str(bindir / "nbgrader"), "autograde", ASSIGNMENT, "--force"], stock,
                                 dict(env, ATTENTION_AUTOGRADE_EXECUTE="stock"))
    if stock_proc.returncode != 0:
        log(stock_proc.stderr[-3000:])
        return 1
    load_batch = os.getloadavg()[0]
    log(f"batch: attention-course autograde-batch (sandbox per submission, parallel) over {n} submissions ...")
    cmd = [str(bindir / "attention-course"), "autograde-batch", ASSIGNMENT, "--course", str(batch), "--no-progress"]
    if jobs:
        cmd += ["--jobs", str(jobs)]
    batch_s, batch_cpu, batch_proc = _timed(cmd, batch, env)
    if batch_proc.returncode != 0:
        failed = [line for line in batch_proc.stdout.splitlines() if "error:" in line]
        log("autograde-batch failed for:\n" + "\n".join(failed) + "\n" + batch_proc.stderr[-3000:])
        return 1

    stock_scores, batch_scores = check_scores(stock), check_scores(batch)
    mismatches = [(s, stock_scores.get(s), batch_scores.get(s)) for s in roster
                  if stock_scores.get(s) != batch_scores.get(s)]
    for student, a, b in mismatches[:10]:
        diff = {k: (a.get(k) if a else None, b.get(k) if b else None) for k in set(a or {}) | set(b or {})
                if (a or {}).get(k) != (b or {}).get(k)}
        log(f"MISMATCH {student} ({roster[student]}): stock vs batch {diff}")
    identical = not mismatches and len(stock_scores) == len(batch_scores) == n

    latencies = measure_latency(batch, next(iter(roster)), runs=latency_runs)
    p50 = statistics.median(latencies)
    p90 = sorted(latencies)[max(0, int(round(0.9 * len(latencies))) - 1)]

    log("")
    log(f"submissions                     {n} (stock run: {stock_s:.0f} s wall)")
    log(f"grades identical (per check)    {'yes' if identical else f'NO: {len(mismatches)} students differ'}")
    log(f"stock nbgrader autograde        {stock_s:8.1f} s  {stock_s / n:6.3f} s/submission  {n / stock_s:6.2f} submissions/s")
    log(f"autograde-batch (sandboxed)     {batch_s:8.1f} s  {batch_s / n:6.3f} s/submission  {n / batch_s:6.2f} submissions/s")
    log(f"throughput ratio batch/stock    {stock_s / batch_s:8.1f}x (wall clock)")
    log(f"CPU seconds                     stock {stock_cpu:7.1f} s ({stock_cpu / n:.3f}/submission), "
        f"batch {batch_cpu:6.1f} s ({batch_cpu / n:.3f}/submission): {stock_cpu / max(batch_cpu, 1e-9):.1f}x less")
    log(f"targets                         wall {stock_s / batch_s:.1f}x (>= 40x), CPU {stock_cpu / max(batch_cpu, 1e-9):.1f}x "
        f"(>= 30x), {1000 * batch_cpu / n:.0f} ms CPU per submission (<= 100 ms)")
    log(f"submit->feedback, warm grader   p50 {p50 * 1000:6.0f} ms   p90 {p90 * 1000:6.0f} ms   ({len(latencies)} runs)")
    log(f"machine: {os.cpu_count()} cores; load average before stock {load_before:.2f}, "
        f"before batch {load_batch:.2f}, at the end {os.getloadavg()[0]:.2f} (other work shares these cores)")
    return 0 if identical else 2


def measure_latency(course: Path, student: str, runs: int = 20) -> list[float]:
    """Submit one student's notebook again and again to a warm in-process grader;
    time each from the file landing in submitted/ to grades and feedback written."""
    from attention_platform.grading.batch import autograde_batch
    from attention_platform.grading.sandbox.client import get_zygote

    get_zygote().wait_ready()
    folder = course / "submitted" / student / ASSIGNMENT
    nb = nbformat.read(folder / NOTEBOOK, as_version=4)
    autograde_batch(course, ASSIGNMENT, students=[student], progress=False, log=None)  # warm imports and caches
    times = []
    for _ in range(runs):
        started = time.monotonic()
        write_submission(course, student, nb)
        outcomes = autograde_batch(course, ASSIGNMENT, students=[student], progress=False, log=None)
        assert (course / "autograded" / student / ASSIGNMENT / NOTEBOOK).exists() and outcomes[0].status == "ok"
        times.append(time.monotonic() - started)
    return times


def run_submission_benchmark(workdir: Path, *, runs: int = 3, log=print) -> int:
    """One student's full submission (all six notebooks, the instructor's answers) graded four ways,
    each timed as a whole, start-up included: stock ``nbgrader autograde`` in a kernel (the
    baseline), ``nbgrader autograde`` sandboxed (a TA's command, the formgrader's button),
    ``attention-course autograde-batch``, and the warm grader (a process that graded before:
    submit to grades and feedback written, median of ``runs``). Grades must be identical."""
    from attention_platform.course.notebooks import NOTEBOOKS, solved

    workdir = Path(workdir).resolve()
    if workdir.exists():
        shutil.rmtree(workdir)
    workdir.mkdir(parents=True)
    base = copy_course(workdir / "course")
    nbgrader(base, "generate_assignment", ASSIGNMENT, "--force", check=True)
    student = "full"
    for name in NOTEBOOKS:
        release = nbformat.read(base / "release" / ASSIGNMENT / name, as_version=4)
        source = nbformat.read(base / "source" / ASSIGNMENT / name, as_version=4)
        write_submission(base, student, solved(release, source), name=name)
    courses = {}
    for label in ("stock", "sandboxed", "batch", "warm"):
        courses[label] = workdir / label
        shutil.copytree(base, courses[label])
    bindir = Path(sys.executable).parent
    env = dict(os.environ, PATH=f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}")
    load_before = os.getloadavg()[0]
    figures = {}
    log(f"one submission of {len(NOTEBOOKS)} notebooks, graded four ways ...")
    for label, cmd, extra in (
            ("stock", [str(bindir / "nbgrader"), "autograde", ASSIGNMENT, "--force"], {"ATTENTION_AUTOGRADE_EXECUTE": "stock"}),
            ("sandboxed", [str(bindir / "nbgrader"), "autograde", ASSIGNMENT, "--force"], {}),
            ("batch", [str(bindir / "attention-course"), "autograde-batch", ASSIGNMENT, "--course", str(courses["batch"]),
                       "--no-progress"], {})):
        wall, cpu, proc = _timed(cmd, courses[label], dict(env, **extra))
        if proc.returncode != 0:
            log(proc.stdout[-2000:] + proc.stderr[-3000:])
            return 1
        figures[label] = (wall, cpu)
    from attention_platform.grading.batch import autograde_batch
    from attention_platform.grading.sandbox.client import get_zygote

    get_zygote().wait_ready()
    autograde_batch(courses["warm"], ASSIGNMENT, students=[student], progress=False, log=None)  # warm imports and caches
    warm = []
    for _ in range(runs):
        started = time.monotonic()
        for name in NOTEBOOKS:  # the submission lands again
            nb = nbformat.read(courses["warm"] / "submitted" / student / ASSIGNMENT / name, as_version=4)
            write_submission(courses["warm"], student, nb, name=name)
        autograde_batch(courses["warm"], ASSIGNMENT, students=[student], progress=False, log=None)
        warm.append(time.monotonic() - started)
    figures["warm"] = (statistics.median(warm), None)

    scores = {label: check_scores(course, notebook=None).get(student) for label, course in courses.items()}
    identical = bool(scores["stock"]) and all(scores[label] == scores["stock"] for label in scores)
    stock_wall = figures["stock"][0]
    log("")
    log(f"grades identical (per check, all four) {'yes' if identical else 'NO'}")
    names = {"stock": "stock nbgrader autograde (kernel)", "sandboxed": "nbgrader autograde (sandboxed)",
             "batch": "autograde-batch (sandboxed)", "warm": f"warm grader (sandboxed), median of {runs}"}
    for label, (wall, cpu) in figures.items():
        cpu_text = f"{cpu:6.1f} CPU-s" if cpu is not None else "         "
        log(f"{names[label]:<40} {wall:6.1f} s wall  {cpu_text}  {stock_wall / wall:5.1f}x stock by wall clock")
    log(f"machine: {os.cpu_count()} cores; load average before {load_before:.2f}, at the end {os.getloadavg()[0]:.2f}")
    return 0 if identical else 2
