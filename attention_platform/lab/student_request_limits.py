"""A user's server refuses a large request body unless the request carries its owner's login, from
the headers, before reading the body.

Tornado reads a request's whole body (Jupyter Server allows 512 MB) before any handler asks who sent
it, and the proxy passes ``/user/<name>/...`` to the user's server from anyone: a stranger's few
large posts filled a server's memory until its cap killed it. Who is asking is decided from the
headers alone, with no request to the hub while a body waits:

* the server's own login cookie (set after the hub's OAuth, signed with the server's cookie secret)
  whose signature holds, checked locally; or
* an ``Authorization: token ...`` that the server has already checked with the hub and still holds in
  its cache, with the scopes this server asks for.

Anything else is a stranger's: a body over ``UNAUTHENTICATED_MAX_BODY_BYTES`` is refused from its
length (or, sent in chunks, as soon as it passes it), unread; the server answers 400 and closes.
A user's server needs no body from a stranger at all: its login is the hub's, its OAuth callback a GET.

With the owner's login the limit is ``ServerApp.max_body_size``, set in jupyter_config/student/
jupyter_server_config.py to ``MAX_BODY_BYTES``: the largest request a notebook needs is a save (the
whole notebook as JSON) or an upload (JupyterLab sends a file of up to 15 MB in one request, 20 MB as
base64, larger ones in 1 MB pieces). A larger body is read and thrown away piece by piece, never
held, and answered 413 with a message that says what to do; Lab shows it where the save failed.

``install()`` (the student's Jupyter Server config) replaces ``tornado.httpserver.HTTPServer`` by
``CredentialLimitedHTTPServer`` (``third_party_patches.serve_http_with``), as
attention_platform/hub/hub_request_limits.py does for the hub.
"""

from __future__ import annotations

import hashlib
import json

import tornado.httpserver
from tornado import httputil
from tornado.web import decode_signed_value

from attention_platform import third_party_patches

UNAUTHENTICATED_MAX_BODY_BYTES = 64 << 10
MAX_BODY_BYTES = 32 << 20
SESSION_COOKIE = "jupyterhub-session-id"  # part of the key under which HubAuth caches a checked token


def carries_owner_login(settings: dict, headers: httputil.HTTPHeaders) -> bool:
    """Whether the request's headers hold a login this server issued or has checked, decided locally."""
    hub_auth = getattr(settings.get("identity_provider"), "hub_auth", None)
    if hub_auth is None:
        return False
    cookies = httputil.parse_cookie(headers.get("Cookie", ""))
    secret = settings.get("cookie_secret")
    login_cookie = cookies.get(hub_auth.cookie_name)
    if secret and login_cookie and decode_signed_value(secret, hub_auth.cookie_name, login_cookie):
        return True
    match = hub_auth.auth_header_pat.match(headers.get(hub_auth.auth_header_name, ""))
    if not match:
        return False
    token_hash = hashlib.sha256(match.group(1).encode("utf8", "replace")).hexdigest()
    try:
        user = hub_auth.cache[f"token:{cookies.get(SESSION_COOKIE, '')}:{token_hash}"]
    except KeyError:
        return False
    return bool(user) and bool(hub_auth.check_scopes(hub_auth.access_scopes, user))


def too_large_message(declared: int, limit: int) -> str:
    return (f"This request carries {declared / (1 << 20):.1f} MB, and your server accepts at most "
            f"{limit >> 20} MB in one request (a notebook save or a file upload). A notebook this large "
            "usually holds large outputs: Clear them (Edit > Clear Outputs of All Cells), then save again.")


class _BodyGate(httputil.HTTPMessageDelegate):
    """Sets the body limit of one request from its headers; drains and answers an owner's over-limit body."""

    def __init__(self, delegate: httputil.HTTPMessageDelegate, connection, server: "CredentialLimitedHTTPServer"):
        self.delegate, self.connection, self.server = delegate, connection, server
        self.refused_length: int | None = None

    def headers_received(self, start_line, headers):
        if not carries_owner_login(self.server.request_callback.settings, headers):
            self.connection.set_max_body_size(UNAUTHENTICATED_MAX_BODY_BYTES)
            return self.delegate.headers_received(start_line, headers)
        declared = _declared_length(headers)
        if declared is not None and declared > self.server.owner_max_body_size:
            self.refused_length = declared
            self.connection.set_max_body_size(declared)  # read to keep the connection, each piece dropped
            return None
        return self.delegate.headers_received(start_line, headers)

    def data_received(self, chunk):
        if self.refused_length is None:
            return self.delegate.data_received(chunk)
        return None

    def finish(self):
        if self.refused_length is None:
            return self.delegate.finish()
        body = json.dumps({"message": too_large_message(self.refused_length, self.server.owner_max_body_size),
                           "reason": "request body too large"}).encode()
        self.connection.write_headers(
            httputil.ResponseStartLine("HTTP/1.1", 413, "Content Too Large"),
            httputil.HTTPHeaders({"Content-Type": "application/json", "Content-Length": str(len(body))}), body)
        self.connection.finish()
        return None

    def on_connection_close(self):
        if self.refused_length is None:
            self.delegate.on_connection_close()


def _declared_length(headers: httputil.HTTPHeaders) -> int | None:
    try:
        return int(headers.get("Content-Length", "").split(",")[0])
    except ValueError:
        return None  # chunked, or malformed: tornado's own checks and the limit apply


class CredentialLimitedHTTPServer(tornado.httpserver.HTTPServer):
    """Tornado's HTTP server whose body limit is ``UNAUTHENTICATED_MAX_BODY_BYTES`` for a request without
    the owner's login and the given ``max_body_size`` (default ``MAX_BODY_BYTES``) with it."""

    def initialize(self, *args, max_body_size: int | None = None, max_buffer_size: int | None = None, **kwargs):
        self.owner_max_body_size = max_body_size or MAX_BODY_BYTES
        super().initialize(*args, max_body_size=self.owner_max_body_size,
                           max_buffer_size=max_buffer_size or self.owner_max_body_size, **kwargs)

    def start_request(self, server_conn, request_conn):
        return _BodyGate(super().start_request(server_conn, request_conn), request_conn, self)


def install() -> None:
    third_party_patches.serve_http_with(CredentialLimitedHTTPServer)
