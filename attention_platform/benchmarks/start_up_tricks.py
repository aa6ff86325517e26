"""``attention-course bench-start-up-tricks``: what each start-up trick buys of what a user waits for.

Not a test (nothing is asserted against a clock): a measurement to print. The tricks:

* ``import-hook``: jsonschema's IRI parser built on first use (``third_party_patches.defer_iri_syntax``);
* ``frozen-collector``: the cyclic collector paused during start-up, what start-up made frozen
  afterwards (``start_up_gc``);
* ``picture-redraw``: the feedback picture's student panel mixed into pixels measured once
  (the assignment's ``pictures`` module), not rendered by matplotlib for each picture.

What is timed, each in fresh processes:

* ``autograde``: a TA's autograde of one submission from a terminal, ``attention-course
  autograde-batch A --student`` on a scratch copy of the course where the instructor's solutions are
  one student's submission (start-up, sandbox and exit included);
* ``server-start``: what a student's server imports before it serves (jupyterhub-singleuser's
  start-up without the network: Jupyter Server, JupyterLab, nbgrader's and the course's extensions),
  with the launcher's tricks.

Every arm runs once per round, the arms in a new order each round; a trick's share is
``1 - median(all tricks) / median(that trick off)``, for wall-clock and CPU time. The machine may be
busy: only ratios measured in the same run mean anything.
"""

from __future__ import annotations

import sys
from pathlib import Path

# The command line imports this module for its choices: anything more is imported when it runs.

TRICKS = ("import-hook", "frozen-collector", "picture-redraw")
SCENARIOS = {  # what a user waits for -> the tricks that act on it
    "autograde": TRICKS,
    "server-start": ("import-hook", "frozen-collector"),
}
STUDENT = "bench-student"
SERVER_IMPORTS = ("jupyterhub.singleuser", "jupyter_server.serverapp", "jupyterlab.labapp",
                  "nbgrader.server_extensions.assignment_list", "nbgrader.server_extensions.validate_assignment",
                  "attention_platform.lab.course_lab", "attention_platform.lab.feedback_on_submit")


def prepare(course: Path, assignment: str, workdir: Path) -> Path:
    """A scratch copy of ``course`` with ``assignment`` generated and its source notebooks (the
    instructor's solutions) filed as one student's submission."""
    import shutil

    from attention_platform.course.directory import copy_course, nbgrader

    scratch = copy_course(workdir / "course", course)
    nbgrader(scratch, "generate_assignment", assignment, "--force", check=True)
    folder = scratch / "submitted" / STUDENT / assignment
    folder.mkdir(parents=True)
    for notebook in sorted((scratch / "source" / assignment).glob("*.ipynb")):
        shutil.copy2(notebook, folder / notebook.name)
    return scratch


def _file_again(scratch: Path, assignment: str) -> None:
    import datetime as dt

    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f %Z")
    (scratch / "submitted" / STUDENT / assignment / "timestamp.txt").write_text(stamp)


def _children_cpu() -> float:
    import resource

    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _timed(command: list[str], cwd: Path) -> tuple[float, float]:
    import subprocess
    import time

    started, cpu = time.monotonic(), _children_cpu()
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True)
    wall, cpu = time.monotonic() - started, _children_cpu() - cpu
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed: {done.stderr[-2000:]}")
    return wall, cpu


def _command(scenario: str, off: tuple[str, ...], assignment: str, scratch: Path, pictures: str) -> list[str]:
    child = [sys.executable, "-m", __name__, "--child", scenario, "--off", ",".join(off) or "-",
             "--pictures", pictures, "--"]
    if scenario == "autograde":
        return child + ["autograde-batch", assignment, "--course", str(scratch), "--student", STUDENT, "--no-progress"]
    return child


def run(course: Path, assignment: str, workdir: Path, rounds: int = 5, scenarios=tuple(SCENARIOS),
        tricks=TRICKS, log=print) -> dict:
    """Time every scenario's arms (all tricks, then each of ``tricks`` off; ``a+b``: both off at once,
    for tricks that stand in for each other) for ``rounds`` rounds; print and return each arm's share
    of each scenario's median wall-clock and CPU time."""
    import json
    import random
    import shutil
    import statistics

    from grader_tests.registry import assignment as assignment_checks

    if workdir.exists():
        shutil.rmtree(workdir)
    workdir.mkdir(parents=True)
    scratch = prepare(course, assignment, workdir)
    pictures = assignment_checks(assignment).pictures
    has_pictures = pictures is not None
    pictures = pictures.__name__ if has_pictures else "-"
    arms = {scenario: [()] + [tuple(arm.split("+")) for arm in tricks
                               if set(arm.split("+")) <= set(SCENARIOS[scenario])
                               and ("picture-redraw" not in arm or has_pictures)] for scenario in scenarios}
    samples = {(scenario, arm): [] for scenario in scenarios for arm in arms[scenario]}
    for scenario in scenarios:  # a first run of each, not counted: the course's first grading, caches
        _file_again(scratch, assignment)
        _timed(_command(scenario, (), assignment, scratch, pictures), workdir)
    for round_number in range(rounds):
        order = [(scenario, arm) for scenario in scenarios for arm in arms[scenario]]
        random.shuffle(order)
        for scenario, arm in order:
            _file_again(scratch, assignment)
            samples[scenario, arm].append(_timed(_command(scenario, arm, assignment, scratch, pictures), workdir))
        log(f"round {round_number + 1}/{rounds} done")
    shares = {}
    for scenario in scenarios:
        base_wall = statistics.median(wall for wall, _ in samples[scenario, ()])
        base_cpu = statistics.median(cpu for _, cpu in samples[scenario, ()])
        log(f"\n{scenario} ({assignment}): all tricks {base_wall:.2f} s wall, {base_cpu:.2f} CPU-s (median of {rounds})")
        for arm in arms[scenario][1:]:
            wall = statistics.median(w for w, _ in samples[scenario, arm])
            cpu = statistics.median(c for _, c in samples[scenario, arm])
            share = {"wall": 1 - base_wall / wall, "cpu": 1 - base_cpu / cpu}
            shares[f"{scenario}/{'+'.join(arm)}"] = share
            log(f"  without {'+'.join(arm):<22} {wall:7.2f} s wall, {cpu:6.2f} CPU-s: the trick buys "
                f"{share['wall']:6.1%} of the wait, {share['cpu']:6.1%} of the CPU")
    (workdir / "results.json").write_text(json.dumps(shares, indent=1))
    return shares


# --------------------------------------------------------------------------- the timed process

def _without_import_hook() -> None:
    from attention_platform import third_party_patches

    sys.meta_path[:] = [finder for finder in sys.meta_path if type(finder).__name__ != "_DeferredImport"]
    third_party_patches.defer_iri_syntax = lambda: None


def _when_imported(name: str, then) -> None:
    """``then(module)`` right after ``name`` is first imported (the pictures module: imported late,
    by the grading code, which must not change when)."""
    import importlib.machinery

    class After:
        def find_spec(self, fullname, path=None, target=None):
            if fullname != name:
                return None
            sys.meta_path.remove(self)
            spec = importlib.machinery.PathFinder.find_spec(fullname, path)
            run_module = spec.loader.exec_module

            def exec_module(module):
                run_module(module)
                then(module)

            spec.loader.exec_module = exec_module
            return spec

    sys.meta_path.insert(0, After())


def _rendered_by_matplotlib(pictures):
    """The assignment's ``draw``, rendering the whole figure with matplotlib for each picture."""
    import io

    def draw(mine, expected, unscaled):
        whole = pictures._Live(expected, unscaled)
        whole._label(0, mine)
        buffer = io.BytesIO()
        whole.fig.savefig(buffer, format="png")
        return buffer.getvalue()

    return draw


def child(scenario: str, off: set[str], pictures: str, argv: list[str]) -> None:
    from attention_platform import start_up_gc

    if "import-hook" in off:
        _without_import_hook()
    if "frozen-collector" in off:
        start_up_gc.pause = lambda: None  # then resume() has nothing to undo either
    if scenario == "server-start":
        start_up_gc.pause()
        from attention_platform import third_party_patches

        third_party_patches.defer_iri_syntax()
        third_party_patches.skip_jupyterlab_registry_query()
        import importlib

        for module in SERVER_IMPORTS:
            importlib.import_module(module)
        start_up_gc.resume()
        return
    if "picture-redraw" in off:
        _when_imported(pictures, lambda module: setattr(module, "draw", _rendered_by_matplotlib(module)))
    import runpy

    sys.argv = ["attention-course", *argv]
    runpy.run_module("attention_platform.cli", run_name="__main__", alter_sys=True)  # the program, as its script runs it


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        scenario, off_list, pictures_module = sys.argv[2], sys.argv[4], sys.argv[6]
        rest = sys.argv[sys.argv.index("--") + 1:]
        child(scenario, set() if off_list == "-" else set(off_list.split(",")), pictures_module, rest)
