"""A student's server refuses a large body from a request without its owner's credentials, before
reading it, and bounds what its owner may send (attention_platform/lab/student_request_limits.py),
attacked on a live native hub as a stranger would: streamed floods of a few hundred MB to
``/user/<name>/api/...`` without logging in."""

from __future__ import annotations

import hashlib
import http.client
import threading
import urllib.parse
from types import SimpleNamespace

import nbformat
import pytest
import requests
import tornado.web
from jupyterhub.services.auth import HubOAuth
from nbformat.v4 import new_code_cell, new_notebook, new_output
from tornado.web import create_signed_value

from attention_platform.lab.student_request_limits import (
    MAX_BODY_BYTES, UNAUTHENTICATED_MAX_BODY_BYTES, CredentialLimitedHTTPServer)
from hub_helpers import BodyLength, posted_status, serve_in_threads

OWNER = "student1"
CHUNK = b"x" * (1 << 20)
FLOOD_MB = 400  # each request of the flood; three at once are more than the server's 1 GB memory cap


def streamed_status(url: str, method: str, megabytes: int, *, chunked: bool, headers: dict | None = None):
    """Send ``megabytes`` MB to ``url`` from a bounded loop, one MB at a time, never held whole: the
    status, or "closed" if the connection was closed while the body was still being sent."""
    parts = urllib.parse.urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=120)
    headers = dict(headers or {})
    if not chunked:
        headers["Content-Length"] = str(megabytes * len(CHUNK))
    try:
        connection.request(method, parts.path, body=(CHUNK for _ in range(megabytes)), headers=headers,
                           encode_chunked=chunked)
        return connection.getresponse().status
    except (ConnectionError, http.client.HTTPException, TimeoutError):
        return "closed"
    finally:
        connection.close()


def notebook_of(size: int) -> dict:
    """A valid notebook whose one output carries about ``size`` bytes."""
    cell = new_code_cell("print('x' * n)", outputs=[new_output("stream", name="stdout", text="x" * size)])
    return nbformat.from_dict(new_notebook(cells=[cell]))


@pytest.fixture(scope="module")
def owner(security_hub):
    session = security_hub.session(OWNER)
    session.spawn()
    return session


REFUSED = (400, 413, 503, "closed")  # refused on the length; the proxy answers a close with 503


@pytest.mark.slow
@pytest.mark.hub
@pytest.mark.root
def test_a_strangers_flood_is_refused_unread_and_the_owner_is_served(security_hub, owner):
    """Before: each body was read whole before any login check; three of 400 MB at once and the
    server was killed by its memory cap (the proxy then answered 503 until it was restarted)."""
    api = f"{security_hub.url}/user/{OWNER}/api/contents/flood.ipynb"
    statuses = {}

    def flood(index: int, method: str, chunked: bool):
        statuses[index] = streamed_status(api, method, FLOOD_MB, chunked=chunked)

    floods = [threading.Thread(target=flood, args=(i, method, chunked))
              for i, (method, chunked) in enumerate([("PUT", False), ("POST", False), ("PUT", True)])]
    for thread in floods:
        thread.start()
    for thread in floods:
        thread.join(600)
    assert all(status in REFUSED for status in statuses.values()), statuses
    # a small unauthenticated body is still read, then refused for want of a login
    small = streamed_status(api, "PUT", 0, chunked=False)
    assert small in (302, 403), small
    # the owner's server is alive and serves its owner
    assert owner.contents("").status_code == 200
    model = security_hub.session("instructor").hub_api("GET", f"/users/{OWNER}").json()
    assert model["servers"][""]["ready"], model


@pytest.mark.slow
@pytest.mark.hub
@pytest.mark.root
def test_the_owner_saves_a_notebook_larger_than_a_strangers_limit(owner):
    notebook = notebook_of(4 * UNAUTHENTICATED_MAX_BODY_BYTES)
    owner.save_notebook("owners-notebook.ipynb", notebook)
    saved = owner.contents("owners-notebook.ipynb").json()["content"]
    assert saved["cells"][0]["outputs"][0]["text"] == notebook.cells[0].outputs[0].text


@pytest.mark.slow
@pytest.mark.hub
@pytest.mark.root
def test_a_token_the_server_has_checked_may_send_a_notebook(security_hub, owner):
    token = owner.hub_api("POST", f"/users/{OWNER}/tokens",
                          json={"note": "a test's token", "expires_in": 600}).json()["token"]
    api = f"{security_hub.url}/user/{OWNER}/api/contents/by-token.ipynb"
    headers = {"Authorization": f"token {token}"}
    assert requests.get(api.rsplit("/", 1)[0], headers=headers, timeout=60).status_code == 200
    reply = requests.put(api, headers=headers, timeout=120, json={
        "type": "notebook", "format": "json", "content": notebook_of(4 * UNAUTHENTICATED_MAX_BODY_BYTES)})
    assert reply.status_code in (200, 201), reply.text


@pytest.mark.slow
@pytest.mark.hub
@pytest.mark.root
def test_the_owners_body_over_the_limit_is_refused_with_a_reason(owner):
    """Before: a save of any size up to 512 MB was read and written."""
    reply = owner.put(f"/user/{OWNER}/api/contents/too-large.ipynb", json={
        "type": "notebook", "format": "json", "content": notebook_of(MAX_BODY_BYTES + (1 << 20))})
    assert reply.status_code == 413, (reply.status_code, reply.text[:300])
    message = reply.json()["message"]
    assert f"at most {MAX_BODY_BYTES >> 20} MB" in message and "Clear" in message, message
    assert owner.contents("too-large.ipynb").status_code == 404
    assert owner.contents("").status_code == 200


# --------------------------------------------------------------------------- the server class, without a hub

SECRET = b"the server's own cookie secret"
CLIENT = "jupyterhub-user-ann"


@pytest.fixture
def student_server():
    """A CredentialLimitedHTTPServer with JupyterHub's real HubOAuth as a user's server has it; a token
    ``checked`` is in its cache as the hub's answer for the owner."""
    hub_auth = HubOAuth(api_token="server-token", api_url="http://127.0.0.1:9/hub/api", oauth_client_id=CLIENT,
                        access_scopes={"access:servers!server=ann/"}, cache_max_age=300)
    owner = {"name": "ann", "scopes": ["access:servers!server=ann/"]}
    hub_auth.cache["token:" + ":" + hashlib.sha256(b"checked").hexdigest()] = owner
    hub_auth.cache["token:" + ":" + hashlib.sha256(b"someone-else").hexdigest()] = {"name": "bob", "scopes": []}
    application = tornado.web.Application([(r"/", BodyLength)], cookie_secret=SECRET,
                                          identity_provider=SimpleNamespace(hub_auth=hub_auth))
    with serve_in_threads() as start:
        yield start(CredentialLimitedHTTPServer, application, max_body_size=MAX_BODY_BYTES,
                    max_buffer_size=MAX_BODY_BYTES)


def login_cookie(secret: bytes = SECRET) -> dict:
    return {"Cookie": f"{CLIENT}={create_signed_value(secret, CLIENT, 'a-token').decode()}"}


LIMIT, OWNER_LIMIT = UNAUTHENTICATED_MAX_BODY_BYTES, MAX_BODY_BYTES


@pytest.mark.parametrize("case, headers, size, expected", [
    ("a stranger's small body is read", {}, LIMIT, (200,)),
    ("a stranger's larger body is refused from its length", {}, LIMIT + 1, (400, "closed")),
    ("the owner's login cookie: a notebook is read", login_cookie(), 4 * LIMIT, (200,)),
    ("a cookie signed with another secret is a stranger's", login_cookie(b"forged"), 4 * LIMIT, (400, "closed")),
    ("a token the server checked with the hub", {"Authorization": "token checked"}, 4 * LIMIT, (200,)),
    ("a token never checked is a stranger's", {"Authorization": "token unknown"}, 4 * LIMIT, (400, "closed")),
    ("a checked token without this server's scope", {"Authorization": "token someone-else"}, 4 * LIMIT,
     (400, "closed")),
    ("the owner's body over their limit: 413", login_cookie(), OWNER_LIMIT + 1, (413,)),
])
def test_the_server_class(student_server, case, headers, size, expected):
    assert posted_status(student_server, data=b"x" * size, headers=headers) in expected, case


def test_a_strangers_chunked_body_is_cut_at_the_limit(student_server):
    assert streamed_status(student_server, "PUT", 2, chunked=True) in (400, "closed")
    assert streamed_status(student_server, "PUT", 2, chunked=True, headers=login_cookie()) == 200


def test_the_owner_is_told_why_and_what_to_do(student_server):
    reply = requests.put(student_server, data=b"x" * (OWNER_LIMIT + 1), headers=login_cookie(), timeout=60)
    assert reply.status_code == 413
    assert reply.json()["message"].startswith(f"This request carries {(OWNER_LIMIT + 1) / (1 << 20):.1f} MB")

