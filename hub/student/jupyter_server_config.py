"""Jupyter Server settings of a student's single-user server (JUPYTER_CONFIG_PATH)."""

c = get_config()  # noqa: F821

# Students get the Assignments tab and Validate only: no formgrader, no course list.
c.ServerApp.jpserver_extensions = {
    "nbgrader.server_extensions.formgrader": False,
    "nbgrader.server_extensions.course_list": False,
    "nbgrader.server_extensions.assignment_list": True,
    "nbgrader.server_extensions.validate_assignment": True,
    # Feedback on submit: the student's attempts and results, read from their own feedback folder.
    "attention_platform.feedback_on_submit.student": True,
}
# The Assignments tab's "Feedback on submit" panel (plain JavaScript shipped in the package, no build step).
try:
    from attention_platform.feedback_on_submit import LAB_EXTENSIONS
except ImportError:  # an image without the course's package: nbgrader's own Assignments tab
    c.ServerApp.jpserver_extensions["attention_platform.feedback_on_submit.student"] = False
else:
    c.LabApp.extra_labextensions_path = [str(LAB_EXTENSIONS)]

# Idle kernels are stopped after 30 min, even with the tab open (issue #7, `make load`): a kernel
# with torch holds ~250 MiB of the ~410 MiB a working student uses; the notebook stays saved.
c.MappingKernelManager.cull_idle_timeout = 1800
c.MappingKernelManager.cull_interval = 300
c.MappingKernelManager.cull_connected = True
