"""No text from inside a sandbox reaches a person: the attack on the probes' loading, graded for real.

Student code and the probes share the sandbox's interpreter, so a notebook's first cell can hook how
the probes are loaded (here ``builtins.exec``, which runs each probe module), read their source from
the loader's frame, and then put it into everything that leaves the sandbox: exception messages and
exception type names, the probes' error texts and reply strings, a probe that escapes with a
``BaseException``, a loading that fails, prints during the probes and in cells after them. Every
variant carries ``MARK``; graded through the sandbox and the judges (fast) and through the course's
``nbgrader autograde`` and ``generate_feedback`` (slow), no output a student or TA reads may hold the
mark or any 30-character line of the hidden checks' modules. The student's own cells before the checks
keep their outputs.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import sys
from pathlib import Path

import nbformat
import pytest

from attention_platform.course.directory import nbgrader, write_submission
from grader_tests.self_attention.answers import release_notebook
from grader_tests.self_attention.answers import ASSIGNMENT, NOTEBOOK, with_answer
from attention_platform.grading.sandbox import SandboxLimits, Zygote
from attention_platform.grading.sandbox.grading import GRADER_TESTS, grade_notebook, is_test_cell

LIMITS = SandboxLimits(cell_timeout=20, notebook_timeout=90)
MARK = "PROBE-SOURCE-LEAK"
OWN_OUTPUT = "the student's own first cell ran"

# Installs the hook; ``{variant}`` decides what the stolen source is put into.
HOOK = r'''
import builtins, sys
MARK = "%(mark_a)s" + "%(mark_b)s"  # made here, so the notebook's source does not hold it
VARIANT = "%(variant)s"
_exec, _stolen = builtins.exec, []

def _steal():
    frame = sys._getframe(2)
    while frame is not None:
        sources = frame.f_locals.get("sources")
        if isinstance(sources, dict) and sources:
            return "\n".join(str(text) for text in sources.values())
        frame = frame.f_back
    return "nothing found"

def _text():
    return MARK + "\n" + _stolen[0]

class Leak(Exception):
    def __str__(self):
        return _text()

def _wrap(probe):
    def wrapped(namespace, request):
        if VARIANT == "prints":
            print(_text())
            sys.stderr.write(_text())
            sys.__stdout__.write(_text())
        if VARIANT == "escapes":
            raise KeyboardInterrupt(_text())
        if VARIANT == "type_name":
            line = next(l for l in _stolen[0].splitlines() if len(l.strip()) > 40)
            raise type(MARK + line, (Exception,), {})(_text())
        response = probe(namespace, request)
        if VARIANT == "replies":
            for key in list(response) + ["layer", "text", "forward", "weights", "tokenizer"]:
                response[key + ".error"] = _text()
            response["text"] = _text()
            response["shape.Q"] = _text()
            response["qkv_weight_count"] = _text()
        return response
    return wrapped

def _hooked(code, globals=None, locals=None, *args, **kwargs):
    name = str(globals.get("__name__", "")) if isinstance(globals, dict) else ""
    if not name.startswith("grader_tests") or locals is not None or args or kwargs:
        return _exec(code, globals, *((locals,) if locals is not None else ()), *args, **kwargs)
    if not _stolen:
        _stolen.append(_steal())
    if VARIANT == "loading":
        raise Leak()
    _exec(code, globals)
    if VARIANT == "messages":
        if "describe_exception" in globals:
            globals["describe_exception"] = lambda exc: _text()
        if "ProbeError" in globals:
            globals["ProbeError"].__str__ = lambda self: _text()
    if name.endswith(".probes"):
        for check in globals["CHECKS"]:
            object.__setattr__(check, "probe", _wrap(check.probe))

builtins.exec = _hooked
print("%(own)s")
'''
# An answered class whose methods raise: its failures are shown as messages (a stub's read "not answered").
RAISING = """
def forward(self, x):
    raise ValueError("a message only the student's notebook shows")

def attention_weights(self, x):
    raise ValueError("a message only the student's notebook shows")
"""
AFTER_CHECKS = 'print(_text()); import sys; sys.stderr.write(_text()); raise Leak()'
VARIANTS = ("messages", "replies", "escapes", "type_name", "loading", "prints")
NOTEBOOKS = (NOTEBOOK, "03_head_and_bias.ipynb", "04_shapes_and_cost.ipynb")


def attacked(variant: str, notebook: str = NOTEBOOK) -> nbformat.NotebookNode:
    """The released notebook (the core one with RAISING as its answer, the others with their stubs) with
    the hook as its first cell and a cell after the first check that prints and raises the stolen text."""
    nb = release_notebook(notebook=notebook)
    nb = with_answer(nb, RAISING) if notebook == NOTEBOOK else nb
    nb.cells.insert(0, nbformat.v4.new_code_cell(HOOK % {"mark_a": MARK[:6], "mark_b": MARK[6:], "variant": variant,
                                                         "own": OWN_OUTPUT}))
    first_check = next(i for i, cell in enumerate(nb.cells) if is_test_cell(cell))
    nb.cells.insert(first_check + 1, nbformat.v4.new_code_cell(AFTER_CHECKS))
    return nb


def hidden_lines() -> list[str]:
    """Every line of 30 characters or more of the modules that probe and judge."""
    lines = set()
    for path in GRADER_TESTS.rglob("*.py"):
        if path.stem.endswith(("_probes", "_judges")) or path.stem in ("probing", "judging"):
            lines.update(line.strip() for line in path.read_text().splitlines() if len(line.strip()) >= 30)
    return sorted(lines)


def leaks(text: str) -> list[str]:
    found = [MARK] if MARK in text else []
    return found + [line for line in hidden_lines() if line in text]


@pytest.fixture(scope="module")
def zygote():
    z = Zygote()
    yield z
    z.close()


@pytest.mark.parametrize("notebook", NOTEBOOKS)
@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.root
def test_nothing_the_sandbox_says_reaches_the_graded_notebook(zygote, variant, notebook):
    nb = attacked(variant, notebook)
    result = grade_notebook(nb, zygote=zygote, limits=LIMITS)
    assert OWN_OUTPUT in nb.cells[0].outputs[0]["text"]  # the student's own cell keeps its output
    assert result.checks, "the checks were judged"
    seen = {
        "outputs": json.dumps([cell.get("outputs", []) for cell in nb.cells], ensure_ascii=False),
        "messages": "\n".join(check.message for check in result.checks.values()),
        "stopped": result.stopped or "",
    }
    assert {where: leaks(text)[:3] for where, text in seen.items() if leaks(text)} == {}
    for check in result.checks.values():
        assert "\n" not in check.message and len(check.message) <= 1000, check.message


def test_the_scan_finds_the_probes_source_where_it_is():
    """The scan above is able to fail: the source a hook steals is found by it."""
    text = "\n".join((GRADER_TESTS / name).read_text() for name in ("probing.py", "self_attention/self_attention_probes.py"))
    assert len(leaks(text)) > 50


@pytest.fixture(scope="module")
def course(tmp_path_factory, released_course):
    return released_course(tmp_path_factory.mktemp("leak-course") / "course", ASSIGNMENT)


@pytest.mark.slow
@pytest.mark.root
def test_nothing_the_sandbox_says_reaches_the_feedback_pages_or_the_formgrader(course):
    """The course's own ``nbgrader autograde`` (the TA's, the formgrader's button) and ``generate_feedback``."""
    for variant in VARIANTS:
        write_submission(course, f"leak-{variant}", attacked(variant), assignment=ASSIGNMENT, name=NOTEBOOK)
    nbgrader(course, "autograde", ASSIGNMENT, "--force", check=True)
    nbgrader(course, "generate_feedback", ASSIGNMENT, "--force", check=True)
    for variant in VARIANTS:
        graded = nbformat.read(course / "autograded" / f"leak-{variant}" / ASSIGNMENT / NOTEBOOK, as_version=4)
        assert OWN_OUTPUT in graded.cells[0].outputs[0]["text"]
        outputs = json.dumps([cell.get("outputs", []) for cell in graded.cells], ensure_ascii=False)
        page = (course / "feedback" / f"leak-{variant}" / ASSIGNMENT / NOTEBOOK.replace(".ipynb", ".html")).read_text()
        assert 'data-grade-id="check_shapes"' in page, variant
        assert (variant, leaks(outputs)[:3], leaks(page)[:3]) == (variant, [], [])


@pytest.mark.slow
@pytest.mark.root
def test_nothing_the_sandbox_says_reaches_feedback_on_submit(course, tmp_path, monkeypatch):
    """The feedback-on-submit grader: the attempt's status message (every feedback mode shows it) and its pages."""
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")  # nbgrader's alembic
    from attention_platform.feedback_on_submit.engine import Attempt, Engine
    from attention_platform.feedback_on_submit.intake import Intake

    engine = Engine(course, work=tmp_path / "attempts").start()
    try:
        for number, variant in enumerate(VARIANTS, 1):
            folder = tmp_path / "intake" / variant
            folder.mkdir(parents=True)
            nbformat.write(attacked(variant), folder / NOTEBOOK)
            now = dt.datetime.now(dt.timezone.utc)
            attempt = Attempt(number, ASSIGNMENT, f"fos-{variant}", "attempt", Intake(folder, timestamp=now), now, None)
            result = engine.grade(attempt)
            engine.feedback_pages(attempt, result)
            status = "; ".join(attempt.intake.notes + result.notes)
            pages = "".join(page.read_text() for page in (tmp_path / "attempts" / "feedback" / f"fos-{variant}").rglob("*.html"))
            assert pages and result.checks, variant
            assert (variant, leaks(status)[:3], leaks(pages)[:3]) == (variant, [], [])
    finally:
        engine.close()
