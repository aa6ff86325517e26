"""The hub's own HTTP server refuses a request body over 1 MB from its length, before reading it.

Tornado reads a request's whole body (up to 100 MB by default) before any handler runs, so before
JupyterHub's login page or API asks who is sending it; JupyterHub passes no limit of its own to the
``HTTPServer`` it makes, and has no setting for one. Anyone who reaches the hub could then fill, a
few hundred posts at a time, the memory of a process that runs as root on a native hub. The hub's
requests are forms and small JSON (a login, an LTI launch's signed token, the admin API's lists of
users); none comes near 1 MB. Notebooks never pass through the hub itself: the proxy sends them to
each user's server.

``install()`` (jupyter_config/jupyterhub_config.py, in the hub's process, before JupyterHub makes its server)
replaces ``tornado.httpserver.HTTPServer`` by a subclass whose limits default to ``MAX_BODY_BYTES``
(``third_party_patches.serve_http_with``); JupyterHub looks the class up when it makes the server.
A limit a caller passes wins.
"""

from __future__ import annotations

import tornado.httpserver

from attention_platform import third_party_patches

MAX_BODY_BYTES = 1 << 20


class LimitedHTTPServer(tornado.httpserver.HTTPServer):
    """Tornado's HTTP server with a body (and read buffer) limit of ``MAX_BODY_BYTES`` unless given one."""

    def initialize(self, *args, max_body_size: int | None = None, max_buffer_size: int | None = None, **kwargs):
        super().initialize(*args, max_body_size=max_body_size or MAX_BODY_BYTES,
                           max_buffer_size=max_buffer_size or MAX_BODY_BYTES, **kwargs)


def install() -> None:
    third_party_patches.serve_http_with(LimitedHTTPServer)
