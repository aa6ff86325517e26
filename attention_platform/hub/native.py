"""``attention-course hub``: the course's JupyterHub on this machine, no Docker.

Starts ``hub/jupyterhub_config.py`` (the same file docker-compose uses) with
HUB_MODE=native: local single-user servers, SQLite, a local exchange, the course
generated and released, demo accounts (an instructor, a TA, three students) whose
passwords it prints, listening on 127.0.0.1 only. As root each account is a real
Unix user, so the exchange's permissions are enforced by the kernel.

Ctrl-C stops the hub, which stops every server and service; submissions are
written synchronously by nbgrader, so none is lost half-way.
"""

from __future__ import annotations

import json
import os
import pwd
import secrets
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from attention_platform.course.directory import copy_course
from attention_platform.course.notebooks import ASSIGNMENT, COURSE_ROOT

HUB_CONFIG = COURSE_ROOT / "hub" / "jupyterhub_config.py"
COURSE_ID = os.environ.get("NBGRADER_COURSE_ID", "dl-attention")
# HUB_DEMO_PREFIX: a prefix for every demo account name, so a load test or fault test can run
# beside another hub on the same machine (Unix users are machine-wide); HUB_DEMO_STUDENTS=N:
# N demo students student1..N (the load test's class). Both issue #7.
_PREFIX = os.environ.get("HUB_DEMO_PREFIX", "")
DEMO_INSTRUCTORS = (f"{_PREFIX}instructor",)
DEMO_TAS = (f"{_PREFIX}ta",)
DEMO_STUDENTS = tuple(f"{_PREFIX}student{i}" for i in range(1, int(os.environ.get("HUB_DEMO_STUDENTS", "3")) + 1))
DEMO_ACCOUNTS = DEMO_INSTRUCTORS + DEMO_TAS + DEMO_STUDENTS


@dataclass
class NativeHub:
    state: Path
    url: str
    env: dict
    passwords: dict
    formgrader_port: int = 9999
    process: subprocess.Popen | None = None
    formgrader: subprocess.Popen | None = None
    grader_user: str | None = None
    start_seconds: float = 0.0

    @property
    def course_dir(self) -> Path:
        return self.state / "course"

    @property
    def exchange(self) -> Path:
        return self.state / "exchange"


def _run(cmd, **kwargs):
    done = subprocess.run(cmd, capture_output=True, text=True, **kwargs)
    if done.returncode:
        raise RuntimeError(f"{' '.join(map(str, cmd))} failed ({done.returncode}):\n{done.stdout[-2000:]}{done.stderr[-3000:]}")
    return done


def ensure_unix_user(name: str, home: Path, system: bool = False) -> None:
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        entry = None
    if entry is not None:  # the hub gives it <state>/home/<name> whatever /etc/passwd says
        home.mkdir(parents=True, exist_ok=True)
        return
    home.parent.mkdir(parents=True, exist_ok=True)
    _run(["useradd", *(["--system"] if system else []), "--create-home", "--home-dir", str(home),
          "--shell", "/bin/bash", "--user-group", name])


def _chown_tree(path: Path, user: str) -> None:
    entry = pwd.getpwnam(user)
    for root, dirs, files in os.walk(path):
        os.chown(root, entry.pw_uid, entry.pw_gid)
        for name in files:
            os.lchown(os.path.join(root, name), entry.pw_uid, entry.pw_gid)


def load_passwords(state: Path) -> dict:
    """Demo passwords, generated once per state directory and kept there (mode 0600)."""
    path = state / "demo-accounts.json"
    if path.exists():
        return json.loads(path.read_text())
    passwords = {name: secrets.token_urlsafe(9) for name in DEMO_ACCOUNTS}
    path.write_text(json.dumps(passwords, indent=1))
    path.chmod(0o600)
    return passwords


def _secret(path: Path) -> str:
    if not path.exists():
        path.write_text(secrets.token_hex(32))
        path.chmod(0o600)
    return path.read_text().strip()


def prepare(state: Path, *, port: int = 8000, formgrader_port: int = 9999, release: bool = True,
            course_root: Path = COURSE_ROOT, log=print) -> NativeHub:
    """Everything before the hub starts: accounts, course directory, exchange."""
    state = state.resolve()
    state.mkdir(parents=True, exist_ok=True)
    state.chmod(0o755)
    as_root = os.geteuid() == 0
    # The formgrader runs as root when we are root: the autograder's sandbox
    # (attention_platform/sandbox) needs root to build each submission's namespaces
    # and drops student code to its own uid. Its JupyterLab has no terminals and no
    # kernels (hub/grader/jupyter_server_config.py), so TAs do not get a root shell.
    grader = "root" if as_root else None
    passwords = load_passwords(state)
    (state / "grader-home").mkdir(exist_ok=True)
    (state / "grader-home").chmod(0o700)
    if as_root:
        for name in DEMO_ACCOUNTS:
            ensure_unix_user(name, state / "home" / name)
    for name in DEMO_ACCOUNTS:
        (state / "home" / name).mkdir(parents=True, exist_ok=True)
        if as_root:
            _chown_tree(state / "home" / name, name)
            (state / "home" / name).chmod(0o700)

    url = f"http://127.0.0.1:{port}"
    env = dict(
        os.environ,
        PATH=str(Path(sys.executable).parent) + os.pathsep + os.environ.get("PATH", ""),
        HUB_MODE="native",
        HUB_STATE_DIR=str(state),
        HUB_BIND_URL=url,
        HUB_INTERNAL_PORT=str(port + 81),
        PROXY_API_PORT=str(port + 1),
        NBGRADER_COURSE_ID=COURSE_ID,
        HUB_ADMIN_USERS=",".join(DEMO_INSTRUCTORS),
        COURSE_INSTRUCTORS=",".join(DEMO_INSTRUCTORS),
        COURSE_TAS=",".join(DEMO_TAS),
        COURSE_STUDENTS=",".join(DEMO_STUDENTS),
        EXCHANGE_ROOT=str(state / "exchange"),
        EXCHANGE_VIEWS=str(state / "exchange-views"),
        COURSE_DIR=str(state / "course"),
        FORMGRADER_URL=f"http://127.0.0.1:{formgrader_port}",
        FORMGRADER_API_TOKEN=_secret(state / "formgrader-api-token"),
        GRADER_USER=grader or "",
    )
    env.pop("JUPYTER_CONFIG_PATH", None)
    hub = NativeHub(state=state, url=url, env=env, passwords=passwords, grader_user=grader,
                    formgrader_port=formgrader_port)

    # The exchange: the root and the course folder belong to the grader; students get
    # their own inbound/feedback folders when their server first starts (hub hook).
    course_x = hub.exchange / COURSE_ID
    for path, mode in ((hub.exchange, 0o755), (course_x, 0o755), (course_x / "outbound", 0o755),
                       (course_x / "inbound", 0o711), (course_x / "feedback", 0o711)):
        path.mkdir(exist_ok=True)
        path.chmod(mode)
        if grader:
            entry = pwd.getpwnam(grader)
            os.chown(path, entry.pw_uid, entry.pw_gid)

    if as_root:
        hide_course_secrets(COURSE_ROOT, log)
    # The course directory: source and config only; the grader owns it, nobody else can read it.
    if not (hub.course_dir / "source").is_dir():
        copy_course(hub.course_dir, Path(course_root))
        log(f"course directory created: {hub.course_dir}")
    hub.course_dir.chmod(0o700)
    nb_env = dict(env, JUPYTER_CONFIG_PATH=str(COURSE_ROOT / "hub" / "grader"),
                  NBGRADER_EXCHANGE_ROOT=str(hub.exchange), HOME=str(state / "grader-home"))
    nbgrader = str(Path(sys.executable).parent / "nbgrader")
    kw = dict(cwd=hub.course_dir, env=nb_env)
    _run([nbgrader, "generate_assignment", ASSIGNMENT, "--force"], **kw)
    enrol_demo_students(hub.course_dir / "gradebook.db")
    if release:
        if not (course_x / "outbound" / ASSIGNMENT).is_dir():
            _run([nbgrader, "release_assignment", ASSIGNMENT], **kw)
        log(f"assignment {ASSIGNMENT!r} released to {course_x / 'outbound'}")
    return hub


# The checkout the hub runs from, as its students' kernels see it: the venv's editable
# install makes grader_tests importable and the tree is world-readable by default.
SECRET_PATHS = ("grader_tests", "source", ".git", "tests", "autograded", "submitted", "feedback",
                "gradebook.db", "build/demo")


def hide_course_secrets(root: Path, log=print) -> None:
    """Take "other" permissions off the hidden checks, the instructor notebooks (solutions),
    the git history (which holds both) and any local grading data. Students are "other" to
    the checkout; its owner (a developer who ran `sudo make start`) keeps every access.
    Students run the same venv, so they keep attention_platform (their submit uses it)."""
    hidden = []
    for name in SECRET_PATHS:
        path = root / name
        if path.exists():
            path.chmod(path.stat().st_mode & 0o770)
            hidden.append(name)
    log(f"hidden from students: {', '.join(hidden)} under {root}")


def enrol_demo_students(gradebook: Path) -> None:
    """Put the demo students in the gradebook with names, as an instructor's roster import
    (`nbgrader db student import`) would; otherwise the formgrader lists them as "None, None"."""
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{gradebook}") as gb:
        for name in DEMO_STUDENTS:
            gb.update_or_create_student(name, first_name="Demo", last_name=name.capitalize())


def add_demo_logins(hub: NativeHub) -> None:
    """Create the demo accounts' NativeAuthenticator logins (authorized) in the hub db."""
    from sqlalchemy import create_engine
    from sqlalchemy.orm import Session
    import bcrypt
    from nativeauthenticator.orm import UserInfo

    engine = create_engine(f"sqlite:///{hub.state / 'jupyterhub.sqlite'}")
    with Session(engine) as db:
        for name, password in hub.passwords.items():
            info = db.query(UserInfo).filter(UserInfo.username == name).first()
            hashed = bcrypt.hashpw(password.encode(), bcrypt.gensalt())
            if info is None:
                db.add(UserInfo(username=name, password=hashed, is_authorized=True))
            else:
                info.password, info.is_authorized = hashed, True
        db.commit()
    engine.dispose()


def wait_for_hub(url: str, process: subprocess.Popen, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the hub exited with status {process.returncode}")
        try:
            with urllib.request.urlopen(url + "/hub/health", timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.25)
    raise TimeoutError(f"the hub did not answer on {url} within {timeout:.0f} s")


def start(hub: NativeHub) -> NativeHub:
    """Start JupyterHub and the formgrader (child processes, own sessions) and wait for both."""
    from attention_platform.hub.formgrader_service import command, service_env

    started = time.monotonic()
    log = open(hub.state / "jupyterhub.log", "ab")
    hub.process = subprocess.Popen(
        [str(Path(sys.executable).parent / "jupyterhub"), "-f", str(HUB_CONFIG)],
        cwd=hub.state, env=hub.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )
    fg_env = dict(hub.env, HOME=str(hub.state / "grader-home"), NBGRADER_EXCHANGE_ROOT=str(hub.exchange),
                  **service_env(course=COURSE_ID, api_token=hub.env["FORMGRADER_API_TOKEN"],
                                hub_api_url=f"http://127.0.0.1:{hub.env['HUB_INTERNAL_PORT']}/hub/api", ip="127.0.0.1",
                                port=hub.formgrader_port))
    hub.formgrader = subprocess.Popen(
        command(str(hub.course_dir), "127.0.0.1", hub.formgrader_port), cwd=hub.course_dir, env=fg_env,
        stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )
    wait_for_hub(hub.url, hub.process)
    add_demo_logins(hub)
    deadline = time.monotonic() + 90
    while True:  # the formgrader answers (302 to the hub's login) once it is up
        if hub.formgrader.poll() is not None:
            raise RuntimeError(f"the formgrader exited with status {hub.formgrader.returncode}")
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{hub.formgrader_port}/services/{COURSE_ID}/api", timeout=2)
            break
        except OSError as exc:
            if getattr(exc, "code", None):
                break
            if time.monotonic() > deadline:
                raise TimeoutError("the formgrader did not start within 90 s")
        time.sleep(0.25)
    hub.start_seconds = time.monotonic() - started
    return hub


def stop(hub: NativeHub, timeout: float = 20) -> float:
    """Stop the hub (which stops every user server) and the formgrader; seconds taken.

    The hub gets SIGINT, as on Ctrl-C; the formgrader SIGTERM (Jupyter Server ignores
    a lone SIGINT without a terminal) and, should it hang, SIGKILL with its kernels.
    """
    started = time.monotonic()
    if hub.process and hub.process.poll() is None:
        hub.process.send_signal(signal.SIGINT)
    if hub.formgrader and hub.formgrader.poll() is None:
        hub.formgrader.send_signal(signal.SIGTERM)
    for proc in (hub.process, hub.formgrader):
        if proc is None:
            continue
        try:
            proc.wait(max(0.1, timeout - (time.monotonic() - started)))
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    return time.monotonic() - started


def run(state: Path, port: int = 8000, formgrader_port: int = 9999, release: bool = True,
        course_root: Path = COURSE_ROOT) -> int:
    """The README's command: prepare, start, print the accounts, wait for Ctrl-C."""
    if shutil.which("configurable-http-proxy") is None and not (COURSE_ROOT / "node_modules/.bin/configurable-http-proxy").exists():
        print("configurable-http-proxy is missing: run `make system-deps` first", file=sys.stderr)
        return 1
    hub = prepare(state, port=port, formgrader_port=formgrader_port, release=release, course_root=course_root)
    stopping = []

    def on_signal(signum, frame):
        stopping.append(signum)

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    try:
        start(hub)
    except BaseException:
        stop(hub)
        raise
    print()
    print(f"JupyterHub for course {COURSE_ID!r} is up on {hub.url} (127.0.0.1 only), "
          f"started in {hub.start_seconds:.1f} s.  Log: {hub.state / 'jupyterhub.log'}")
    print(f"Demo accounts (passwords kept in {hub.state / 'demo-accounts.json'}):")
    roles = {**{n: "instructor (hub admin)" for n in DEMO_INSTRUCTORS}, **{n: "teaching assistant" for n in DEMO_TAS},
             **{n: "student" for n in DEMO_STUDENTS}}
    for name in DEMO_ACCOUNTS:
        print(f"  {name:<11} {hub.passwords[name]:<14} {roles[name]}")
    print(f"Formgrader (instructor, ta): {hub.url}/services/{COURSE_ID}/")
    print("Press Ctrl-C to stop everything.")
    sys.stdout.flush()
    while not stopping and hub.process.poll() is None and hub.formgrader.poll() is None:
        time.sleep(0.2)
    seconds = stop(hub)
    print(f"stopped in {seconds:.1f} s")
    return 0
