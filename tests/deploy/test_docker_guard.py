"""The hub's only way to the Docker engine (attention_platform/docker_guard.py), without an engine.

The container the hub's spawner config asks for is built here from that config, as DockerSpawner 14 and
docker-py send it, and the guard passes it; each change an attacker who runs code in the hub would make
is refused. The guard's own server refuses what it does not forward before any engine is asked (its
engine here is a socket nobody listens on) and never reads a body longer than it allows.
tests/deploy/test_compose_roundtrip.py asks the real guard in front of a real engine.
"""

from __future__ import annotations

import copy
import http.client
import json
import runpy
import socket
import threading
from pathlib import Path

import pytest
from traitlets.config import Config

from attention_platform.docker_guard import MAX_BODY, Engine, Guard, Handler, Policy, Refused
from test_compose_static import DOCKER_ENV, FakeDockerSpawner, format_volume

REPO = Path(__file__).resolve().parents[2]
IMAGE = "dl-attention/student:0.1.0"


@pytest.fixture
def spawner_config(monkeypatch):
    for key, value in dict(DOCKER_ENV, STUDENT_IMAGE=IMAGE).items():
        monkeypatch.setenv(key, value)
    config = Config()
    runpy.run_path(str(REPO / "jupyter_config" / "jupyterhub_config.py"), init_globals={"get_config": lambda: config})
    return config


def create_request(config: Config, username: str) -> tuple[dict, dict]:
    """(query, body) of DockerSpawner's container create for ``username`` under the hub's config."""
    spawner = FakeDockerSpawner(username)
    ds = config.DockerSpawner
    binds = []
    for source, target in ds.volumes.items():
        spec = target if isinstance(target, dict) else {"bind": target, "mode": "rw"}
        binds.append(f"{format_volume(config, source, spawner)}:{spec['bind']}:{spec['mode']}")
    network = f"dl-attention-net-{spawner.escaped_name}"
    host = {"AutoRemove": True, "Binds": binds, "Links": [], "Mounts": [], "Memory": 1 << 30, "CpuPeriod": 100000, "CpuQuota": 100000,
            "NetworkMode": network, "CapDrop": ds.extra_host_config["cap_drop"],
            "SecurityOpt": ds.extra_host_config["security_opt"], "PidsLimit": ds.extra_host_config["pids_limit"],
            "ShmSize": 256 << 20}
    body = {"Hostname": None, "Domainname": None, "ExposedPorts": {"8888/tcp": None}, "User": None, "Tty": False,
            "OpenStdin": False, "StdinOnce": False, "AttachStdin": False, "AttachStdout": True,
            "AttachStderr": True, "NetworkingConfig": None, "MacAddress": None, "StopSignal": None,
            "Healthcheck": None, "StopTimeout": None, "Runtime": None, "Env": [f"JUPYTERHUB_USER={username}", "JUPYTERHUB_API_TOKEN=x"],
            "Cmd": ds.cmd, "Image": ds.image, "Volumes": {spec if isinstance(spec, str) else spec["bind"]: {}
                                                          for spec in ds.volumes.values()},
            "NetworkDisabled": False, "Entrypoint": None, "WorkingDir": None,
            "Labels": dict(ds.extra_create_kwargs["labels"]), "HostConfig": host}
    return {"name": [f"{ds.prefix}-{spawner.escaped_name}"]}, body


def policy() -> Policy:
    return Policy(project="dl-attention", image=IMAGE, exchange="/srv/x", course="dl-attention")


def test_the_spawners_own_request_passes(spawner_config):
    for username in ("student1", "jane.doe", "jane.doe@uni.example"):
        query, body = create_request(spawner_config, username)
        assert policy().check_create(query, body) == query["name"][0].replace("-student-", "-net-")


ATTACKS = {
    "privileged": lambda b: b["HostConfig"].update(Privileged=True),
    "a capability": lambda b: b["HostConfig"].update(CapAdd=["SYS_ADMIN"]),
    "capabilities kept": lambda b: b["HostConfig"].update(CapDrop=[]),
    "seccomp off": lambda b: b["HostConfig"]["SecurityOpt"].append("seccomp=unconfined"),
    "a device": lambda b: b["HostConfig"].update(Devices=[{"PathOnHost": "/dev/sda", "PathInContainer": "/dev/sda",
                                                           "CgroupPermissions": "rwm"}]),
    "the host's root": lambda b: b["HostConfig"]["Binds"].append("/:/host:rw"),
    "the engine's socket": lambda b: b["HostConfig"]["Binds"].append("/var/run/docker.sock:/s:rw"),
    "another student's inbound": lambda b: b["HostConfig"]["Binds"].__setitem__(
        2, "/srv/x/dl-attention/inbound:/srv/nbgrader/exchange/dl-attention/inbound:rw"),
    "outbound writable": lambda b: b["HostConfig"]["Binds"].__setitem__(
        1, b["HostConfig"]["Binds"][1].replace(":ro", ":rw")),
    "a mount": lambda b: b["HostConfig"].update(Mounts=[{"Type": "bind", "Source": "/etc", "Target": "/e"}]),
    "host pid": lambda b: b["HostConfig"].update(PidMode="host"),
    "host ipc": lambda b: b["HostConfig"].update(IpcMode="host"),
    "host user namespace": lambda b: b["HostConfig"].update(UsernsMode="host"),
    "host network": lambda b: b["HostConfig"].update(NetworkMode="host"),
    "another student's network": lambda b: b["HostConfig"].update(NetworkMode="dl-attention-net-student2"),
    "the backend network too": lambda b: b.update(NetworkingConfig={"EndpointsConfig": {"dl-attention_backend": {}}}),
    "a published port": lambda b: b["HostConfig"].update(PortBindings={"8888/tcp": [{"HostPort": "80"}]}),
    "a sysctl": lambda b: b["HostConfig"].update(Sysctls={"net.ipv4.ip_forward": "1"}),
    "no memory limit": lambda b: b["HostConfig"].update(Memory=0),
    "no pids limit": lambda b: b["HostConfig"].pop("PidsLimit"),
    "another image": lambda b: b.update(Image="debian:bookworm"),
    "root": lambda b: b.update(User="0"),
    "an entrypoint": lambda b: b.update(Entrypoint=["/bin/sh", "-c", "id"]),
    "no project label": lambda b: b.update(Labels={}),
    "a dotted user name": lambda b: b.update(Env=["JUPYTERHUB_USER=.."]),
}


@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_a_container_other_than_the_students_is_refused(spawner_config, attack):
    query, body = create_request(spawner_config, "jane.doe")
    changed = copy.deepcopy(body)
    ATTACKS[attack](changed)
    with pytest.raises(Refused):
        policy().check_create(query, changed)


@pytest.mark.parametrize("name", ["dl-attention-hub-1", "dl-attention-student-", "dl-attention-student-a/../b", "x"])
def test_a_container_named_as_no_student_is_refused(spawner_config, name):
    _, body = create_request(spawner_config, "jane.doe")
    with pytest.raises(Refused):
        policy().check_create({"name": [name]}, body)


@pytest.fixture
def guard_server(tmp_path):
    """The guard's server in front of an engine socket nobody answers on."""
    handler = type("TestHandler", (Handler,), {"guard": Guard(policy(), Engine(str(tmp_path / "no-engine.sock")))})
    from http.server import ThreadingHTTPServer

    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


def ask(port: int, method: str, path: str, body: bytes | None = None) -> tuple[int, dict]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.request(method, path, body=body, headers={"Content-Type": "application/json"})
    reply = conn.getresponse()
    status, data = reply.status, reply.read()
    conn.close()
    return status, json.loads(data or b"{}")


@pytest.mark.parametrize("method,path", [
    ("POST", "/v1.41/containers/dl-attention-student-jane-2edoe/exec"),
    ("POST", "/v1.41/exec/abc/start"),
    ("POST", "/v1.41/build"),
    ("POST", "/v1.41/images/create?fromImage=debian"),
    ("GET", "/v1.41/images/debian:bookworm/json"),
    ("POST", "/v1.41/volumes/create"),
    ("DELETE", "/v1.41/volumes/dl-attention_db-data"),
    ("GET", "/v1.41/containers/json"),
    ("POST", "/v1.41/networks/create"),
    ("POST", "/v1.41/containers/dl-attention-student-jane-2edoe/archive?path=/"),
    ("GET", "/v1.41/containers/dl-attention-student-jane-2edoe/archive?path=/"),
    ("POST", "/v1.41/containers/dl-attention-student-jane-2edoe/update"),
])
def test_what_the_hub_never_needs_is_refused_before_the_engine_is_asked(guard_server, method, path):
    status, reply = ask(guard_server, method, path, b"{}" if method == "POST" else None)
    assert status == 403, (status, reply)
    assert reply["message"].startswith("docker-guard: ")


def test_a_privileged_create_is_refused_by_the_server(guard_server, spawner_config):
    query, body = create_request(spawner_config, "jane.doe")
    body["HostConfig"]["Privileged"] = True
    status, reply = ask(guard_server, "POST", f"/v1.41/containers/create?name={query['name'][0]}", json.dumps(body).encode())
    assert status == 403 and "Privileged" in reply["message"], reply


def test_a_body_longer_than_the_bound_is_refused_from_its_length_unread(guard_server):
    with socket.create_connection(("127.0.0.1", guard_server), timeout=10) as sock:
        sock.sendall(b"POST /v1.41/containers/create?name=dl-attention-student-a HTTP/1.1\r\nHost: x\r\n"
                     b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n" % (MAX_BODY + 1) + b"{" * 1024)
        reply = sock.recv(4096)
    assert reply.startswith(b"HTTP/1.1 413"), reply[:200]


def test_a_chunked_body_is_refused(guard_server):
    with socket.create_connection(("127.0.0.1", guard_server), timeout=10) as sock:
        sock.sendall(b"POST /v1.41/containers/create HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                     b"4\r\n{}{}\r\n0\r\n\r\n")
        reply = sock.recv(4096)
    assert reply.startswith(b"HTTP/1.1 411"), reply[:200]


def test_a_hub_label_on_a_student_container_is_refused(spawner_config):
    """The guard finds the hub's container by its compose labels: a student container must not pass for it."""
    query, body = create_request(spawner_config, "jane.doe")
    body["Labels"]["com.docker.compose.service"] = "hub"
    with pytest.raises(Refused):
        policy().check_create(query, body)


@pytest.mark.parametrize("method,path", [
    # before API 1.24 the engine applies a HostConfig sent with start (privileged, binds, ...)
    ("POST", "/v1.23/containers/dl-attention-student-jane-2edoe/start"),
    ("POST", "/v1.23/containers/create?name=dl-attention-student-jane-2edoe"),
])
def test_an_old_api_version_is_refused(guard_server, method, path):
    status, reply = ask(guard_server, method, path, b'{"Privileged": true, "Binds": ["/:/host"]}')
    assert status == 403 and "API version" in reply["message"], reply


def test_a_body_on_anything_but_a_create_is_refused(guard_server):
    status, reply = ask(guard_server, "POST", "/v1.41/containers/dl-attention-student-jane-2edoe/start",
                        b'{"Privileged": true, "Binds": ["/:/host"]}')
    assert status == 403 and "body" in reply["message"], reply
