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
