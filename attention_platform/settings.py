"""Everything a deployment sets, read from the environment in one place, typed.

:class:`Settings` holds one field per environment variable a deployment (``attention-course hub``,
Docker Compose's ``.env``, the Kubernetes chart's ``extraEnv``) may set: its name is the variable's
name in lower case, its metadata the type, default and a one-line help that
docs/reference/settings.md lists (tests/course/test_settings.py keeps the page and this module equal).
:func:`settings` parses this process's environment once and keeps the result; a wrong value is
refused by one :class:`SettingsError` that names every wrong variable, what it holds and what it
must be, and the unknown variables of our prefixes that look like a typo of a known one. The hub,
its services and the commands call :func:`settings_or_exit` when they start, so a wrong value
stops them at once with that message on stderr, never later in a student's request.

An empty value counts as unset (Compose passes ``${NAME:-}`` on as empty), except for a list,
where it is the empty list.

Not here, because no deployment sets them: what one of our processes sets for a child it starts.
``JUPYTERHUB_*`` (the hub, for a spawned server or a hub-managed service), ``ATTENTION_COURSE_ROLE``
and ``ATTENTION_VALIDATE_SOCKET`` (the hub's pre-spawn hook, for each user's server),
``ATTENTION_NOTEBOOK_ORDER`` (the native launcher, for the hub, which hands it on to each user's
server: each assignment's notebook order, which a student's server cannot read), the sandbox's
worker environment (attention_platform/grading/sandbox/environment.py: the worker gets only what it
needs, by design of its own), ``JUPYTER_CONFIG_PATH`` and ``PATH`` (the launchers, for their
children), ``ATTENTION_PICTURE_CACHE`` (grader_tests', which cannot import this package), and the
``<SERVICE>_SERVICE_HOST``/``_PORT`` variables Kubernetes sets in a pod. They are still known
names (:data:`SET_BY_OUR_PROCESSES`), so none of them is taken for a typo.

This module imports nothing of the platform: every layer may read it, the student image carries it.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import os
import re
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# Prefixes of ours: an unknown variable that starts with one and is close to a known name is a typo.
PREFIXES = ("ATTENTION_", "HUB_", "FORMGRADER_")
# Variables our processes set for their children, and others' (see the module docstring).
SET_BY_OUR_PROCESSES = frozenset({
    "ATTENTION_COURSE_ROLE", "ATTENTION_VALIDATE_SOCKET", "ATTENTION_PICTURE_CACHE", "HUB_TEST_COURSE_ROOT",
    "ATTENTION_NOTEBOOK_ORDER",
})
# Kubernetes' service links (HUB_SERVICE_HOST, HUB_PORT_8081_TCP_ADDR, ...) in the hub's pod.
_SERVICE_LINK = re.compile(r"^[A-Z0-9_]+_(SERVICE_HOST|SERVICE_PORT(_[A-Z0-9_]+)?|PORT(_\d+_(TCP|UDP|SCTP)(_[A-Z]+)?)?)$")
DEFAULT_STATE_DIR = Path(__file__).resolve().parents[1] / "build" / "hub"


class SettingsError(ValueError):
    """Wrong deployment settings: one line per variable, every one of them at once."""

    def __init__(self, problems: list[str]):
        self.problems = problems
        super().__init__("wrong deployment settings (environment variables):\n"
                         + "\n".join(f"  {problem}" for problem in problems))


@dataclass(frozen=True)
class Kind:
    """How a variable's text becomes a value; ``expected`` is what the error says it must be."""

    name: str
    parse: Callable[[str], Any]
    expected: str
    secret: bool = False


def _whole(text: str) -> int:
    return int(text.strip())


def _whole_at_least(least: int) -> Kind:
    def parse(text):
        number = _whole(text)
        if number < least:
            raise ValueError(text)
        return number
    return Kind("whole number", parse, f"a whole number of at least {least}, e.g. {max(least, 1) * 20}")


def _flag(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in ("1", "true", "yes"):
        return True
    if lowered in ("0", "false", "no"):
        return False
    raise ValueError(text)


def _choice(*options: str) -> Kind:
    def parse(text):
        if text not in options:
            raise ValueError(text)
        return text
    return Kind("choice", parse, "one of " + ", ".join(options))


def _json_object(text: str) -> dict:
    value = json.loads(text)
    if not isinstance(value, dict):
        raise ValueError(text)
    return value


def _items(text: str) -> tuple[str, ...]:
    return tuple(item.strip() for item in text.split(",") if item.strip())


TEXT = Kind("text", str, "text")
SECRET = Kind("secret text", str, "text", secret=True)
PATH = Kind("path", Path, "a path")
WHOLE = Kind("whole number", _whole, "a whole number, e.g. 20000")
PORT = Kind("port", lambda text: _port(_whole(text)), "a port number from 1 to 65535, e.g. 8081")
NUMBER = Kind("number", lambda text: float(text.strip()), "a number, e.g. 1.5")
FLAG = Kind("flag", _flag, "1 or 0 (or true/false, yes/no)")
LIST = Kind("comma-separated list", _items, "a comma-separated list")
JSON_OBJECT = Kind("JSON object", _json_object, 'a JSON object, e.g. {"week_1": {"feedback": "checks"}}')
MEGABYTES = _whole_at_least(64)


def _port(number: int) -> int:
    if not 1 <= number <= 65535:
        raise ValueError(number)
    return number


def _setting(kind: Kind, default: Any, help: str, group: str):
    return field(default=default, metadata={"kind": kind, "help": help, "group": group})


def _shown_default(setting: dataclasses.Field) -> str:
    value = setting.default
    if value is None:
        return "unset"
    if value == DEFAULT_STATE_DIR:
        return "`<repository>/build/hub`"
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, tuple):
        value = ",".join(value)
    return f"`{value}`" if value != "" else "empty"


def markdown_table() -> str:
    """The reference table of every setting (docs/reference/settings.md holds it)."""
    rows = []
    for setting in fields():
        if not rows or setting.metadata["group"] != group:
            group = setting.metadata["group"]
            rows += ["" if rows else None, f"### {group[0].upper()}{group[1:]}", "",
                     "| variable | type | default | what it sets |", "|---|---|---|---|"]
        kind: Kind = setting.metadata["kind"]
        shown_type = kind.expected if kind.name == "choice" else kind.name
        rows.append(f"| `{setting.name.upper()}` | {shown_type} | {_shown_default(setting)} | "
                    f"{setting.metadata['help']} |")
    return "\n".join(row for row in rows if row is not None) + "\n"


def _group(group: str):
    return lambda kind, default, help: _setting(kind, default, help, group)


_course, _hub, _people, _logins = _group("course"), _group("hub"), _group("people"), _group("logins")
_servers, _k8s, _services, _grading = _group("students' servers"), _group("kubernetes"), _group("services"), _group("grading")
_lti, _native, _docker = _group("LTI 1.3"), _group("native"), _group("docker")


@dataclass(frozen=True)
class Settings:
    """Every setting a deployment may set; the field ``x_y`` is the variable ``X_Y``.

    A default of None means the reader decides (its help says how), e.g. by the hub's mode."""

    # ------------------------------------------------------------------ the course
    nbgrader_course_id: str = _course(TEXT, "dl-attention", "The nbgrader course id: the formgrader service's "
                                      "name, the exchange's folder, the hub's groups and the grader's account.")
    nbgrader_exchange_root: Path = _course(PATH, Path("/srv/nbgrader/exchange"), "The exchange as this process sees "
                                           "it (the hub sets each user's server's own view).")
    nbgrader_db_url: str = _course(SECRET, "", "The gradebook's database URL; empty: the course directory's "
                                   "gradebook.db.")
    nbgrader_check_owner: bool = _course(FLAG, True, "Whether collect checks that a submission's files belong to "
                                         "its student (0 in containers, where every file is jovyan's).")
    course_dir: Path | None = _course(PATH, None, "The course directory; unset: `$HUB_STATE_DIR/course` for the "
                                      "hub, /srv/course for the formgrader service.")
    course_instructors_unix_group: str | None = _course(TEXT, None, "Unix group of the course's instructors "
                                                        "(native); unset: `<course id>-instructors`.")

    # ------------------------------------------------------------------ the hub
    hub_mode: str = _hub(_choice("native", "docker", "kubernetes"), "native", "Where students' servers run: local "
                         "processes, Docker containers or Kubernetes pods.")
    hub_state_dir: Path = _hub(PATH, DEFAULT_STATE_DIR, "Where the hub keeps its state (database, cookie secret, "
                               "homes, exchange natively).")
    hub_bind_url: str = _hub(TEXT, "http://127.0.0.1:8000", "Public address of the hub's proxy.")
    hub_internal_port: int = _hub(PORT, 8081, "Port of the hub's own API and pages behind the proxy.")
    proxy_api_port: int = _hub(PORT, 8001, "Port of the proxy's REST API (never exposed).")
    proxy_api_url: str | None = _hub(TEXT, None, "The proxy's API (Kubernetes); unset: the chart's proxy-api "
                                     "Service.")
    hub_db_url: str | None = _hub(SECRET, None, "The hub's database; unset: SQLite in HUB_STATE_DIR.")
    hub_authenticator: str = _hub(_choice("native", "lti", "dummy"), "native", "How users log in: the hub's own "
                                  "accounts, LTI 1.3 launches from the LMS, or (tests on 127.0.0.1 only) any "
                                  "password.")
    hub_connect_host: str = _hub(TEXT, "hub", "Host name students' containers reach the hub by (Docker).")
    hub_connect_url: str | None = _hub(TEXT, None, "URL students' pods reach the hub by (Kubernetes); unset: the "
                                       "hub Service's cluster IP.")
    hub_api_url: str = _hub(TEXT, "http://hub:8081/hub/api", "The hub's API as the formgrader service reaches it.")
    exchange_root: Path | None = _hub(PATH, None, "The whole exchange as the hub sees it; unset: "
                                      "`$HUB_STATE_DIR/exchange`.")
    exchange_views: Path | None = _hub(PATH, None, "Per-student views of the exchange (native); unset: "
                                       "`$HUB_STATE_DIR/exchange-views`.")
    exchange_host_dir: str | None = _hub(TEXT, None, "The exchange's path on the Docker host; unset: EXCHANGE_ROOT.")
    validate_socket: str = _hub(TEXT, "", "The validate service's socket (native, as root); empty: Validate "
                                "starts a kernel.")
    formgrader_url: str = _hub(TEXT, "http://127.0.0.1:9999", "The formgrader as the proxy reaches it.")
    grader_user: str = _hub(TEXT, "root", "Unix account of the formgrader (native).")
    hub_uid_min: int = _hub(WHOLE, 20000, "Lowest uid of the Unix accounts the hub creates for its users (native, "
                            "as root).")
    hub_uid_max: int = _hub(WHOLE, 29999, "Highest uid of the Unix accounts the hub creates for its users.")
    cull_idle_timeout: int = _hub(WHOLE, 3600, "Seconds after which an idle user server is stopped.")
    spawn_start_timeout: int = _hub(WHOLE, 300, "Seconds a user server may take to start.")
    compose_project: str = _hub(TEXT, "dl-attention", "Compose project: prefixes students' container, network and "
                                "home-volume names.")
    student_image: str = _hub(TEXT, "dl-attention/student:0.1.0", "Image of the students' servers (Docker, "
                              "Kubernetes).")
    student_subnets: str = _docker(TEXT, "10.213.0.0/16", "Address range the docker guard cuts each student's own "
                                   "network from.")
    docker_guard_port: int = _docker(PORT, 2375, "Port the docker guard listens on for the hub.")
    docker_socket: str = _docker(TEXT, "/var/run/docker.sock", "The Docker engine's socket the guard forwards to.")

    # ------------------------------------------------------------------ people
    hub_admin_users: tuple[str, ...] = _people(LIST, ("instructor",), "Hub administrators: they approve sign-ups.")
    course_instructors: tuple[str, ...] = _people(LIST, ("instructor",), "The course's instructors.")
    course_tas: tuple[str, ...] = _people(LIST, ("ta",), "The course's teaching assistants.")
    course_tas_grant_extensions: bool = _people(FLAG, False, "Whether the course's TAs may grant and revoke "
                                                "students' extensions in the formgrader (instructors always may).")
    course_students: tuple[str, ...] = _people(LIST, (), "Students put into the course group at start.")
    hub_demo_prefix: str | None = _people(TEXT, None, "Prefix of the native demo accounts' names; unset: none for "
                                         "the hub, its own for the load test and the benchmark.")
    hub_demo_students: int = _people(_whole_at_least(1), 3, "Number of native demo students.")

    # ------------------------------------------------------------------ logins
    hub_initial_passwords_file: str = _logins(TEXT, "", "File of first passwords, created before the hub serves.")
    hub_admin_initial_password: str = _logins(SECRET, "", "First password of each hub administrator.")
    hub_login_max_failures: int = _logins(WHOLE, 5, "Failed logins from one address and name before it waits.")
    hub_login_wait_seconds: int = _logins(WHOLE, 10, "First wait after too many failed logins, doubling after.")
    hub_login_max_wait_seconds: int = _logins(WHOLE, 900, "Longest wait after failed logins.")
    hub_login_address_max_failures: int = _logins(WHOLE, 20, "Failed logins from one address, over all names, "
                                                  "before it waits.")
    hub_trusted_downstream_ips: tuple[str, ...] = _logins(LIST, (), "Reverse proxies in front of the hub's proxy.")
    hub_trusted_proxy_networks: tuple[str, ...] | None = _logins(LIST, None, "Networks whose forwarded client "
                                                                 "address is trusted; unset: none natively, the "
                                                                 "private ranges otherwise.")

    # ------------------------------------------------------------------ students' servers
    student_mem_limit: str = _servers(TEXT, "1G", "Memory of each student's server, e.g. 1G.")
    student_pids_limit: int = _servers(WHOLE, 1024, "Processes and threads of each student's server.")
    student_shm_size: str = _servers(TEXT, "256M", "Size of each server's /dev/shm (bytes, or e.g. 256M).")
    student_tmp_size: str = _servers(TEXT, "512M", "Size of each server's /tmp (bytes, or e.g. 512M; 0: the "
                                     "machine's).")
    student_cpu_limit: float = _servers(NUMBER, 1.0, "CPU cores of each student's server (not natively).")
    student_mem_guarantee: str = _k8s(TEXT, "512M", "Memory the scheduler reserves per student (Kubernetes).")
    student_cpu_guarantee: float = _k8s(NUMBER, 0.1, "CPU cores the scheduler reserves per student (Kubernetes).")
    student_home_size: str = _k8s(TEXT, "1Gi", "Size of each student's home volume (Kubernetes).")
    student_storage_class: str = _k8s(TEXT, "", "StorageClass of the home volumes; empty: the cluster's default.")
    exchange_pvc: str | None = _k8s(TEXT, None, "The exchange's PersistentVolumeClaim; unset: `<course id>-exchange`.")

    # ------------------------------------------------------------------ services
    formgrader_ip: str = _services(TEXT, "0.0.0.0", "Address the formgrader service listens on.")
    formgrader_port: int = _services(PORT, 9999, "Port the formgrader service listens on.")
    formgrader_api_token: str = _services(SECRET, "", "Token the hub and the formgrader service share.")
    lms_sync_api_token: str = _services(SECRET, "", "Token the hub and the LMS sync (attention-course lms-sync) "
                                        "share, with LTI services only.")
    grader_config_dir: Path | None = _services(PATH, None, "The formgrader's Jupyter configuration folder; unset: "
                                               "the repository's grader configuration.")
    attention_cgroup_root: Path = _services(PATH, Path("/sys/fs/cgroup"), "Where the cgroups of servers, services "
                                            "and sandboxes are made.")
    hub_broker_memory_mb: int | None = _native(MEGABYTES, None, "Memory cap of the sandbox broker (MiB); unset: "
                                               "three quarters of the machine's.")
    hub_validate_memory_mb: int = _native(MEGABYTES, 1536, "Memory cap of the validate service (MiB).")
    hub_formgrader_memory_mb: int = _native(MEGABYTES, 3072, "Memory cap of the formgrader (MiB).")
    hub_feedback_on_submit_memory_mb: int = _native(MEGABYTES, 3072, "Memory cap of feedback on submit (MiB).")
    hub_lms_sync_memory_mb: int = _native(MEGABYTES, 1024, "Memory cap of the LMS sync (MiB), with LTI services.")

    # ------------------------------------------------------------------ grading
    attention_secret_seed: str = _grading(SECRET, "", "Course secret the checks' inputs are drawn from; empty: "
                                          "each check's own seed.")
    attention_feedback_on_submit: dict | None = _grading(JSON_OBJECT, None, "Feedback on submit's policy per "
                                                         "assignment; unset: off for every assignment.")
    attention_sandbox_socket: str = _grading(TEXT, "", "The sandbox broker's socket an unprivileged grader asks.")
    attention_sandbox_first_uses: str = _grading(TEXT, "all", "Warm-ups the broker pays once: all, none or a "
                                                 "comma-separated list.")
    attention_autograde_execute: str = _grading(_choice("sandbox", "stock"), "sandbox", "How autograde runs "
                                                "students' code: in the sandbox, or nbgrader's kernel (benchmark "
                                                "baseline only).")
    nbgrader_cell_timeout: int = _grading(WHOLE, 60, "Seconds a student cell or a check's probe may run.")
    attention_notebook_timeout: float = _grading(NUMBER, 300.0, "Seconds for a whole submission.")
    attention_similarity_max_mb: int = _grading(_whole_at_least(1), 512, "Notebooks the similarity report reads "
                                                "for the whole class (MiB); the students with the largest ones are "
                                                "left out past it, and named.")

    # ------------------------------------------------------------------ LTI 1.3
    lti_issuer: str = _lti(TEXT, "", "The platform's issuer (required with lti).")
    lti_client_id: tuple[str, ...] = _lti(LIST, (), "Client id(s) the LMS registered (required with lti).")
    lti_authorize_url: str = _lti(TEXT, "", "The LMS's OIDC authorization endpoint (required with lti).")
    lti_jwks_url: str = _lti(TEXT, "", "The LMS's key set (required with lti).")
    lti_deployment_ids: tuple[str, ...] = _lti(LIST, (), "Deployment(s) serving this course (required with lti).")
    lti_context_ids: tuple[str, ...] = _lti(LIST, (), "This course's context id(s) (required with lti).")
    lti_username_key: str = _lti(TEXT, "sub", "Claim used as the user name.")
    lti_uri_scheme: str = _lti(_choice("auto", "http", "https"), "auto", "Scheme of the URLs the LMS is given.")
    lti_tool_name: str = _lti(TEXT, "Self-attention course", "The tool's name as the LMS shows it.")
    lti_presentation: str = _lti(_choice("window", "embed"), "window", "How the LMS shows the tool: in a new window, "
                                 "or embedded in the LMS's page (then LTI_EMBED_ORIGINS, and HTTPS).")
    lti_embed_origins: tuple[str, ...] = _lti(LIST, (), "With LTI_PRESENTATION=embed: the LMS's origin(s) allowed "
                                              "to frame the hub, e.g. https://canvas.example.edu.")
    lti_role_groups: str = _lti(TEXT, "", "LMS roles to hub groups (attention_platform/hub/lti.py); empty: the "
                                "course's defaults.")
    lti_allow_unmapped_roles: bool = _lti(FLAG, False, "Whether a launch with no mapped role may log in.")
    lti_token_url: str = _lti(TEXT, "", "The platform's OAuth 2 token endpoint; empty: no grades or roster go "
                              "between the LMS and the course (attention_platform/lms).")
    lti_line_items_url: str = _lti(TEXT, "", "The course's line items URL in the LMS (AGS), where each assignment's "
                                   "gradebook column is found or made; empty: the one the course's launches name.")
    lti_memberships_url: str = _lti(TEXT, "", "The course's memberships URL in the LMS (NRPS); empty: no roster sync.")
    lti_service_origins: tuple[str, ...] = _lti(LIST, (), "Origins of the LMS's services besides those of its "
                                                "issuer and endpoints (e.g. a Canvas course's "
                                                "https://school.instructure.com): a line items URL a launch "
                                                "names elsewhere is refused.")
    lti_tool_key_file: str = _lti(TEXT, "", "The tool's private key (PEM), readable by the hub's account alone; "
                                  "empty: made on the hub's first start as lti-tool-key.pem in HUB_STATE_DIR.")
    lti_launch_services_file: str = _lti(TEXT, "", "File where the hub keeps the line items URL launches name, "
                                         "for the LMS sync; empty: lti-launch-services.json in HUB_STATE_DIR.")
    lti_sync_seconds: float = _lti(NUMBER, 60.0, "Seconds between two passes of the passback worker (scores out, "
                                   "roster in).")

    @classmethod
    def from_environ(cls, environ: Mapping[str, str]) -> Settings:
        """The settings ``environ`` holds; SettingsError naming every wrong variable."""
        values, problems = {}, []
        for setting in fields():
            name = setting.name.upper()
            text = environ.get(name)
            if text is None or (text == "" and setting.metadata["kind"] is not LIST):
                continue
            kind: Kind = setting.metadata["kind"]
            try:
                values[setting.name] = kind.parse(text)
            except ValueError:
                shown = "(hidden)" if kind.secret else repr(text[:80])
                problems.append(f"{name}={shown}: expected {kind.expected}")
        problems += typos(environ)
        if problems:
            raise SettingsError(problems)
        return cls(**values)

    def memory_mb(self, service: str) -> int | None:
        """``HUB_<SERVICE>_MEMORY_MB`` of a native service (``-`` as ``_``)."""
        return getattr(self, f"hub_{service.replace('-', '_')}_memory_mb")


def fields() -> tuple[dataclasses.Field, ...]:
    return dataclasses.fields(Settings)


def variables() -> frozenset[str]:
    """Every variable a deployment may set."""
    return frozenset(setting.name.upper() for setting in fields())


def typos(environ: Mapping[str, str]) -> list[str]:
    """One line per unknown variable with one of our prefixes that is close to a known one."""
    known = variables()
    found = []
    for name in sorted(environ):
        if (not name.startswith(PREFIXES) or name in known or name in SET_BY_OUR_PROCESSES
                or _SERVICE_LINK.match(name)):
            continue
        close = difflib.get_close_matches(name, known, n=1, cutoff=0.8)
        if close:
            found.append(f"{name} is no setting: did you mean {close[0]}?")
    return found


_PARSED: tuple[tuple, Settings] | None = None


def settings() -> Settings:
    """This process's settings, parsed once. Parsed again only if one of the variables changed
    since, which only a test does (a deployment never changes its own environment)."""
    global _PARSED
    snapshot = tuple(os.environ.get(name) for name in _NAMES)
    if _PARSED is None or _PARSED[0] != snapshot:
        _PARSED = (snapshot, Settings.from_environ(os.environ))
    return _PARSED[1]


_NAMES = tuple(sorted(variables()))


def settings_or_exit(program: str) -> Settings:
    """settings(), or the error on stderr and exit status 2: what every process calls as it starts."""
    try:
        return settings()
    except SettingsError as exc:
        print(f"{program}: {exc}", file=sys.stderr)
        raise SystemExit(2) from None


def course_id() -> str:
    """The nbgrader course id (NBGRADER_COURSE_ID)."""
    return settings().nbgrader_course_id


if __name__ == "__main__":
    print(markdown_table(), end="")
