"""Judges of part 2, attention by hand (notebook ``02_by_hand``). Trusted: never in a sandbox.

The six-token checks compare, to four decimals, with the tensors computed from the student's own
embeddings (three-dimensional, no trainable weights, no scaling): the release's are those published
for "Your journey starts with one step"; a student with a variant (``variants``) has their own. The
three-token check recomputes every step of a small example with projections and the √d_k scale.
Every request carries the numbers its seed stands for, derived here, never read from the notebook;
the probes (``by_hand_probes``) only read the names the student's cells define.
"""

from __future__ import annotations

import math

import torch

from . import variants
from .by_hand_probes import THREE_TOKEN_STEPS
from ..judging import CheckJudge, JudgeFailure, Message, fetch, judge_value

TOL = 1.01e-4  # "to four decimals": published values are rounded to 4 places

TOKENS = ("Your", "journey", "starts", "with", "one", "step")
INPUTS = variants.RELEASED["inputs"]
# The published tensors (verified against a float32 computation in the proofs).
PUBLISHED_SCORES = torch.tensor(
    [[0.9995, 0.9544, 0.9422, 0.4753, 0.4576, 0.6310],
     [0.9544, 1.4950, 1.4754, 0.8434, 0.7070, 1.0865],
     [0.9422, 1.4754, 1.4570, 0.8296, 0.7154, 1.0605],
     [0.4753, 0.8434, 0.8296, 0.4937, 0.3474, 0.6565],
     [0.4576, 0.7070, 0.7154, 0.3474, 0.6654, 0.2935],
     [0.6310, 1.0865, 1.0605, 0.6565, 0.2935, 0.9450]],
    dtype=torch.float64,
)
PUBLISHED_WEIGHTS = torch.tensor(
    [[0.2098, 0.2006, 0.1981, 0.1242, 0.1220, 0.1452],
     [0.1385, 0.2379, 0.2333, 0.1240, 0.1082, 0.1581],
     [0.1390, 0.2369, 0.2326, 0.1242, 0.1108, 0.1565],
     [0.1435, 0.2074, 0.2046, 0.1462, 0.1263, 0.1720],
     [0.1526, 0.1958, 0.1975, 0.1367, 0.1879, 0.1295],
     [0.1385, 0.2184, 0.2128, 0.1420, 0.0988, 0.1896]],
    dtype=torch.float64,
)
PUBLISHED_CONTEXT = torch.tensor(
    [[0.4421, 0.5931, 0.5790],
     [0.4419, 0.6515, 0.5683],
     [0.4431, 0.6496, 0.5671],
     [0.4304, 0.6298, 0.5510],
     [0.4671, 0.5910, 0.5266],
     [0.4177, 0.6503, 0.5645]],
    dtype=torch.float64,
)
JOURNEY_STARTS = 1.4754  # inputs[1] @ inputs[2], 0-based indices

# Three tokens, one-hot 4-d embeddings, projections to d_k = 2 (x @ W convention).
X3 = torch.eye(4, dtype=torch.float64)[:3]
W_Q3, W_K3, W_V3 = (variants.RELEASED[name] for name in ("W_Q", "W_K", "W_V"))


def three_token_steps(x: torch.Tensor = X3, w_q: torch.Tensor = W_Q3, w_k: torch.Tensor = W_K3,
                      w_v: torch.Tensor = W_V3) -> dict[str, torch.Tensor]:
    """Every step of the three-token example (trusted)."""
    q, k, v = x @ w_q, x @ w_k, x @ w_v
    scores = q @ k.T / math.sqrt(q.shape[-1])
    weights = scores.softmax(dim=-1)
    return {"Q3": q, "K3": k, "V3": v, "scores3": scores, "weights3": weights, "out3": weights @ v}


def six_token_steps(inputs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Scores, weights and context vectors of the six-token warm-up (trusted)."""
    scores = inputs @ inputs.T
    weights = scores.softmax(dim=-1)
    return scores, weights, weights @ inputs


def _dot_judge(request: Message, response: Message) -> None:
    inputs = request["inputs"]
    value = fetch(response, "journey_starts")
    if value.numel() != 1:
        raise JudgeFailure(
            f"`journey_starts` should be one number (a dot product of two vectors), but it has shape "
            f"{tuple(value.shape)}. Use inputs[i] @ inputs[j] or torch.dot."
        )
    got = float(value.reshape(()))
    if abs(got - float(inputs[1] @ inputs[2])) <= TOL:
        return
    if abs(got - float(inputs[2] @ inputs[3])) <= TOL:
        raise JudgeFailure(
            "You took the dot product of rows 2 and 3, which are 'starts' and 'with': Python counts from 0, "
            "so 'journey' is inputs[1] and 'starts' is inputs[2]."
        )
    raise JudgeFailure(
        f"`journey_starts` is {got:.4f}; it should be the dot product of the 'journey' and 'starts' rows "
        "(multiply matching entries and add them up)."
    )


def _scores_judge(request: Message, response: Message) -> None:
    inputs = request["inputs"]
    scores, _, _ = six_token_steps(inputs)
    value = fetch(response, "attn_scores")
    judge_value(value, scores, "`attn_scores`", TOL, [
        (inputs.T @ inputs, "you computed inputs.T @ inputs, which pairs the 3 embedding dimensions with each "
                            "other. Scores pair tokens: inputs @ inputs.T is 6 × 6, one score per (query, key) pair."),
        (scores / math.sqrt(3), "you divided by √3. This warm-up has no trainable weights and no "
                                "scaling: the scores are the plain dot products inputs @ inputs.T."),
    ], "Entry [i, j] is the dot product of token i with token j: inputs @ inputs.T.")


def _weights_judge(request: Message, response: Message) -> None:
    scores, weights, _ = six_token_steps(request["inputs"])
    value = fetch(response, "attn_weights")
    judge_value(value, weights, "`attn_weights`", TOL, [
        (scores.softmax(dim=0), "your columns sum to 1, not your rows: the softmax ran over dim=0. "
                                "Each query (row) spreads its attention over the keys, so use dim=-1."),
        (scores / scores.sum(dim=-1, keepdim=True),
         "you divided each row by its sum. That also makes rows sum to 1, but it is not a softmax: the softmax "
         "exponentiates first, which stretches the gaps between scores and copes with negative scores."),
        (scores.exp(), "you exponentiated the scores but did not normalise each row to sum to 1."),
    ], "Apply torch.softmax to attn_scores over the last dim, so that each row sums to 1.")


def _context_judge(request: Message, response: Message) -> None:
    inputs = request["inputs"]
    scores, weights, context = six_token_steps(inputs)
    value = fetch(response, "context_vectors")
    judge_value(value, context, "`context_vectors`", TOL, [
        (weights.T @ inputs, "you multiplied by the transposed weights. Row i of the result must mix "
                             "the inputs with row i of the weights: attn_weights @ inputs."),
        (scores @ inputs, "you mixed the inputs with the raw scores. Use the softmax weights, which "
                          "sum to 1, so each context vector is a weighted average of the inputs."),
    ], "Each context vector is the weighted average of all inputs: attn_weights @ inputs, shape (6, 3). "
       "If your weights are off, fix them first.")


def _three_token_judge(request: Message, response: Message) -> None:
    steps = three_token_steps(X3, request["W_Q"], request["W_K"], request["W_V"])
    q, k, v = steps["Q3"], steps["K3"], steps["V3"]
    unscaled = q @ k.T
    diagnoses = {
        "Q3": [(q.T, "you transposed it: Q3 = x3 @ W_Q has one row per token.")],
        "K3": [(k.T, "you transposed it: K3 = x3 @ W_K has one row per token.")],
        "V3": [(v.T, "you transposed it: V3 = x3 @ W_V has one row per token.")],
        "scores3": [
            (unscaled, "you did not scale. Divide Q3 @ K3.T by √d_k = √2, the size of each query and key."),
            (unscaled / 2, "you divided by d_k = 2; divide by √d_k = √2 instead."),
            (q @ q.T / math.sqrt(2), "you compared queries with queries: use Q3 @ K3.T."),
            (k @ q.T / math.sqrt(2), "you computed K3 @ Q3.T, the transpose: row i must hold query i against every key."),
        ],
        "weights3": [
            (steps["scores3"].softmax(dim=0), "your columns sum to 1: take the softmax over each row (dim=-1)."),
            (unscaled.softmax(dim=-1), "these are softmax weights of the unscaled scores: scale by 1/√2 first."),
        ],
        "out3": [
            (steps["weights3"] @ k, "you mixed the keys; the output mixes the values: weights3 @ V3."),
            (steps["weights3"].T @ v, "you used the transposed weights: weights3 @ V3."),
        ],
    }
    for name in THREE_TOKEN_STEPS:
        value = fetch(response, name)
        judge_value(value, steps[name], f"Step `{name}`", 1.01e-3, diagnoses.get(name, []),
                    "Check this step before the ones after it.")


JUDGES = [
    CheckJudge("by_hand_dot", variants.inputs, _dot_judge),
    CheckJudge("by_hand_scores", variants.inputs, _scores_judge),
    CheckJudge("by_hand_weights", variants.inputs, _weights_judge),
    CheckJudge("by_hand_context", variants.inputs, _context_judge),
    CheckJudge("three_tokens", variants.inputs, _three_token_judge),
]
