"""Hidden checks of part 4, shapes and cost (notebook ``04_shapes_and_cost``).

The probes read the student's answers (a dict of shapes, one integer); the
judges compare them with values computed here.
"""

from __future__ import annotations

from .core import Check, JudgeFailure, Message, judged
from .parts_common import MISSING

N, D_K = 100, 64
EXPECTED_SHAPES = {"Q": (N, D_K), "K": (N, D_K), "V": (N, D_K), "scores": (N, N), "output": (N, D_K)}
GPT3_WIDTH = 12_288
QKV_WEIGHTS = 3 * GPT3_WIDTH**2  # 452,984,832


def _none(seed: int) -> Message:
    return {}


def _shapes_probe(namespace: dict, request: Message) -> Message:
    if "shape_answers" not in namespace:
        return {"error": MISSING.format(name="shape_answers")}
    answers = namespace["shape_answers"]
    response: Message = {}
    try:
        for name in EXPECTED_SHAPES:
            if name in answers:
                response[f"shape.{name}"] = [int(n) for n in tuple(answers[name])]
    except Exception as exc:
        return {"error": f"`shape_answers` could not be read as a dict of shapes ({type(exc).__name__}: {exc})"}
    return response


@judged
def _shapes_judge(request: Message, response: Message) -> None:
    if "error" in response:
        raise JudgeFailure(response["error"])
    missing = [name for name in EXPECTED_SHAPES if f"shape.{name}" not in response]
    if missing:
        raise JudgeFailure(f"`shape_answers` has no entry for {', '.join(missing)}: give a shape tuple for each of "
                           f"{', '.join(EXPECTED_SHAPES)}.")
    for name, expected in EXPECTED_SHAPES.items():
        got = tuple(response[f"shape.{name}"])
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


def _count_probe(namespace: dict, request: Message) -> Message:
    if "qkv_weight_count" not in namespace:
        return {"error": MISSING.format(name="qkv_weight_count")}
    value = namespace["qkv_weight_count"]
    try:
        number = float(value)
    except Exception as exc:
        return {"error": f"`qkv_weight_count` is not a number ({type(exc).__name__})"}
    return {"count": number}


@judged
def _count_judge(request: Message, response: Message) -> None:
    if "error" in response:
        raise JudgeFailure(response["error"])
    got = response["count"]
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


CHECKS = [
    Check("shapes_n100", "shapes of Q, K, V, scores and output for n = 100, d_k = 64", 2, "attention shapes",
          _none, _shapes_probe, _shapes_judge),
    Check("qkv_params_gpt3", "Q/K/V weight count of one layer at width 12,288", 1, "parameter count of projections",
          _none, _count_probe, _count_judge),
]
