"""Jupyter Server settings of the course's formgrader service (JUPYTER_CONFIG_PATH).

This server is the formgrader and nothing else: it runs as the course's grader
account (never root), loads only nbgrader's formgrader and our gate, and the gate
(attention_platform/formgrader/formgrader_gate.py) answers 404 to every path that is not
a formgrader page or API, checks the user's role on every request and sends a
nonce-based Content-Security-Policy with every response.
"""

from attention_platform.settings import settings_or_exit

c = get_config()  # noqa: F821
settings_or_exit("formgrader")  # a wrong deployment setting stops the server at start, named

c.ServerApp.jpserver_extensions = {
    "nbgrader.server_extensions.formgrader": True,
    "attention_platform.formgrader.formgrader_gate": True,
    # Everything else a Jupyter install brings is off here: no Lab, no editor, no terminals,
    # no language server, and none of nbgrader's student-side extensions (Validate runs code).
    "jupyterlab": False,
    "notebook": False,
    "notebook_shim": False,
    "jupyter_lsp": False,
    "jupyter_server_terminals": False,
    "nbgrader.server_extensions.assignment_list": False,
    "nbgrader.server_extensions.course_list": False,
    "nbgrader.server_extensions.validate_assignment": False,
}
# Belt and braces under the gate: even a route it let through could start no shell and no kernel.
c.ServerApp.terminals_enabled = False
c.KernelSpecManager.allowed_kernelspecs = {"no-kernels-on-the-grader"}
# A user's hub groups (TA or instructor) are re-read from the hub at most this many seconds
# after they change, so removing a TA takes effect within seconds, not the default 5 minutes.
c.HubOAuth.cache_max_age = 10
# Jupyter Server reads a request's whole body (512 MB by default) before any handler asks who sent
# it, and anyone who reaches the hub reaches this service's path. The formgrader's requests carry
# small JSON (grades, comments, forms): a larger body is refused from its length, unread.
c.ServerApp.max_body_size = 1 << 20
c.ServerApp.max_buffer_size = 1 << 20
