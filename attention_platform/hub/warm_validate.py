"""nbgrader's Validate button, with the notebook run in a warm sandbox instead of a fresh kernel.

A Jupyter Server extension for hub users' servers (``hub/student/jupyter_server_config.py``), in
place of ``nbgrader.server_extensions.validate_assignment``: the same two routes
(``assignments/validate``, ``nbgrader_version``) and the same answers, from nbgrader's own
``Validator`` — which cells failed, which locked cells changed — with one preprocessor swapped:
:class:`WarmExecute` runs the cells through the validate service
(:mod:`attention_platform.hub.validate_service`), falling back to nbgrader's ``Execute`` (a kernel)
when no service is configured or it cannot run this one. The run happens off the server's event
loop, so the student's Lab stays responsive while Validate runs.
"""

from __future__ import annotations

import asyncio
import json
import os

from nbgrader.preprocessors import CheckCellMetadata, ClearOutput, Execute, NbGraderPreprocessor
from nbgrader.server_extensions.validate_assignment.handlers import NbGraderVersionHandler, ValidateAssignmentHandler
from nbgrader.validator import Validator
from tornado import web
from traitlets import List


class WarmExecute(NbGraderPreprocessor):
    """Execute a notebook through the validate service; nbgrader's ``Execute`` if there is none."""

    def preprocess(self, nb, resources):
        from attention_platform.hub.validate_service import ValidateUnavailable, executed_for_validate

        folder = os.getcwd()  # Validator._preprocess runs in the notebook's folder
        try:
            executed = executed_for_validate(nb, folder, name=getattr(self.parent, "validating", "notebook.ipynb"))
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
    validating = "notebook.ipynb"  # the file's name, as the notebook sees itself in its folder

    def validate(self, filename):
        self.validating = os.path.basename(filename)
        return super().validate(filename)


class WarmValidateHandler(ValidateAssignmentHandler):
    """nbgrader's handler (its checks, its messages) with our validator, off the event loop."""

    @web.authenticated
    async def post(self):
        try:
            path = self.get_argument("path")
        except web.MissingArgumentError:
            path = self.get_json_body()["path"]
        output = await asyncio.get_running_loop().run_in_executor(None, self.validate_notebook, path)
        self.finish(json.dumps(output))


def _jupyter_server_extension_points():
    return [{"module": "attention_platform.hub.warm_validate"}]


def _load_jupyter_server_extension(serverapp):
    from jupyter_server.utils import url_path_join

    import nbgrader.server_extensions.validate_assignment.handlers as stock

    stock.Validator = WarmValidator  # the name nbgrader's handler builds its validator from, in this server
    web_app = serverapp.web_app
    web_app.settings["root_dir"] = serverapp.root_dir
    base_url = web_app.settings["base_url"]
    web_app.add_handlers(".*$", [(url_path_join(base_url, "assignments/validate"), WarmValidateHandler),
                                 (url_path_join(base_url, "nbgrader_version"), NbGraderVersionHandler)])
    serverapp.log.info("Validate: %s", "warm sandboxes of the validate service" if os.environ.get(
        "ATTENTION_VALIDATE_SOCKET") else "a kernel per Validate (no validate service configured)")
