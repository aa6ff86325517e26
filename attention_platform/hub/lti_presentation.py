"""Where the LMS shows the tool (LTI_PRESENTATION): a window of its own (the default) or its own page (embed).

A launch crosses sites: the LMS's page posts the signed launch to the hub, so the cookies the hub set
when the login started (OIDC state and nonce) must come back on a cross-site POST, and, embedded, every
cookie of the hub must be sent inside the LMS's iframe. Browsers treat a cookie without a SameSite
attribute as Lax: sent on that POST only within two minutes of being set, never in a third-party iframe.
Over HTTPS the hub's launch and login cookies are therefore ``SameSite=None; Secure``
(``cross_site_cookie_options``). Over plain HTTP (development on 127.0.0.1) browsers refuse
``SameSite=None`` without ``Secure``, so they stay Lax there: open the tool in a new window and finish a
launch within two minutes.

``window``: no page of the hub may be framed (JupyterHub's ``frame-ancestors 'none'``). A launch that
starts inside a frame, which the browser says (``Sec-Fetch-Dest: iframe``), gets a page with a link that
opens the same launch in a new window (``NEW_WINDOW_PAGE``) rather than a later "OAuth state missing from
cookies". That one page may be framed by any site: all it holds is a link to start a login the LMS must
still authorise, which a hostile site could link to directly anyway.

``embed``: the hub's pages and the students' servers may be framed by the LMS origins in
LTI_EMBED_ORIGINS only (``frame-ancestors 'self' <origins>``); it needs HTTPS for the cookies above.
The formgrader keeps ``frame-ancestors 'none'``: TAs open it in a tab of its own.
"""

from __future__ import annotations

import html
import re
from typing import Any, Iterable

WINDOW, EMBED = "window", "embed"
FRAMED_DESTINATIONS = frozenset({"iframe", "frame", "embed", "object"})
_ORIGIN = re.compile(r"https?://[A-Za-z0-9.-]+(:[0-9]{1,5})?")

NEW_WINDOW_PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>Open the course hub in a new window</title>
<style>body{{font:16px/1.5 system-ui,sans-serif;max-width:36rem;margin:2rem auto;padding:0 1rem;color:#1b1b1b}}
a.open{{display:inline-block;margin:1rem 0;padding:.6rem 1rem;background:#0b57d0;color:#fff;border-radius:4px}}</style>
</head><body>
<h1>Open the course hub in a new window</h1>
<p>The course hub works in a window of its own. Your LMS opened it inside its page, where your browser
does not keep you signed in to the hub.</p>
<p><a class="open" href="{link}" target="_blank" rel="noopener">Open the course hub in a new window</a></p>
<p>If nothing opens, allow pop-ups for your LMS, or ask your instructor to set the tool to open in a new
window.</p>
</body></html>
"""
NEW_WINDOW_PAGE_POLICY = "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors *"


def cross_site_cookie_options(scheme: str) -> dict[str, Any]:
    """Cookie attributes that let a cookie set for a launch come back across sites: only over HTTPS,
    where browsers accept ``SameSite=None`` (it needs ``Secure``)."""
    return {"samesite": "None", "secure": True} if scheme == "https" else {}


def embed_origins(origins: Iterable[str]) -> list[str]:
    """The LMS origins allowed to frame the hub, each ``scheme://host[:port]``; ValueError naming a bad one."""
    checked = []
    for origin in origins:
        origin = origin.strip().rstrip("/")
        if not _ORIGIN.fullmatch(origin):
            raise ValueError(f"LTI_EMBED_ORIGINS: {origin!r} is not an origin such as https://canvas.example.edu "
                             "(scheme and host, no path, no wildcard)")
        checked.append(origin)
    if not checked:
        raise ValueError("LTI_PRESENTATION=embed needs LTI_EMBED_ORIGINS: the LMS origin(s) that show the hub")
    return checked


def frame_ancestors_policy(origins: Iterable[str]) -> str:
    return "frame-ancestors 'self' " + " ".join(origins)


def framed(headers) -> bool:
    """Whether the browser loads this request into a frame (Fetch Metadata: ``Sec-Fetch-Dest``)."""
    return headers.get("Sec-Fetch-Dest", "").lower() in FRAMED_DESTINATIONS


def new_window_page(link: str) -> str:
    return NEW_WINDOW_PAGE.format(link=html.escape(link, quote=True))


class CrossSiteCookies:
    """Handler mix-in: every cookie the handler sets carries ``cross_site_cookie_options``."""

    def _set_cookie(self, key, value, encrypted=True, **overrides):
        options = cross_site_cookie_options(self.authenticator.get_uri_scheme(self.request))
        super()._set_cookie(key, value, encrypted=encrypted, **{**options, **overrides})
