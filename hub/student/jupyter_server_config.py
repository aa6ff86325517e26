"""Jupyter Server settings of a student's single-user server (JUPYTER_CONFIG_PATH)."""

c = get_config()  # noqa: F821

# Students get the Assignments tab and Validate only: no formgrader, no course list.
# Validate is nbgrader's, run in a warm sandbox of the validate service rather than a fresh kernel
# that imports torch again (attention_platform/hub/warm_validate.py); a kernel where there is none.
c.ServerApp.jpserver_extensions = {
    "nbgrader.server_extensions.formgrader": False,
    "nbgrader.server_extensions.course_list": False,
    "nbgrader.server_extensions.assignment_list": True,
    "nbgrader.server_extensions.validate_assignment": False,
    "attention_platform.hub.warm_validate": True,
    # No language server is installed for students: the LSP extension only costs every server's start
    # a search for them (`npm prefix -g` and friends, 0.2 CPU-s).
    "jupyter_lsp": False,
}
# Students cannot install Lab extensions into the course's environment: the read-only manager lists
# what is there without the PyPI machinery.
c.LabApp.extension_manager = "readonly"

# Idle kernels are stopped after 30 min, even with the tab open (issue #7, `make load`): a kernel
# with torch holds ~250 MiB of the ~410 MiB a working student uses; the notebook stays saved.
c.MappingKernelManager.cull_idle_timeout = 1800
c.MappingKernelManager.cull_interval = 300
c.MappingKernelManager.cull_connected = True
