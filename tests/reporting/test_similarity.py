"""The similarity report on a generated class of 100, for every assignment.

98 students hand in the assignment's known answers (the instructor's, its wheats, a few of its chaffs),
each notebook answered in its own way, some with a line of their own that many students write; two more
are the planted pair: one wrote a helper of their own into the first answer cell, the other handed in a
copy with every name changed, the comments moved and the spacing redone. The report must put that pair
above every pair of students who answered independently and correctly, though plain copydetect finds two
such students identical. On the security hub, in Debian's chromium, a TA opens the report from the
formgrader's sidebar and finds a copied pair handed in through the exchange; a student is refused."""

from __future__ import annotations

import html
import math
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from attention_platform.course.notebooks import COURSE_ROOT
from attention_platform.course.samples import typed_in
from attention_platform.reporting import similarity
from grader_tests import registry
from test_hostile_submission import browser, login  # noqa: F401 - Debian's chromium and a hub login, as there

ASSIGNMENTS = sorted(registry.ASSIGNMENTS)
CLASS_SIZE = 100
# lines that many students add on their own (each written by a third of the class)
COMMON_LINES = ('assert x.dim() == 3, "expected (batch, tokens, features)"', "print(x.shape)",
                "DEBUG = False")
ORIGINAL = '''
def attention_summary(weights, tokens, top=3):
    # the tokens each position attends to most, strongest first
    strongest = weights.topk(min(top, weights.shape[-1]), dim=-1)
    report = []
    for position, (values, picks) in enumerate(zip(strongest.values.tolist(), strongest.indices.tolist())):
        chosen = [f"{tokens[i]}={v:.2f}" for v, i in zip(values, picks)]  # token=weight
        report.append(f"{position:>2}: " + ", ".join(chosen))
    if not report:
        raise ValueError("<script>no weights</script>")
    return "\\n".join(report)
'''
RENAMES = {"attention_summary": "summarise_focus", "weights": "w", "tokens": "vocab", "top": "k",
           "strongest": "best", "report": "rows", "position": "row", "values": "vals", "picks": "idx",
           "chosen": "parts"}


def disguised(code: str) -> str:
    """``code`` as a copier hands it in: every name changed, comments moved and reworded, spacing redone."""
    lines = []
    for line in code.splitlines():
        line = re.sub(r"\s*#.*$", "", line)
        for old, new in RENAMES.items():
            line = re.sub(rf"(?<![.\w]){old}\b", new, line)
        lines.append(line.replace(", ", ",").replace(" = ", "="))
    lines.insert(2, "    # NOTE: strongest weights come first")
    return "\n".join(lines) + "\n# end of my helper\n"


def first_answer_cell(nb: nbformat.NotebookNode):
    return next(c for c in nb.cells if c.cell_type == "code" and c.metadata.get("nbgrader", {}).get("solution"))


def generated_class(course: Path, name: str) -> tuple[set[str], tuple[str, str]]:
    """Write the class's submissions into ``course``; the independent correct students and the planted pair."""
    found = registry.assignment(name)
    for folder in ("release", "source"):
        (course / folder).mkdir(parents=True, exist_ok=True)
        (course / folder / name).symlink_to(COURSE_ROOT / folder / name)
    correct, answers = set(), {}
    for notebook in found.notebooks:
        release = nbformat.read(COURSE_ROOT / "release" / name / f"{notebook}.ipynb", as_version=4)
        source = nbformat.read(COURSE_ROOT / "source" / name / f"{notebook}.ipynb", as_version=4)
        wheats = [None] + [p for p in found.wheats if p.notebook == notebook]
        chaffs = [p for p in found.chaffs if p.notebook == notebook]
        answers[notebook] = (release, source, wheats, chaffs)
    for i in range(CLASS_SIZE - 2):
        student = f"s{i:03d}"
        wrong = i % 5 == 4  # every fifth student carries a misconception in each notebook that has one
        for n, (notebook, (release, source, wheats, chaffs)) in enumerate(answers.items()):
            proof = chaffs[(i + n) % len(chaffs)] if wrong and chaffs else wheats[(i // 5 + n) % len(wheats)]
            handed = typed_in(release, source, proof)
            if n == 0 and i % 2:
                first_answer_cell(handed).source += "\n" + COMMON_LINES[i % 3]
            write(course, student, name, notebook, handed)
        if not wrong:
            correct.add(student)
    for n, (notebook, (release, source, wheats, _)) in enumerate(answers.items()):
        original, copy = typed_in(release, source, wheats[-1]), typed_in(release, source, wheats[-1])
        if n == 0:
            first_answer_cell(original).source += "\n" + ORIGINAL
            first_answer_cell(copy).source += "\n" + disguised(ORIGINAL)
        write(course, "planted_original", name, notebook, original)
        write(course, "planted_copy", name, notebook, copy)
    return correct, ("planted_copy", "planted_original")


def write(course: Path, student: str, assignment: str, notebook: str, nb) -> None:
    folder = course / "submitted" / student / assignment
    folder.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, folder / f"{notebook}.ipynb")


@pytest.mark.parametrize("name", ASSIGNMENTS)
def test_a_planted_copy_ranks_above_every_pair_of_independent_correct_answers(tmp_path, name):
    correct, planted = generated_class(tmp_path, name)
    data = similarity.collect(tmp_path, name, limit=10_000)
    assert len(data.students) == CLASS_SIZE
    ranked = [(p.first, p.second) for p in data.pairs]
    assert ranked[0] == planted, ranked[:5]
    top = data.pairs[0]
    assert any("same code after renaming" in reason for reason in top.reasons), top.reasons
    assert "<mark>" in top.cells[0].first_code and "<mark>" in top.cells[0].second_code
    independent = [p for p in data.pairs if {p.first, p.second} <= correct]
    assert all(p.score < top.score / 3 for p in independent), [(p.first, p.second, p.score) for p in independent[:3]]

    # the calibration is what keeps them down: plain copydetect finds two such students identical
    from copydetect.detector import compare_files

    notebook = registry.assignment(name).notebooks[0]
    release = nbformat.read(COURSE_ROOT / "release" / name / f"{notebook}.ipynb", as_version=4)
    by_answer = {}
    for student in sorted(correct):
        handed = nbformat.read(tmp_path / "submitted" / student / name / f"{notebook}.ipynb", as_version=4)
        regions = tuple(similarity.solution_regions(handed, release).values())
        by_answer.setdefault(regions, []).append(student)
    regions, twins = next((r, s) for r, s in by_answer.items() if len(s) > 1 and r)
    _, (share, _), _ = compare_files(*(similarity._fingerprint(regions[0]) for _ in range(2)))
    assert share == pytest.approx(1.0)
    assert (twins[0], twins[1]) not in ranked[:len(ranked) // 2]

    page = similarity.render_html(data)
    assert similarity.NOTICE in page and "<script>" not in page and "&lt;script&gt;" in page


def test_the_same_rare_numbers_and_failing_checks_are_reasons(tmp_path):
    name = ASSIGNMENTS[0]
    release = nbformat.read(COURSE_ROOT / "release" / name / f"{registry.assignment(name).notebooks[0]}.ipynb",
                            as_version=4)
    regions, numbers = {}, {}
    for i, printed in enumerate(["0.2500 1.7320", "0.2500 1.7320", "0.9000 0.1000", "0.9000 0.1000",
                                 "0.9000 0.1000", "0.3000 0.4000"]):
        nb = nbformat.from_dict(release)
        first_answer_cell(nb).outputs = [nbformat.v4.new_output("stream", name="stdout", text=printed + "\n")]
        numbers[f"s{i}"] = {("nb", g): n for g, n in similarity.printed_numbers(nb, release).items()}
        regions[f"s{i}"] = {}
    failed = {"s0": frozenset(), "s1": frozenset(), "s2": frozenset({"check_a"}), "s3": frozenset({"check_a"}),
              "s4": frozenset({"check_a", "check_b"}), "s5": frozenset({"check_a", "check_b"})}
    failed.update({f"x{i}": frozenset({"check_a"}) for i in range(20)})
    data = similarity.compare(name, regions, {}, numbers=numbers, failed=failed, labels={"check_b": "the mask"})
    ranked = [(p.first, p.second) for p in data.pairs]
    assert ranked[:2] == [("s0", "s1"), ("s4", "s5")], ranked
    assert "the same printed numbers" in data.pairs[0].reasons[0]
    assert any("the same failing hidden checks (check_a, the mask)" in r for r in data.pairs[1].reasons)
    assert ("s2", "s3") not in ranked  # a failure most of the class shares is no reason


def test_a_copy_in_a_class_of_three_is_listed():
    name = ASSIGNMENTS[0]
    first = ("nb", "cell")
    regions = {"ana": {first: ORIGINAL}, "bo": {first: disguised(ORIGINAL)}, "cy": {first: "y = 1\n"}}
    data = similarity.compare(name, regions, {})
    assert [(p.first, p.second) for p in data.pairs] == [("ana", "bo")]


@pytest.mark.slow
@pytest.mark.root
def test_in_a_graded_class_the_same_code_and_the_same_failing_checks_rank_first(autograded_e2e_class):
    """tests/e2e_class.py's class as nbgrader graded it: the cheater handed in noscale's answer (with the
    check cells replaced, which grading restores); the tampered notebook is the reference answer, as ref's."""
    course, _ = autograded_e2e_class
    data = similarity.collect(course, "self_attention", db_url=f"sqlite:///{course / 'gradebook.db'}")
    top = data.pairs[0]
    assert (top.first, top.second) == ("cheater", "noscale"), [(p.first, p.second) for p in data.pairs]
    assert any(r.startswith("the same failing hidden checks (") for r in top.reasons), top.reasons
    assert ("ref", "tampered") not in [(p.first, p.second) for p in data.pairs]  # the known answer counts for nothing


def test_an_unreadable_notebook_costs_its_owner_only(tmp_path):
    name = ASSIGNMENTS[0]
    correct, planted = generated_class(tmp_path, name)
    notebook = registry.assignment(name).notebooks[0]
    (tmp_path / "submitted" / "s001" / name / f"{notebook}.ipynb").write_text('{"cells": [ not json')
    data = similarity.collect(tmp_path, name)
    assert (data.pairs[0].first, data.pairs[0].second) == planted
    assert any("s001's" in note and "could not be read" in note for note in data.notes), data.notes


def test_a_class_past_the_reports_byte_budget_leaves_out_its_largest_notebooks_and_names_their_students(
        tmp_path, monkeypatch):
    """The report reads at most ATTENTION_SIMILARITY_MAX_MB of the class's notebooks: with it set just above
    what the class hands in, two students whose notebooks are each larger than the whole budget are left
    out, named on the page with why; everyone else is compared, the planted pair still first."""
    name = ASSIGNMENTS[0]
    _, planted = generated_class(tmp_path, name)
    submitted = sorted((tmp_path / "submitted").glob(f"*/{name}/*.ipynb"))
    budget_mb = math.ceil(sum(path.stat().st_size for path in submitted) / 2**20) + 1
    monkeypatch.setenv("ATTENTION_SIMILARITY_MAX_MB", str(budget_mb))
    notebook = registry.assignment(name).notebooks[0]
    for student in ("s007", "s042"):
        path = tmp_path / "submitted" / student / name / f"{notebook}.ipynb"
        handed = nbformat.read(path, as_version=4)
        first_answer_cell(handed).outputs = [nbformat.v4.new_output("stream", name="stdout",
                                                                    text="0.5 " * (budget_mb * 2**19))]
        nbformat.write(handed, path)
    data = similarity.collect(tmp_path, name)
    assert (data.pairs[0].first, data.pairs[0].second) == planted
    assert len(data.students) == CLASS_SIZE - 2 and not {"s007", "s042"} & set(data.students), data.students
    left_out = [note for note in data.notes if "not compared" in note]
    assert len(left_out) == 1 and f"{budget_mb} MB" in left_out[0] and "ATTENTION_SIMILARITY_MAX_MB" in left_out[0]
    named = re.findall(r"\b(s\d{3}|planted_\w+) \(", left_out[0])
    assert named == ["s007", "s042"], left_out[0]
    assert html.escape(left_out[0]) in similarity.render_html(data)


def test_the_command_writes_the_page_and_says_the_gradebook_is_missing(tmp_path):
    name = ASSIGNMENTS[-1]
    generated_class(tmp_path, name)
    out = tmp_path / "similar.html"
    done = subprocess.run([sys.executable, "-m", "attention_platform.cli", "similarity", name, "--course",
                           str(tmp_path), "--out", str(out)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "planted_copy and planted_original" in done.stdout.splitlines()[3]
    assert "failing checks not compared: no gradebook" in done.stdout
    assert similarity.NOTICE in out.read_text()
    unknown = subprocess.run([sys.executable, "-m", "attention_platform.cli", "similarity", "no_such_assignment",
                              "--course", str(tmp_path)], capture_output=True, text=True, timeout=300)
    assert unknown.returncode != 0 and "Traceback" not in unknown.stderr and name in unknown.stderr


# --------------------------------------------------------------------------- in the formgrader, for real

LIVE_MARKS = (pytest.mark.browser, pytest.mark.slow, pytest.mark.hub, pytest.mark.root,
              pytest.mark.skipif(not Path("/usr/bin/chromium").exists(), reason="Debian's chromium: make system-deps"))


def live(test):
    """A test on the security hub in Debian's chromium."""
    for mark in LIVE_MARKS:
        test = mark(test)
    return test


@pytest.fixture(scope="module")
def copied_on_the_hub(security_hub):
    """student1 hands in a helper of their own, student2 a disguised copy; the TA collects. (student3 is
    the exchange view's; student2 may have fetched the assignment already, for the hostile submission.)"""
    name = ASSIGNMENTS[0]
    notebook = registry.assignment(name).notebooks[0]
    release = nbformat.read(COURSE_ROOT / "release" / name / f"{notebook}.ipynb", as_version=4)
    source = nbformat.read(COURSE_ROOT / "source" / name / f"{notebook}.ipynb", as_version=4)
    pair = ("student1", "student2")
    for student, helper in zip(pair, (ORIGINAL, disguised(ORIGINAL))):
        session = security_hub.session(student)
        session.spawn()
        fetched = session.assignment_action("fetch", name)
        assert fetched["success"] or session.contents(name).status_code == 200, fetched
        handed = typed_in(release, source, None)
        first_answer_cell(handed).source += "\n" + helper
        session.save_notebook(f"{name}/{notebook}.ipynb", handed)
        assert session.assignment_action("submit", name)["success"]
    assert security_hub.session("ta").formgrader("POST", f"assignment/{name}/collect").json()["success"]
    return name, pair


@live
def test_a_ta_opens_the_report_from_the_formgrader(security_hub, copied_on_the_hub, browser):
    from hub_helpers import COURSE

    name, pair = copied_on_the_hub
    page = login(browser, security_hub, "ta")
    page.goto(f"{security_hub.url}/services/{COURSE}/formgrader/manage_assignments")
    page.get_by_role("link", name="Similar answers").click()
    page.get_by_role("link", name=name).click()
    page.wait_for_selector("#notice")
    assert page.locator("#notice").inner_text() == similarity.NOTICE
    first = page.locator("section.pair").first
    assert (first.get_attribute("data-first"), first.get_attribute("data-second")) == pair
    assert first.locator("mark").count() >= 2
    assert page.evaluate("() => document.scripts.length") == 0


@live
def test_a_student_is_refused_and_learns_nothing(security_hub, copied_on_the_hub, browser):
    from hub_helpers import COURSE

    name, pair = copied_on_the_hub
    page = login(browser, security_hub, pair[0])
    for path in ("formgrader/similarity", f"formgrader/similarity/{name}"):
        response = page.goto(f"{security_hub.url}/services/{COURSE}/{path}")
        text = page.locator("body").inner_text()
        assert response.status == 403, (path, response.status, text[:200])  # the hub's or the gate's refusal
        assert not any(word in text for word in (pair[1], "Similar", name, similarity.NOTICE[:30])), text


def test_the_same_numbers_in_different_variants_rank_first():
    """Students with numbers of their own (by-hand variants) who show the same numbers: wrong for one of
    them at least, and strong evidence even when three share them."""
    name, where = "self_attention", ("02_by_hand", "scores_answer")
    numbers = {f"v{i}": {where: ("0.7000", "0.2000")} for i in range(3)}
    numbers.update({"w0": {where: ("0.1000", "0.9000")}, "w1": {where: ("0.1000", "0.9000")}})
    numbers.update({f"x{i}": {where: (f"0.{i}100",)} for i in range(8)})
    variant_of = {"v0": "aaaa0000", "v1": "bbbb1111", "v2": "cccc2222", "w0": "dddd3333", "w1": "dddd3333"}
    data = similarity.compare(name, {}, {}, numbers=numbers, variants_of=variant_of, variant_notebook="02_by_hand")
    ranked = [(p.first, p.second) for p in data.pairs]
    assert set(ranked[:3]) == {("v0", "v1"), ("v0", "v2"), ("v1", "v2")}, ranked
    assert "the same numbers although their variants differ (aaaa0000, bbbb1111)" in data.pairs[0].reasons[0]
    assert not any("variants differ" in r for p in data.pairs if p.first == "w0" for r in p.reasons)
