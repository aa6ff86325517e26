"""One HTTP exchange with the LMS, bounded in time and size, its failures told apart.

Every answer is read up to ``max_bytes`` and within ``timeout`` seconds in all (not per read):
an LMS that trickles or floods costs the worker one bounded request, never its memory or its loop.
No redirect is followed (a token or a score is sent to the URL the course configured, nowhere else).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass

import requests
import urllib3

from attention_platform import bounded_json

MAX_ANSWER_BYTES = 1 << 20
TIMEOUT_SECONDS = 10.0
ANSWER_BOUNDS = bounded_json.Bounds(max_bytes=MAX_ANSWER_BYTES, max_depth=16, max_containers=20_000, max_items=100_000)


class LmsUnavailable(Exception):
    """The LMS could not be reached or did not answer in time or in size; worth trying again later."""


@dataclass(frozen=True)
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self):
        try:
            return bounded_json.loads(self.body, ANSWER_BOUNDS, "the LMS's answer")
        except ValueError as error:
            raise ValueError(f"the LMS's answer is not JSON the tool can read ({error})"[:300]) from None

    def text(self, limit: int = 300) -> str:
        return self.body[:limit].decode("utf-8", "replace")


def exchange(method: str, url: str, *, headers: dict[str, str] | None = None, data=None, body: dict | None = None,
             timeout: float = TIMEOUT_SECONDS, max_bytes: int = MAX_ANSWER_BYTES,
             session: requests.Session | None = None) -> Answer:
    """``method`` on ``url`` with a form (``data``) or a JSON ``body``; LmsUnavailable when there is no whole
    answer within ``timeout`` seconds and ``max_bytes`` bytes."""
    headers = dict(headers or {})
    payload = None
    if body is not None:
        payload = json.dumps(body).encode()
        headers.setdefault("Content-Type", "application/json")
    deadline = time.monotonic() + timeout
    try:
        response = (session or requests).request(method, url, headers=headers, data=payload if body is not None
                                                  else data, timeout=timeout, stream=True, allow_redirects=False)
        try:
            declared = response.headers.get("Content-Length")
            if declared and declared.isdigit() and int(declared) > max_bytes:
                raise LmsUnavailable(f"{method} {url}: an answer of {declared} bytes, over {max_bytes}")
            received = bytearray()
            # read1: what has arrived, so a body sent a few bytes at a time meets the deadline check
            while chunk := response.raw.read1(64 * 1024, decode_content=True):
                received += chunk
                if len(received) > max_bytes:
                    raise LmsUnavailable(f"{method} {url}: an answer over {max_bytes} bytes")
                if time.monotonic() > deadline:
                    raise LmsUnavailable(f"{method} {url}: no whole answer within {timeout:g} s")
        finally:
            response.close()
    except (requests.RequestException, urllib3.exceptions.HTTPError, OSError) as error:  # read1 is urllib3's
        raise LmsUnavailable(f"{method} {url}: {type(error).__name__}: {error}"[:300]) from None
    return Answer(response.status_code, dict(response.headers), bytes(received))
