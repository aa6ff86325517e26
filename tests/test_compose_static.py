"""The Docker deployment, checked without a Docker engine (none on our machines).

Structure of docker-compose.yml, every Dockerfile COPY source exists, images install
exactly the versions pyproject.toml pins for the native setup, the student image
holds nothing of the grader side, secrets only come from .env, and the ONE hub
configuration file produces the intended Docker-mode settings when executed.
"""

from __future__ import annotations

import re
import runpy
import shlex
import tomllib
from pathlib import Path

import pytest
import yaml
from traitlets.config import Config

REPO = Path(__file__).resolve().parents[1]
COMPOSE = yaml.safe_load((REPO / "docker-compose.yml").read_text())
DOCKERFILES = {name: REPO / "docker" / f"{name}.Dockerfile" for name in ("hub", "student", "grader")}


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
    assert set(services) == {"db", "hub", "grader", "student-image"}
    assert services["db"]["image"].startswith("postgres:") and "latest" not in services["db"]["image"]
    for name in ("hub", "grader", "student-image"):
        build = services[name]["build"]
        assert (REPO / build["context"] / build["dockerfile"]).is_file()
        assert re.fullmatch(r"dl-attention/[a-z]+:\d+\.\d+\.\d+", services[name]["image"])
    assert set(COMPOSE["volumes"]) == {"db-data", "hub-state", "course"}  # state on named volumes
    hub = services["hub"]
    assert hub["environment"]["HUB_MODE"] == "docker"
    assert hub["environment"]["HUB_DB_URL"].startswith("postgresql+psycopg://")
    assert services["grader"]["environment"]["NBGRADER_DB_URL"].startswith("postgresql+psycopg://")
    assert hub["environment"]["STUDENT_IMAGE"] == services["student-image"]["image"]
    assert "/var/run/docker.sock:/var/run/docker.sock" in hub["volumes"]
    # the hub sees the exchange at the host's own path, so DockerSpawner's bind mounts resolve
    assert "${EXCHANGE_HOST_DIR}:${EXCHANGE_HOST_DIR}" in hub["volumes"]


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


@pytest.mark.parametrize("name", sorted(DOCKERFILES))
def test_dockerfile_copy_sources_exist_and_bases_are_pinned(name):
    for word, rest in instructions(DOCKERFILES[name]):
        if word == "FROM":
            assert re.search(r":\d+\.\d+\.\d+-", rest), f"{name}: unpinned base {rest}"
        if word == "COPY":
            parts = [p for p in shlex.split(rest) if not p.startswith("--")]
            for source in parts[:-1]:
                assert (REPO / source).exists(), f"{name}.Dockerfile: COPY source {source} is missing"


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
    copied = " ".join(rest for word, rest in instructions(DOCKERFILES["student"]) if word == "COPY")
    for secret in ("grader_tests", "source", "nbgrader_config.py", "attention_platform", "hub/grader"):
        assert secret not in copied
    text = DOCKERFILES["student"].read_text()
    for extension in ("formgrader", "course_list", "@jupyter/nbgrader:create-assignment"):
        assert re.search(rf"disable .*{re.escape(extension)}", text)
    assert "USER 1000" in text


def load_hub_config(monkeypatch, tmp_path, **env) -> Config:
    for key in list(__import__("os").environ):
        if key.startswith(("HUB_", "COURSE_", "EXCHANGE_", "FORMGRADER_", "STUDENT_")):
            monkeypatch.delenv(key, raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("HUB_STATE_DIR", str(tmp_path))
    config = Config()
    runpy.run_path(str(REPO / "hub" / "jupyterhub_config.py"), init_globals={"get_config": lambda: config})
    return config


def test_one_hub_config_docker_mode(monkeypatch, tmp_path):
    c = load_hub_config(monkeypatch, tmp_path, HUB_MODE="docker", HUB_DB_URL="postgresql+psycopg://u:p@db/jupyterhub",
                        EXCHANGE_HOST_DIR="/srv/x", EXCHANGE_ROOT="/srv/x", FORMGRADER_URL="http://grader:9999",
                        FORMGRADER_API_TOKEN="t" * 64)
    assert c.JupyterHub.spawner_class == "dockerspawner.DockerSpawner"
    assert c.JupyterHub.db_url.startswith("postgresql+psycopg://")
    volumes = c.DockerSpawner.volumes
    assert volumes["/srv/x/dl-attention/outbound"]["mode"] == "ro"
    assert volumes["/srv/x/dl-attention/inbound/{username}"]["bind"] == "/srv/nbgrader/exchange/dl-attention/inbound"
    assert volumes["/srv/x/dl-attention/feedback/{username}"]["mode"] == "ro"
    assert not any(path.endswith(("/inbound", "/feedback")) for path in volumes)  # never the shared folders
    assert volumes["dl-attention-home-{username}"] == "/home/jovyan"
    assert c.Spawner.mem_limit and c.Spawner.cpu_limit
    formgrader = next(s for s in c.JupyterHub.services if s["name"] == "dl-attention")
    assert formgrader["url"] == "http://grader:9999" and formgrader["api_token"] == "t" * 64
    assert formgrader["oauth_no_confirm"] is True and "command" not in formgrader
    culler = next(s for s in c.JupyterHub.services if s["name"] == "idle-culler")
    assert "jupyterhub_idle_culler" in culler["command"]


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
    lines = (REPO / "hub" / "jupyterhub_config.py").read_text().splitlines()
    for i, line in enumerate(lines):
        if re.match(r"^[A-Z_]+ = .*env(_list)?\(", line):
            assert lines[i - 1].startswith("#"), f"hub/jupyterhub_config.py: no comment above {line!r}"
