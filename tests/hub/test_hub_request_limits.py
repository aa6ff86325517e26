"""The hub's own HTTP server refuses a request body over 1 MB unread
(attention_platform/hub/hub_request_limits.py): the server class on its own, then the live hub."""

from __future__ import annotations

import pytest
import tornado.web

from attention_platform.hub.hub_request_limits import MAX_BODY_BYTES, LimitedHTTPServer
from hub_helpers import BodyLength, posted_status, serve_in_threads


@pytest.fixture
def serve():
    """``serve(**server_kwargs)``: a LimitedHTTPServer on 127.0.0.1 in a thread of its own; its URL."""
    with serve_in_threads() as start:
        yield lambda **kwargs: start(LimitedHTTPServer, tornado.web.Application([(r"/", BodyLength)]), **kwargs)


READ = (200,)
REFUSED = (400, "closed")  # the server answers 400 and closes; a client still sending may see only the close


@pytest.mark.parametrize("case, kwargs, size, expected", [
    ("a body within the limit is read", {}, MAX_BODY_BYTES, READ),
    ("one byte more is refused from its length", {}, MAX_BODY_BYTES + 1, REFUSED),
    ("a limit the caller gives wins", {"max_body_size": 4 << 20, "max_buffer_size": 4 << 20}, 2 << 20, READ),
])
def test_the_server_class(serve, case, kwargs, size, expected):
    assert posted_status(serve(**kwargs), data=b"x" * size) in expected, case


@pytest.mark.slow
@pytest.mark.hub
@pytest.mark.root
def test_the_live_hub_refuses_a_large_body_unread_and_goes_on(security_hub):
    """Before: the hub read the whole 2 MB, then its login page refused the form (403)."""
    url = security_hub.url + "/hub/login"

    def login_form(size: int):
        return posted_status(url, data={"username": "nobody", "password": "x" * size})

    assert login_form(1000) == 403  # read: the form has no _xsrf token
    large = login_form(2 << 20)
    assert large in (400, 413, 503, "closed"), large  # the hub closes on the length; its proxy says 503
    assert login_form(1) == 403  # and it goes on serving
