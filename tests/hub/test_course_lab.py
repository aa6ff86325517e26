"""The course's side of a hub user's JupyterLab (attention_platform/lab/course_lab.py): what each
role's Lab hides and links to, and nbgrader's assignment list tidied for people."""

from __future__ import annotations

import json

import pytest

from attention_platform.hub import native
from attention_platform.lab import course_lab
from grader_tests.registry import ASSIGNMENTS, assignment


class FakeHandler:  # only what the hook reads of a request handler
    def __init__(self, root):
        self.settings = {"server_root_dir": str(root)}


@pytest.mark.parametrize("role, hidden, shown", [
    ("student", {"@jupyter/nbgrader:menu", "@jupyter/nbgrader:create-assignment", "@jupyter/nbgrader:course-list"},
     {"@jupyter/nbgrader:assignment-list"}),
    ("ta", {"@jupyter/nbgrader:menu", "@jupyter/nbgrader:create-assignment", "@jupyter/nbgrader:assignment-list"}, set()),
    ("instructor", {"@jupyter/nbgrader:menu", "@jupyter/nbgrader:assignment-list"}, {"@jupyter/nbgrader:create-assignment"}),
])
def test_each_role_sees_its_own_tools(monkeypatch, tmp_path, role, hidden, shown):
    monkeypatch.setenv("ATTENTION_COURSE_ROLE", role)
    monkeypatch.setenv("JUPYTERHUB_BASE_URL", "/")
    (tmp_path / "course-source").mkdir()
    config = course_lab.page_config_hook(FakeHandler(tmp_path), {"disabledExtensions": ["some:plugin"]})
    disabled = set(config["disabledExtensions"])
    assert hidden <= disabled and not (shown & disabled) and "some:plugin" in disabled
    info = config["attentionCourse"]
    assert info["role"] == role
    assert info["formgraderUrl"] == ("" if role == "student" else "/services/dl-attention/formgrader")
    assert info["courseSource"] == ("course-source" if role == "instructor" else "")
    assert info["notebookOrder"] == {}  # the hub said no order (below: the order it says)


def test_an_unknown_role_is_a_student(monkeypatch, tmp_path):
    monkeypatch.setenv("ATTENTION_COURSE_ROLE", "admin")
    assert course_lab.page_config_hook(FakeHandler(tmp_path), {})["attentionCourse"]["role"] == "student"


def test_the_assignment_list_puts_part_one_first_and_times_to_the_second():
    listing = {"success": True, "value": [{
        "assignment_id": "self_attention", "status": "submitted",
        "notebooks": [{"notebook_id": n} for n in ("02_by_hand", "06_explain", "self_attention", "03_head_and_bias")],
        "submissions": [{"timestamp": "2026-11-23 18:25:17.480123 UTC"}, {"timestamp": "odd"}],
    }]}
    tidy = course_lab.tidy_listing(json.loads(json.dumps(listing)))["value"][0]
    assert [n["notebook_id"] for n in tidy["notebooks"]] == ["self_attention", "02_by_hand", "03_head_and_bias", "06_explain"]
    assert [s["timestamp"] for s in tidy["submissions"]] == ["2026-11-23 18:25:17 UTC", "odd"]
    assert tidy["submissions"][0]["exact_timestamp"] == "2026-11-23 18:25:17.480123 UTC"  # for tools
    assert course_lab.tidy_listing({"success": False, "value": "boom"}) == {"success": False, "value": "boom"}


@pytest.mark.parametrize("name", sorted(ASSIGNMENTS))
def test_each_assignment_is_listed_in_its_own_order(monkeypatch, name):
    """The order the native launcher hands the hub (from the registry) sorts the Lab's listing of
    every assignment; the student's server never reads the hidden checks to know it."""
    monkeypatch.setenv("ATTENTION_NOTEBOOK_ORDER", native.notebook_order_setting())
    expected = list(assignment(name).notebooks)
    listing = {"success": True, "value": [{"assignment_id": name, "status": "released",
                                           "notebooks": [{"notebook_id": n} for n in sorted(expected, reverse=True)]}]}
    tidy = course_lab.tidy_listing(listing)["value"][0]
    assert [n["notebook_id"] for n in tidy["notebooks"]] == expected
    assert course_lab.page_config_hook(FakeHandler("/nowhere"), {})["attentionCourse"]["notebookOrder"][name] == expected


def test_any_assignment_is_listed_in_the_order_the_hub_says(monkeypatch):
    monkeypatch.setenv("ATTENTION_NOTEBOOK_ORDER", json.dumps({"week_two": ["intro", "attention", "explain"]}))
    listing = {"success": True, "value": [
        {"assignment_id": "week_two", "notebooks": [{"notebook_id": n} for n in ("explain", "extra", "attention", "intro")]},
        # an assignment the hub said nothing about: its own notebook first, then by name
        {"assignment_id": "week_three", "notebooks": [{"notebook_id": n} for n in ("b", "week_three", "a")]}]}
    tidy = course_lab.tidy_listing(listing)["value"]
    assert [n["notebook_id"] for n in tidy[0]["notebooks"]] == ["intro", "attention", "explain", "extra"]
    assert [n["notebook_id"] for n in tidy[1]["notebooks"]] == ["week_three", "a", "b"]


def test_the_lab_extension_is_where_jupyterlab_looks_for_it():
    package = json.loads((course_lab.LAB_EXTENSION_DIR / "attention-course-lab" / "package.json").read_text())
    assert package["name"] == "attention-course-lab"
    assert (course_lab.LAB_EXTENSION_DIR / package["name"] / package["jupyterlab"]["_build"]["load"]).is_file()


def test_the_page_config_hook_runs_after_another_extensions():
    class App:
        settings = {"page_config_hook": lambda handler, config: {**config, "hubPrefix": "/hub/"}}

    course_lab._chain_page_config_hook(App)
    course_lab._chain_page_config_hook(App)  # once only
    config = App.settings["page_config_hook"](FakeHandler("/nowhere"), {})
    assert config["hubPrefix"] == "/hub/" and config["attentionCourse"]["role"] == "student"
