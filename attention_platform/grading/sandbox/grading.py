"""Grade one notebook: student cells and probes in a sandbox, judges here.

``grade_notebook`` is the single grading path shared by the ``SandboxedExecute``
nbgrader preprocessor (``nbgrader autograde``, the formgrader's button) and the
``autograde-batch`` command, so both give the same grades.

Order of events inside the sandbox:

1. phase 1: every student (non-check) code cell runs in notebook order; its
   stdout/stderr/display output is captured, bounded, and copied into the
   notebook by this trusted process;
2. phase 2, at the first check cell: the probe code is sent into the sandbox (its
   sources, and the same compiled here), and only that: every assignment's ``probes`` and the probe-side modules it
   imports (``probing``, the ``*_probes``), never a judge, an expected value or
   the reference (every assignment's ``reference`` is an empty stub in there). From then
   on nothing the sandbox prints reaches the notebook: student cells placed after
   a check still run (same grades as the stock kernel) but their output is withheld;
3. for each check cell, this process builds the request from a seed it chose,
   the sandbox runs the probe on the student's class and returns raw results
   (``grader_tests.wire``: tensors, strings, numbers), and this process runs the
   judge and writes the cell's output: ``✓ Passed: <title>`` on stdout, or a
   one-line ``CheckFailed`` error carrying the teaching message.

No text a sandbox sends after phase 1 reaches a person: the notebook can hook how the probes are loaded
and put their source into any string, so the judges read a reply's errors as reasons of a fixed form
(``grader_tests.reasons``) and every error the sandbox reports itself (a probe that stopped, probes
that could not be loaded) becomes the name of a builtin or torch exception at most.

A check cell's score therefore depends only on what the judge decided here, from
raw results it compares with values it computes itself: code in the notebook can
rewrite a reply (it shares the sandbox's interpreter), but not turn a wrong
computation into the numbers a right one gives without doing that computation.
"""

from __future__ import annotations

import ast
import base64
import copy
import functools
import hashlib
import json
import logging
import marshal
import threading
import time
import zlib
from collections import OrderedDict
from dataclasses import dataclass, field
from importlib.util import MAGIC_NUMBER
from pathlib import Path
from typing import Callable

import nbformat
import torch
from nbformat import NotebookNode

import grader_tests
from grader_tests import wire
from grader_tests.judging import Verdict
from grader_tests.reasons import exception_name, failure_phrase
from grader_tests.registry import ASSIGNMENTS, PROBE_MODULES, REFERENCE_MODULES, Check, check_for_grade_id

from .client import SandboxError, SandboxLimits, SandboxTimeout, Zygote, get_zygote
from .files import submission_files  # noqa: F401 - part of this module's interface

# Where the probes' sources are read from: the package as imported (the formgrader's own copy
# when it runs as the grader account, the checkout otherwise).
GRADER_TESTS = Path(grader_tests.__file__).resolve().parent
# Empty modules inside a sandbox, so that a notebook importing a reference finds nothing in it.
STUB_MODULES = REFERENCE_MODULES
# The judges work on tensors of a few hundred values, from several grading threads at once: torch's
# intra-op threads (one per core) cannot speed such operations up, they only spin while waiting for
# them, burning CPU time that a class's judgements do not need.
# A grading process judges on one thread per grading thread, as the sandboxes already compute
# (zygote.py). Set here, in the thread that imports this module (every grading process imports it
# before grading): a value set by a grading thread later would hold for that thread only.
torch.set_num_threads(1)

WITHHELD = "[output withheld: this cell runs after the hidden checks were loaded]\n"


@dataclass
class CheckResult:
    check_id: str
    passed: bool
    message: str
    points: float


@dataclass
class NotebookResult:
    checks: dict[str, CheckResult] = field(default_factory=dict)
    stopped: str | None = None  # why the sandbox stopped early, if it did
    layers: list = field(default_factory=list)
    seconds: float = 0.0
    judging: float = 0.0  # of ``seconds``, in this process's judges
    picturing: float = 0.0  # of ``seconds``, reading and drawing the teaching pictures

    @property
    def score(self) -> float:
        return sum(c.points for c in self.checks.values() if c.passed)


def _output(output_type: str, data: dict | None = None, **fields) -> NotebookNode:
    """An output as ``nbformat.v4.new_output`` makes it, without its schema validation (a third of
    a millisecond each, twenty per notebook): every field here is text, a list of text or a bundle
    of text and checked PNG that this process built itself."""
    defaults = {"stream": {"name": "stdout", "text": ""},
                "display_data": {"metadata": {}, "data": {}},
                "execute_result": {"metadata": {}, "data": {}, "execution_count": None},
                "error": {"ename": "NotImplementedError", "evalue": "", "traceback": []}}[output_type]
    output = dict(output_type=output_type, **defaults)
    output.update(fields)
    if data is not None:
        output["data"] = data
    return nbformat.from_dict(output)


def is_test_cell(cell) -> bool:
    meta = cell.get("metadata", {}).get("nbgrader", {})
    return cell.cell_type == "code" and bool(meta.get("grade")) and not meta.get("solution")


def seed_function(secret: str = "") -> Callable[[Check], int]:
    """``Check.default_seed`` (same grades as the stock path) unless a secret is set."""
    if not secret:
        return lambda check: check.default_seed()
    return lambda check: zlib.crc32(f"{secret}:{check.id}".encode()) & 0x7FFFFFFF


_PROBE_PAYLOAD: dict = {}
# Built by one thread while the others wait: CPython 3.11's ast.parse keeps its recursion depth in
# state every thread shares, so two parses at once can fail with "AST constructor recursion depth
# mismatch" (python/cpython#106905) -- a batch's first graders all ask for the payload together.
_PROBE_PAYLOAD_LOCK = threading.Lock()


def _local_imports(name: str, source: str) -> set[str]:
    """The ``grader_tests`` modules that module ``name`` imports (relative imports resolved against its
    package). ``from <package> import x`` counts ``<package>.x`` when that is a module of ours."""
    package = name.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                module = f"{base}.{node.module}" if node.module else base
            else:
                module = node.module or ""
            if module == "grader_tests" or module.startswith("grader_tests."):
                found.add(module)
                found.update(f"{module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("grader_tests."))
    return {module for module in found if _source_path(module).is_file()}


def _source_path(name: str) -> Path:
    return GRADER_TESTS.joinpath(*name.split(".")[1:]).with_suffix(".py")


def probe_payload() -> dict:
    """What phase 2 sends into a sandbox: the source of every assignment's probes module and of every
    ``grader_tests`` module they import, directly or not (the probe side only)."""
    with _PROBE_PAYLOAD_LOCK:
        return _PROBE_PAYLOAD or _build_probe_payload()


def _build_probe_payload() -> dict:
    sources: dict[str, str] = {}
    todo = list(PROBE_MODULES)
    while todo:
        name = todo.pop()
        if name in sources or name in STUB_MODULES:
            continue
        sources[name] = _source_path(name).read_text()
        todo.extend(_local_imports(name, sources[name]))
    # The packages between grader_tests and the modules, empty inside the sandbox (their __init__ is
    # documentation only).
    packages = sorted({name.rsplit(".", depth)[0] for name in [*sources, *STUB_MODULES]
                       for depth in range(1, name.count("."))} - {"grader_tests"})
    # The same modules compiled here once, for a sandbox of this very interpreter (the bytecode magic
    # says which), not in every sandbox, which would pay it each time. A sandbox of another Python
    # compiles the sources.
    compiled = {name: base64.b64encode(marshal.dumps(compile(source, f"<grader:{name}>", "exec"))).decode()
                for name, source in sources.items()}
    _PROBE_PAYLOAD.update(op="probes", modules=sorted(sources.items()), stubs=list(STUB_MODULES), packages=packages,
                          checks_modules=list(PROBE_MODULES), compiled=compiled, magic=MAGIC_NUMBER.hex())
    return _PROBE_PAYLOAD


PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _clean_png(value, max_bytes: int) -> str | None:
    """A sandbox's figure, re-encoded here, or None: only real PNG data under the size cap
    leaves a sandbox, so nothing but an image can reach the feedback page through it."""
    if not isinstance(value, str) or len(value) > (max_bytes * 4) // 3 + 4:
        return None
    try:
        png = base64.b64decode(value, validate=True)
    except (ValueError, TypeError):
        return None
    return base64.b64encode(png).decode("ascii") if png.startswith(PNG_MAGIC) and len(png) <= max_bytes else None


def _clean_outputs(items, limit: int, images: int = 0, image_bytes: int = 0) -> list:
    """Rebuild a sandbox's cell outputs from plain strings and checked PNGs only, bounded."""
    outputs, used = [], 0
    if not isinstance(items, list):
        return outputs

    def text(value, room):
        return value[:room] if isinstance(value, str) else ""

    for item in items[:200]:
        if not isinstance(item, dict) or used >= limit:
            break
        room = limit - used
        kind = item.get("output_type")
        if kind == "stream" and item.get("name") in ("stdout", "stderr"):
            body = text(item.get("text"), room)
            outputs.append(_output("stream", name=item["name"], text=body))
        elif kind in ("execute_result", "display_data"):
            data = item.get("data")
            body = text(data.get("text/plain") if isinstance(data, dict) else None, room)
            extra = {"execution_count": None} if kind == "execute_result" else {}
            bundle = {"text/plain": body}
            if kind == "display_data" and isinstance(data, dict) and "image/png" in data and images > 0:
                png = _clean_png(data["image/png"], image_bytes)
                if png is None:
                    continue  # forged or too big: dropped, with its caption
                bundle["image/png"], images = png, images - 1
            outputs.append(_output(kind, data=bundle, **extra))
        elif kind == "error":
            ename = text(item.get("ename"), 200) or "Error"
            evalue = text(item.get("evalue"), min(room, 4000))
            tb = [line[:2000] for line in item.get("traceback", [])[:200] if isinstance(line, str)] \
                if isinstance(item.get("traceback"), list) else []
            outputs.append(_output("error", ename=ename, evalue=evalue, traceback=tb or [f"{ename}: {evalue}"]))
            body = evalue + "".join(tb)
        else:
            continue
        used += len(body)
    if used >= limit:
        outputs.append(_output("stream", name="stdout", text=f"\n[output truncated by the grader after {limit} characters]\n"))
    return outputs


def _verdict_output(check: Check, verdict: Verdict):
    if verdict.passed:
        return _output("stream", name="stdout", text=f"✓ Passed: {check.title}\n")
    return _output("error", ename="CheckFailed", evalue=verdict.message,
                      traceback=[f"CheckFailed: {verdict.message}"])


class _Unjudged(Verdict):
    """A failure of the judge itself (it raised): never remembered for other replies, in case what
    failed was this process (out of memory) rather than the reply."""


def _judge(check: Check, request: dict, kind: bytes, reply) -> Verdict:
    if kind == b"J":  # the probe itself stopped: its error text, like all a sandbox says, is never shown
        error = reply.get("error") if isinstance(reply, dict) else None
        return Verdict(False, f"The hidden check could not run your code: it {failure_phrase(exception_name(error))}.")
    try:
        response = wire.decode(reply)
    except wire.WireError as exc:
        return Verdict(False, f"Your code's results could not be read by the grader ({exc}).")
    try:
        verdict = check.judge(request, response)
    except Exception as exc:  # noqa: BLE001 - a malformed response fails its check, never the grader
        return _Unjudged(False, "Your code returned something the grader could not judge "
                                f"({exception_name(type(exc).__name__)}).")
    return verdict if isinstance(verdict, Verdict) else Verdict(False, "The grader could not judge this check.")


_VERDICTS: OrderedDict[tuple, Verdict] = OrderedDict()
_VERDICTS_KEPT = 4096  # ~100 bytes each
_VERDICTS_LOCK = threading.Lock()


def judged(check: Check, seed: int, request: dict, kind: bytes, reply) -> Verdict:
    """The verdict on ``reply``, judged against a copy of ``request`` of its own (requests are shared:
    ``built_request``), remembered by the check, its seed (which decides the request) and
    the SHA-256 of the reply exactly as the sandbox sent it: a judge is a function of its request
    and the reply, so a reply seen before gets the verdict it got then without judging it again.
    Students whose code computes the same numbers send byte-identical replies: about half of
    a varied class's replies (the benchmark's 100 submissions, 80 different answers)."""
    body = reply if isinstance(reply, bytes) else json.dumps(reply, sort_keys=True, default=repr).encode()
    key = (check.id, seed, kind, hashlib.sha256(body).digest())
    with _VERDICTS_LOCK:
        verdict = _VERDICTS.get(key)
        if verdict is not None:
            _VERDICTS.move_to_end(key)
            return verdict
    verdict = _judge(check, _own_copy(request), kind, reply)
    if isinstance(verdict, _Unjudged):
        return verdict
    with _VERDICTS_LOCK:
        _VERDICTS[key] = verdict
        if len(_VERDICTS) > _VERDICTS_KEPT:
            _VERDICTS.popitem(last=False)
    return verdict


def _pictures_after(check: Check):
    """The assignment's ``pictures`` if ``check`` is the one whose feedback carries its picture, else None."""
    pictures = ASSIGNMENTS[check.assignment].pictures if check.assignment in ASSIGNMENTS else None
    return pictures if pictures is not None and check.id == pictures.ANCHOR_CHECK else None


@functools.cache
def _teaching_payload(pictures) -> bytes:
    """The teaching request's wire encoding: the same for every submission (``pictures.teaching``)."""
    return wire.encode(pictures.teaching()[0])


def _send_teaching_probe(sandbox, pictures) -> None:
    """Ask ``sandbox`` for what the assignment's picture draws, on its public teaching input (the reply
    is read by ``_teaching_picture``)."""
    sandbox.send({"op": "probe", "check": pictures.TEACHING_PROBE}, wire_payload=_teaching_payload(pictures))


def _teaching_picture(sandbox, pictures) -> list:
    """What the student's code gave on the public teaching input, drawn here beside what was expected
    (the assignment's ``pictures``): a display_data PNG with alt text, or nothing if their code
    returned nothing usable. Never changes a grade."""
    try:
        kind, reply = sandbox.reply()
        picture = pictures.teaching_picture(wire.decode(reply)) if kind != b"J" else None
    except (SandboxError, wire.WireError):
        return []
    except Exception:  # noqa: BLE001 - drawing failed (a bug, a spoiled measurement): the feedback goes without it
        logging.getLogger(__name__).exception("the teaching picture could not be drawn")
        return []
    if picture is None:
        return []
    png, alt = picture
    return [_output("display_data", data={"image/png": png, "text/plain": alt},
                       metadata={"image/png": {"alt": alt}, "attention_course": {"teaching_picture": True}})]


_REQUESTS: dict[tuple[str, int], tuple[dict, bytes]] = {}
_REQUESTS_KEPT = 512  # (check, seed) pairs: a course grades with one seed per check


def built_request(check: Check, seed: int) -> tuple[dict, bytes]:
    """``check``'s request for ``seed`` and its wire encoding. A request depends on nothing but its
    seed, and a course grades every submission with the same seeds, so each is built once per
    process (some draw hundreds of candidates: a tenth of a submission's grading CPU in all). The
    request returned is the one every caller shares: read it, never change it (``judged`` gives each
    judge a copy of its own)."""
    key = (check.id, seed)
    built = _REQUESTS.get(key)
    if built is None:
        request = check.build_request(seed)
        built = (request, wire.encode(request))
        if len(_REQUESTS) >= _REQUESTS_KEPT:
            _REQUESTS.clear()
        _REQUESTS[key] = built
    return built


def _own_copy(request: dict) -> dict:
    """A request a judge may change without changing anyone else's: copied only when a reply is judged,
    not for the half of a class's replies whose verdict is remembered."""
    return {name: value.clone() if isinstance(value, torch.Tensor) else copy.deepcopy(value)
            for name, value in request.items()}  # flat (grader_tests/judging.py); deepcopy is much slower


def _stopped_verdict(reason: str, cell_source: str | None) -> Verdict:
    where = ""
    if cell_source:
        first = next((line.strip() for line in cell_source.splitlines() if line.strip()), "")
        where = f" in the cell starting `{first[:60]}`"
    return Verdict(False, f"No hidden check could run: your notebook was stopped{where}: {reason}. "
                          "Fix that cell (run your notebook top to bottom with Restart & Run All) and resubmit.")


def working_copy(nb) -> str:
    """The student's own notebook as the sandbox sees it: check cells left empty. Written compactly
    by the C JSON encoder, without copying the notebook (nbformat's writer copies it, splits its
    lines and indents, for every notebook graded); any notebook reader reads the same."""
    cells = [dict(cell, source="", outputs=[]) if is_test_cell(cell) else cell for cell in nb.cells]
    return json.dumps(dict(nb, cells=cells), ensure_ascii=False)


def _send_files(sandbox, nb_text: str, filename: str, extra_files: dict[str, bytes] | None) -> None:
    files = [[filename, base64.b64encode(nb_text.encode()).decode()]]
    files += [[name, base64.b64encode(data).decode()] for name, data in (extra_files or {}).items()]
    sandbox.send({"op": "files", "files": files})


def _read_files_answer(sandbox, result: NotebookResult) -> None:
    """Read the answer to ``_send_files``: a sandbox that stopped already stops the whole notebook."""
    try:
        sandbox.reply()
    except SandboxError as exc:
        result.stopped = exc.reason


def _read_cell(sandbox, cell, limits: SandboxLimits, result: NotebookResult, *, withheld: bool = False) -> bool:
    """Read the reply to ``cell`` (sent ahead) into its outputs -- cleaned, or WITHHELD once the hidden
    checks are loaded; False, with the error as the cell's output and ``result.stopped`` set, if the
    sandbox stopped instead of answering."""
    try:
        kind, reply = sandbox.reply()
    except SandboxError as exc:
        result.stopped = exc.reason
        ename = "CellTimeoutError" if isinstance(exc, SandboxTimeout) else "DeadKernelError"
        cell.outputs = [_output("error", ename=ename, evalue=exc.reason, traceback=[f"{ename}: {exc.reason}"])]
        return False
    if withheld:
        cell.outputs = [_output("stream", name="stdout", text=WITHHELD)]
    else:
        items = reply.get("outputs") if kind == b"J" and isinstance(reply, dict) else None
        cell.outputs = _clean_outputs(items, limits.output_chars, limits.images_per_cell, limits.image_bytes)
    return True


def _code_cells_cleared(nb) -> list:
    """``nb``'s code cells, each numbered as a kernel run from the top numbers it and without outputs."""
    code = [cell for cell in nb.cells if cell.cell_type == "code"]
    for count, cell in enumerate(code, 1):
        cell.execution_count, cell.outputs = count, []
    return code


def _unregistered_output(grade_id: str) -> NotebookNode:
    return _output("error", ename="CheckFailed",
                   evalue=f"{grade_id!r} is not a registered hidden check, so the sandboxed grader cannot score it.",
                   traceback=[f"CheckFailed: {grade_id!r} is not a registered hidden check"])


def grade_notebook(nb, *, zygote: Zygote | None = None, limits: SandboxLimits | None = None,
                   seed_for: Callable[[Check], int] | None = None, filename: str = "submission.ipynb",
                   extra_files: dict[str, bytes] | None = None, log=None) -> NotebookResult:
    """Execute ``nb`` (a sanitized submission) in a fresh sandbox; write outputs into
    its code cells; return the judged results of its check cells. ``extra_files``
    (relative path -> bytes) are the submission's other files, e.g. its data/.

    Each phase's commands are sent ahead of their replies (``Sandbox.send``): the student's cells
    together, then -- only once every one of their outputs is back, so no cell of phase 1 can read
    the probe code from its socket and print it -- the probe code with the rest of the notebook in
    order (requests depend only on their seeds, never on an earlier reply)."""
    started = time.monotonic()
    limits = limits or SandboxLimits()
    seed_for = seed_for or seed_function()
    result = NotebookResult()
    sandbox = (zygote or get_zygote()).spawn(limits)  # SandboxUnavailable propagates: no grade at all
    result.layers = sandbox.layers
    try:
        _send_files(sandbox, working_copy(nb), filename, extra_files)  # as submitted: outputs and all
        code = _code_cells_cleared(nb)
        grade_ids = [str(cell["metadata"]["nbgrader"].get("grade_id", "")) if is_test_cell(cell) else None
                     for cell in code]
        checks = [check_for_grade_id(grade_id) if grade_id is not None else None for grade_id in grade_ids]
        phase_2 = next((i for i, check in enumerate(checks) if check is not None), len(code))
        stopped_at: str | None = None  # the source of the cell the sandbox stopped in, if one did
        for cell, grade_id in zip(code[:phase_2], grade_ids):
            if grade_id is None:
                sandbox.send({"op": "cell", "source": cell.source})
        _read_files_answer(sandbox, result)
        for cell, grade_id in zip(code[:phase_2], grade_ids):
            if grade_id is not None:
                cell.outputs = [_unregistered_output(grade_id)]
            elif result.stopped is None and not _read_cell(sandbox, cell, limits, result):
                stopped_at = cell.source
        if phase_2 < len(code):
            _grade_checks(sandbox, code[phase_2:], grade_ids[phase_2:], checks[phase_2:], limits, seed_for,
                          result, stopped_at)
    finally:
        sandbox.close()
    result.seconds = time.monotonic() - started
    if log and result.stopped:
        log(f"sandbox stopped early: {result.stopped}")
    return result


def _grade_checks(sandbox, cells: list, grade_ids: list, checks: list, limits: SandboxLimits,
                  seed_for: Callable[[Check], int], result: NotebookResult, stopped_at: str | None) -> None:
    """Phase 2, from the first registered check cell on: load the probe code, then each check's probe
    (judged here) and each student cell (run, output withheld) in notebook order."""
    requests: list = []  # per cell: (seed, request) of its check, or None
    if result.stopped is None:
        sandbox.send(probe_payload())
        for cell, grade_id, check in zip(cells, grade_ids, checks):
            if check is not None:
                seed = seed_for(check)
                request, payload = built_request(check, seed)
                sandbox.send({"op": "probe", "check": check.id}, wire_payload=payload)
                requests.append((seed, request))
                if (pictures := _pictures_after(check)) is not None:
                    _send_teaching_probe(sandbox, pictures)
                continue
            if grade_id is None:
                sandbox.send({"op": "cell", "source": cell.source})
            requests.append(None)
        try:
            _, reply = sandbox.reply()
            if not (isinstance(reply, dict) and reply.get("ok")):
                error = exception_name(reply.get("error") if isinstance(reply, dict) else None)
                result.stopped = (f"the hidden checks could not be loaded next to your code ({error}): code in your "
                                  "notebook changes how Python imports or runs modules")
        except SandboxError as exc:
            result.stopped = exc.reason
    for index, (cell, grade_id, check) in enumerate(zip(cells, grade_ids, checks)):
        if check is None:
            if grade_id is not None:
                cell.outputs = [_unregistered_output(grade_id)]
            elif result.stopped is None and not _read_cell(sandbox, cell, limits, result, withheld=True):
                stopped_at = cell.source
            continue
        if result.stopped is not None:
            verdict = _stopped_verdict(result.stopped, stopped_at)
        else:
            seed, request = requests[index]
            try:
                kind, reply = sandbox.reply()
                judging = time.monotonic()
                verdict = judged(check, seed, request, kind, reply)
                result.judging += time.monotonic() - judging
            except SandboxError as exc:
                result.stopped = exc.reason
                verdict = Verdict(False, f"This check could not finish: {exc.reason}.")
        cell.outputs = [_verdict_output(check, verdict)]
        result.checks[check.id] = CheckResult(check.id, verdict.passed, verdict.message, float(check.points))
        if (pictures := _pictures_after(check)) is not None and result.stopped is None:
            picturing = time.monotonic()
            cell.outputs += _teaching_picture(sandbox, pictures)
            result.picturing += time.monotonic() - picturing


def public_checks_of(nb) -> list[Check]:
    """The public checks (``HiddenCheck.public``) whose check cells ``nb`` has, in its order, each once:
    what Validate may run. A hidden check is never among them, whatever the notebook's metadata says."""
    found: list[Check] = []
    for cell in nb.cells:
        if is_test_cell(cell):
            check = check_for_grade_id(str(cell["metadata"]["nbgrader"].get("grade_id", "")))
            if check is not None and check.definition.public and check not in found:
                found.append(check)
    return found


def execute_notebook(nb, *, zygote: Zygote | None = None, limits: SandboxLimits | None = None,
                     filename: str = "notebook.ipynb", extra_files: dict[str, bytes] | None = None,
                     public_checks: list[Check] = ()) -> NotebookResult:
    """Run every code cell of ``nb`` in order in a fresh sandbox and write each cell's (bounded,
    re-checked) outputs into it, as nbgrader's ``Execute`` does in a kernel with ``allow_errors``:
    a cell that raises gets its error output and the next cell runs. This is Validate's run of the
    student's own notebook (``attention_platform.grading.validate_service``), not grading: no hidden
    check is loaded, only ``public_checks`` (``public_checks_of``), as grading runs checks -- the probe
    code sent only once every cell's output is back, the probes run on the notebook as its last cell
    left it, judged here -- into ``result.checks``, never into a cell's outputs (none runs if a cell
    stopped the sandbox). After the sandbox stops (a limit, ``sys.exit``), the remaining cells get no output."""
    started = time.monotonic()
    limits = limits or SandboxLimits()
    result = NotebookResult()
    sandbox = (zygote or get_zygote()).spawn(limits)  # SandboxUnavailable propagates: the caller falls back
    result.layers = sandbox.layers
    try:
        _send_files(sandbox, nbformat.writes(nb), filename, extra_files)  # as the student saved it
        code = _code_cells_cleared(nb)
        for cell in code:
            sandbox.send({"op": "cell", "source": cell.source})
        _read_files_answer(sandbox, result)
        for cell in code:
            if result.stopped is None:
                _read_cell(sandbox, cell, limits, result)
        if public_checks and result.stopped is None:
            _grade_checks(sandbox, [nbformat.v4.new_code_cell() for _ in public_checks],
                          [check.definition.grade_id for check in public_checks], list(public_checks), limits,
                          seed_function(), result, None)
    finally:
        sandbox.close()
    result.seconds = time.monotonic() - started
    return result
