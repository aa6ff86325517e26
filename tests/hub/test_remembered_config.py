"""The Assignments tab's nbgrader configuration is loaded again only when one of its files changed
(``attention_platform.lab.remembered_config``), on nbgrader's own ``AssignmentList``."""

from __future__ import annotations

import os

import pytest
from nbgrader.server_extensions.assignment_list.handlers import AssignmentList

from attention_platform.lab import remembered_config


@pytest.fixture
def student(tmp_path, monkeypatch):
    """A student's server as nbgrader's assignment list sees it: a home (the server's root folder,
    the assignments' folder) and a config folder on JUPYTER_CONFIG_PATH, whose config file counts
    its own runs into ``runs.log``."""
    home, config_dir = tmp_path / "home", tmp_path / "config"
    home.mkdir(), config_dir.mkdir()
    monkeypatch.setenv("JUPYTER_CONFIG_PATH", str(config_dir))
    monkeypatch.setenv("JUPYTER_CONFIG_DIR", str(tmp_path / "user-config"))
    monkeypatch.chdir(home)  # where Jupyter Server runs
    write_config(config_dir, "course-a")
    return home, config_dir


def write_config(folder, course: str, extra: str = "") -> None:
    path = folder / "nbgrader_config.py"
    path.write_text(
        f"c = get_config()\nc.CourseDirectory.course_id = {course!r}\n{extra}"
        f"open({str(folder.parent / 'runs.log')!r}, 'a').write('run\\n')\n")
    stamp = path.stat().st_mtime_ns + 1_000_000_000  # a new time even on a coarse file-system clock
    os.utime(path, ns=(stamp, stamp))


def runs(student) -> int:
    log = student[1].parent / "runs.log"
    return len(log.read_text().splitlines()) if log.exists() else 0


def manager(home, remembered: bool) -> AssignmentList:
    lister = AssignmentList()
    lister.root_dir = str(home)
    if remembered:
        remembered_config.remember(lister)
    return lister


def course_seen(lister) -> tuple[dict, dict]:
    """The ``CourseDirectory`` settings of the manager's ``load_config`` and of its
    ``get_assignment_dir_config``."""
    with lister.get_assignment_dir_config() as config:
        in_assignment_folder = dict(config.CourseDirectory)
    return dict(lister.load_config().CourseDirectory), in_assignment_folder


A = ({"course_id": "course-a"}, {"course_id": "course-a"})


def test_remembered_loads_give_what_nbgraders_own_loads_give(student):
    home, _ = student
    assert course_seen(manager(home, remembered=True)) == course_seen(manager(home, remembered=False)) == A


def test_a_config_file_runs_once_however_often_the_tab_asks(student):
    lister = manager(student[0], remembered=True)
    before = runs(student)
    for _ in range(5):
        course_seen(lister)
    # two loads asked five times: the server's and the assignments' folder's (the same home), once each
    assert runs(student) - before == 2


def test_nbgraders_own_manager_runs_it_at_every_load(student):
    lister = manager(student[0], remembered=False)
    before = runs(student)
    for _ in range(5):
        course_seen(lister)
    assert runs(student) - before == 5 * 3  # the check above can fail: it counts what this one counts


@pytest.mark.parametrize("change", ["the config file rewritten", "a config file added in the home",
                                    "the config file removed"])
def test_a_changed_config_file_is_loaded_again(student, change):
    home, config_dir = student
    lister = manager(home, remembered=True)
    assert course_seen(lister) == A
    if change == "the config file rewritten":
        write_config(config_dir, "course-b")
    elif change == "a config file added in the home":
        write_config(home, "course-a", extra="c.CourseDirectory.assignment_id = 'from-the-home'\n")
    else:
        (config_dir / "nbgrader_config.py").unlink()
    now = course_seen(manager(home, remembered=False))  # what nbgrader's own loads give now
    assert now != A
    assert course_seen(lister) == now


def test_each_caller_gets_a_config_of_its_own(student):
    lister = manager(student[0], remembered=True)
    first = lister.load_config()
    first.CourseDirectory.assignment_id = "changed by its caller"  # as nbgrader's submit does
    assert "assignment_id" not in lister.load_config().CourseDirectory


def test_the_working_folder_is_restored_when_an_action_fails(student):
    lister = manager(student[0], remembered=True)
    before = os.getcwd()
    with pytest.raises(RuntimeError):
        with lister.get_assignment_dir_config():
            raise RuntimeError("the action failed")
    assert os.getcwd() == before


def test_remembered_loads_are_bounded(student, monkeypatch):
    monkeypatch.setattr(remembered_config, "MOST_REMEMBERED", 2)
    loads = remembered_config.RememberedLoads()
    for index in range(5):
        folder = student[1].parent / f"folder-{index}"
        folder.mkdir()
        loads.load("server", [str(folder)], dict)
    assert len(loads._kept) == 2
