"""Exports as nbgrader export plug-ins: the per-check breakdown and the Canvas
gradebook CSV, from gradebooks built with nbgrader's API (the real
``nbgrader export --exporter=…`` run is in tests/reporting/test_report.py, slow)."""

from __future__ import annotations

import csv
import io

import pytest
from nbgrader.plugins import ExportPlugin

import gradebooks
from attention_platform.cli import main as cli
from attention_platform.reporting.exports import (
    CANVAS_IDENTITY, CHECK_COLUMNS, CanvasExportPlugin, CheckBreakdownExportPlugin, run_export,
)
from attention_platform.reporting.report import NOT_A_CHECK_NOTE, UNKNOWN_CHECK_NOTE
from grader_tests.self_attention.answers import ASSIGNMENT
from grader_tests.registry import ASSIGNMENTS, CHECKS, GRADE_ID_PREFIX, assignment

CLASS = {"ana": "reference_style", "bo": "no_scale", "ed": "inverted_mask", "hu": None}
NAMES = {"ana": ("Ana", "Lopez", "ana@x.test"), "bo": ("Bo", "Kim", "bo@x.test")}
RENAMED = "check_old_softmax"

# nbgrader's own add_submission warns about SQLAlchemy autoflush while we build gradebooks
pytestmark = pytest.mark.filterwarnings("ignore::sqlalchemy.exc.SAWarning")


@pytest.fixture(scope="module")
def gradebook(tmp_path_factory):
    subs = {s: gradebooks.scores_for(a) for s, a in CLASS.items()}
    subs["ana"][RENAMED] = 1.0
    cells = dict(gradebooks.CELLS, **{RENAMED: 1.0})
    path = tmp_path_factory.mktemp("exports") / "gradebook.db"
    return gradebooks.build(path, cells, subs, students=["zed"], names=NAMES), cells


def test_plugins_are_nbgrader_export_plugins():
    assert issubclass(CheckBreakdownExportPlugin, ExportPlugin) and issubclass(CanvasExportPlugin, ExportPlugin)


def test_check_breakdown_rows(gradebook, tmp_path):
    url, cells = gradebook
    summary = run_export(CheckBreakdownExportPlugin, url, to=str(tmp_path / "c.csv"), stream=io.StringIO())
    rows = list(csv.DictReader(open(tmp_path / "c.csv", newline="")))
    assert list(rows[0]) == CHECK_COLUMNS
    assert len(rows) == summary["rows"] == (len(CLASS) + 1) * len(cells)
    for student, answer in CLASS.items():
        expected = gradebooks.scores_for(answer)
        mine = {r["grade_id"]: r for r in rows if r["student_id"] == student}
        for grade_id, score in expected.items():
            r = mine[grade_id]
            assert float(r["score"]) == score and float(r["max_score"]) == cells[grade_id]
            assert r["status"] == ("passed" if score == cells[grade_id] else "failed")
            assert r["misconception"] == CHECKS[grade_id.removeprefix(GRADE_ID_PREFIX)].misconception
            assert r["check_id"] == grade_id.removeprefix(GRADE_ID_PREFIX) and r["note"] == ""
    zed = [r for r in rows if r["student_id"] == "zed"]
    assert {r["status"] for r in zed} == {"no submission"} and {r["score"] for r in zed} == {""}
    renamed = {r["student_id"]: r for r in rows if r["grade_id"] == RENAMED}
    assert renamed["ana"]["status"] == "passed" and renamed["bo"]["status"] == "not graded"
    assert renamed["ana"]["note"] == UNKNOWN_CHECK_NOTE and renamed["ana"]["check_id"] == ""
    assert summary["unknown_grade_ids"] == [RENAMED]
    n_failed = sum(1 for s, a in CLASS.items() for v in gradebooks.scores_for(a).values() if v == 0.0)
    assert summary["failed"] == n_failed
    ana = next(r for r in rows if r["student_id"] == "ana")
    assert (ana["first_name"], ana["last_name"], ana["email"]) == NAMES["ana"]


def _canvas(path):
    lines = list(csv.reader(open(path, newline="")))
    return lines[0], lines[1], {line[CANVAS_IDENTITY.index("SIS Login ID")] or line[1]: line for line in lines[2:]}


def test_canvas_csv_has_the_canvas_import_layout(gradebook, tmp_path):
    url, cells = gradebook
    summary = run_export(CanvasExportPlugin, url, to=str(tmp_path / "canvas.csv"), stream=io.StringIO())
    header, points, rows = _canvas(tmp_path / "canvas.csv")
    assert header == CANVAS_IDENTITY + [ASSIGNMENT]
    assert points[0] == "    Points Possible" and float(points[5]) == sum(cells.values())
    assert set(rows) == set(CLASS) | {"zed"}
    for student, answer in CLASS.items():
        expected = sum(gradebooks.scores_for(answer).values()) + (1.0 if student == "ana" else 0.0)
        assert float(rows[student][5]) == expected
    assert rows["zed"][5] == "0" and summary["missing_submissions"] == 1
    assert rows["ana"][0] == "Lopez, Ana" and rows["hu"][0] == "hu"  # Canvas's "Last, First"; id without a name
    assert all(row[1] == "" and row[2] == "" for row in rows.values())


def test_canvas_csv_takes_identities_from_a_canvas_roster(gradebook, tmp_path):
    url, _ = gradebook
    roster = tmp_path / "roster.csv"
    with open(roster, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(CANVAS_IDENTITY + ["Email", "Old quiz (11)"])
        w.writerow(["    Points Possible", "", "", "", "", "", "10"])
        w.writerow(["Lopez, Ana", "901", "S-1", "ana@x.test", "DL 01", "ana@x.test", "7"])
        w.writerow(["Kim, Bo", "902", "S-2", "bo", "DL 02", "", "8"])
    summary = run_export(CanvasExportPlugin, url, to=str(tmp_path / "canvas.csv"), stream=io.StringIO(),
                         roster=str(roster), assignment_header="{name} (4711)")
    lines = list(csv.reader(open(tmp_path / "canvas.csv", newline="")))
    assert lines[0][-1] == f"{ASSIGNMENT} (4711)"
    by_id = {line[1]: line for line in lines[2:] if line[1]}
    assert by_id["901"][:5] == ["Lopez, Ana", "901", "S-1", "ana@x.test", "DL 01"]  # matched by email
    assert by_id["902"][:5] == ["Kim, Bo", "902", "S-2", "bo", "DL 02"]  # matched by SIS Login ID
    assert sorted(summary["unmatched_in_roster"]) == ["ed", "hu", "zed"]


def test_export_cli_selects_and_summarises(gradebook, tmp_path, capsys):
    url, _ = gradebook
    out = tmp_path / "c.csv"
    assert cli(["export-checks", ASSIGNMENT, "--db-url", url, "--to", str(out), "--student", "bo"]) == 0
    printed = capsys.readouterr()
    assert "exporting self_attention checks" in printed.err and "1/1" in printed.err
    assert f"written to   {out.resolve()}" in printed.out and "students     1" in printed.out
    assert {r["student_id"] for r in csv.DictReader(open(out))} == {"bo"}
    assert cli(["export-canvas", "--db-url", url, "--to", str(tmp_path / "k.csv"), "--id-column", "SIS User ID"]) == 0
    lines = list(csv.reader(open(tmp_path / "k.csv")))
    assert {line[2] for line in lines[2:]} == set(CLASS) | {"zed"}
    assert "missing submission(s) exported as 0" in capsys.readouterr().out


def test_empty_gradebook_and_unknown_assignment_export_cleanly(tmp_path, capsys):
    url = gradebooks.empty(tmp_path / "gb.db")
    assert cli(["export-canvas", "--db-url", url, "--to", str(tmp_path / "k.csv")]) == 0
    printed = capsys.readouterr()
    assert "header only" in printed.out and "Traceback" not in printed.err
    assert list(csv.reader(open(tmp_path / "k.csv")))[0] == CANVAS_IDENTITY
    assert cli(["export-checks", "week9", "--db-url", url, "--to", str(tmp_path / "c.csv")]) == 0
    printed = capsys.readouterr()
    assert "not in the gradebook, skipped: week9" in printed.err and "Traceback" not in printed.err
    assert cli(["export-checks", "--db-url", "sqlite:///" + str(tmp_path / "none.db")]) == 1
    assert "no gradebook at" in capsys.readouterr().err


@pytest.mark.parametrize("name", sorted(ASSIGNMENTS))
def test_each_assignments_breakdown_names_its_own_misconceptions(tmp_path, name):
    checks = assignment(name).checks
    url = gradebooks.build_assignment(tmp_path / "gb.db", name, {"ana": {checks[0].id}})
    run_export(CheckBreakdownExportPlugin, url, to=str(tmp_path / "c.csv"), stream=io.StringIO())
    rows = list(csv.DictReader(open(tmp_path / "c.csv", newline="")))
    assert sorted((r["check_id"], r["misconception"], r["note"]) for r in rows) == \
        sorted((c.id, c.misconception, "") for c in checks)
    assert [r["check_id"] for r in rows if r["status"] == "failed"] == [checks[0].id]


def test_written_answers_are_no_renamed_checks_and_a_renamed_check_says_what_to_do(tmp_path):
    """A written answer (a graded cell that is no hidden check) is exported quietly; only a check the
    registry no longer knows is reported, with what to do about it."""
    written = "sqrt_answer"
    cells = dict(gradebooks.CELLS, **{written: 2.0, RENAMED: 1.0})
    url = gradebooks.build(tmp_path / "gb.db", cells, {"ana": dict(gradebooks.scores_for("reference_style"),
                                                                   **{written: None, RENAMED: 1.0})})
    log = io.StringIO()
    summary = run_export(CheckBreakdownExportPlugin, url, to=str(tmp_path / "c.csv"), stream=log)
    assert summary["unknown_grade_ids"] == [RENAMED]
    warnings = [line for line in log.getvalue().splitlines() if line.startswith("WARNING")]
    assert len(warnings) == 1 and RENAMED in warnings[0] and written not in warnings[0]
    assert "grader_tests/" in warnings[0]  # where to look: the registry the checks are named in
    rows = {r["grade_id"]: r for r in csv.DictReader(open(tmp_path / "c.csv", newline=""))}
    assert rows[written]["status"] == "not graded" and rows[written]["note"] == NOT_A_CHECK_NOTE


def test_the_breakdown_names_each_students_variant(gradebook, tmp_path):
    """With the assignment's variants on, each row names the student's variant (what the feedback page
    shows them); a student graded on the release's numbers has none."""
    from attention_platform.course import variants

    url, _ = gradebook
    course = tmp_path / "course"
    course.mkdir()
    run_export(CheckBreakdownExportPlugin, url, to=str(tmp_path / "off.csv"), stream=io.StringIO(),
               course_root=str(course))
    assert {r["variant"] for r in csv.DictReader(open(tmp_path / "off.csv", newline=""))} == {""}
    variants.switch(course, ASSIGNMENT, True)
    run_export(CheckBreakdownExportPlugin, url, to=str(tmp_path / "on.csv"), stream=io.StringIO(),
               course_root=str(course))
    rows = list(csv.DictReader(open(tmp_path / "on.csv", newline="")))
    shown = {r["student_id"]: r["variant"] for r in rows}
    assert shown == {student: variants.variant_id(course, ASSIGNMENT, student) for student in shown}
    assert len(set(shown.values())) == len(shown) and all(len(v) == 8 for v in shown.values())
