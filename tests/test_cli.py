"""attention_platform/cli.py and the packages' commands.py: one registration style, import-light."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from attention_platform.cli import COMMAND_GROUPS, main, parser
from attention_platform.course.directory import copy_course, write_submission
from attention_platform.course.notebooks import COURSE_ROOT
from attention_platform.venv import program
from grader_tests import registry
from grader_tests.self_attention.answers import ASSIGNMENT, NOTEBOOK

EXPECTED_COMMANDS = {"demo", "hub", "load-test", "autograde-batch", "bench-autograde", "report", "similarity", "feedback",
                     "export-checks", "export-canvas", "feedback-on-submit", "attempts", "bench-feedback-on-submit",
                     "validate-service", "bench-submission", "new-assignment", "prove-checks",
                     "bench-start-up-tricks", "variants", "lms-sync"}


def _subcommands():
    (action,) = [a for a in parser()._actions if a.dest == "command"]
    return action.choices


def test_every_command_is_registered_once_with_its_own_run_function():
    commands = _subcommands()
    assert set(commands) == EXPECTED_COMMANDS
    runs = {name: sub.get_default("run") for name, sub in commands.items()}
    assert all(callable(run) for run in runs.values()), runs
    # each command's function lives in the commands module that registered it (no central dispatch)
    homes = {run.__module__ for run in runs.values()}
    assert homes == {group.__name__ for group in COMMAND_GROUPS}, homes


def test_the_command_line_loads_nothing_heavy_until_a_command_runs():
    probe = ("import sys, attention_platform.cli as c; c.parser(); "
             "print(','.join(m for m in ('torch', 'nbgrader', 'jupyterhub', 'matplotlib', 'tqdm') if m in sys.modules))")
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout.strip()
    assert loaded == ""


# A script around the real entry point: output written before the command (buffered, as a pipe is)
# and an atexit handler.
ENTRY_POINT_PROBE = """
import atexit, sys
from pathlib import Path
sys.stdout.write("x" * 200_000)
atexit.register(Path(sys.argv[1]).write_text, "ran")
from attention_platform.cli import run
sys.argv = ["attention-course", "report", "self_attention", "--course", sys.argv[2]]
run()
"""


def test_the_script_keeps_its_status_output_and_exit_handlers(tmp_path):
    marker = tmp_path / "atexit-ran"
    done = subprocess.run([sys.executable, "-c", ENTRY_POINT_PROBE, str(marker), str(tmp_path / "no-course")],
                          capture_output=True, text=True, timeout=60, cwd=tmp_path)  # writes nothing elsewhere
    assert done.returncode == 1  # report's own status for a folder that is not a course
    assert done.stdout == "x" * 200_000
    assert "attention-course report: " in done.stderr
    assert marker.read_text() == "ran"


def test_feedback_without_autograded_work_says_what_to_do_first(tmp_path, capsys):
    assert main(["feedback", "self_attention", "--course", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "no autograded submission of self_attention" in err and "run nbgrader autograde first" in err


def test_a_report_error_is_one_line_and_status_1(tmp_path, capsys):
    assert main(["report", "self_attention", "--course", str(tmp_path)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err and err[-1].startswith("attention-course report: ")


@pytest.mark.parametrize("case, where", [
    ("a path that does not exist", "missing"),
    ("a folder that is not a course (say, the home folder)", "folder"),
])
def test_attempts_outside_a_course_says_so_in_one_line_and_writes_nothing(tmp_path, capsys, case, where):
    folder = tmp_path / "folder"
    folder.mkdir()
    course = tmp_path / where
    assert main(["attempts", "--course", str(course)]) == 1, case
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.strip() == (
        f"attention-course attempts: no nbgrader course at {course} (it has no nbgrader_config.py): "
        "pass the course directory with --course"), case
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["folder"], case  # no gradebook.db made


def test_feedback_on_submit_outside_a_course_says_so_in_one_line(tmp_path, capsys):
    assert main(["feedback-on-submit", "--course", str(tmp_path / "missing"), "--exchange", str(tmp_path)]) == 1
    assert capsys.readouterr().err.strip() == (
        f"attention-course feedback-on-submit: no nbgrader course at {tmp_path / 'missing'} "
        "(it has no nbgrader_config.py): pass the course directory with --course")


def test_attempts_before_anything_was_submitted_is_an_empty_table_and_creates_no_gradebook(tmp_path, capsys):
    from attention_platform.attempts.ledger import EXPORT_COLUMNS

    course = copy_course(tmp_path / "course")
    assert main(["attempts", "--course", str(course)]) == 0
    assert capsys.readouterr().out.splitlines() == [",".join(EXPORT_COLUMNS)]
    assert not (course / "gradebook.db").exists()  # nbgrader creates it, with its own tables, on release


@pytest.mark.parametrize("argv", [["no-such-command"], []])
def test_unknown_or_missing_command_is_a_usage_error(argv):
    with pytest.raises(SystemExit) as stop:
        main(argv)
    assert stop.value.code == 2


# Each command that takes an assignment, and the option naming the folder it would write to.
ASSIGNMENT_ARGUMENTS = [(["autograde-batch"], "--course"), (["report"], "--course"), (["feedback"], "--course"),
                        (["demo", "--assignment"], "--workdir"), (["bench-autograde", "--assignment"], "--workdir"),
                        (["bench-submission", "--assignment"], "--workdir"),
                        (["load-test", "--assignment"], "--state-dir"),
                        (["bench-feedback-on-submit", "--assignment"], "--state-dir")]


@pytest.mark.parametrize("command, folder", ASSIGNMENT_ARGUMENTS, ids=[c[0][0] for c in ASSIGNMENT_ARGUMENTS])
def test_an_assignment_the_course_lacks_is_a_usage_error_naming_the_ones_it_has(command, folder, tmp_path, capsys):
    """Refused before anything is read or written: the registry's message, status 2."""
    with pytest.raises(SystemExit) as stop:
        main([*command, "week_two", folder, str(tmp_path / "here")])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert "'week_two'" in err and all(name in err for name in registry.ASSIGNMENTS), err
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("command", [["autograde-batch"], ["report"], ["feedback"]], ids=lambda command: command[0])
def test_a_command_a_ta_grades_with_needs_the_assignment_named(command, capsys):
    with pytest.raises(SystemExit) as stop:
        main(command)
    assert stop.value.code == 2
    assert "required: assignment" in capsys.readouterr().err


@pytest.mark.parametrize("command", [c for c, _ in ASSIGNMENT_ARGUMENTS if len(c) == 2 and c[0] != "demo"],
                         ids=lambda c: c[0])
def test_a_benchmark_and_the_load_test_take_any_assignment_and_default_to_none_named(command):
    """``--assignment`` accepts every assignment; left out, the command's run takes the first."""
    for name in registry.ASSIGNMENTS:
        assert parser().parse_args([*command, name]).assignment == name
    assert parser().parse_args(command[:1]).assignment is None


def test_the_demo_grades_every_assignment_or_those_named():
    assert parser().parse_args(["demo"]).assignment is None  # run_demo: every assignment
    names = sorted(registry.ASSIGNMENTS)
    assert parser().parse_args(["demo", *(x for name in names for x in ("--assignment", name))]).assignment == names


def _batch(course, *args: str, cwd) -> subprocess.CompletedProcess:
    """``autograde-batch`` as a TA runs it from the venv without activating it (PATH without .venv/bin)."""
    if os.geteuid() != 0:
        pytest.skip("the batch's own sandbox zygote needs root (CI is root)")
    return subprocess.run([program("attention-course"), "autograde-batch", "--course", str(course), *args,
                           "--no-progress"], capture_output=True, text=True, timeout=300,
                          env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}, cwd=cwd)


def _submit(course, student: str) -> None:
    write_submission(course, student, nbformat.read(COURSE_ROOT / "release" / ASSIGNMENT / NOTEBOOK, as_version=4),
                     assignment=ASSIGNMENT, name=NOTEBOOK)


@pytest.mark.root
def test_batch_grading_a_course_not_yet_released_says_what_to_do_first(tmp_path):
    """A fresh clone has no gradebook (it is never committed): one line that says to release the
    assignment — not a traceback about a program (nbgrader's `alembic`) the shell's PATH lacks, nor one
    about a missing database entry."""
    course = copy_course(tmp_path / "course")
    assert not (course / "gradebook.db").exists()
    _submit(course, "ada")
    done = _batch(course, ASSIGNMENT, cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    assert f"has no assignment '{ASSIGNMENT}'" in done.stderr and f"nbgrader generate_assignment {ASSIGNMENT}" in done.stderr


@pytest.fixture(scope="module")
def released(tmp_path_factory, released_course):
    """A course whose assignment is released (in the gradebook) and not yet collected."""
    return released_course(tmp_path_factory.mktemp("released") / "course", ASSIGNMENT)


@pytest.mark.parametrize("case, args, said", [
    ("nothing collected yet", [ASSIGNMENT], [f"no submission of '{ASSIGNMENT}'", f"nbgrader collect {ASSIGNMENT}"]),
    ("a student with no submission", [ASSIGNMENT, "--student", "nobody"], [f"no submission of '{ASSIGNMENT}' by nobody"]),
    ("not a course", [ASSIGNMENT, "--course", "/nonexistent"], ["no nbgrader course at /nonexistent"]),
])
@pytest.mark.root
def test_batch_grading_nothing_says_why_in_one_line(released, tmp_path, case, args, said):
    done = _batch(released, *args, cwd=tmp_path)  # "not a course": its --course comes later, and wins
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert all(part in done.stderr for part in said), done.stderr


@pytest.mark.parametrize("case, course, said", [
    ("a mistyped --course: named as such, before anything else", "/nonexistent", "no nbgrader course at /nonexistent"),
    ("a course, but no broker socket in this shell", "COURSE", "grading needs the sandbox broker"),
])
@pytest.mark.root
def test_batch_grading_as_a_ta_account_without_the_broker_says_why_in_one_line(case, course, said):
    """Not root and ATTENTION_SANDBOX_SOCKET unset (a TA's own shell): one line and status 1, not a traceback."""
    if os.geteuid() != 0:
        pytest.skip("creates an account to run the command as")
    import tempfile

    from broker_helpers import ensure_user

    ta = ensure_user("attention-cli-ta")
    readable = Path(tempfile.mkdtemp(prefix="cli-ta-", dir="/tmp"))  # pytest's tmp_path is root's alone
    try:
        readable.chmod(0o755)
        where = course
        if course == "COURSE":
            where = str(copy_course(readable / "course"))
            subprocess.run(["chmod", "-R", "a+rX", where], check=True)  # a checkout's source/ may be hidden
        done = subprocess.run([program("attention-course"), "autograde-batch", ASSIGNMENT, "--course", where,
                               "--no-progress"], capture_output=True, text=True, timeout=300, cwd="/",
                              user=ta.pw_uid, group=ta.pw_gid, extra_groups=[],
                              env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"})
    finally:
        shutil.rmtree(readable)
    assert done.returncode == 1, case
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert done.stderr.startswith(f"attention-course autograde-batch: {said}"), done.stderr


@pytest.mark.parametrize("command", [
    ["autograde-batch", ASSIGNMENT, "--no-progress"], ["report", ASSIGNMENT], ["feedback", ASSIGNMENT],
    ["export-checks", ASSIGNMENT], ["export-canvas", ASSIGNMENT], ["attempts"],
])
@pytest.mark.root
def test_a_course_this_account_may_not_read_is_said_in_one_line(command):
    """A TA's own account where the course (or its hidden checks) is the grader account's alone: the
    file refused and whose account to use, in one line and status 1, not a traceback."""
    if os.geteuid() != 0:
        pytest.skip("creates an account to run the command as")
    import tempfile

    from broker_helpers import ensure_user

    ta = ensure_user("attention-cli-ta")
    folder = Path(tempfile.mkdtemp(prefix="cli-ta-", dir="/tmp"))
    try:
        folder.chmod(0o755)
        course = copy_course(folder / "course")
        course.chmod(0o700)  # root's alone
        done = subprocess.run([program("attention-course"), *command, "--course", str(course)], capture_output=True,
                              text=True, timeout=300, cwd="/", user=ta.pw_uid, group=ta.pw_gid, extra_groups=[],
                              env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"})
    finally:
        shutil.rmtree(folder)
    assert done.returncode == 1
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert done.stderr.startswith(f"attention-course {command[0]}: permission denied: /"), done.stderr
    assert ". This account may not use that file: run the command as the course's grader account" in done.stderr


@pytest.mark.root
def test_a_named_student_without_a_submission_gets_a_row_that_says_so(released, tmp_path):
    """The others are graded; the status is 1 because not everything asked for was done."""
    course = tmp_path / "course"
    shutil.copytree(released, course)
    _submit(course, "ada")
    done = _batch(course, ASSIGNMENT, "--student", "ada", "--student", "nobody", cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    rows = {line.split()[0]: line for line in done.stdout.splitlines() if line.split()[:1] in (["ada"], ["nobody"])}
    assert "error: no submission" in rows["nobody"] and "no submission" not in rows["ada"], done.stdout
    assert (course / "autograded" / "ada" / ASSIGNMENT / NOTEBOOK).is_file()
