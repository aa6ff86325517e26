"""attention_platform/benchmarks/cpu.py: what a benchmark's round cost, from /proc, with real processes."""

import subprocess
import sys
import time

from attention_platform.benchmarks import cpu

BURN = "import time\nend = time.process_time() + {seconds}\nwhile time.process_time() < end: pass\n"
# A parent that starts a child burning CPU, reaps it, starts one more that burns and stays, then waits.
FAMILY = f"""
import subprocess, sys, time
subprocess.run([sys.executable, "-c", {BURN.format(seconds=0.6)!r}], check=True)
stays = subprocess.Popen([sys.executable, "-c", {BURN.format(seconds=0.4)!r} + "time.sleep(60)"])
print("ready", flush=True)
time.sleep(60)
"""


def test_a_tree_counts_its_reaped_and_its_living_descendants_and_the_machine_counts_them_all():
    machine_before = cpu.machine_seconds()
    parent = subprocess.Popen([sys.executable, "-c", FAMILY], stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout.readline().strip() == "ready"
        members = cpu.descendants(parent.pid)
        deadline = time.monotonic() + 30
        while cpu.tree_seconds(parent.pid) < 1.0 and time.monotonic() < deadline:  # the second child burns on
            time.sleep(0.1)
        spent = cpu.tree_seconds(parent.pid)
        assert len(members) == 2 and parent.pid in members  # the parent and the child that stays
        assert 1.0 <= spent < 1.0 + 1.5  # 0.6 reaped + 0.4 living, plus two interpreters' start-ups
        assert cpu.process_seconds(parent.pid) >= 0.6  # the reaped child is inside its parent's figure
        assert cpu.machine_seconds() - machine_before >= 1.0
    finally:
        parent.kill()
        parent.wait()
    assert cpu.process_seconds(parent.pid) == 0.0 and cpu.tree_seconds(parent.pid) == 0.0


def test_a_process_that_ends_between_two_readings_is_counted_once():
    parent = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.readline(); import subprocess; "
                               f"subprocess.run([sys.executable, '-c', {BURN.format(seconds=0.5)!r}]); "
                               "sys.stdin.readline()"], stdin=subprocess.PIPE, text=True)
    try:
        time.sleep(0.3)
        before = cpu.tree_seconds(parent.pid)
        parent.stdin.write("\n")
        parent.stdin.flush()
        deadline = time.monotonic() + 30
        while cpu.process_seconds(parent.pid) - before < 0.5 and time.monotonic() < deadline:  # reaped: inside
            time.sleep(0.1)
        assert 0.5 <= cpu.tree_seconds(parent.pid) - before < 0.5 + 1.0
    finally:
        parent.kill()
        parent.wait()


# A parent with two children that burn CPU and stay: one whose command line holds MARKER and that
# starts a grandchild burning too, and one without it.
MARKER = "students-server-like"
MARKED_FAMILY = f"""
import subprocess, sys, time
grandchild = {BURN.format(seconds=0.3) + "time.sleep(60)"!r}
marked = subprocess.Popen([sys.executable, "-c", "import subprocess, sys, time\\n"
                           "subprocess.Popen([sys.executable, '-c', " + repr(grandchild) + "])\\n"
                           + {BURN.format(seconds=0.5)!r} + "time.sleep(60)", {MARKER!r}])
other = subprocess.Popen([sys.executable, "-c", {BURN.format(seconds=0.4)!r} + "time.sleep(60)"])
print("ready", flush=True)
time.sleep(60)
"""


def test_marked_processes_are_counted_with_what_they_started_and_no_other():
    parent = subprocess.Popen([sys.executable, "-c", MARKED_FAMILY], stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout.readline().strip() == "ready"
        deadline, last = time.monotonic() + 30, -1.0
        while ((now := cpu.tree_seconds(parent.pid)) < 1.2 or now != last) and time.monotonic() < deadline:
            # until all three burnt theirs (0.5 + 0.3 + 0.4) and sleep
            last = now
            time.sleep(0.5)
        marked = cpu.marked_seconds(parent.pid, MARKER)
        assert 0.8 <= marked < 0.8 + 1.0  # the marked child and its grandchild, not the other child's 0.4
        assert cpu.tree_seconds(parent.pid) - marked >= 0.4
        assert cpu.own_seconds(parent.pid) < 0.4  # the parent's own, none of its children's
        assert cpu.marked_seconds(parent.pid, "no process has this in its command line") == 0.0
        assert any(MARKER in cpu.command_line(member) for member in cpu.descendants(parent.pid))
    finally:
        for member in cpu.descendants(parent.pid):
            subprocess.run(["kill", "-9", str(member)], check=False)
        parent.wait()
    assert cpu.command_line(parent.pid) == "" and cpu.own_seconds(parent.pid) == 0.0
