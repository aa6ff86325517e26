"""``attention-course bench-autograde``: stock nbgrader against the sandboxed batch grader.

1. A scratch copy of the course (the assignment's first notebook alone) gets a generated
   class of N submissions, cycling through every wheat and chaff of that notebook
   (the assignment's proofs, course/samples.py) plus untouched releases.
2. Identical copies of that course are graded, each by a whole command timed with
   its start-up: stock ``nbgrader autograde`` (``ATTENTION_AUTOGRADE_EXECUTE=stock``:
   nbgrader's in-kernel ``Execute``, one kernel per notebook, in series);
   ``attention-course autograde-batch`` as a machine's first batch (the teaching
   picture of an assignment that draws one measured with matplotlib, then kept) and
   cold (a fresh sandbox per submission forked from a warm zygote the command starts,
   in parallel; the picture's measurement loaded); the same command on one
   submission (its start-up; the difference is the cost of each further
   submission); and the batch beside a resident sandbox broker, as a TA's batch on
   the hub runs (the broker's CPU during the command counts; it pays the first uses the
   course's notebooks need, as the native hub starts it).
3. Every student's per-check scores must be identical in every gradebook.
4. Prints both throughputs and their ratio, then the submit-to-feedback latency
   on a warm grader: a student's submission lands in ``submitted/`` and the
   timer stops when its autograded notebook (every check's verdict and message)
   is written and its grades are in the gradebook; p50 and p90 over repeated runs.
"""

from __future__ import annotations

import contextlib
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat

from attention_platform.course.directory import check_scores, copy_course, nbgrader, write_submission
from attention_platform.course.samples import handed_in, proofs_of

TARGET_WALL_RATIO = 44.0  # the batch grader against stock nbgrader autograde on the same class, by wall clock


def generated_class(n: int, wheats: list, chaffs: list) -> dict:
    """``{student: proof or None}``: chaffs, wheats and untouched releases (None), mixed."""
    pool: list = []
    for i in range(max(len(chaffs), len(wheats))):
        pool += chaffs[i:i + 1] + wheats[i:i + 1]
        if i % 8 == 0:
            pool.append(None)
    return {f"student{i:03d}": pool[i % len(pool)] for i in range(n)}


def prepare(workdir: Path, n: int, assignment: str, log=print) -> tuple[dict, dict, str]:
    """Copies of one generated class, one per way of grading it; the roster; the notebook graded."""
    from grader_tests.registry import assignment as assignment_checks

    found = assignment_checks(assignment)
    notebook = found.notebooks[0]
    base = copy_course(workdir / "course")
    for other in (base / "source" / assignment).glob("*.ipynb"):  # the first notebook alone
        if other.stem != notebook:
            other.unlink()
    nbgrader(base, "generate_assignment", assignment, "--force", check=True)
    roster = generated_class(n, *proofs_of(found, notebook))
    for student, proof in roster.items():
        write_submission(base, student, handed_in(base, assignment, notebook, proof, untouched=proof is None),
                         assignment=assignment, name=f"{notebook}.ipynb")
    copies = {label: workdir / label for label in ("stock", "first", "batch", "start-up", "hub")}
    for dest in copies.values():
        if dest.exists():
            shutil.rmtree(dest)
        shutil.copytree(base, dest)
    log(f"{n} submissions of {assignment}/{notebook}.ipynb generated "
        f"({sum(1 for a in roster.values() if a is None)} untouched) in {base}")
    return copies, roster, notebook


def _cpu_children() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


CPUACCT = "/sys/fs/cgroup/cpuacct"


def _cpu_group() -> str | None:
    """A fresh cpuacct cgroup (cgroup v1, as root), or None where there is none to make."""
    if os.geteuid() != 0 or not os.path.isfile(os.path.join(CPUACCT, "cpuacct.usage")):
        return None
    group = os.path.join(CPUACCT, f"attention-bench-{os.getpid()}-{time.monotonic_ns()}")
    try:
        os.mkdir(group)
    except OSError:
        return None
    return group


def _group_seconds(group: str) -> float:
    with open(os.path.join(group, "cpuacct.usage")) as f:
        return int(f.read()) / 1e9


def _remove_group(group: str) -> float:
    """Wait for the group's last process to leave (a sandbox's may still be exiting: its CPU counts
    too), remove the group, and return the CPU-seconds it used."""
    for _ in range(50):
        with open(os.path.join(group, "cgroup.procs")) as f:
            if not f.read().strip():
                break
        time.sleep(0.1)
    seconds = _group_seconds(group)
    try:
        os.rmdir(group)
    except OSError:
        pass
    return seconds


def _joining(group: str | None):
    """A ``preexec_fn`` that puts the new process into ``group`` (None: nothing to do)."""
    if group is None:
        return None

    def enter():
        with open(os.path.join(group, "cgroup.procs"), "w") as f:
            f.write(str(os.getpid()))

    return enter


def _timed(cmd: list[str], cwd: Path, env: dict) -> tuple[float, float, subprocess.CompletedProcess]:
    """Wall-clock and CPU seconds of one command and every process it started. As root on cgroup v1
    the command runs in a cpuacct cgroup of its own, which also counts processes nobody waited for
    (their CPU time never reaches the command's children's rusage: a sandbox worker left to exit on
    its own, a process reaped by init); otherwise the rusage of the processes it waited for."""
    group = _cpu_group()
    started, cpu = time.monotonic(), _cpu_children()
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, preexec_fn=_joining(group))
    wall, seconds = time.monotonic() - started, _cpu_children() - cpu
    if group:
        seconds = _remove_group(group)
    return wall, seconds, proc


@contextlib.contextmanager
def resident_broker(workdir: Path, first_uses: tuple[str, ...] | None = None):
    """The sandbox broker as the hub runs it (started, warmed and listening before any grading),
    in a cpuacct cgroup of its own: yields ``(socket path, CPU-seconds it has used so far)``, the
    second a function, so a command's share of the broker's work can be added to the command's.
    ``first_uses``: the warm-ups it pays for every connection (all if None); the native hub passes
    those its course's notebooks need."""
    group = _cpu_group()
    if group is None:
        raise RuntimeError("the resident-broker figure needs root and cgroup v1's cpuacct")
    folder = Path(tempfile.mkdtemp(prefix="attention-bench-broker-"))  # root's, 0700: the broker checks
    path = folder / "broker.sock"
    warm = "all" if first_uses is None else ",".join(first_uses) or "none"
    broker = subprocess.Popen([sys.executable, "-m", "attention_platform.grading.sandbox.broker", "--socket", str(path),
                               "--allow-uid", "0", "--first-uses", warm], cwd=workdir, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              text=True, preexec_fn=_joining(group))
    try:
        deadline = time.monotonic() + 180
        while not path.exists():
            if broker.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the sandbox broker did not start: {broker.stderr.read()[-2000:]}")
            time.sleep(0.1)
        yield str(path), lambda: _group_seconds(group)
    finally:
        broker.terminate()
        try:
            broker.wait(timeout=30)
        except subprocess.TimeoutExpired:
            broker.kill()
            broker.wait()
        _remove_group(group)
        shutil.rmtree(folder, ignore_errors=True)


def run_benchmark(workdir: Path, n: int = 100, *, assignment: str, jobs: int | None = None, latency_runs: int = 20,
                  log=print) -> int:
    """Stock ``nbgrader autograde`` and ``autograde-batch`` on the same generated class, each a whole
    command timed with its start-up, in one run: the batch as a machine's first (no teaching picture
    measured yet), the batch cold (its own sandbox zygote, started and warmed by the command; the
    picture's measurement kept by the first), the batch on one submission (its start-up: what the others add is the
    cost per submission), and the batch beside a resident sandbox broker (as a TA's batch on the hub
    runs: the broker's CPU during the command is counted, its start before it is not)."""
    workdir = Path(workdir).resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    courses, roster, notebook = prepare(workdir, n, assignment, log)
    bindir = Path(sys.executable).parent
    # The teaching picture's kept measurement (ATTENTION_PICTURE_CACHE) in a folder of this run's:
    # the first batch finds none (a machine's first batch), the later ones find what it kept.
    picture_cache = workdir / "picture-cache"
    shutil.rmtree(picture_cache, ignore_errors=True)
    picture_cache.mkdir(mode=0o700)
    env = dict(os.environ, PATH=f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}",
               ATTENTION_PICTURE_CACHE=str(picture_cache))

    def batch_command(course: Path, *extra: str) -> list[str]:
        cmd = [str(bindir / "attention-course"), "autograde-batch", assignment, "--course", str(course), "--no-progress"]
        return cmd + (["--jobs", str(jobs)] if jobs else []) + list(extra)

    def failed(label: str, proc: subprocess.CompletedProcess) -> int:
        errors = [line for line in proc.stdout.splitlines() if "error:" in line]
        log(f"{label} failed" + (" for:\n" + "\n".join(errors) if errors else "") + "\n" + proc.stderr[-3000:])
        return 1

    load_before = os.getloadavg()[0]
    log(f"stock: nbgrader autograde (in-kernel Execute, one kernel per notebook) over {n} submissions ...")
    stock_s, stock_cpu, stock_proc = _timed([str(bindir / "nbgrader"), "autograde", assignment, "--force"],
                                            courses["stock"], dict(env, ATTENTION_AUTOGRADE_EXECUTE="stock"))
    if stock_proc.returncode != 0:
        return failed("stock nbgrader autograde", stock_proc)
    load_batch = os.getloadavg()[0]
    log(f"first batch: autograde-batch with no teaching picture measured yet (a machine's first) over {n} submissions ...")
    first_s, first_cpu, first_proc = _timed(batch_command(courses["first"]), courses["first"], env)
    if first_proc.returncode != 0:
        return failed("autograde-batch (first)", first_proc)
    log(f"batch: attention-course autograde-batch (sandbox per submission, parallel) over {n} submissions ...")
    batch_s, batch_cpu, batch_proc = _timed(batch_command(courses["batch"]), courses["batch"], env)
    if batch_proc.returncode != 0:
        return failed("autograde-batch", batch_proc)
    first = next(iter(roster))
    log(f"batch start-up: the same command on one submission ({first}) ...")
    one_s, one_cpu, one_proc = _timed(batch_command(courses["start-up"], "--student", first), courses["start-up"], env)
    if one_proc.returncode != 0:
        return failed("autograde-batch on one submission", one_proc)
    log(f"batch beside a resident sandbox broker (started and warm before, as on the hub) over {n} submissions ...")
    from attention_platform.grading.sandbox import first_use

    with resident_broker(workdir, first_use.needed_by_course(courses["hub"])) as (socket_path, broker_seconds):
        broker_before = broker_seconds()
        hub_s, hub_cpu, hub_proc = _timed(batch_command(courses["hub"]), courses["hub"],
                                          dict(env, ATTENTION_SANDBOX_SOCKET=socket_path))
        hub_cpu += broker_seconds() - broker_before
    if hub_proc.returncode != 0:
        return failed("autograde-batch beside the broker", hub_proc)

    stock_scores = check_scores(courses["stock"], assignment=assignment, notebook=notebook)
    mismatches = []
    for label in ("first", "batch", "hub"):
        scores = check_scores(courses[label], assignment=assignment, notebook=notebook)
        differ = [(s, stock_scores.get(s), scores.get(s)) for s in roster if stock_scores.get(s) != scores.get(s)]
        for student, a, b in differ[:10]:
            diff = {k: (a.get(k) if a else None, b.get(k) if b else None) for k in set(a or {}) | set(b or {})
                    if (a or {}).get(k) != (b or {}).get(k)}
            answer = roster[student].name if roster[student] else "untouched"
            log(f"MISMATCH {label} {student} ({answer}): stock vs {label} {diff}")
        mismatches += differ + ([("(count)", len(stock_scores), len(scores))] if len(scores) != n else [])
    identical = not mismatches and len(stock_scores) == n

    latencies = measure_latency(courses["batch"], first, assignment, notebook, runs=latency_runs)
    p50 = statistics.median(latencies)
    p90 = sorted(latencies)[max(0, int(round(0.9 * len(latencies))) - 1)]
    per_wall, per_cpu = (batch_s - one_s) / max(n - 1, 1), (batch_cpu - one_cpu) / max(n - 1, 1)

    log("")
    log(f"submissions                     {n} of {assignment}/{notebook}.ipynb (stock run: {stock_s:.0f} s wall)")
    log(f"grades identical (per check)    {'yes' if identical else f'NO: {len(mismatches)} students differ'}")
    rows = (("stock nbgrader autograde", stock_s, stock_cpu), ("autograde-batch, machine's first", first_s, first_cpu),
            ("autograde-batch, cold", batch_s, batch_cpu),
            ("autograde-batch beside broker", hub_s, hub_cpu))
    for label, wall, cpu in rows:
        log(f"{label:<31} {wall:7.1f} s wall {wall / n:6.3f} s/submission  {cpu:7.1f} CPU-s {cpu / n:6.3f}/submission"
            f"  {stock_s / wall:5.1f}x wall  {stock_cpu / max(cpu, 1e-9):5.1f}x CPU")
    log(f"batch start-up (1 submission)   {one_s:7.1f} s wall {one_cpu:23.1f} CPU-s")
    log(f"each further submission         {per_wall * 1000:7.0f} ms wall {per_cpu * 1000:20.0f} ms CPU")
    best = stock_s / min(batch_s, hub_s)
    log(f"target                          wall >= {TARGET_WALL_RATIO:.0f}x stock: cold {stock_s / batch_s:.1f}x, beside the "
        f"broker {stock_s / hub_s:.1f}x ({'met' if best >= TARGET_WALL_RATIO else 'NOT met'}; the CPU ratios above "
        "are for information)")
    log(f"submit->feedback, warm grader   p50 {p50 * 1000:6.0f} ms   p90 {p90 * 1000:6.0f} ms   ({len(latencies)} runs)")
    log(f"machine: {os.cpu_count()} cores; load average before stock {load_before:.2f}, "
        f"before batch {load_batch:.2f}, at the end {os.getloadavg()[0]:.2f} (other work shares these cores)")
    return 0 if identical else 2


def measure_latency(course: Path, student: str, assignment: str, notebook: str, runs: int = 20) -> list[float]:
    """Submit one student's notebook again and again to a warm in-process grader;
    time each from the file landing in submitted/ to grades and feedback written."""
    from attention_platform.grading.batch import autograde_batch
    from attention_platform.grading.sandbox.client import get_zygote

    get_zygote().wait_ready()
    name = f"{notebook}.ipynb"
    nb = nbformat.read(course / "submitted" / student / assignment / name, as_version=4)
    autograde_batch(course, assignment, students=[student], progress=False, log=None)  # warm imports and caches
    times = []
    for _ in range(runs):
        started = time.monotonic()
        write_submission(course, student, nb, assignment=assignment, name=name)
        outcomes = autograde_batch(course, assignment, students=[student], progress=False, log=None)
        assert (course / "autograded" / student / assignment / name).exists() and outcomes[0].status == "ok"
        times.append(time.monotonic() - started)
    return times


def run_submission_benchmark(workdir: Path, *, assignment: str, runs: int = 3, log=print) -> int:
    """One student's full submission (every notebook of the assignment, the instructor's answers) graded four ways,
    each timed as a whole, start-up included: stock ``nbgrader autograde`` in a kernel (the
    baseline), ``nbgrader autograde`` sandboxed (a TA's command, the formgrader's button),
    ``attention-course autograde-batch``, and the warm grader (a process that graded before:
    submit to grades and feedback written, median of ``runs``). Grades must be identical."""
    from grader_tests.registry import assignment as assignment_checks

    notebooks = assignment_checks(assignment).notebooks
    workdir = Path(workdir).resolve()
    if workdir.exists():
        shutil.rmtree(workdir)
    workdir.mkdir(parents=True)
    base = copy_course(workdir / "course")
    nbgrader(base, "generate_assignment", assignment, "--force", check=True)
    student = "full"
    for notebook in notebooks:
        write_submission(base, student, handed_in(base, assignment, notebook), assignment=assignment,
                         name=f"{notebook}.ipynb")
    courses = {}
    for label in ("stock", "sandboxed", "batch", "warm"):
        courses[label] = workdir / label
        shutil.copytree(base, courses[label])
    bindir = Path(sys.executable).parent
    env = dict(os.environ, PATH=f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}")
    load_before = os.getloadavg()[0]
    figures = {}
    log(f"one submission of {assignment}, {len(notebooks)} notebooks, graded four ways ...")
    for label, cmd, extra in (
            ("stock", [str(bindir / "nbgrader"), "autograde", assignment, "--force"], {"ATTENTION_AUTOGRADE_EXECUTE": "stock"}),
            ("sandboxed", [str(bindir / "nbgrader"), "autograde", assignment, "--force"], {}),
            ("batch", [str(bindir / "attention-course"), "autograde-batch", assignment, "--course", str(courses["batch"]),
                       "--no-progress"], {})):
        wall, cpu, proc = _timed(cmd, courses[label], dict(env, **extra))
        if proc.returncode != 0:
            log(proc.stdout[-2000:] + proc.stderr[-3000:])
            return 1
        figures[label] = (wall, cpu)
    from attention_platform.grading.batch import autograde_batch
    from attention_platform.grading.sandbox.client import get_zygote

    get_zygote().wait_ready()
    autograde_batch(courses["warm"], assignment, students=[student], progress=False, log=None)  # warm imports and caches
    warm = []
    for _ in range(runs):
        started = time.monotonic()
        for notebook in notebooks:  # the submission lands again
            name = f"{notebook}.ipynb"
            nb = nbformat.read(courses["warm"] / "submitted" / student / assignment / name, as_version=4)
            write_submission(courses["warm"], student, nb, assignment=assignment, name=name)
        autograde_batch(courses["warm"], assignment, students=[student], progress=False, log=None)
        warm.append(time.monotonic() - started)
    figures["warm"] = (statistics.median(warm), None)

    scores = {label: check_scores(course, assignment=assignment, notebook=None).get(student)
              for label, course in courses.items()}
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
