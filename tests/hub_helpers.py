"""A logged-in browser-like HTTP session against the native hub (tests only).

Logs in through the hub's real login form (NativeAuthenticator), starts the
user's server through the hub, and calls Jupyter Server / nbgrader / formgrader
endpoints with the cookies and XSRF token a browser would send.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time

import requests
import tornado.web

COURSE = "dl-attention"


def posted_status(url: str, **kwargs):
    """The status of a POST to ``url`` (no redirects followed), or "closed" if the server closed the
    connection while the body was still being sent (a body refused from its length alone)."""
    try:
        return requests.post(url, allow_redirects=False, timeout=60, **kwargs).status_code
    except (requests.ConnectionError, requests.exceptions.ChunkedEncodingError):
        return "closed"



class BodyLength(tornado.web.RequestHandler):
    """Answers a POST or PUT with the length of the body it read."""

    def post(self):
        self.write(str(len(self.request.body)))

    put = post


@contextlib.contextmanager
def serve_in_threads():
    """``start(server_class, application, **server_kwargs)``: that tornado server on 127.0.0.1, in a
    thread of its own; its URL. Every server started is stopped on leaving."""
    stops = []

    def start(server_class, application, **kwargs) -> str:
        port, ready = free_port(), threading.Event()
        loop = asyncio.new_event_loop()

        def run():
            asyncio.set_event_loop(loop)
            server = server_class(application, **kwargs)
            server.listen(port, "127.0.0.1")
            ready.set()
            loop.run_forever()
            server.stop()

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        ready.wait(10)
        stops.append((loop, thread))
        return f"http://127.0.0.1:{port}/"

    try:
        yield start
    finally:
        for loop, thread in stops:
            loop.call_soon_threadsafe(loop.stop)
            thread.join(10)

class HubSession:
    def __init__(self, base: str, username: str, password: str):
        self.base = base.rstrip("/")
        self.username = username
        self.http = requests.Session()
        self.password = password

    def login(self) -> "HubSession":
        page = self.http.get(self.base + "/hub/login", timeout=30)
        page.raise_for_status()
        xsrf = self.http.cookies.get("_xsrf", path="/hub/")
        reply = self.http.post(self.base + "/hub/login?next=", data={
            "username": self.username, "password": self.password, "_xsrf": xsrf,
        }, allow_redirects=False, timeout=30)
        if reply.status_code != 302:
            raise AssertionError(f"login of {self.username} failed: {reply.status_code}")
        return self

    def hub_api(self, method: str, path: str, **kwargs) -> requests.Response:
        headers = {"X-XSRFToken": self.http.cookies.get("_xsrf", path="/hub/") or ""}
        return self.http.request(method, self.base + "/hub/api" + path, headers=headers, timeout=60, **kwargs)

    def spawn(self, timeout: float = 180) -> float:
        """Start the user's server and open JupyterLab; returns the seconds it took."""
        started = time.monotonic()
        reply = self.hub_api("POST", f"/users/{self.username}/server")
        assert reply.status_code in (201, 202, 400), reply.text  # 400: already running
        while time.monotonic() - started < timeout:
            model = self.hub_api("GET", f"/users/{self.username}").json()
            server = model.get("servers", {}).get("", {})
            if server.get("ready"):
                break
            time.sleep(0.5)
        else:
            raise TimeoutError(f"{self.username}'s server did not start within {timeout} s")
        lab = self.get(f"/user/{self.username}/lab")
        assert lab.status_code == 200, lab.status_code
        return time.monotonic() - started

    def get(self, path: str, **kwargs) -> requests.Response:
        return self.http.get(self.base + path, timeout=120, **kwargs)

    def _xsrf_for(self, path: str) -> str:
        prefix = "/".join(path.split("/")[:3]) + "/"  # /user/<name>/ or /services/<name>/
        for cookie in self.http.cookies:
            if cookie.name == "_xsrf" and cookie.path == prefix:
                return cookie.value
        self.get(prefix)  # a page of that server sets it
        for cookie in self.http.cookies:
            if cookie.name == "_xsrf" and cookie.path == prefix:
                return cookie.value
        return ""

    def post(self, path: str, **kwargs) -> requests.Response:
        headers = {"X-XSRFToken": self._xsrf_for(path)}
        return self.http.post(self.base + path, headers=headers, timeout=300, **kwargs)

    def put(self, path: str, **kwargs) -> requests.Response:
        headers = {"X-XSRFToken": self._xsrf_for(path)}
        return self.http.put(self.base + path, headers=headers, timeout=300, **kwargs)

    def run_in_kernel(self, code: str, timeout: float = 120) -> dict:
        """Run ``code`` in a new kernel of the user's server, as a notebook cell would, and shut the kernel
        down: ``{"status": "ok" | "error" | "died", "stdout": ..., "ename": ...}`` ("died": the kernel
        died or was restarted while it ran)."""
        import asyncio

        token = self.hub_api("POST", f"/users/{self.username}/tokens",
                             json={"note": "a test's kernel", "expires_in": 600}).json()["token"]
        headers = {"Authorization": f"token {token}"}
        api = f"{self.base}/user/{self.username}/api/kernels"
        kernel = requests.post(api, headers=headers, json={"name": "python3"}, timeout=120)
        assert kernel.status_code == 201, kernel.text
        kernel_id = kernel.json()["id"]
        channels = api.replace("http", "ws", 1) + f"/{kernel_id}/channels"
        try:
            return asyncio.run(_execute(channels, headers, code, timeout))
        finally:
            requests.delete(f"{api}/{kernel_id}", headers=headers, timeout=60)

    # --- nbgrader, student side (the Assignments tab's endpoints)
    def assignments(self) -> list[dict]:
        reply = self.get(f"/user/{self.username}/assignments", params={"course_id": COURSE})
        reply.raise_for_status()
        body = reply.json()
        assert body["success"], body
        return body["value"]

    def assignment_action(self, action: str, assignment: str) -> dict:
        reply = self.post(f"/user/{self.username}/assignments/{action}",
                          data={"course_id": COURSE, "assignment_id": assignment})
        reply.raise_for_status()
        return reply.json()

    def contents(self, path: str) -> requests.Response:
        return self.get(f"/user/{self.username}/api/contents/{path}")

    def save_notebook(self, path: str, notebook: dict) -> None:
        reply = self.put(f"/user/{self.username}/api/contents/{path}",
                         json={"type": "notebook", "format": "json", "content": notebook})
        assert reply.status_code in (200, 201), reply.text

    # --- formgrader (TAs and instructors)
    def formgrader(self, method: str, api: str, **kwargs) -> requests.Response:
        path = f"/services/{COURSE}/formgrader/api/{api}"
        if method == "GET":
            return self.get(path, **kwargs)
        return self.post(path, **kwargs) if method == "POST" else self.put(path, **kwargs)


# --- the README's command, run as a user would (tests only)
import contextlib
import json
import os
import re
import shutil
import random
import runpy
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from traitlets.config import Config

REPO = Path(__file__).resolve().parents[1]


# Below the kernel's ephemeral range (32768-60999 here), so no outgoing connection of another
# test (a browser, a client, a proxy) can take a port between our check and the server's bind.
TEST_PORTS = range(20000, 32000)


async def _execute(url: str, headers: dict, code: str, timeout: float) -> dict:
    """One execute_request over a kernel's channels websocket (Jupyter's JSON protocol). Done once both
    the reply (shell) and the kernel's idle status for it (iopub) have come: the reply may overtake the
    cell's last output, which the kernel sends before it goes idle."""
    import asyncio
    import json
    import uuid

    from tornado.httpclient import HTTPRequest
    from tornado.websocket import websocket_connect

    connection = await websocket_connect(HTTPRequest(url, headers=headers))
    msg_id = uuid.uuid4().hex
    connection.write_message(json.dumps({
        "header": {"msg_id": msg_id, "msg_type": "execute_request", "username": "test", "session": uuid.uuid4().hex,
                   "version": "5.3"},
        "parent_header": {}, "metadata": {}, "channel": "shell", "buffers": [],
        "content": {"code": code, "silent": False, "store_history": False, "user_expressions": {},
                    "allow_stdin": False, "stop_on_error": True},
    }))
    result = {"status": None, "stdout": "", "ename": ""}
    idle = False
    deadline = time.monotonic() + timeout
    try:
        while result["status"] is None or not idle:
            raw = await asyncio.wait_for(connection.read_message(), max(0.1, deadline - time.monotonic()))
            if raw is None:
                result["status"] = "died"
                break
            message = json.loads(raw)
            kind, content = message.get("msg_type") or message["header"]["msg_type"], message.get("content", {})
            if kind == "status" and content.get("execution_state") in ("restarting", "dead"):
                result["status"] = "died"
                break
            elif message.get("parent_header", {}).get("msg_id") != msg_id:
                continue
            elif kind == "stream" and content.get("name") == "stdout":
                result["stdout"] += content["text"]
            elif kind == "error":
                result["ename"] = content.get("ename", "")
            elif kind == "execute_reply":
                result["status"] = content.get("status")
            elif kind == "status" and content.get("execution_state") == "idle":
                idle = True
    finally:
        connection.close()
    return result


def free_port(also: tuple[int, ...] = ()) -> int:
    """A port on 127.0.0.1 that nothing listens on, nor on ``port + offset`` for each offset in ``also``."""
    from attention_platform.hub.native import busy_ports

    for _ in range(200):
        port = random.choice(TEST_PORTS)
        if not busy_ports({str(offset): port + offset for offset in (0, *also)}):
            return port
    raise RuntimeError(f"no free port in {TEST_PORTS}")


def free_hub_port() -> int:
    """A port for a native hub: free itself and for the two ports the hub derives from it."""
    return free_port(also=(1, 81))


@dataclass
class RunningHub:
    url: str
    state: Path
    passwords: dict
    process: subprocess.Popen
    log_path: Path
    start_seconds: float
    stop_seconds: float | None = None
    timings: dict = field(default_factory=dict)
    env: dict = field(default_factory=dict)  # the settings it was started with beyond the defaults

    def session(self, user: str) -> HubSession:
        return HubSession(self.url, user, self.passwords[user]).login()

    def browser_page(self, browser, user: str, timeout_ms: int = 120_000, **context_options):
        """A page of a new Playwright context of ``browser``, logged in as ``user`` on the hub's login form."""
        context = browser.new_context(**{"viewport": {"width": 1400, "height": 1000}, **context_options})
        context.set_default_timeout(timeout_ms)
        page = context.new_page()
        page.goto(self.url + "/hub/login")
        page.fill("input[name=username]", user)
        page.fill("input[name=password]", self.passwords[user])
        page.locator("input[name=password]").press("Enter")
        # not on spawn-pending: its script goes on to the user's server once it is up, and would take the
        # page away from wherever the test sends it meanwhile
        page.wait_for_url(re.compile(r".*/(hub/home([/?#].*)?|hub/spawn([?#].*)?|user/.*)$"))
        return page

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def students_with(self, assignment: str, count: int) -> dict[str, HubSession]:
        """Sessions of student1..``count``, each with their server started and ``assignment`` fetched:
        the students log in and start at once, as a class does."""
        from concurrent.futures import ThreadPoolExecutor

        def ready(user: str) -> HubSession:
            session = self.session(user)
            session.spawn()
            fetched = session.assignment_action("fetch", assignment)
            assert fetched["success"], fetched
            return session

        users = [f"student{n}" for n in range(1, count + 1)]
        with ThreadPoolExecutor(max_workers=count) as pool:
            return dict(zip(users, pool.map(ready, users)))

    def ctrl_c(self, timeout: float = 60) -> float:
        """What Ctrl-C in the terminal does: SIGINT to the whole foreground process group."""
        started = time.monotonic()
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGINT)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
                raise
        self.stop_seconds = time.monotonic() - started
        return self.stop_seconds


@contextlib.contextmanager
def launch_hub(name: str, *, release: bool = True, timeout: float = 300, fresh: bool = True,
               port: int | None = None, env: dict | None = None):
    """Run ``attention-course hub`` in a fresh state directory; Ctrl-C it afterwards.

    ``fresh=False`` and the previous ``port`` restart a hub on its kept state (the fault tests);
    ``env`` adds settings the hub reads from its environment (e.g. CULL_IDLE_TIMEOUT).
    """
    state = REPO / "build" / name
    if fresh and state.exists():
        shutil.rmtree(state)
    state.mkdir(parents=True, exist_ok=True)
    log_path = state.parent / f"{name}.log"
    port = port or free_hub_port()
    cmd = [str(Path(sys.executable).parent / "attention-course"), "hub", "--state-dir", str(state),
           "--port", str(port), "--formgrader-port", str(free_port())]
    if not release:
        cmd.append("--no-release")
    if os.environ.get("HUB_TEST_COURSE_ROOT"):  # e.g. a checkout of the last good course
        cmd += ["--course-root", os.environ["HUB_TEST_COURSE_ROOT"]]
    started = time.monotonic()
    offset = log_path.stat().st_size if not fresh and log_path.exists() else 0  # a restart appends
    with open(log_path, "w" if fresh else "a") as log:
        process = subprocess.Popen(cmd, cwd=REPO, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                                   env={**os.environ, **(env or {})})
    hub = None
    try:
        while "Press Ctrl-C" not in log_path.read_text(errors="replace")[offset:]:
            if process.poll() is not None or time.monotonic() - started > timeout:
                raise RuntimeError("the hub did not come up:\n" + log_path.read_text(errors="replace")[-3000:])
            time.sleep(0.2)
        line = re.search(r"started in ([0-9.]+) s", log_path.read_text()[offset:]).group(1)
        hub = RunningHub(url=f"http://127.0.0.1:{port}", state=state,
                         passwords=json.loads((state / "demo-accounts.json").read_text()), process=process,
                         log_path=log_path, start_seconds=float(line), env=dict(env or {}))
        hub.timings["launch_to_ready"] = time.monotonic() - started
        yield hub
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGINT)
            try:
                process.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)


def load_hub_config(monkeypatch, tmp_path, **env) -> Config:
    """jupyter_config/jupyterhub_config.py as JupyterHub reads it, with only ``env`` of the hub's variables set."""
    for key in list(os.environ):
        if key.startswith(("HUB_", "COURSE_", "EXCHANGE_", "FORMGRADER_", "STUDENT_")):
            monkeypatch.delenv(key, raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("HUB_STATE_DIR", str(tmp_path))
    config = Config()
    runpy.run_path(str(REPO / "jupyter_config" / "jupyterhub_config.py"), init_globals={"get_config": lambda: config})
    return config


def login_request_from(address: str):
    """A login handler as the authenticator sees one: tornado's request from a peer at ``address``
    (the throttle reads the peer's address from the connection's context)."""
    from types import SimpleNamespace

    from tornado.httputil import HTTPHeaders, HTTPServerRequest

    connection = SimpleNamespace(context=SimpleNamespace(address=(address, 40000)))
    return SimpleNamespace(request=HTTPServerRequest(method="POST", uri="/hub/login", headers=HTTPHeaders(),
                                                     connection=connection))
