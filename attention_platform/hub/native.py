"""``attention-course hub``: the course's JupyterHub on this machine, no Docker.

Starts ``jupyter_config/jupyterhub_config.py`` (the same file docker-compose uses) with
HUB_MODE=native: local single-user servers, SQLite, a local exchange, the course
generated and released, demo accounts (an instructor, a TA, three students) whose
passwords it prints (with HUB_AUTHENTICATOR=lti, the URLs to register in the LMS instead), listening on 127.0.0.1 only. As root each account is a real
Unix user, so the exchange's permissions are enforced by the kernel.

Ctrl-C stops the hub, which stops every server and service; submissions are
written synchronously by nbgrader, so none is lost half-way.

The launcher supervises the long-lived services it starts beside the hub (the sandbox broker,
the validate service, the formgrader, the feedback-on-submit grader): each runs in a memory
cgroup of its own (``attention-services/<service>``, capped by ``HUB_<SERVICE>_MEMORY_MB``), so
whatever one student makes it allocate kills that service at its cap, never the machine or the
hub; a service that exits is started again (:class:`Supervisor`), and the hub goes on serving.
"""

from __future__ import annotations

import grp
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

from attention_platform.course.directory import copy_course, source_assignments
from attention_platform.hub.accounts import UidRange, ensure_account
from attention_platform.course.notebooks import COURSE_ROOT
from attention_platform.exchange.exchange_layout import ExchangeLayout, Ids
from attention_platform.hub.supervisor import SERVICES, ServiceCgroups, Supervised, Supervisor, services_parent
from attention_platform.settings import Settings, course_id, settings
from attention_platform.venv import environment, program

HUB_CONFIG = COURSE_ROOT / "jupyter_config" / "jupyterhub_config.py"
# What an LMS is given for this tool: the target link URI is the hub's home, where a launch ends;
# the login and redirect URLs are steps of the launch and refuse to be its target.
LTI_TOOL_URLS = (("target link URI", "/hub/"), ("login (OIDC initiation) URL", "/hub/lti13/oauth_login"),
                 ("redirect URL", "/hub/lti13/oauth_callback"), ("tool's key set (JWKS) URL", "/hub/lti13/jwks"),
                 ("deep linking URL", "/hub/"))


def grader_account(course: str) -> str:
    """The Unix account the formgrader and every nbgrader command of the course run as (as root).
    It owns the course directory; it is not root and cannot become root."""
    return f"{course}-grader"


def instructors_group(course: str) -> str:
    """The Unix group whose members (the course's instructors, and the grader) edit source/ from
    their own JupyterLab: the hub adds an instructor when their server starts."""
    return f"{course}-instructors"


@dataclass(frozen=True)
class DemoClass:
    """The demo accounts: one instructor, one TA and ``size`` students student1..N.

    ``prefix`` starts every name, so a load or fault test can run beside another hub on the
    same machine (Unix users are machine-wide)."""

    prefix: str = ""
    size: int = 3

    @classmethod
    def from_environment(cls, environ=None) -> "DemoClass":
        """HUB_DEMO_PREFIX and HUB_DEMO_STUDENTS (the class size; default 3)."""
        configured = settings() if environ is None else Settings.from_environ(environ)
        return cls(configured.hub_demo_prefix or "", configured.hub_demo_students)

    @property
    def instructors(self) -> tuple[str, ...]:
        return (f"{self.prefix}instructor",)

    @property
    def tas(self) -> tuple[str, ...]:
        return (f"{self.prefix}ta",)

    @property
    def students(self) -> tuple[str, ...]:
        return tuple(f"{self.prefix}student{i}" for i in range(1, self.size + 1))

    @property
    def accounts(self) -> tuple[str, ...]:
        return self.instructors + self.tas + self.students

    def role(self, name: str) -> str:
        if name in self.instructors:
            return "instructor (hub admin)"
        return "teaching assistant" if name in self.tas else "student"


@dataclass
class NativeHub:
    state: Path
    url: str
    env: dict
    passwords: dict
    formgrader_port: int = 9999
    process: subprocess.Popen | None = None
    formgrader: subprocess.Popen | None = None
    broker: subprocess.Popen | None = None
    instant: subprocess.Popen | None = None  # the feedback-on-submit grader (attention_platform/feedback_on_submit)
    validate: subprocess.Popen | None = None  # the validate service (attention_platform/grading/validate_service.py)
    lms_sync: subprocess.Popen | None = None  # scores to the LMS, its roster in (attention_platform/lms), LTI only
    grader_user: str | None = None
    services: ServiceCgroups | None = None  # the services' memory caps (start())
    log_file: object = None  # jupyterhub.log, where every process of the hub writes
    start_seconds: float = 0.0
    course: str = Settings.nbgrader_course_id
    demo: DemoClass = DemoClass()

    @property
    def course_dir(self) -> Path:
        return self.state / "course"

    @property
    def exchange(self) -> Path:
        return self.state / "exchange"

    @property
    def sandbox_socket(self) -> Path:
        return self.state / "run" / "sandbox.sock"

    @property
    def validate_socket(self) -> Path:
        """Where hub users' servers reach the validate service (its folder is the grader's)."""
        return self.state / "run" / "validate" / "validate.sock"

    @property
    def grader_lib(self) -> Path:
        """The grader's own copy of the hidden checks (the checkout's is hidden from every other account)."""
        return self.state / "grader-lib"

    def as_grader(self) -> dict:
        """subprocess arguments that run a command as the grader account, in the course directory."""
        env = dict(self.env, HOME=str(self.state / "grader-home"), PYTHONPATH=str(self.grader_lib),
                   JUPYTER_CONFIG_PATH=str(COURSE_ROOT / "jupyter_config" / "grader"),
                   NBGRADER_EXCHANGE_ROOT=str(self.exchange), ATTENTION_SANDBOX_SOCKET=str(self.sandbox_socket))
        kwargs = dict(cwd=self.course_dir, env=env)
        if self.grader_user:
            entry = pwd.getpwnam(self.grader_user)
            kwargs.update(user=entry.pw_uid, group=entry.pw_gid, umask=0o027,
                          extra_groups=[grp.getgrnam(instructors_group(self.course)).gr_gid])
        return kwargs


def _run(cmd, **kwargs):
    done = subprocess.run(cmd, capture_output=True, text=True, **kwargs)
    if done.returncode:
        raise RuntimeError(f"{' '.join(map(str, cmd))} failed ({done.returncode}):\n{done.stdout[-2000:]}{done.stderr[-3000:]}")
    return done


def ensure_grader_account(course: str, home: Path) -> None:
    """The course's grader: a system account with no login shell (only the formgrader and
    nbgrader commands run as it), member of the instructors' group (it reads their edits)."""
    grader, group = grader_account(course), instructors_group(course)
    try:
        grp.getgrnam(group)
    except KeyError:
        _run(["groupadd", "--system", group])
    try:
        pwd.getpwnam(grader)
    except KeyError:
        home.parent.mkdir(parents=True, exist_ok=True)
        _run(["useradd", "--system", "--no-create-home", "--home-dir", str(home), "--shell", "/usr/sbin/nologin",
              "--user-group", grader])
    if grader not in grp.getgrnam(group).gr_mem:
        _run(["gpasswd", "--add", grader, group])


def share_source_with_instructors(hub: "NativeHub") -> None:
    """Instructors edit source/ in their own JupyterLab: the course directory lets the
    instructors' group in as far as source/, which is theirs to write (setgid, so what
    they create stays readable by the grader). Root only touches the course directory
    through a descriptor; the recursive part runs as the grader, who owns the tree."""
    group = instructors_group(hub.course)
    gid = grp.getgrnam(group).gr_gid
    fd = os.open(hub.course_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        os.fchown(fd, pwd.getpwnam(hub.grader_user).pw_uid, gid)
        os.fchmod(fd, 0o710)
    finally:
        os.close(fd)
    as_grader = hub.as_grader()
    _run(["chgrp", "-R", "--no-dereference", group, "source"], **as_grader)
    _run(["chmod", "-R", "g+rwX", "source"], **as_grader)
    _run(["find", "source", "-type", "d", "-exec", "chmod", "g+s", "{}", "+"], **as_grader)


def hub_uid_range() -> UidRange:
    """HUB_UID_MIN..HUB_UID_MAX: the uids of the Unix accounts the hub creates for its users."""
    return UidRange(settings().hub_uid_min, settings().hub_uid_max)


def load_passwords(state: Path, accounts) -> dict:
    """Demo passwords, generated once per state directory and kept there (mode 0600)."""
    path = state / "demo-accounts.json"
    if path.exists():
        return json.loads(path.read_text())
    passwords = {name: secrets.token_urlsafe(9) for name in accounts}
    path.write_text(json.dumps(passwords, indent=1))
    path.chmod(0o600)
    return passwords


def _secret(path: Path) -> str:
    if not path.exists():
        path.write_text(secrets.token_hex(32))
        path.chmod(0o600)
    return path.read_text().strip()


def own_dir(path: Path, uid: int | None, gid: int | None, mode: int) -> None:
    """Create ``path`` (its parent is root's) and give it to uid:gid with ``mode``, through a
    file descriptor opened without following links: whatever sits at ``path`` is never followed."""
    try:
        path.mkdir()
    except FileExistsError:
        pass
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        if uid is not None:
            os.fchown(fd, uid, gid)
        os.fchmod(fd, mode)
    finally:
        os.close(fd)


def private_file(path: Path) -> None:
    """``path`` exists, mode 0600, before anyone writes secrets into it."""
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600))
    except FileExistsError:
        os.chmod(path, 0o600)  # the state directory is root's: nothing else can have put a link here


def _give_tree(root: Path, uid: int, gid: int) -> None:
    """lchown everything under a tree root created moments ago, the top folder last."""
    for folder, dirs, files in os.walk(root, topdown=False):
        for name in dirs + files:
            os.lchown(os.path.join(folder, name), uid, gid)
    os.lchown(root, uid, gid)


def _install_for_grader(hub: "NativeHub", target: Path, build) -> None:
    """Build a tree as root in a fresh folder of the (root-owned) state directory, hand it to
    the grader, and swap it into ``target``: nothing the grader can write is ever followed."""
    fresh = hub.state / f".{target.name}-{secrets.token_hex(6)}"
    build(fresh)
    if hub.grader_user:
        entry = pwd.getpwnam(hub.grader_user)
        _give_tree(fresh, entry.pw_uid, entry.pw_gid)
    fresh.chmod(0o700)
    if target.is_dir() and not target.is_symlink():
        shutil.rmtree(target)
    elif target.is_symlink():
        target.unlink()
    os.rename(fresh, target)


def _copy_grader_tests(dest: Path) -> None:
    dest.mkdir()
    shutil.copytree(COURSE_ROOT / "grader_tests", dest / "grader_tests",
                    ignore=shutil.ignore_patterns("tests", "__pycache__", "*.pyc"))


def notebook_order_setting(course_root: Path = COURSE_ROOT) -> str:
    """``ATTENTION_NOTEBOOK_ORDER``: each assignment's notebook ids in the order students work through
    them, as JSON, for the students' Lab (which cannot read the hidden checks that say it)."""
    from grader_tests import discovery  # the hub's image has no hidden checks; only the launcher reads them

    known = set(discovery.assignment_names())
    return json.dumps({name: discovery.notebook_order(name) if name in known else ()
                       for name in source_assignments(course_root)})


def prepare(state: Path, *, port: int = 8000, formgrader_port: int = 9999, release: bool = True,
            course_root: Path = COURSE_ROOT, demo: DemoClass | None = None, log=print,
            assignments: bool = True) -> NativeHub:
    """Everything before the hub starts: accounts, course directory, exchange, and with ``assignments``
    the course's assignments generated and released (:func:`prepare_assignments` and
    :func:`release_assignments`, which the launcher runs once the login page answers instead). ``demo`` defaults to the class the environment
    describes (:meth:`DemoClass.from_environment`)."""
    demo = demo or DemoClass.from_environment()
    course = course_id()
    state = state.resolve()
    state.mkdir(parents=True, exist_ok=True)
    as_root = os.geteuid() == 0
    # Students only traverse the state directory (to their homes and exchange views); its
    # files (hub database, tokens, passwords) are root's and 0600.
    state.chmod(0o711 if as_root else 0o755)
    # As root, the formgrader and every nbgrader command run as the course's grader account,
    # never as root: what renders student work for TAs cannot touch the rest of the machine.
    # The one root part of grading, the sandbox broker, only builds sandboxes (start()).
    grader = grader_account(course) if as_root else None
    passwords = load_passwords(state, demo.accounts)
    if as_root:
        ensure_grader_account(course, state / "grader-home")
        for name in demo.accounts:
            ensure_account(name, state / "home" / name, hub_uid_range())
    grader_ids = (pwd.getpwnam(grader).pw_uid, pwd.getpwnam(grader).pw_gid) if grader else (None, None)
    own_dir(state / "grader-home", *grader_ids, 0o700)
    own_dir(state / "home", None, None, 0o711 if as_root else 0o755)
    for name in demo.accounts:
        entry = pwd.getpwnam(name) if as_root else None
        own_dir(state / "home" / name, entry and entry.pw_uid, entry and entry.pw_gid, 0o700 if as_root else 0o755)
    own_dir(state / "run", None, None, 0o755)
    # The validate service's socket folder: the grader's, so that it can bind there; nobody else writes it.
    own_dir(state / "run" / "validate", *grader_ids, 0o755)
    private_file(state / "jupyterhub.sqlite")  # password and token hashes: root's alone (SQLite's journal follows)

    url = f"http://127.0.0.1:{port}"
    env = environment(
        HUB_MODE="native",
        HUB_STATE_DIR=str(state),
        HUB_BIND_URL=url,
        HUB_INTERNAL_PORT=str(port + 81),
        PROXY_API_PORT=str(port + 1),
        NBGRADER_COURSE_ID=course,
        HUB_ADMIN_USERS=",".join(demo.instructors),
        COURSE_INSTRUCTORS=",".join(demo.instructors),
        COURSE_TAS=",".join(demo.tas),
        COURSE_STUDENTS=",".join(demo.students),
        EXCHANGE_ROOT=str(state / "exchange"),
        EXCHANGE_VIEWS=str(state / "exchange-views"),
        COURSE_DIR=str(state / "course"),
        FORMGRADER_URL=f"http://127.0.0.1:{formgrader_port}",
        FORMGRADER_API_TOKEN=_secret(state / "formgrader-api-token"),
        LMS_SYNC_API_TOKEN=_secret(state / "lms-sync-api-token"),
        GRADER_USER=grader or "",
        # the demo logins exist, approved, before the hub serves its first page (admins included)
        HUB_INITIAL_PASSWORDS_FILE=str(state / "demo-accounts.json"),
        # Validate in warm sandboxes (as root: the grader's validate service and the broker exist)
        VALIDATE_SOCKET=str(state / "run" / "validate" / "validate.sock") if as_root else "",
        ATTENTION_NOTEBOOK_ORDER=notebook_order_setting(course_root),
    )
    env.pop("JUPYTER_CONFIG_PATH", None)
    hub = NativeHub(state=state, url=url, env=env, passwords=passwords, grader_user=grader,
                    formgrader_port=formgrader_port, course=course, demo=demo)

    # The exchange's top folders (root's; outbound/ the grader's): see exchange_layout.py.
    # Students get their own inbound/feedback folders and view when their server first
    # starts (the hub's pre-spawn hook).
    ExchangeLayout(hub.exchange, course, grader=Ids.of_user(grader) if grader else None,
                   views=state / "exchange-views").prepare_course()

    if as_root:
        hide_course_secrets(COURSE_ROOT, log)
    # The grader's copy of the hidden checks, fresh at every start (the checkout's copy is
    # hidden from every account but its owner's).
    _install_for_grader(hub, hub.grader_lib, _copy_grader_tests)
    # The course directory: source and config only; the grader owns it, nobody else can read it.
    if not (hub.course_dir / "source").is_dir():
        _install_for_grader(hub, hub.course_dir, lambda fresh: copy_course(fresh, Path(course_root)))
        log(f"course directory created: {hub.course_dir}")
    if as_root:
        share_source_with_instructors(hub)
    if assignments:
        prepare_assignments(hub, course_root=course_root, log=log)
        if release:
            release_assignments(hub, course_root=course_root, log=log)
    return hub


def _shipped_assignments(hub: NativeHub, course_root: Path, log=print) -> list[str]:
    """The assignments the course ships (the checkout's source/); one an instructor adds in the hub's
    course directory is theirs to release from the formgrader, never released by a restart."""
    assignments = [a for a in source_assignments(course_root) if a in source_assignments(hub.course_dir)]
    for missing in sorted(set(source_assignments(course_root)) - set(assignments)):
        log(f"assignment {missing!r} is not in {hub.course_dir / 'source'} (made before it shipped): not released")
    return assignments


NBGRADER_STEPS = (program("python"), "-m", "attention_platform.course.nbgrader_steps")


def prepare_assignments(hub: NativeHub, *, course_root: Path = COURSE_ROOT, log=print) -> None:
    """The assignments the course ships generated (their gradebook entries with them) and the demo
    roster imported: nbgrader's steps, in one process as the grader (course/nbgrader_steps.py)."""
    _run([*NBGRADER_STEPS, "generate", "--roster", str(write_demo_roster(hub)),
          *_shipped_assignments(hub, course_root, log=log)], **hub.as_grader())


def release_assignments(hub: NativeHub, *, course_root: Path = COURSE_ROOT, log=print) -> None:
    """Each assignment the course ships released that is not yet. The launcher does this once the
    feedback-on-submit grader runs: it grades only what is submitted after it first sees an assignment."""
    course_x = hub.exchange / hub.course
    assignments = _shipped_assignments(hub, course_root, log=lambda line: None)
    unreleased = [a for a in assignments if not (course_x / "outbound" / a).is_dir()]
    if unreleased:
        _run([*NBGRADER_STEPS, "release", *unreleased], **hub.as_grader())
    log(f"released to {course_x / 'outbound'}: {', '.join(assignments) or 'no assignment (source/ is empty)'}")


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


def write_demo_roster(hub: NativeHub) -> Path:
    """The demo students as a roster CSV, as an instructor would import a real class with
    ``nbgrader db student import``; without names the formgrader lists them as "None, None"."""
    roster = hub.state / "run" / "demo-roster.csv"
    lines = ["id,first_name,last_name"] + [f"{name},Demo,{name.capitalize()}" for name in hub.demo.students]
    roster.write_text("\n".join(lines) + "\n")
    if hub.grader_user:  # read by the grader's nbgrader only
        os.chown(roster, 0, pwd.getpwnam(hub.grader_user).pw_gid)
    roster.chmod(0o640)
    return roster


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


def start_broker(hub: NativeHub, log_file, timeout: float = 120, wait: bool = True) -> subprocess.Popen:
    """The root sandbox broker, for the grader account only (see grading/sandbox/broker.py); with
    ``wait`` once it listens."""
    entry = pwd.getpwnam(hub.grader_user)
    # A socket left by the previous run (the state directory is kept) would pass the wait below
    # before the new broker listens, and the first client would be refused. run/ is root's alone.
    hub.sandbox_socket.unlink(missing_ok=True)
    from attention_platform.grading.sandbox import first_use

    # The first uses the course's notebooks need, paid once for every connection (grading/sandbox/first_use.py).
    first_uses = ",".join(first_use.needed_by_course(hub.course_dir)) or "none"
    hub.broker = subprocess.Popen(
        [sys.executable, "-m", "attention_platform.grading.sandbox.broker", "--socket", str(hub.sandbox_socket),
         "--allow-uid", str(entry.pw_uid), "--allow-gid", str(entry.pw_gid), "--first-uses", first_uses],
        cwd=hub.state, env=hub.env, stdout=log_file, stderr=subprocess.STDOUT, start_new_session=True,
    )
    hub.services.contain("broker", hub.broker)
    if wait:
        wait_for_broker(hub, timeout)
    return hub.broker


def wait_for_broker(hub: NativeHub, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not _listening_soon(hub.sandbox_socket):
        if hub.broker.poll() is not None:
            raise RuntimeError(f"the sandbox broker exited with status {hub.broker.returncode}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"the sandbox broker did not start within {timeout:.0f} s")
        time.sleep(0.1)


def _listening_soon(path: Path) -> bool:
    """The broker binds its socket, gives it to the grader's group (0660), then listens at once."""
    try:
        return (path.stat().st_mode & 0o777) == 0o660
    except FileNotFoundError:
        return False


def start(hub: NativeHub) -> NativeHub:
    """Start JupyterHub, the sandbox broker, the formgrader and the feedback-on-submit grader
    (child processes, own sessions, the services each in a memory cgroup of its own) and wait for them."""
    started = time.monotonic()
    start_hub(hub)
    start_services(hub)
    hub.start_seconds = time.monotonic() - started
    return hub


def start_hub(hub: NativeHub) -> NativeHub:
    """Start JupyterHub and the sandbox broker, and wait until the hub's login page answers (the
    broker's warm-up goes on meanwhile; :func:`start_services` waits for it)."""
    private_file(hub.state / "jupyterhub.log")  # user names, paths and errors of everyone: root's alone
    log = open(hub.state / "jupyterhub.log", "ab")
    hub.log_file = log
    hub.services = ServiceCgroups(log=_launcher_says(log), parent=services_parent(hub.state))
    hub.process = subprocess.Popen(
        [program("jupyterhub"), "-f", str(HUB_CONFIG)],
        cwd=hub.state, env=hub.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )
    if hub.grader_user:
        start_broker(hub, log, wait=False)
    wait_for_hub(hub.url, hub.process)
    return hub


def start_services(hub: NativeHub, timeout: float = 120) -> NativeHub:
    """Once the hub answers: the validate service (once the broker listens), the formgrader (which asks
    the hub's API for its version as it starts) and the feedback-on-submit grader; waits for the
    formgrader. Until then a student's Validate runs in their own kernel (lab/warm_validate.py), a
    submission waits in the inbound for the grader, and the hub answers the formgrader's link with
    its "service unavailable" page."""
    log = hub.log_file
    if hub.grader_user:
        wait_for_broker(hub, timeout)
    start_feedback_on_submit(hub, log)  # before the others: it takes seconds to watch, and the release waits for it
    if hub.grader_user:
        start_validate(hub, log)  # students' Validate, in sandboxes of the broker, as the grader account
    start_formgrader(hub, log)
    if lms_services(hub):
        start_lms_sync(hub, log)
    deadline = time.monotonic() + 90
    while True:  # the formgrader answers its version once it is up
        if hub.formgrader.poll() is not None:
            raise RuntimeError(f"the formgrader exited with status {hub.formgrader.returncode}")
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{hub.formgrader_port}/services/{hub.course}/api", timeout=2)
            break
        except OSError as exc:
            if getattr(exc, "code", None):
                break
            if time.monotonic() > deadline:
                raise TimeoutError("the formgrader did not start within 90 s")
        time.sleep(0.25)
    return hub


def start_validate(hub: NativeHub, log_file) -> subprocess.Popen:
    uids = hub_uid_range()
    hub.validate = subprocess.Popen(
        [program("attention-course"), "validate-service", "--course", str(hub.course_dir),
         "--socket", str(hub.validate_socket), "--uid-min", str(uids.first), "--uid-max", str(uids.last)],
        stdout=log_file, stderr=subprocess.STDOUT, start_new_session=True, **hub.as_grader())
    hub.services.contain("validate", hub.validate)
    return hub.validate


def start_formgrader(hub: NativeHub, log_file) -> subprocess.Popen:
    from attention_platform.formgrader.formgrader_service import command, service_env

    as_grader = hub.as_grader()
    as_grader["env"].update(service_env(
        course=hub.course, api_token=hub.env["FORMGRADER_API_TOKEN"],
        hub_api_url=f"http://127.0.0.1:{hub.env['HUB_INTERNAL_PORT']}/hub/api", ip="127.0.0.1",
        port=hub.formgrader_port))
    hub.formgrader = subprocess.Popen(command(str(hub.course_dir), "127.0.0.1", hub.formgrader_port),
                                      stdout=log_file, stderr=subprocess.STDOUT, start_new_session=True, **as_grader)
    hub.services.contain("formgrader", hub.formgrader)
    return hub.formgrader


def start_feedback_on_submit(hub: NativeHub, log_file) -> subprocess.Popen:
    """Feedback on submit: the grader account watches the students' inbound folders (see the README)."""
    hub.instant = subprocess.Popen(
        [program("attention-course"), "feedback-on-submit", "--course", str(hub.course_dir),
         "--exchange", str(hub.exchange)],
        stdout=log_file, stderr=subprocess.STDOUT, start_new_session=True, **hub.as_grader())
    hub.services.contain("feedback-on-submit", hub.instant)
    return hub.instant


def lms_services(hub: NativeHub) -> bool:
    """Whether the course exchanges scores and its roster with the LMS (LTI launches and LTI_TOKEN_URL)."""
    configured = Settings.from_environ(hub.env)
    return configured.hub_authenticator == "lti" and bool(configured.lti_token_url)


def start_lms_sync(hub: NativeHub, log_file) -> subprocess.Popen:
    """The LMS sync as the grader account, registered with the hub as the service ``lms-sync``
    (jupyterhub_config.py). The tool's key stays root's file: the sync gets its PEM on standard input."""
    from attention_platform.hub.lti_tool_keys import ToolKey
    from cryptography.hazmat.primitives import serialization

    key = ToolKey.load_or_create(Settings.from_environ(hub.env).lti_tool_key_file or hub.state / "lti-tool-key.pem")
    as_grader = hub.as_grader()
    as_grader["env"].update(JUPYTERHUB_API_URL=f"http://127.0.0.1:{hub.env['HUB_INTERNAL_PORT']}/hub/api",
                            JUPYTERHUB_API_TOKEN=hub.env["LMS_SYNC_API_TOKEN"], JUPYTERHUB_SERVICE_NAME="lms-sync")
    hub.lms_sync = subprocess.Popen(
        [program("attention-course"), "lms-sync", "--course", str(hub.course_dir), "--key-file", "-",
         *(["--unix-account-names"] if hub.grader_user else [])],
        stdin=subprocess.PIPE, stdout=log_file, stderr=subprocess.STDOUT, start_new_session=True, **as_grader)
    with hub.lms_sync.stdin as pipe:
        pipe.write(key.private_key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                 serialization.NoEncryption()))
    hub.services.contain("lms-sync", hub.lms_sync)
    return hub.lms_sync


def stop(hub: NativeHub, timeout: float = 20) -> float:
    """Stop the hub (which stops every user server) and the formgrader; seconds taken.

    The hub gets SIGINT, as on Ctrl-C; the formgrader SIGTERM (Jupyter Server ignores
    a lone SIGINT without a terminal) and, should it hang, SIGKILL with its kernels.
    """
    started = time.monotonic()
    if hub.process and hub.process.poll() is None:
        hub.process.send_signal(signal.SIGINT)
    for proc in (hub.formgrader, hub.instant, hub.validate, hub.broker, hub.lms_sync):
        if proc and proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    for proc in (hub.process, hub.formgrader, hub.instant, hub.validate, hub.broker, hub.lms_sync):
        if proc is None:
            continue
        try:
            proc.wait(max(0.1, timeout - (time.monotonic() - started)))
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    if hub.services is not None:
        for service in SERVICES:
            hub.services.empty(service)
    return time.monotonic() - started


def supervise(hub: NativeHub) -> Supervisor:
    """The services the launcher starts again when they exit (the hub itself is what the launcher
    runs: when it exits, everything stops)."""
    log = hub.log_file
    services = [Supervised("formgrader", lambda: hub.formgrader, lambda: start_formgrader(hub, log)),
                Supervised("feedback-on-submit grader", lambda: hub.instant, lambda: start_feedback_on_submit(hub, log))]
    if hub.grader_user:
        services += [Supervised("sandbox broker", lambda: hub.broker, lambda: start_broker(hub, log, wait=False)),
                     Supervised("validate service", lambda: hub.validate, lambda: start_validate(hub, log))]
    if lms_services(hub):
        services.append(Supervised("LMS sync", lambda: hub.lms_sync, lambda: start_lms_sync(hub, log)))
    return Supervisor(services, log=_launcher_says(log))


def _launcher_says(log_file):
    """A line of the launcher's own, into jupyterhub.log beside its children's."""
    def say(line: str) -> None:
        log_file.write(f"[native launcher] {line}\n".encode())
        log_file.flush()
    return say


def hub_ports(port: int, formgrader_port: int) -> dict[str, int]:
    """Every port a native hub listens on, by what listens there: the proxy's public port and
    the two derived from it (prepare()), and the formgrader's."""
    return {"the hub (--port)": port, "the proxy's API (--port + 1)": port + 1,
            "the hub's own server (--port + 81)": port + 81, "the formgrader (--formgrader-port)": formgrader_port}


def busy_ports(ports: dict[str, int]) -> list[str]:
    """``ports``' entries that cannot be listened on now (a port left in TIME_WAIT by a previous run
    of the hub counts as free: its servers reuse addresses, as this check does)."""
    import socket

    busy = []
    for what, port in ports.items():
        with socket.socket() as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind(("127.0.0.1", port))
            except OSError as exc:
                busy.append(f"{what}: {port} ({exc.strerror})")
    return busy


def run(state: Path, port: int = 8000, formgrader_port: int = 9999, release: bool = True,
        course_root: Path = COURSE_ROOT) -> int:
    """The README's command: prepare, start, print the accounts, wait for Ctrl-C."""
    if shutil.which("configurable-http-proxy") is None and not (COURSE_ROOT / "node_modules/.bin/configurable-http-proxy").exists():
        print("configurable-http-proxy is missing: run `make system-deps` first", file=sys.stderr)
        return 1
    busy = busy_ports(hub_ports(port, formgrader_port))
    if busy:
        print("cannot start the hub, these ports on 127.0.0.1 are in use (choose another --port or "
              "--formgrader-port):\n  " + "\n  ".join(busy), file=sys.stderr)
        return 1
    started = time.monotonic()
    hub = prepare(state, port=port, formgrader_port=formgrader_port, release=release, course_root=course_root,
                  assignments=False)
    stopping = []

    def on_signal(signum, frame):
        stopping.append(signum)

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    # The login page first; what a student or TA needs after logging in follows while they do.
    try:
        start_hub(hub)
        print()
        print(f"JupyterHub for course {hub.course!r}: its login page answers on {hub.url} (127.0.0.1 only) "
              f"after {time.monotonic() - started:.1f} s.  Log: {hub.state / 'jupyterhub.log'}")
        print_logins(hub)
        print("Still starting: the feedback-on-submit grader, the sandbox broker, the validate service and the "
              "formgrader (until then the formgrader's page says it is unavailable), then the assignments' release.")
        sys.stdout.flush()
        prepare_assignments(hub, course_root=course_root)
        start_services(hub)
        if release:
            release_assignments(hub, course_root=course_root)
    except BaseException:
        stop(hub)
        raise
    hub.start_seconds = time.monotonic() - started
    print(f"Everything started in {hub.start_seconds:.1f} s.  Formgrader (instructor, ta): "
          f"{hub.url}/services/{hub.course}/")
    print("Press Ctrl-C to stop everything.")
    sys.stdout.flush()
    supervisor = supervise(hub)
    while not stopping and hub.process.poll() is None:
        supervisor.poll()
        time.sleep(0.2)
    seconds = stop(hub)
    print(f"stopped in {seconds:.1f} s")
    return 0


def print_logins(hub: NativeHub) -> None:
    """How people log in: the demo accounts and their passwords, or with LTI the URLs to register in the LMS."""
    if hub.env.get("HUB_AUTHENTICATOR") == "lti":
        # LTI logs in from the LMS only: the demo passwords open nothing
        print("Logins come from the LMS (LTI 1.3); register the tool there with "
              "(docs/instructors/lms.md, with the hub's public address for 127.0.0.1):")
        for field, path in LTI_TOOL_URLS:
            print(f"  {field:<32} {hub.url}{path}")
    else:
        print(f"Demo accounts (passwords kept in {hub.state / 'demo-accounts.json'}):")
        for name in hub.demo.accounts:
            print(f"  {name:<11} {hub.passwords[name]:<14} {hub.demo.role(name)}")
