"""Validate in warm sandboxes (attention_platform/grading/validate_service.py, attention_platform/lab/warm_validate.py).

A real root sandbox broker, the validate service running as a grader account, and a student
account whose own process asks for Validate, as a student's server does. nbgrader's Validate on
the same notebooks, in a kernel, is the reference: the warm path must give the same answer."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from attention_platform.course.notebooks import COURSE_ROOT
from grader_tests.self_attention.answers import release_notebook
from broker_helpers import GRADER, LOADED, STRANGER, as_user, ensure_user
from grader_tests.proofs import solved
from grader_tests.registry import ASSIGNMENTS, assignment
from grader_tests.self_attention.answers import ASSIGNMENT, BUGGY, CORRECT, class_cell, with_answer

pytestmark = [pytest.mark.root,
              pytest.mark.skipif(os.geteuid() != 0, reason="the broker and the hub users need root (CI is root)")]

STUDENT = "attention-vs-student"  # stands in for a hub user (the service serves only their uids)
CELL_TIMEOUT = 5  # seconds per cell, for the service's sandboxes and the reference kernel alike


@contextlib.contextmanager
def validate_service(course: Path, broker_socket: Path, folder: Path, student):
    """``attention-course validate-service`` for ``course`` as the grader account, serving ``student``,
    its sandboxes from the broker at ``broker_socket``; yields the service's socket."""
    grader = ensure_user(GRADER)
    run = Path(tempfile.mkdtemp(prefix="validate-", dir=folder))
    run.chmod(0o755)
    shutil.chown(run, grader.pw_uid, grader.pw_gid)  # the grader's folder: it binds its socket there
    socket_path = run / "validate.sock"
    lib = folder / "grader-lib"  # the grader's own copy of the probes' codec, as the hub installs it
    if not lib.exists():
        shutil.copytree(COURSE_ROOT / "grader_tests", lib / "grader_tests",
                        ignore=shutil.ignore_patterns("tests", "__pycache__"))
        subprocess.run(["chown", "-R", f"{grader.pw_uid}:{grader.pw_gid}", str(lib)], check=True)
    process = subprocess.Popen(
        [sys.executable, "-m", "attention_platform.cli", "validate-service", "--course", str(course),
         "--socket", str(socket_path), "--uid-min", str(student.pw_uid), "--uid-max", str(student.pw_uid)],
        user=grader.pw_uid, group=grader.pw_gid, extra_groups=[], cwd="/",
        env={"PATH": "/usr/bin:/bin", "ATTENTION_SANDBOX_SOCKET": str(broker_socket),
             "PYTHONPATH": str(lib), "NBGRADER_CELL_TIMEOUT": str(CELL_TIMEOUT)},
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 180
        while not socket_path.exists():
            assert process.poll() is None, process.stdout.read()
            assert time.monotonic() < deadline, "the validate service did not start"
            time.sleep(0.1)
        yield socket_path
    finally:
        process.terminate()
        process.wait(20)


@pytest.fixture(scope="module")
def service(sandbox_broker):
    student, stranger = ensure_user(STUDENT), ensure_user(STRANGER)
    broker = sandbox_broker()
    with validate_service(COURSE_ROOT, broker.socket, broker.folder, student) as socket_path:
        yield socket_path, student, stranger


def student_folder(student, notebooks: dict[str, nbformat.NotebookNode], assignment: str = ASSIGNMENT) -> Path:
    """An assignment folder of the student's own, as in their home: the notebooks and data/ (if any)."""
    folder = Path(tempfile.mkdtemp(prefix="attention-validate-nb-"))
    if (COURSE_ROOT / "release" / assignment / "data").is_dir():
        shutil.copytree(COURSE_ROOT / "release" / assignment / "data", folder / "data")
    for name, nb in notebooks.items():
        nbformat.write(nb, folder / name)
    subprocess.run(["chown", "-R", f"{student.pw_uid}:{student.pw_gid}", str(folder)], check=True)
    return folder


def both_validates(student, socket_path: Path, folder: Path, names: list[str], kernel_timeout: int = CELL_TIMEOUT) -> dict:
    """As the student, on each notebook: nbgrader's own Validate (``nbgrader validate``'s
    ``Validator``, a kernel) and the warm one, each as nbgrader's result and as the course's
    report (``course.validation.validate_file``, what the Lab's Validate shows). Each way runs each
    notebook once: nbgrader's result and the course's report are both read from that run. The kernel
    gets the same per-cell time limit as the service's sandboxes (CELL_TIMEOUT) unless told otherwise."""
    code = f"""
        import copy, json, os
        from traitlets.config import Config
        from nbgrader.validator import Validator
        from attention_platform.course.validation import validate_file
        from attention_platform.lab.warm_validate import WarmValidator

        def run_once(validator_class):
            runs = {{}}

            class RunOnce(validator_class):
                def _preprocess(self, nb):
                    key = json.dumps(nb, sort_keys=True)
                    if key not in runs:  # with the public checks the warm run judged
                        runs[key] = super()._preprocess(nb), getattr(self, "public_checks", None)
                    executed, public_checks = runs[key]
                    if self.has_trait("public_checks"):
                        self.public_checks = public_checks
                    return copy.deepcopy(executed)
            return RunOnce

        config = Config()
        config.Execute.timeout = {kernel_timeout}
        out = {{}}
        for name in {names!r}:
            path = os.path.join({str(folder)!r}, name)
            warm, kernel = run_once(WarmValidator), run_once(Validator)
            out[name] = {{"warm": warm(config=config).validate(path),
                          "kernel": kernel(config=config).validate(path),
                          "warm_report": validate_file(path, config, warm).to_json(),
                          "kernel_report": validate_file(path, config, kernel).to_json()}}
        print(json.dumps(out))
    """
    return as_user(student, code, env={"ATTENTION_VALIDATE_SOCKET": str(socket_path), "HOME": str(folder),
                                       "JUPYTER_RUNTIME_DIR": str(folder / ".runtime")}, timeout=600)


def failed_cells(result: dict) -> list[tuple[str, str]]:
    """(source, the error's last line) of every failed cell: what the student is told (a kernel
    colours the error's name, the sandbox does not)."""
    from nbconvert.filters import strip_ansi

    return [(cell["source"], strip_ansi(cell["raw_error"]).strip().splitlines()[-1] if cell["raw_error"].strip() else "")
            for cell in result.get("failed", [])]


def graded_notebook() -> nbformat.NotebookNode:
    """A small nbgrader notebook: an answer cell, a passing and a failing test cell, a locked cell."""
    def meta(**kw):
        return {"nbgrader": {"schema_version": 3, "grade": False, "solution": False, "locked": False, **kw}}

    nb = new_notebook(cells=[
        new_markdown_cell("# A graded notebook"),
        new_code_cell("def add(a, b):\n    return a - b", metadata=meta(grade_id="answer", solution=True)),
        new_code_cell("assert add(2, 0) == 2", metadata=meta(grade_id="passes", grade=True, locked=True, points=1)),
        new_code_cell("assert add(1, 1) == 2, 'add(1, 1) should be 2'",
                      metadata=meta(grade_id="fails", grade=True, locked=True, points=1)),
        new_code_cell("with open('data/corpus.txt') as f:\n    print(len(f.read()) > 0)",
                      metadata=meta(grade_id="reads_data", grade=True, locked=True, points=1)),
    ])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    return nb


def verdicts(report: dict) -> tuple:
    """What the course's Validate decides: ready or not, and each named cell with its kind."""
    return report["ok"], report["ran"], [(p["cell"], p["kind"]) for p in report["problems"]]


def same_words(report: dict) -> str:
    """The report's problems as the student reads them, with the name a SyntaxError gives the cell's
    code left out: IPython's is a hash (``1930907593.py``), the sandbox's ``<cell 2>``. (The warm
    Validate adds its public checks, a kernel runs none: tested on their own below.)"""
    return re.sub(r"\((?:<cell \d+>|\d+\.py), line ", "(…, line ", json.dumps(report["problems"], ensure_ascii=False))


def test_the_warm_validate_answers_as_nbgraders_own(service):
    socket_path, student, _ = service
    # an answer whose forward raises when the notebook's try-it cell calls it
    raising = CORRECT[0].code.replace("return self.out_proj(", "raise RuntimeError('shapes do not match')\n    return (", 1)
    assert raising != CORRECT[0].code
    correct = with_answer(release_notebook(), CORRECT[0].code)
    buggy = with_answer(release_notebook(), next(a for a in BUGGY if a.name == "no_scale").code)
    syntax = with_answer(release_notebook(), CORRECT[0].code)
    class_cell(syntax).source += "\n\ndef broken(:\n    pass\n"  # a cell that does not parse
    graded = graded_notebook()
    changed = graded_notebook()
    changed.cells[2].metadata["nbgrader"]["checksum"] = "0" * 32  # as if the locked cell had been edited
    looping = graded_notebook()
    looping.cells[3].source = "while True:\n    pass"  # a test cell that never ends: the time limit stops it
    notebooks = {"correct.ipynb": correct, "buggy.ipynb": buggy, "untouched.ipynb": release_notebook(),
                 "raising.ipynb": with_answer(release_notebook(), raising), "syntax.ipynb": syntax,
                 "graded.ipynb": graded, "changed.ipynb": changed, "looping.ipynb": looping}
    folder = student_folder(student, notebooks)
    try:
        results = both_validates(student, socket_path, folder, list(notebooks))
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    for name, r in results.items():
        assert sorted(r["warm"]) == sorted(r["kernel"]), (name, r)
        warm, kernel = failed_cells(r["warm"]), failed_cells(r["kernel"])
        if name == "looping.ipynb":  # the kernel's words for a timeout and ours differ; the cell and error do not
            warm, kernel = [(src, line.split(":")[0]) for src, line in warm], [(src, line.split(":")[0]) for src, line in kernel]
        assert warm == kernel, name
        assert r["warm"].get("changed") == r["kernel"].get("changed"), name
        assert verdicts(r["warm_report"]) == verdicts(r["kernel_report"]), (name, r["warm_report"], r["kernel_report"])
        if name != "looping.ipynb":  # every word the student reads is the same (but a compiled cell's name)
            assert same_words(r["warm_report"]) == same_words(r["kernel_report"]), name
    assert verdicts(results["correct.ipynb"]["warm_report"]) == (True, True, [])
    assert verdicts(results["buggy.ipynb"]["warm_report"]) == (True, True, [])  # hidden checks are not run
    assert {c["passed"] for c in results["buggy.ipynb"]["warm_report"]["public_checks"]} == {True}  # public ones are
    assert [kind for _, kind in verdicts(results["untouched.ipynb"]["warm_report"])[2]] == ["unanswered"]
    assert [kind for _, kind in verdicts(results["raising.ipynb"]["warm_report"])[2]] == ["raises"]
    # the class cell does not parse, so the try-it cell below it cannot find the class: both are named
    syntax_texts = [p["text"] for p in results["syntax.ipynb"]["warm_report"]["problems"]]
    assert len(syntax_texts) == 2 and "SyntaxError" in syntax_texts[0] and "NameError" in syntax_texts[1]
    assert "RuntimeError: shapes do not match" in str(results["raising.ipynb"]["warm_report"]["problems"])
    assert failed_cells(results["graded.ipynb"]["warm"]) == [
        ("assert add(1, 1) == 2, 'add(1, 1) should be 2'", "AssertionError: add(1, 1) should be 2")]
    assert results["changed.ipynb"]["warm"]["changed"] == [{"source": "assert add(2, 0) == 2"}]
    assert [line.split(":")[0] for _, line in failed_cells(results["looping.ipynb"]["warm"])] == ["CellTimeoutError"]
    assert "CellTimeoutError" in str(results["looping.ipynb"]["warm_report"]["problems"])


def test_validate_shows_the_public_softmax_check_failing_for_rows_that_do_not_sum_to_one(service):
    """The issue's case: a layer without a softmax prints weights whose rows visibly do not sum to 1.
    The warm Validate runs the notebook's public checks as grading does and names the softmax check
    failing, with its catalogue title and the judge's message; no other check's title appears. A
    kernel's Validate runs no check, and says so."""
    from grader_tests.registry import ALL_CHECKS, CHECKS
    from attention_platform.course.validation import NO_PUBLIC_CHECKS_NOTE

    socket_path, student, _ = service
    no_softmax = next(a for a in BUGGY if a.name == "no_softmax")
    folder = student_folder(student, {"rows.ipynb": with_answer(release_notebook(), no_softmax.code)})
    try:
        report = both_validates(student, socket_path, folder, ["rows.ipynb"])["rows.ipynb"]
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    warm, kernel = report["warm_report"], report["kernel_report"]
    softmax = CHECKS["softmax_dim"].title
    assert not warm["ok"] and warm["headline"] == "Not ready yet: 1 public check failing.", warm
    assert [(c["title"], c["passed"]) for c in warm["public_checks"]] == [(CHECKS["shapes"].title, True), (softmax, False)]
    assert warm["public_checks"][1]["text"] == (f"✗ {softmax} Your weights do not sum to 1 along any dimension: apply "
                                                "softmax to the scaled scores, over the keys (dim=-1).")
    said = json.dumps(warm, ensure_ascii=False)
    assert not [c.title for c in ALL_CHECKS if not c.definition.public and c.title in said]
    assert kernel["ok"] and kernel["public_checks"] == [] and kernel["note"] == NO_PUBLIC_CHECKS_NOTE


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(ASSIGNMENTS))
def test_each_assignment_answered_as_the_instructor_would_is_ready_warm_and_in_a_kernel(service, name):
    socket_path, student, _ = service
    release, source = COURSE_ROOT / "release" / name, COURSE_ROOT / "source" / name
    notebooks = {f"{nb}.ipynb": solved(nbformat.read(release / f"{nb}.ipynb", as_version=4),
                                       nbformat.read(source / f"{nb}.ipynb", as_version=4))
                 for nb in assignment(name).notebooks}
    folder = student_folder(student, notebooks, name)
    try:
        # a kernel imports torch cold, and the experiments train longer than the sandboxes' limit there
        results = both_validates(student, socket_path, folder, list(notebooks), kernel_timeout=300)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    for notebook, r in results.items():
        assert verdicts(r["warm_report"]) == verdicts(r["kernel_report"]) == (True, True, []), (notebook, r["kernel_report"])


def test_each_validate_runs_in_a_fresh_sandbox(service):
    """The student's code runs as a sandbox's uid, without network, and nothing it leaves behind
    is there for the next Validate."""
    socket_path, student, _ = service
    nb = new_notebook(cells=[new_code_cell(textwrap.dedent("""
        import os, socket
        print("uid", os.getuid())
        print("left before:", os.path.exists("/tmp/left-behind"))
        open("/tmp/left-behind", "w").write("x")
        try:
            socket.create_connection(("127.0.0.1", 22), timeout=2)
            print("network: reached")
        except OSError as exc:
            print("network:", type(exc).__name__)
    """))])
    folder = student_folder(student, {"probe.ipynb": nb})
    code = f"""
        import json, nbformat
        from attention_platform.lab.warm_validate import executed_for_validate
        nb = nbformat.read({str(folder / 'probe.ipynb')!r}, as_version=4)
        runs = [executed_for_validate(nbformat.from_dict(nb), {str(folder)!r}, name="probe.ipynb",
                                      socket_path={str(socket_path)!r}) for _ in range(2)]
        print(json.dumps(["".join(o.get("text", "") for o in run.cells[0].outputs) for run in runs]))
    """
    try:
        first, second = as_user(student, code)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    for text in (first, second):
        uid = int(text.split("uid ", 1)[1].split()[0])
        assert uid >= 61000 and uid != student.pw_uid, text
        assert "left before: False" in text, text  # the other Validate's /tmp is gone
        assert "network: reached" not in text and "network: " in text, text


def test_only_hub_users_are_served(service):
    socket_path, _, stranger = service
    code = f"""
        import json, nbformat
        from attention_platform.lab.warm_validate import ValidateUnavailable, executed_for_validate
        try:
            executed_for_validate(nbformat.v4.new_notebook(), "/nonexistent", socket_path={str(socket_path)!r})
            print(json.dumps("served"))
        except ValidateUnavailable as exc:
            print(json.dumps(str(exc)))
    """
    answer = as_user(stranger, code)
    assert "is not a hub user's" in answer




def test_a_student_cannot_hold_more_than_two_connections_open(service):
    """Each connection is read whole (up to 24 MB) and parsed before its turn is checked, on a thread
    of its own: a student holding many open could fill the service's memory and threads. A third
    connection of one uid is told at once, before anything is read from it; two idle ones are left
    alone, and once they close the student's Validate runs as usual."""
    socket_path, student, _ = service
    code = f"""
        import json, socket, time, nbformat
        from attention_platform.grading.sandbox import protocol
        from attention_platform.lab.warm_validate import ValidateUnavailable, executed_for_validate
        idle = []
        for _ in range(2):
            conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            conn.connect({str(socket_path)!r})
            idle.append(conn)
        third = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        third.connect({str(socket_path)!r})
        try:
            _, answer = protocol.recv_frame(third, time.monotonic() + 10, 1 << 20)
        except protocol.FrameError as exc:
            answer = "no answer: " + str(exc)
        for conn in idle + [third]:
            conn.close()
        nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("print(6 * 7)")])
        for _ in range(40):  # the service's threads notice the closes at once; a loaded machine may lag
            try:
                ran = executed_for_validate(nb, "/nonexistent", socket_path={str(socket_path)!r})
                break
            except ValidateUnavailable:
                time.sleep(0.25)
        print(json.dumps({{"third": answer, "after": ran.cells[0].outputs[0].get("text", "")}}))
    """
    answer = as_user(student, code)
    assert isinstance(answer["third"], dict), answer
    assert answer["third"]["op"] == "busy" and "2 Validate connections open" in answer["third"]["error"], answer
    assert answer["after"] == "42\n"


def plain_course(folder: Path) -> Path:
    """A course whose one notebook neither trains nor draws (this course's configuration)."""
    course = folder / "plain-course"
    (course / "source" / "plain").mkdir(parents=True)
    shutil.copy(COURSE_ROOT / "nbgrader_config.py", course / "nbgrader_config.py")
    nbformat.write(new_notebook(cells=[new_code_cell("import torch\nx = torch.ones(3) * 2")]),
                   course / "source" / "plain" / "plain.ipynb")
    subprocess.run(["chmod", "-R", "a+rX", str(folder)], check=True)
    return course


@pytest.mark.parametrize("course, loaded", [
    ("plain", ["torch"]),  # its sandboxes forked from a worker that loaded nothing it does not need
    ("this", ["matplotlib.pyplot", "torch._dynamo", "torch"]),  # the experiments notebook trains and draws
])
def test_validates_sandboxes_come_from_a_worker_warmed_for_the_course(sandbox_broker, course, loaded):
    """The service asks the broker (here one that paid nothing for everyone, as the native hub
    starts it for a plain course) for exactly the first uses its course's notebooks need."""
    student = ensure_user(STUDENT)
    broker = sandbox_broker("--first-uses", "none")
    root = plain_course(broker.folder) if course == "plain" else COURSE_ROOT
    with validate_service(root, broker.socket, broker.folder, student) as socket_path:
        mine = student_folder(student, {})
        result = as_user(student, f"""
            import json, nbformat
            from nbformat.v4 import new_code_cell, new_notebook
            from attention_platform.lab.warm_validate import executed_for_validate
            nb = executed_for_validate(new_notebook(cells=[new_code_cell({LOADED!r})]), {str(mine)!r},
                                       socket_path={str(socket_path)!r})
            print(json.dumps({{"loaded": nb.cells[0].outputs[0]["text"].split()}}))
        """)
        shutil.rmtree(mine, ignore_errors=True)
    assert result == {"loaded": loaded}


# --------------------------------------------------------------------------- amplification bombs

def bomb_notebook(objects: int) -> str:
    """A notebook of ~3 bytes per object whose metadata holds ``objects`` empty objects."""
    return ('{"cells": [], "metadata": {"x": [' + "{}," * (objects - 1) + '{}]}, "nbformat": 4, "nbformat_minor": 5}')


def bomb_requests(objects: int) -> dict[str, bytes]:
    """Validate requests as frames (attention_platform.grading.sandbox.protocol): the bomb in the
    notebook, and the same bomb in the request around it."""
    from attention_platform.grading.sandbox import protocol

    plain = nbformat.writes(new_notebook(cells=[new_code_cell("print(6 * 7)")]))
    in_request = ('{"op": "validate", "name": "bomb.ipynb", "files": [], "notebook": ' + json.dumps(plain)
                  + ', "x": [' + "{}," * (objects - 1) + "{}]}")
    return {"notebook": protocol.frame(protocol.JSON, json.dumps({"op": "validate", "name": "bomb.ipynb", "files": [],
                                                                  "notebook": bomb_notebook(objects)}).encode()),
            "request": protocol.frame(protocol.JSON, in_request.encode())}


@pytest.mark.parametrize("where", ["notebook", "request"])
def test_an_amplification_bomb_is_refused_before_it_is_built(where):
    """A request of ~3 MB holding a million empty objects (in the notebook's metadata, or in the
    request around it) cost the service 1.4 GB: it was parsed whole before anything looked at its
    shape. The service's own handler, in this process, answers the student that the notebook is too
    complex, and what it allocated meanwhile stays within a few times the request's size."""
    import socket
    import threading
    import tracemalloc

    from attention_platform.grading.sandbox import protocol
    from attention_platform.grading.validate_service import ValidateService

    sent = bomb_requests(1_000_000)[where]
    service = ValidateService(COURSE_ROOT, Path("/nonexistent/validate.sock"), (1000, 1000))
    service.validate(1000, "not a request")  # its imports (torch, nbformat) happen once, before it is measured
    ours, theirs = socket.socketpair()
    writer = threading.Thread(target=ours.sendall, args=(sent,))
    writer.start()
    tracemalloc.start()
    try:
        service.handle(theirs, 1000, True)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
        writer.join()
    _, reply = protocol.recv_frame(ours, time.monotonic() + 10, 1 << 20)
    ours.close()
    assert reply["op"] == "refused", reply
    assert reply["error"].startswith("Your notebook is too large or complex to validate: "), reply
    assert re.search(r"holds 1,000,0\d\d objects and lists, more than the [\d,]+ allowed", reply["error"]), reply
    assert peak < 6 * len(sent), (peak, len(sent))


def test_the_bomb_sent_to_the_running_service_is_answered_and_its_memory_stays_bounded(service):
    """The same attack on the running service, as the student: a clear answer, and the service's
    resident memory peak (VmHWM) grows by no more than a few times what was sent."""
    socket_path, student, _ = service
    pid = next(int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit()
               and str(socket_path).encode() in _cmdline(p))
    sent = bomb_requests(1_000_000)["notebook"]
    frame_file = Path(tempfile.gettempdir()) / "attention-vs-bomb.frame"

    def send(frame: bytes) -> dict:
        frame_file.write_bytes(frame)
        frame_file.chmod(0o644)
        try:
            return as_user(student, f"""
                import json, socket, time
                from attention_platform.grading.sandbox import protocol
                conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                conn.connect({str(socket_path)!r})
                conn.sendall(open({str(frame_file)!r}, "rb").read())
                _, answer = protocol.recv_frame(conn, time.monotonic() + 120, 1 << 20)
                print(json.dumps(answer))
            """)
        finally:
            frame_file.unlink()

    from attention_platform.grading.sandbox import protocol

    # a request that is no Validate: the service's one-off imports happen before it is measured
    assert send(protocol.frame(protocol.JSON, b'{"op": "hello"}'))["op"] == "refused"
    before = _memory_kb(pid, "VmRSS")
    answer = send(sent)
    assert answer["op"] == "refused" and answer["error"].startswith(
        "Your notebook is too large or complex to validate: "), answer
    grown = (_memory_kb(pid, "VmHWM") - before) * 1024
    assert grown < 8 * len(sent), (grown, len(sent))


def _cmdline(proc: Path) -> bytes:
    try:
        return (proc / "cmdline").read_bytes()
    except OSError:
        return b""


def _memory_kb(pid: int, field: str) -> int:
    line = next(ln for ln in Path(f"/proc/{pid}/status").read_text().splitlines() if ln.startswith(field + ":"))
    return int(line.split()[1])
