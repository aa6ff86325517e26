"""docker-compose.yml built and run for real, following the operators' Docker guide (docs/operators/docker.md).

Installs and starts the Docker engine if there is none (and stops it again at the end), makes the
Debian-based base images (scripts/docker-local-bases.sh; COMPOSE_TEST_BASES=official builds on the
official images instead), copies the checkout (tracked and unignored files) to
build/compose-test/project and there runs the guide's commands one by one: `cp .env.example .env`
(then fills it in: secrets, people, a free port, the exchange), the exchange folder, `docker compose
--profile images build`, `docker compose up -d --wait`. Then, only through the hub's port published
on 127.0.0.1, as a browser would:

  the instructor signs up, approves the others and generates + releases the assignment;
  jane.doe (a dotted name) logs in, DockerSpawner starts her container, she fetches, saves an
  answer and submits; the hub is restarted and her container keeps running and serving;
  student2 submits an answer with a memory bomb and, from inside their own container, can list
  no one else's submission and reach neither the database, nor the grader, nor jane's server (but the hub);
  the hub holds no Docker socket, and its guard refuses a privileged container and an exec;
  the TA collects, autogrades in the grader container's sandbox (its cgroups in force) and
  releases feedback; jane fetches it and reads her score. The grader, root or not, cannot override
  file permissions, and its database password does not open the hub's database.

The profile lti's image (lms-sync, on the grader image) is built too, and its own command runs one pass
(`--once`, no LMS) as the image's user, with the tool's key as its secret and the gradebook read.

Last, the guide's "Deleting the course and all its data" commands, after which nothing of the
project is left on the engine. Build, round-trip and teardown times are printed and written to
build/compose-test/timings.json. Marker `docker`: deselect with -m 'not docker'.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest
import requests
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from grader_tests.self_attention.answers import release_notebook
from grader_tests.self_attention.answers import BUGGY, CORRECT, with_answer
from hub_helpers import HubSession, free_port

pytestmark = [pytest.mark.docker, pytest.mark.slow, pytest.mark.timeout(3600)]

REPO = Path(__file__).resolve().parents[2]
WORK = REPO / "build" / "compose-test"
PROJECT_DIR = WORK / "project"
PROJECT = "dl-attention"
COURSE = "dl-attention"
ASSIGNMENT = "self_attention"
NOTEBOOK = f"{ASSIGNMENT}/{ASSIGNMENT}.ipynb"
PEOPLE = {"instructor": "instructor", "ta": "ta", "jane.doe": "student", "student2": "student"}
BASES = os.environ.get("COMPOSE_TEST_BASES", "local")  # local: made from Debian's packages; official: registry
MEMORY_BOMB = "blocks = []\nfor _ in range(64):\n    blocks.append(b'x' * (64 << 20))\n"
TIMINGS: dict[str, float] = {}


# ---------------------------------------------------------------- running things

def sh(command: str | list, *, cwd: Path = PROJECT_DIR, timeout: float = 1800, check: bool = True,
       quiet: bool = False) -> subprocess.CompletedProcess:
    shell = isinstance(command, str)
    result = subprocess.run(command, shell=shell, executable="/bin/bash" if shell else None, cwd=cwd,
                            capture_output=True, text=True, timeout=timeout)
    if check and result.returncode != 0:
        raise AssertionError(f"{command!r} exited {result.returncode}:\n{result.stdout[-3000:]}\n{result.stderr[-5000:]}")
    if not quiet and result.stderr.strip():
        print(result.stderr[-2000:], file=sys.stderr)
    return result


def docker(*args: str, check: bool = True) -> str:
    return sh(["docker", *args], cwd=REPO, check=check, quiet=True).stdout.strip()


def timed(name: str):
    class _Timer:
        def __enter__(self):
            self.started = time.monotonic()

        def __exit__(self, *exc):
            TIMINGS[name] = round(time.monotonic() - self.started, 1)

    return _Timer()


DOCKER_GUIDE = REPO / "docs" / "operators" / "docker.md"


def guide_block(after: str) -> list[str]:
    """The commands of the first ```bash block after the line ``after`` in the operators' Docker guide."""
    section = DOCKER_GUIDE.read_text()
    section = section[section.index(after):]
    block = re.search(r"```bash\n(.*?)```", section, re.S).group(1)
    commands = []
    for line in block.splitlines():
        command = re.sub(r"\s+#\s.*$", "", line).strip()  # the guide's comments
        if command:
            commands.append(command)
    assert commands, f"no commands after {after!r} in {DOCKER_GUIDE.name}"
    return commands


# The students' own networks (made by the docker guard, labelled with the project): the README's deletion
# commands gain this line with the move to docs/; the test runs it when they lack it.
def deletion_commands() -> list[str]:
    return guide_block("**Deleting the course and all its data**")


def engine_answers() -> bool:
    return subprocess.run(["docker", "info"], capture_output=True).returncode == 0 if shutil.which("docker") else False


def leftovers() -> dict[str, list[str]]:
    """What of the project is on the engine: containers, networks, volumes."""
    return {
        "containers": docker("ps", "-aq", "--filter", f"label=com.docker.compose.project={PROJECT}").split()
        + docker("ps", "-aq", "--filter", f"label=dl-attention.project={PROJECT}").split(),
        "networks": docker("network", "ls", "-q", "--filter", f"label=com.docker.compose.project={PROJECT}").split()
        + docker("network", "ls", "-q", "--filter", f"label=dl-attention.project={PROJECT}").split(),
        "volumes": docker("volume", "ls", "-q", "--filter", f"label=com.docker.compose.project={PROJECT}").split()
        + docker("volume", "ls", "-q", "--filter", f"name={PROJECT}-home-").split(),
    }


# ---------------------------------------------------------------- the stack, as the guide says

def copy_checkout() -> None:
    if PROJECT_DIR.exists():
        shutil.rmtree(PROJECT_DIR)
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                            capture_output=True, check=True).stdout.decode().split("\0")
    for rel in filter(None, listed):
        source = REPO / rel
        if source.is_file() and not rel.startswith("build/"):
            target = PROJECT_DIR / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)


def fill_env(port: int, exchange: Path) -> dict[str, str]:
    """What an administrator writes into .env after `cp .env.example .env`."""
    path = PROJECT_DIR / ".env"
    text = re.sub(r"=change-me$", lambda _: "=" + secrets.token_hex(32), path.read_text(), flags=re.M)
    settings = {
        "DOCKER_GID": str(os.stat("/var/run/docker.sock").st_gid),
        "HUB_ADMIN_USERS": "instructor", "COURSE_INSTRUCTORS": "instructor", "COURSE_TAS": "ta",
        "COURSE_STUDENTS": "jane.doe,student2", "HUB_PUBLIC_ADDRESS": "127.0.0.1", "HUB_PUBLIC_PORT": str(port),
        "EXCHANGE_HOST_DIR": str(exchange),
        # `up --wait` and the hub's restart wait on one health check after another: shorter than
        # production's 5 s, long enough that the checks do not crowd two loaded cores
        "HEALTHCHECK_INTERVAL": "2s",
    }
    if BASES == "local":  # no registry here: Debian-made bases, PyPI through the host's proxy and CA
        settings.update(PYTHON_BASE="dl-attention-local/python:3.11-bookworm",
                        POSTGRES_IMAGE="dl-attention-local/postgres:15-bookworm",
                        TORCH_INDEX_URL=os.environ.get("COMPOSE_TEST_TORCH_INDEX", "https://pypi.org/simple"))
    bundle = os.environ.get("COMPOSE_TEST_CA_BUNDLE", "/etc/ssl/certs/ca-certificates.crt")
    if bundle and Path(bundle).is_file():
        settings["EXTRA_CA_BUNDLE"] = bundle
    for key, value in settings.items():
        text, n = re.subn(rf"^{key}=.*$", f"{key}={value}", text, flags=re.M)
        assert n == 1, f".env.example has no {key}"
    path.write_text(text)
    return dict(re.findall(r"^([A-Z_]+)=(.*)$", text, re.M))


def save_service_logs() -> None:
    """Every service's log in compose.log, for a failure's post-mortem: called before anything
    removes the containers, since their logs go with them."""
    if PROJECT_DIR.exists():
        logs = subprocess.run(["docker", "compose", "logs", "--no-color", "-t"], cwd=PROJECT_DIR,
                              capture_output=True, text=True)
        (WORK / "compose.log").write_text(logs.stdout + logs.stderr)


@pytest.fixture(scope="module")
def stack():
    if os.geteuid() != 0:
        pytest.skip("installs and starts the Docker engine and writes the exchange as uid 1000: run as root (CI is)")
    engine_was_running = engine_answers()
    sh(["scripts/docker-engine.sh", "start"], cwd=REPO, timeout=900)
    found = {kind: ids for kind, ids in leftovers().items() if ids}
    if found:
        pytest.fail(f"a {PROJECT!r} compose project already exists on this engine ({found}); "
                    "the test would delete it: take it down first (docs/operators/docker.md, 'Taking it down')")
    try:
        if BASES == "local":
            with timed("local_bases_s"):
                sh(["scripts/docker-local-bases.sh"], cwd=REPO, timeout=1200)
        copy_checkout()
        if BASES == "local":  # the guide's optional wheelhouse: the CPU torch this host's pip resolves
            sh([sys.executable, "-m", "pip", "download", "-q", "torch==2.13.0", "--no-deps", "-d",
                str(PROJECT_DIR / "docker/build/wheelhouse")], quiet=True)
        exchange = WORK / "exchange"
        if exchange.exists():
            shutil.rmtree(exchange)
        port = free_port()
        env = {}
        for command in guide_block("On the Docker host, as root"):
            name = {"docker compose --profile images build": "build_s", "docker compose up -d --wait": "up_s"}.get(command)
            started = time.monotonic()
            sh(command, timeout=3600)
            if name:
                TIMINGS[name] = round(time.monotonic() - started, 1)
            if command == "cp .env.example .env":
                env = fill_env(port, exchange)
        assert exchange.is_dir() and exchange.stat().st_uid == 1000
        yield {"url": f"http://127.0.0.1:{port}", "env": env, "exchange": exchange, "passwords": {}}
    finally:
        if leftovers()["containers"]:  # a failed run: take everything down all the same
            save_service_logs()
            for command in deletion_commands():
                sh(command, check=False, quiet=True)
        (WORK / "timings.json").write_text(json.dumps(TIMINGS, indent=1))
        if not engine_was_running:
            sh(["scripts/docker-engine.sh", "stop"], cwd=REPO, check=False)


# ---------------------------------------------------------------- people

def signup_page(url: str, name: str, password: str) -> str:
    http = requests.Session()
    http.get(url + "/hub/signup", timeout=30).raise_for_status()
    reply = http.post(url + "/hub/signup", timeout=30, data={
        "username": name, "signup_password": password, "signup_password_confirmation": password,
        "_xsrf": http.cookies.get("_xsrf", path="/hub/")})
    assert reply.status_code == 200, (name, reply.status_code, reply.text[-1500:])
    return reply.text


def signup(url: str, name: str, password: str) -> None:
    page = signup_page(url, name, password)
    accepted = ("The signup was successful", "Your information has been sent to the admin")
    assert any(m in page for m in accepted), (name, page[-1500:])


def container_of(user: str) -> dict:
    ids = docker("ps", "-q", "--filter", f"label=dl-attention.project={PROJECT}",
                 "--filter", f"name={PROJECT}-student-").split()
    for info in json.loads(docker("inspect", *ids)) if ids else []:
        if f"JUPYTERHUB_USER={user}" in info["Config"]["Env"]:
            return info
    raise AssertionError(f"no running container for {user}")


def in_container(container: str, code: str) -> dict:
    """Python run inside a student's container as its user (what their notebook's code can do)."""
    out = docker("exec", "-u", "1000:100", container, "python", "-c", code)
    return json.loads(out.splitlines()[-1])


def wait_healthy(service: str, timeout: float = 300) -> None:
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        cid = sh(["docker", "compose", "ps", "-q", service], quiet=True).stdout.strip()
        if cid and docker("inspect", "-f", "{{.State.Health.Status}}", cid) == "healthy":
            return
        time.sleep(1)
    raise AssertionError(f"{service} not healthy within {timeout} s")


def answer_notebook(code: str, payload: str | None = None) -> dict:
    nb = with_answer(release_notebook(), code)
    if payload:
        index = next(i for i, cell in enumerate(nb.cells) if cell.cell_type == "code" and "class SelfAttention" in cell.source)
        nb.cells.insert(index + 1, nbformat.v4.new_code_cell(payload))
    return nb


# ---------------------------------------------------------------- the round trip

def test_the_round_trip_through_the_published_port(stack, record_property):
    url = stack["url"]
    assert requests.get(url + "/hub/login", timeout=30).status_code == 200
    passwords = {name: secrets.token_urlsafe(16) for name in PEOPLE}
    passwords["instructor"] = stack["env"]["HUB_ADMIN_INITIAL_PASSWORD"]  # the admin's login exists before sign-up
    stack["passwords"] = passwords

    # accounts: the instructor (hub admin, with the first password from .env) approves everyone else's sign-up;
    # nobody can sign up under the admin's name
    with timed("accounts_s"):
        assert "alert-danger" in signup_page(url, "instructor", secrets.token_urlsafe(16))
        for name, password in passwords.items():
            if name != "instructor":
                signup(url, name, password)
        prof = HubSession(url, "instructor", passwords["instructor"]).login()
        for name in PEOPLE:
            if name != "instructor":
                assert prof.get(f"/hub/authorize/{name}").status_code == 200
        # the instructor generates and releases the assignment from the formgrader
        assert prof.formgrader("POST", f"assignment/{ASSIGNMENT}/assign").json()["success"]
        assert prof.formgrader("POST", f"assignment/{ASSIGNMENT}/release").json()["success"]
    # the grader image loads the course's nbgrader_config.py (our preprocessors and sandbox from the package)
    # (as the grader account: the course folder is its own, and root in the grader cannot override that)
    listed = sh(["docker", "compose", "exec", "-T", "-u", "1000:100", "-w", "/srv/course", "grader", "nbgrader", "db",
                 "assignment", "list"])
    assert ASSIGNMENT in listed.stdout, listed.stdout + listed.stderr

    # jane.doe: her own container, fetch, answer, submit
    jane = HubSession(url, "jane.doe", passwords["jane.doe"]).login()
    with timed("spawn_jane_s"):
        jane.spawn(timeout=300)
    box = container_of("jane.doe")
    assert box["Config"]["User"] == "1000:100"
    # her server is the course's launcher: start-up without garbage collections (jupyter_config/student/jupyterhub-singleuser)
    server_log = sh(["docker", "logs", box["Id"]], quiet=True)
    frozen = re.findall(r"jane\.doe's server started: (\d+) objects kept out", server_log.stdout + server_log.stderr)
    assert frozen and int(frozen[-1]) > 100_000, (server_log.stdout + server_log.stderr)[-2000:]
    assert box["HostConfig"]["CapDrop"] == ["ALL"] and "no-new-privileges:true" in box["HostConfig"]["SecurityOpt"]
    assert box["HostConfig"]["Memory"] == 1 << 30  # STUDENT_MEM_LIMIT=1G
    assert box["HostConfig"]["PidsLimit"] == 1024  # STUDENT_PIDS_LIMIT
    assert box["HostConfig"]["ShmSize"] == 256 << 20  # STUDENT_SHM_SIZE
    assert set(box["NetworkSettings"]["Networks"]) == {f"{PROJECT}-net-jane-2edoe"}  # hers alone, with the hub
    mounts = {m["Destination"]: m for m in box["Mounts"]}
    assert mounts["/home/jovyan"]["Name"] == f"{PROJECT}-home-jane-2edoe"
    assert mounts[f"/srv/nbgrader/exchange/{COURSE}/inbound"]["Source"] == str(stack["exchange"] / COURSE / "inbound" / "jane.doe")
    with timed("fetch_save_submit_jane_s"):
        assert {a["assignment_id"]: a["status"] for a in jane.assignments()} == {ASSIGNMENT: "released"}
        assert jane.assignment_action("fetch", ASSIGNMENT)["success"]
        jane.save_notebook(NOTEBOOK, answer_notebook(CORRECT[0].code))
        # the course's Validate, in her container (a kernel there: no validate service's socket in Docker)
        validated = jane.post("/user/jane.doe/attention/validate", data={"path": NOTEBOOK})
        assert validated.status_code == 200, validated.text[-2000:]
        assert validated.json()["ok"] and validated.json()["ran"], validated.json()
        submitted = jane.assignment_action("submit", ASSIGNMENT)
        assert submitted["success"], submitted
    (mine,) = os.listdir(stack["exchange"] / COURSE / "inbound" / "jane.doe")

    # restarting the hub leaves her container running, and it serves her again
    with timed("hub_restart_s"):
        sh(["docker", "compose", "restart", "hub"])
        wait_healthy("hub")
    again = container_of("jane.doe")
    assert again["Id"] == box["Id"] and again["State"]["StartedAt"] == box["State"]["StartedAt"]
    for _ in range(60):  # the hub re-adds her route to the proxy it restarted with
        if jane.get("/user/jane.doe/api/status").status_code == 200:
            break
        time.sleep(1)
    assert jane.get("/user/jane.doe/api/status").status_code == 200
    assert "not recognized" not in sh(["docker", "compose", "logs", "hub"], quiet=True).stdout  # no unknown settings

    # student2: a buggy answer with a memory bomb; and what their own container can reach
    s2 = HubSession(url, "student2", passwords["student2"]).login()
    with timed("spawn_student2_s"):
        s2.spawn(timeout=300)
    assert s2.assignment_action("fetch", ASSIGNMENT)["success"]
    buggy = next(a for a in BUGGY if a.name == "no_scale")
    s2.save_notebook(NOTEBOOK, answer_notebook(buggy.code, MEMORY_BOMB))
    assert s2.assignment_action("submit", ASSIGNMENT)["success"]
    for path in (f"/user/jane.doe/api/contents/{NOTEBOOK}", "/user/jane.doe/lab", f"/services/{COURSE}/formgrader"):
        assert s2.get(path).status_code == 403, path
    db_ip = next(iter(json.loads(docker("inspect", sh(["docker", "compose", "ps", "-q", "db"], quiet=True).stdout.strip()))
                      [0]["NetworkSettings"]["Networks"].values()))["IPAddress"]
    jane_ip = next(iter(container_of("jane.doe")["NetworkSettings"]["Networks"].values()))["IPAddress"]
    seen = in_container(container_of("student2")["Id"], f"""
import json, os, socket
out = {{"inbound": os.listdir("/srv/nbgrader/exchange/{COURSE}/inbound"),
       "exchange": sorted(os.listdir("/srv/nbgrader/exchange/{COURSE}"))}}
for name, (host, port) in {{"db": ("db", 5432), "grader": ("grader", 9999), "db_ip": ("{db_ip}", 5432),
                           "jane": ("{jane_ip}", 8888), "hub": ("hub", 8081), "proxy": ("hub", 8000)}}.items():
    try:
        socket.create_connection((host, port), timeout=3).close()
        out[name] = "reached"
    except OSError as exc:
        out[name] = type(exc).__name__
print(json.dumps(out))
""")
    assert seen["hub"] == seen["proxy"] == "reached", seen
    assert "reached" not in (seen["db"], seen["grader"], seen["db_ip"], seen["jane"]), seen
    # ...while the hub's proxy does reach her server (the same address and port)
    assert jane.get("/user/jane.doe/api/status").status_code == 200

    # the hub has no Docker socket; what its DOCKER_HOST answers to what the hub never needs
    jane_id = container_of("jane.doe")["Id"]
    asked = json.loads(sh(["docker", "compose", "exec", "-T", "hub", "python", "-c", f"""
import http.client, json, os
def ask(method, path, body=None):
    conn = http.client.HTTPConnection("docker-guard", 2375, timeout=30)
    conn.request(method, path, body=json.dumps(body) if body is not None else None, headers={{"Content-Type": "application/json"}})
    reply = conn.getresponse()
    return [reply.status, reply.read().decode()[:300]]
privileged = {{"Image": "dl-attention/student:0.1.0", "Cmd": ["id"], "Labels": {{"dl-attention.project": "{PROJECT}"}},
              "Env": ["JUPYTERHUB_USER=mallory"],
              "HostConfig": {{"Privileged": True, "Binds": ["/:/host"], "NetworkMode": "{PROJECT}-net-mallory"}}}}
print(json.dumps({{"socket": os.path.exists("/var/run/docker.sock"),
                  "privileged": ask("POST", "/v1.41/containers/create?name={PROJECT}-student-mallory", privileged),
                  "exec": ask("POST", "/v1.41/containers/{jane_id}/exec", {{"Cmd": ["id"]}}),
                  "volumes": ask("GET", "/v1.41/volumes")}}))
"""], quiet=True).stdout.splitlines()[-1])
    assert asked["socket"] is False, asked
    for name in ("privileged", "exec", "volumes"):
        assert asked[name][0] == 403 and "docker-guard" in asked[name][1], asked
    assert "mallory" not in docker("ps", "-a", "--format", "{{.Names}}")
    assert seen["exchange"] == ["feedback", "inbound", "outbound"] and seen["inbound"], seen
    assert not any("jane" in entry for entry in seen["inbound"]), seen
    assert mine not in seen["inbound"]

    # the grader container: its sandbox gets its own cgroups there (limits in force)
    layers = json.loads(sh(["docker", "compose", "exec", "-T", "grader", "python", "-c",
                            "import json; from attention_platform.grading.sandbox.client import Zygote; "
                            "z = Zygote(); s = z.spawn(); print(json.dumps(s.layers)); s.kill(); z.close()"],
                           quiet=True).stdout.splitlines()[-1])
    assert {"cgroup:pids", "cgroup:memory", "ns:net", "ns:pid", "no_new_privs"} <= set(layers), layers
    # ...under the grader's own seccomp profile: no new user namespaces, not even for root
    userns = sh(["docker", "compose", "exec", "-T", "grader", "unshare", "--user", "true"], check=False, quiet=True)
    assert userns.returncode != 0 and "Operation not permitted" in userns.stderr, userns
    # root in the grader cannot override file permissions (no DAC_OVERRIDE, nor FOWNER to change them)
    locked = sh(["docker", "compose", "exec", "-T", "grader", "sh", "-c",
                 "f=$(mktemp) && chmod 000 \"$f\" && chown 1000:100 \"$f\" && "
                 "(cat \"$f\" && echo read; chmod 600 \"$f\" && echo changed; rm -f \"$f\") 2>&1"],
                check=False, quiet=True).stdout
    assert "Permission denied" in locked and "read" not in locked.split() and "changed" not in locked.split(), locked
    # the grader's database password opens the gradebook only, never the hub's database
    logins = json.loads(sh(["docker", "compose", "exec", "-T", "grader", "python", "-c", """
import json, os, psycopg
url = os.environ["NBGRADER_DB_URL"].replace("postgresql+psycopg://", "postgresql://")
out = {}
for db in ("gradebook", "jupyterhub", "postgres"):
    try:
        psycopg.connect(url.rsplit("/", 1)[0] + "/" + db, connect_timeout=10).close()
        out[db] = "connected"
    except psycopg.Error as exc:
        out[db] = " ".join(str(exc).split())
print(json.dumps(out))
"""], quiet=True).stdout.splitlines()[-1])
    assert logins["gradebook"] == "connected", logins
    assert "permission denied" in logins["jupyterhub"] and "permission denied" in logins["postgres"], logins
    grader_env = sh(["docker", "compose", "exec", "-T", "grader", "cat", "/proc/1/environ"], quiet=True).stdout
    assert stack["env"]["POSTGRES_PASSWORD"] not in grader_env

    # the TA: collect, autograde both, feedback — through a formgrader that is not root and serves
    # nothing but the formgrader (no files, no kernels), whose sandboxes come from the root broker
    ta = HubSession(url, "ta", passwords["ta"]).login()
    list_processes = ("import os\nfor pid in filter(str.isdigit, os.listdir('/proc')):\n"
                      "    try:\n"
                      "        cmd = open(f'/proc/{pid}/cmdline', 'rb').read().replace(b'\\0', b' ').decode()\n"
                      "        print(os.stat(f'/proc/{pid}').st_uid, cmd)\n"
                      "    except OSError:\n"
                      "        pass")
    processes = sh(["docker", "compose", "exec", "-T", "grader", "python", "-c", list_processes], quiet=True).stdout
    formgrader = [line.split(None, 1) for line in processes.splitlines() if "jupyterhub-singleuser" in line]
    broker = [line.split(None, 1) for line in processes.splitlines() if " -m attention_platform.grading.sandbox.broker" in line]
    assert formgrader and all(uid == "1000" for uid, _ in formgrader), processes
    assert broker and all(uid == "0" for uid, _ in broker), processes
    for path in ("api/contents", "api/kernels", "lab", "files/nbgrader_config.py"):
        assert ta.get(f"/services/{COURSE}/{path}").status_code == 404, path
    with timed("collect_autograde_feedback_s"):
        assert ta.formgrader("POST", f"assignment/{ASSIGNMENT}/collect").json()["success"]
        for student in ("jane.doe", "student2"):
            graded = ta.formgrader("POST", f"submission/{ASSIGNMENT}/{student}/autograde").json()
            assert graded["success"], graded
        assert ta.formgrader("POST", f"assignment/{ASSIGNMENT}/generate_feedback").json()["success"]
        assert ta.formgrader("POST", f"assignment/{ASSIGNMENT}/release_feedback").json()["success"]

    # students fetch their feedback and read their scores
    scores = {}
    for who in (jane, s2):
        assert who.assignment_action("fetch_feedback", ASSIGNMENT)["success"]
        listing = who.contents(f"{ASSIGNMENT}/feedback").json()
        (stamp,) = [entry["name"] for entry in listing["content"]]
        page = who.get(f"/user/{who.username}/files/{ASSIGNMENT}/feedback/{stamp}/{ASSIGNMENT}.html")
        assert page.status_code == 200
        got, out_of = map(float, re.search(r"This notebook: ([0-9.]+) of ([0-9.]+) point", page.text).groups())
        scores[who.username] = (got, out_of, page.text)
    assert scores["jane.doe"][0] == scores["jane.doe"][1] > 0, scores["jane.doe"][:2]
    assert scores["student2"][0] < scores["student2"][1], scores["student2"][:2]
    assert "memory" in scores["student2"][2].lower()  # the sandbox was stopped at its memory limit
    TIMINGS["scores"] = {k: v[:2] for k, v in scores.items()}

    # what runs as whom
    hub_user = sh(["docker", "compose", "exec", "-T", "hub", "id", "-u"], quiet=True).stdout.strip()
    assert hub_user == "1000"
    node = sh(["docker", "compose", "exec", "-T", "hub", "node", "--version"], quiet=True).stdout.strip()
    assert int(node.lstrip("v").split(".")[0]) >= 20, node
    for name, value in TIMINGS.items():
        record_property(name, value)


def test_the_lms_sync_image_runs_its_command_to_a_pass(stack):
    """The profile lti's image, built on the round trip's grader image, runs its own command (one pass, --once)
    as its image's user under the service's settings, as far as it goes without an LMS."""
    with timed("lms_sync_build_s"):
        sh("docker compose --profile lti build lms-sync", timeout=1800)
    image = json.loads(docker("image", "inspect", "dl-attention/lms-sync:0.1.0"))[0]["Config"]
    assert image["User"] == "1000:100", image["User"]
    key_file = WORK / "lti-tool-key.pem"  # as the guide makes it: uid 1000's, mode 0600
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    key_file.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    os.chown(key_file, 1000, 100)
    key_file.chmod(0o600)
    lms = "https://lms.invalid"  # a name that resolves nowhere: the sync's process runs, its pass reaches no LMS
    settings = {"LTI_ISSUER": lms, "LTI_CLIENT_ID": "tool", "LTI_TOKEN_URL": f"{lms}/token",
                "LTI_LINE_ITEMS_URL": f"{lms}/courses/1/lineitems"}
    run = ["docker", "compose", "--profile", "lti", "run", "--rm", "--no-deps", "-T",
           *(f"--env={name}={value}" for name, value in settings.items()), "lms-sync", *image["Cmd"], "--once"]
    # the key as the guide's .env names it, for this run only (the hub keeps the key it started with)
    ran = sh(f"LTI_TOOL_KEY_FILE={shlex.quote(str(key_file))} {shlex.join(run)}", timeout=600, check=False, quiet=True)
    output = ran.stdout + ran.stderr
    # a whole pass: the gradebook read, nothing to send that an LMS would have to take
    assert ran.returncode == 0 and "LMS sync: {" in output and "pass failed" not in output, output[-3000:]
    # its outbox, in the course's volume, is the image user's (seen by the grader account: root there may not look)
    outbox = sh(["docker", "compose", "exec", "-T", "-u", "1000:100", "grader", "stat", "-c", "%u",
                 "/srv/course/lms-outbox.sqlite"], quiet=True).stdout.strip()
    assert outbox == "1000", outbox


def test_build_ca_bundle_is_in_no_image(stack):
    """The extra CA bundle served the builds (PyPI through an intercepting proxy) and stayed out."""
    bundle = stack["env"].get("EXTRA_CA_BUNDLE")
    if not bundle:
        pytest.skip("built without an extra CA bundle")
    pem = re.compile(r"-----BEGIN CERTIFICATE-----.*?-----END CERTIFICATE-----", re.S)
    base = stack["env"]["PYTHON_BASE"]
    base_certs = set(pem.findall(docker("run", "--rm", base, "cat", "/etc/ssl/certs/ca-certificates.crt")))
    extra = set(pem.findall(Path(bundle).read_text())) - base_certs
    if not extra:
        pytest.skip("the extra bundle adds nothing to the base image's own")
    for image in ("dl-attention/hub:0.1.0", "dl-attention/grader:0.1.0", "dl-attention/student:0.1.0",
                  "dl-attention/lms-sync:0.1.0"):
        found = docker("run", "--rm", "--user", "0", "--entrypoint", "sh", image, "-c",
                       "cat /etc/ssl/certs/ca-certificates.crt; ls /run/secrets 2>/dev/null; env")
        assert not extra & set(pem.findall(found)), image
        assert not re.search(r"PIP_CERT|SSL_CERT_FILE|REQUESTS_CA_BUNDLE|NODE_EXTRA_CA_CERTS|extra_ca", found), image


def test_deleting_everything_leaves_nothing_on_the_engine(stack, capsys):
    save_service_logs()
    with timed("teardown_s"):
        for command in deletion_commands():
            sh(command)
    assert leftovers() == {"containers": [], "networks": [], "volumes": []}
    with capsys.disabled():
        print("\ncompose round trip timings (s):", json.dumps(TIMINGS))
