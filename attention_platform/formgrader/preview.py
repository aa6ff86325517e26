"""Preview in the formgrader (instructors; behind formgrader_gate.py): the student version of an
assignment as ``generate_assignment`` left it in ``release/<assignment>/``.

nbgrader's Preview link opens its own file browser (``/tree/…``), which the grader service does
not serve; here ``formgrader/attention/preview/<assignment>`` lists the released notebooks in the
assignment's order and ``…/<assignment>/<notebook>`` shows one, rendered (sanitised, its scripts
never run: the gate's policy admits only the formgrader's own).
"""

from __future__ import annotations

from pathlib import Path

from tornado import web


def released_notebooks(release_folder: Path, assignment: str) -> list[str]:
    """The notebook ids (no ``.ipynb``) of ``release_folder``, in the assignment's order."""
    from attention_platform.course.assignment_checks import by_notebook_order

    found = [p.stem for p in release_folder.glob("*.ipynb") if p.is_file()] if release_folder.is_dir() else []
    return sorted(found, key=by_notebook_order(assignment))


def _handler():
    from nbgrader.server_extensions.formgrader.base import BaseHandler

    class PreviewHandler(BaseHandler):
        def _release_folder(self, assignment_id: str) -> Path:
            return Path(self.coursedir.format_path(self.coursedir.release_directory, ".", assignment_id))

        @web.authenticated
        def get(self, assignment_id, notebook_id=None):
            folder = self._release_folder(assignment_id)
            notebooks = released_notebooks(folder, assignment_id)
            if notebook_id is None:
                self.write(self.render("attention_preview.tpl", assignment_id=assignment_id, notebooks=notebooks,
                                       base_url=self.base_url))
                return
            if notebook_id not in notebooks:
                raise web.HTTPError(404, f"{assignment_id} has no released notebook {notebook_id}: "
                                         "generate the student version first")
            from attention_platform.reporting.safe_html import FEEDBACK_TEMPLATES, SafeHTMLExporter

            exporter = SafeHTMLExporter(template_name="attention_preview", extra_template_basedirs=[FEEDBACK_TEMPLATES])
            body, _ = exporter.from_filename(str(folder / f"{notebook_id}.ipynb"))
            self.write(body)

    return PreviewHandler


def handlers(base_url: str) -> list:
    """The routes this module serves (each also in formgrader_gate.ROUTES)."""
    from jupyter_server.utils import url_path_join as join

    from attention_platform.formgrader.formgrader_gate import _ID

    preview = _handler()
    return [
        (join(base_url, rf"formgrader/attention/preview/(?P<assignment_id>{_ID})/?"), preview),
        (join(base_url, rf"formgrader/attention/preview/(?P<assignment_id>{_ID})/(?P<notebook_id>{_ID})/?"), preview),
    ]
