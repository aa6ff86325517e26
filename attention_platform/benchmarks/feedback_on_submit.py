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
   then all press Submit at the same moment (the Assignments tab's request); each student then asks
   their own server for their status every 0.5 s, as the Assignments tab does while an attempt is
   pending. A sample is from the moment their submit request started to the moment the grader
   wrote that attempt's result into the student's folder (the ``graded`` time of their status);
   the time until their own status request saw it (one more ask of the tab, at most 0.5 s) is
   printed beside it.
4. Baseline, in the same run, on the same submissions: today's path to feedback, the TA's
   ``nbgrader collect``, ``autograde``, ``generate_feedback`` and ``release_feedback`` run as the
   grader the moment the last round is in. That is the best a student waits without feedback
   on submit (in practice: hours or days, until a TA does it).

It prints p50/p95/max of the samples against the issue's target (p50 at most 3 s with 5 students
submitting at once) and the baseline, and writes the figures to ``<state>/bench-results.json``.
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

TARGET_P50 = 3.0  # s: the target, p50 submit-to-result with 5 students submitting at once
POLL = 0.5  # s between two status requests of one student: as the Assignments tab asks after a submit
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

    async def status(self) -> dict:
        prefix = f"/user/{self.name}/"
        async with self.browser.http.get(self.browser.base + prefix + "attention/feedback-on-submit",
                                         headers={"X-XSRFToken": self.browser._xsrf(prefix)}) as reply:
            if reply.status != 200:
                raise RuntimeError(f"status answered {reply.status}")
            body = await reply.json()
        return body.get("assignments", {}).get(self.assignment) or {"attempts": []}

    async def prepare_round(self, round_no: int) -> None:
        await self.browser.save(round_no)  # a different answer each round: never an identical retry

    async def submit_and_wait(self, round_no: int, start: asyncio.Event) -> None:
        from attention_platform.settings import course_id

        before = len((await self.status())["attempts"])
        await start.wait()
        started, started_wall = time.monotonic(), time.time()
        reply = await self.browser._server_post("assignments/submit",
                                                {"course_id": course_id(), "assignment_id": self.assignment})
        submitted = time.monotonic() - started
        if not (isinstance(reply, dict) and reply.get("success")):
            self.samples.append({"round": round_no, "state": "not submitted", "detail": str(reply)[-300:]})
            return
        deadline = started + RESULT_TIMEOUT
        while time.monotonic() < deadline:
            attempts = (await self.status())["attempts"]
            if len(attempts) > before and attempts[before]["state"] not in ("queued", "grading"):
                shown = attempts[before]
                seen = time.monotonic() - started
                ready = seen
                if shown.get("graded"):  # when the grader wrote the result into the student's folder
                    graded = dt.datetime.fromisoformat(shown["graded"].replace("Z", "+00:00")).timestamp()
                    ready = min(seen, max(0.0, graded - started_wall))
                self.samples.append({"round": round_no, "state": shown["state"], "seconds": ready, "seen": seen,
                                     "submit_request": submitted, "score": shown.get("score"),
                                     "detail": shown.get("message", "")[:300]})
                return
            await asyncio.sleep(POLL)
        self.samples.append({"round": round_no, "state": "no result", "detail": f"none within {RESULT_TIMEOUT} s"})


async def _drive(url: str, students: list[BenchStudent], rounds: int, log) -> None:
    import aiohttp

    timeout = aiohttp.ClientTimeout(total=None, sock_connect=30)
    sessions = [aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True), timeout=timeout) for _ in students]
    try:
        await asyncio.gather(*(s.setup(h) for s, h in zip(students, sessions)))
        log(f"{len(students)} servers up, the assignment fetched")
        for round_no in range(rounds):
            await asyncio.gather(*(s.prepare_round(round_no) for s in students))
            start = asyncio.Event()
            waiting = [asyncio.create_task(s.submit_and_wait(round_no, start)) for s in students]
            await asyncio.sleep(0.5)  # every student has read their status: they press Submit together
            start.set()
            await asyncio.gather(*waiting)
            shown = [x for s in students for x in s.samples if x["round"] == round_no]
            log(f"round {round_no + 1}: " + ", ".join(f"{x.get('seconds', float('nan')):.2f} s {x['state']}"
                                                        for x in shown))
    finally:
        await asyncio.gather(*(h.close() for h in sessions))


def baseline(hub, assignment: str, log) -> dict:
    """Today's path, as the grader: collect, autograde, generate and release feedback, timed."""
    steps = {}
    for step in ("collect", "autograde", "generate_feedback", "release_feedback"):
        started = time.monotonic()
        done = subprocess.run([program("nbgrader"), step, assignment], capture_output=True, text=True, timeout=3600,
                              **hub.as_grader())
        steps[step] = time.monotonic() - started
        if done.returncode:
            raise RuntimeError(f"nbgrader {step} failed:\n{done.stderr[-3000:]}")
        log(f"TA's {step}: {steps[step]:.2f} s")
    return {"steps": steps, "seconds": sum(steps.values())}


def run(assignment: str, n: int = 5, rounds: int = 3, state: Path | None = None, port: int = 8500, log=print) -> dict:
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
        asyncio.run(_drive(hub.url, students, rounds, log))
        ta = baseline(hub, assignment, log)
    finally:
        hub_native.stop(hub, timeout=60)
    samples = [x for s in students for x in s.samples]
    seconds = [x["seconds"] for x in samples if x["state"] == "graded"]
    report = {
        "students": n, "notebook": work.path, "rounds": rounds, "cpus": os.cpu_count(), "policy": BENCH_POLICY,
        "submits": len(samples), "graded": len(seconds),
        "not_graded": [x for x in samples if x["state"] != "graded"],
        "p50": percentile(seconds, 50), "p95": percentile(seconds, 95), "max": max(seconds, default=None),
        "seen_p50": percentile([x["seen"] for x in samples if x["state"] == "graded"], 50),
        "seen_p95": percentile([x["seen"] for x in samples if x["state"] == "graded"], 95),
        "target_p50": TARGET_P50,
        "submit_request_p50": percentile([x["submit_request"] for x in samples if "submit_request" in x], 50),
        "baseline": ta, "samples": samples,
    }
    (state / "bench-results.json").write_text(json.dumps(report, indent=1, default=str))
    print_report(report, log)
    return report


def print_report(r: dict, log=print) -> None:
    def s(v):
        return "-" if v is None else f"{v:.2f} s"

    log("")
    log(f"Feedback on submit, {r['students']} students submitting {r['notebook']} at once, {r['rounds']} rounds, "
        f"{r['cpus']} CPUs: {r['graded']}/{r['submits']} submits graded")
    log(f"  submit -> result shown   p50 {s(r['p50'])}   p95 {s(r['p95'])}   max {s(r['max'])}   "
        f"(target: p50 <= {r['target_p50']:.0f} s: {'met' if r['p50'] is not None and r['p50'] <= r['target_p50'] else 'NOT met'})")
    log(f"  seen in a tab asking every {POLL:g} s    p50 {s(r['seen_p50'])}   p95 {s(r['seen_p95'])}")
    log(f"  the submit request itself p50 {s(r['submit_request_p50'])}")
    b = r["baseline"]
    log(f"  baseline, the TA's path on the same submissions at once: {s(b['seconds'])} "
        f"(" + ", ".join(f"{k} {v:.2f} s" for k, v in b["steps"].items()) + ")")
    if r["p50"]:
        log(f"  -> feedback on submit's p50 is {b['seconds'] / r['p50']:.1f}x sooner than the TA's path run at once")
    for x in r["not_graded"]:
        log(f"  not graded: round {x['round'] + 1}: {x['state']}: {x.get('detail', '')}")


def main(args) -> int:
    if os.geteuid() != 0:
        print("bench-feedback-on-submit starts the native hub with real Unix users: run it as root", file=sys.stderr)
        return 2
    from attention_platform.course.assignments import first_assignment

    report = run(args.assignment or first_assignment(), n=args.students, rounds=args.rounds, state=args.state_dir,
                 port=args.port)
    return 0 if report["graded"] == report["submits"] else 1

