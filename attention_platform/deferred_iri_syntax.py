"""``rfc3987_syntax`` imported on its first use instead of with ``jsonschema``.

``jsonschema`` imports ``rfc3987_syntax`` (when the GPL ``rfc3987`` is absent, as here) to check the
``iri`` and ``iri-reference`` string formats, and that package builds its Earley parser from a Lark
grammar at import, a slow step paid by every process that imports ``nbformat`` or
``jupyter_server`` — each student's Jupyter server, each ``nbgrader`` and ``attention-course``
command, the hub — though none of them checks an IRI in ordinary work (only ``jupyter_events``
schemas could ask for one).

``install()`` puts a finder first on ``sys.meta_path`` that answers ``import rfc3987_syntax`` with a
stand-in whose ``is_valid_syntax`` and ``parse`` (and any other name) import the real package on
their first call and hand over to it, so a format check gives the same answer once the parser is
built. It is called from ``attention_course_deferred_imports.pth`` in the environment's
site-packages, which ``main`` writes (the Makefile's venv and the grader's Docker image run it; the student's image adds
its line to its own .pth), so it covers processes started by commands we do not own (``nbgrader``,
``jupyterhub-singleuser``, the formgrader); ``attention-course`` and the other entry points also
call ``install()`` first, for an environment without the file. Left out of the hub's images: the
hub builds the parser once per start.
"""

from __future__ import annotations

import _thread
import importlib
import importlib.machinery
import sys

NAME = "rfc3987_syntax"
MODULE = "attention_platform.deferred_iri_syntax"  # this module, by the name the .pth imports
PTH_FILE = "attention_course_deferred_imports.pth"


def pth_line() -> str:
    """The line of the ``.pth`` file: site.py executes lines starting with ``import``."""
    return f"import {MODULE}; {MODULE}.install()\n"


class _DeferredImport:
    """A meta path finder and the stand-in's loader. Every Python start in the environment imports
    this module (the .pth), so it uses only what the interpreter has loaded by then (no
    ``importlib.abc``/``util``, ``threading``: importing them would cost every start)."""

    def __init__(self):
        self._lock = _thread.RLock()
        self._loading = False

    def find_spec(self, name, path=None, target=None):
        if name != NAME or self._loading:
            return None
        real = importlib.machinery.PathFinder.find_spec(name, path)
        if real is None:  # not installed: jsonschema's ImportError, as without this finder
            return None
        # The stand-in is a package at the real one's place, so its submodules import as usual.
        spec = importlib.machinery.ModuleSpec(name, self, origin=real.origin, is_package=True)
        spec.submodule_search_locations = real.submodule_search_locations
        return spec

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        def is_valid_syntax(term, value):
            return self.real().is_valid_syntax(term, value)

        def parse(term, value):
            return self.real().parse(term, value)

        def other(name):
            if name.startswith("__"):  # the import system asks for __spec__-like names it may lack
                raise AttributeError(name)
            return getattr(self.real(), name)

        module.is_valid_syntax, module.parse, module.__getattr__ = is_valid_syntax, parse, other
        module.deferred = True

    def real(self):
        """The real package, imported the first time it is needed (it then replaces the stand-in
        in ``sys.modules``)."""
        with self._lock:
            module = sys.modules.get(NAME)
            if module is not None and not getattr(module, "deferred", False):
                return module
            stand_in = sys.modules.pop(NAME, None)
            self._loading = True
            try:
                return importlib.import_module(NAME)
            except BaseException:
                if stand_in is not None:
                    sys.modules[NAME] = stand_in
                raise
            finally:
                self._loading = False


def install() -> None:
    """Defer ``rfc3987_syntax`` in this process (idempotent; nothing if it is already imported)."""
    if NAME in sys.modules or any(isinstance(finder, _DeferredImport) for finder in sys.meta_path):
        return
    sys.meta_path.insert(0, _DeferredImport())


def write_pth(site_packages: str | None = None):
    """Write the ``.pth`` file into ``site_packages`` (this environment's by default); its path."""
    import sysconfig
    from pathlib import Path

    path = Path(site_packages or sysconfig.get_paths()["purelib"]) / PTH_FILE
    path.write_text(pth_line())
    return path


def main(argv: list[str]) -> None:
    """``python -c 'from attention_platform import deferred_iri_syntax as d; d.main(["--line"])'``
    prints the line (an image appends it to a .pth of its own that first puts this package on
    sys.path); with ``[]`` or ``[SITE_PACKAGES]`` it writes PTH_FILE there. Not ``python -m``: the
    .pth would already have imported this module under its own name."""
    if argv == ["--line"]:
        print(pth_line(), end="")
    else:
        print(f"wrote {write_pth(argv[0] if argv else None)}")
