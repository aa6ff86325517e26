"""One student's submission that attacks the feedback-on-submit grader, on the real hub (`make start`):
it costs that student only.

* a probe reply that names the same 4 MB for hundreds of tensors (once decoded as one copy each:
  the grader grew by a GB per reply, was killed for memory, and the launcher stopped the whole
  hub with it) fails its owner's checks; the grader, the hub, the other students' servers and
  the next student's feedback carry on;
* a grader killed while grading an attempt (as its memory cap would) is started again by the
  launcher; the attempt is graded again once, and failed with the reason when the grader dies
  again, never graded for ever; meanwhile another student's feedback and server carry on;
* each long-lived service the launcher starts runs in a memory cgroup of its own, capped.
"""

from __future__ import annotations

import json
import os
import re
import signal
import time
import urllib.request
from pathlib import Path

import pytest

from grader_tests.self_attention.answers import release_notebook
from attention_platform.hub import supervisor
from grader_tests.self_attention.answers import ASSIGNMENT, CORRECT, class_cell, with_methods
from hub_helpers import launch_hub

pytestmark = [
    pytest.mark.slow, pytest.mark.hub, pytest.mark.root,
    pytest.mark.skipif(os.geteuid() != 0, reason="the hub's real Unix users and the sandbox broker need root (CI is root)"),
]

POLICY = {ASSIGNMENT: {"feedback": "checks", "attempts": None, "counts": "last"}}
CELL = class_cell(release_notebook()).source
WAIT = 300  # s: how long a test waits on a 2-core machine shared with others (never asserted)
NOTEBOOK = f"{ASSIGNMENT}/{ASSIGNMENT}.ipynb"

# Student code in the notebook's first cell: every probe reply it sends becomes a 4 MB body whose
# header names those same bytes for 300 tensors.
REPLY_BOMB = """
import json, struct, sys
_wire = sys.modules.get("grader_tests.wire")
if _wire is not None:
    def _bomb(message, _n=4 << 20):
        meta = {"dtype": "float32", "shape": [_n // 4], "offset": 0, "nbytes": _n}
        head = json.dumps({"tensors": {f"t{i}": meta for i in range(300)}, "values": {}}).encode()
        return struct.pack(">Q", len(head)) + head + bytes(_n)
    _wire.encode = _bomb
"""


@pytest.fixture(scope="module")
def hub():
    env = {"ATTENTION_FEEDBACK_ON_SUBMIT": json.dumps(POLICY), "HUB_DEMO_STUDENTS": "4",
           "NBGRADER_CELL_TIMEOUT": "60"}
    with launch_hub("grader-crash-hub", env=env) as running:
        yield running


@pytest.fixture(scope="module")
def students(hub):
    return hub.students_with(ASSIGNMENT, 4)


def write_notebook(session, code: str, first_cell: str = "") -> None:
    """The core notebook with ``code`` as the answer and, if given, a code cell of ``first_cell`` first."""
    nb = session.contents(NOTEBOOK).json()["content"]
    for cell in nb["cells"]:
        if cell.get("metadata", {}).get("nbgrader", {}).get("grade_id") == "self_attention_class":
            cell["source"] = with_methods(CELL, code)
    if first_cell:
        nb["cells"].insert(1, {"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [],
                               "source": first_cell})
    session.save_notebook(NOTEBOOK, nb)


def submit(session) -> None:
    reply = session.assignment_action("submit", ASSIGNMENT)
    assert reply["success"], reply


def attempts(session) -> list[dict]:
    reply = session.get(f"/user/{session.username}/attention/feedback-on-submit")
    assert reply.status_code == 200, reply.text
    return (reply.json()["assignments"].get(ASSIGNMENT) or {"attempts": []})["attempts"]


def wait_for(what: str, found, seconds: float = WAIT):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = found()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"{what} did not happen within {seconds:.0f} s")


def nth_attempt_in(session, n: int, states: tuple[str, ...]):
    def found():
        mine = attempts(session)
        return mine[n - 1] if len(mine) >= n and mine[n - 1]["state"] in states else None
    return found


def core_checks(attempt: dict) -> list[bool]:
    """Pass or fail of each check of the notebook these tests answer (the assignment's others are left as released)."""
    return [check["passed"] for check in attempt["checks"] if check["notebook"] == ASSIGNMENT]


def services_log(hub) -> str:
    """jupyterhub.log: where the hub, its services and the launcher's supervision write."""
    return (hub.state / "jupyterhub.log").read_text(errors="replace")


def times_taken_up(hub, student: str) -> int:
    """How many times a grader has started grading one of ``student``'s attempts."""
    return len(re.findall(rf"\b{student}: attempt \d+ grading$", services_log(hub), flags=re.MULTILINE))


def hub_healthy(hub) -> bool:
    with urllib.request.urlopen(hub.url + "/hub/health", timeout=10) as response:
        return response.status == 200


def service_pid(hub, argument: str) -> int | None:
    """The pid of the launcher's child whose command line holds ``argument``."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            parent = next(line for line in (entry / "status").read_text().splitlines() if line.startswith("PPid:"))
            command = (entry / "cmdline").read_bytes().split(b"\0")
        except (OSError, StopIteration):
            continue
        if int(parent.split()[1]) == hub.process.pid and argument.encode() in command:
            return int(entry.name)
    return None


def grader_pid(hub) -> int | None:
    return service_pid(hub, "feedback-on-submit")


def cgroup_folder(pid: int) -> Path:
    memory = next(line.split(":", 2)[2] for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines()
                  if ":memory:" in line)
    return Path("/sys/fs/cgroup/memory") / memory.lstrip("/")


def descendants(pid: int) -> set[int]:
    children = {int(child) for task in Path(f"/proc/{pid}/task").iterdir()
                for child in (task / "children").read_text().split()}
    return children.union(*(descendants(child) for child in children)) if children else set()


def peak_resident_bytes(pid: int) -> int:
    line = next(line for line in Path(f"/proc/{pid}/status").read_text().splitlines() if line.startswith("VmHWM:"))
    return int(line.split()[1]) << 10


def test_every_service_runs_under_a_memory_cap_of_its_own(hub, students):
    for service, argument in (("feedback-on-submit", "feedback-on-submit"), ("validate", "validate-service"),
                              ("broker", "attention_platform.grading.sandbox.broker")):
        pid = service_pid(hub, argument)
        assert pid, f"no {service} process"
        memory = next(line.split(":", 2)[2] for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines()
                      if ":memory:" in line)
        assert memory.endswith(f"/{supervisor.services_parent(hub.state)}/{service}"), (service, memory)
        limit = int((Path("/sys/fs/cgroup/memory") / memory.lstrip("/") / "memory.limit_in_bytes").read_text())
        assert limit == supervisor.memory_mb(service) << 20, (service, limit)


def test_a_reply_naming_the_same_bytes_for_hundreds_of_tensors_fails_its_owners_checks_only(hub, students):
    bomber, honest, bystander = students["student1"], students["student2"], students["student4"]
    grader = grader_pid(hub)
    peak_before = peak_resident_bytes(grader)
    write_notebook(bomber, CORRECT[0].code, REPLY_BOMB)
    write_notebook(honest, CORRECT[0].code)
    submit(bomber)
    submit(honest)
    bombed = wait_for("student1's attempt graded", nth_attempt_in(bomber, 1, ("graded", "failed", "error")))
    done = wait_for("student2's attempt graded", nth_attempt_in(honest, 1, ("graded", "failed", "error")))
    assert bombed["state"] == "graded", bombed
    assert core_checks(bombed) and not any(core_checks(bombed)), bombed  # its replies could not be read
    assert done["state"] == "graded" and core_checks(done) and all(core_checks(done)), done
    assert grader_pid(hub) == grader  # the grader never died
    # and grew by what grading two attempts costs, not by a copy of 4 MB per tensor named (1.2 GB a reply)
    assert peak_resident_bytes(grader) - peak_before < 600 << 20
    assert hub.process.poll() is None and hub_healthy(hub)
    assert bystander.contents(NOTEBOOK).status_code == 200


def test_a_grader_killed_while_grading_is_started_again_and_the_attempt_fails_after_one_retry(hub, students):
    poison, other = students["student3"], students["student4"]
    write_notebook(poison, CORRECT[0].code, "import time\ntime.sleep(3600)")  # grading lasts until we kill it
    submit(poison)
    wait_for("student3's attempt in grading", nth_attempt_in(poison, 1, ("grading",)))
    for kill in range(2):  # the grader dies while grading it, twice (as at its memory cap)
        killed = grader_pid(hub)
        os.kill(killed, signal.SIGKILL)
        wait_for("the grader started again", lambda: grader_pid(hub) not in (None, killed))
        assert hub.process.poll() is None and hub_healthy(hub)
        if kill == 0:  # the new grader takes the attempt up again; its status said "grading" all along, so
            # only the log tells when it is being graded, and not merely queued, again
            wait_for("student3's attempt queued again", lambda: "queued again after a restart" in services_log(hub))
            wait_for("student3's attempt in grading again", lambda: times_taken_up(hub, "student3") == 2)
    failed = wait_for("student3's attempt failed", nth_attempt_in(poison, 1, ("failed", "graded", "error")))
    # what the killed graders started (their pages' workers) died with them: the grader's cgroup holds
    # the running grader's processes alone, which its cap is for
    grader = grader_pid(hub)
    in_cgroup = {int(pid) for pid in (cgroup_folder(grader) / "cgroup.procs").read_text().split()}
    assert in_cgroup <= {grader, *descendants(grader)}, (grader, in_cgroup)
    assert failed["state"] == "failed" and "stopped while grading this attempt, twice" in failed["message"], failed
    # and the class carries on: another student's server answers and their submission is graded
    assert other.contents(NOTEBOOK).status_code == 200
    write_notebook(other, CORRECT[0].code)
    submit(other)
    graded = wait_for("student4's attempt graded", nth_attempt_in(other, 1, ("graded", "failed", "error")))
    assert graded["state"] == "graded" and core_checks(graded) and all(core_checks(graded)), graded
    assert nth_attempt_in(poison, 1, ("failed",))()  # failed for good: not graded again
    assert "grader exited with status -9" in services_log(hub) and "grader started again" in services_log(hub)
