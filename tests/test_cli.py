"""attention_platform/cli.py and the packages' commands.py: one registration style, import-light."""

import subprocess
import sys

import pytest

from attention_platform.cli import COMMAND_GROUPS, main, parser

EXPECTED_COMMANDS = {"demo", "hub", "load-test", "autograde-batch", "bench-autograde", "report", "feedback",
                     "export-checks", "export-canvas", "feedback-on-submit", "attempts", "bench-feedback-on-submit",
                     "validate-service", "bench-submission"}


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


def test_feedback_without_autograded_work_says_what_to_do_first(tmp_path, capsys):
    assert main(["feedback", "self_attention", "--course", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "no autograded submission of self_attention" in err and "run nbgrader autograde first" in err


def test_a_report_error_is_one_line_and_status_1(tmp_path, capsys):
    assert main(["report", "self_attention", "--course", str(tmp_path)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err and err[-1].startswith("attention-course report: ")


@pytest.mark.parametrize("argv", [["no-such-command"], []])
def test_unknown_or_missing_command_is_a_usage_error(argv):
    with pytest.raises(SystemExit) as stop:
        main(argv)
    assert stop.value.code == 2
