"""A real per-student exchange on disk, driven by the code the hub runs (tests only).

``Exchange`` lays out ``<root>/<course>/{outbound,inbound/<s>,feedback/<s>}`` and each
student's *view* (symlinks) as the hub does natively: for real Unix users by running the
hub configuration's own pre-spawn hook, otherwise with the layout code it calls
(``ExchangeLayout``). Students submit through
nbgrader's own ``AssignmentList.submit_assignment`` (the code behind the Assignments tab's
POST /assignments/submit) with the student config the hub ships (``jupyter_config/student``); the
grader collects with ``nbgrader collect`` and the grader config (``jupyter_config/grader``). Nothing is
mocked. Given Unix ``users``, each student submits as their own Unix user and the grader
runs as the grader's user, as on the hub as root.
"""

from __future__ import annotations

import grp
import json
import os
import pwd
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import nbformat

from attention_platform.exchange.exchange_layout import ExchangeLayout, Ids

REPO = Path(__file__).resolve().parents[1]
COURSE = "dl-attention"
ASSIGNMENT = "self_attention"
BIN = Path(sys.executable).parent

# Run in a subprocess as a student's server would: load the config, submit N times.
# argv: count, marker-prefix ("" = submit the folder as it is), pause seconds between submits
_SUBMIT_LOOP = r"""
import json, os, sys, time
import nbformat
from nbgrader.server_extensions.assignment_list.handlers import AssignmentList
count, marker, pause = int(sys.argv[1]), sys.argv[2], float(sys.argv[3])
manager = AssignmentList()
manager.root_dir = os.getcwd()
folder = os.path.join(os.getcwd(), "self_attention")
for i in range(count):
    if marker:
        for name in sorted(os.listdir(folder)):
            if name.endswith(".ipynb"):
                path = os.path.join(folder, name)
                nb = nbformat.read(path, as_version=4)
                nb.metadata["load_marker"] = f"{marker}-{i}"
                nbformat.write(nb, path)
    out = manager.submit_assignment("dl-attention", "self_attention")
    print(json.dumps({"i": i, "success": out["success"], "value": str(out.get("value", ""))[-2000:]}), flush=True)
    time.sleep(pause)
"""


@dataclass
class Exchange:
    base: Path
    users: dict | None = None  # student -> Ids: each submits as that Unix user
    grader: Ids | None = None  # the grader's Unix user (None: whoever runs the tests)

    def as_user(self, ids: Ids | None) -> dict:
        """subprocess keyword arguments that run a command as ``ids`` (nothing when None)."""
        if ids is None:
            return {}
        return dict(user=ids.uid, group=ids.gid, extra_groups=[], umask=0o022)

    def student_ids(self, student: str) -> Ids | None:
        return (self.users or {}).get(student)

    @property
    def root(self) -> Path:
        return self.base / "exchange"

    @property
    def course(self) -> Path:
        return self.root / COURSE

    def inbound(self, student: str) -> Path:
        return self.course / "inbound" / student

    def view(self, student: str) -> Path:
        return self.base / "views" / student

    def home(self, student: str) -> Path:
        return self.base / "home" / student

    def student_env(self, student: str) -> dict:
        home = self.home(student)
        return dict(
            os.environ, PATH=str(BIN) + os.pathsep + os.environ.get("PATH", ""), HOME=str(home),
            JUPYTER_CONFIG_PATH=str(REPO / "jupyter_config" / "student"), JUPYTER_DATA_DIR=str(home / ".local/share/jupyter"),
            NBGRADER_EXCHANGE_ROOT=str(self.view(student)), JUPYTERHUB_USER=student, NBGRADER_COURSE_ID=COURSE,
        )

    def grader_env(self) -> dict:
        return dict(
            os.environ, PATH=str(BIN) + os.pathsep + os.environ.get("PATH", ""), HOME=str(self.base / "grader-home"),
            JUPYTER_CONFIG_PATH=str(REPO / "jupyter_config" / "grader"), NBGRADER_EXCHANGE_ROOT=str(self.root),
            NBGRADER_COURSE_ID=COURSE, NBGRADER_CHECK_OWNER="0",
        )

    def submit(self, student: str, count: int = 1, marker: str = "", pause: float = 0.0,
               timeout: float = 300, max_file_bytes: int | None = None) -> list[dict]:
        """``count`` submits by ``student`` in one server-like process; one result dict per submit.

        ``max_file_bytes``: RLIMIT_FSIZE of that process (a "full disk" without root).
        """
        def limit():
            import resource

            resource.setrlimit(resource.RLIMIT_FSIZE, (max_file_bytes, max_file_bytes))

        proc = subprocess.run([sys.executable, "-c", _SUBMIT_LOOP, str(count), marker, str(pause)],
                              cwd=self.home(student), env=self.student_env(student), capture_output=True,
                              text=True, timeout=timeout, preexec_fn=limit if max_file_bytes else None,
                              **self.as_user(self.student_ids(student)))
        results = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
        assert proc.returncode == 0 and len(results) == count, proc.stdout + proc.stderr
        return results

    def submit_async(self, student: str, count: int, marker: str, pause: float = 0.0) -> subprocess.Popen:
        return subprocess.Popen([sys.executable, "-c", _SUBMIT_LOOP, str(count), marker, str(pause)],
                                cwd=self.home(student), env=self.student_env(student),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                **self.as_user(self.student_ids(student)))

    def nbgrader(self, course_dir: Path, *args: str, timeout: float = 600, preexec_fn=None,
                 env: dict | None = None) -> subprocess.CompletedProcess:
        """``nbgrader ARGS`` as the grader, in ``course_dir`` (which the grader must own)."""
        return subprocess.run([str(BIN / "nbgrader"), *args], cwd=course_dir, env={**self.grader_env(), **(env or {})},
                              capture_output=True, text=True, timeout=timeout, preexec_fn=preexec_fn,
                              **self.as_user(self.grader))

    def layout(self) -> ExchangeLayout:
        """The hub's layout code over this exchange (what the pre-spawn hook runs)."""
        return ExchangeLayout(self.root, COURSE, grader=self.grader, views=self.base / "views")

    def entries(self, student: str) -> list[str]:
        """Everything in the student's inbound folder, hidden names included."""
        return sorted(os.listdir(self.inbound(student)))

    def submissions(self, student: str) -> list[Path]:
        return sorted(p for p in self.inbound(student).iterdir() if not p.name.startswith("."))


def make_exchange(base: Path, students, release: Path | None = None, *, users: dict | None = None,
                  grader: Ids | None = None) -> Exchange:
    """The hub's native layout with ``release`` (default: the repository's release/) published.

    ``users``: student -> Ids of their Unix user (their folders, view and home are theirs);
    ``grader``: Ids of the grader's Unix user. Without them everything belongs to the caller.
    """
    ex = Exchange(base, users=users, grader=grader)
    release = release or REPO / "release" / ASSIGNMENT
    if users:  # real Unix users: exactly what the hub's pre-spawn hook does for each
        hub_pre_spawn(base, list(students), grader_user=pwd.getpwuid(grader.uid).pw_name if grader else "root")
    else:  # names without Unix users: the same layout code, everything the caller's
        layout = ex.layout()
        for s in students:
            layout.prepare_student(s, None)
    shutil.copytree(release, ex.course / "outbound" / ASSIGNMENT)
    for s in students:
        ids = ex.student_ids(s)
        # What a fetch leaves in the student's home: ~/self_attention/ (the hub's hook made the home)
        ex.home(s).mkdir(parents=True, exist_ok=True)
        shutil.copytree(release, ex.home(s) / ASSIGNMENT)
        if ids is not None:
            chown_tree(ex.home(s), ids)
            ex.home(s).chmod(0o700)
    (base / "grader-home").mkdir(exist_ok=True)
    if grader is not None:
        chown_tree(base / "grader-home", grader)
    return ex


# Load the ONE hub configuration as the native hub (as root) does and run its pre-spawn hook
# for users in no hub group (students).
_PRE_SPAWN = r"""
import runpy, sys, types
from traitlets.config import Config
config = Config()
runpy.run_path(sys.argv[1], init_globals={"get_config": lambda: config})
for name in sys.argv[2:]:
    user = types.SimpleNamespace(name=name, groups=[])
    config.Spawner.pre_spawn_hook(types.SimpleNamespace(user=user, environment={}, escaped_name=name))  # docker: its network
"""
# The Unix group the hub keeps its instructors in (native, as root); the tests' own.
INSTRUCTORS_UNIX_GROUP = "xch-instructors"


def hub_pre_spawn(state: Path, users, grader_user: str = "root", mode: str = "native") -> subprocess.CompletedProcess:
    """What the hub does, as root, before it starts each of ``users``' servers (``mode``: native or docker).

    The exchange is ``<state>/exchange``, the views ``<state>/views`` (as ``Exchange`` expects).
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HUB_", "COURSE_", "EXCHANGE_", "GRADER_"))}
    env.update(HUB_MODE=mode, HUB_STATE_DIR=str(state), EXCHANGE_ROOT=str(state / "exchange"),
               EXCHANGE_VIEWS=str(state / "views"), GRADER_USER=grader_user, NBGRADER_COURSE_ID=COURSE,
               COURSE_INSTRUCTORS_UNIX_GROUP=INSTRUCTORS_UNIX_GROUP)
    try:
        grp.getgrnam(INSTRUCTORS_UNIX_GROUP)
    except KeyError:
        subprocess.run(["groupadd", "--system", INSTRUCTORS_UNIX_GROUP], check=True, capture_output=True)
    (state / "home").mkdir(mode=0o711, exist_ok=True)  # as the launcher's prepare() leaves it
    done = subprocess.run([sys.executable, "-c", _PRE_SPAWN, str(REPO / "jupyter_config" / "jupyterhub_config.py"), *users],
                          env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def chown_tree(path: Path, ids: Ids) -> None:
    """Give ``path`` and everything in it to ``ids`` (never through a symlink)."""
    os.lchown(path, ids.uid, ids.gid)
    for root, dirs, files in os.walk(path):
        for name in dirs + files:
            os.lchown(os.path.join(root, name), ids.uid, ids.gid)


def write_marker(folder: Path, marker: str) -> None:
    for path in sorted(folder.glob("*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        nb.metadata["load_marker"] = marker
        nbformat.write(nb, path)


def add_ballast(folder: Path, kilobytes: int) -> None:
    """Make every notebook in ``folder`` about ``kilobytes`` larger (a cell output), so copies take time."""
    for path in sorted(folder.glob("*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        cell = nbformat.v4.new_code_cell("print('ballast')")
        cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text="x" * (kilobytes * 1024))]
        nb.cells.append(cell)
        nbformat.write(nb, path)


def submission_digest(folder: Path) -> str:
    from attention_platform.exchange.submit import content_digest

    return content_digest(str(folder))


def unix_user(name: str, home: Path, system: bool = False) -> Ids:
    """A real Unix user, created as the hub creates its users' accounts (in the hub's uid
    range) or, ``system``, as the launcher creates the grader's; its ids."""
    from attention_platform.hub.accounts import UidRange, ensure_account

    if not system:
        ensure_account(name, home, UidRange())
    else:
        try:
            pwd.getpwnam(name)
        except KeyError:
            subprocess.run(["useradd", "--system", "--no-create-home", "--home-dir", str(home), "--shell",
                            "/usr/sbin/nologin", "--user-group", name], check=True, capture_output=True)
    return Ids.of_user(name)


def run_as(ids: Ids, code: str, *args: str, timeout: float = 120, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """Python ``code`` run as ``ids`` with no extra groups: what that user's own kernel could do."""
    return subprocess.run([sys.executable, "-c", code, *args], user=ids.uid, group=ids.gid, extra_groups=[],
                          umask=0o022, capture_output=True, text=True, timeout=timeout, cwd=cwd or "/",
                          env={"PATH": "/usr/bin:/bin", "HOME": "/nonexistent"})


# Run as an attacker: replace a folder by a symlink to a target (prints whether the kernel let them).
SWAP_FOR_LINK = r"""
import os, sys
path, target = sys.argv[1], sys.argv[2]
try:
    os.rename(path, path + ".mine")
    os.symlink(target, path)
    print("replaced")
except PermissionError as exc:
    print("refused:", exc)
"""


def snapshot(folder: Path) -> dict:
    """Owner, mode and entries of a folder: what root's step must leave as it is."""
    st = folder.stat()
    return {"owner": (st.st_uid, st.st_gid), "mode": st.st_mode & 0o7777, "entries": sorted(os.listdir(folder))}
