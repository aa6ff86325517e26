"""Jupyter Server settings of the course's formgrader service (JUPYTER_CONFIG_PATH)."""

c = get_config()  # noqa: F821

# JupyterHub >= 4.1 sends "frame-ancestors 'none'" from every single-user server, so
# the Formgrader tab of this service's JupyterLab (an iframe of this same server) is
# blank (nbgrader #1870). 'self' allows exactly that iframe on this grader-only
# server; students' servers keep 'none'.
c.ServerApp.tornado_settings = {"headers": {"Content-Security-Policy": "frame-ancestors 'self'"}}
# The grader's JupyterLab has every nbgrader extension; the course list is for hub users' own servers.
c.ServerApp.jpserver_extensions = {
    "nbgrader.server_extensions.formgrader": True,
    "nbgrader.server_extensions.course_list": False,
    "nbgrader.server_extensions.assignment_list": False,
    "nbgrader.server_extensions.validate_assignment": True,
    # Release, generate, create/edit assignments and students: instructors only (TAs get 403).
    "attention_platform.hub.role_gate": True,
}
# The formgrader runs as root natively (the autograder's sandbox needs it) and graders
# share it: no terminals and no kernels here, so it is no shell for anyone. Grading
# runs student code in the sandbox, not in this server's kernels.
c.ServerApp.terminals_enabled = False
c.KernelSpecManager.allowed_kernelspecs = {"no-kernels-on-the-grader"}
