"""The sandboxed grading path gives the in-kernel path's grades.

Every answer of the proven catalogues (``grader_tests.self_attention.answers``: each buggy
answer fails exactly its documented checks, every correct idiom passes all)
graded through ``grade_notebook`` -- student cells and probes in a sandbox,
judges here -- must fail exactly the same checks, with the same teaching
messages as ``Check.run_in_process`` (the stock kernel path) produces.
"""

from __future__ import annotations

import ast
import base64
import marshal
import re
from pathlib import Path

import pytest

from grader_tests.self_attention.answers import release_notebook
from attention_platform.grading.sandbox import SandboxLimits, Zygote, first_use
from attention_platform.grading.sandbox.grading import GRADER_TESTS, grade_notebook, is_test_cell, probe_payload, seed_function
from grader_tests.self_attention.answers import BUGGY, CORRECT, class_namespace, with_answer
from grader_tests.registry import CHECKS

LIMITS = SandboxLimits(cell_timeout=20, notebook_timeout=60)


@pytest.fixture(scope="module")
def zygote():
    z = Zygote()
    yield z
    z.close()


@pytest.mark.root
@pytest.mark.parametrize("answer", BUGGY + CORRECT, ids=lambda a: a.name)
def test_same_verdicts_and_messages_as_the_kernel_path(zygote, answer):
    nb = with_answer(release_notebook(), answer.code)
    result = grade_notebook(nb, zygote=zygote, limits=LIMITS)
    assert result.stopped is None
    assert {c.check_id for c in result.checks.values() if not c.passed} == set(answer.fails)
    namespace = class_namespace(with_answer(release_notebook(), answer.code))
    for check_id, outcome in result.checks.items():
        verdict = CHECKS[check_id].run_in_process(namespace)
        assert (outcome.passed, outcome.message) == (verdict.passed, verdict.message), check_id


@pytest.mark.root
def test_check_cells_get_the_kernel_output_shapes(zygote):
    nb = with_answer(release_notebook(), next(a for a in BUGGY if a.name == "no_scale").code)
    grade_notebook(nb, zygote=zygote, limits=LIMITS)
    outputs = {c.metadata.nbgrader["grade_id"]: c.outputs for c in nb.cells
               if c.metadata.get("nbgrader", {}).get("grade", False)}
    assert outputs["check_shapes"][0]["output_type"] == "stream"
    assert outputs["check_shapes"][0]["text"].startswith("✓ Passed: ")
    failed = outputs["check_sqrt_d_scale"][0]
    assert failed["output_type"] == "error" and failed["ename"] == "CheckFailed"
    assert failed["traceback"] == [f"CheckFailed: {failed['evalue']}"]


@pytest.mark.root
def test_a_secret_seed_changes_the_inputs_not_the_verdicts(zygote):
    answer = next(a for a in BUGGY if a.name == "inverted_mask")
    result = grade_notebook(with_answer(release_notebook(), answer.code), zygote=zygote, limits=LIMITS,
                            seed_for=seed_function("course-secret"))
    assert {c.check_id for c in result.checks.values() if not c.passed} == set(answer.fails)


def _defined_names(path: Path) -> set[str]:
    """Functions, classes and constants a module defines itself (imports are not definitions)."""
    names = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(t.id for t in targets if isinstance(t, ast.Name))
    return names


def _code_only(source: str) -> str:
    """``source`` without its docstrings and comments."""
    tree = ast.parse(source)
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                and isinstance(body[0].value.value, str):
            body[0] = ast.Pass()
    return ast.unparse(tree)


def _module_name(path) -> str:
    return ".".join(("grader_tests", *path.relative_to(GRADER_TESTS).with_suffix("").parts)).removesuffix(".__init__")


def test_only_probe_code_reaches_the_sandbox():
    payload = probe_payload()
    shipped = {name for name, _ in payload["modules"]}
    modules = {_module_name(path): path for path in GRADER_TESTS.rglob("*.py") if "tests" not in path.parts[-3:-1]}
    probe_side = {"grader_tests.probing"} | {name for name in modules
                                             if name.endswith((".probes", "_probes")) and name.count(".") == 2}
    assert shipped == probe_side
    assert payload["checks_modules"] == sorted(n for n in probe_side if n.endswith(".probes"))
    assert "grader_tests.self_attention.probes" in payload["checks_modules"]
    assert payload["stubs"] == sorted(n for n in modules if n.endswith(".reference"))
    assert payload["packages"] == sorted({n.rsplit(".", 1)[0] for n in probe_side} - {"grader_tests"})
    assert set(payload["compiled"]) == shipped  # and each is exactly its shipped source, compiled
    for name, source in payload["modules"]:
        assert marshal.loads(base64.b64decode(payload["compiled"][name])) == compile(source, f"<grader:{name}>", "exec")
    text = "\n".join(source for _, source in payload["modules"])
    probe_names = set().union(*(_defined_names(modules[name]) for name in shipped))
    judge_side = [path for name, path in modules.items()
                  if name not in shipped and path.stem not in ("__init__", "wire")]
    assert {"reference", "judging", "attention_model", "registry", "catalogue", "self_attention_judges",
            "by_hand_judges", "answers"} <= {path.stem for path in judge_side}
    # The methods probes call on a student's layer, which the references define too.
    student_api = {"forward", "attention_weights", "split_heads", "merge_heads"}
    code = "\n".join(_code_only(source) for _, source in payload["modules"])  # names in prose are no leak
    for path in judge_side:
        for name in _defined_names(path) - probe_names - student_api:
            if len(name) >= 4:
                assert not re.search(rf"\b{re.escape(name)}\b", code), f"{path.stem}.{name} reaches the sandbox"
    reference_lines = [line.strip() for line in (GRADER_TESTS / "self_attention" / "reference.py").read_text().splitlines()
                       if len(line.strip()) > 25 and not line.strip().startswith(("#", '"', "from", "import"))]
    assert reference_lines and not [line for line in reference_lines if line in text]
    from grader_tests.self_attention import by_hand_judges, shapes_judges

    expected_values = [f"{float(v):.4f}" for v in by_hand_judges.PUBLISHED_WEIGHTS.flatten()[:12]] + [
        f"{by_hand_judges.JOURNEY_STARTS}", str(shapes_judges.QKV_WEIGHTS), "452_984_832", "12_288", "sqrt(dim)"]
    assert not [value for value in expected_values if value in text]


PLOT_CELL = """
import matplotlib.pyplot as plt
fig, ax = plt.subplots(figsize=(3, 2))
ax.plot([0, 1, 2], [2, 0, 1])
plt.show()
print("after the plot")
"""

# A student cannot smuggle markup into the feedback page through a fake image output.
FORGED_IMAGE_CELL = """
import sys
outputs = sys.stdout.sink
outputs.items.append({"output_type": "display_data",
                      "data": {"image/png": '"><script>alert(1)</script>', "text/plain": "forged"}})
outputs.items.append({"output_type": "display_data",
                      "data": {"image/png": "iVBORw0KGgo=" + "A" * 4_000_000, "text/plain": "huge"}})
"""


@pytest.mark.root
def test_a_picture_that_cannot_be_drawn_changes_no_grade(zygote, monkeypatch):
    """The teaching picture is feedback, never part of a grade: if drawing it fails (a bug, a
    spoiled measurement), its check keeps its verdict and the feedback has no picture."""
    from grader_tests.self_attention import pictures

    answer = CORRECT[0]
    drawn = grade_notebook(with_answer(release_notebook(), answer.code), zygote=zygote, limits=LIMITS)

    def broken(*args):
        raise IndexError("index 12 is out of bounds for axis 0 with size 6")

    monkeypatch.setattr(pictures, "draw", broken)
    nb = with_answer(release_notebook(), answer.code)
    result = grade_notebook(nb, zygote=zygote, limits=LIMITS)
    assert result.stopped is None
    assert {c.check_id: c.passed for c in result.checks.values()} == {c.check_id: c.passed for c in drawn.checks.values()}
    assert all(c.passed for c in result.checks.values()) and pictures.ANCHOR_CHECK in result.checks
    outputs = [o for cell in nb.cells for o in cell.get("outputs", [])]
    assert not any("image/png" in o.get("data", {}) for o in outputs)


def _run_cells(zygote, *sources, limits=LIMITS):
    """Each source as the first student cell of an otherwise empty notebook; their outputs."""
    import nbformat

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(src) for src in sources])
    grade_notebook(nb, zygote=zygote, limits=limits)
    return [cell.outputs for cell in nb.cells]


@pytest.mark.root
def test_figures_come_back_as_png_like_the_inline_backend(zygote):
    import base64

    (outputs,) = _run_cells(zygote, PLOT_CELL)
    images = [o for o in outputs if o["output_type"] == "display_data" and "image/png" in o["data"]]
    assert len(images) == 1, outputs
    assert base64.b64decode(images[0]["data"]["image/png"]).startswith(b"\x89PNG\r\n\x1a\n")
    streams = "".join(o.get("text", "") for o in outputs if o["output_type"] == "stream")
    assert "after the plot" in streams and "non-interactive" not in streams and "non-GUI" not in streams


@pytest.mark.root
def test_figures_are_flushed_per_cell_and_capped(zygote):
    one, none = _run_cells(zygote, PLOT_CELL, "1 + 1")
    assert sum("image/png" in o.get("data", {}) for o in one) == 1
    assert not any("image/png" in o.get("data", {}) for o in none), none  # closed after its cell
    many = "import matplotlib.pyplot as plt\nfor i in range(30):\n    plt.figure(); plt.plot([i, 0])"
    (capped,) = _run_cells(zygote, many, limits=SandboxLimits(cell_timeout=20, notebook_timeout=60, images_per_cell=4))
    assert sum("image/png" in o.get("data", {}) for o in capped) == 4
    assert any("figures not shown" in o.get("text", "") for o in capped), capped


@pytest.mark.root
def test_forged_image_outputs_are_dropped(zygote):
    (outputs,) = _run_cells(zygote, FORGED_IMAGE_CELL)
    assert not any("image/png" in o.get("data", {}) for o in outputs), outputs
    assert "<script>" not in str(outputs)


def test_graders_that_start_together_build_the_probe_payload_without_tripping_over_each_other(monkeypatch):
    """A batch's first submissions are graded on several threads at once, and each asks for the probe
    payload, which parses the probe modules. CPython 3.11 keeps ast.parse's recursion depth in state
    shared by every thread (python/cpython#106905): when one parse is paused -- a garbage collection
    running a finaliser that lets another thread in -- and another starts, one of them raises
    ``SystemError: AST constructor recursion depth mismatch`` and that student's grading failed.
    Here collections run often and every finaliser lets other threads in."""
    import gc
    import threading
    import time

    from attention_platform.grading.sandbox import grading

    class YieldsWhenCollected:
        def __init__(self):
            self.cycle = self

        def __del__(self):
            time.sleep(0)  # the GIL goes to another thread, mid-parse

    errors, payloads = [], []

    def grader(start):
        start.wait()
        try:
            for _ in range(3):
                YieldsWhenCollected()
                payloads.append(grading.probe_payload())
        except Exception as exc:  # noqa: BLE001 - what a student's grading would have failed with
            errors.append(repr(exc))

    threshold = gc.get_threshold()
    gc.set_threshold(50, 1, 1)
    try:
        for _ in range(20):
            monkeypatch.setattr(grading, "_PROBE_PAYLOAD", {})
            start = threading.Barrier(4)
            threads = [threading.Thread(target=grader, args=(start,)) for _ in range(4)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
    finally:
        gc.set_threshold(*threshold)
        gc.collect()
    assert errors == []
    assert all(payload == payloads[0] for payload in payloads) and payloads[0]["modules"]


def test_a_request_is_built_once_per_seed_and_every_judge_gets_its_own_copy(monkeypatch):
    """Requests are remembered per (check, seed) and shared; a judge that changed its request in place
    (none should) must not change what the next submission is judged against, nor what its probe gets."""
    import dataclasses

    import torch

    from attention_platform.grading.sandbox import grading
    from attention_platform.grading.sandbox.protocol import WIRE
    from grader_tests import wire

    monkeypatch.setattr(grading, "_VERDICTS", grading.OrderedDict())
    check = CHECKS["sqrt_d_scale"]
    seed = seed_function("a course secret")(check)
    first, payload = grading.built_request(check, seed)
    fresh = check.build_request(seed)
    assert first.keys() == fresh.keys()
    assert all(torch.equal(first[k], fresh[k]) if isinstance(fresh[k], torch.Tensor) else first[k] == fresh[k]
               for k in fresh)
    assert payload == wire.encode(fresh)
    seen = []

    def careless(request, response):
        seen.append({k: v.clone() for k, v in request.items() if isinstance(v, torch.Tensor)})
        for value in request.values():
            if isinstance(value, torch.Tensor) and value.is_floating_point():
                value.mul_(0)

    careless_check = dataclasses.replace(check, judge_response=careless)
    for reply in (b"a reply", b"another reply"):  # two replies, both judged
        grading.judged(careless_check, seed, first, WIRE, wire.encode({"reply": reply.decode()}))
    assert len(seen) == 2 and all(torch.equal(v, fresh[k]) for judged in seen for k, v in judged.items())
    second, again = grading.built_request(check, seed)
    assert again == payload
    assert all(torch.equal(second[k], fresh[k]) for k in fresh if isinstance(fresh[k], torch.Tensor))
    other, _ = grading.built_request(check, seed + 1)
    assert not all(torch.equal(other[k], fresh[k]) for k in fresh if isinstance(fresh[k], torch.Tensor))


OUTPUTS = [  # (output type, fields) as grade_notebook writes them
    ("stream", {"name": "stdout", "text": "✓ Passed: shapes\n"}),
    ("stream", {"name": "stderr", "text": ""}),
    ("error", {"ename": "CheckFailed", "evalue": "a message", "traceback": ["CheckFailed: a message"]}),
    ("display_data", {"data": {"text/plain": "<Figure>", "image/png": "iVBORw0KGgo="},
                      "metadata": {"image/png": {"alt": "words"}}}),
    ("execute_result", {"data": {"text/plain": "3"}, "execution_count": None}),
]


@pytest.mark.parametrize("kind, fields", OUTPUTS, ids=[f"{kind}-{i}" for i, (kind, _) in enumerate(OUTPUTS)])
def test_outputs_are_what_nbformat_makes_and_valid(kind, fields):
    import nbformat
    from nbformat.v4 import new_output

    from attention_platform.grading.sandbox.grading import _output

    ours = _output(kind, **fields)
    assert ours == new_output(kind, **fields)  # new_output validates its result
    nbformat.validate(ours, ref=kind, version=4)


def test_a_reply_seen_before_gets_its_verdict_again_without_judging_and_others_are_judged(monkeypatch):
    """Verdicts are remembered by (check, seed, the reply's exact bytes): a byte-identical reply
    gets the same verdict, any other reply, seed or check is judged; a judge that raised is not
    remembered (what failed may have been the grader)."""
    import dataclasses

    from attention_platform.grading.sandbox import grading
    from attention_platform.grading.sandbox.protocol import WIRE
    from grader_tests import wire

    monkeypatch.setattr(grading, "_VERDICTS", grading.OrderedDict())
    calls = []
    real = grading._judge

    def counting(check, request, kind, reply):
        calls.append(reply)
        return real(check, request, kind, reply)

    monkeypatch.setattr(grading, "_judge", counting)
    check, seed = CHECKS["softmax_dim"], 7
    request, _ = grading.built_request(check, seed)
    namespace = class_namespace(with_answer(release_notebook(), CORRECT[0].code))
    reply = wire.encode(check.probe(namespace, request))
    first = grading.judged(check, seed, request, WIRE, reply)
    assert first.passed and len(calls) == 1
    again = grading.judged(check, seed, request, WIRE, bytes(reply))
    assert again == first and len(calls) == 1  # the same bytes: not judged again
    wrong_code = next(a for a in BUGGY if a.name == "softmax_over_queries").code
    wrong = wire.encode(check.probe(class_namespace(with_answer(release_notebook(), wrong_code)), request))
    assert not grading.judged(check, seed, request, WIRE, wrong).passed and len(calls) == 2
    grading.judged(check, seed + 1, grading.built_request(check, seed + 1)[0], WIRE, reply)
    assert len(calls) == 3  # another seed: another request, judged
    broken = dataclasses.replace(check, judge_response=lambda request, response: 1 / 0)
    for _ in range(2):  # a judge that raises
        verdict = grading.judged(broken, seed, request, WIRE, wire.encode({"weights": 1.0}))
        assert not verdict.passed and "could not judge" in verdict.message
    assert len(calls) == 5


@pytest.mark.root
def test_a_sandbox_runs_the_compiled_probes_of_its_own_python_and_compiles_the_sources_otherwise(zygote):
    payload = probe_payload()
    broken = {name: base64.b64encode(marshal.dumps(compile("raise ImportError('compiled copy')", name, "exec"))).decode()
              for name in payload["compiled"]}
    for magic, expected in ((payload["magic"], False), ("00000000", True)):  # this Python's bytecode, another's
        sandbox = zygote.spawn(LIMITS)
        try:
            _, reply = sandbox.call(dict(payload, compiled=broken, magic=magic))
        finally:
            sandbox.close()
        assert reply["ok"] is expected, reply


@pytest.mark.parametrize("first_uses", [(), first_use.ALL])
def test_the_workers_warm_up_leaves_torchs_random_state_as_it_found_it(first_uses):
    """The sandbox worker trains, seeds and prints once before it forks (zygote._first_use); a
    notebook must find the seed and the generator's state the worker started with."""
    import torch

    from attention_platform.grading.sandbox import zygote as worker

    seed, state = torch.initial_seed(), torch.get_rng_state()
    worker._first_use(first_uses)
    assert torch.initial_seed() == seed
    assert torch.equal(torch.get_rng_state(), state)


def test_every_grading_thread_judges_on_one_torch_thread():
    """The judges' tensors are tiny: torch's per-core intra-op threads only spin beside them (twice
    the judges' CPU time). Importing the grading module sets one thread for the whole process, so
    the grading threads started after it -- the batch's pool, the feedback engine's workers -- inherit
    it. Run with two OpenMP threads asked for, so the default is not already one on any machine."""
    import os
    import subprocess
    import sys

    program = ("import threading, torch\n"
               "import attention_platform.grading.sandbox.grading\n"
               "seen = []\n"
               "worker = threading.Thread(target=lambda: seen.append(torch.get_num_threads()))\n"
               "worker.start(); worker.join()\n"
               "print(torch.get_num_threads(), seen[0])\n")
    env = dict(os.environ, OMP_NUM_THREADS="2")
    done = subprocess.run([sys.executable, "-c", program], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["1", "1"]


OWN_NOTEBOOK = """import nbformat
nb = nbformat.read("submission.ipynb", as_version=4)
nbformat.validate(nb)
checks = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade") and not c.metadata["nbgrader"].get("solution")]
print(len(nb.cells), len(checks), all(c.source == "" and c.outputs == [] for c in checks))
"""


@pytest.mark.root
def test_the_notebook_a_sandbox_holds_is_the_students_with_the_check_cells_empty(zygote):
    import nbformat

    nb = release_notebook()
    nb.cells.insert(0, nbformat.v4.new_code_cell(OWN_NOTEBOOK))
    checks = sum(1 for cell in nb.cells if is_test_cell(cell))
    assert checks >= 10
    grade_notebook(nb, zygote=zygote, limits=LIMITS)
    assert nb.cells[0].outputs[0].text == f"{len(nb.cells)} {checks} True\n"


# A cell that says how many bytes wait unread in the sandbox's socket (fd 3) after a moment.
BYTES_WAITING = """import fcntl, struct, termios, time
time.sleep(0.3)
print(struct.unpack("i", fcntl.ioctl(3, termios.FIONREAD, bytes(4)))[0])"""


@pytest.mark.root
def test_a_sandbox_finds_its_next_cells_waiting_instead_of_sleeping_until_the_grader_sends_each(zygote):
    """Commands are sent ahead of their replies (client.Sandbox.send): the sandbox starts the next one
    without a round trip through the grader, which on this machine cost ~15 CPU-ms a notebook."""
    first, *_ = _run_cells(zygote, BYTES_WAITING, "1 + 1", "2 + 2")
    assert int(first[0]["text"]) > 0, first


@pytest.mark.root
def test_no_cell_before_the_checks_finds_the_probe_code_in_its_socket(zygote):
    """The probe code is sent only once every cell before the first check has answered: a cell that
    could read it from its socket could print it into the feedback."""
    import nbformat

    nb = with_answer(release_notebook(), CORRECT[0].code)
    first_check = next(i for i, cell in enumerate(nb.cells) if is_test_cell(cell))
    nb.cells.insert(first_check, nbformat.v4.new_code_cell(BYTES_WAITING))
    result = grade_notebook(nb, zygote=zygote, limits=LIMITS)
    assert nb.cells[first_check].outputs[0]["text"] == "0\n"
    assert result.stopped is None and all(check.passed for check in result.checks.values())


@pytest.mark.root
def test_a_cell_sent_ahead_has_its_whole_timeout_from_when_it_starts(zygote):
    """Three cells of 1.2 s each with 2 s allowed per cell: each one's clock starts when the one before
    it answered, not when the grader sent it."""
    limits = SandboxLimits(cell_timeout=2, notebook_timeout=30)
    outputs = _run_cells(zygote, *["import time; time.sleep(1.2); print('done')"] * 3, limits=limits)
    assert outputs == [[{"output_type": "stream", "name": "stdout", "text": "done\n"}]] * 3, outputs


@pytest.mark.root
def test_long_cells_with_long_outputs_sent_ahead_cannot_deadlock_grader_and_sandbox(zygote):
    """Sent ahead without a bound, 40 cells of 50 kB each would fill the sandbox's socket while the
    sandbox waits for the grader to read its 80 kB replies: each would wait on the other until the
    cell timeout. The grader keeps at most Sandbox.SEND_AHEAD_BYTES unanswered."""
    limits = SandboxLimits(cell_timeout=10, notebook_timeout=60)
    cells = [f"# {'x' * 50_000}\nprint('{i % 10}' * 80_000)" for i in range(40)]
    outputs = _run_cells(zygote, *cells, limits=limits)
    assert [out[0]["text"] for out in outputs] == [f"{i % 10}" * 80_000 + "\n" for i in range(40)]


@pytest.mark.root
def test_a_sandbox_that_exits_with_commands_still_queued_is_reported_as_exited(zygote):
    """The cells after the one that exits are already sent or still queued; sending to a sandbox
    that is gone fails quietly, and the cell that exited says how."""
    padding = [f"# {'x' * 20_000}\n{i}" for i in range(10)]
    outputs = _run_cells(zygote, "print(1)", "import os; os._exit(3)", *padding)
    assert outputs[0] == [{"output_type": "stream", "name": "stdout", "text": "1\n"}]
    (died,) = outputs[1]
    assert died["ename"] == "DeadKernelError" and "exit code 3" in died["evalue"], died
    assert outputs[2:] == [[]] * 10
