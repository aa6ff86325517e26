"""``attention-course bench-feedback-on-submit``: submit-to-result latency on the real hub.

Not a test (nothing here is asserted against a clock): a measurement to print, as root on the
native hub, with the class's real pieces — JupyterHub, the students' servers, nbgrader's submit,
the grader account's feedback-on-submit grader, the sandbox broker.

1. A fresh native hub (``attention-course hub``'s ``prepare``/``start``) with ``-n`` students and the
   policy "full feedback, no limit, the collected submission counts" (no limit: every round is
   graded; ``collected``: the TA's collect below does what it does without feedback on submit).
2. Each student logs in, starts their server, fetches the assignment (``--assignment``, default the
   course's first; as the load test's students).
3. ``--rounds`` times: every student saves a different one of the assignment's wheats and chaffs,
   then all press Submit at the same moment (the Assignments tab's request), or, with ``--spread S``,
   each at their own moment spread evenly over S seconds (a rush); each student then asks
   their own server for their status as the Assignments tab does: a request the server holds
   until the status changes (``since``/``wait``, see :mod:`attention_platform.lab.feedback_on_submit`),
   then the next. A sample is from the moment their submit request started to the moment the grader
   wrote that attempt's result into the student's folder (the ``graded`` time of their status);
   the time until their own held request answered with it is printed beside it.
4. Baseline, in the same run, on the same submissions: today's path to feedback, the TA's
   ``nbgrader collect``, ``attention-course autograde-batch`` (the batch grader, as the formgrader's
   Autograde-all), ``nbgrader generate_feedback`` and ``release_feedback`` run as the grader the
   moment the last round is in and feedback on submit has made its pages (they follow each result,
   in a niced process; a TA's run, hours later, finds them made: the time waited is printed). That is
   the best a student waits without feedback on submit (in practice: hours or days, until a TA does it).

It prints the rounds side by side (drain: from the first press of Submit to the last result;
p50/p95/max), then all rounds together against the targets (p50 at most 3 s, p95 at most 6 s), the
submits lost (no result) or duplicated (more than one attempt for one submit), where a graded
attempt's time went (the grader's log line per attempt, ``engine.PARTS``) and the baseline, and
writes the figures to ``<state>/bench-results.json``.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from attention_platform.course.notebooks import COURSE_ROOT
from attention_platform.venv import program

TARGET_P50 = 3.0  # s: the targets of submit-to-result with 30 students submitting at once on 2 cores
TARGET_P95 = 6.0
POLL = 0.5  # s between two status requests of one student while waiting for the last round's pages
HELD = 25  # s a status request may be held by the student's server: the Assignments tab's wait
RESULT_TIMEOUT = 600  # s: an attempt not graded by then is reported as lost (a bound, not a target)
BENCH_POLICY = {"feedback": "full", "attempts": None, "counts": "collected"}


def percentile(values: list[float], q: float) -> float | None:
    """Nearest-rank percentile (q in 0..100) of ``values``; None when there are none."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, -(-len(ordered) * q // 100))  # ceil(n q / 100), at least the first
    return ordered[int(rank) - 1]


class BenchStudent:
    """One student: the load test's browser steps, then submit and wait for their own result."""

    def __init__(self, base: str, name: str, password: str, index: int, work):
        from attention_platform.benchmarks.loadtest import LoadStudent, Student

        self.record = Student(name, password)
        self.browser = LoadStudent(base, self.record, index, 1, __import__("random").Random(index), work)
        self.assignment = work.assignment
        self.name, self.index = name, index
        self.samples: list[dict] = []

    async def setup(self, http) -> None:
        self.browser.http = http
        await self.browser.login()
        await self.browser.spawn()
        await self.browser.open_lab()
        await self.browser.fetch()

    async def status(self, since: str | None = None) -> tuple[dict, str | None]:
        """This student's status of the assignment and the answer's version; with ``since``, held by
        their server until the version differs (at most ``HELD`` seconds), as the Assignments tab asks."""
        prefix = f"/user/{self.name}/"
        query = f"?since={since}&wait={HELD}" if since else ""
        async with self.browser.http.get(self.browser.base + prefix + "attention/feedback-on-submit" + query,
                                         headers={"X-XSRFToken": self.browser._xsrf(prefix)}) as reply:
            if reply.status != 200:
                raise RuntimeError(f"status answered {reply.status}")
            body = await reply.json()
        return body.get("assignments", {}).get(self.assignment) or {"attempts": []}, body.get("version")

    async def prepare_round(self, round_no: int) -> None:
        await self.browser.save(round_no)  # a different answer each round: never an identical retry

    async def submit_and_wait(self, round_no: int, start: asyncio.Event, delay: float = 0.0) -> None:
        from attention_platform.settings import course_id

        current, version = await self.status()
        before = len(current["attempts"])
        await start.wait()
        await asyncio.sleep(delay)
        started, started_wall = time.monotonic(), time.time()
        reply = await self.browser._server_post("assignments/submit",
                                                {"course_id": course_id(), "assignment_id": self.assignment})
        submitted = time.monotonic() - started
        if not (isinstance(reply, dict) and reply.get("success")):
            self.samples.append({"round": round_no, "state": "not submitted", "detail": str(reply)[-300:]})
            return
        deadline = started + RESULT_TIMEOUT
        while time.monotonic() < deadline:
            current, version = await self.status(since=version)
            attempts = current["attempts"]
            if len(attempts) > before and attempts[before]["state"] not in ("queued", "grading"):
                shown = attempts[before]
                seen = time.monotonic() - started
                ready = seen
                if shown.get("graded"):  # when the grader wrote the result into the student's folder
                    graded = dt.datetime.fromisoformat(shown["graded"].replace("Z", "+00:00")).timestamp()
                    ready = min(seen, max(0.0, graded - started_wall))
                self.samples.append({"round": round_no, "state": shown["state"], "seconds": ready, "seen": seen,
                                     "submit_request": submitted, "score": shown.get("score"),
                                     "checks": [[c["notebook"], c["title"], c["passed"]] for c in shown.get("checks", [])],
                                     "pressed": started_wall, "result_at": started_wall + ready,
                                     "duplicated": len(attempts) - before - 1,
                                     "detail": shown.get("message", "")[:300]})
                return
        self.samples.append({"round": round_no, "state": "no result", "detail": f"none within {RESULT_TIMEOUT} s"})


async def _drive(url: str, students: list[BenchStudent], rounds: int, log, spread: float = 0.0,
                 meter=dict, spent: list | None = None) -> None:
    """``meter()``: CPU-seconds so far by name; what each round spent is appended to ``spent``."""
    import aiohttp

    timeout = aiohttp.ClientTimeout(total=None, sock_connect=30)
    sessions = [aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True), timeout=timeout) for _ in students]
    try:
        await asyncio.gather(*(s.setup(h) for s, h in zip(students, sessions)))
        log(f"{len(students)} servers up, the assignment fetched")
        for round_no in range(rounds):
            await asyncio.gather(*(s.prepare_round(round_no) for s in students))
            start = asyncio.Event()
            waiting = [asyncio.create_task(s.submit_and_wait(round_no, start, spread * i / len(students)))
                       for i, s in enumerate(students)]
            await asyncio.sleep(0.5)  # every student has read their status: they press Submit together
            before = meter()
            start.set()
            await asyncio.gather(*waiting)
            after = meter()
            if spent is not None:
                spent.append({name: after[name] - before[name] for name in before})
            shown = [x for s in students for x in s.samples if x["round"] == round_no]
            log(f"round {round_no + 1}: " + ", ".join(f"{x.get('seconds', float('nan')):.2f} s {x['state']}"
                                                        for x in shown))
        await _pages_made(students, log)
    finally:
        await asyncio.gather(*(h.close() for h in sessions))


async def _pages_made(students: list[BenchStudent], log) -> None:
    """Until every student's last graded attempt shows its feedback pages (at most RESULT_TIMEOUT)."""
    started = time.monotonic()
    while True:
        last = [(await s.status())[0]["attempts"][-1:] for s in students]
        waiting = sum(1 for a in last if a and a[0]["state"] == "graded" and not a[0].get("pages"))
        if not waiting or time.monotonic() - started > RESULT_TIMEOUT:
            break
        await asyncio.sleep(POLL)
    log(f"the last round's feedback pages made {time.monotonic() - started:.2f} s after its last result"
        + (f" ({waiting} students' still not)" if waiting else ""))


def baseline(hub, assignment: str, log) -> dict:
    """Today's path, as the grader: collect, autograde, generate and release feedback, timed."""
    steps, failed = {}, {}
    for step in ("collect", "autograde", "generate_feedback", "release_feedback"):
        command = ([program("attention-course"), "autograde-batch", assignment, "--course", str(hub.course_dir),
                    "--no-progress"] if step == "autograde" else [program("nbgrader"), step, assignment])
        started = time.monotonic()
        done = subprocess.run(command, capture_output=True, text=True, timeout=3600, **hub.as_grader())
        steps[step] = time.monotonic() - started
        if done.returncode:  # reported beside the figures; the steps after it still run
            failed[step] = done.stderr.strip().splitlines()[-1:] or [f"exit status {done.returncode}"]
            log(f"TA's {step} failed after {steps[step]:.2f} s:\n{done.stderr[-3000:]}")
            continue
        log(f"TA's {step}: {steps[step]:.2f} s")
    return {"steps": steps, "seconds": sum(steps.values()), "failed": failed}


def as_the_ta_graded(course: Path, assignment: str, students: list[BenchStudent]) -> dict:
    """Each student's result of their last round, as feedback on submit showed it, against the
    course's gradebook after the TA's autograde of the same (collected) submissions: the students whose
    points or checks passed differ, and how many were compared (those with a graded last round)."""
    from attention_platform.course.assignment_checks import as_students_see
    from attention_platform.course.directory import check_scores

    by_ta = check_scores(course, assignment=assignment, notebook=None)
    compared, differ = 0, []
    for student in students:
        graded = [x for x in student.samples if x["state"] == "graded"]
        if not graded or graded[-1]["round"] != max(x["round"] for x in student.samples):
            continue
        shown = graded[-1]
        compared += 1
        points, passed = as_students_see(assignment, by_ta.get(student.name, {}))
        if points != shown["score"] or passed != {(nb, title): ok for nb, title, ok in shown["checks"]}:
            differ.append(student.name)
    return {"compared": compared, "differ": differ}


def round_figures(samples: list[dict], rounds: int) -> list[dict]:
    """Per round: graded count, drain (first press to last result), p50/p95/max of submit-to-result."""
    figures = []
    for round_no in range(rounds):
        shown = [x for x in samples if x["round"] == round_no]
        graded = [x for x in shown if x["state"] == "graded"]
        seconds = [x["seconds"] for x in graded]
        drain = (max(x["result_at"] for x in graded) - min(x["pressed"] for x in graded)) if graded else None
        figures.append({"round": round_no + 1, "submits": len(shown), "graded": len(graded), "drain": drain,
                        "p50": percentile(seconds, 50), "p95": percentile(seconds, 95),
                        "max": max(seconds, default=None)})
    return figures


def attempt_parts(log_file: Path, since: float) -> dict:
    """Where graded attempts' time went: the mean of each part over the grader's per-attempt log
    lines (``<student>: attempt N's time: {...}``) written after ``since`` (a log file's size), and
    the mean of the sandbox's part by notebook (``... attempt N's sandbox time by notebook: {...}``)."""
    totals, count = {}, 0
    by_notebook, notebook_count = {}, 0
    with open(log_file, "rb") as fh:
        fh.seek(since)
        for line in fh:
            text = line.decode(errors="replace")
            for marker in ("'s time: {", "'s sandbox time by notebook: {"):
                if marker in text:
                    break
            else:
                continue
            try:
                parts = json.loads(text[text.index(marker) + len(marker) - 1:])
            except ValueError:
                continue
            if marker == "'s time: {":
                count += 1
                sums = totals
            else:
                notebook_count += 1
                sums = by_notebook
            for part, seconds in parts.items():
                sums[part] = sums.get(part, 0.0) + float(seconds)
    return {"attempts": count, "mean": {part: total / count for part, total in totals.items()} if count else {},
            "sandbox_by_notebook": {name: total / notebook_count for name, total in by_notebook.items()}
            if notebook_count else {}}


def run(assignment: str, n: int = 5, rounds: int = 3, state: Path | None = None, port: int = 8500, log=print,
        spread: float = 0.0) -> dict:
    state = (state or COURSE_ROOT / "build" / "bench-feedback-on-submit").resolve()
    os.environ["ATTENTION_FEEDBACK_ON_SUBMIT"] = json.dumps({assignment: BENCH_POLICY})  # the hub's processes inherit it
    from attention_platform.hub import native as hub_native
    from attention_platform.benchmarks.loadtest import Homework
    from attention_platform.settings import settings

    work = Homework.of(assignment)

    if state.exists():
        shutil.rmtree(state)
    log(f"preparing a hub with {n} students in {state} ...")
    demo = hub_native.DemoClass(prefix=settings().hub_demo_prefix or "fosbench-", size=n)  # no clash with
    hub = hub_native.prepare(state, port=port, formgrader_port=port + 99, demo=demo, log=log)  # another hub's users
    hub_native.start(hub)
    log(f"hub up on {hub.url} in {hub.start_seconds:.1f} s")
    try:
        passwords = json.loads((state / "demo-accounts.json").read_text())
        names = [name for name in passwords if "student" in name][:n]
        students = [BenchStudent(hub.url, name, passwords[name], i, work) for i, name in enumerate(names)]
        log_start = (state / "jupyterhub.log").stat().st_size
        spent: list[dict] = []
        asyncio.run(_drive(hub.url, students, rounds, log, spread, meter=lambda: _cpu_so_far(hub), spent=spent))
        ta = baseline(hub, assignment, log)
        same_grades = as_the_ta_graded(hub.course_dir, assignment, students) if "autograde" not in ta["failed"] else None
        parts = attempt_parts(state / "jupyterhub.log", log_start)
    finally:
        hub_native.stop(hub, timeout=60)
    samples = [x for s in students for x in s.samples]
    seconds = [x["seconds"] for x in samples if x["state"] == "graded"]
    per_round = round_figures(samples, rounds)
    for figures, cpu in zip(per_round, spent):
        figures["cpu"] = cpu
    report = {
        "students": n, "notebook": work.path, "assignment": assignment, "rounds": rounds, "spread": spread,
        "cpus": os.cpu_count(), "policy": BENCH_POLICY,
        "submits": len(samples), "graded": len(seconds), "per_round": per_round,
        "lost": sum(1 for x in samples if x["state"] in ("no result", "not submitted")),
        "duplicated": sum(max(0, x.get("duplicated", 0)) for x in samples), "parts": parts,
        "not_graded": [x for x in samples if x["state"] != "graded"],
        "p50": percentile(seconds, 50), "p95": percentile(seconds, 95), "max": max(seconds, default=None),
        "seen_p50": percentile([x["seen"] for x in samples if x["state"] == "graded"], 50),
        "seen_p95": percentile([x["seen"] for x in samples if x["state"] == "graded"], 95),
        "target_p50": TARGET_P50, "target_p95": TARGET_P95,
        "submit_request_p50": percentile([x["submit_request"] for x in samples if "submit_request" in x], 50),
        "baseline": ta, "same_grades": same_grades, "samples": samples,
    }
    (state / "bench-results.json").write_text(json.dumps(report, indent=1, default=str))
    print_report(report, log)
    return report


def _cpu_so_far(hub) -> dict:
    """CPU-seconds so far: the machine's, the feedback-on-submit grader's, the sandbox broker's (with
    its zygotes and every sandbox of theirs), the students' servers' (what the hub started as
    ``jupyterhub-singleuser``, with their kernels) and the hub's own with its proxy's."""
    from attention_platform.benchmarks import cpu

    return {"machine": cpu.machine_seconds(), "grader": cpu.tree_seconds(hub.instant.pid),
            "sandboxes": cpu.tree_seconds(hub.broker.pid) if hub.broker else 0.0,
            "servers": cpu.marked_seconds(hub.process.pid, "jupyterhub-singleuser"),
            "hub": cpu.own_seconds(hub.process.pid) + cpu.marked_seconds(hub.process.pid, "configurable-http-proxy")}


def print_report(r: dict, log=print) -> None:
    def s(v):
        return "-" if v is None else f"{v:.2f} s"

    def met(value, target):
        return "met" if value is not None and value <= target else "NOT met"

    log("")
    arrivals = f"arriving over {r['spread']:g} s" if r.get("spread") else "at once"
    log(f"Feedback on submit, {r['students']} students submitting {r['assignment']} {arrivals}, {r['rounds']} rounds, "
        f"{r['cpus']} CPUs: {r['graded']}/{r['submits']} submits graded, {r['lost']} lost, {r['duplicated']} duplicated")
    log("  round   graded   drain      p50       p95       max")
    for x in r["per_round"]:
        log(f"  {x['round']:>5}   {x['graded']:>3}/{x['submits']:<3} {s(x['drain']):>8}  {s(x['p50']):>8}  "
            f"{s(x['p95']):>8}  {s(x['max']):>8}")
    log("  round   CPU-s spent: machine   grader   broker and sandboxes   students' servers   hub and proxy   "
        "machine per graded   drain at least")
    for x in r["per_round"]:
        if "cpu" in x and x["graded"]:
            cpu = x["cpu"]
            log(f"  {x['round']:>5}   {cpu['machine']:>20.2f}   {cpu['grader']:>6.2f}   {cpu['sandboxes']:>20.2f}   "
                f"{cpu.get('servers', 0.0):>17.2f}   {cpu.get('hub', 0.0):>13.2f}   "
                f"{cpu['machine'] / x['graded']:>18.3f}   {cpu['machine'] / r['cpus']:>12.2f} s")
    drains = [x["drain"] for x in r["per_round"] if x["drain"]]
    if len(drains) > 1:
        log(f"  last round's drain / first round's: {drains[-1] / drains[0]:.2f}")
    log(f"  submit -> result shown   p50 {s(r['p50'])}   p95 {s(r['p95'])}   max {s(r['max'])}   "
        f"(targets: p50 <= {r['target_p50']:.0f} s {met(r['p50'], r['target_p50'])}, "
        f"p95 <= {r['target_p95']:.0f} s {met(r['p95'], r['target_p95'])})")
    log(f"  seen in the student's tab        p50 {s(r['seen_p50'])}   p95 {s(r['seen_p95'])}")
    log(f"  the submit request itself p50 {s(r['submit_request_p50'])}")
    parts = r["parts"]
    if parts["attempts"]:
        total = sum(parts["mean"].values())
        log(f"  a graded attempt's time, mean of {parts['attempts']} (the grader's log), {s(total)} in all:")
        for part, seconds in sorted(parts["mean"].items(), key=lambda item: -item[1]):
            log(f"    {part:<22} {s(seconds):>8}  {100 * seconds / total if total else 0:5.1f} %")
            if part == "sandbox":
                for name, spent in sorted(parts["sandbox_by_notebook"].items(), key=lambda item: -item[1]):
                    log(f"      {name:<20} {s(spent):>8}")
    b = r["baseline"]
    log(f"  baseline, the TA's path on the same submissions at once: {s(b['seconds'])} "
        f"(" + ", ".join(f"{k} {v:.2f} s" for k, v in b["steps"].items()) + ")")
    for step, why in b.get("failed", {}).items():
        log(f"  the TA's {step} FAILED: {' '.join(why)[:300]}")
    same = r.get("same_grades")
    if same is not None:
        log(f"  grades as the TA's autograde gave them (points and every check passed), the last round: "
            f"{same['compared'] - len(same['differ'])} of {same['compared']} students"
            + (f"; DIFFERENT for {', '.join(same['differ'][:10])}" if same["differ"] else ""))
    if r["p50"] and not b.get("failed"):
        log(f"  -> feedback on submit's p50 is {b['seconds'] / r['p50']:.1f}x sooner than the TA's path run at once")
    for x in r["not_graded"]:
        log(f"  not graded: round {x['round'] + 1}: {x['state']}: {x.get('detail', '')}")


def main(args) -> int:
    if os.geteuid() != 0:
        print("bench-feedback-on-submit starts the native hub with real Unix users: run it as root", file=sys.stderr)
        return 2
    from attention_platform.course.assignments import first_assignment

    report = run(args.assignment or first_assignment(), n=args.students, rounds=args.rounds, state=args.state_dir,
                 port=args.port, spread=args.spread)
    return 0 if report["graded"] == report["submits"] else 1

