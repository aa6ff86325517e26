"""Every change the platform makes at run time to code it does not own, in one place.

A patch here replaces or wraps, while a process runs, a name in a module, a class or an object of
another package: jsonschema's import of its IRI parser, tornado's HTTP server class and an
application's routing, nbgrader's submit, its assignment list, its listing's checksums, its
gradebook and metadata validator, JupyterLab's registry query and Jupyter Server's start.
Subclasses that a package's own configuration selects (nbgrader's exchange classes and
preprocessors, JupyterHub's spawners and authenticators, a handler class in a route) are not
patches: they live with their concern.

Each patch is one function, called where the process needs it and at the moment it always was
(a patch applied earlier or later can change behaviour). Applying one twice does nothing more.
``EXPECTED`` records, for each patch, the source of everything of its target it relies on, as a
sha256 at the versions requirements.lock pins; tests/test_third_party_patches.py fails, naming the
patch, when an upgrade changes one. Then re-read that patch against the new source and record the
new fingerprint (:func:`main` with ``--fingerprints`` prints them all).

Every Python start in the environment imports this module (``attention_course_deferred_imports.pth``,
for :func:`defer_iri_syntax`), so at the top it imports only what the interpreter has loaded by
then; each patch imports its target when applied.
"""

from __future__ import annotations

import _thread
import importlib
import importlib.machinery
import sys

# (patch, distribution, target, sha256 of the target's source): a target is "module" or
# "module:Qualified.name".
EXPECTED = (
    ("defer_iri_syntax", "jsonschema", "jsonschema._format:is_iri",
     "84dbdf0f06ed7945e51143118afe87d6763216a2207543e95cee2abc123c57ae"),
    ("defer_iri_syntax", "jsonschema", "jsonschema._format:is_iri_reference",
     "a46d0cb1b6a89bbbf4bdf2c64971fe07a1b95dd3aef8324ae954af2e6818521d"),
    ("defer_iri_syntax", "rfc3987-syntax", "rfc3987_syntax",
     "495c22fb129fdb84f53049cf07bc5b2a48c063ae39772931da205b86c66932fb"),
    ("defer_iri_syntax", "rfc3987-syntax", "rfc3987_syntax.syntax_helpers:is_valid_syntax",
     "6d04d3f91e992021727557dce1d0b8cd7b9cb65d49340d54028efe37438ae2b5"),
    ("defer_iri_syntax", "rfc3987-syntax", "rfc3987_syntax.syntax_helpers:parse",
     "86c9c1f461a105ac9211214111ae5691ee24860db263a74a0643353f1d8da0dd"),
    ("serve_http_with", "tornado", "tornado.httpserver:HTTPServer.initialize",
     "96e880b7decae55c13d3fa1457b805ae27fda7fa008b9c6e2b45135b86bbed1e"),
    ("serve_http_with", "tornado", "tornado.httpserver:HTTPServer.start_request",
     "3de37d633a9d15b5cdd1f90f19378653a21785d301d9ffadcdc326cf0de4c73a"),
    ("serve_http_with", "jupyterhub", "jupyterhub.app:JupyterHub.start",
     "0a8db2676f52f5628ddf90fb2ceef2a9c132b99e7cbf9aa937b4d14ce132ba64"),
    ("serve_http_with", "jupyter_server", "jupyter_server.serverapp:ServerApp.init_httpserver",
     "d289769f63f6136a3edeb52cc7f00d63655b4a19530a92f7ecf1988e63b9f6b5"),
    ("route_through", "tornado", "tornado.web:Application.find_handler",
     "d93d26c5435eab183551bf342cc581e8c5a46c64ed1cea553174d50a56d744b8"),
    ("route_through", "tornado", "tornado.web:Application.get_handler_delegate",
     "7ade687ca1a45687094226d3b4a3889c6de577a8a4290ee1389c53f0178fe19a"),
    ("route_through", "tornado", "tornado.web:_HandlerDelegate.__init__",
     "b432ff0ee96a508321fd98387aba4596ae1d1f7ba043908efb6c312c7f2f222f"),
    ("route_through", "tornado", "tornado.routing:_RoutingDelegate.headers_received",
     "c8c697361e8a1581b9d51bdbc869ebf783dd461e2c904d64b44ccbebb9490b06"),
    ("ask_before_submit", "nbgrader", "nbgrader.server_extensions.assignment_list.handlers:AssignmentList.submit_assignment",
     "ea9755bac7e075bc480b72c2c6e67bcb36df174811494ce9b2c5d939433d742f"),
    ("ask_before_submit", "nbgrader", "nbgrader.server_extensions.assignment_list.handlers:AssignmentActionHandler.post",
     "37527ca721ea78e598c27855a48dbdbafd9db53f16f915e605024957c95106f1"),
    ("wrap_assignment_list", "nbgrader", "nbgrader.server_extensions.assignment_list.handlers:AssignmentList.list_assignments",
     "64f2fdbe9d8dce352dc5eef5136a846aca61740e1d32d25a29ec38c3f7cad592"),
    ("wrap_assignment_list", "nbgrader", "nbgrader.server_extensions.assignment_list.handlers:AssignmentListHandler.get",
     "a316c7a611638f4ee00805a621780fa158247473a7c64420ef82c0590d371c65"),
    ("wrap_assignment_list", "nbgrader", "nbgrader.server_extensions.assignment_list.handlers:BaseAssignmentHandler.manager",
     "529d41f8c407d6cb97884323fa67ea052beeaf912507f93eb7a1ccdd2c6ceddd"),
    ("wrap_assignment_list", "nbgrader", "nbgrader.server_extensions.assignment_list.handlers:load_jupyter_server_extension",
     "a9499e913f79633851c844903a91613d62867cb7a50c2a13d1689c6d18f29cff"),
    ("checksum_listed_feedback_with", "nbgrader", "nbgrader.exchange.default.list:_checksum",
     "0c58abe18bd8752869d2e9fbd2e78664d81360d60487ae33f7924498dbb66dfd"),
    ("checksum_listed_feedback_with", "nbgrader", "nbgrader.exchange.default.list:ExchangeList.parse_assignments",
     "b9200166c1f5ddf1dcbf857fc6c02fd274952ab1eae11fc6daf81698b000d693"),
    ("grade_into", "nbgrader", "nbgrader.nbgraderformat.common:BaseMetadataValidator.validate_cell",
     "e5f97f45a9aba510674c72eb1d7246f297175e2f1bd1193a03494f6071af3265"),
    ("grade_into", "nbgrader", "nbgrader.preprocessors.checkcellmetadata",
     "36790a0c9ca537374d5050a0e3532b93fced6e9c8d04ba213cc17928a423dd67"),
    ("grade_into", "nbgrader", "nbgrader.preprocessors.overwritecells",
     "fe855f99b586b9c6e4c746a621458e8cc131a506e62ac6095803ca80c601d299"),
    ("grade_into", "nbgrader", "nbgrader.preprocessors.getgrades",
     "8a591cf5a49086e5320e3bdea06fce4500b54b72f5465eff5965053c7f112268"),
    ("grade_into", "nbgrader", "nbgrader.preprocessors.latesubmissions",
     "56eefd9d317c8b890b3a2980ccd4ac9c2f930d6d98f40963d3ffc4484e76c768"),
    ("grade_into", "nbgrader", "nbgrader.preprocessors.overwritekernelspec",
     "196c78bce9b0117e778bfd9fbd4208a28e5c18c573e08164eaa09054a6e53624"),
    ("grade_into", "nbgrader", "nbgrader.preprocessors.saveautogrades",
     "e4ff90adc2563b68c09d24de5a5530969fa567b456418ef321319b4753403a35"),
    ("grade_into", "nbgrader", "nbgrader.preprocessors.savecells",
     "04b7a9b9ad27338ee4882a39811685913e0583b9229e2324f5b06e85f90b9d31"),
    ("skip_jupyterlab_registry_query", "jupyterlab", "jupyterlab.commands:_yarn_config",
     "747943d759e726871cd1d8f8b8cddc83aa95a147e85417c72bbced3250e01cd3"),
    ("when_server_runs", "jupyter_server", "jupyter_server.serverapp:ServerApp.start_ioloop",
     "90416d55c6ff6818978a482b8695b23306c23fb498e4e5998cdcc631521352b5"),
)


# --------------------------------------------------------------------------- jsonschema

IRI_SYNTAX = "rfc3987_syntax"
MODULE = "attention_platform.third_party_patches"  # this module, by the name the .pth imports
PTH_FILE = "attention_course_deferred_imports.pth"


class _DeferredImport:
    """A meta path finder and the stand-in's loader. It uses only what the interpreter has loaded
    when site.py runs the .pth (no ``importlib.abc``/``util``, ``threading``: importing them would
    cost every start)."""

    def __init__(self):
        self._lock = _thread.RLock()
        self._loading = False

    def find_spec(self, name, path=None, target=None):
        if name != IRI_SYNTAX or self._loading:
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
            module = sys.modules.get(IRI_SYNTAX)
            if module is not None and not getattr(module, "deferred", False):
                return module
            stand_in = sys.modules.pop(IRI_SYNTAX, None)
            self._loading = True
            try:
                return importlib.import_module(IRI_SYNTAX)
            except BaseException:
                if stand_in is not None:
                    sys.modules[IRI_SYNTAX] = stand_in
                raise
            finally:
                self._loading = False


def defer_iri_syntax() -> None:
    """``rfc3987_syntax`` imported on its first use instead of with ``jsonschema``.

    jsonschema imports ``rfc3987_syntax`` (when the GPL ``rfc3987`` is absent, as here) to check the
    ``iri`` and ``iri-reference`` string formats, and that package builds its Earley parser from a
    Lark grammar at import, a slow step paid by every process that imports ``nbformat`` or
    ``jupyter_server`` (each student's server, each ``nbgrader`` and ``attention-course`` command,
    the hub), though none checks an IRI in ordinary work. A finder first on ``sys.meta_path``
    answers the import with a stand-in whose ``is_valid_syntax``, ``parse`` and any other name
    import the real package on their first use and hand over to it: a format check answers the
    same once the parser is built.

    Applied by ``attention_course_deferred_imports.pth`` in the environment's site-packages at every
    interpreter start (:func:`main` writes it: the Makefile's venv and the grader's image; the
    student's image appends its line to its own .pth), and again by ``attention-course`` and the
    other entry points, for an environment without the file. Left out of the hub's images: the hub
    builds the parser once per start. Nothing if the package is already imported."""
    if IRI_SYNTAX in sys.modules or any(isinstance(finder, _DeferredImport) for finder in sys.meta_path):
        return
    sys.meta_path.insert(0, _DeferredImport())


def pth_line() -> str:
    """The line of the ``.pth`` file: site.py executes lines starting with ``import``."""
    return f"import {MODULE}; {MODULE}.defer_iri_syntax()\n"


def write_pth(site_packages: str | None = None):
    """Write the ``.pth`` file into ``site_packages`` (this environment's by default); its path."""
    import sysconfig
    from pathlib import Path

    path = Path(site_packages or sysconfig.get_paths()["purelib"]) / PTH_FILE
    path.write_text(pth_line())
    return path


# --------------------------------------------------------------------------- tornado

def serve_http_with(server_class) -> None:
    """``tornado.httpserver.HTTPServer`` replaced by ``server_class``, a subclass of it with its own
    body limits (attention_platform/hub/hub_request_limits.py for the hub,
    attention_platform/lab/student_request_limits.py for a student's server). JupyterHub and Jupyter Server make their
    server by looking the class up in ``tornado.httpserver`` and pass no limit (JupyterHub) or the
    configured one (Jupyter Server); neither has a setting for a limit that depends on who is asking
    or that holds before the login. Applied in the process's configuration, before its server is
    made. A second, different replacement is refused: one of the two limits would be lost."""
    import tornado.httpserver

    current = tornado.httpserver.HTTPServer
    if current is server_class:
        return
    if current.__module__ != "tornado.httpserver":
        raise RuntimeError(f"tornado.httpserver.HTTPServer is already replaced by {current.__module__}."
                           f"{current.__qualname__}; not replacing it by {server_class.__qualname__} too")
    if not issubclass(server_class, current):
        raise TypeError(f"{server_class.__qualname__} is no subclass of tornado's HTTPServer")
    tornado.httpserver.HTTPServer = server_class


def route_through(web_app, name: str, find_handler) -> None:
    """``web_app.find_handler`` (a tornado ``Application``: tornado's router asks it which handler
    serves each request) replaced by ``find_handler(original, request, **kwargs)``, which may call
    the original, change the delegate it returns (its ``handler_class``), or answer with its own.
    Jupyter Server has no hook that sees every request before its handler, whichever extension
    added the route: the formgrader's gate (deny by default) and the student's Lab (finishing what
    other extensions set up, once all have loaded) need one. ``name`` says who routes; a second
    call with the same name on the same application does nothing."""
    routed = web_app.__dict__.setdefault("_attention_routed_through", set())
    if name in routed:
        return
    original = web_app.find_handler

    def routed_find_handler(request, **kwargs):
        return find_handler(original, request, **kwargs)

    web_app.find_handler = routed_find_handler
    routed.add(name)


# --------------------------------------------------------------------------- nbgrader

def ask_before_submit(refusal) -> None:
    """nbgrader's ``AssignmentList.submit_assignment`` (its Lab's submit, in the student's server)
    first asks ``refusal(assignment_list, course_id, assignment_id)``: a refusal (the dict nbgrader
    answers with) is returned without submitting, None submits as before. nbgrader's assignment
    list has no hook before a submit; feedback on submit refuses one over its per-student budget
    here. Applied when the server loads the extension; a second call does nothing."""
    from nbgrader.server_extensions.assignment_list.handlers import AssignmentList

    original = AssignmentList.submit_assignment
    if hasattr(original, "__wrapped__"):
        return

    def submit_assignment(self, course_id, assignment_id):
        refused = refusal(self, course_id, assignment_id)
        return refused if refused is not None else original(self, course_id, assignment_id)

    submit_assignment.__wrapped__ = original
    AssignmentList.submit_assignment = submit_assignment


def wrap_assignment_list(manager, submit, listing) -> None:
    """The Lab's assignment list (``manager``, the ``AssignmentList`` nbgrader's extension keeps in
    the server's settings) submits through ``submit(original, course_id, assignment_id)`` and lists
    through ``listing(original, course_id)``: the course's Lab tidies the listing and marks a submit
    that filed nothing new, which nbgrader's handler cannot say. On this one object, once."""
    if getattr(manager, "_attention_wrapped", False):
        return
    submit_assignment, list_assignments = manager.submit_assignment, manager.list_assignments

    def wrapped_submit(course_id, assignment_id):
        return submit(submit_assignment, course_id, assignment_id)

    def wrapped_listing(course_id=None):
        return listing(list_assignments, course_id)

    manager.submit_assignment, manager.list_assignments = wrapped_submit, wrapped_listing
    manager._attention_wrapped = True


def checksum_listed_feedback_with(checksum) -> None:
    """nbgrader's listing of submissions (``nbgrader.exchange.default.list``, which the student's
    ``ExchangeList`` inherits) hashes feedback pages through ``checksum(path)`` (the hex MD5 of the
    file's bytes) instead of its module's ``_checksum``, which reads each page whole on every
    listing. nbgrader has no setting for it. Applied once in the student's server; a second call
    does nothing."""
    import nbgrader.exchange.default.list as listing

    if getattr(listing._checksum, "__wrapped__", None) is not None:
        return
    original = listing._checksum

    def _checksum(path):
        return checksum(path)

    _checksum.__wrapped__ = original
    listing._checksum = _checksum


class _Replaced:
    """Names of modules set to other values until :meth:`restore` (in reverse order, so nested
    replacements of one name come undone in turn)."""

    def __init__(self, replacements):
        self._saved = [(module, name, getattr(module, name)) for module, name, _ in replacements]
        for module, name, value in replacements:
            setattr(module, name, value)

    def restore(self):
        for module, name, value in reversed(self._saved):
            setattr(module, name, value)


def grade_into(gradebook_factory, metadata_validator, jsonschema):
    """A context manager: while it is open, every ``Gradebook`` name nbgrader's preprocessors
    call (``Gradebook(db_url[, course_id])``) is ``gradebook_factory``, their ``MetadataValidator()``
    (made per cell by OverwriteCells and CheckCellMetadata, reading and parsing the schema file each
    time) answers ``metadata_validator``, and nbgrader's metadata checks validate through
    ``jsonschema`` (an object with ``validate`` like the module's). nbgrader makes a gradebook
    connection per preprocessor and notebook and has no setting for one it should share; the
    batch grader and feedback on submit grade many notebooks into one. Nested use restores each
    level on leaving it."""
    import contextlib

    import nbgrader.api
    import nbgrader.nbgraderformat.common as nbgrader_format
    import nbgrader.preprocessors  # noqa: F401 - loads every preprocessor module
    from nbgrader.preprocessors import checkcellmetadata, overwritecells

    replacements = [(nbgrader.api, "Gradebook", gradebook_factory), (nbgrader_format, "jsonschema", jsonschema)]
    replacements += [(module, "MetadataValidator", lambda: metadata_validator)
                     for module in (overwritecells, checkcellmetadata)]
    for module_name, module in list(sys.modules.items()):
        if module_name.startswith("nbgrader.preprocessors.") and hasattr(module, "Gradebook"):
            replacements.append((module, "Gradebook", gradebook_factory))

    @contextlib.contextmanager
    def replaced():
        done = _Replaced(replacements)
        try:
            yield gradebook_factory
        finally:
            done.restore()

    return replaced()


# --------------------------------------------------------------------------- Jupyter

def skip_jupyterlab_registry_query() -> None:
    """JupyterLab asks ``node yarn config --json`` for a package registry when its app module is
    imported (starting Node for it, on every student server's start); the registry only matters for
    installing extensions, which students cannot do (``LabApp.extension_manager = "readonly"``).
    ``jupyterlab.commands._yarn_config`` gives the answer JupyterLab itself uses when Node is not
    installed. Applied before JupyterLab's app module is imported."""
    import jupyterlab.commands

    jupyterlab.commands._yarn_config = _no_registry


def _no_registry(logger):
    return {"yarn config": {}, "npm config": {}}


def when_server_runs(callback) -> bool:
    """``callback(serverapp)`` is the first thing a Jupyter Server's running event loop does:
    ``ServerApp.start_ioloop`` is wrapped for it (Jupyter Server has no event for "started").
    False, and nothing changed, when Jupyter Server has no ``start_ioloop``. Once per process."""
    from jupyter_server.serverapp import ServerApp

    start_ioloop = ServerApp.__dict__.get("start_ioloop")
    if start_ioloop is None:
        return False
    if hasattr(start_ioloop, "__wrapped__"):
        return True

    def start_ioloop_then(self):
        self.io_loop.add_callback(callback, self)
        start_ioloop(self)

    start_ioloop_then.__wrapped__ = start_ioloop
    ServerApp.start_ioloop = start_ioloop_then
    return True


# --------------------------------------------------------------------------- fingerprints

def fingerprint(target: str) -> str:
    """sha256 of the source of ``target`` ("module" or "module:Qualified.name")."""
    import hashlib
    import inspect

    module_name, _, qualname = target.partition(":")
    if not qualname:  # the module's file, read as it is (a deferred module is a stand-in)
        from importlib.util import find_spec

        with open(find_spec(module_name).origin, encoding="utf-8") as source:
            return hashlib.sha256(source.read().encode()).hexdigest()
    value = importlib.import_module(module_name)
    for depth, part in enumerate(qualname.split(".")):
        value = inspect.getattr_static(value, part)
        if depth == 0 and isinstance(value, type) and value.__module__ != module_name:
            # replaced in this process by a patch here (serve_http_with): what it replaced is the target
            value = next((base for base in value.__mro__ if (base.__module__, base.__qualname__) == (module_name, part)),
                         value)
        value = getattr(value, "__func__", getattr(value, "fget", value))  # the function of a method or property
    return hashlib.sha256(inspect.getsource(value).encode()).hexdigest()


def changed(patch: str, package: str, target: str, sha256: str) -> str | None:
    """Why the patch must be re-read (its target changed or is gone), or None."""
    from importlib.metadata import version

    try:
        same = fingerprint(target) == sha256
    except (ImportError, AttributeError, OSError, TypeError):
        same = False
    return None if same else f"patch {patch}: {package} {version(package)} changed {target}; re-read the patch"


def main(argv: list[str]) -> None:
    """``--fingerprints``: every target's fingerprint now, as EXPECTED records them; ``--line``:
    the .pth line (an image appends it to a .pth of its own that first puts this package on
    sys.path); ``[]`` or ``[SITE_PACKAGES]``: write PTH_FILE there. Run it as
    ``python -c 'from attention_platform import third_party_patches as p; p.main([...])'``, not
    ``python -m``: the .pth has already imported this module under its own name."""
    if argv == ["--fingerprints"]:
        for patch, package, target, _ in EXPECTED:
            print(f'    ("{patch}", "{package}", "{target}",\n     "{fingerprint(target)}"),')
    elif argv == ["--line"]:
        print(pth_line(), end="")
    else:
        print(f"wrote {write_pth(argv[0] if argv else None)}")
