"""The LMS's public keys (its JWKS), for checking launch signatures without holding up the hub.

ltiauthenticator 1.6.3 fetches the key set with a blocking HTTP client at every launch, with a
30 s timeout, on the hub's one event loop: while an LMS is slow to answer, every page of the hub
waits. Here the set is fetched with tornado's asynchronous client, with a short timeout, and its
keys are kept by key id (``kid``):

* a launch signed with a known kid needs no fetch (until the set is ``max_age`` seconds old);
* an unknown kid fetches the set again, at most once per ``refetch_interval`` seconds, so a
  platform's new key works at once while launches with made-up key ids cost one fetch per interval;
* launches arriving during a fetch wait for that one fetch (a lock), not for fetches of their own;
* the answer is read up to ``max_bytes``; a key set that cannot be had is a 503 for the launch.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Callable

import jwt
from tornado.httpclient import HTTPClientError, HTTPRequest
from tornado.simple_httpclient import SimpleAsyncHTTPClient

KEY_SET_MAX_BYTES = 1 << 20


class KeySetUnavailable(Exception):
    """The platform's key set could not be fetched or read; the message says why."""


class UnknownKey(Exception):
    """The launch names a key (kid) the platform's key set does not list."""


class PlatformKeys:
    """Signing keys of one platform by kid, fetched asynchronously from its JWKS URL."""

    def __init__(self, url: str, *, timeout: float = 5.0, refetch_interval: float = 30.0, max_age: float = 3600.0,
                 max_bytes: int = KEY_SET_MAX_BYTES, clock: Callable[[], float] = time.monotonic):
        self.url, self.timeout, self.refetch_interval, self.max_age = url, timeout, refetch_interval, max_age
        self.max_bytes, self.clock = max_bytes, clock
        self._keys: dict[str, jwt.PyJWK] = {}
        self._fetched_at: float | None = None  # the last fetch that succeeded
        self._tried_at: float | None = None  # the last fetch, whatever came of it
        self._lock = asyncio.Lock()

    async def signing_key(self, kid: object) -> jwt.PyJWK:
        if not isinstance(kid, str) or not kid:
            raise UnknownKey("the launch's signature names no key (no kid in its header)")
        async with self._lock:
            if self._fresh() and kid in self._keys:
                return self._keys[kid]
            if self._fresh() and self._tried_at is not None \
                    and self.clock() - self._tried_at < self.refetch_interval:
                raise UnknownKey(f"the launch is signed with key {kid[:80]!r}, which the platform's key set "
                                 "does not list")
            await self._fetch()
            if kid not in self._keys:
                raise UnknownKey(f"the launch is signed with key {kid[:80]!r}, which the platform's key set "
                                 "does not list")
            return self._keys[kid]

    def _fresh(self) -> bool:
        return self._fetched_at is not None and self.clock() - self._fetched_at < self.max_age

    async def _fetch(self) -> None:
        self._tried_at = self.clock()
        # its own client: JupyterHub may configure curl's, which takes no body limit
        client = SimpleAsyncHTTPClient(force_instance=True, max_body_size=self.max_bytes)
        try:
            response = await client.fetch(HTTPRequest(self.url, connect_timeout=self.timeout,
                                                      request_timeout=self.timeout, follow_redirects=False))
            document = json.loads(response.body)
            if not isinstance(document, dict):
                raise ValueError("not a JSON object")
            keys = jwt.PyJWKSet.from_dict(document)
        except HTTPClientError as error:
            raise KeySetUnavailable(f"{self.url}: {error}") from None
        except (OSError, ValueError, jwt.PyJWTError) as error:
            raise KeySetUnavailable(f"{self.url}: {type(error).__name__}: {error}"[:300]) from None
        finally:
            client.close()
        self._keys = {key.key_id: key for key in keys.keys
                      if key.key_id and key.public_key_use in (None, "sig")}
        self._fetched_at = self._tried_at
