"""attention_platform/settings.py (every deployment setting, typed, read once), attention_platform/venv.py,
attention_platform/console.py and the demo class of attention_platform/hub/native.py."""

import io
import re
from pathlib import Path

import pytest

from attention_platform import settings as platform_settings
from attention_platform.console import track
from attention_platform.settings import Settings, course_id
from attention_platform.hub.native import DemoClass, grader_account, instructors_group
from attention_platform.venv import environment, program

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("environ, expected", [
    ({}, "dl-attention"),
    ({"NBGRADER_COURSE_ID": ""}, "dl-attention"),
    ({"NBGRADER_COURSE_ID": "ml-2027"}, "ml-2027"),
])
def test_course_id(environ, expected):
    assert Settings.from_environ(environ).nbgrader_course_id == expected


def test_course_id_follows_the_environment_after_import(monkeypatch):
    monkeypatch.setenv("NBGRADER_COURSE_ID", "renamed-course")
    assert course_id() == "renamed-course"
    assert grader_account(course_id()) == "renamed-course-grader"
    assert instructors_group(course_id()) == "renamed-course-instructors"


@pytest.mark.parametrize("config", ["nbgrader_config.py", "jupyter_config/grader/nbgrader_config.py",
                                    "jupyter_config/student/nbgrader_config.py", "jupyter_config/jupyterhub_config.py",
                                    "jupyter_config/grader/jupyter_server_config.py", "jupyter_config/student/jupyter_server_config.py"])
def test_the_jupyter_configs_read_the_environment_through_the_settings_only(config):
    text = (REPO / config).read_text()
    assert "settings_or_exit(" in text
    # what a deployment sets is never read beside the module (a child's or Kubernetes' variables may be)
    read = set(re.findall(r'os\.environ(?:\.get\(|\[)"(\w+)"', text))
    assert not read & platform_settings.variables(), read


def test_the_student_image_carries_the_settings_module():
    dockerfile = (REPO / "docker" / "student.Dockerfile").read_text()
    assert re.search(r"^COPY .*attention_platform/settings\.py .*/attention_platform/$", dockerfile, re.M)


@pytest.mark.parametrize("environ, instructors, tas, students", [
    ({}, ("instructor",), ("ta",), ("student1", "student2", "student3")),
    ({"HUB_DEMO_STUDENTS": "1"}, ("instructor",), ("ta",), ("student1",)),
    ({"HUB_DEMO_PREFIX": "load-", "HUB_DEMO_STUDENTS": "2"}, ("load-instructor",), ("load-ta",),
     ("load-student1", "load-student2")),
])
def test_demo_class_from_the_environment(environ, instructors, tas, students):
    demo = DemoClass.from_environment(environ)
    assert (demo.instructors, demo.tas, demo.students) == (instructors, tas, students)
    assert demo.accounts == instructors + tas + students
    assert [demo.role(n) for n in (instructors[0], tas[0], students[-1])] == [
        "instructor (hub admin)", "teaching assistant", "student"]


def test_venv_programs_and_path():
    nbgrader = Path(program("nbgrader"))
    assert nbgrader.is_file() and nbgrader.parent == Path(program("python")).parent
    env = environment({"PATH": "/usr/bin", "KEEP": "1"}, EXTRA="2")
    assert env["PATH"].split(":")[:2] == [str(nbgrader.parent), "/usr/bin"]
    assert (env["KEEP"], env["EXTRA"]) == ("1", "2")


def test_progress_bar_yields_every_item_and_reports_the_total():
    stream = io.StringIO()
    assert list(track(iter("abcd"), 4, "reading", stream=stream)) == list("abcd")
    assert "reading" in stream.getvalue() and "4/4" in stream.getvalue()


@pytest.mark.parametrize("config", ["jupyter_config/grader/nbgrader_config.py", "jupyter_config/student/nbgrader_config.py"])
def test_every_exchange_class_the_hub_configs_name_exists(config):
    """nbgrader's ExchangeFactory takes import strings (its documented idiom); a typo would only
    fail when a student first fetches or a TA collects, so resolve each one here."""
    import importlib

    from nbgrader.exchange import abc as exchange_abc

    named = re.findall(r'^c\.ExchangeFactory\.(\w+) = "([\w.]+)"', (REPO / config).read_text(), re.MULTILINE)
    assert named
    for action, dotted in named:
        module, _, name = dotted.rpartition(".")
        cls = getattr(importlib.import_module(module), name)
        base = {"release_assignment": exchange_abc.ExchangeReleaseAssignment, "collect": exchange_abc.ExchangeCollect,
                "release_feedback": exchange_abc.ExchangeReleaseFeedback, "list": exchange_abc.ExchangeList,
                "submit": exchange_abc.ExchangeSubmit, "fetch_assignment": exchange_abc.ExchangeFetchAssignment,
                "fetch_feedback": exchange_abc.ExchangeFetchFeedback}[action]
        assert issubclass(cls, base), (action, dotted)


# ---------------------------------------------------------------- attention_platform/settings.py
import os  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402

from attention_platform.settings import SettingsError  # noqa: E402

PARSED = [  # (environment, field, value)
    ({}, "hub_uid_min", 20000),
    ({"HUB_UID_MIN": " 30000 "}, "hub_uid_min", 30000),
    ({"HUB_UID_MIN": ""}, "hub_uid_min", 20000),  # empty is unset
    ({"NBGRADER_COURSE_ID": "ml-2027"}, "nbgrader_course_id", "ml-2027"),
    ({"FORMGRADER_API_TOKEN": "s3cret"}, "formgrader_api_token", "s3cret"),
    ({"NBGRADER_EXCHANGE_ROOT": "/x/exchange"}, "nbgrader_exchange_root", Path("/x/exchange")),
    ({"FORMGRADER_PORT": "9000"}, "formgrader_port", 9000),
    ({"STUDENT_CPU_LIMIT": "0.5"}, "student_cpu_limit", 0.5),
    ({"NBGRADER_CHECK_OWNER": "0"}, "nbgrader_check_owner", False),
    ({"LTI_ALLOW_UNMAPPED_ROLES": "Yes"}, "lti_allow_unmapped_roles", True),
    ({"HUB_MODE": "kubernetes"}, "hub_mode", "kubernetes"),
    ({"COURSE_TAS": " ta1, ,ta2 "}, "course_tas", ("ta1", "ta2")),
    ({"COURSE_TAS": ""}, "course_tas", ()),  # a list set empty is the empty list
    ({"ATTENTION_FEEDBACK_ON_SUBMIT": '{"a": {"feedback": "checks"}}'}, "attention_feedback_on_submit",
     {"a": {"feedback": "checks"}}),
    ({"HUB_BROKER_MEMORY_MB": "2048"}, "hub_broker_memory_mb", 2048),
    ({"HUB_DEMO_STUDENTS": "1"}, "hub_demo_students", 1),
]


@pytest.mark.parametrize("environ, name, expected", PARSED)
def test_each_kind_of_setting_parses(environ, name, expected):
    assert getattr(Settings.from_environ(environ), name) == expected


def test_the_table_above_covers_every_kind():
    kinds = {setting.name: setting.metadata["kind"].name for setting in platform_settings.fields()}
    covered = {kinds[name] for _, name, _ in PARSED}
    assert covered == set(kinds.values())


WRONG = [  # (variable, value, what the error says)
    ("HUB_UID_MIN", "abc", "HUB_UID_MIN='abc': expected a whole number, e.g. 20000"),
    ("FORMGRADER_PORT", "70000", "FORMGRADER_PORT='70000': expected a port number from 1 to 65535"),
    ("HUB_MODE", "Docker", "HUB_MODE='Docker': expected one of native, docker, kubernetes"),
    ("NBGRADER_CHECK_OWNER", "maybe", "NBGRADER_CHECK_OWNER='maybe': expected 1 or 0"),
    ("STUDENT_CPU_LIMIT", "one", "STUDENT_CPU_LIMIT='one': expected a number, e.g. 1.5"),
    ("ATTENTION_FEEDBACK_ON_SUBMIT", "{not json", "ATTENTION_FEEDBACK_ON_SUBMIT='{not json': expected a JSON object"),
    ("ATTENTION_FEEDBACK_ON_SUBMIT", "[]", "ATTENTION_FEEDBACK_ON_SUBMIT='[]': expected a JSON object"),
    ("HUB_VALIDATE_MEMORY_MB", "10", "HUB_VALIDATE_MEMORY_MB='10': expected a whole number of at least 64"),
    ("HUB_DEMO_STUDENTS", "0", "HUB_DEMO_STUDENTS='0': expected a whole number of at least 1"),
]


@pytest.mark.parametrize("name, value, says", WRONG)
def test_a_wrong_value_names_the_variable_and_what_it_must_be(name, value, says):
    with pytest.raises(SettingsError) as caught:
        Settings.from_environ({name: value})
    assert caught.value.problems == [says] or caught.value.problems[0].startswith(says)
    assert isinstance(caught.value, ValueError) and says in str(caught.value)


def test_every_wrong_variable_is_named_at_once():
    environ = {name: value for name, value, _ in WRONG[:5]} | {"HUB_UID_MNI": "20000"}
    with pytest.raises(SettingsError) as caught:
        Settings.from_environ(environ)
    assert len(caught.value.problems) == 6
    for name, _, says in WRONG[:5]:
        assert says in str(caught.value), name
    assert "HUB_UID_MNI is no setting: did you mean HUB_UID_MIN?" in str(caught.value)


@pytest.mark.parametrize("typo, meant", [
    ("HUB_UID_MNI", "HUB_UID_MIN"),
    ("ATTENTION_SECRET_SEEED", "ATTENTION_SECRET_SEED"),
    ("FORMGRADER_API_TOKN", "FORMGRADER_API_TOKEN"),
    ("HUB_ADMIN_USER", "HUB_ADMIN_USERS"),
    ("HUB_LOGIN_MAX_FAILURE", "HUB_LOGIN_MAX_FAILURES"),
])
def test_a_typo_of_a_known_variable_is_pointed_at(typo, meant):
    with pytest.raises(SettingsError, match=f"{typo} is no setting: did you mean {meant}\\?"):
        Settings.from_environ({typo: "1"})


@pytest.mark.parametrize("name", [
    "HUB_SERVICE_HOST", "HUB_SERVICE_PORT", "HUB_PORT", "HUB_PORT_8081_TCP_ADDR",  # Kubernetes' service links
    "ATTENTION_COURSE_ROLE", "ATTENTION_VALIDATE_SOCKET",  # the hub's, for each user's server
    "JUPYTERHUB_USER", "PATH", "HUB_SOMETHING_ELSE_ENTIRELY", "COURSE_INSTRUCTORZ",
])
def test_what_is_no_typo_of_ours_is_left_alone(name):
    assert Settings.from_environ({name: "x"}) == Settings()


def test_settings_are_parsed_once_and_again_only_when_the_environment_changes(monkeypatch):
    monkeypatch.setenv("NBGRADER_COURSE_ID", "first-course")
    first = platform_settings.settings()
    assert platform_settings.settings() is first and platform_settings.course_id() == "first-course"
    monkeypatch.setenv("NBGRADER_COURSE_ID", "second-course")
    assert platform_settings.course_id() == "second-course"


def test_the_reference_page_lists_every_setting_as_the_module_says():
    page = (REPO / "docs" / "reference" / "settings.md").read_text()
    table = platform_settings.markdown_table()
    assert table in page, "docs/reference/settings.md: paste the output of python -m attention_platform.settings"
    for name in platform_settings.variables():
        assert f"`{name}`" in table


def _run_with(environ, *command, cwd=None):
    env = {k: v for k, v in os.environ.items() if k not in platform_settings.variables()} | environ
    return subprocess.run([sys.executable, *command], env=env, capture_output=True, text=True, timeout=120, cwd=cwd)


def _docker_guard_image(folder: Path) -> list[str]:
    """The docker guard's image, as far as its files go: what its Dockerfile copies, where (in ``folder``);
    its command, run without site-packages, so it finds only what the image holds."""
    dockerfile = (REPO / "docker" / "docker-guard.Dockerfile").read_text()
    for sources, target in re.findall(r"^COPY (.+) (/opt/docker-guard/\S*)$", dockerfile, re.M):
        target = folder / target.removeprefix("/opt/docker-guard/")
        for source in sources.split():
            into = target / Path(source).name if str(target).endswith("/") or target.is_dir() or len(sources.split()) > 1 else target
            into.parent.mkdir(parents=True, exist_ok=True)
            into.write_bytes((REPO / source).read_bytes())
    (script,) = re.findall(r'^CMD \["python", "/opt/docker-guard/(\S+)"\]$', dockerfile, re.M)
    return ["-S", str(folder / script)]


PROCESSES = {  # a process started by the platform or a deployment: how it is started
    "formgrader service": lambda tmp_path: ["-m", "attention_platform.formgrader.formgrader_service"],
    "attention-course": lambda tmp_path: ["-m", "attention_platform.cli", "report", "self_attention"],
    "sandbox broker": lambda tmp_path: ["-m", "attention_platform.grading.sandbox.broker", "--socket", "s",
                                        "--allow-uid", "1"],
    "docker guard (its image)": _docker_guard_image,
    "the hub": lambda tmp_path: ["-m", "jupyterhub", "-f", str(REPO / "jupyter_config" / "jupyterhub_config.py")],
}


@pytest.mark.parametrize("process", PROCESSES)
def test_a_process_started_with_wrong_settings_stops_at_once_naming_them(process, tmp_path):
    command = PROCESSES[process](tmp_path)
    done = _run_with({"HUB_UID_MIN": "abc", "FORMGRADER_PORT": "http", "FORMGRADER_API_TOKEN": "t",
                      "EXCHANGE_HOST_DIR": "/x"}, *command, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert "HUB_UID_MIN='abc': expected a whole number" in done.stderr
    assert "FORMGRADER_PORT='http': expected a port number" in done.stderr
    assert "Traceback" not in done.stderr


def _environment_reads(path: Path) -> set[str]:
    """The variables ``path`` reads from an environment by name (a literal or a module constant),
    not those it sets for a child."""
    text = path.read_text()
    constants = dict(re.findall(r'^(\w+) = "([A-Z][A-Z0-9_]+)"', text, re.M))
    read = set()
    for key, assigned in re.findall(r'(?:environ|getenv)\s*(?:\.get\(|\[|\()\s*(["\']?[\w]+["\']?)(\]\s*=(?!=))?', text):
        if not assigned:
            read.add(key.strip("\"'") if key[0] in "\"'" else constants.get(key, ""))
    return read - {""}


def test_no_module_reads_a_deployment_setting_beside_the_settings_module():
    sources = [p for p in (REPO / "attention_platform").rglob("*.py") if p.name != "settings.py"]
    sources += [REPO / "nbgrader_config.py", *(REPO / "jupyter_config").rglob("*.py")]
    read = {str(p.relative_to(REPO)): _environment_reads(p) & platform_settings.variables() for p in sources}
    assert {path: names for path, names in read.items() if names} == {}


def test_the_scan_above_finds_what_it_is_for(tmp_path):
    module = tmp_path / "m.py"
    module.write_text('SOCKET = "ATTENTION_SANDBOX_SOCKET"\nimport os\na = os.environ.get(SOCKET)\n'
                      'b = int(os.environ["HUB_UID_MIN"])\nos.environ["NBGRADER_COURSE_ID"] = "set for a child"\n'
                      "c = os.getenv('HUB_MODE', 'native')\n")
    assert _environment_reads(module) == {"ATTENTION_SANDBOX_SOCKET", "HUB_UID_MIN", "HUB_MODE"}


LOAD_WITHOUT_GRADER_TESTS = """
import sys
sys.modules["grader_tests"] = None  # as for an account that may not read the checkout's grader_tests/
from traitlets.config.loader import PyFileConfigLoader
print(sorted(PyFileConfigLoader("nbgrader_config.py", path=".").load_config()))
from attention_platform.course import variants
print("variants on:", variants.is_on(".", "self_attention"))  # the release asks, for every assignment
"""


def test_the_course_config_loads_for_an_account_that_cannot_read_the_hidden_checks():
    """nbgrader_config.py, and the release's question whether an assignment has variants, run in every
    nbgrader command, also for an exchange-only grader account that may not read grader_tests/ (a hub
    hides it from every other account): with variants off neither may import the hidden checks, or
    collect and release stop ("No course id specified", a PermissionError)."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", LOAD_WITHOUT_GRADER_TESTS], cwd=REPO, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "CourseDirectory" in done.stdout and "variants on: False" in done.stdout
