"""The native launcher's supervision of its services (attention_platform/hub/supervisor.py), with real
processes and real cgroups: a service that dies is started again and the others are left alone; a
service that allocates past its cap is killed alone, inside its own cgroup. The whole launcher on a
live hub: tests/feedback_on_submit/test_grader_crash_hub.py."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from attention_platform.hub import supervisor
from attention_platform.hub.supervisor import ServiceCgroups, Supervised, Supervisor

SLEEPER = [sys.executable, "-c", "import time; time.sleep(120)"]


@pytest.fixture
def services():
    running: dict[str, subprocess.Popen] = {}
    yield running
    for process in running.values():
        if process.poll() is None:
            process.kill()
            process.wait()


def test_a_service_that_dies_is_started_again_the_others_are_left_alone(services):
    lines: list[str] = []
    starts = {"grader": 0, "formgrader": 0}

    def start(name):
        services[name] = subprocess.Popen(SLEEPER)
        starts[name] += 1
        return services[name]

    for name in starts:
        start(name)
    watched = Supervisor([Supervised(name, lambda name=name: services[name], lambda name=name: start(name),
                                     started_at=0.0) for name in starts], log=lines.append)
    formgrader = services["formgrader"].pid
    services["grader"].send_signal(signal.SIGKILL)
    services["grader"].wait()
    watched.poll(now=100.0)  # it ran 100 s: started again at once
    assert starts == {"grader": 2, "formgrader": 1} and services["grader"].poll() is None
    assert services["formgrader"].pid == formgrader
    assert "the grader exited with status -9" in lines[0] and lines[-1] == "the grader started again"
    # dying again within a minute of its start: a pause first, doubling while it keeps dying
    pauses = []
    for now in (110.0, 120.0, 130.0):
        services["grader"].kill()
        services["grader"].wait()
        watched.poll(now=now)
        assert starts["grader"] == 2 + len(pauses)  # not yet
        pauses.append(watched.services[0].pause)
        watched.poll(now=now + pauses[-1])
        assert starts["grader"] == 2 + len(pauses) and services["grader"].poll() is None
    assert pauses == [1.0, 2.0, 4.0] and starts["formgrader"] == 1


@pytest.mark.root
@pytest.mark.skipif(os.geteuid() != 0, reason="cgroups are the launcher's as root")
def test_a_service_past_its_memory_cap_is_killed_alone_in_its_own_cgroup(services):
    caps = ServiceCgroups(log=pytest.fail, environ={"HUB_VALIDATE_MEMORY_MB": "96"},
                          parent=f"attention-services-test-{os.getpid()}")
    try:
        hungry = subprocess.Popen([sys.executable, "-c",
                                   "import time; time.sleep(1); blocks = [bytearray(64 << 20) for _ in range(4)]"])
        services["validate"] = hungry
        caps.contain("validate", hungry)
        assert hungry.wait(60) == -signal.SIGKILL  # the kernel's OOM killer, inside its cgroup
        assert caps.groups.memory_exceeded("validate")
    finally:
        for folder in caps.folders("validate"):
            os.rmdir(folder)
        for base in caps.groups.bases.values():
            os.rmdir(os.path.join(base, caps.groups.parent))


@pytest.mark.parametrize("value, says", [("lots", "whole number"), ("10", "at least 64")])
def test_a_wrong_cap_says_what_to_write(value, says):
    with pytest.raises(ValueError, match=says) as raised:
        supervisor.memory_mb("feedback-on-submit", {"HUB_FEEDBACK_ON_SUBMIT_MEMORY_MB": value})
    assert "HUB_FEEDBACK_ON_SUBMIT_MEMORY_MB" in str(raised.value)
