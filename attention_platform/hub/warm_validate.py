"""nbgrader's Validator with the notebook run in a warm sandbox instead of a fresh kernel.

The course's Validate (``attention_platform.hub.course_lab`` → ``course.validation.validate_file``)
runs a notebook with nbgrader's ``Validator`` settings and says what is still to do; in a hub
user's server it uses :class:`WarmValidator`, nbgrader's own ``Validator`` with one preprocessor
swapped: :class:`WarmExecute` runs the cells through the validate service
(:mod:`attention_platform.hub.validate_service`), falling back to nbgrader's ``Execute`` (a kernel)
when no service is configured or it cannot run this one. Everything else — which cells failed,
which locked cells changed, the report's words — is decided as before, in the student's server.
"""

from __future__ import annotations

import os

from nbgrader.preprocessors import CheckCellMetadata, ClearOutput, Execute, NbGraderPreprocessor
from nbgrader.validator import Validator
from traitlets import List, Unicode


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
    validating = Unicode("notebook.ipynb", help="The notebook's file name, as it sees itself in its folder "
                         "(set per notebook: the sandbox gets the notebook under this name)").tag(config=False)

    def validate(self, filename):
        self.validating = os.path.basename(filename)
        return super().validate(filename)
