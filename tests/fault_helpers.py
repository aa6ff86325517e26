"""A real per-student exchange on disk, driven by the code the hub runs (tests only).

``Exchange`` lays out ``<root>/<course>/{outbound,inbound/<s>,feedback/<s>}`` and each
student's *view* (symlinks), exactly as ``hub/jupyterhub_config.py``'s ``prepare_exchange``
does natively. Students submit through nbgrader's own ``AssignmentList.submit_assignment``
(the code behind the Assignments tab's POST /assignments/submit) with the student config the
hub ships (``hub/student``); the grader collects with ``nbgrader collect`` and the grader
config (``hub/grader``). Nothing is mocked.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import nbformat

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
            JUPYTER_CONFIG_PATH=str(REPO / "hub" / "student"), JUPYTER_DATA_DIR=str(home / ".local/share/jupyter"),
            NBGRADER_EXCHANGE_ROOT=str(self.view(student)), JUPYTERHUB_USER=student, NBGRADER_COURSE_ID=COURSE,
        )

    def grader_env(self) -> dict:
        return dict(
            os.environ, PATH=str(BIN) + os.pathsep + os.environ.get("PATH", ""), HOME=str(self.base / "grader-home"),
            JUPYTER_CONFIG_PATH=str(REPO / "hub" / "grader"), NBGRADER_EXCHANGE_ROOT=str(self.root),
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
                              text=True, timeout=timeout, preexec_fn=limit if max_file_bytes else None)
        results = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
        assert proc.returncode == 0 and len(results) == count, proc.stdout + proc.stderr
        return results

    def submit_async(self, student: str, count: int, marker: str, pause: float = 0.0) -> subprocess.Popen:
        return subprocess.Popen([sys.executable, "-c", _SUBMIT_LOOP, str(count), marker, str(pause)],
                                cwd=self.home(student), env=self.student_env(student),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def nbgrader(self, course_dir: Path, *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
        return subprocess.run([str(BIN / "nbgrader"), *args], cwd=course_dir, env=self.grader_env(),
                              capture_output=True, text=True, timeout=timeout)

    def entries(self, student: str) -> list[str]:
        """Everything in the student's inbound folder, hidden names included."""
        return sorted(os.listdir(self.inbound(student)))

    def submissions(self, student: str) -> list[Path]:
        return sorted(p for p in self.inbound(student).iterdir() if not p.name.startswith("."))


def make_exchange(base: Path, students, release: Path | None = None) -> Exchange:
    """The hub's native layout with ``release`` (default: the repository's release/) published."""
    ex = Exchange(base)
    release = release or REPO / "release" / ASSIGNMENT
    shutil.copytree(release, ex.course / "outbound" / ASSIGNMENT)
    for sub in ("inbound", "feedback"):
        (ex.course / sub).mkdir(parents=True, exist_ok=True)
    for s in students:
        ex.inbound(s).mkdir(mode=0o2770)
        (ex.course / "feedback" / s).mkdir(mode=0o2750)
        view = ex.view(s) / COURSE
        view.mkdir(parents=True)
        (view / "outbound").symlink_to(ex.course / "outbound")
        (view / "inbound").symlink_to(ex.inbound(s))
        (view / "feedback").symlink_to(ex.course / "feedback" / s)
        # What a fetch leaves in the student's home: ~/self_attention/
        ex.home(s).mkdir(parents=True)
        shutil.copytree(release, ex.home(s) / ASSIGNMENT)
    (base / "grader-home").mkdir(exist_ok=True)
    return ex


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
    from attention_platform.hub.submit import content_digest

    return content_digest(str(folder))
