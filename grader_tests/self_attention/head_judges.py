"""Requests and judges of part 3 (notebook ``03_head_and_bias``). Trusted: never in a sandbox.

* ``AttentionHead(embed_dim, head_size, *, causal=True)``: projections C → head_size
  without bias, a causal mask, and scores divided by √head_size (not √C);
  ``forward`` returns ``weights @ value(x)`` of shape (B, T, head_size).
* ``weight_bars(row)``: the per-token printout of one query's weights.
* ``SingleHeadAttention(embed_dim)``: no mask, ``nn.Linear`` projections with bias.
* the "two plus three" trace, computed from literal matrices.

The probes (``head_probes``) build the student's modules, load the grader's weights and
call them; the judges compare the raw tensors and strings with trusted computations.
"""

from __future__ import annotations

import math

import torch

from .attention_model import log_ratio_fit
from .head_probes import BIAS_PROJECTIONS, HEAD_PROJECTIONS, PARAM_PREFIX as P
from ..judging import CheckJudge, JudgeFailure, Message, fetch, generator, judge_value, no_request, shape_text

BAR_UNIT = 30  # one '#' per full 1/30 of weight

# ---------------------------------------------------------------- the "two plus three" trace (nn.Linear convention)
TRACE_TOKENS = ("two", "plus", "three")
TRACE_X = torch.tensor([[0.8, 0.1, 0.3, 0.0], [0.1, 0.9, 0.0, 0.2], [0.7, 0.2, 0.4, 0.1]], dtype=torch.float64)
TRACE_PARAMS = {
    "W_q.weight": torch.tensor([[0.0, 2.0, 0.0, 0.0], [0.5, 0.0, 0.0, 0.5], [0.0, 0.0, 0.5, 0.0], [0.0, 0.5, 0.0, 0.0]],
                               dtype=torch.float64),
    "W_q.bias": torch.tensor([0.2, 0.0, 0.1, -0.1], dtype=torch.float64),
    "W_k.weight": torch.tensor([[1.5, 0.0, 1.5, 0.0], [0.0, 0.5, 0.0, 0.0], [0.5, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.5]],
                               dtype=torch.float64),
    "W_k.bias": torch.tensor([0.0, 0.1, 0.0, 0.2], dtype=torch.float64),
    "W_v.weight": torch.eye(4, dtype=torch.float64),
    "W_v.bias": torch.tensor([0.0, 0.0, 0.0, 0.1], dtype=torch.float64),
}


def _lin(params, name, x, bias=True):
    out = x @ params[f"{name}.weight"].mT
    return out + params[f"{name}.bias"] if bias else out


def unmasked_weights(params: dict, x: torch.Tensor, bias: bool = True) -> torch.Tensor:
    q, k = _lin(params, "W_q", x, bias), _lin(params, "W_k", x, bias)
    return (q @ k.mT / math.sqrt(x.shape[-1])).softmax(dim=-1)


def trace_expected() -> dict[str, torch.Tensor]:
    weights = unmasked_weights(TRACE_PARAMS, TRACE_X)
    return {"trace_weights": weights, "trace_output": weights @ _lin(TRACE_PARAMS, "W_v", TRACE_X)}


# ---------------------------------------------------------------- shared judge helpers

def _params(request: Message) -> dict[str, torch.Tensor]:
    return {k[len(P):]: v.to(torch.float64) for k, v in request.items() if k.startswith(P)}


def _method(response: Message, key: str, what: str) -> torch.Tensor:
    return fetch(response, key, what).to(torch.float64)


# ---------------------------------------------------------------- AttentionHead

def _head_request(seed: int, batch=2, seq_len=10, dim=128, head_size=32, causal=False) -> Message:
    gen = generator(seed)
    message: Message = {"dim": dim, "head_size": head_size, "causal": causal,
                        "x": torch.randn(batch, seq_len, dim, generator=gen)}
    for name in HEAD_PROJECTIONS:
        gain = 1.3 if name != "value" else 1.0
        message[f"{P}{name}.weight"] = torch.randn(head_size, dim, generator=gen) * gain / math.sqrt(dim)
    return message


HEAD_SHAPE_CASES = [(2, 10, 128, 32, True), (1, 1, 16, 4, True), (3, 5, 24, 8, False), (2, 6, 8, 8, False)]


def _head_shapes_request(seed: int) -> Message:
    gen = generator(seed)
    message: Message = {"cases": [list(c) for c in HEAD_SHAPE_CASES]}
    for i, (b, t, c, _, _) in enumerate(HEAD_SHAPE_CASES):
        message[f"x{i}"] = torch.randn(b, t, c, generator=gen)
    return message


def _head_shapes_judge(request: Message, response: Message) -> None:
    for i, (b, t, c, hs, causal) in enumerate(request["cases"]):
        where = f"For x of shape {shape_text((b, t, c))} and head_size={hs} (causal={causal})"
        for key, what, shape in ((f"forward{i}", "head(x)", (b, t, hs)), (f"weights{i}", "attention_weights(x)", (b, t, t))):
            value = _method(response, key, what)
            if tuple(value.shape) != shape:
                raise JudgeFailure(
                    f"{where}, {what} has shape {shape_text(value.shape)}; expected {shape_text(shape)}. "
                    "A head maps C → head_size: its output is (B, T, head_size) and its weights are (B, T, T)."
                )


def _head_scale_judge(request: Message, response: Message) -> None:
    weights = _method(response, "weights", "attention_weights(x)")
    x = request["x"].to(torch.float64)
    if tuple(weights.shape) != (x.shape[0], x.shape[1], x.shape[1]) or not torch.isfinite(weights).all():
        raise JudgeFailure("attention_weights(x) must be a finite (B, T, T) tensor before its scale can be read "
                           "(see the shape check).")
    params = _params(request)
    scores = (x @ params["query.weight"].mT) @ (x @ params["key.weight"].mT).mT
    log_w = torch.where(weights > 1e-30, weights.clamp_min(1e-300).log(), torch.full_like(weights, -math.inf))
    c, residual, _ = min((log_ratio_fit(log_w, scores, rows) for rows in (True, False)), key=lambda f: f[1])
    if c is None or residual > 1e-2:
        raise JudgeFailure("Your weights are not softmax(query(x) @ key(x)ᵀ / c) for any constant c: compute the "
                           "scores from this head's query and key projections, scale them, then apply the softmax.")
    dim, hs = int(request["dim"]), int(request["head_size"])
    if abs(c / math.sqrt(hs) - 1) <= 1e-2:
        return
    labels = [
        (math.sqrt(dim), f"you divided by √C = √{dim}, the embedding size. The dot products are sums over the "
                         f"head_size = {hs} entries of q and k, so their spread grows like √head_size"),
        (1.0, "you did not scale the scores"),
        (float(hs), f"you divided by head_size = {hs} instead of its square root"),
        (float(dim), f"you divided by C = {dim}"),
    ]
    label = next((text for v, text in labels if abs(c / v - 1) <= 2e-2), f"your scores are divided by {c:.3g}")
    raise JudgeFailure(f"Scores must be divided by √head_size = √{hs} ≈ {math.sqrt(hs):.3g}, but {label}.")


def _head_mask_judge(request: Message, response: Message) -> None:
    weights = _method(response, "weights", "attention_weights(x)")
    t = weights.shape[-1]
    upper = torch.ones(t, t, dtype=torch.bool).triu(1)
    if not torch.isfinite(weights).all():
        raise JudgeFailure("With causal=True some weights are NaN: a row lost every position it may see. Block "
                           "only the future (above the diagonal); a token always sees itself.")
    if bool((weights[..., upper].abs() > 1e-6).any()):
        raise JudgeFailure("With causal=True token t still gives weight to later tokens. Fill the scores above the "
                           "diagonal with -inf before the softmax (they become exactly 0), whenever self.causal is True.")
    if bool((weights.diagonal(dim1=-2, dim2=-1) == 0).all()):
        raise JudgeFailure("With causal=True a token gives zero weight to itself: the mask must block only s > t.")
    sums = weights.sum(dim=-1)
    if not bool(torch.allclose(sums, torch.ones_like(sums), atol=1e-4)):
        raise JudgeFailure("With causal=True your rows do not sum to 1: mask the scores before the softmax, not the "
                           "weights after it.")


def _head_values_judge(request: Message, response: Message) -> None:
    weights = _method(response, "weights", "attention_weights(x)")
    out = _method(response, "forward", "head(x)")
    x = request["x"].to(torch.float64)
    params = _params(request)
    value = x @ params["value.weight"].mT
    if tuple(weights.shape[-2:]) != (x.shape[1], x.shape[1]):
        raise JudgeFailure("attention_weights(x) must be (B, T, T) before the output can be checked.")
    judge_value(out, weights @ value, "head(x)", 1e-4, [
        (weights @ (x @ params["key.weight"].mT), "you mixed the keys; a head returns weights @ value(x)."),
        (weights @ (x @ params["query.weight"].mT), "you mixed the queries; a head returns weights @ value(x)."),
    ], "head(x) must be attention_weights(x) @ value(x), shape (B, T, head_size).")


# ---------------------------------------------------------------- weight bars

def bar_line(position: int, weight: float) -> str:
    return f"token {position}: {weight:.3f}  {'#' * int(weight * BAR_UNIT)}".rstrip()


def _bars_request(seed: int) -> Message:
    gen = generator(seed)
    while True:  # keep away from rounding edges so float32 and float64 agree on every line
        scores = torch.randn(6, generator=gen, dtype=torch.float64) * 0.6
        row = torch.cat([scores.softmax(0), torch.zeros(4, dtype=torch.float64)]).to(torch.float32)
        units = row.double() * BAR_UNIT
        frac = units - units.floor()
        thousandths = row.double() * 1000 - (row.double() * 1000).floor()
        visible = row > 0
        if bool(((frac[visible] > 0.05) & (frac[visible] < 0.95)).all()) and bool(
            ((thousandths[visible] - 0.5).abs() > 0.05).all()
        ) and bool((frac[visible] > 0.5).any()):
            return {"row": row}


def _bars_judge(request: Message, response: Message) -> None:
    text = fetch(response, "text", "weight_bars(row)")
    row = [float(w) for w in request["row"]]
    expected = [bar_line(s, w) for s, w in enumerate(row)]
    got = [line.strip() for line in text.splitlines() if line.strip()]
    if len(got) != len(expected):
        raise JudgeFailure(
            f"For a row of {len(row)} weights, weight_bars returned {len(got)} non-empty lines; it should return one "
            "line per key position, including the masked ones, which print as 0.000 with no bar."
        )
    for s, (line, want) in enumerate(zip(got, expected)):
        if line != want:
            bars = line.count("#")
            hint = ""
            if bars == round(row[s] * BAR_UNIT) and bars != int(row[s] * BAR_UNIT):
                hint = f" You rounded; the bar has one '#' per *full* 1/{BAR_UNIT} of weight: int(w * {BAR_UNIT})."
            raise JudgeFailure(  # what the line says is not repeated: any text from the sandbox is the notebook's
                f"Line {s} should read {want!r}, but yours does not (it has {bars} '#'; format: 'token <s>: "
                f"<weight to 3 decimals>  <bar>').{hint}"
            )


# ---------------------------------------------------------------- SingleHeadAttention (no mask, biased projections)

def _bias_request(seed: int, batch=2, seq_len=6, dim=16) -> Message:
    gen = generator(seed)
    x = torch.randn(batch, seq_len, dim, generator=gen)
    message: Message = {"dim": dim, "x": x}
    for name in BIAS_PROJECTIONS:
        gain = 1.5 if name != "W_v" else 1.0
        message[f"{P}{name}.weight"] = torch.randn(dim, dim, generator=gen) * gain / math.sqrt(dim)
        message[f"{P}{name}.bias"] = torch.randn(dim, generator=gen) * 0.8
    changed = x.clone()
    changed[:, 1:] = torch.randn(changed[:, 1:].shape, generator=gen)
    message["x_changed"] = changed
    return message


def _unmasked_judge(request: Message, response: Message) -> None:
    weights = _method(response, "weights", "attention_weights(x)")
    t = request["x"].shape[1]
    if tuple(weights.shape) != (request["x"].shape[0], t, t):
        raise JudgeFailure(f"attention_weights(x) has shape {shape_text(weights.shape)}; expected (B, T, T).")
    upper = torch.ones(t, t, dtype=torch.bool).triu(1)
    if not bool((weights[..., upper] > 1e-6).any()):
        raise JudgeFailure("Your weights above the diagonal are all zero: this layer must not mask. Without a mask "
                           "every token also attends to the tokens after it.")
    out = _method(response, "forward", "layer(x)")
    changed = _method(response, "forward_changed", "layer(x)")
    if out.shape == changed.shape and bool(torch.allclose(out[:, 0], changed[:, 0], atol=1e-7)):
        raise JudgeFailure("The output at position 0 did not change when only the later tokens changed: forward "
                           "still hides the future. Remove the mask from forward as well.")


def _bias_judge(request: Message, response: Message) -> None:
    params = _params(request)
    x = request["x"].to(torch.float64)
    weights = _method(response, "weights", "attention_weights(x)")
    judge_value(weights, unmasked_weights(params, x), "attention_weights(x)", 1e-4, [
        (unmasked_weights(params, x, bias=False),
         "the query and key projections lost their bias. Call the layers (self.W_q(x)), which add the bias, "
         "rather than multiplying by .weight alone."),
        ((_lin(params, "W_q", x) @ _lin(params, "W_k", x).mT).softmax(dim=-1),
         "the scores are not divided by self.scale = √embed_dim."),
    ], "Weights are softmax(W_q(x) @ W_k(x)ᵀ / √embed_dim) over the last dim, with no mask.")
    out = _method(response, "forward", "layer(x)")
    judge_value(out, weights @ _lin(params, "W_v", x), "layer(x)", 1e-4, [
        (weights @ _lin(params, "W_v", x, bias=False), "the value projection lost its bias: use self.W_v(x)."),
    ], "forward returns attention_weights(x) @ W_v(x).")


def _trace_judge(request: Message, response: Message) -> None:
    expected = trace_expected()
    no_bias = unmasked_weights(TRACE_PARAMS, TRACE_X, bias=False)
    weights = fetch(response, "trace_weights")
    judge_value(weights, expected["trace_weights"], "`trace_weights`", 1e-3, [
        (no_bias, "these are the weights without the biases b_q and b_k: nn.Linear adds its bias, x @ Wᵀ + b."),
        ((TRACE_X @ TRACE_PARAMS["W_q.weight"].T + TRACE_PARAMS["W_q.bias"]).matmul(
            (TRACE_X @ TRACE_PARAMS["W_k.weight"].T + TRACE_PARAMS["W_k.bias"]).T).softmax(-1),
         "the scores were not divided by √4 = 2."),
    ], "Compute Q, K, V with the biases, scores = Q @ Kᵀ / √4, then softmax over each row.")
    out = fetch(response, "trace_output")
    judge_value(out, expected["trace_output"], "`trace_output`", 1e-3, [
        (expected["trace_weights"] @ TRACE_X, "you mixed the raw embeddings; mix the values V = x @ W_vᵀ + b_v."),
    ], "trace_output = trace_weights @ V.")


JUDGES = [
    CheckJudge("head_shapes", _head_shapes_request, _head_shapes_judge),
    CheckJudge("head_scale", lambda seed: _head_request(seed), _head_scale_judge),
    CheckJudge("head_mask", lambda seed: _head_request(seed, causal=True), _head_mask_judge),
    CheckJudge("head_values", lambda seed: _head_request(seed, causal=True), _head_values_judge),
    CheckJudge("weight_bars", _bars_request, _bars_judge),
    CheckJudge("unmasked_sees_future", _bias_request, _unmasked_judge),
    CheckJudge("unmasked_bias", _bias_request, _bias_judge),
    CheckJudge("two_plus_three", no_request, _trace_judge),
]
