"""A platform's service side for the LMS services' fault cases: token endpoint, line items, scores,
results and the roster, on 127.0.0.1, with switches for what goes wrong (down, refusing tokens,
slow, answering too much). It checks each client assertion with the tool's public key as a platform
does (signature, iss = sub = client id, aud = its token endpoint, exp, a jti used once) and each
service call's bearer token and scope."""

from __future__ import annotations

import json
import secrets
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

import jwt

CLIENT_ID = "attention-tool-1"
SCOPES = "https://purl.imsglobal.org/spec/lti-ags/scope/"
MEMBERSHIP = "https://purl.imsglobal.org/spec/lti-nrps/scope/contextmembership.readonly"


class ServicesLMS:
    def __init__(self, tool_public_key, context="course-42"):
        self.tool_public_key, self.context = tool_public_key, context
        self.token_requests: list[dict] = []  # each token request's form
        self.tokens: dict[str, set[str]] = {}  # token -> scopes granted
        self.jtis: set[str] = set()
        self.line_items: dict[str, dict] = {}  # id URL -> line item
        self.scores: dict[str, list[dict]] = {}  # line item URL -> scores posted
        self.members: list[dict] = []
        self.page_size = 0  # >0: the roster in pages of that many, linked with rel="next"
        self.refuse_tokens = ""  # an OAuth error code to answer every token request with
        self.status_override = 0  # answer every request with this status (503: down for maintenance)
        self.delay = 0.0
        self.huge_answer = False
        self.lock = threading.Lock()
        lms = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def body(self):
                return self.rfile.read(int(self.headers.get("Content-Length") or 0))

            def answer(self, status, document=None, headers=()):
                data = b"" if document is None else json.dumps(document).encode()
                if lms.huge_answer:
                    data = b'{"pad": "' + b"x" * (3 << 20) + b'"}'
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for name, value in headers:
                    self.send_header(name, value)
                self.end_headers()
                if lms.delay:
                    for start in range(0, len(data) or 1, 16):
                        time.sleep(lms.delay)
                        self.wfile.write(data[start:start + 16])
                        self.wfile.flush()
                else:
                    self.wfile.write(data)

            def scoped(self, scope):
                token = self.headers.get("Authorization", "").removeprefix("Bearer ")
                granted = lms.tokens.get(token)
                if granted is None:
                    self.answer(401, {"error": "invalid_token"})
                    return False
                if scope not in granted:
                    self.answer(403, {"error": "insufficient_scope"})
                    return False
                return True

            def do_POST(self):  # noqa: N802
                if lms.status_override:
                    return self.answer(lms.status_override, {"error": "temporarily_unavailable"})
                path = urlsplit(self.path).path
                if path == "/token":
                    return lms.token(self, parse_qs(self.body().decode()))
                if path == f"/{lms.context}/lineitems":
                    if not self.scoped(SCOPES + "lineitem"):
                        return
                    item = json.loads(self.body())
                    item["id"] = f"{lms.url}/{lms.context}/lineitems/{len(lms.line_items) + 1}"
                    lms.line_items[item["id"]] = item
                    return self.answer(201, item)
                if path.startswith(f"/{lms.context}/lineitems/") and path.endswith("/scores"):
                    if not self.scoped(SCOPES + "score"):
                        return
                    item = lms.url + path.removesuffix("/scores")
                    if item not in lms.line_items:
                        return self.answer(404, {"error": "no such line item"})
                    assert self.headers["Content-Type"] == "application/vnd.ims.lis.v1.score+json"
                    with lms.lock:
                        lms.scores.setdefault(item, []).append(json.loads(self.body()))
                    return self.answer(204)
                self.answer(404, {"error": "not found"})

            def do_GET(self):  # noqa: N802
                if lms.status_override:
                    return self.answer(lms.status_override, {"error": "temporarily_unavailable"})
                parts = urlsplit(self.path)
                query = parse_qs(parts.query)
                if parts.path == f"/{lms.context}/lineitems":
                    if not self.scoped(SCOPES + "lineitem"):
                        return
                    wanted = query.get("resource_id", [None])[0]
                    return self.answer(200, [i for i in lms.line_items.values()
                                             if wanted is None or i.get("resourceId") == wanted])
                if parts.path == f"/{lms.context}/memberships":
                    if not self.scoped(MEMBERSHIP):
                        return
                    start = int(query.get("from", ["0"])[0])
                    size = lms.page_size or len(lms.members) or 1
                    page = lms.members[start:start + size]
                    links = []
                    if start + size < len(lms.members):
                        links = [("Link", f'<{lms.url}/{lms.context}/memberships?from={start + size}>; rel="next"')]
                    return self.answer(200, {"id": lms.url + parts.path, "context": {"id": lms.context},
                                             "members": page}, links)
                self.answer(404, {"error": "not found"})

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def token_url(self):
        return self.url + "/token"

    @property
    def line_items_url(self):
        return f"{self.url}/{self.context}/lineitems"

    @property
    def memberships_url(self):
        return f"{self.url}/{self.context}/memberships"

    def token(self, handler, form):
        form = {name: values[0] for name, values in form.items()}
        self.token_requests.append(form)
        if self.refuse_tokens:
            return handler.answer(400, {"error": self.refuse_tokens, "error_description": "the platform says no"})
        if form.get("grant_type") != "client_credentials" or form.get("client_assertion_type") != \
                "urn:ietf:params:oauth:client-assertion-type:jwt-bearer":
            return handler.answer(400, {"error": "unsupported_grant_type"})
        try:
            claims = jwt.decode(form["client_assertion"], self.tool_public_key, algorithms=["RS256"],
                                audience=self.token_url, issuer=CLIENT_ID,
                                options={"require": ["iss", "sub", "aud", "exp", "iat", "jti"]})
        except (KeyError, jwt.PyJWTError) as error:
            return handler.answer(401, {"error": "invalid_client", "error_description": str(error)})
        if claims["sub"] != CLIENT_ID or claims["jti"] in self.jtis:
            return handler.answer(401, {"error": "invalid_client", "error_description": "sub or jti"})
        self.jtis.add(claims["jti"])
        token = secrets.token_urlsafe(16)
        self.tokens[token] = set(form.get("scope", "").split())
        handler.answer(200, {"access_token": token, "token_type": "Bearer", "expires_in": 3600,
                             "scope": form.get("scope", "")})

    def revoke_all_tokens(self):
        self.tokens.clear()

    def close(self):
        self.server.shutdown()
        self.server.server_close()
