"""The only way the hub reaches the Docker engine (docker-compose.yml, service docker-guard).

Whoever holds the engine's socket is root on the host, and the hub runs code reachable from the
Internet. So the socket lives in this small service's container, and the hub's DOCKER_HOST points
here. It forwards only what DockerSpawner needs to run the student image, checked in full:

* ``GET /version``, ``/_ping``: the client's version handshake;
* ``GET /images/<student image>/json``: the one image it may inspect;
* ``POST /containers/create``: a student container, and nothing else -- the configured image,
  the project's label, a ``<project>-student-<name>`` name, uid 1000, no capabilities and
  ``no-new-privileges``, memory and pids limits, no devices, no host namespaces, no ports, and of
  the host exactly the volume mounts the hub's spawner config makes (the student's home volume,
  the exchange's outbound folder read-only, that student's own inbound and feedback folders);
* ``GET .../json``, ``start``, ``stop``, ``DELETE`` of containers carrying the project's label.

Each student container gets a network of its own (``<project>-net-<name>``, internal, made here on
its first create) that only it and the hub join, so no student reaches another student's server
except through the hub's proxy. Anything else -- exec, build, pull, volumes, other containers --
is refused with 403. Bodies are read only up to MAX_BODY bytes, from their declared length.

Stdlib only: it runs in a container of its own with nothing but this file and the settings module
(docker/docker-guard.Dockerfile).
"""

from __future__ import annotations

import http.client
import ipaddress
import json
import re
import socket
import sys
import threading
import urllib.parse
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from attention_platform.settings import Settings, settings, settings_or_exit

# A create body from DockerSpawner is a few kB (the environment is the largest part).
MAX_BODY = 256 * 1024
# Replies from the engine the hub may see are container/image descriptions, far below this.
MAX_REPLY = 4 * 1024 * 1024
STUDENT_UID = ("1000:100", "1000")
API_PREFIX = re.compile(r"^/v(\d+)\.(\d+)(?=/)")
# Older API versions read settings from other places (before 1.24 a start's body is a HostConfig).
MIN_API = (1, 40)
PROJECT_LABEL = "dl-attention.project"
# A single path component safe for a bind mount's source: no separators, no bind-syntax colon.
RAW_NAME = re.compile(r"^[^/:\x00]+$")
NAME_PART = re.compile(r"^[a-zA-Z0-9_.-]+$")

# HostConfig keys DockerSpawner sets, each with the values allowed; any other key must be empty.
EMPTY = (None, "", 0, False, [], {})
NAMESPACE_MODES = {"PidMode": ("",), "IpcMode": ("", "private", "none"), "UTSMode": ("",),
                   "UsernsMode": ("",), "CgroupnsMode": ("", "private")}
RESOURCE_KEYS = {"Memory", "MemorySwap", "MemoryReservation", "NanoCpus", "CpuPeriod", "CpuQuota", "CpuShares",
                 "PidsLimit", "ShmSize", "AutoRemove"}
CONFIG_KEYS = {"Hostname", "Domainname", "User", "AttachStdin", "AttachStdout", "AttachStderr", "Tty", "OpenStdin",
               "StdinOnce", "Env", "Cmd", "Image", "Volumes", "WorkingDir", "Entrypoint", "NetworkDisabled",
               "Labels", "ExposedPorts", "StopSignal", "StopTimeout", "Healthcheck", "MacAddress",
               "HostConfig", "NetworkingConfig"}


class Refused(Exception):
    """A request the guard does not forward; its text says which rule refused it."""


@dataclass
class Policy:
    """What the hub may ask of the engine, from the same settings the hub's spawner config uses."""

    project: str
    image: str
    exchange: str  # EXCHANGE_HOST_DIR: the exchange's path on the host
    course: str
    subnets: ipaddress.IPv4Network = field(default_factory=lambda: ipaddress.ip_network("10.213.0.0/16"))
    subnet_prefix: int = 29  # gateway, hub and the student's container

    @classmethod
    def from_environment(cls, environ=None) -> Policy:
        configured = settings() if environ is None else Settings.from_environ(environ)
        if not configured.exchange_host_dir:
            raise SystemExit("docker-guard: EXCHANGE_HOST_DIR is not set (the exchange's path on the host)")
        return cls(project=configured.compose_project, image=configured.student_image,
                   exchange=configured.exchange_host_dir.rstrip("/"), course=configured.nbgrader_course_id,
                   subnets=ipaddress.ip_network(configured.student_subnets))

    @property
    def container_prefix(self) -> str:
        return f"{self.project}-student-"

    def network_of(self, container_name: str) -> str:
        """The network a student container (by its name) lives on alone with the hub."""
        return f"{self.project}-net-" + container_name[len(self.container_prefix):]

    def expected_binds(self, escaped: str, raw: str) -> set[str]:
        x, c = self.exchange, self.course
        return {f"{self.project}-home-{escaped}:/home/jovyan:rw",
                f"{x}/{c}/outbound:/srv/nbgrader/exchange/{c}/outbound:ro",
                f"{x}/{c}/inbound/{raw}:/srv/nbgrader/exchange/{c}/inbound:rw",
                f"{x}/{c}/feedback/{raw}:/srv/nbgrader/exchange/{c}/feedback:ro"}

    def check_create(self, query: dict[str, list[str]], body: dict) -> str:
        """Refuse (Refused) anything but a student container as the hub's spawner makes it;
        return the name of the network it must be on."""
        name = (query.get("name") or [""])[0].lstrip("/")
        escaped = name[len(self.container_prefix):]
        if not name.startswith(self.container_prefix) or not NAME_PART.match(escaped):
            raise Refused(f"container name {name!r} is not {self.container_prefix}<name>")
        if not isinstance(body, dict):
            raise Refused("the create body is not an object")
        unknown = {key for key, value in body.items() if key not in CONFIG_KEYS and value not in EMPTY}
        if unknown:
            raise Refused(f"settings not allowed: {sorted(unknown)}")
        if body.get("Image") != self.image:
            raise Refused(f"image {body.get('Image')!r} is not the student image")
        if body.get("Labels") != {PROJECT_LABEL: self.project}:  # no other: the hub is found by its labels
            raise Refused(f"the labels must be exactly {PROJECT_LABEL}={self.project}")
        if body.get("User") not in (None, "", *STUDENT_UID):
            raise Refused(f"user {body.get('User')!r} is not the student's uid")
        if body.get("Entrypoint") not in EMPTY:
            raise Refused("the image's entrypoint is not replaced")
        users = [item.split("=", 1)[1] for item in body.get("Env") or [] if item.startswith("JUPYTERHUB_USER=")]
        if len(users) != 1 or not RAW_NAME.match(users[0]) or users[0] in (".", ".."):
            raise Refused("JUPYTERHUB_USER is not one folder name")
        network = self.network_of(name)
        self._check_host_config(body.get("HostConfig") or {}, network, self.expected_binds(escaped, users[0]))
        endpoints = ((body.get("NetworkingConfig") or {}).get("EndpointsConfig") or {})
        if set(endpoints) - {network}:
            raise Refused(f"networks not allowed: {sorted(set(endpoints) - {network})}")
        return network

    def _check_host_config(self, host: dict, network: str, binds: set[str]) -> None:
        if not isinstance(host, dict):
            raise Refused("HostConfig is not an object")
        allowed = RESOURCE_KEYS | set(NAMESPACE_MODES) | {"Binds", "NetworkMode", "CapDrop", "SecurityOpt",
                                                          "Privileged", "CapAdd", "Mounts", "Devices"}
        unknown = {key for key, value in host.items() if key not in allowed and value not in EMPTY}
        if unknown:
            raise Refused(f"host settings not allowed: {sorted(unknown)}")
        for key in ("Privileged", "CapAdd", "Mounts", "Devices"):
            if host.get(key) not in EMPTY:
                raise Refused(f"{key} is not allowed")
        if host.get("CapDrop") != ["ALL"]:
            raise Refused("CapDrop must be ['ALL']")
        if host.get("SecurityOpt") != ["no-new-privileges:true"]:
            raise Refused("SecurityOpt must be exactly ['no-new-privileges:true']")
        for key, modes in NAMESPACE_MODES.items():
            if (host.get(key) or "") not in modes:
                raise Refused(f"{key} {host.get(key)!r} is not allowed")
        if host.get("NetworkMode") != network:
            raise Refused(f"NetworkMode must be {network!r}")
        for key in ("Memory", "PidsLimit"):
            if not isinstance(host.get(key), int) or host[key] <= 0:
                raise Refused(f"{key} must be a positive limit")
        if set(host.get("Binds") or []) != binds or len(host.get("Binds") or []) != len(binds):
            raise Refused("the mounts are not exactly the student's home, outbound, inbound and feedback")


class Engine:
    """HTTP to the engine's Unix socket, one connection per request."""

    def __init__(self, path: str):
        self.path = path

    def request(self, method: str, url: str, body: bytes | None = None,
                headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
        conn = http.client.HTTPConnection("localhost", timeout=120)
        conn.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        conn.sock.settimeout(120)
        conn.sock.connect(self.path)
        try:
            conn.request(method, url, body=body, headers={"Host": "docker", **(headers or {})})
            reply = conn.getresponse()
            data = reply.read(MAX_REPLY + 1)
            if len(data) > MAX_REPLY:
                raise Refused("the engine's reply is larger than the guard forwards")
            return reply.status, {k.lower(): v for k, v in reply.getheaders()}, data
        finally:
            conn.close()

    def json(self, method: str, url: str, payload=None) -> tuple[int, object]:
        body = json.dumps(payload).encode() if payload is not None else None
        status, _, data = self.request(method, url, body, {"Content-Type": "application/json"} if body else None)
        try:
            return status, json.loads(data) if data else None
        except ValueError:
            return status, None


class Guard:
    """The rules of the module docstring, applied to one request at a time."""

    def __init__(self, policy: Policy, engine: Engine):
        self.policy, self.engine = policy, engine
        self.networks_lock = threading.Lock()  # two spawns must not pick the same subnet

    def ours(self, ref: str) -> dict | None:
        status, info = self.engine.json("GET", f"/containers/{urllib.parse.quote(ref, safe='')}/json")
        if status != 200 or not isinstance(info, dict):
            return None
        if ((info.get("Config") or {}).get("Labels") or {}).get(PROJECT_LABEL) != self.policy.project:
            return None
        if not info.get("Name", "").lstrip("/").startswith(self.policy.container_prefix):
            return None
        return info

    def hub_container(self) -> str:
        labels = json.dumps({"label": [f"com.docker.compose.project={self.policy.project}",
                                       "com.docker.compose.service=hub"]})
        status, found = self.engine.json("GET", "/containers/json?filters=" + urllib.parse.quote(labels))
        hubs = [c["Id"] for c in found or [] if status == 200 and PROJECT_LABEL not in (c.get("Labels") or {})]
        if not hubs:
            raise Refused("the hub's container is not running")
        return hubs[0]

    def free_subnet(self) -> str:
        status, networks = self.engine.json("GET", "/networks")
        used = []
        for network in networks if status == 200 else []:
            for config in ((network.get("IPAM") or {}).get("Config") or []):
                try:
                    used.append(ipaddress.ip_network(config.get("Subnet", ""), strict=False))
                except ValueError:
                    pass
        for candidate in self.policy.subnets.subnets(new_prefix=self.policy.subnet_prefix):
            if not any(candidate.overlaps(net) for net in used if net.version == 4):
                return str(candidate)
        raise Refused(f"no free /{self.policy.subnet_prefix} left in STUDENT_SUBNETS {self.policy.subnets}")

    def ensure_network(self, name: str) -> None:
        """The student's own internal network, with the hub on it (as ``hub``, the name students'
        servers call the hub's API by)."""
        with self.networks_lock:
            status, info = self.engine.json("GET", f"/networks/{name}")
            if status == 404:
                status, info = self.engine.json("POST", "/networks/create", {
                    "Name": name, "Driver": "bridge", "Internal": True, "CheckDuplicate": True,
                    "Labels": {PROJECT_LABEL: self.policy.project},
                    "IPAM": {"Config": [{"Subnet": self.free_subnet()}]}})
                if status != 201:
                    raise Refused(f"could not create network {name}: {info}")
                status, info = self.engine.json("GET", f"/networks/{name}")
            if status != 200 or (info.get("Labels") or {}).get(PROJECT_LABEL) != self.policy.project:
                raise Refused(f"network {name} is not the project's")
            hub = self.hub_container()
            if hub not in (info.get("Containers") or {}):
                status, reply = self.engine.json("POST", f"/networks/{name}/connect", {
                    "Container": hub, "EndpointConfig": {"Aliases": ["hub"]}})
                if status != 200:
                    raise Refused(f"could not connect the hub to {name}: {reply}")

    def route(self, method: str, path: str, query: dict[str, list[str]], body: bytes) -> None:
        """Refuse (Refused) what is not allowed; prepare what an allowed request needs."""
        version = API_PREFIX.match(path)
        if version and tuple(map(int, version.groups())) < MIN_API:
            raise Refused(f"API version {version.group(1)}.{version.group(2)} is older than the guard allows")
        path = API_PREFIX.sub("", path)
        if body and (method, path) != ("POST", "/containers/create"):
            raise Refused("only a container create carries a body")
        if method in ("GET", "HEAD") and path in ("/version", "/_ping"):
            return
        if method == "GET" and path == f"/images/{self.policy.image}/json":
            return
        if method == "POST" and path == "/containers/create":
            try:
                config = json.loads(body or b"null")
            except ValueError as exc:
                raise Refused("the create body is not JSON") from exc
            self.ensure_network(self.policy.check_create(query, config))
            return
        match = re.fullmatch(r"/containers/([^/]+)(/json|/start|/stop|)", path)
        if match:
            ref, action = urllib.parse.unquote(match.group(1)), match.group(2)
            allowed = {"/json": "GET", "/start": "POST", "/stop": "POST", "": "DELETE"}[action]
            if method == allowed:
                info = self.ours(ref)
                if info is None:
                    raise LookupError(ref)
                if action == "/json":  # a hub that was recreated finds its way back to each student
                    self.ensure_network(self.policy.network_of(info["Name"].lstrip("/")))
                return
        raise Refused(f"{method} {path} is not something the hub needs")


class Handler(BaseHTTPRequestHandler):
    guard: Guard
    protocol_version = "HTTP/1.1"
    timeout = 60  # seconds a connection may stay silent (a declared body that never comes)

    def log_message(self, fmt, *args):
        sys.stderr.write("docker-guard: " + (fmt % args) + "\n")

    def log_request(self, code="-", size="-"):
        if not self.path.endswith("/_ping"):  # the healthcheck's, every few seconds
            super().log_request(code, size)

    def answer(self, status: int, payload: bytes, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        for key, value in (headers or {"Content-Type": "application/json"}).items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(payload)

    def refuse(self, status: int, message: str) -> None:
        self.log_message("refused %s %s: %s", self.command, self.path, message)
        self.answer(status, json.dumps({"message": f"docker-guard: {message}"}).encode())

    def handle_any(self) -> None:
        if self.headers.get("Transfer-Encoding"):
            self.close_connection = True
            return self.refuse(411, "a body must declare its length")
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            length = -1
        if not 0 <= length <= MAX_BODY:
            self.close_connection = True
            return self.refuse(413, f"bodies are at most {MAX_BODY} bytes")
        body = self.rfile.read(length) if length else b""
        url = urllib.parse.urlsplit(self.path)
        try:
            self.guard.route(self.command, url.path, urllib.parse.parse_qs(url.query), body)
            headers = {"Content-Type": self.headers["Content-Type"]} if self.headers.get("Content-Type") else {}
            status, reply_headers, data = self.guard.engine.request(self.command, self.path, body or None, headers)
        except Refused as exc:
            return self.refuse(403, str(exc))
        except LookupError as exc:
            return self.refuse(404, f"no such container: {exc}")
        except OSError as exc:
            return self.refuse(502, f"the engine did not answer ({type(exc).__name__})")
        keep = {k: v for k, v in reply_headers.items() if k in ("content-type", "api-version", "docker-experimental",
                                                               "ostype", "server")}
        self.answer(status, data, keep)

    do_GET = do_POST = do_DELETE = do_HEAD = do_PUT = handle_any


def main(argv: list[str] | None = None) -> None:
    configured = settings_or_exit("docker-guard")
    port = configured.docker_guard_port
    Handler.guard = Guard(Policy.from_environment(), Engine(configured.docker_socket))
    server = ThreadingHTTPServer(("0.0.0.0", port), Handler)
    server.daemon_threads = True
    print(f"docker-guard: listening on :{port} for the hub", file=sys.stderr, flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
