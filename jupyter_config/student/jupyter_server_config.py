"""Jupyter Server settings of a student's single-user server (JUPYTER_CONFIG_PATH)."""

c = get_config()  # noqa: F821

try:
    from attention_platform.settings import settings_or_exit
except ImportError:  # an image without the course's package (see below)
    pass
else:
    settings_or_exit("user's server")  # a wrong deployment setting stops the server at start, named

# Students get the Assignments tab and Validate only: no formgrader, no course list.
# Validate is the course's own (attention_platform/lab/course_lab.py): it names the answers still to
# do and says that the hidden checks are not run; nbgrader's said "Success!" for an untouched notebook.
# It runs the notebook in a warm sandbox of the validate service rather than a fresh kernel that
# imports torch again (attention_platform/lab/warm_validate.py); in a kernel where there is none.
c.ServerApp.jpserver_extensions = {
    "nbgrader.server_extensions.formgrader": False,
    "nbgrader.server_extensions.course_list": False,
    "nbgrader.server_extensions.assignment_list": True,
    "nbgrader.server_extensions.validate_assignment": False,
    "attention_platform.lab.course_lab": True,
    # Feedback on submit: the student's attempts and results, read from their own feedback folder.
    "attention_platform.lab.feedback_on_submit": True,
    # No language server is installed for students: the LSP extension only costs every server's start
    # a search for them (`npm prefix -g` and friends, each a process started).
    "jupyter_lsp": False,
}
# The course's Lab extensions, plain JavaScript shipped in the package, no build step: Course menu and
# launcher cards fitted to the role, Validate, fetch and submit confirmations (attention-course-lab);
# the Assignments tab's "Feedback on submit" panel (attention-feedback-on-submit).
try:
    from attention_platform.lab.course_lab import LAB_EXTENSION_DIR
except ImportError:  # an image without the course's package: nbgrader's own Lab, the page config above
    c.ServerApp.jpserver_extensions["attention_platform.lab.course_lab"] = False
    c.ServerApp.jpserver_extensions["attention_platform.lab.feedback_on_submit"] = False
    c.ServerApp.jpserver_extensions["nbgrader.server_extensions.validate_assignment"] = True
else:
    c.LabApp.extra_labextensions_path = [str(LAB_EXTENSION_DIR)]
try:  # an image may carry the course's Lab without feedback on submit (docker/student.Dockerfile)
    import attention_platform.lab.feedback_on_submit  # noqa: F401
except ImportError:
    c.ServerApp.jpserver_extensions["attention_platform.lab.feedback_on_submit"] = False
# Tornado reads a request's whole body before any handler asks who sent it, and the proxy passes
# /user/<name>/ to this server from anyone: without the owner's login (checked from the headers, with
# no round trip to the hub) a body over 64 kB is refused from its length, unread; with it, a body over
# MAX_BODY_BYTES (32 MB: a notebook save, or an upload, which Lab sends 15 MB at a time at most) is
# answered 413 with what to do (attention_platform/lab/student_request_limits.py).
try:
    from attention_platform.lab import student_request_limits
except ImportError:  # an image without the course's package: one limit for everyone
    c.ServerApp.max_body_size = c.ServerApp.max_buffer_size = 32 << 20
else:
    c.ServerApp.max_body_size = c.ServerApp.max_buffer_size = student_request_limits.MAX_BODY_BYTES
    student_request_limits.install()
# Students cannot install Lab extensions into the course's environment: the read-only manager lists
# what is there without the PyPI machinery.
c.LabApp.extension_manager = "readonly"

# Idle kernels are stopped after 30 min, even with the tab open: a kernel with torch holds most of the
# memory a working student uses (`make load` reports it); the notebook stays saved.
c.MappingKernelManager.cull_idle_timeout = 1800
c.MappingKernelManager.cull_interval = 300
c.MappingKernelManager.cull_connected = True

# Embedded in the LMS's page (LTI_PRESENTATION=embed, attention_platform/hub/lti_presentation.py): the LMS's
# origins may frame this server, and over HTTPS its login cookie comes back inside the LMS's iframe.
try:
    from attention_platform.hub.lti_presentation import (
        EMBED, cross_site_cookie_options, embed_origins, frame_ancestors_policy,
    )
    from attention_platform.settings import settings
except ImportError:  # an image without the course's package: never embedded
    pass
else:
    if settings().lti_presentation == EMBED:
        c.ServerApp.tornado_settings = {
            "headers": {"Content-Security-Policy": frame_ancestors_policy(embed_origins(settings().lti_embed_origins))}}
        c.HubOAuth.cookie_options = cross_site_cookie_options(settings().lti_uri_scheme)
