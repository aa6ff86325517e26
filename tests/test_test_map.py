"""The tests mirror the packages: a folder of tests per package of attention_platform/, and
conftest.py's map names every test file in the folder it is in, and nothing else."""

import re
from pathlib import Path

TESTS = Path(__file__).resolve().parent
PACKAGES = TESTS.parent / "attention_platform"
NOT_PACKAGES = {"deploy", "e2e"}  # the deployments and the browser walk-through span every package
DATA = {"cheats", "z2jh"}  # the cheat catalogue and golden files, no test files of their own
# Packages whose tests start the same live hub or grader as another package's and stay in that folder
TESTED_IN_ANOTHER_FOLDER = {"lab": "hub", "exchange": "hub", "formgrader": "hub", "attempts": "feedback_on_submit",
                            "benchmarks": "hub"}


def conftest_map() -> dict[str, set[str]]:
    """{folder ("" for tests/ itself): test file stems} from conftest.py's docstring."""
    doc = (TESTS / "conftest.py").read_text().split('"""')[1]
    sections = re.split(r"^- ", doc.split("Where each part's tests are", 1)[1], flags=re.M)[1:]
    mapped = {}
    for section in sections:
        folder = re.match(r"(\w+)/", section)
        mapped[folder.group(1) if folder else ""] = set(re.findall(r"\btest_\w+", section))
    return mapped


def files_on_disk() -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for path in TESTS.rglob("test_*.py"):
        rel = path.relative_to(TESTS)
        if DATA & set(rel.parts):
            continue
        found.setdefault("" if len(rel.parts) == 1 else rel.parts[0], set()).add(path.stem)
    return found


def test_every_test_file_is_in_the_folder_the_map_says():
    assert conftest_map() == files_on_disk()


def test_each_test_folder_mirrors_a_package():
    folders = {p.name for p in TESTS.iterdir() if p.is_dir() and not p.name.startswith((".", "_"))}
    packages = {p.name for p in PACKAGES.iterdir() if (p / "__init__.py").exists()}
    assert folders - DATA - NOT_PACKAGES <= packages, sorted(folders - DATA - NOT_PACKAGES - packages)
    untested = packages - folders - set(TESTED_IN_ANOTHER_FOLDER)
    assert not untested, f"packages without a test folder: {sorted(untested)}"
    assert set(TESTED_IN_ANOTHER_FOLDER.values()) <= folders


REPORTS_WHERE_EACH_RAN = '''
import json, os

ran = {}

def pytest_runtest_logreport(report):
    node = getattr(report, "node", None)
    if node is not None and report.when == "setup":
        ran[report.nodeid] = node.gateway.id

def pytest_sessionfinish(session):
    with open(os.environ["WHERE_EACH_RAN"], "w") as out:
        json.dump(ran, out)
'''


def test_two_workers_keep_each_group_of_tests_on_one_worker(tmp_path):
    """``make test TEST_WORKERS=2``: conftest.py's groups reach pytest-xdist's scheduler, so every test of a
    group runs on one worker (a pytest whose node ids pytest-xdist cannot tag spreads them test by test,
    and two workers start the same hub at once). Planned only (--setup-plan): no hub starts."""
    import json
    import os
    import subprocess
    import sys

    (tmp_path / "where_each_ran.py").write_text(REPORTS_WHERE_EACH_RAN)
    files = ["tests/hub/test_formgrader_gate.py", "tests/feedback_on_submit/test_feedback_on_submit_hub.py",
             "tests/test_lockfile.py"]
    done = subprocess.run([sys.executable, "-m", "pytest", "-n", "2", "--dist", "loadgroup", "--setup-plan", "-q",
                           "-p", "no:cacheprovider", "-p", "where_each_ran", *files], cwd=TESTS.parent,
                          env=dict(os.environ, PYTHONPATH=str(tmp_path), WHERE_EACH_RAN=str(tmp_path / "ran.json")),
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    ran = json.loads((tmp_path / "ran.json").read_text())
    machine = {worker for nodeid, worker in ran.items() if nodeid.endswith("@machine")}
    hub_tests = [nodeid for nodeid in ran if "_hub.py" in nodeid or "formgrader_gate.py::test_each_role" in nodeid]
    assert len(hub_tests) > 20 and all(nodeid.endswith("@machine") for nodeid in hub_tests), hub_tests[:3]
    assert len(machine) == 1, f"the machine group ran on {sorted(machine)}"
