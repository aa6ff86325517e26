"""Instructors edit source/ in their own JupyterLab; TAs and students cannot reach it.

The formgrader serves no files and no editor, so an instructor's own server is where
the course's instructor notebooks are edited: the hub links ~/course-source to the
course's source/ for members of instructors-<course> (and only for them), their Unix
account joins the instructors' group, and the formgrader's Generate (run by the grader
account) reads what they wrote.
"""

from __future__ import annotations

import os
import pwd
import subprocess
import sys

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.hub, pytest.mark.root,
              pytest.mark.skipif(os.geteuid() != 0, reason="the hub's real Unix users need root (CI is root)")]

ASSIGNMENT = "self_attention"
SOURCE_NOTEBOOK = f"course-source/{ASSIGNMENT}/{ASSIGNMENT}.ipynb"


def as_user(user: str, code: str) -> subprocess.CompletedProcess:
    entry = pwd.getpwnam(user)
    return subprocess.run([sys.executable, "-c", code], user=entry.pw_uid, group=entry.pw_gid,
                          extra_groups=os.getgrouplist(user, entry.pw_gid), capture_output=True, text=True,
                          timeout=60, env={"PATH": "/usr/bin:/bin"})


def test_an_instructor_edits_source_in_their_own_lab_and_generates(security_hub):
    prof = security_hub.session("instructor")
    prof.spawn()
    opened = prof.contents(SOURCE_NOTEBOOK)
    assert opened.status_code == 200, opened.text[:300]
    notebook = opened.json()["content"]
    notebook["cells"][0]["source"] += "\n\nEdited by the instructor in their own JupyterLab."
    prof.save_notebook(SOURCE_NOTEBOOK, notebook)
    generated = prof.formgrader("POST", f"assignment/{ASSIGNMENT}/assign").json()
    assert generated["success"], generated
    release = security_hub.state / "course" / "release" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"
    assert "Edited by the instructor in their own JupyterLab." in release.read_text()


@pytest.mark.parametrize("user", ["ta", "student1"])
def test_others_get_no_link_and_no_way_in(security_hub, user):
    session = security_hub.session(user)
    session.spawn()
    assert session.contents(SOURCE_NOTEBOOK).status_code == 404
    source = security_hub.state / "course" / "source" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"
    peek = as_user(user, f"open({str(source)!r}).read()")
    assert "PermissionError" in peek.stderr, (peek.stdout[:200], peek.stderr[-300:])


def test_the_hubs_link_leaves_a_users_own_files_alone(tmp_path):
    """The hub writes the link inside the user's home as root, through a descriptor: a
    folder of the user's own with that name is left alone, only a link is replaced."""
    from attention_platform.hub.accounts import place_link

    home = tmp_path / "home"
    home.mkdir()
    (home / "course-source").mkdir()
    (home / "course-source" / "mine.txt").write_text("the student's own folder")
    place_link(home, "course-source", "/etc")
    assert (home / "course-source" / "mine.txt").read_text() == "the student's own folder"
    (home / "course-source" / "mine.txt").unlink()
    (home / "course-source").rmdir()
    (home / "course-source").symlink_to(tmp_path / "elsewhere")
    place_link(home, "course-source", None)
    assert not os.path.lexists(home / "course-source")
