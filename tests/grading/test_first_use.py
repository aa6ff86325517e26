"""The warm worker's optional first uses (attention_platform/grading/sandbox/first_use.py): which
notebooks ask for which, and a real zygote paying exactly those before it forks while a sandbox
that meets one it did not pay still gets the right answer."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from attention_platform.grading.sandbox import SandboxLimits, Zygote, first_use

REPO = Path(__file__).resolve().parents[2]

NOTEBOOK_TEXTS = [  # (case, the notebooks' text, the warm-ups they need)
    ("no training, no figure", ['"source": ["weights = scores.softmax(dim=-1)"]'], ()),
    ("torch.optim", ['"opt = torch.optim.AdamW(model.parameters())"'], ("optimizers",)),
    ("optim imported from torch", ['"from torch import optim\\n", "opt = optim.SGD(p, lr=0.1)"'], ("optimizers",)),
    ("pyplot as plt", ['"import matplotlib.pyplot as plt"'], ("figures",)),
    ("plt alone", ['"plt.imshow(weights)"'], ("figures",)),
    ("one notebook of several trains and draws", ['"x = 1"', '"plt.plot(losses)\\n", "torch.optim.Adam(p)"'],
     ("figures", "optimizers")),
    ("words that only contain the names", ['"optimal = 3\\n", "pltx = 2\\n", "optimizer_state = {}"'], ()),
]


@pytest.mark.parametrize("texts, expected", [row[1:] for row in NOTEBOOK_TEXTS], ids=[row[0] for row in NOTEBOOK_TEXTS])
def test_which_warm_ups_a_notebook_needs(texts, expected):
    assert first_use.needed_by(texts) == expected


def test_the_course_needs_both_and_its_core_notebook_neither(tmp_path):
    assert first_use.needed_by_assignment(REPO, "self_attention") == ("figures", "optimizers")  # 05_experiments
    folder = tmp_path / "source" / "self_attention"
    folder.mkdir(parents=True)
    (folder / "self_attention.ipynb").write_bytes((REPO / "source/self_attention/self_attention.ipynb").read_bytes())
    assert first_use.needed_by_assignment(tmp_path, "self_attention") == ()


WARM_UP_WATCHED = """
import gc, json
from attention_platform.grading.sandbox import zygote

collector_on = []
zygote.FIRST_USES["watch"] = lambda: collector_on.append(gc.isenabled())
zygote.warm_up(("watch",))
print(json.dumps({"during": collector_on, "after": gc.isenabled(), "frozen": gc.get_freeze_count()}))
"""


def test_the_worker_warms_up_without_collections_and_forks_with_everything_frozen():
    """Importing torch and paying the first uses make ~300,000 objects every sandbox inherits: no
    collection walks them during the warm-up, and none in a sandbox afterwards (frozen, so a
    sandbox's collections do not write to their pages either) -- attention_platform/start_up_gc.py."""
    done = subprocess.run([sys.executable, "-c", WARM_UP_WATCHED], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    seen = json.loads(done.stdout)
    assert seen["during"] == [False]
    assert seen["after"]
    assert seen["frozen"] > 100_000


def test_every_warm_up_a_notebook_can_ask_for_is_one_the_worker_can_pay():
    from attention_platform.grading.sandbox import zygote

    assert tuple(sorted(zygote.FIRST_USES)) == first_use.ALL


COURSES = [  # (case, {assignment folder: its notebook's text, or a link elsewhere}, the warm-ups it needs)
    ("neither", {"a1": "attention only", "a2": "softmax"}, ()),
    ("one draws", {"a1": "attention only", "a2": "plt.plot(x)"}, ("figures",)),
    ("one trains, one draws", {"a1": "optim.AdamW", "a2": "import matplotlib"}, ("figures", "optimizers")),
    ("a link is not followed", {"a1": "attention only", "a2": "->"}, ()),
    ("no assignment", {}, first_use.ALL),
]


@pytest.mark.parametrize("case, assignments, expected", COURSES, ids=[row[0] for row in COURSES])
def test_which_warm_ups_a_courses_broker_pays_for_everyone(tmp_path, case, assignments, expected):
    (tmp_path / "source").mkdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "x.ipynb").write_text("import matplotlib.pyplot as plt; optim")
    for name, text in assignments.items():
        if text == "->":
            (tmp_path / "source" / name).symlink_to(elsewhere)
            continue
        (tmp_path / "source" / name).mkdir()
        (tmp_path / "source" / name / f"{name}.ipynb").write_text(text)
    assert first_use.needed_by_course(tmp_path) == expected


def test_a_source_folder_that_is_a_link_is_not_read(tmp_path):
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "a1").mkdir(parents=True)
    (elsewhere / "a1" / "a1.ipynb").write_text("attention only")
    (tmp_path / "course").mkdir()
    (tmp_path / "course" / "source").symlink_to(elsewhere)
    assert first_use.needed_by_course(tmp_path / "course") == first_use.ALL  # unknown work: every warm-up


def test_this_course_needs_both_everywhere(tmp_path):
    assert first_use.needed_by_course(REPO) == first_use.ALL
    assert first_use.needed_by_course(tmp_path / "no course") == first_use.ALL


def test_work_nobody_described_gets_every_warm_up(tmp_path):
    assert first_use.needed_by_folder(tmp_path / "missing") == first_use.ALL
    assert first_use.needed_by_folder(tmp_path) == first_use.ALL


@pytest.mark.parametrize("plant", ["a named pipe", "a link to a notebook", "a directory", "too large"])
def test_a_source_folder_holding_something_odd_is_not_read_but_gets_every_warm_up(tmp_path, plant):
    """The grader may be root: a name in source/ that is not a plain notebook file is neither
    followed nor read (a named pipe would block the read forever), and the work counts as unknown."""
    plain = '{"cells": [{"source": "weights = scores.softmax(dim=-1)"}]}'
    (tmp_path / "plain.ipynb").write_text(plain)
    assert first_use.needed_by_folder(tmp_path) == ()
    odd = tmp_path / "odd.ipynb"
    if plant == "a named pipe":
        os.mkfifo(odd)
    elif plant == "a link to a notebook":
        odd.symlink_to(tmp_path / "plain.ipynb")
    elif plant == "a directory":
        odd.mkdir()
    else:
        odd.write_text(plain + " " * first_use.MAX_NOTEBOOK_BYTES)
    assert first_use.needed_by_folder(tmp_path) == first_use.ALL


@pytest.mark.parametrize("argument, expected", [("", ()), ("optimizers", ("optimizers",)),
                                                ("optimizers,figures", ("optimizers", "figures"))])
def test_the_zygotes_argument_is_read_back(argument, expected):
    assert first_use.parse(argument) == expected


def test_an_unknown_warm_up_is_refused_by_name():
    with pytest.raises(ValueError, match="unknown warm-up.*compile.*known: figures, optimizers"):
        first_use.parse("optimizers,compile")


PROBE = ("import sys\n"
         "print('dynamo' if 'torch._dynamo' in sys.modules else 'no dynamo', "
         "'pyplot' if 'matplotlib.pyplot' in sys.modules else 'no pyplot', "
         "'font' if 'matplotlib.backends.backend_agg' in sys.modules else 'no font')")
DRAW = "import matplotlib.pyplot as plt\nplt.plot([1, 4, 9])\nprint('drawn')"
TRAIN = ("import torch\n"
         "torch.manual_seed(0)\n"
         "w = torch.nn.Parameter(torch.tensor([1.0, -2.0]))\n"
         "opt = torch.optim.AdamW([w], lr=0.5, weight_decay=0.0)\n"
         "(w ** 2).sum().backward(); opt.step()\n"
         "print([round(v, 4) for v in w.tolist()])")


def _run(sandbox, source: str) -> str:
    _, reply = sandbox.call({"op": "cell", "source": source})
    return "".join(out.get("text", "") or str(out.get("evalue", "")) for out in reply["outputs"])


@pytest.mark.parametrize("first_uses, before", [((), "no dynamo no pyplot no font\n"),
                                                (first_use.ALL, "dynamo pyplot font\n")])
@pytest.mark.root
def test_a_zygote_pays_the_first_uses_it_was_asked_for_and_its_sandboxes_train_and_draw_either_way(first_uses, before):
    zygote = Zygote(first_uses=first_uses)
    try:
        sandbox = zygote.spawn(SandboxLimits())
        try:
            assert _run(sandbox, PROBE) == before  # what the worker loaded before forking
            assert _run(sandbox, TRAIN) == "[0.5, -1.5]\n"  # AdamW's first step moves each weight by lr
            _, reply = sandbox.call({"op": "cell", "source": DRAW})
            kinds = [(out["output_type"], sorted(out.get("data", {}))) for out in reply["outputs"]]
            assert kinds == [("stream", []), ("display_data", ["image/png", "text/plain"])], kinds
        finally:
            sandbox.close()
    finally:
        zygote.close()


HOOK = """
import json, os
from traitlets.config.loader import PyFileConfigLoader
from attention_platform.grading.sandbox.client import get_zygote
config = PyFileConfigLoader("nbgrader_config.py", path={repo!r}).load_config()  # the course's own hook
os.chdir({course!r})  # nbgrader runs its hooks in the course's root
config.Autograde.pre_convert_hook(assignment="a1", student="s", notebooks=[])
with get_zygote().spawn() as sandbox:
    _, reply = sandbox.call({{"op": "cell", "source": {probe!r}}})
print(json.dumps(reply["outputs"][0]["text"]))
"""


@pytest.mark.parametrize("notebook, before", [('{"cells": []}', "no dynamo no pyplot no font\n"),
                                              ('{"source": "import matplotlib.pyplot as plt"}', "no dynamo pyplot font\n")])
@pytest.mark.root
def test_nbgraders_autograde_warms_the_worker_for_the_assignment_it_grades(tmp_path, notebook, before):
    """``nbgrader autograde`` and the formgrader start the worker from the pre-convert hook, with
    the first uses of the assignment's source notebooks (a broker's worker pays none of its own)."""
    (tmp_path / "source" / "a1").mkdir(parents=True)
    (tmp_path / "source" / "a1" / "a1.ipynb").write_text(notebook)
    done = subprocess.run([sys.executable, "-c", HOOK.format(repo=str(REPO), course=str(tmp_path), probe=PROBE)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == before


def test_a_linked_assignment_folder_is_not_entered_by_a_root_grader(tmp_path):
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "a1.ipynb").write_text("attention only")
    (tmp_path / "source").mkdir()
    (tmp_path / "source" / "a1").symlink_to(tmp_path / "elsewhere")
    assert first_use.needed_by_folder(tmp_path / "elsewhere") == ()
    assert first_use.needed_by_assignment(tmp_path, "a1") == first_use.ALL  # unknown work: every warm-up
