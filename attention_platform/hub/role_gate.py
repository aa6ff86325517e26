"""Formgrader actions that only the course's instructors may take.

nbgrader has one formgrader per course and does not tell TAs from instructors.
This Jupyter Server extension (loaded by the grader service, hub/grader/) refuses,
with 403, creating or editing an assignment, generating its student version,
releasing or unreleasing it, and adding or editing students, unless the hub user
is in the group ``instructors-<course>``. TAs keep collect, autograde, manual
grading and feedback. The hub passes the user's groups because the service asks
for ``read:users:groups!user`` (hub/jupyterhub_config.py).
"""

from __future__ import annotations

import functools
import inspect
import os

from tornado import web

INSTRUCTOR_ONLY = {
    "AssignmentHandler": ("put",),  # create / edit an assignment
    "AssignHandler": ("post",),  # generate the student version
    "ReleaseHandler": ("post",),
    "UnReleaseHandler": ("post",),
    "StudentHandler": ("put",),  # add / edit a student
}


def instructor_group() -> str:
    return "instructors-" + os.environ.get("NBGRADER_COURSE_ID", "dl-attention")


def _is_instructor(handler) -> bool:
    hub_user = getattr(handler.current_user, "hub_user", None) or {}
    return instructor_group() in (hub_user.get("groups") or [])


def _gate(method):
    message = "Only the course's instructors may do this; please ask one of them."
    if inspect.iscoroutinefunction(method):
        @functools.wraps(method)
        async def checked(self, *args, **kwargs):
            if not _is_instructor(self):
                raise web.HTTPError(403, message)
            return await method(self, *args, **kwargs)
    else:
        @functools.wraps(method)
        def checked(self, *args, **kwargs):
            if not _is_instructor(self):
                raise web.HTTPError(403, message)
            return method(self, *args, **kwargs)
    checked._instructor_only = True
    return checked


def _jupyter_server_extension_points():
    return [{"module": "attention_platform.hub.role_gate"}]


def _load_jupyter_server_extension(serverapp):
    from nbgrader.server_extensions.formgrader import apihandlers

    for class_name, methods in INSTRUCTOR_ONLY.items():
        cls = getattr(apihandlers, class_name)
        for name in methods:
            method = getattr(cls, name)
            if not getattr(method, "_instructor_only", False):
                setattr(cls, name, _gate(method))
    serverapp.log.info("instructor gate: %s only for group %s", ", ".join(INSTRUCTOR_ONLY), instructor_group())
