"""The misconception report, asserted from the data (the gradebook, the catalogue's
exact fail sets), never from pixels.

Fast tests build gradebooks with nbgrader's Gradebook API (tests/gradebooks.py);
the slow one grades the end-to-end test's class with a real ``nbgrader autograde``
and checks the report's counts, and the exports through ``nbgrader export
--exporter=…``, against the catalogue."""

from __future__ import annotations

import base64
import csv
import io
import json
import statistics
from html.parser import HTMLParser
from pathlib import Path

import pytest

import gradebooks
from e2e_class import CHEATER_FAILS, HONEST, TAMPERED_FAILS, UNREADABLE, graded_copy
from attention_platform.cli import main as cli
from attention_platform.course.directory import check_scores, nbgrader
from attention_platform.reporting.report import (
    FAILED_EVERYTHING, UNKNOWN_CHECK_NOTE, collect, read_report_data, summary_text, write_report,
)
from grader_tests.self_attention.answers import ASSIGNMENT, NOTEBOOK
from grader_tests.registry import ASSIGNMENTS, CHECKS, GRADE_ID_PREFIX, assignment

NOTEBOOK_CHECKS = assignment("self_attention").notebook_checks

SA_CHECKS = NOTEBOOK_CHECKS["self_attention"]
SA_IDS = [GRADE_ID_PREFIX + c.id for c in SA_CHECKS]
SA_MAX = sum(c.points for c in SA_CHECKS)
LABEL = {GRADE_ID_PREFIX + c.id: c.misconception for c in SA_CHECKS}

# a class of catalogue answers (student -> answer; None = release untouched)
CLASS = {"ana": "reference_style", "bo": "no_scale", "cy": "scale_by_d", "di": "softmax_over_queries",
         "ed": "inverted_mask", "fa": "mask_after_softmax", "gu": "einsum", "hu": None}

# nbgrader's own add_submission warns about SQLAlchemy autoflush while we build gradebooks
pytestmark = pytest.mark.filterwarnings("ignore::sqlalchemy.exc.SAWarning")


class Tables(HTMLParser):
    """Rows (cell texts) of every <table id=…> in the page, and <img id=…> sources."""

    def __init__(self):
        super().__init__()
        self.tables, self.images, self._table, self._row, self._cell = {}, {}, None, None, None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "table":
            self._table = self.tables.setdefault(attrs.get("id"), [])
        elif tag == "tr" and self._table is not None:
            self._row = []
        elif tag in ("td", "th") and self._row is not None:
            self._cell = []
        elif tag == "img":
            self.images[attrs.get("id")] = attrs.get("src", "")

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None:
            self._row.append("".join(self._cell).strip())
            self._cell = None
        elif tag == "tr" and self._row is not None:
            self._table.append(self._row)
            self._row = None
        elif tag == "table":
            self._table = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)


def parse(page: str) -> Tables:
    t = Tables()
    t.feed(page)
    return t


def expected_failures(answer: str | None) -> set[str]:
    return {g for g, s in gradebooks.scores_for(answer).items() if s == 0.0}


def assert_pngs(tables: Tables, ids=("histogram", "fail-shares")):
    for name in ids:
        src = tables.images[name]
        assert src.startswith("data:image/png;base64,")
        assert base64.b64decode(src.split(",", 1)[1])[:8] == b"\x89PNG\r\n\x1a\n"


# ---------------------------------------------------------------- fast: built gradebooks

@pytest.fixture(scope="module")
def built(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("built")
    subs = {s: gradebooks.scores_for(a) for s, a in CLASS.items()}
    for student in subs:  # a check renamed since grading: bo and hu failed it
        subs[student]["check_softmax_over_last_dim"] = 0.0 if student in ("bo", "hu") else 1.0
    cells = dict(gradebooks.CELLS, check_softmax_over_last_dim=1.0)
    url = gradebooks.build(tmp_path / "gradebook.db", cells, subs, students=["zed"],  # zed: no submission
                           names={"ana": ("Ana", "Lopez", "ana@x.test")})
    return url, tmp_path


def test_counts_labels_and_followups_come_from_the_gradebook(built):
    url, _ = built
    data = collect(url, ASSIGNMENT, stream=io.StringIO())
    fails = {s: expected_failures(a) for s, a in CLASS.items()}
    fails["bo"].add("check_softmax_over_last_dim")
    # hu handed in the release untouched: every check failed, none of them a misconception
    fails["hu"] = set()
    by_id = {c.grade_id: c for c in data.checks}
    for grade_id in SA_IDS:
        assert sorted(by_id[grade_id].failed) == sorted(s for s in CLASS if grade_id in fails[s]), grade_id
        assert by_id[grade_id].not_attempted == ["hu"] and by_id[grade_id].did_not_run == []
        assert by_id[grade_id].graded == len(CLASS) - 1
        assert by_id[grade_id].label == CHECKS[grade_id.removeprefix(GRADE_ID_PREFIX)].misconception
    renamed = by_id["check_softmax_over_last_dim"]
    assert not renamed.known and renamed.label == "check_softmax_over_last_dim" and renamed.failed == ["bo"]
    assert renamed.not_attempted == ["hu"]
    assert any(n.startswith("check_softmax_over_last_dim: " + UNKNOWN_CHECK_NOTE) for n in data.notes)

    rows = {r.student_id: r for r in data.students}
    assert rows["zed"].status == "no submission" and rows["zed"].score is None
    for s in CLASS:
        assert rows[s].status == "graded" and set(rows[s].failed) == fails[s]
    assert rows["hu"].not_attempted == [gradebooks.NB] and any(n.startswith("hu: self_attention not attempted")
                                                                for n in data.notes)
    assert rows["ana"].name == "Ana Lopez"
    # follow-ups: every student who failed a check is listed under its topic; the one who handed in
    # nothing is under none (not attempted is not a misconception)
    assert data.failed_everything == []
    topics = {label: who for label, _, who in data.topics()}
    for grade_id in SA_IDS:
        who = sorted(s for s in CLASS if grade_id in fails[s] and s != "hu")
        assert topics.get(LABEL[grade_id], []) == who, grade_id


def test_html_is_self_contained_and_shows_the_numbers(built, tmp_path):
    url, _ = built
    out = tmp_path / "report.html"
    data = write_report(url, ASSIGNMENT, out, stream=io.StringIO())
    page = out.read_text()
    assert "http://" not in page and "https://" not in page, "no external resources"
    t = parse(page)
    assert_pngs(t)
    checks = {row[1]: row for row in t.tables["checks"][1:]}
    for grade_id in SA_IDS:
        c = next(c for c in data.checks if c.grade_id == grade_id)
        assert checks[grade_id][0] == LABEL[grade_id]
        assert checks[grade_id][3] == str(len(c.failed)) and checks[grade_id][4] == str(len(CLASS) - 1)
        assert checks[grade_id][8] == "hu" and checks[grade_id][9] == ""
    assert "check_softmax_over_last_dim" in checks["check_softmax_over_last_dim"][0]
    assert UNKNOWN_CHECK_NOTE in checks["check_softmax_over_last_dim"][0]
    students = {row[0]: row for row in t.tables["students"][1:]}
    assert set(students) == set(CLASS) | {"zed"}
    assert students["zed"][1] == "no submission"
    total = SA_MAX + 1
    for s, a in CLASS.items():
        expected = sum(gradebooks.scores_for(a).values()) + (0.0 if s in ("bo", "hu") else 1.0)
        assert students[s][2] == f"{expected:g} / {total:g}"
    topics = {row[0]: row[1] for row in t.tables["topics"][1:]}
    assert FAILED_EVERYTHING not in topics and "hu" not in " ".join(topics.values())
    assert "not attempted: self_attention" in students["hu"][1]
    assert topics[LABEL["check_sqrt_d_scale"]] == "bo, cy"
    # the embedded numbers agree with the data
    embedded = read_report_data(out)
    assert embedded["summary"] == json.loads(json.dumps(data.summary_numbers()))
    scores = [sum(gradebooks.scores_for(a).values()) + (0.0 if s in ("bo", "hu") else 1.0) for s, a in CLASS.items()]
    assert embedded["summary"]["mean"] == round(statistics.fmean(scores), 3)
    assert embedded["summary"]["graded"] == len(CLASS) and embedded["summary"]["no_submission"] == 1


def test_empty_gradebook_gives_an_explicit_empty_report(tmp_path, capsys):
    from nbgrader.api import Gradebook

    url = gradebooks.empty(tmp_path / "gradebook.db")
    out = tmp_path / "r.html"
    assert cli(["report", ASSIGNMENT, "--db-url", url, "--out", str(out)]) == 0
    printed = capsys.readouterr()
    assert "Traceback" not in printed.err + printed.out
    assert "gradebook is empty" in printed.err.lower() + printed.out.lower()
    data = read_report_data(out)
    assert data["summary"]["students"] == 0 and data["checks"] == [] and data["students"] == []
    assert "empty" in data["notes"][0].lower()
    with Gradebook(url) as gb:
        assert gb.assignments == []


def test_assignment_without_submissions_and_student_without_submission(tmp_path, capsys):
    url = gradebooks.build(tmp_path / "gb.db", gradebooks.CELLS, {}, students=["ana", "bo"])
    out = tmp_path / "r.html"
    assert cli(["report", ASSIGNMENT, "--db-url", url, "--out", str(out)]) == 0
    printed = capsys.readouterr()
    assert "Traceback" not in printed.err
    assert "2 without a submission" in printed.out
    t = parse(out.read_text())
    assert "No graded submissions" in out.read_text()
    assert [row[:2] for row in t.tables["students"][1:]] == [["ana", "no submission"], ["bo", "no submission"]]
    assert "histogram" not in t.images


def test_missing_gradebook_and_unknown_assignment_are_one_line_errors(tmp_path, capsys):
    missing = tmp_path / "nowhere" / "gradebook.db"
    assert cli(["report", ASSIGNMENT, "--db-url", "sqlite:///" + str(missing)]) == 1
    err = capsys.readouterr().err
    assert "no gradebook at" in err and "Traceback" not in err
    assert not missing.exists(), "reading must not create a gradebook"
    url = gradebooks.build(tmp_path / "gb.db", gradebooks.CELLS, {"ana": gradebooks.scores_for(None)})
    with pytest.raises(SystemExit) as usage:  # an assignment the course lacks: named with the ones it has
        cli(["report", "week9", "--db-url", url, "--out", str(tmp_path / "x.html")])
    err = capsys.readouterr().err
    assert usage.value.code == 2 and "'week9'" in err and ASSIGNMENT in err and "Traceback" not in err


@pytest.mark.parametrize("name", sorted(ASSIGNMENTS))
def test_a_report_for_each_assignment_counts_its_own_checks_in_its_order(tmp_path, name):
    checks = assignment(name).checks
    first = checks[0].id
    url = gradebooks.build_assignment(tmp_path / "gb.db", name, {"ana": {first}, "bo": set()})
    data = collect(url, name, stream=io.StringIO())
    assert [c.grade_id for c in data.checks] == [GRADE_ID_PREFIX + c.id for c in checks]
    assert [(c.label, c.title, c.notebook) for c in data.checks] == [(c.misconception, c.title, c.notebook) for c in checks]
    assert data.checks[0].failed == ["ana"] and data.checks[0].passed == ["bo"]
    # another assignment's checks are no part of this one's report
    assert not [note for note in data.notes if "of the registry" in note], data.notes


def test_an_assignment_without_hidden_checks_is_reported_by_its_grade_ids(tmp_path):
    cells = {"check_own_idea": 2.0, "check_next_idea": 1.0}
    url = gradebooks.build(tmp_path / "gb.db", cells, {"ana": {"check_own_idea": 0.0, "check_next_idea": 1.0}},
                           assignment="week_two")
    data = collect(url, "week_two", stream=io.StringIO())
    assert [(c.grade_id, c.known, c.failed) for c in data.checks] == [("check_next_idea", False, []),
                                                                       ("check_own_idea", False, ["ana"])]
    assert not [note for note in data.notes if "of the registry" in note], data.notes


def test_summary_fits_one_screen(built):
    url, _ = built
    text = summary_text(collect(url, ASSIGNMENT, stream=io.StringIO()), Path("r.html"))
    assert len(text.splitlines()) <= 24 and all(len(line) <= 120 for line in text.splitlines())
    assert f"{len(CLASS)} graded, 1 without a submission" in text


# ---------------------------------------------------------------- slow: a real nbgrader autograde

@pytest.fixture(scope="module")
def e2e_class(autograded_e2e_class, tmp_path_factory):
    """The end-to-end test's class (tests/e2e_class.py), graded by a real ``nbgrader autograde``."""
    course, _ = graded_copy(autograded_e2e_class, tmp_path_factory.mktemp("report") / "course")
    expected = {s: set(gradebooks.ANSWERS[a].fails) for s, a in HONEST.items()}
    expected.update(empty={c.id for c in SA_CHECKS}, tampered=TAMPERED_FAILS, cheater=CHEATER_FAILS)
    # a submission nbgrader could not grade has no autograded notebook: the report must say "not graded";
    # one it graded (even with every cell restored) fails every check
    for student in UNREADABLE:
        if (course / "autograded" / student / ASSIGNMENT / NOTEBOOK).exists():
            expected[student] = {c.id for c in SA_CHECKS}
    return course, expected


def left_as_released(expected: dict) -> set[str]:
    """Students whose every check failed because nothing was written (the release untouched, or
    restored from it): not attempted, never a misconception."""
    return {s for s in expected if s == "empty" or s in UNREADABLE}


@pytest.mark.slow
@pytest.mark.root
def test_report_for_the_e2e_class_has_the_catalogue_counts(e2e_class, capsys):
    course, expected = e2e_class
    out = course / "build" / "report.html"
    assert cli(["report", ASSIGNMENT, "--course", str(course), "--out", str(out)]) == 0
    printed = capsys.readouterr()
    assert "reading self_attention submissions" in printed.err, "progress is shown"
    assert f"written to   {out.resolve()}" in printed.out
    data = read_report_data(out)
    students = {s["student_id"]: s for s in data["students"]}
    assert set(students) == set(expected) | {"notjson", "nocells"}
    gb_scores = check_scores(course, assignment=ASSIGNMENT, notebook=NOTEBOOK)  # self_attention.ipynb's grades
    blank = left_as_released(expected)
    for s, row in students.items():
        mine = {g for g in row["failed"] if g in SA_IDS}
        if s in blank:  # nothing written: not attempted, no misconception
            assert mine == set() and row["not_attempted"] == [NOTEBOOK.removesuffix(".ipynb")], s
        elif s in expected:  # autograded: exactly the catalogue's fail set
            assert mine == {GRADE_ID_PREFIX + c for c in expected[s]}, s
            assert row["status"] in ("graded", "partly graded")
        else:  # nbgrader could not grade this submission's notebook: not counted as failing
            assert not mine and row["status"] in ("partly graded", "not graded"), s
            assert ASSIGNMENT in row["unscored"] or row["status"] == "not graded"
        if row["score"] is not None:
            assert row["score"] >= sum(v or 0 for v in gb_scores[s].values())
    graded = set(expected)
    checks = {c["grade_id"]: c for c in data["checks"]}
    for grade_id in SA_IDS:
        failing = sorted(s for s in graded - blank if grade_id.removeprefix(GRADE_ID_PREFIX) in expected[s])
        assert sorted(checks[grade_id]["failed"]) == failing, grade_id
        assert sorted(checks[grade_id]["not_attempted"]) == sorted(blank), grade_id
        assert checks[grade_id]["graded"] == len(graded - blank)
        assert sorted(checks[grade_id]["not_graded"]) == sorted(set(students) - graded)
        assert checks[grade_id]["label"] == LABEL[grade_id]
        assert checks[grade_id]["notebook"] == NOTEBOOK.removesuffix(".ipynb")
        assert checks[grade_id]["not_submitted"] == []
    for grade_id, c in checks.items():  # the class submitted only self_attention.ipynb: the assignment's
        if grade_id not in SA_IDS:      # other notebooks are "not submitted", never misconceptions
            assert c["graded"] == 0 and sorted(c["not_submitted"]) == sorted(students), grade_id
    summary = data["summary"]
    assert summary["students"] == len(students)
    assert summary["fail_counts"]["check_sqrt_d_scale"] == sum("sqrt_d_scale" in f for s, f in expected.items()
                                                              if s not in blank)
    assert summary["not_attempted"] == sorted(blank)
    if summary["max_score"] == SA_MAX:  # the assignment is this one notebook
        assert summary["full_marks"] == sum(1 for s in graded if not expected[s])
        everything = {s for s in graded - blank if expected[s] >= {c.id for c in SA_CHECKS}}
        assert set(summary["failed_everything"]) == everything
    t = parse(out.read_text())
    assert_pngs(t)
    (Path(__file__).resolve().parents[2] / "build").mkdir(exist_ok=True)
    keep = Path(__file__).resolve().parents[2] / "build" / "report-e2e-class.html"
    keep.write_text(out.read_text())  # for a look in a browser (build/ is not committed)


@pytest.mark.slow
@pytest.mark.root
def test_exports_of_the_e2e_class_through_nbgrader_export(e2e_class):
    course, expected = e2e_class
    checks_csv, canvas_csv = course / "checks.csv", course / "canvas.csv"
    r = nbgrader(course, "export", "--exporter=attention_platform.reporting.exports.CheckBreakdownExportPlugin",
                 "--to", str(checks_csv))
    assert r.returncode == 0, r.stderr[-2000:]
    assert cli(["export-canvas", "--course", str(course), "--to", str(canvas_csv)]) == 0
    gb = check_scores(course, assignment=ASSIGNMENT, notebook=NOTEBOOK)
    rows = list(csv.DictReader(checks_csv.open()))
    others = [r for r in rows if r["grade_id"] not in SA_IDS]  # notebooks this class did not submit
    assert all(r["status"] == "not submitted" for r in others)
    for s, fails in expected.items():
        mine = {r["grade_id"]: r for r in rows if r["student_id"] == s and r["grade_id"] in SA_IDS}
        assert set(mine) == set(SA_IDS)
        assert {g for g, r in mine.items() if r["status"] == "failed"} == {GRADE_ID_PREFIX + c for c in fails}
        assert all(r["misconception"] == LABEL[g] for g, r in mine.items())
    for s in set(gb) - set(expected):
        assert {r["status"] for r in rows if r["student_id"] == s and r["grade_id"] in SA_IDS} == {"not graded"}
    lines = list(csv.reader(canvas_csv.open()))
    assert lines[0][:5] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"] and lines[0][5] == ASSIGNMENT
    assert lines[1][0].strip() == "Points Possible"
    by_login = {line[3]: float(line[5]) for line in lines[2:]}
    assert set(by_login) == set(gb)
    sa_max = float(lines[1][5])
    for s, row in gb.items():
        # the assignment's score: at least this notebook's checks (other notebooks were not submitted)
        assert sum(v or 0 for v in row.values()) <= by_login[s] <= sa_max
    assert by_login["ref"] >= SA_MAX and by_login["noscale"] == by_login["ref"] - CHECKS["sqrt_d_scale"].points


@pytest.mark.slow
@pytest.mark.root
def test_feedback_command_shows_progress_and_a_summary(e2e_class, capsys):
    course, expected = e2e_class
    assert cli(["feedback", ASSIGNMENT, "--course", str(course)]) == 0
    printed = capsys.readouterr()
    graded = len(expected)  # the submissions nbgrader autograded
    assert f"feedback for {ASSIGNMENT}" in printed.err and f"{graded}/{graded}" in printed.err
    assert f"students     {graded} of {graded} autograded have feedback" in printed.out
    for student in expected:
        assert list((course / "feedback" / student / ASSIGNMENT).glob("*.html")), student
    with pytest.raises(SystemExit) as usage:
        cli(["feedback", "week9", "--course", str(course)])
    assert usage.value.code == 2 and "'week9'" in capsys.readouterr().err
