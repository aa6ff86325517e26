"""LMS launches (LTI 1.3) for the course hub, configured from the environment.

``hub/jupyterhub_config.py`` calls ``configure_lti(c)`` when HUB_AUTHENTICATOR=lti.
The LMS (Canvas, Moodle, …) is the identity provider: JupyterHub is the LTI 1.3
tool, using ``ltiauthenticator.lti13.auth.LTI13Authenticator``
(jupyterhub-ltiauthenticator 1.6.3) for the OIDC login-initiation → LMS
authorize → signed ``id_token`` launch. Its handlers check the JWT signature
against the LMS's JWKS, the issuer, audience (client id), the LTI claims, the
state cookie and the nonce.

On top of that, ``CourseLTI13Authenticator`` turns the launch's LTI roles claim
into our JupyterHub groups (``Authenticator.manage_groups = True``: the
groups returned by ``authenticate`` replace the user's groups at every launch,
so a TA who becomes a student in the LMS loses the formgrader):

    Learner            -> nbgrader-<course>                       (student)
    TeachingAssistant  -> formgrade-<course>                      (TA)
    Instructor         -> formgrade-<course>, instructors-<course>

A role is matched by its short name, the part after ``#`` of the LIS role URI
(``http://purl.imsglobal.org/vocab/lis/v2/membership#Learner``) or the bare
name. The TA sub-role ``membership/Instructor#TeachingAssistant`` counts as
TeachingAssistant *only*, even when the LMS also sends ``membership#Instructor``
with it (Canvas does). A launch whose roles map to no group is refused (403),
unless LTI_ALLOW_UNMAPPED_ROLES=1.

Environment (all read when the hub starts):
    LTI_ISSUER            the platform's issuer, e.g. https://canvas.instructure.com  (required)
    LTI_CLIENT_ID         client id(s) of this tool in the LMS, comma-separated      (required)
    LTI_AUTHORIZE_URL     the platform's OIDC authorization endpoint                  (required)
    LTI_JWKS_URL          the platform's JWKS endpoint (public keys)                  (required)
    LTI_USERNAME_KEY      id_token claim used as the hub username (default: email; custom_<name>
                          reads the LTI custom claim <name>)
    LTI_ROLE_GROUPS       role→groups mapping, e.g.
                          "Learner=nbgrader-dl-attention;TeachingAssistant=formgrade-dl-attention;
                           Instructor=formgrade-dl-attention,instructors-dl-attention"
                          (default: as above, for NBGRADER_COURSE_ID, default dl-attention)
    LTI_URI_SCHEME        auto | https | http: scheme of the URLs the tool announces (default auto)
    LTI_ALLOW_UNMAPPED_ROLES  1: let a launch with no mapped role in, with no group (default 0)
    LTI_TOOL_NAME         name shown in the LMS (default "Self-attention course")

Note for the hub config: with managed groups JupyterHub refuses ``load_groups``
(ValueError "Group management has been offloaded to the authenticator"); groups
named in ``load_roles`` are created by JupyterHub itself, so nothing is lost by
leaving ``load_groups`` empty when LTI is on.
"""

from __future__ import annotations

import os
import re
from typing import Any

from ltiauthenticator.lti13.auth import LTI13Authenticator
from tornado.web import HTTPError
from traitlets import Bool, Dict, List, Unicode, default

ROLES_CLAIM = "https://purl.imsglobal.org/spec/lti/claim/roles"
CONTEXT_CLAIM = "https://purl.imsglobal.org/spec/lti/claim/context"
LIS = "http://purl.imsglobal.org/vocab/lis/v2/"
LEARNER = LIS + "membership#Learner"
TEACHING_ASSISTANT = LIS + "membership/Instructor#TeachingAssistant"
INSTRUCTOR = LIS + "membership#Instructor"
_ABSOLUTE_URI = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:[^\s;=,]+")


def default_role_groups(course: str | None = None) -> dict[str, list[str]]:
    course = course or os.environ.get("NBGRADER_COURSE_ID", "dl-attention")
    return {
        LEARNER: [f"nbgrader-{course}"],
        TEACHING_ASSISTANT: [f"formgrade-{course}"],
        INSTRUCTOR: [f"formgrade-{course}", f"instructors-{course}"],
    }


def parse_role_groups(text: str) -> dict[str, list[str]]:
    """``"<role URI>=group[,group…];…"`` → ``{role URI: [groups]}``.

    Keys are whole role URIs because a role is only ever compared as a whole string:
    a short name such as ``Learner`` would match nothing, so it is refused here, at
    start-up, rather than silently locking everyone out."""
    mapping: dict[str, list[str]] = {}
    for part in text.replace("\n", ";").split(";"):
        if not part.strip():
            continue
        role, sep, groups = part.rpartition("=")  # group names hold no "=", so the last one separates
        role = role.strip()
        if not sep or not role:
            raise ValueError(f"LTI_ROLE_GROUPS: expected ROLE_URI=group[,group…], got {part.strip()!r}")
        if not _ABSOLUTE_URI.fullmatch(role):
            raise ValueError(f"LTI_ROLE_GROUPS: roles are full URIs such as {LEARNER}, got {role!r}")
        mapping[role] = [g.strip() for g in groups.split(",") if g.strip()]
    return mapping


def course_roles(roles: Any, mapping: dict[str, list[str]]) -> set[str]:
    """The roles of a launch that ``mapping`` names, each compared as a whole string.

    Nothing is inferred from a role's fragment: ``membership/Learner#Instructor`` or
    ``institution/person#Instructor`` are not ``membership#Instructor``. Canvas sends a TA
    as ``membership#Instructor`` plus the TA sub-role, so the sub-role takes Instructor away."""
    if not isinstance(roles, list):
        return set()
    sent = {role for role in roles if isinstance(role, str)}
    found = sent & set(mapping)
    if TEACHING_ASSISTANT in sent:
        found.discard(INSTRUCTOR)
    return found


def groups_for_roles(roles: Any, mapping: dict[str, list[str]]) -> list[str]:
    groups: set[str] = set()
    for role in course_roles(roles, mapping):
        groups.update(mapping[role])
    return sorted(groups)


def _shown(values: Any, limit: int = 300) -> str:
    text = ", ".join(map(str, values)) if isinstance(values, (list, tuple, set)) else str(values)
    return text if len(text) <= limit else text[:limit] + "…"


class CourseLTI13Authenticator(LTI13Authenticator):
    """LTI13Authenticator whose launches put the user in our course groups."""

    role_groups = Dict(
        value_trait=List(Unicode()),
        help="Full LTI role URI (e.g. http://purl.imsglobal.org/vocab/lis/v2/membership#Learner) → JupyterHub "
             "groups. Roles are compared as whole strings; a launch with none of these roles is refused.",
    ).tag(config=True)
    allow_unmapped_roles = Bool(
        False, help="Let a launch whose roles map to no group log in (with no group).").tag(config=True)

    @default("role_groups")
    def _role_groups_default(self):
        return default_role_groups()

    async def authenticate(self, handler, data: dict[str, Any] | None = None):
        model = await super().authenticate(handler, data)
        token = data or {}
        roles = token.get(ROLES_CLAIM) or []
        groups = groups_for_roles(roles, self.role_groups)
        if not groups and not self.allow_unmapped_roles:
            self.log.warning("LTI launch of %s refused: roles %s map to no course group", model["name"], roles)
            raise HTTPError(403, "Your roles in this LMS course (" + _shown(roles or ["none"]) + ") give no access "
                            "to this course's hub: it is open to the course's students, teaching assistants and "
                            "instructors. If you are one of them, please ask your instructor to check your role "
                            "in the LMS.")
        context = token.get(CONTEXT_CLAIM) or {}
        self.log.info("LTI launch: %s (roles %s, context %s) -> groups %s", model["name"],
                      sorted(course_roles(roles, self.role_groups)), context.get("label") or context.get("id"),
                      groups)
        model["groups"] = groups
        return model


def _required(env: dict, name: str) -> str:
    value = env.get(name, "").strip()
    if not value:
        raise SystemExit(f"HUB_AUTHENTICATOR=lti needs {name} (see attention_platform/hub/lti.py)")
    return value


def configure_lti(c, environ: dict | None = None) -> None:
    """Configure JupyterHub (config object ``c``) for LTI 1.3 launches from the environment."""
    env = dict(os.environ if environ is None else environ)
    c.JupyterHub.authenticator_class = CourseLTI13Authenticator
    auth = c.CourseLTI13Authenticator
    auth.issuer = _required(env, "LTI_ISSUER")
    auth.client_id = {x.strip() for x in _required(env, "LTI_CLIENT_ID").split(",") if x.strip()}
    auth.authorize_url = _required(env, "LTI_AUTHORIZE_URL")
    auth.jwks_endpoint = _required(env, "LTI_JWKS_URL")
    if env.get("LTI_USERNAME_KEY"):
        auth.username_key = env["LTI_USERNAME_KEY"]
    auth.uri_scheme = env.get("LTI_URI_SCHEME", "auto") or "auto"
    auth.tool_name = env.get("LTI_TOOL_NAME", "Self-attention course")
    auth.tool_description = "Autograded self-attention assignment (nbgrader)"
    if env.get("LTI_ROLE_GROUPS", "").strip():
        auth.role_groups = parse_role_groups(env["LTI_ROLE_GROUPS"])
    else:
        auth.role_groups = default_role_groups(env.get("NBGRADER_COURSE_ID") or None)
    auth.allow_unmapped_roles = env.get("LTI_ALLOW_UNMAPPED_ROLES", "0").lower() in ("1", "true", "yes")
    # who may enter is decided by the LMS (a valid signed launch) and the role mapping above
    auth.allow_all = True
    auth.manage_groups = True
    c.Authenticator.manage_groups = True
    c.Authenticator.allow_all = True
