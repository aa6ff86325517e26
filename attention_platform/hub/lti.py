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
from typing import Any, Iterable

from ltiauthenticator.lti13.auth import LTI13Authenticator
from traitlets import Bool, Dict, List, Unicode, default

ROLES_CLAIM = "https://purl.imsglobal.org/spec/lti/claim/roles"
CONTEXT_CLAIM = "https://purl.imsglobal.org/spec/lti/claim/context"
TA = "TeachingAssistant"
INSTRUCTOR = "Instructor"


def default_role_groups(course: str | None = None) -> dict[str, list[str]]:
    course = course or os.environ.get("NBGRADER_COURSE_ID", "dl-attention")
    return {
        "Learner": [f"nbgrader-{course}"],
        TA: [f"formgrade-{course}"],
        INSTRUCTOR: [f"formgrade-{course}", f"instructors-{course}"],
    }


def parse_role_groups(text: str) -> dict[str, list[str]]:
    """``"Learner=a;TeachingAssistant=b;Instructor=b,c"`` → ``{role: [groups]}``."""
    mapping: dict[str, list[str]] = {}
    for part in text.replace("\n", ";").split(";"):
        if not part.strip():
            continue
        role, sep, groups = part.partition("=")
        if not sep or not role.strip():
            raise ValueError(f"LTI_ROLE_GROUPS: expected ROLE=group[,group…], got {part.strip()!r}")
        mapping[role.strip()] = [g.strip() for g in groups.split(",") if g.strip()]
    return mapping


def role_names(roles: Iterable[str]) -> set[str]:
    """Short context-role names of an LTI roles claim (``…membership#Learner`` → ``Learner``).

    Institution and system roles (``…/institution/person#…``, ``…/system/person#…``)
    are not course roles and are left out. A TA sub-role wins over Instructor."""
    names: set[str] = set()
    for role in roles or ():
        if not isinstance(role, str) or not role.strip():
            continue
        role = role.strip()
        if "/institution/" in role or "/system/" in role:
            continue
        base, _, short = role.rpartition("#")
        if not base:  # a bare name, e.g. "Learner" (allowed by LTI 1.3 for context roles)
            short = role
        elif base.endswith("/membership/Instructor") and short == TA:
            short = TA
        names.add(short)
    if TA in names:
        names.discard(INSTRUCTOR)
    return names


def groups_for_roles(roles: Iterable[str], mapping: dict[str, list[str]]) -> list[str]:
    groups: set[str] = set()
    for name in role_names(roles):
        groups.update(mapping.get(name, ()))
    return sorted(groups)


class CourseLTI13Authenticator(LTI13Authenticator):
    """LTI13Authenticator whose launches put the user in our course groups."""

    role_groups = Dict(
        value_trait=List(Unicode()),
        help="LTI context role short name (Learner, TeachingAssistant, Instructor, …) → JupyterHub groups.",
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
            return None  # the callback handler answers 403
        context = token.get(CONTEXT_CLAIM) or {}
        self.log.info("LTI launch: %s (roles %s, context %s) -> groups %s", model["name"],
                      sorted(role_names(roles)), context.get("label") or context.get("id"), groups)
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
