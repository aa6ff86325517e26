"""nbgrader's Validator with the notebook run in a warm sandbox instead of a fresh kernel.

The course's Validate (``attention_platform.lab.course_lab`` → ``course.validation.validate_file``)
runs a notebook with nbgrader's ``Validator`` settings and says what is still to do; in a hub
user's server it uses :class:`WarmValidator`, nbgrader's own ``Validator`` with one preprocessor
swapped: :class:`WarmExecute` runs the cells through the validate service
(:mod:`attention_platform.grading.validate_service`; :func:`executed_for_validate` here is the
student's side of it, the only part the student's server and image need), falling back to nbgrader's ``Execute`` (a kernel)
when no service is configured or it cannot run this one. Everything else — which cells failed,
which locked cells changed, the report's words — is decided as before, in the student's server; the
service also answers the verdicts of the notebook's public checks (``PublicCheck``), which the
report shows.
"""

from __future__ import annotations

import base64
import dataclasses
import os
import socket
import time

from nbgrader.preprocessors import CheckCellMetadata, ClearOutput, Execute, NbGraderPreprocessor
from nbgrader.validator import Validator
from traitlets import List, Unicode

from attention_platform import bounded_json
from attention_platform.course.validation import PublicCheck
from attention_platform.grading.sandbox import protocol
from attention_platform.grading.sandbox.files import MAX_REQUEST_FILES, submission_files

SOCKET_ENV = "ATTENTION_VALIDATE_SOCKET"  # where a hub user's server finds the validate service
MAX_REPLY_BYTES = 64 << 20  # the executed notebook: outputs are bounded per cell by the limits
MAX_PUBLIC_CHECKS = 64  # of one notebook: a few in practice
# The reply: an object with the notebook as text and a list of public checks, each an object of three.
REPLY_SHAPE = bounded_json.Bounds(max_bytes=MAX_REPLY_BYTES, max_depth=3, max_containers=2 + MAX_PUBLIC_CHECKS,
                                  max_items=8 + 4 * MAX_PUBLIC_CHECKS)
EXECUTED_SHAPE = dataclasses.replace(bounded_json.NOTEBOOK, max_bytes=MAX_REPLY_BYTES)


class WarmExecute(NbGraderPreprocessor):
    """Execute a notebook through the validate service; nbgrader's ``Execute`` if there is none."""

    def preprocess(self, nb, resources):
        folder = os.getcwd()  # Validator._preprocess runs in the notebook's folder
        try:
            executed, public_checks = validated_warm(nb, folder,
                                                     name=getattr(self.parent, "validating", "notebook.ipynb"))
            if self.parent is not None and self.parent.has_trait("public_checks"):
                self.parent.public_checks = public_checks
        except ValidateUnavailable as exc:
            if os.environ.get("ATTENTION_VALIDATE_SOCKET"):
                self.log.warning("Validate in a kernel: %s", exc)
            return Execute(parent=self.parent).preprocess(nb, resources)
        for cell, done in zip(nb.cells, executed.cells):
            if cell.cell_type == "code" and done.cell_type == "code":
                cell.outputs, cell.execution_count = done.outputs, done.execution_count
        return nb, resources


class WarmValidator(Validator):
    """nbgrader's Validator; only the execution step differs (see the module docstring)."""

    preprocessors = List([CheckCellMetadata, ClearOutput, WarmExecute])
    validating = Unicode("notebook.ipynb", help="The notebook's file name, as it sees itself in its folder "
                         "(set per notebook: the sandbox gets the notebook under this name)").tag(config=False)
    public_checks = List(None, allow_none=True, help="The public checks' verdicts of the last notebook validated "
                         "(``PublicCheck``), or None when it ran in a kernel, which runs none").tag(config=False)

    def validate(self, filename):
        self.validating = os.path.basename(filename)
        self.public_checks = None
        return super().validate(filename)


class ValidateUnavailable(Exception):
    """No warm Validate here (no service configured, or it could not run this one)."""


def public_checks_in(reply: dict) -> list[PublicCheck]:
    """The public checks of the service's ``reply``, each as text of a bounded length; an entry not of
    that form is dropped (the service writes them: nothing the sandbox said is among them)."""
    checks = []
    for item in reply.get("public_checks") or []:
        if (isinstance(item, dict) and isinstance(item.get("title"), str) and isinstance(item.get("passed"), bool)
                and isinstance(item.get("message", ""), str)):
            checks.append(PublicCheck(item["title"][:500], item["passed"], item.get("message", "")[:2000]))
    return checks[:MAX_PUBLIC_CHECKS]


def executed_for_validate(nb, folder: str, *, name: str = "notebook.ipynb", socket_path: str | None = None,
                          timeout: float = 300.0):
    """``nb`` with every code cell run, in order, in a fresh sandbox of the validate service (see
    ``validated_warm``)."""
    return validated_warm(nb, folder, name=name, socket_path=socket_path, timeout=timeout)[0]


def validated_warm(nb, folder: str, *, name: str = "notebook.ipynb", socket_path: str | None = None,
                   timeout: float = 300.0):
    """``nb`` with every code cell run, in order, in a fresh sandbox of the validate service, the
    files of ``folder`` (the notebook's own, e.g. ``data/``) beside it, and the verdicts of its
    public checks. Raises ValidateUnavailable when there is no service to ask: the caller then runs
    a kernel, as nbgrader does."""
    import nbformat

    path = socket_path or os.environ.get(SOCKET_ENV)
    if not path:
        raise ValidateUnavailable("no validate service is configured")
    files = list(submission_files(folder, name).items())[:MAX_REQUEST_FILES]
    request = {"op": "validate", "name": name, "notebook": nbformat.writes(nb),
               "files": [[rel, base64.b64encode(data).decode()] for rel, data in files]}
    deadline = time.monotonic() + timeout
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        try:
            conn.connect(path)
            try:
                protocol.send_json(conn, request)
            except BrokenPipeError:
                pass  # refused before it was read (not a hub user, too many connections): the answer waits
            _, reply = protocol.recv_frame(conn, deadline, MAX_REPLY_BYTES, check_json=bounded_json.checker(REPLY_SHAPE, "the validate service's answer"))
        except (OSError, protocol.FrameError, bounded_json.TooComplex) as exc:
            raise ValidateUnavailable(f"the validate service did not answer ({exc})") from None
    if not isinstance(reply, dict) or reply.get("op") != "executed":
        error = reply.get("error") if isinstance(reply, dict) else "a malformed reply"
        raise ValidateUnavailable(str(error)[:300])
    # what the student's own cells printed: bounded like the notebook sent (TooComplex says so)
    executed = bounded_json.reads_notebook(str(reply["notebook"]), EXECUTED_SHAPE, "the notebook with its outputs")
    return executed, public_checks_in(reply)
