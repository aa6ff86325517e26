"""Judges of part 4, shapes and cost (notebook ``04_shapes_and_cost``). Trusted: never in a sandbox.

The probes (``shapes_probes``) read the student's answers; the judges compare them with values
computed here.
"""

from __future__ import annotations

from ..judging import CheckJudge, JudgeFailure, Message, fetch, no_request
from ..probing import error_key
from ..reasons import failure_phrase
from .shapes_probes import SHAPE_NAMES

N, D_K = 100, 64
EXPECTED_SHAPES = {"Q": (N, D_K), "K": (N, D_K), "V": (N, D_K), "scores": (N, N), "output": (N, D_K)}
GPT3_WIDTH = 12_288
QKV_WEIGHTS = 3 * GPT3_WIDTH**2  # 452,984,832
assert tuple(EXPECTED_SHAPES) == SHAPE_NAMES


def _shapes_judge(request: Message, response: Message) -> None:
    if error_key("shape_answers") in response:
        fetch(response, "shape_answers")
    for name in EXPECTED_SHAPES:
        error = response.get(error_key(f"shape.{name}"))
        if error is not None and error.startswith("`"):
            raise JudgeFailure(error)
        if error is not None and not error.startswith("KeyError"):
            raise JudgeFailure(f"`shape_answers` could not be read as a dict of shapes: reading it "
                               f"{failure_phrase(error)}.")
    missing = [name for name in EXPECTED_SHAPES if f"shape.{name}" not in response]
    if missing:
        raise JudgeFailure(f"`shape_answers` has no entry for {', '.join(missing)}: give a shape tuple for each of "
                           f"{', '.join(EXPECTED_SHAPES)}.")
    for name, expected in EXPECTED_SHAPES.items():
        got = response[f"shape.{name}"]
        if not (isinstance(got, list) and all(isinstance(n, int) for n in got)):
            raise JudgeFailure(f"`shape_answers` could not be read as a dict of shapes: the entry for {name} is not "
                               "a tuple of whole numbers.")
        got = tuple(got)
        if got == expected:
            continue
        if name == "scores" and got == (D_K, D_K):
            raise JudgeFailure("The score matrix compares every query with every key, so it is n × n = (100, 100); "
                               "its size does not depend on d_k.")
        if name == "output" and got == (N, N):
            raise JudgeFailure("The output is weights @ V: (100, 100) @ (100, 64) gives (100, 64), one d_v-vector "
                               "per token, not another n × n matrix.")
        if name in ("Q", "K", "V") and got == (D_K, N):
            raise JudgeFailure(f"{name} holds one row per token: (n, d_k) = (100, 64), not its transpose.")
        raise JudgeFailure(f"The shape of {name} is not {got}. Write the shape of each matrix for one sequence of "
                           "n = 100 tokens with d_k = d_v = 64 (no batch dimension).")


def _count_judge(request: Message, response: Message) -> None:
    got = fetch(response, "qkv_weight_count")
    if got == QKV_WEIGHTS:
        return
    diagnoses = {
        GPT3_WIDTH**2: "that is one projection; queries, keys and values each have their own D × D matrix.",
        4 * GPT3_WIDTH**2: "that includes the output projection; count only W_Q, W_K and W_V.",
        3 * (GPT3_WIDTH**2 + GPT3_WIDTH): "that includes the biases; count only the weight matrices.",
        3 * GPT3_WIDTH: "each projection maps D to D, so it holds D × D weights, not D.",
        3 * GPT3_WIDTH * 2: "each projection holds D × D weights (D squared), not 2D.",
    }
    text = diagnoses.get(got, "each of the three projections is a D × D matrix with D = 12,288.")
    raise JudgeFailure(f"`qkv_weight_count` is {got:,.0f}: {text}")


JUDGES = [
    CheckJudge("shapes_n100", no_request, _shapes_judge),
    CheckJudge("qkv_params_gpt3", no_request, _count_judge),
]
