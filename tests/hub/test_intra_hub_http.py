"""The hub's own HTTP client against the real configurable-http-proxy API (intra_hub_http.py).

The failure it guards against, seen once in the 100-student load test: the proxy's API (Node)
closes a connection idle for 5 s; a hub whose event loop was busy past that moment takes the
connection from its pool again and the request fails, so a student's route is never added. Each
case below fills the client's pool with a burst of requests, keeps the event loop busy (no
``await``) until the proxy has closed what it keeps open, and then adds routes one by one, as the
hub does when servers start.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import time

import pytest
from aiohttp import ClientConnectionError
from jupyterhub.httpclient import JupyterHubHTTPClient

from hub_helpers import REPO, free_port, load_hub_config

PROXY = REPO / "node_modules" / ".bin" / "configurable-http-proxy"
TOKEN = "intra-hub-http-test-token"
BURST = 4  # connections left idle in the client's pool
NODE_KEEP_ALIVE = 5.0  # seconds: Node's default, which the proxy's API server keeps


@pytest.fixture
def proxy_api():
    """A real configurable-http-proxy on 127.0.0.1; yields its API port."""
    api_port, public_port = free_port(), free_port()
    process = subprocess.Popen(
        [str(PROXY), "--ip", "127.0.0.1", "--port", str(public_port), "--api-ip", "127.0.0.1",
         "--api-port", str(api_port), "--log-level", "warn"],
        env=dict(os.environ, CONFIGPROXY_AUTH_TOKEN=TOKEN))
    try:
        deadline = time.monotonic() + 30
        while _client_sockets(api_port, states=("0A",), local=True) == 0:  # 0A: LISTEN
            assert process.poll() is None, "configurable-http-proxy exited"
            assert time.monotonic() < deadline, "configurable-http-proxy's API did not listen in 30 s"
            time.sleep(0.05)
        yield api_port
    finally:
        process.terminate()
        process.wait(timeout=30)


def _client_sockets(port: int, states: tuple[str, ...], local: bool = False) -> int:
    """How many IPv4 TCP sockets in one of ``states`` (hex, /proc/net/tcp) have ``port`` as their
    remote end (``local``: as their local end)."""
    count = 0
    with open("/proc/net/tcp") as table:
        next(table)
        for line in table:
            fields = line.split()
            address = fields[1] if local else fields[2]
            if int(address.rsplit(":", 1)[1], 16) == port and fields[3] in states:
                count += 1
    return count


async def _routes_after_a_busy_loop(api_port: int, config) -> list[str]:
    """Outcomes ("ok" or the error) of adding three routes after the burst and the busy loop."""
    JupyterHubHTTPClient.clear_instance()
    client = JupyterHubHTTPClient.instance(config=config)  # the hub's singleton, from the hub's config
    url = f"http://127.0.0.1:{api_port}/api/routes/user"
    headers = {"Authorization": f"token {TOKEN}"}
    body = json.dumps({"target": "http://127.0.0.1:9"})
    try:
        await asyncio.gather(*(client.fetch(f"{url}/burst{i}", method="POST", headers=headers, data=body)
                               for i in range(BURST)))
        busy_from = time.monotonic()
        # Busy, as a hub loaded by a class: no await, so the client cannot see the proxy's closes.
        while (time.monotonic() - busy_from < NODE_KEEP_ALIVE + 1
               or _client_sockets(api_port, states=("01",))):  # 01: ESTABLISHED
            assert time.monotonic() - busy_from < 30, "the proxy kept idle connections open for 30 s"
            time.sleep(0.1)
        outcomes = []
        for i in range(3):
            try:
                await client.fetch(f"{url}/student{i}", method="POST", headers=headers, data=body)
                outcomes.append("ok")
            except ClientConnectionError as exc:
                outcomes.append(f"{type(exc).__name__}: {exc}")
        return outcomes
    finally:
        await client.close()
        JupyterHubHTTPClient.clear_instance()


@pytest.mark.parametrize(("case", "hub_config", "every_route_added"), [
    ("JupyterHub's default client: the pool hands back a connection the proxy closed", False, False),
    ("the course's jupyter_config/jupyterhub_config.py", True, True),
])
def test_a_busy_hub_still_adds_every_route(proxy_api, monkeypatch, tmp_path, case, hub_config, every_route_added):
    from traitlets.config import Config

    config = load_hub_config(monkeypatch, tmp_path) if hub_config else Config()
    outcomes = asyncio.run(_routes_after_a_busy_loop(proxy_api, config))
    assert (outcomes == ["ok"] * 3) is every_route_added, f"{case}: {outcomes}"
