"""The course's line items URL as the LMS names it in its launches, kept for the passback worker.

A launch carries, signed by the platform as the whole launch is, the Assignment and Grade Services
endpoint claim: the URL of the course's line items (``lineitems``) and the scopes the platform grants
the tool. An instructor rarely knows that URL (Canvas shows it nowhere), so the hub keeps it from any
launch it accepted (hub/lti.py: this course's issuer, client id, deployment and context, used once)
and the worker, run as the grader account, uses it unless LTI_LINE_ITEMS_URL overrides it.

Any member's launch may set it, a student's too: a student cannot alter a signed claim, and the
platform sends every member of the course the same endpoint. A URL that is not on the LMS's site
(``site_origins``) is refused, so no launch can make the worker hand its token to another host (the
worker's GradeService refuses such a URL again).

The channel from the hub to the worker is one small JSON file that holds no secret: written by the
hub alone, replaced whole (a reader never sees half of it), in the hub's state folder where no other
account can create or replace a file; the worker reads it within ``MAX_BYTES`` and checks every field
again, as from any file it does not own.
"""

from __future__ import annotations

import json
import os
import secrets
from dataclasses import asdict, dataclass
from pathlib import Path
from urllib.parse import urlsplit

from attention_platform.lms.ags import origin
from attention_platform.lms.service_tokens import LINE_ITEM_SCOPE

ENDPOINT_CLAIM = "https://purl.imsglobal.org/spec/lti-ags/claim/endpoint"
DEPLOYMENT_CLAIM = "https://purl.imsglobal.org/spec/lti/claim/deployment_id"
CONTEXT_CLAIM = "https://purl.imsglobal.org/spec/lti/claim/context"
FILE_NAME = "lti-launch-services.json"
MAX_BYTES = 16 * 1024
MAX_URL = 2000
MAX_SCOPES = 20


class UnusableEndpoint(ValueError):
    """The launch's endpoint claim names a line items URL the tool will not use; the message says why."""


@dataclass(frozen=True)
class LaunchServices:
    line_items_url: str
    scopes: tuple[str, ...]
    deployment_id: str
    context_id: str

    def grants_line_items(self) -> bool:
        """Whether the platform lets the tool find and make line items there (the worker's first call)."""
        return LINE_ITEM_SCOPE in self.scopes


def site_origins(*urls: str) -> tuple[str, ...]:
    """The origins of ``urls`` (the LMS's issuer, endpoints and LTI_SERVICE_ORIGINS), empty ones left out."""
    return tuple(sorted({origin(url) for url in urls if url and urlsplit(url).hostname}))


def course_site_origins(env) -> tuple[str, ...]:
    """The LMS's site as the course's settings (attention_platform.settings.Settings) name it."""
    return site_origins(env.lti_issuer, env.lti_token_url, env.lti_authorize_url, env.lti_jwks_url,
                        env.lti_line_items_url, env.lti_memberships_url, *env.lti_service_origins)


def kept_file(env) -> Path:
    """Where the hub keeps what launches name (LTI_LAUNCH_SERVICES_FILE, or in the hub's state folder)."""
    return Path(env.lti_launch_services_file or Path(env.hub_state_dir) / FILE_NAME)


def from_launch(claims: dict, allowed_origins: tuple[str, ...]) -> LaunchServices | None:
    """The line items URL and scopes of an accepted launch's claims; None when it names none,
    UnusableEndpoint when it names one the tool must not use."""
    endpoint = claims.get(ENDPOINT_CLAIM)
    if not isinstance(endpoint, dict) or "lineitems" not in endpoint:
        return None
    url = endpoint["lineitems"]
    if not isinstance(url, str) or not 0 < len(url) <= MAX_URL or urlsplit(url).scheme not in ("https", "http") \
            or not urlsplit(url).hostname:
        raise UnusableEndpoint(f"the line items URL {str(url)[:200]!r} is not an http(s) URL")
    if origin(url) not in allowed_origins:
        raise UnusableEndpoint(f"the line items URL {url[:200]} is not on the LMS's site "
                               f"({', '.join(allowed_origins) or 'none configured'}; LTI_SERVICE_ORIGINS adds one)")
    scopes = endpoint.get("scope")
    scopes = tuple(s for s in scopes[:MAX_SCOPES] if isinstance(s, str) and len(s) <= 200) \
        if isinstance(scopes, list) else ()
    context = claims.get(CONTEXT_CLAIM)
    return LaunchServices(url, scopes, str(claims.get(DEPLOYMENT_CLAIM, "")),
                          str(context.get("id", "")) if isinstance(context, dict) else "")


def record(path: str | os.PathLike, services: LaunchServices) -> bool:
    """Keep ``services`` in ``path`` (readable by all, replaced whole); whether it changed."""
    path = Path(path)
    if read(path) == services:
        return False
    fresh = path.with_name(f".{path.name}.{secrets.token_hex(4)}")
    with os.fdopen(os.open(fresh, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644), "w") as out:
        os.fchmod(out.fileno(), 0o644)  # whatever the umask: the grader account reads it
        json.dump(asdict(services), out, indent=1, sort_keys=True)
    os.replace(fresh, path)
    return True


def read(path: str | os.PathLike) -> LaunchServices | None:
    """What the hub kept in ``path``; None when there is nothing (yet) or nothing usable."""
    try:
        with os.fdopen(os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC), "rb") as source:
            text = source.read(MAX_BYTES + 1)
    except OSError:
        return None
    try:
        kept = json.loads(text) if len(text) <= MAX_BYTES else None
    except ValueError:
        return None
    if not isinstance(kept, dict):
        return None
    url, scopes = kept.get("line_items_url"), kept.get("scopes")
    deployment, context = kept.get("deployment_id"), kept.get("context_id")
    if not (isinstance(url, str) and 0 < len(url) <= MAX_URL and isinstance(scopes, list)
            and all(isinstance(s, str) for s in scopes) and isinstance(deployment, str) and isinstance(context, str)):
        return None
    return LaunchServices(url, tuple(scopes[:MAX_SCOPES]), deployment, context)


def kept_line_items_url(env) -> tuple[str, str]:
    """The line items URL the course's launches named, or "" and why there is none to use: the file is
    checked as the hub checked the launch (this course's deployments and context, the LMS's site), and the
    platform must have granted the line item scope."""
    found = read(kept_file(env))
    if found is None:
        return "", "no launch has named the course's line items yet (or set LTI_LINE_ITEMS_URL)"
    contexts = env.lti_context_ids
    if found.deployment_id not in env.lti_deployment_ids or ("*" not in contexts and found.context_id not in contexts):
        return "", f"the line items URL kept from a launch of deployment {found.deployment_id[:100]!r}, context " \
                   f"{found.context_id[:100]!r} is not this course's"
    if origin(found.line_items_url) not in course_site_origins(env):
        return "", f"the line items URL {found.line_items_url[:200]} is not on the LMS's site"
    if not found.grants_line_items():
        return "", f"the LMS does not grant the tool {LINE_ITEM_SCOPE} in its launches"
    return found.line_items_url, ""
