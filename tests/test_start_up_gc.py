"""The collector paused for a grading process's start-up, start-up's objects frozen afterwards
(attention_platform/start_up_gc.py). Each case runs in a fresh interpreter: what is frozen stays
frozen for the process's life. Each caller is tested beside it: the batch command
(tests/grading/test_batch.py), the sandbox worker (tests/grading/test_first_use.py), the feedback
grader (tests/feedback_on_submit/), students' servers natively (tests/hub/test_hub_api.py) and in
the student image (tests/deploy/test_compose_roundtrip.py)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

START_UP = """
import gc, json
from attention_platform import start_up_gc
collections = []
gc.callbacks.append(lambda phase, info: phase == "start" and collections.append(info["generation"]))
{before}
frozen_at_start = gc.get_freeze_count()
start_up_gc.pause()
during = gc.isenabled()
start_up = [[i] for i in range(50_000)]
for item in start_up:
    item.append(item)  # cyclic, as modules, classes and functions are
collected_during = len(collections)
said = start_up_gc.resume()
frozen = gc.get_freeze_count() - frozen_at_start
later = [[i] for i in range(1_000)]
said_again = start_up_gc.resume()
print(json.dumps({{"during": during, "collected_during": collected_during, "after": gc.isenabled(),
                  "frozen": frozen, "said": said, "said_again": said_again,
                  "frozen_by_a_second_resume": gc.get_freeze_count() - frozen_at_start - frozen}}))
"""


def run(before: str) -> dict:
    done = subprocess.run([sys.executable, "-c", START_UP.format(before=before)], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout)


@pytest.mark.parametrize("case, before, expected", [
    ("a grading process: the collector was on", "",
     {"during": False, "collected_during": 0, "after": True, "start_up_frozen": True}),
    ("someone turned it off before: it stays off, nothing frozen", "gc.disable()",
     {"during": False, "collected_during": 0, "after": False, "start_up_frozen": False}),
])
def test_start_up_runs_without_collections_and_what_it_made_is_frozen_once(case, before, expected):
    seen = run(before)
    assert (seen.pop("frozen_by_a_second_resume"), seen.pop("said_again")) == (0, 0), "a second resume() froze more"
    assert seen.pop("said") == seen["frozen"], "resume() miscounted what it froze"
    seen["start_up_frozen"] = seen.pop("frozen") >= 50_000
    assert seen == expected


def test_resume_without_pause_freezes_nothing():
    code = ("import gc; from attention_platform import start_up_gc; said = start_up_gc.resume(); "
            "print(said, gc.isenabled(), gc.get_freeze_count())")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.stdout.split() == ["0", "True", "0"], done.stderr[-2000:]
