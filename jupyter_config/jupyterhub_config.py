"""JupyterHub configuration of the self-attention course: ONE file for both modes.

* HUB_MODE=native (the default, started by ``attention-course hub``): local
  processes, SQLite, a local exchange, 127.0.0.1 only.
* HUB_MODE=docker (docker-compose.yml): DockerSpawner, PostgreSQL, per-student
  mounts of the exchange, the formgrader in its own container.

Every setting comes from an environment variable, read and checked by attention_platform/settings.py
(types, defaults, help: docs/reference/settings.md); a wrong one stops the hub here, named.
Roles (JupyterHub RBAC, minimum scopes we found; nbgrader #1900):
  students   (group nbgrader-<course>)   only the default ``user`` role: their own server.
  TAs        (group formgrade-<course>)  access:services!service=<course>
  instructors (group instructors-<course>) TA scopes + adding/removing the course's students.
  formgrader service token               no scopes at all (it only checks users' tokens);
                                         its users' OAuth tokens: read:users:groups!user (instructor gate).
  idle culler service                    list:users, read:users:activity, read:servers, delete:servers
"""

import logging
import os
import sys
from pathlib import Path

from attention_platform.exchange.exchange_layout import ExchangeLayout, Ids
from attention_platform.hub import hub_request_limits
from attention_platform.hub.intra_hub_http import CONNECTOR_OPTIONS as INTRA_HUB_CONNECTOR_OPTIONS
from attention_platform.settings import settings_or_exit

c = get_config()  # noqa: F821

HERE = Path(__file__).resolve().parent
REPO = HERE.parent


SETTINGS = settings_or_exit("jupyterhub_config.py")


# ---------------------------------------------------------------- settings
# native: local processes on 127.0.0.1; docker: containers (docker-compose.yml).
MODE = SETTINGS.hub_mode
# nbgrader course id; also the formgrader service's name and the groups' suffix.
COURSE = SETTINGS.nbgrader_course_id
# Where the hub keeps its state (SQLite db, cookie secret, proxy pid).
STATE = SETTINGS.hub_state_dir
# Public address of the proxy; native binds to loopback only.
BIND_URL = SETTINGS.hub_bind_url
# Port of the hub's own API/pages behind the proxy (native: loopback; docker: the hub container).
HUB_PORT = SETTINGS.hub_internal_port
# Port of the proxy's REST API (hub -> proxy; never exposed).
PROXY_API_PORT = SETTINGS.proxy_api_port
# Hub database: SQLite natively, PostgreSQL in docker (postgresql+psycopg://...).
DB_URL = SETTINGS.hub_db_url or f"sqlite:///{STATE / 'jupyterhub.sqlite'}"
# Authenticator: native (NativeAuthenticator, admin approval) or lti (attention_platform/hub/lti.py).
AUTHENTICATOR = SETTINGS.hub_authenticator
# Hub administrators (comma-separated): they approve sign-ups and manage everything.
ADMINS = list(SETTINGS.hub_admin_users)
# The course's instructors (comma-separated): formgrader + managing students.
INSTRUCTORS = list(SETTINGS.course_instructors)
# The course's teaching assistants (comma-separated): formgrader access.
TAS = list(SETTINGS.course_tas)
# Students preloaded into the course group (more are added at run time by instructors).
STUDENTS = list(SETTINGS.course_students)
# The whole exchange as the hub sees it (it creates each student's own folders there).
EXCHANGE = SETTINGS.exchange_root or STATE / "exchange"
# Per-student exchange views (native only: symlinks standing in for Docker's bind mounts).
VIEWS = SETTINGS.exchange_views or STATE / "exchange-views"
# Formgrader URL as the proxy reaches it (docker: the grader container).
FORMGRADER_URL = SETTINGS.formgrader_url
# Unix account of the formgrader (native, as root: root, which the autograder's sandbox needs).
GRADER_USER = SETTINGS.grader_user
# Idle single-user servers are stopped after this many seconds. An idle server holds little memory and a
# re-spawn in a deadline rush keeps a student waiting (`make load` measures both); memory is not what runs
# out first, so idle servers live an hour (idle kernels go after 30 min, jupyter_config/student).
CULL_TIMEOUT = SETTINGS.cull_idle_timeout
# Seconds a single-user server may take to start. In a rush of 50 students within a minute on 2 cores the
# last ones wait over 120 s for their server (`make load`), so the limit leaves room above that.
START_TIMEOUT = SETTINGS.spawn_start_timeout
# Per-student memory limit (docker; natively a cgroup, as root): a server and a torch kernel running the
# assignment peak well below it (`make load`), which leaves room for the student's own experiments.
MEM_LIMIT = SETTINGS.student_mem_limit
# Processes and threads per student server, kernels included (docker: the container's pids limit;
# natively its pids cgroup, as root). A server with no kernel running has a handful.
PIDS_LIMIT = SETTINGS.student_pids_limit
# Size of each student server's own /dev/shm, counted in its memory (docker: the container's shm_size;
# natively a tmpfs in the server's own mount namespace). Docker's default, 64M, is too small for
# torch's DataLoader workers.
SHM_SIZE = SETTINGS.student_shm_size
# Size of each student server's own /tmp, counted in its memory (natively a tmpfs in the server's own
# mount namespace, so students never share /tmp; 0: the machine's; docker: the container's own /tmp).
TMP_SIZE = SETTINGS.student_tmp_size
# Per-student CPU limit in cores (docker; natively not enforced).
CPU_LIMIT = SETTINGS.student_cpu_limit
# Compose project (docker): prefixes students' container and home-volume names and labels their containers.
PROJECT = SETTINGS.compose_project

AS_ROOT = os.geteuid() == 0
GROUP_STUDENTS = f"nbgrader-{COURSE}"
GROUP_GRADERS = f"formgrade-{COURSE}"
GROUP_INSTRUCTORS = f"instructors-{COURSE}"

# ---------------------------------------------------------------- hub and proxy
c.JupyterHub.bind_url = BIND_URL
c.JupyterHub.db_url = DB_URL
c.JupyterHub.hub_port = HUB_PORT
c.ConfigurableHTTPProxy.api_url = f"http://127.0.0.1:{PROXY_API_PORT}"
c.JupyterHub.cookie_secret_file = str(STATE / "jupyterhub_cookie_secret")
c.ConfigurableHTTPProxy.pid_file = str(STATE / "jupyterhub-proxy.pid")
_chp = REPO / "node_modules" / ".bin" / "configurable-http-proxy"
c.ConfigurableHTTPProxy.command = [str(_chp) if _chp.exists() else "configurable-http-proxy"]
# A fresh connection for every request the hub makes of the proxy or a server: the proxy's API
# closes idle connections after 5 s, and a busy hub would reuse one it closed (intra_hub_http.py).
c.JupyterHubHTTPClient.connector_options = INTRA_HUB_CONNECTOR_OPTIONS
# The hub's server refuses a request body over 1 MB unread: tornado would read up to 100 MB of any
# request before the login page asks who sent it, and JupyterHub has no setting (hub_request_limits.py).
hub_request_limits.install()
# Natively, Ctrl-C stops every server: nothing keeps writing afterwards. In Docker a restarted hub
# finds its students' containers still running (DockerSpawner keeps their ids in the database).
c.JupyterHub.cleanup_servers = MODE == "native"
c.JupyterHub.hub_ip = "127.0.0.1" if MODE == "native" else "0.0.0.0"
if MODE == "docker":
    c.JupyterHub.hub_connect_ip = SETTINGS.hub_connect_host

# ---------------------------------------------------------------- authentication
if AUTHENTICATOR == "native":
    from attention_platform.hub.native_auth import CourseNativeAuthenticator

    c.JupyterHub.authenticator_class = CourseNativeAuthenticator
    c.CourseNativeAuthenticator.open_signup = False  # sign-ups wait for an admin's approval
    c.CourseNativeAuthenticator.minimum_password_length = 10
    c.CourseNativeAuthenticator.check_common_password = True
    c.Authenticator.allow_all = True  # who may log in is NativeAuthenticator's approval list
    # Logins created before the hub serves anything (admins first): nobody can sign up as them.
    c.CourseNativeAuthenticator.initial_passwords_file = SETTINGS.hub_initial_passwords_file
    c.CourseNativeAuthenticator.admin_initial_password = SETTINGS.hub_admin_initial_password
    # Failed logins slow down where they come from, never the account (attention_platform/hub/login_throttle.py):
    # after HUB_LOGIN_MAX_FAILURES from one (address, name), that pair waits HUB_LOGIN_WAIT_SECONDS, doubling
    # with each further failure up to HUB_LOGIN_MAX_WAIT_SECONDS; an address failing over
    # HUB_LOGIN_ADDRESS_MAX_FAILURES times, over all names, waits too.
    c.CourseNativeAuthenticator.allowed_failed_logins = SETTINGS.hub_login_max_failures
    c.CourseNativeAuthenticator.seconds_before_next_try = SETTINGS.hub_login_wait_seconds
    c.CourseNativeAuthenticator.login_backoff_max_seconds = SETTINGS.hub_login_max_wait_seconds
    c.CourseNativeAuthenticator.address_allowed_failed_logins = SETTINGS.hub_login_address_max_failures
    # Reverse proxies in front of the hub's own proxy (TLS on the Docker host, say): a login then counts
    # against the client address they forward, not against theirs, which every client would share.
    c.JupyterHub.trusted_downstream_ips = list(SETTINGS.hub_trusted_downstream_ips)
    # Docker and Kubernetes: what sits between the Internet and the hub's proxy (the host's reverse proxy,
    # the chart's HTTPS pod) has a private address; natively the proxy is reached from loopback only.
    c.CourseNativeAuthenticator.trusted_proxy_networks = list(
        SETTINGS.hub_trusted_proxy_networks if SETTINGS.hub_trusted_proxy_networks is not None
        else () if MODE == "native" else ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "fc00::/7"))
elif AUTHENTICATOR == "lti":
    from attention_platform.hub.lti import configure_lti

    configure_lti(c)
    c.CourseLTI13Authenticator.outbound_dir = str(EXCHANGE / COURSE / "outbound")  # released: deep linking
    if MODE == "native" and AS_ROOT:  # each hub user is a Unix account of the same name
        c.CourseLTI13Authenticator.unix_account_names = True
        c.CourseLTI13Authenticator.lms_ids_file = str(STATE / "lti-users.json")
elif AUTHENTICATOR == "dummy":  # tests only: any password; refuses to serve beyond loopback
    if "127.0.0.1" not in BIND_URL:
        raise SystemExit("HUB_AUTHENTICATOR=dummy is for tests on 127.0.0.1 only")
    c.JupyterHub.authenticator_class = "dummy"
    c.Authenticator.allow_all = True
else:
    raise SystemExit(f"HUB_AUTHENTICATOR must be native or lti, not {AUTHENTICATOR!r}")
c.Authenticator.admin_users = set(ADMINS)

# ---------------------------------------------------------------- groups and roles
# With LTI the LMS roles decide group membership (Authenticator.manage_groups), and
# JupyterHub refuses load_groups then; the roles below create the groups they name.
if AUTHENTICATOR != "lti":
    c.JupyterHub.load_groups = {
        GROUP_STUDENTS: {"users": STUDENTS},
        GROUP_GRADERS: {"users": sorted(set(TAS) | set(INSTRUCTORS))},
        GROUP_INSTRUCTORS: {"users": INSTRUCTORS},
    }
c.JupyterHub.load_roles = [
    {  # TAs and instructors: reach the formgrader service, nothing else.
        "name": f"grader-{COURSE}",
        "description": "Use the course's formgrader",
        "groups": [GROUP_GRADERS],
        "scopes": [f"access:services!service={COURSE}"],
    },
    {  # instructors: add students to the course and see who is enrolled.
        "name": f"instructor-{COURSE}",
        "description": "Manage the course's students",
        "groups": [GROUP_INSTRUCTORS],
        "scopes": [
            # Sign-ups create the accounts; enrolling is adding them to the course group.
            "admin-ui", "list:users", "read:users:name", "read:users:groups",
            f"groups!group={GROUP_STUDENTS}", f"read:groups!group={GROUP_STUDENTS}", "list:groups",
        ],
    },
    {  # idle culler: the four scopes its docs list.
        "name": "idle-culler",
        "services": ["idle-culler"],
        "scopes": ["list:users", "read:users:activity", "read:servers", "delete:servers"],
    },
]

# ---------------------------------------------------------------- services
# The formgrader is an external service in both modes: attention_platform/formgrader/formgrader_service.py
# starts it (natively the launcher, in Docker the grader container) with this same token.
_formgrader = {
    "name": COURSE,
    "url": FORMGRADER_URL,
    "api_token": SETTINGS.formgrader_api_token,  # secret shared with the formgrader process
    "display": True,  # listed in the hub's Services menu for those who may use it
    "oauth_no_confirm": True,  # no "Authorize access" stop for TAs (it is our own service)
    # The formgrader learns the user's groups: its gate tells TAs from instructors (attention_platform/formgrader/formgrader_gate.py).
    "oauth_client_allowed_scopes": ["read:users:groups!user"],
    # The hub routes its login page once it has asked each service whether it is up: it asks for 1 s
    # instead of 30, since the formgrader starts after the login page answers (hub/native.py) and,
    # until it is up, its link gets the hub's "service unavailable" page.
    "timeout": 1,
}


class _FormgraderStartsAfterTheLoginPage(logging.Filter):
    """The hub's start-up check of the formgrader fails by design (it starts once the login page answers;
    the launcher says when it is up): that line is normal, not a warning to act on."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith(f"Cannot connect to external service {COURSE} at ")


logging.getLogger("JupyterHub").addFilter(_FormgraderStartsAfterTheLoginPage())
c.JupyterHub.services = [
    _formgrader,
    {
        "name": "idle-culler",
        "command": [sys.executable, "-m", "jupyterhub_idle_culler", f"--timeout={CULL_TIMEOUT}"],
    },
]
if AUTHENTICATOR == "lti" and SETTINGS.lti_token_url:
    # The LMS sync (attention-course lms-sync, started by the launcher as the grader account): scores out,
    # the roster in. It makes the LMS's students and TAs hub users, puts them in the course's groups, takes
    # them out and stops their servers; it is no hub admin, and JupyterHub lets only admins make admins.
    c.JupyterHub.services.append({"name": "lms-sync", "api_token": SETTINGS.lms_sync_api_token})
    c.JupyterHub.load_roles.append({
        "name": "lms-sync",
        "description": "Keep the course's groups as the LMS's roster says",
        "services": ["lms-sync"],
        "scopes": ["list:users", "read:users", "admin:users", "read:groups", "groups", "admin:groups",
                   "read:servers", "delete:servers"],
    })

# ---------------------------------------------------------------- spawner
c.Spawner.default_url = "/lab"
c.Spawner.start_timeout = START_TIMEOUT
c.Spawner.http_timeout = START_TIMEOUT
# Jupyter Server answers SIGINT with a "shutdown? (y/n)" prompt; do not wait for it. Local processes
# only (students' native servers and the hub-managed services): DockerSpawner has no such settings.
c.LocalProcessSpawner.interrupt_timeout = 1
c.LocalProcessSpawner.term_timeout = 5
c.Spawner.mem_limit = MEM_LIMIT
c.Spawner.cpu_limit = CPU_LIMIT
if MODE == "native":
    # jupyter_config/student/jupyterhub-singleuser: jupyterhub-singleuser without a slow import (see there).
    c.Spawner.cmd = [sys.executable, str(HERE / "student" / "jupyterhub-singleuser")]
    if AS_ROOT:  # real Unix users: exchange permissions are enforced by the kernel
        # Each server as its own account, capped by mem_limit and pids_limit in cgroups of its own,
        # every process it started stopped with it (attention_platform/hub/native_spawner.py).
        c.JupyterHub.spawner_class = "attention_platform.hub.native_spawner.CourseLocalSpawner"
        c.CourseLocalSpawner.homes_dir = str(STATE / "home")
        c.CourseLocalSpawner.pids_limit = PIDS_LIMIT
        c.CourseLocalSpawner.shm_size = int(SHM_SIZE) if SHM_SIZE.isdigit() else SHM_SIZE  # bytes, or 256M
        c.CourseLocalSpawner.tmp_size = int(TMP_SIZE) if TMP_SIZE.isdigit() else TMP_SIZE
        c.Spawner.notebook_dir = str(STATE / "home" / "{username}")
    else:  # one Unix user for everyone: a demo, the exchange is not isolated
        c.JupyterHub.spawner_class = "jupyterhub.spawner.SimpleLocalProcessSpawner"
        c.SimpleLocalProcessSpawner.home_dir_template = str(STATE / "home" / "{username}")
else:
    c.JupyterHub.spawner_class = "dockerspawner.DockerSpawner"
    # Student image: JupyterLab 4 + nbgrader's student extensions + torch (docker/student.Dockerfile).
    c.DockerSpawner.image = SETTINGS.student_image
    c.DockerSpawner.remove = True  # containers are disposable; homes live on volumes
    c.DockerSpawner.use_internal_ip = True  # the proxy reaches students' containers on that network
    c.DockerSpawner.prefix = f"{PROJECT}-student"  # container names: <project>-student-<escaped user>
    c.DockerSpawner.cmd = ["jupyterhub-singleuser"]
    c.DockerSpawner.notebook_dir = "/home/jovyan"
    c.DockerSpawner.pull_policy = "never"  # the image is built on this host (docker compose build)
    # Label every student's container with the project: `docker ps -f label=dl-attention.project=<project>`
    # lists them and the README's "taking it down" removes them (they outlive hub restarts).
    c.DockerSpawner.extra_create_kwargs = {"labels": {"dl-attention.project": PROJECT}}
    # No capabilities and no way to gain any: the server and the student's code run as uid 1000; a
    # fork bomb stops at the container's pids limit.
    c.DockerSpawner.extra_host_config = {"cap_drop": ["ALL"], "security_opt": ["no-new-privileges:true"],
                                         "pids_limit": PIDS_LIMIT, "shm_size": SHM_SIZE}
    _host_exchange = SETTINGS.exchange_host_dir or str(EXCHANGE)  # same path on host and in the hub
    # Docker volume names allow only [a-zA-Z0-9_.-], so the home volume uses DockerSpawner's escaped
    # name ({username}: jane.doe -> jane-2edoe). The exchange folders are created under the hub's own
    # name (prepare_exchange; the grader's collect reads the student id from them), so their bind
    # mounts use the raw name ({raw_username}: jane.doe, jane@uni.edu).
    c.DockerSpawner.volumes = {
        # Per-user home volume: the student's work survives container restarts.
        f"{PROJECT}-home-{{username}}": "/home/jovyan",
        # Released assignments, read-only for students.
        f"{_host_exchange}/{COURSE}/outbound": {"bind": f"/srv/nbgrader/exchange/{COURSE}/outbound", "mode": "ro"},
        # The student's own inbound folder: nobody else's is mounted.
        f"{_host_exchange}/{COURSE}/inbound/{{raw_username}}": {"bind": f"/srv/nbgrader/exchange/{COURSE}/inbound", "mode": "rw"},
        # The student's own feedback folder, read-only.
        f"{_host_exchange}/{COURSE}/feedback/{{raw_username}}": {"bind": f"/srv/nbgrader/exchange/{COURSE}/feedback", "mode": "ro"},
    }

    def _format_volume_name(template, spawner):
        """DockerSpawner's default naming, refusing a user name that is no single path component
        (".", "..", a slash or NUL would point a bind mount at other students' folders)."""
        name = spawner.user.name
        if name in ("", ".", "..") or "/" in name or "\0" in name:
            raise ValueError(f"user name {name!r} cannot name an exchange folder")
        return template.format(**spawner.template_namespace())

    c.DockerSpawner.format_volume_name = _format_volume_name

def _ids(username):
    """Ids of a real Unix user, or None when everyone shares one UID."""
    if MODE == "native" and AS_ROOT:
        return Ids.of_user(username)
    if MODE == "docker":
        return Ids(1000, 100)  # jovyan:users in the student and grader images
    return None


def _grader_ids():
    if MODE == "native" and AS_ROOT:
        return Ids.of_user(GRADER_USER or "root")
    if MODE == "docker":
        return Ids(1000, 100)
    return None


def prepare_exchange(username):
    """Create ``username``'s own inbound and feedback folders (and, natively, their view).

    The ownership table and why root follows nothing there: attention_platform/exchange/exchange_layout.py.
    inbound/<user>:  the student writes; the grader's group reads (setgid keeps the group).
    feedback/<user>: the grader writes; the student's group reads.
    Other students can enter neither; the view is root's and only readable by the student.
    """
    layout = ExchangeLayout(EXCHANGE, COURSE, grader=_grader_ids(), views=VIEWS if MODE == "native" else None,
                            log=logging.getLogger("JupyterHub"))  # the hub's own log: what was set aside
    layout.prepare_student(username, _ids(username))


# Uids of the Unix accounts the hub creates for its users (native, as root); a hub user whose
# account exists outside this range (root, daemon, a person's own login) gets no server.
HUB_UIDS = (SETTINGS.hub_uid_min, SETTINGS.hub_uid_max)


# The course directory the grader owns (native): instructors edit its source/ from their own server.
COURSE_DIR = SETTINGS.course_dir or STATE / "course"
# Unix group of the course's instructors (native): members write source/; the hub keeps it in
# step with the hub group instructors-<course> at every spawn.
INSTRUCTORS_UNIX_GROUP = SETTINGS.course_instructors_unix_group or f"{COURSE}-instructors"


def prepare_native_account(spawner):
    """The user's own Unix account (created in HUB_UIDS if missing) and home folder; for an
    instructor, membership of the instructors' Unix group and ~/course-source -> source/."""
    from attention_platform.hub.accounts import UidRange, ensure_account, place_link, set_membership
    from attention_platform.hub.native import own_dir

    name = spawner.user.name
    home = STATE / "home" / name
    entry = ensure_account(name, home, UidRange(*HUB_UIDS))  # AccountRefused: the spawn fails with its reason
    own_dir(home, entry.pw_uid, entry.pw_gid, 0o700)
    instructor = GROUP_INSTRUCTORS in {group.name for group in spawner.user.groups}
    set_membership(name, INSTRUCTORS_UNIX_GROUP, instructor)
    place_link(home, "course-source", str(COURSE_DIR / "source") if instructor else None)


# The validate service's socket (native, as root: attention_platform/grading/validate_service.py): students'
# Validate runs in a warm sandbox instead of a fresh kernel. Empty: Validate starts a kernel.
VALIDATE_SOCKET = SETTINGS.validate_socket
# What a native server reads or writes that may lie under the machine's /tmp (a CI checkout, a test's
# state): bound into the server's own /tmp.
c.CourseLocalSpawner.tmp_keep = [str(REPO), sys.prefix, str(STATE), str(EXCHANGE), str(VIEWS), str(COURSE_DIR),
                                 os.path.dirname(VALIDATE_SOCKET)]


def pre_spawn_hook(spawner):
    name = spawner.user.name
    if MODE == "native" and AS_ROOT:
        prepare_native_account(spawner)
    prepare_exchange(name)
    groups = {group.name for group in spawner.user.groups}
    spawner.environment = dict(spawner.environment)
    spawner.environment.update({
        # What the user's JupyterLab shows (attention_platform/lab/course_lab.py); the hub and the
        # formgrader's gate still check every action themselves.
        "ATTENTION_COURSE_ROLE": "instructor" if GROUP_INSTRUCTORS in groups else "ta" if GROUP_GRADERS in groups
        else "student",
        # Student-side nbgrader and Jupyter Server settings (jupyter_config/student/).
        "JUPYTER_CONFIG_PATH": str(HERE / "student") if MODE == "native" else "/etc/dl-attention/jupyter",
        # This user's view of the exchange (docker: the mount points above).
        "NBGRADER_EXCHANGE_ROOT": str(VIEWS / name) if MODE == "native" else "/srv/nbgrader/exchange",
        "NBGRADER_COURSE_ID": COURSE,
        # Each assignment's notebooks in order, as JSON (the native launcher sets it for the hub from the
        # hidden checks' registry; unset, the Lab lists an assignment's own notebook first, then by name).
        "ATTENTION_NOTEBOOK_ORDER": os.environ.get("ATTENTION_NOTEBOOK_ORDER", ""),
    })
    if MODE == "native" and VALIDATE_SOCKET:
        spawner.environment["ATTENTION_VALIDATE_SOCKET"] = VALIDATE_SOCKET


c.Spawner.pre_spawn_hook = pre_spawn_hook


def join_own_network(spawner):
    """Docker: the student's container on a network of its own, which only the hub (and its proxy) also
    joins: on one shared network a student could reach another student's server without the proxy.
    The docker guard (attention_platform/docker_guard.py) creates it at the container's first
    create, connects the hub to it, and refuses a container on any other network."""
    spawner.network_name = f"{PROJECT}-net-{spawner.escaped_name}"


if MODE == "docker":
    def _docker_pre_spawn_hook(spawner):
        join_own_network(spawner)
        pre_spawn_hook(spawner)

    c.Spawner.pre_spawn_hook = _docker_pre_spawn_hook


# ---------------------------------------------------------------- kubernetes (Zero to JupyterHub)
# HUB_MODE=kubernetes: the hub pod of the `jupyterhub` Helm chart (deploy/kubernetes/values.yaml) loads
# this file after the chart's own configuration (hub.extraConfig -> load_subconfig), so whatever is set
# here wins over the chart's values. KubeSpawner starts one pod per student from the student image; of the
# exchange (one ReadWriteMany volume) each pod mounts only outbound (read-only) and that student's own
# inbound and feedback folders, by subPath. Every uid is 1000 (jovyan), so isolation comes from what is
# mounted, as in Docker. The formgrader, feedback on submit and the sandbox broker are one pod in a namespace of
# its own, the only privileged one (deploy/kubernetes/course.yaml); the hub's pods stay `restricted`.
if MODE == "kubernetes":
    # Student image: JupyterLab 4 + nbgrader's student extensions + torch (docker/student.Dockerfile).
    K8S_IMAGE = SETTINGS.student_image
    # Memory the scheduler reserves per student: a working student's peak while Validate runs the notebook
    # (`make load`); reserving it means a full node never OOM-kills a Validate.
    K8S_MEM_GUARANTEE = SETTINGS.student_mem_guarantee
    # CPU the scheduler reserves per student: a session costs a few CPU-seconds in all and an idle server
    # nearly none; 0.1 core packs a node by memory, and the limit (STUDENT_CPU_LIMIT) absorbs bursts.
    K8S_CPU_GUARANTEE = SETTINGS.student_cpu_guarantee
    # Size of each student's home volume (notebooks and their own experiments; the assignment is < 5 MB).
    K8S_HOME_SIZE = SETTINGS.student_home_size
    # StorageClass of the students' home volumes (ReadWriteOnce); empty: the cluster's default class.
    K8S_HOME_CLASS = SETTINGS.student_storage_class
    # The exchange's PersistentVolumeClaim (ReadWriteMany, deploy/kubernetes/course.yaml); the hub mounts it whole.
    K8S_EXCHANGE_PVC = SETTINGS.exchange_pvc or f"{COURSE}-exchange"
    # Where the exchange appears inside students' pods (jupyter_config/student/nbgrader_config.py reads NBGRADER_EXCHANGE_ROOT).
    K8S_POD_EXCHANGE = "/srv/nbgrader/exchange"
    # The chart's proxy API Service (the chart sets the same; kept here because the common part above points it at 127.0.0.1).
    K8S_PROXY_API = SETTINGS.proxy_api_url or f"http://proxy-api:{os.environ.get('PROXY_API_SERVICE_PORT', '8001')}"

    def _hub_connect_url():
        """Students reach the hub by its Service's cluster IP, which Kubernetes puts into the hub pod's
        environment (HUB_SERVICE_HOST/PORT): their NetworkPolicy then needs no DNS, only the hub."""
        explicit = SETTINGS.hub_connect_url
        if explicit:
            return explicit
        host, port = os.environ.get("HUB_SERVICE_HOST"), os.environ.get("HUB_SERVICE_PORT", str(HUB_PORT))
        if not host:
            return f"http://hub:{port}"
        return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"

    c.JupyterHub.hub_bind_url = f"http://:{HUB_PORT}"  # the chart's hub Service targets this port
    c.JupyterHub.hub_connect_url = _hub_connect_url()
    c.ConfigurableHTTPProxy.api_url = K8S_PROXY_API
    c.ConfigurableHTTPProxy.should_start = False  # the chart runs the proxy in its own pod
    # A hub restart (helm upgrade) must not stop every student's server in the middle of a deadline.
    c.JupyterHub.cleanup_servers = False

    c.JupyterHub.spawner_class = "kubespawner.KubeSpawner"
    # Set on KubeSpawner, not Spawner: the chart sets c.KubeSpawner.*, and class-specific config wins.
    c.KubeSpawner.image = K8S_IMAGE
    c.KubeSpawner.image_pull_policy = "IfNotPresent"
    c.KubeSpawner.cmd = ["jupyterhub-singleuser"]
    c.KubeSpawner.default_url = "/lab"
    c.KubeSpawner.working_dir = "/home/jovyan"
    c.KubeSpawner.start_timeout = START_TIMEOUT
    c.KubeSpawner.http_timeout = START_TIMEOUT
    c.KubeSpawner.mem_limit = MEM_LIMIT
    c.KubeSpawner.mem_guarantee = K8S_MEM_GUARANTEE
    c.KubeSpawner.cpu_limit = CPU_LIMIT
    c.KubeSpawner.cpu_guarantee = K8S_CPU_GUARANTEE
    # jovyan:users, never root; no way up (no setuid gain, no capabilities), the runtime's seccomp filter.
    c.KubeSpawner.uid = 1000
    c.KubeSpawner.gid = 100
    c.KubeSpawner.fs_gid = 100
    c.KubeSpawner.privileged = False
    c.KubeSpawner.allow_privilege_escalation = False
    c.KubeSpawner.pod_security_context = {
        "runAsNonRoot": True,
        "runAsUser": 1000,
        "runAsGroup": 100,
        "fsGroup": 100,
        # Only when the volume's root does not already match: never a recursive chown of a big volume.
        "fsGroupChangePolicy": "OnRootMismatch",
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    c.KubeSpawner.container_security_context = {
        "runAsNonRoot": True,
        "allowPrivilegeEscalation": False,
        "privileged": False,
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    # No Kubernetes API credentials in a student's pod.
    c.KubeSpawner.service_account = None
    c.KubeSpawner.automount_service_account_token = False
    # The chart adds a root init container with NET_ADMIN to block the cloud metadata server; our
    # NetworkPolicy (deploy/kubernetes/course.yaml) lets students reach only the hub and proxy instead.
    c.KubeSpawner.init_containers = []
    c.KubeSpawner.extra_containers = []
    c.KubeSpawner.lifecycle_hooks = {}
    c.KubeSpawner.extra_labels = {
        # The chart's hub NetworkPolicy admits pods with this label (its own default for user pods).
        "hub.jupyter.org/network-access-hub": "true",
        # What the course's NetworkPolicy for user servers selects.
        "attention-course/pod": "user-server",
    }
    # One ReadWriteOnce home volume per student, created on first spawn and kept when the server stops.
    c.KubeSpawner.storage_pvc_ensure = True
    c.KubeSpawner.pvc_name_template = "claim-{user_server}"
    c.KubeSpawner.storage_capacity = K8S_HOME_SIZE
    c.KubeSpawner.storage_access_modes = ["ReadWriteOnce"]
    c.KubeSpawner.storage_class = K8S_HOME_CLASS or None
    c.KubeSpawner.volumes = {
        "home": {"name": "home", "persistentVolumeClaim": {"claimName": "{pvc_name}"}},
        "exchange": {"name": "exchange", "persistentVolumeClaim": {"claimName": K8S_EXCHANGE_PVC}},
    }
    # {unescaped_username} is the hub's user name, the folder name prepare_exchange creates and the grader's
    # collect maps to the student; KubeSpawner's {username} would be a slug of it.
    c.KubeSpawner.volume_mounts = {
        "home": {"name": "home", "mountPath": "/home/jovyan"},
        "outbound": {"name": "exchange", "mountPath": f"{K8S_POD_EXCHANGE}/{COURSE}/outbound",
                     "subPath": f"{COURSE}/outbound", "readOnly": True},
        "inbound": {"name": "exchange", "mountPath": f"{K8S_POD_EXCHANGE}/{COURSE}/inbound",
                    "subPath": f"{COURSE}/inbound/{{unescaped_username}}"},
        "feedback": {"name": "exchange", "mountPath": f"{K8S_POD_EXCHANGE}/{COURSE}/feedback",
                     "subPath": f"{COURSE}/feedback/{{unescaped_username}}", "readOnly": True},
    }

    def _k8s_pre_spawn_hook(spawner):
        name = spawner.user.name
        # The name becomes one path segment of a subPath: nothing that could leave the student's folder.
        if not name or name in (".", "..") or "/" in name or "\0" in name:
            raise ValueError(f"user name {name!r} cannot name an exchange folder")
        pre_spawn_hook(spawner)

    c.Spawner.pre_spawn_hook = _k8s_pre_spawn_hook
    c.KubeSpawner.pre_spawn_hook = _k8s_pre_spawn_hook
