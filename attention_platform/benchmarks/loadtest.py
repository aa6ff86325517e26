"""``attention-course load-test``: the ten minutes before a deadline, on the native hub.

N simulated students (default 50, each its own hub account and, as root, its own Unix
user) work on one assignment (``--assignment``, default the course's first): each types one of
the wheats and chaffs of its first notebook into the fetched notebook (course/samples.py). They
do what a student's browser does, concurrently, against ``attention-course hub`` on
127.0.0.1. Like JupyterHub's own traffic simulator (hubtraf), each student is an HTTP
session with its own cookie jar, students arrive uniformly spread over a ramp period, and
every step is timed and bounded:

  login     GET/POST /hub/login (NativeAuthenticator, the real form with its _xsrf)
  spawn     POST /hub/api/users/<u>/server, then the progress event stream until ready
  open_lab  GET /user/<u>/lab (the OAuth hand-shake with the hub, as a browser does)
  fetch     POST /user/<u>/assignments/fetch          (nbgrader Assignments tab)
  save      PUT  /user/<u>/api/contents/<assignment>/<notebook>.ipynb (an answer)
  validate  POST /user/<u>/attention/validate         (the Lab's Validate button, course_lab.py)
  submit    POST /user/<u>/assignments/submit         (some students submit 2-3 times)

It prints p50/p95/max latency and errors per step, then checks, as the grader, with
``nbgrader collect`` + ``nbgrader autograde`` and the gradebook that every student's last
accepted submission arrived exactly once (one inbound folder per accepted distinct
submission, no partial folder), intact (SHA-256 of the notebook the server saved equals
the collected file) and with the timestamp the student was shown (inside the submit
request's time window). Memory of every student's server (RSS of the server and its
kernels, sampled every 2 s; PSS of idle servers at the end) and of the hub is reported.

Results go to ``<state>/load-results.json``. Network: 127.0.0.1 only; every request
has a timeout and every loop a bound.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import hashlib
import json
import os
import random
import shutil
import statistics
import subprocess
import threading
import time
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from attention_platform.course.notebooks import COURSE_ROOT
from attention_platform.settings import course_id, settings
from attention_platform.venv import environment, program

STEPS = ("login", "spawn", "open_lab", "fetch", "save", "validate", "submit")
# Upper bounds per request (seconds): generous for a loaded 2-core machine, never unbounded.
TIMEOUTS = {"login": 120, "spawn": 300, "open_lab": 120, "fetch": 120, "save": 60, "validate": 300, "submit": 120}


@dataclass
class Student:
    name: str
    password: str
    timings: dict = field(default_factory=lambda: {s: [] for s in STEPS})
    errors: list = field(default_factory=list)
    accepted: list = field(default_factory=list)  # one dict per successful submit
    validate_ok: list = field(default_factory=list)


def _utc(stamp: str) -> dt.datetime:
    from nbgrader.utils import parse_utc

    return parse_utc(stamp)


@dataclass(frozen=True)
class Homework:
    """What the simulated students work on: an assignment's first notebook, with its wheats, then its
    chaffs, typed in by turns (all must arrive; a notebook without proofs gets the instructor's answers)."""

    assignment: str
    notebook: str  # nbgrader notebook id
    answers: tuple  # grader_tests.proofs.Proof, or None for the instructor's answers

    @classmethod
    def of(cls, assignment: str) -> Homework:
        from attention_platform.course.samples import proofs_of
        from grader_tests.registry import assignment as assignment_checks

        found = assignment_checks(assignment)
        notebook = found.notebooks[0]
        wheats, chaffs = proofs_of(found, notebook)
        return cls(assignment, notebook, tuple(wheats + chaffs) or (None,))

    @property
    def path(self) -> str:
        return f"{self.assignment}/{self.notebook}.ipynb"

    @cached_property
    def source(self):
        """The instructor's notebook the answers are typed into (read once: saves are timed)."""
        import nbformat

        return nbformat.read(COURSE_ROOT / "source" / self.path, as_version=4)

    def answered(self, fetched, i: int):
        """The fetched notebook with the ``i``-th answer typed in."""
        from attention_platform.course.samples import typed_in

        return typed_in(fetched, self.source, self.answers[i % len(self.answers)])


class LoadStudent:
    def __init__(self, base: str, student: Student, index: int, rounds: int, rng: random.Random, work: Homework):
        self.base, self.s, self.index, self.rounds, self.rng, self.work = base, student, index, rounds, rng, work
        self.http = None

    async def _timed(self, step: str, coro):
        started = time.monotonic()
        try:
            result = await asyncio.wait_for(coro, TIMEOUTS[step])
        except Exception as exc:  # noqa: BLE001 - every failure is a counted error with its message
            self.s.errors.append({"step": step, "error": f"{type(exc).__name__}: {exc}"[:500]})
            raise
        self.s.timings[step].append(time.monotonic() - started)
        return result

    def _xsrf(self, prefix: str) -> str:
        import yarl

        cookies = self.http.cookie_jar.filter_cookies(yarl.URL(self.base + prefix))
        morsel = cookies.get("_xsrf")
        return morsel.value if morsel else ""

    async def login(self):
        async with self.http.get(self.base + "/hub/login") as page:
            page.raise_for_status()
            await page.read()
        data = {"username": self.s.name, "password": self.s.password, "_xsrf": self._xsrf("/hub/")}
        async with self.http.post(self.base + "/hub/login?next=", data=data, allow_redirects=False) as reply:
            await reply.read()
            if reply.status != 302:
                raise RuntimeError(f"login answered {reply.status}")

    async def spawn(self):
        headers = {"X-XSRFToken": self._xsrf("/hub/")}
        url = f"{self.base}/hub/api/users/{self.s.name}/server"
        async with self.http.post(url, headers=headers, json={}) as reply:
            body = await reply.text()
            if reply.status not in (201, 202, 400):  # 400: already running
                raise RuntimeError(f"spawn answered {reply.status}: {body[:300]}")
        # The spawn page's progress bar: an event stream that ends with ready (or failed).
        async with self.http.get(url + "/progress", headers=headers) as stream:
            if stream.status != 200:
                raise RuntimeError(f"progress answered {stream.status}")
            async for raw in stream.content:
                line = raw.decode(errors="replace").strip()
                if not line.startswith("data:"):
                    continue
                event = json.loads(line[5:])
                if event.get("ready"):
                    return
                if event.get("failed"):
                    raise RuntimeError(f"spawn failed: {event.get('message', '')[:300]}")
        raise RuntimeError("progress stream ended before the server was ready")

    async def open_lab(self):
        async with self.http.get(f"{self.base}/user/{self.s.name}/lab") as page:
            await page.read()
            if page.status != 200:
                raise RuntimeError(f"lab answered {page.status}")

    async def _server_post(self, path: str, data: dict) -> object:
        prefix = f"/user/{self.s.name}/"
        async with self.http.post(self.base + prefix + path, data=data,
                                  headers={"X-XSRFToken": self._xsrf(prefix)}) as reply:
            text = await reply.text()
            if reply.status != 200:
                raise RuntimeError(f"{path} answered {reply.status}: {text[:300]}")
            return json.loads(text)

    async def fetch(self):
        assignment = self.work.assignment
        listing = await self._server_post("assignments/fetch", {"course_id": course_id(), "assignment_id": assignment})
        status = [a.get("status") for a in listing.get("value", []) if a.get("assignment_id") == assignment]
        if not listing.get("success") or "fetched" not in status:
            raise RuntimeError(f"fetch did not fetch: {str(listing)[:300]}")

    async def save(self, round_no: int) -> str:
        """Write an answer into the fetched notebook; returns the SHA-256 of the bytes saved."""
        import nbformat

        api = f"{self.base}/user/{self.s.name}/api/contents/{self.work.path}"
        headers = {"X-XSRFToken": self._xsrf(f"/user/{self.s.name}/")}
        async with self.http.get(api, params={"content": "1"}, headers=headers) as reply:
            if reply.status != 200:
                raise RuntimeError(f"open notebook answered {reply.status}")
            model = await reply.json()
        nb = nbformat.from_dict(model["content"])
        nb = self.work.answered(nb, self.index + round_no)
        nb.metadata["load_test"] = {"student": self.s.name, "round": round_no, "nonce": self.rng.getrandbits(64)}
        async with self.http.put(api, json={"type": "notebook", "format": "json", "content": nb},
                                 headers=headers) as reply:
            if reply.status not in (200, 201):
                raise RuntimeError(f"save answered {reply.status}: {(await reply.text())[:300]}")
            await reply.read()
        # The exact bytes on the student's disk (what submit will copy).
        async with self.http.get(api, params={"type": "file", "format": "text", "content": "1"},
                                 headers=headers) as reply:
            model = await reply.json()
        return hashlib.sha256(model["content"].encode()).hexdigest()

    async def validate(self):
        out = await self._server_post("attention/validate", {"path": self.work.path})
        if not out.get("ran"):
            raise RuntimeError(f"validate failed: {str(out.get('headline'))[-300:]}")
        return out

    async def submit(self, checksum: str):
        started = dt.datetime.now(dt.timezone.utc)
        assignment = self.work.assignment
        out = await self._server_post("assignments/submit", {"course_id": course_id(), "assignment_id": assignment})
        finished = dt.datetime.now(dt.timezone.utc)
        if not (isinstance(out, dict) and out.get("success")):
            raise RuntimeError(f"submit failed: {str(out.get('value') if isinstance(out, dict) else out)[-400:]}")
        # The Assignments tab lists the student's submissions (from their local record), newest last.
        stamps = [sub.get("exact_timestamp") or sub.get("timestamp") for a in out.get("value", [])
                  if a.get("assignment_id") == assignment and a.get("status") == "submitted"
                  for sub in a.get("submissions", [])]
        self.s.accepted.append({"checksum": checksum, "shown": max(filter(None, stamps), default=None),
                                "request_start": started.isoformat(), "request_end": finished.isoformat()})

    async def think(self):
        await asyncio.sleep(self.rng.uniform(0.5, 2.0))

    async def run(self, delay: float):
        import aiohttp

        await asyncio.sleep(delay)
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=30)
        async with aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True), timeout=timeout) as http:
            self.http = http
            try:
                await self._timed("login", self.login())
                await self._timed("spawn", self.spawn())
                await self._timed("open_lab", self.open_lab())
                await self._timed("fetch", self.fetch())
                for round_no in range(self.rounds):
                    await self.think()
                    checksum = await self._timed("save", self.save(round_no))
                    if round_no == 0:
                        try:  # Validate is advisory: a student whose Validate fails still submits
                            await self._timed("validate", self.validate())
                            self.s.validate_ok.append(True)
                        except Exception:  # noqa: BLE001 - recorded as an error by _timed
                            self.s.validate_ok.append(False)
                    await self._timed("submit", self.submit(checksum))
            except Exception:  # noqa: BLE001 - recorded by _timed; the student stops here
                if not self.s.errors:
                    raise


# ------------------------------------------------------------------ CPU
CPUACCT = "/sys/fs/cgroup/cpuacct"


class CpuAccount:
    """CPU-seconds of the platform alone (hub, proxy, every student server and kernel, the
    formgrader, the sandbox broker and its sandboxes), not of this driver or of whatever else
    shares the machine: the hub's processes start inside a cpuacct cgroup of their own
    (cgroup v1, as root), and every process they start stays in it. None when unavailable."""

    def __init__(self, enabled: bool = True):
        self.path = None
        try:
            if enabled and os.geteuid() == 0 and os.path.isfile(os.path.join(CPUACCT, "cpuacct.usage")):
                self.path = os.path.join(CPUACCT, f"attention-load-{os.getpid()}")
                os.makedirs(self.path, exist_ok=True)
        except OSError:
            self.path = None

    def seconds(self) -> float | None:
        if self.path is None:
            return None
        with open(os.path.join(self.path, "cpuacct.usage")) as f:
            return int(f.read()) / 1e9

    def starting(self):
        """A context in which this process, and so what it starts, is in the cgroup."""
        import contextlib

        @contextlib.contextmanager
        def inside():
            if self.path is None:
                yield
                return
            with open("/proc/self/cgroup") as f:
                own = next((line.split(":", 2)[2].strip() for line in f.read().splitlines()
                            if "cpuacct" in line.split(":", 2)[1].split(",")), "/")
            with open(os.path.join(self.path, "cgroup.procs"), "w") as f:
                f.write(str(os.getpid()))
            try:
                yield
            finally:  # back out: the driver's own CPU is not the platform's
                with open(os.path.join(CPUACCT, own.lstrip("/"), "cgroup.procs"), "w") as f:
                    f.write(str(os.getpid()))

        return inside()

    def remove(self) -> None:
        if self.path is not None:
            try:
                os.rmdir(self.path)  # once every process in it has exited
            except OSError:
                pass


# Where a process's CPU goes, by what it is (the breakdown of a session's CPU-seconds).
def _category(cmd: str) -> str | None:
    if "formgrader" in cmd or "--ServerApp.root_dir=" in cmd:  # the formgrader is a jupyterhub-singleuser too
        return "formgrader"
    if "jupyterhub-singleuser" in cmd:
        return "student servers"
    if "validate-service" in cmd:
        return "validate service"
    if "ipykernel" in cmd:
        return "kernels (Validate)"
    if "bin/jupyterhub -f" in cmd:
        return "hub"
    if "configurable-http-proxy" in cmd:
        return "proxy"
    if "sandbox.broker" in cmd or "sandbox.zygote" in cmd:
        return "sandbox broker and sandboxes"
    if "formgrader" in cmd or "nbgrader" in cmd:
        return "formgrader"
    if "jupyterhub_idle_culler" in cmd:
        return "idle culler"
    return None


def _in_cgroup(pid: int, path: str) -> bool:
    relative = "/" + os.path.relpath(path, CPUACCT)
    try:
        with open(f"/proc/{pid}/cgroup") as f:
            return any(line.split(":", 2)[2] == relative for line in f.read().splitlines()
                       if "cpuacct" in line.split(":", 2)[1].split(","))
    except (OSError, IndexError):
        return False


# ------------------------------------------------------------------ memory
class MemorySampler(threading.Thread):
    """Every ``period`` s: RSS per student (server + kernels, by JUPYTERHUB_USER) and of the hub."""

    def __init__(self, names, period: float = 2.0, min_available_mib: int = 2048, cgroup: str | None = None):
        super().__init__(daemon=True)
        self.cgroup = cgroup  # the platform's cpuacct cgroup (CpuAccount): other hubs on the machine are not ours
        # The cap on this benchmark: below this much available memory the run is aborted
        # (the machine is shared; an OOM kill would hit someone else's work).
        self.min_available = min_available_mib * 1024 * 1024
        self.aborted = None
        self.names, self.period = set(names), period
        self.peak = {n: 0 for n in names}
        self.hub_peak = 0
        self.samples = 0
        self.system_used_peak = 0
        self._halt = threading.Event()
        self._owner = {}  # pid -> user (cached: reading environ is the costly part)
        # pid -> {category: CPU-seconds}, latest sample: a rough breakdown (a process's last
        # < period s are missed); the exact total comes from CpuAccount. ``cpu_start``: the same at
        # the start of the drive, subtracted.
        self.cpu: dict[int, dict[str, float]] = {}
        self.cpu_start: dict[int, dict[str, float]] = {}

    def _user_of(self, proc) -> str | None:
        if proc.pid not in self._owner:
            try:
                self._owner[proc.pid] = proc.environ().get("JUPYTERHUB_USER")
            except Exception:  # noqa: BLE001 - a process that vanished or is not ours
                self._owner[proc.pid] = None
        return self._owner[proc.pid]

    def sample(self) -> dict:
        import psutil

        per_user = {n: 0 for n in self.names}
        hub = 0
        seen = set()
        for proc in psutil.process_iter(["cmdline", "memory_info", "cpu_times"]):
            try:
                cmd = " ".join(proc.info["cmdline"] or [])
                rss = proc.info["memory_info"].rss if proc.info["memory_info"] else 0
                times = proc.info["cpu_times"]
            except Exception:  # noqa: BLE001
                continue
            category = _category(cmd) if self.cgroup and _in_cgroup(proc.pid, self.cgroup) else None
            if category and times is not None:
                own, reaped = times.user + times.system, times.children_user + times.children_system
                if category == "student servers":  # a server's reaped children are its Validate kernels
                    self.cpu[proc.pid] = {category: own, "kernels (Validate)": reaped}
                else:
                    self.cpu[proc.pid] = {category: own + reaped}
                seen.add(proc.pid)
            if "bin/jupyterhub -f" in cmd or "configurable-http-proxy" in cmd:
                hub += rss
                continue
            user = self._user_of(proc)
            if user in per_user:
                per_user[user] += rss
        for pid in [pid for pid, kinds in self.cpu.items() if pid not in seen and list(kinds) == ["kernels (Validate)"]]:
            del self.cpu[pid]  # a finished kernel: its CPU is now in its server's reaped children
        return {"per_user": per_user, "hub": hub}

    def run(self):
        import psutil

        while not self._halt.is_set():
            snap = self.sample()
            for n, rss in snap["per_user"].items():
                self.peak[n] = max(self.peak[n], rss)
            self.hub_peak = max(self.hub_peak, snap["hub"])
            vm = psutil.virtual_memory()
            self.system_used_peak = max(self.system_used_peak, vm.total - vm.available)
            if vm.available < self.min_available and not self.aborted:
                self.aborted = f"available memory fell to {vm.available >> 20} MiB"
            self.samples += 1
            self._halt.wait(self.period)

    def stop(self):
        self._halt.set()
        self.join(10)

    def cpu_by_category(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for pid, kinds in self.cpu.items():
            for category, seconds in kinds.items():
                out[category] = out.get(category, 0.0) + seconds - self.cpu_start.get(pid, {}).get(category, 0.0)
        return dict(sorted(out.items(), key=lambda kv: -kv[1]))


def idle_pss(names) -> dict:
    """PSS (shared pages split fairly) of each student's processes, now."""
    import psutil

    out = {n: 0 for n in names}
    for proc in psutil.process_iter():
        try:
            user = proc.environ().get("JUPYTERHUB_USER")
            if user in out:
                out[user] += proc.memory_full_info().pss
        except Exception:  # noqa: BLE001
            continue
    return out


# ------------------------------------------------------------------ statistics and checks
def _pct(values, q):
    if not values:
        return None
    ordered = sorted(values)
    k = max(0, min(len(ordered) - 1, int(round(q / 100 * len(ordered) + 0.5)) - 1))
    return ordered[k]


def step_table(students) -> list[dict]:
    rows = []
    for step in STEPS:
        values = [v for s in students for v in s.timings[step]]
        errors = sum(1 for s in students for e in s.errors if e["step"] == step)
        rows.append({"step": step, "n": len(values), "p50": _pct(values, 50), "p95": _pct(values, 95),
                     "max": max(values) if values else None, "errors": errors})
    return rows


def grader_env(state: Path) -> tuple[dict, dict]:
    """Environment and subprocess kwargs of the course's grader (as in hub_native.prepare)."""
    import pwd

    env = environment(NBGRADER_COURSE_ID=course_id(),
               JUPYTER_CONFIG_PATH=str(COURSE_ROOT / "jupyter_config" / "grader"),
               NBGRADER_EXCHANGE_ROOT=str(state / "exchange"), HOME=str(state / "grader-home"))
    if (state / "grader-lib").is_dir():  # the grader's own copy of the hidden checks (the checkout's is hidden)
        env["PYTHONPATH"] = str(state / "grader-lib")
    if (state / "run" / "sandbox.sock").exists():  # an unprivileged grader's sandboxes come from the hub's broker
        env["ATTENTION_SANDBOX_SOCKET"] = str(state / "run" / "sandbox.sock")
    kwargs = {"cwd": state / "course"}
    owner = os.stat(state / "course").st_uid  # the grader owns the course directory
    if owner != os.geteuid():
        entry = pwd.getpwuid(owner)
        kwargs.update(user=entry.pw_uid, group=entry.pw_gid, extra_groups=[], umask=0o022)
    return env, kwargs


def verify(state: Path, students, work: Homework, autograde: bool = True, log=print) -> dict:
    """As the grader: collect, autograde, and compare with what each student was told."""
    env, kwargs = grader_env(state)
    nbgrader = program("nbgrader")
    result = {"collect_seconds": None, "autograde_seconds": None, "lost": [], "duplicated": [], "partial": [],
              "wrong_timestamp": [], "gradebook_problems": []}
    started = time.monotonic()
    collect = subprocess.run([nbgrader, "collect", work.assignment, "--update"], env=env, capture_output=True,
                             text=True, timeout=1800, **kwargs)
    result["collect_seconds"] = time.monotonic() - started
    if collect.returncode != 0:
        raise RuntimeError("nbgrader collect failed:\n" + collect.stderr[-3000:])
    course, inbound = state / "course", state / "exchange" / course_id() / "inbound"
    expected = {}
    for s in students:
        if not s.accepted:
            continue
        folder = inbound / s.name
        entries = sorted(os.listdir(folder)) if folder.is_dir() else []
        partial = [e for e in entries if e.startswith(".")]
        if partial:
            result["partial"].append({s.name: partial})
        filed = [e for e in entries if not e.startswith(".")]
        distinct = len({a["checksum"] for a in s.accepted})
        if len(filed) > distinct:
            result["duplicated"].append({"student": s.name, "filed": len(filed), "accepted": distinct})
        last = s.accepted[-1]
        collected = course / "submitted" / s.name / work.assignment
        nb_file = collected / f"{work.notebook}.ipynb"
        if not nb_file.exists() or hashlib.sha256(nb_file.read_bytes()).hexdigest() != last["checksum"]:
            result["lost"].append({"student": s.name, "reason": "collected notebook differs from the last accepted one"})
            continue
        stamp = (collected / "timestamp.txt").read_text().strip()
        window = (dt.datetime.fromisoformat(last["request_start"]) - dt.timedelta(seconds=1),
                  dt.datetime.fromisoformat(last["request_end"]) + dt.timedelta(seconds=1))
        when = _utc(stamp).replace(tzinfo=dt.timezone.utc)
        if not (window[0] <= when <= window[1]) or (last["shown"] and _utc(last["shown"]) != _utc(stamp)):
            # An identical retry keeps the earlier timestamp: the content arrived then.
            earlier = [a for a in s.accepted if a["checksum"] == last["checksum"]]
            first = dt.datetime.fromisoformat(earlier[0]["request_start"]) - dt.timedelta(seconds=1)
            if not (first <= when <= window[1]):
                result["wrong_timestamp"].append({"student": s.name, "collected": stamp, "shown": last["shown"]})
        expected[s.name] = _utc(stamp)
    if autograde and expected:
        started = time.monotonic()
        grade = subprocess.run([nbgrader, "autograde", work.assignment], env=env, capture_output=True, text=True,
                               timeout=3600, **kwargs)
        result["autograde_seconds"] = time.monotonic() - started
        if grade.returncode != 0:
            result["gradebook_problems"].append("nbgrader autograde failed: " + grade.stderr[-1500:])
        from nbgrader.api import Gradebook

        with Gradebook("sqlite:///" + str(course / "gradebook.db"), course_id()) as gb:
            subs = {}
            for sub in gb.assignment_submissions(work.assignment):
                subs.setdefault(sub.student_id, []).append(sub)
            for name, stamp in expected.items():
                rows = subs.get(name, [])
                if len(rows) != 1:
                    result["gradebook_problems"].append(f"{name}: {len(rows)} gradebook submissions")
                elif rows[0].timestamp.replace(tzinfo=None) != stamp.replace(tzinfo=None):
                    result["gradebook_problems"].append(f"{name}: gradebook timestamp {rows[0].timestamp} != {stamp}")
            extra = set(subs) - set(expected)
            if extra:
                result["gradebook_problems"].append(f"gradebook has submissions nobody made: {sorted(extra)}")
    result["students_checked"] = len(expected)
    return result


# ------------------------------------------------------------------ the command
async def _drive(url, students, work: Homework, ramp, resubmit_share, seed, sampler=None, limit: float = 1800):
    rng = random.Random(seed)
    tasks = []
    for i, s in enumerate(students):
        rounds = rng.choice((2, 3)) if rng.random() < resubmit_share else 1
        sim = LoadStudent(url, s, i, rounds, random.Random(rng.getrandbits(32)), work)
        tasks.append(asyncio.create_task(sim.run(rng.uniform(0, ramp))))
    deadline = time.monotonic() + limit  # the whole run is bounded too
    while not all(t.done() for t in tasks):
        if (sampler is not None and sampler.aborted) or time.monotonic() > deadline:
            for t in tasks:
                t.cancel()
            break
        await asyncio.sleep(1)
    await asyncio.gather(*tasks, return_exceptions=True)


def _fmt(v):
    return "-" if v is None else f"{v:6.2f}"


def run_load(assignment: str, n: int = 50, state: Path | None = None, port: int = 8400, ramp: float = 60.0,
             resubmit_share: float = 0.3, seed: int = 7, autograde: bool = True, keep: bool = False,
             url: str | None = None, log=print) -> dict:
    """Start a hub with ``n`` students (unless ``url`` names a running one), drive it with ``n``
    students working on ``assignment``, verify, report."""
    work = Homework.of(assignment)
    state = (state or COURSE_ROOT / "build" / "load").resolve()
    from attention_platform.hub import native as hub_native

    hub = None
    account = CpuAccount(enabled=url is None)  # a hub we did not start is not ours to account
    if url is None:
        if state.exists():
            shutil.rmtree(state)
        log(f"preparing a hub with {n} student accounts in {state} ...")
        # our own accounts: no clash with another hub's demo users on this machine
        demo = hub_native.DemoClass(prefix=settings().hub_demo_prefix or "load-", size=n)
        hub = hub_native.prepare(state, port=port, formgrader_port=port + 99, demo=demo, log=log)
        with account.starting():
            hub_native.start(hub)
        url = hub.url
        log(f"hub up on {url} in {hub.start_seconds:.1f} s")
    passwords = json.loads((state / "demo-accounts.json").read_text())
    names = [name for name in passwords if "student" in name][:n]
    students = [Student(name, passwords[name]) for name in names]
    sampler = MemorySampler(names, cgroup=account.path)
    time.sleep(2)  # what the idle platform burns, to subtract
    idle_started, idle_cpu = time.monotonic(), account.seconds()
    time.sleep(5)
    sampler.sample()
    sampler.cpu_start = {pid: dict(kinds) for pid, kinds in sampler.cpu.items()}
    idle_rate = ((account.seconds() - idle_cpu) / (time.monotonic() - idle_started)) if idle_cpu is not None else None
    sampler.start()
    try:
        started, cpu_before = time.monotonic(), account.seconds()
        load_before = os.getloadavg()
        asyncio.run(_drive(url, students, work, ramp, resubmit_share, seed, sampler))
        if sampler.aborted:
            raise RuntimeError("load test aborted: " + sampler.aborted)
        wall = time.monotonic() - started
        cpu_drive = account.seconds() - cpu_before if cpu_before is not None else None
        load_after = os.getloadavg()
        time.sleep(2.5)
        sampler.sample()  # the last CPU figures of the servers still alive
        time.sleep(3)  # kernels of the last validations shut down
        idle = sampler.sample()["per_user"]
        pss = idle_pss(names)
        sampler.stop()
        checks = verify(state, students, work, autograde=autograde, log=log)
    finally:
        sampler.stop()
        if hub is not None and not keep:
            hub_native.stop(hub, timeout=60)
            account.remove()
    mib = 1024 * 1024
    finished = [s for s in students if s.timings["submit"]]
    cpu = {
        "platform_seconds_during_drive": cpu_drive,
        "idle_platform_cpu_per_second": idle_rate,
        "per_student_session": ((cpu_drive - (idle_rate or 0) * wall) / len(finished))
        if cpu_drive is not None and finished else None,
        "students_finished": len(finished),
        "by_process_kind_approx": sampler.cpu_by_category(),
        "load_average_before": load_before, "load_average_after": load_after,
    }
    running = [n_ for n_ in names if idle[n_] > 0]
    report = {
        "students": n, "notebook": work.path, "ramp_seconds": ramp, "wall_seconds": wall, "cpus": os.cpu_count(),
        "steps": step_table(students),
        "errors": [dict(student=s.name, **e) for s in students for e in s.errors],
        "submits_accepted": sum(len(s.accepted) for s in students),
        "students_with_accepted_submission": sum(1 for s in students if s.accepted),
        "memory_mib": {
            "server_idle_rss_median": statistics.median([idle[x] for x in running]) / mib if running else None,
            "server_idle_pss_median": statistics.median([pss[x] for x in running]) / mib if running else None,
            "server_peak_rss_median": statistics.median(sampler.peak.values()) / mib,
            "server_peak_rss_max": max(sampler.peak.values()) / mib,
            "hub_and_proxy_peak_rss": sampler.hub_peak / mib,
            "system_used_peak": sampler.system_used_peak / mib,
            "system_total": _total_memory() / mib,
            "samples": sampler.samples,
        },
        "cpu": cpu,
        "verification": checks,
    }
    (state / "load-results.json").write_text(json.dumps(report, indent=1, default=str))
    print_report(report, log=log)
    return report


def _total_memory() -> int:
    import psutil

    return psutil.virtual_memory().total


def print_report(r: dict, log=print) -> None:
    log("")
    log(f"load test: {r['students']} students on {r['cpus']} CPUs working on {r['notebook']}, "
        f"arrivals over {r['ramp_seconds']:.0f} s, "
        f"{r['wall_seconds']:.0f} s wall")
    log(f"{'step':<10}{'n':>5}{'p50 s':>9}{'p95 s':>9}{'max s':>9}{'errors':>8}")
    for row in r["steps"]:
        log(f"{row['step']:<10}{row['n']:>5}{_fmt(row['p50']):>9}{_fmt(row['p95']):>9}{_fmt(row['max']):>9}"
            f"{row['errors']:>8}")
    for e in r["errors"][:10]:
        log(f"  error: {e['student']} {e['step']}: {e['error']}")
    v = r["verification"]
    log(f"accepted submits: {r['submits_accepted']} from {r['students_with_accepted_submission']} students; "
        f"checked after collect: {v['students_checked']}")
    log(f"lost: {len(v['lost'])}  duplicated: {len(v['duplicated'])}  partial: {len(v['partial'])}  "
        f"wrong timestamp: {len(v['wrong_timestamp'])}  gradebook problems: {len(v['gradebook_problems'])}")
    for key in ("lost", "duplicated", "partial", "wrong_timestamp", "gradebook_problems"):
        for item in v[key][:5]:
            log(f"  {key}: {item}")
    c = r.get("cpu") or {}
    if c.get("per_student_session") is not None:
        log(f"CPU: {c['per_student_session']:.2f} CPU-seconds per student session (platform alone, cgroup cpuacct: "
            f"{c['platform_seconds_during_drive']:.0f} s over {c['students_finished']} sessions, idle platform "
            f"{c['idle_platform_cpu_per_second']:.3f} CPU-s/s subtracted) -> {r['cpus']} cores take "
            f"{60 * r['cpus'] / c['per_student_session']:.0f} arrivals a minute")
        log("   by process kind (sampled every 2 s, approximate): "
            + ", ".join(f"{k} {v:.0f} s" for k, v in c["by_process_kind_approx"].items()))
        log(f"   load average before {c['load_average_before'][0]:.2f}, after the drive {c['load_average_after'][0]:.2f} "
            f"(other work on the machine is not counted in the CPU figure; it does slow the latencies)")
    m = r["memory_mib"]
    log(f"memory per student server (MiB): idle RSS median {_fmt(m['server_idle_rss_median'])}, idle PSS median "
        f"{_fmt(m['server_idle_pss_median'])}, peak RSS (server + validating kernel) median "
        f"{_fmt(m['server_peak_rss_median'])} max {_fmt(m['server_peak_rss_max'])}")
    log(f"hub + proxy peak RSS {m['hub_and_proxy_peak_rss']:.0f} MiB; machine: peak used "
        f"{m['system_used_peak']:.0f} of {m['system_total']:.0f} MiB")
    if v["collect_seconds"] is not None:
        log(f"grader: collect {v['collect_seconds']:.1f} s"
            + (f", autograde {v['autograde_seconds']:.1f} s" if v["autograde_seconds"] else ""))


def main(args) -> int:
    from attention_platform.course.assignments import first_assignment

    report = run_load(args.assignment or first_assignment(), n=args.students, state=args.state_dir, port=args.port,
                      ramp=args.ramp, resubmit_share=args.resubmit_share, seed=args.seed,
                      autograde=not args.no_autograde, keep=False, url=args.url)
    v = report["verification"]
    bad = (report["errors"] or v["lost"] or v["duplicated"] or v["partial"] or v["wrong_timestamp"]
           or v["gradebook_problems"])
    return 1 if bad else 0
