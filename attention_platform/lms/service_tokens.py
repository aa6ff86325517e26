"""Access tokens for the LMS's services: OAuth 2 client credentials with a signed JWT assertion.

LTI 1.3 (IMS Security Framework §4.1) has the tool ask the platform's token endpoint for a bearer
token with ``grant_type=client_credentials`` and, instead of a client secret, a JWT it signs with its
own private key (RS256): ``iss`` and ``sub`` are its client id, ``aud`` the token endpoint, a fresh
``jti``, ``iat`` and a short ``exp``. The platform checks it against the tool's public key set.

Each token asks for the scopes of the one service about to be called (least privilege: a roster
request never carries a score scope), and is kept until shortly before it expires, per set of scopes.
"""

from __future__ import annotations

import os
import secrets
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import jwt

from attention_platform.lms.bounded_http import Answer, LmsUnavailable, exchange

ASSERTION_TYPE = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
ASSERTION_LIFETIME = 300  # seconds; the platform only needs it for the one request
EXPIRY_MARGIN = 30  # seconds before its expiry a token is no longer used
DEFAULT_LIFETIME = 3600  # when the platform does not say (expires_in is RECOMMENDED, not required)

AGS = "https://purl.imsglobal.org/spec/lti-ags/scope/"
LINE_ITEM_SCOPE = AGS + "lineitem"
SCORE_SCOPE = AGS + "score"
RESULT_SCOPE = AGS + "result.readonly"
MEMBERSHIP_SCOPE = "https://purl.imsglobal.org/spec/lti-nrps/scope/contextmembership.readonly"


def scopes_for(token_url: str, line_items_url: str, memberships_url: str) -> list[str]:
    """The scopes the tool asks the LMS for: those of the services it is set to call, no others."""
    if not token_url:
        return []
    return ([LINE_ITEM_SCOPE, SCORE_SCOPE, RESULT_SCOPE] if line_items_url else []) + \
        ([MEMBERSHIP_SCOPE] if memberships_url else [])


def load_private_key(source) -> Any:
    """The tool's private key from a PEM file opened without following a link, or from a stream (the
    worker's standard input, so the account that owns the key file can hand it over without sharing it)."""
    from cryptography.hazmat.primitives.serialization import load_pem_private_key

    if hasattr(source, "read"):
        return load_pem_private_key(source.read(64 * 1024), password=None)
    with os.fdopen(os.open(source, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC), "rb") as pem:
        return load_pem_private_key(pem.read(64 * 1024), password=None)


class TokenRefused(Exception):
    """The platform's token endpoint refused the tool's request; the message says what it answered
    (a wrong client id, a key it does not know, a scope the tool was not granted, …)."""


@dataclass
class ToolCredentials:
    """Who the tool is to one platform: its client id there, the token endpoint, and its signing key."""

    client_id: str
    token_url: str
    private_key: Any  # a cryptography private key or its PEM
    kid: str
    deployment_id: str = ""


@dataclass
class ServiceTokens:
    credentials: ToolCredentials
    clock: Callable[[], float] = time.monotonic  # when kept tokens expire
    requests_made: int = 0
    _tokens: dict[frozenset, tuple[str, float]] = field(default_factory=dict)

    def assertion(self) -> str:
        now = int(time.time())  # the platform's clock judges it, whatever ``clock`` says of the cache
        claims = {"iss": self.credentials.client_id, "sub": self.credentials.client_id,
                  "aud": self.credentials.token_url, "iat": now, "exp": now + ASSERTION_LIFETIME,
                  "jti": secrets.token_urlsafe(24)}
        return jwt.encode(claims, self.credentials.private_key, algorithm="RS256",
                          headers={"kid": self.credentials.kid})

    def token(self, *scopes: str) -> str:
        """A bearer token for ``scopes``: the one kept, or a new one (TokenRefused, LmsUnavailable)."""
        wanted = frozenset(scopes)
        kept = self._tokens.get(wanted)
        if kept and self.clock() < kept[1]:
            return kept[0]
        self.requests_made += 1
        answer = exchange("POST", self.credentials.token_url, data={
            "grant_type": "client_credentials", "client_assertion_type": ASSERTION_TYPE,
            "client_assertion": self.assertion(), "scope": " ".join(sorted(wanted))},
            headers={"Accept": "application/json"})
        token, lifetime = _read_token(answer, self.credentials.token_url)
        self._tokens[wanted] = (token, self.clock() + max(lifetime - EXPIRY_MARGIN, 0))
        return token

    def forget(self, *scopes: str) -> None:
        """Drop the token kept for ``scopes`` (the platform answered 401 to it: revoked or expired early)."""
        self._tokens.pop(frozenset(scopes), None)


def _read_token(answer: Answer, url: str) -> tuple[str, float]:
    if answer.status >= 500 or answer.status == 429:
        raise LmsUnavailable(f"the token endpoint {url} answered {answer.status}: {answer.text()}")
    try:
        document = answer.json()
    except ValueError:
        document = None
    if answer.status != 200:
        if isinstance(document, dict) and isinstance(document.get("error"), str):
            why = document["error"] + (f" ({document['error_description']})"
                                       if isinstance(document.get("error_description"), str) else "")
        else:
            why = answer.text()
        raise TokenRefused(f"the token endpoint {url} refused the tool's request ({answer.status}): {why}"[:500])
    if not isinstance(document, dict) or not isinstance(document.get("access_token"), str) \
            or not document["access_token"]:
        raise TokenRefused(f"the token endpoint {url} answered 200 without an access_token")
    if str(document.get("token_type", "bearer")).lower() != "bearer":
        raise TokenRefused(f"the token endpoint {url} gave a {document.get('token_type')!r} token, not a bearer one")
    lifetime = document.get("expires_in", DEFAULT_LIFETIME)
    if isinstance(lifetime, bool) or not isinstance(lifetime, (int, float)) or lifetime <= 0:
        lifetime = DEFAULT_LIFETIME
    return document["access_token"], float(min(lifetime, 24 * 3600))
