"""Requests and judges of the multi-head attention assignment. Trusted: runs in the grader's process,
never in a sandbox.

Each check isolates one idea, so that a failure names one misconception: the judges compare the
probe's raw tensors with ``reference`` or with what the student's own weights must give, never with
anything computed inside the sandbox. Weights come from ``reference.random_parameters`` (each head's
scaled scores have a spread of about 2) and inputs are standard normal, so a wrong scale or softmax
dim shows and any correct idiom passes in float32.
"""

from __future__ import annotations

import math

import torch

from grader_tests.judging import (CheckJudge, JudgeFailure, Message, close, expect_shape, fetch_tensor, generator,
                                  judge_value, largest_difference, shape_text)

from . import reference
from .probes import PARAM_PREFIX

FLOAT32_WEIGHTS, FLOAT32_OUTPUT = 2e-5, 1e-4
FIT_RESIDUAL = 1e-2  # relative residual of a scale fit: float32 rounding gives ~1e-6, a wrong score source ~1


# --------------------------------------------------------------------------- requests and replies

def _request(seed: int, batch: int, seq_len: int, dim: int, heads: int, causal: bool) -> Message:
    gen = generator(seed)
    params = reference.random_parameters(dim, gen)
    message: Message = {"dim": dim, "heads": heads, "causal": causal,
                        "x": torch.randn(batch, seq_len, dim, generator=gen, dtype=torch.float64).float(),
                        "y": torch.randn(batch, heads, seq_len, dim // heads, generator=gen, dtype=torch.float64).float()}
    message.update({PARAM_PREFIX + name: value.float() for name, value in params.items()})
    return message


def _params(request: Message) -> dict[str, torch.Tensor]:
    """The parameters the student's layer was loaded with, in float64 (exactly the same values)."""
    return {k[len(PARAM_PREFIX):]: v.double() for k, v in request.items() if k.startswith(PARAM_PREFIX)}


def _x(request: Message) -> torch.Tensor:
    return request["x"].double()


def _weights(request: Message, response: Message) -> torch.Tensor:
    batch, seq_len, _ = request["x"].shape
    weights = fetch_tensor(response, "weights", "attention_weights(x)")
    expect_shape(weights, (batch, int(request["heads"]), seq_len, seq_len), "attention_weights(x)")
    return weights.double()


def _forward(request: Message, response: Message) -> torch.Tensor:
    out = fetch_tensor(response, "forward", "forward (calling layer(x))")
    expect_shape(out, tuple(request["x"].shape), "layer(x)")
    return out.double()


def _heads_text(heads: list[int], verb_one: str, verb_many: str) -> str:
    """"head 0 <verb_one>", or "heads 1, 2 <verb_many>"."""
    if len(heads) == 1:
        return f"head {heads[0]} {verb_one}"
    return "heads " + ", ".join(str(h) for h in heads) + f" {verb_many}"


# --------------------------------------------------------------------------- shapes

SHAPE_CASES = [  # (batch, seq_len, dim, heads, causal)
    (2, 5, 8, 2, True),
    (1, 1, 6, 3, True),
    (3, 4, 12, 4, False),
    (2, 3, 8, 8, False),
    (1, 6, 4, 1, True),
]


def _shapes_request(seed: int) -> Message:
    gen = generator(seed)
    message: Message = {"cases": [list(case) for case in SHAPE_CASES]}
    for i, (b, t, d, h, _) in enumerate(SHAPE_CASES):
        message[f"x{i}"] = torch.randn(b, t, d, generator=gen)
        message[f"y{i}"] = torch.randn(b, h, t, d // h, generator=gen)
    return message


def _shapes_judge(request: Message, response: Message) -> None:
    for i, (b, t, d, h, causal) in enumerate(request["cases"]):
        where = f"For x of shape {shape_text((b, t, d))} and num_heads={h} (causal={causal})"
        for key, what, shape in ((f"split{i}", "split_heads(x)", (b, h, t, d // h)),
                                 (f"merge{i}", "merge_heads(y)", (b, t, d)),
                                 (f"weights{i}", "attention_weights(x)", (b, h, t, t)),
                                 (f"forward{i}", "layer(x)", (b, t, d))):
            try:
                value = fetch_tensor(response, key, what)
            except JudgeFailure as failure:
                raise JudgeFailure(f"{where}: {failure}") from None
            if tuple(value.shape) != shape:
                raise JudgeFailure(
                    f"{where}, {what} has shape {shape_text(value.shape)}; expected {shape_text(shape)}. Every head "
                    "works on D/H entries of each token: split_heads gives (B, H, T, D/H), each head's weights are "
                    "(T, T), so attention_weights gives (B, H, T, T), and merge_heads and forward give (B, T, D) "
                    "back. Take B, T and D from the tensor's shape, not from fixed numbers.")


# --------------------------------------------------------------------------- split and merge

BARE_RESHAPE_SPLIT = (
    "your split used a bare reshape (or view) to (B, H, T, D/H). In memory each token's D entries lie side by "
    "side, token after token, so cutting that memory into H blocks of T rows gives each 'head' pieces of several "
    "tokens: head 0's first rows are all pieces of token 0. Cut each token's vector first, x.view(B, T, H, D/H), "
    "then bring the head axis forward with .transpose(1, 2).")
INTERLEAVED_SPLIT = (
    "your heads take every H-th entry of a token's vector (h, h + H, h + 2H, …): the vector is cut the wrong way "
    "round. View it as (B, T, H, D/H), so that head h owns the consecutive entries h·D/H up to (h+1)·D/H, then "
    ".transpose(1, 2).")
BARE_RESHAPE_MERGE = (
    "your merge used a bare reshape of (B, H, T, D/H) to (B, T, D). In memory the heads come first, so each "
    "output 'token' collects pieces of several tokens of the same head. Move the head axis back behind the tokens "
    "first, y.transpose(1, 2), then join the pieces with .reshape(B, T, D) (reshape, not view: the transposed "
    "tensor is not contiguous).")
INTERLEAVED_MERGE = (
    "your merge interleaves the heads' entries (head 0's first entry, head 1's first entry, …) instead of "
    "putting each head's D/H entries side by side, so it does not undo split_heads. After y.transpose(1, 2), "
    "reshape to (B, T, D).")


def _interleaved_split(x: torch.Tensor, heads: int) -> torch.Tensor:
    batch, seq_len, dim = x.shape
    return x.reshape(batch, seq_len, dim // heads, heads).permute(0, 3, 1, 2)


def _bare_split(x: torch.Tensor, heads: int) -> torch.Tensor:
    batch, seq_len, dim = x.shape
    return x.reshape(batch, heads, seq_len, dim // heads)


def _split_judge(request: Message, response: Message) -> None:
    x, heads = request["x"].double(), int(request["heads"])
    value = fetch_tensor(response, "split", "split_heads(x)").double()
    judge_value(value, reference.split_heads(x, heads), "split_heads(x)", 1e-6,
                [(_bare_split(x, heads), BARE_RESHAPE_SPLIT), (_interleaved_split(x, heads), INTERLEAVED_SPLIT)],
                hint="The head axis comes before the tokens: view as (B, T, H, D/H), then .transpose(1, 2).")


def _merge_judge(request: Message, response: Message) -> None:
    y = request["y"].double()
    batch, heads, seq_len, head_dim = y.shape
    value = fetch_tensor(response, "merge", "merge_heads(y)").double()
    interleaved = y.permute(0, 2, 3, 1).reshape(batch, seq_len, heads * head_dim)
    judge_value(value, reference.merge_heads(y), "merge_heads(y)", 1e-6,
                [(y.reshape(batch, seq_len, heads * head_dim), BARE_RESHAPE_MERGE), (interleaved, INTERLEAVED_MERGE)],
                hint="merge_heads must undo split_heads: .transpose(1, 2), then .reshape(B, T, D).")


# --------------------------------------------------------------------------- which scores, at which scale

def _score_sources(params: dict, x: torch.Tensor, heads: int) -> dict[str, torch.Tensor]:
    """Raw (B, H, T, T) scores each way of giving heads their q and k produces: each head's own slice
    first, then the mistakes ``heads_independent`` names."""
    q, k = reference.linear(params, "q_proj", x), reference.linear(params, "k_proj", x)
    head_dim = x.shape[-1] // heads
    shifted = [q[..., h:h + head_dim] @ k[..., h:h + head_dim].mT for h in range(heads)]
    return {
        "own": reference.split_heads(q, heads) @ reference.split_heads(k, heads).mT,
        "whole": (q @ k.mT).unsqueeze(1).expand(-1, heads, -1, -1),
        "first": (q[..., :head_dim] @ k[..., :head_dim].mT).unsqueeze(1).expand(-1, heads, -1, -1),
        "shifted": torch.stack(shifted, dim=1),
        "bare reshape": _bare_split(q, heads) @ _bare_split(k, heads).mT,
        "interleaved": _interleaved_split(q, heads) @ _interleaved_split(k, heads).mT,
    }


def _scale_fit(weights: torch.Tensor, scores: torch.Tensor) -> tuple[float | None, float]:
    """(c, relative residual) of the least-squares fit log w = scores / c + (a constant per row), over
    the weights that are not zero (masked), or None if nothing can be fitted."""
    kept = torch.isfinite(weights) & (weights > 1e-30)
    count = kept.sum(dim=-1, keepdim=True).clamp_min(1)
    log_w = torch.where(kept, weights.clamp_min(1e-300).log(), 0.0)
    centred_l = torch.where(kept, log_w - log_w.sum(dim=-1, keepdim=True) / count, 0.0)
    centred_s = torch.where(kept, scores - torch.where(kept, scores, 0.0).sum(dim=-1, keepdim=True) / count, 0.0)
    spread = float((centred_s * centred_s).sum())
    inv_c = float((centred_l * centred_s).sum()) / spread if spread > 1e-18 else 0.0
    if inv_c <= 0:
        return None, math.inf
    residual = float((centred_l - centred_s * inv_c).norm() / centred_l.norm().clamp_min(1e-12))
    return 1.0 / inv_c, residual


def _fitted_source(request: Message, response: Message) -> tuple[str, float] | None:
    """Which score source the student's weights are a softmax of, and at which scale. The softmax may
    run over the keys or the queries (the softmax check names that), so both are tried."""
    weights = _weights(request, response)
    for name, scores in _score_sources(_params(request), _x(request), int(request["heads"])).items():
        for w, s in ((weights, scores), (weights.mT, scores.mT)):
            c, residual = _scale_fit(w, s)
            if c is not None and residual <= FIT_RESIDUAL:
                return name, c
    return None


UNREAD = (
    "The grader could not read attention_weights(x) as a softmax over the keys of scaled q·k scores, head by head, "
    "so it cannot tell {what}. Fix what the other failed checks point to first; this check follows.")


def _head_scale_judge(request: Message, response: Message) -> None:
    fitted = _fitted_source(request, response)
    if fitted is None:
        raise JudgeFailure(UNREAD.format(what="how your scores are scaled"))
    c = fitted[1]
    dim, heads = int(request["dim"]), int(request["heads"])
    head_dim = dim // heads
    if abs(c / math.sqrt(head_dim) - 1) <= 1e-2:
        return
    labels = [
        (math.sqrt(dim), f"you divided by √D = √{dim}, the model's dimension. Each head's score q_h·k_h is a sum of "
                         f"only D/H = {head_dim} products, so its spread grows like √(D/H); dividing by √D shrinks "
                         f"every head's scores {math.sqrt(heads):.3g}× too much (√H) and flattens its softmax"),
        (1.0, "you did not scale the scores"),
        (float(head_dim), f"you divided by D/H = {head_dim} instead of its square root"),
        (float(dim), f"you divided by D = {dim}"),
        (1 / math.sqrt(head_dim), "you multiplied by √(D/H) instead of dividing"),
    ]
    label = next((text for value, text in labels if abs(c / value - 1) <= 2e-2), f"your scores are divided by {c:.3g}")
    raise JudgeFailure(f"With D = {dim} and H = {heads}, each head's scores must be divided by √(D/H) = "
                       f"√{head_dim} ≈ {math.sqrt(head_dim):.3g}, but {label}.")


HEAD_SOURCES = {
    "whole": "every head computes its scores from the whole of q and k, so all heads give the same weights and "
             "the layer is one head repeated H times.",
    "first": "every head uses the first head's slice of q and k, so all heads give the same weights.",
    "shifted": "head h uses entries h up to h + D/H of q and k, so neighbouring heads overlap: head h's slice starts "
               "at h·D/H, not at h.",
    "bare reshape": "your heads' q and k come from a bare reshape to (B, H, T, D/H), so a head's 'token' rows are "
                    "pieces of several tokens. Split with view(B, T, H, D/H) and .transpose(1, 2) (see split_heads).",
    "interleaved": "head h takes every H-th entry of q and k instead of its consecutive D/H entries. Split with "
                   "view(B, T, H, D/H) and .transpose(1, 2) (see split_heads).",
}


def _heads_independent_judge(request: Message, response: Message) -> None:
    fitted = _fitted_source(request, response)
    if fitted is None:
        raise JudgeFailure(UNREAD.format(what="which slice of q and k each head uses"))
    if fitted[0] != "own":
        raise JudgeFailure("Each head must attend with its own slice of q and k (head h: entries h·D/H up to "
                           f"(h+1)·D/H), but {HEAD_SOURCES[fitted[0]]}")


# --------------------------------------------------------------------------- softmax and mask

def _softmax_dim_judge(request: Message, response: Message) -> None:
    weights = _weights(request, response)
    if not bool(torch.isfinite(weights).all()):
        raise JudgeFailure("attention_weights(x) contains NaN or infinity with causal=False.")

    def ones(sums: torch.Tensor) -> bool:
        return bool(torch.allclose(sums, torch.ones_like(sums), atol=1e-4))

    if ones(weights.sum(dim=-1)):
        return
    if ones(weights.sum(dim=1)):
        raise JudgeFailure("Your weights sum to 1 across the heads (dim=1), not over the keys: the softmax made the "
                           "heads compete for each query-key pair. Each head is its own attention: every query "
                           "distributes its weight over the keys, softmax(dim=-1).")
    if ones(weights.sum(dim=-2)):
        raise JudgeFailure("Your weights sum to 1 down each column, over the queries (dim=-2), not along each row. "
                           "Each query distributes its attention over the keys: softmax(dim=-1).")
    raise JudgeFailure("Your weights do not sum to 1 over the keys in every head: apply softmax to the scaled "
                       "scores over the last dim (dim=-1).")


def _mask_judge(request: Message, response: Message) -> None:
    weights = _weights(request, response)
    seq_len, heads = weights.shape[-1], weights.shape[1]
    upper = reference.causal_mask(seq_len)
    if bool((~torch.isfinite(weights) & ~upper).any()):
        raise JudgeFailure("With causal=True some weights are NaN: a row lost every position it may see, the sign of "
                           "an inverted mask. Block only the later tokens (above the diagonal); a token always sees "
                           "itself.")
    # NaN only where the mask blocks (a softmax over another dim of blocked scores) is blocked all the same.
    weights = weights.nan_to_num(0.0)
    lower = torch.ones(seq_len, seq_len, dtype=torch.bool).tril(-1)
    leaking = [h for h in range(heads) if bool((weights[:, h][..., upper].abs() > 1e-6).any())]
    if leaking and len(leaking) < heads:
        masked = [h for h in range(heads) if h not in leaking]
        raise JudgeFailure(
            f"With causal=True {_heads_text(masked, 'blocks', 'block')} later tokens but "
            f"{_heads_text(leaking, 'still gives', 'still give')} them weight: the mask reaches only some heads. Fill "
            "the whole (B, H, T, T) scores with one (T, T) mask, scores.masked_fill(mask, float('-inf')): it "
            "broadcasts over the batch and every head. Do not mask a single head (scores[:, 0]).")
    if leaking:
        if bool((weights[..., lower] == 0).all()):
            raise JudgeFailure("With causal=True your weights sit above the diagonal instead of below it: the mask "
                               "is inverted. causal_mask() is True where a position is blocked, which is what "
                               "masked_fill expects; do not negate it (~mask) or build it with tril.")
        raise JudgeFailure("With causal=True no head blocks the later tokens: fill every head's scores above the "
                           "diagonal with -inf before the softmax, whenever self.causal is True.")
    if bool((weights.diagonal(dim1=-2, dim2=-1) == 0).any()):
        raise JudgeFailure("With causal=True a token gives zero weight to itself: the mask must block only the "
                           "tokens after it (triu with diagonal=1), not the diagonal.")


def _causal_flag_judge(request: Message, response: Message) -> None:
    weights = _weights(request, response)
    upper = reference.causal_mask(weights.shape[-1])
    if not bool((weights[..., upper] > 0).all()):
        raise JudgeFailure("With causal=False every token should also see the tokens after it, but some of your "
                           "weights above the diagonal are 0: the layer masks even when it was built with "
                           "causal=False. Apply the mask only if self.causal.")


# --------------------------------------------------------------------------- the value path and out_proj
# forward(x) = projection(path(weights, v)): the path mixes the values with the weights and merges the
# heads; the projection applies out_proj. Each of the two checks names mistakes of its own half and
# accepts any variant of the other half, so a bug is blamed once.

def _value_paths(weights: torch.Tensor, v: torch.Tensor) -> dict[str, torch.Tensor]:
    """The merged (B, T, D) mixtures: each head's slice of v with its own weights (right), or the
    mistakes ``values_per_head`` names."""
    heads = weights.shape[1]
    batch, seq_len, dim = v.shape
    bare_merge = lambda y: y.reshape(batch, seq_len, dim)  # noqa: E731
    return {
        "right": reference.merge_heads(weights @ reference.split_heads(v, heads)),
        "average": weights.mean(dim=1) @ v,
        "bare reshape": bare_merge(weights @ _bare_split(v, heads)),
        "bare split": reference.merge_heads(weights @ _bare_split(v, heads)),
        "bare merge": bare_merge(weights @ reference.split_heads(v, heads)),
        "interleaved split": reference.merge_heads(weights @ _interleaved_split(v, heads)),
    }


def _per_head_projection(params: dict, merged: torch.Tensor, heads: int) -> torch.Tensor:
    """Each head's piece through its own D/H × D/H diagonal block of out_proj (a misconception)."""
    weight, bias = params["out_proj.weight"], params["out_proj.bias"]
    size = weight.shape[0] // heads
    return torch.cat([merged[..., h * size:(h + 1) * size] @ weight[h * size:(h + 1) * size, h * size:(h + 1) * size].mT
                      + bias[h * size:(h + 1) * size] for h in range(heads)], dim=-1)


def _outputs(params: dict, x: torch.Tensor, weights: torch.Tensor) -> dict[tuple[str, str], torch.Tensor]:
    """Every (value path, projection) a forward may take from the given weights."""
    heads = weights.shape[1]
    v = reference.linear(params, "v_proj", x)
    project = lambda t: reference.linear(params, "out_proj", t)  # noqa: E731
    outputs = {}
    for path, merged in _value_paths(weights, v).items():
        outputs[(path, "once")] = project(merged)
        outputs[(path, "skipped")] = merged
        outputs[(path, "twice")] = project(project(merged))
        outputs[(path, "per head")] = _per_head_projection(params, merged, heads)
    for path, merged in _value_paths(weights, project(v)).items():
        outputs[(path, "before")] = merged
    return outputs


def _other_weights(request: Message) -> list[torch.Tensor]:
    """Weights a forward that computes its own might use: each head's scores at the usual scales."""
    params, x, heads = _params(request), _x(request), int(request["heads"])
    scores = reference.head_scores(params, x, heads)
    if bool(request["causal"]):
        scores = scores.masked_fill(reference.causal_mask(x.shape[-2]), float("-inf"))
    dim = x.shape[-1]
    return [(scores / c).softmax(dim=-1) for c in (1.0, math.sqrt(dim // heads), math.sqrt(dim), dim // heads)]


def _forward_path(request: Message, response: Message):
    """``(weights, value path, projection)`` the student's forward took, if the grader recognises it
    (weights: "returned" by attention_weights, or "own", computed anew), with the output and what the
    right path gives from the returned weights."""
    params, x = _params(request), _x(request)
    weights, out = _weights(request, response), _forward(request, response)
    right = _outputs(params, x, weights)[("right", "once")]
    for source, candidate_weights in [("returned", weights), *(("own", w) for w in _other_weights(request))]:
        for (path, projection), candidate in _outputs(params, x, candidate_weights).items():
            if close(out, candidate, FLOAT32_OUTPUT, FLOAT32_OUTPUT):
                return (source, path, projection), out, right
    return None, out, right


VALUE_PATH_MISTAKES = {
    "average": "forward mixes the whole of v with the heads' average weights. Each head mixes only its own slice of "
               "the values with its own weights: split v_proj(x) with split_heads, multiply by the weights, then "
               "merge_heads.",
    "bare reshape": "forward splits and joins the values with a bare reshape, so each head mixes pieces of several "
                    "tokens. Use split_heads and merge_heads (view, then transpose; transpose, then reshape).",
    "bare split": "forward splits the values with a bare reshape, so each head mixes pieces of several tokens. "
                  "Split with view(B, T, H, D/H), then .transpose(1, 2) (see split_heads).",
    "bare merge": "forward joins the heads with a bare reshape, so each output token collects pieces of several "
                  "tokens. Merge with .transpose(1, 2), then .reshape(B, T, D) (see merge_heads).",
    "interleaved split": "forward gives each head every H-th entry of the values instead of its consecutive D/H "
                         "entries, which merge_heads does not undo (see split_heads).",
}
OWN_WEIGHTS = ("forward does not use the weights attention_weights(x) returns: it computes other weights of its own. "
               "Let forward call attention_weights.")


OUT_PROJ_MISTAKES = {
    "skipped": "forward returns the merged heads without out_proj. The output projection comes once, after "
               "merge_heads: it mixes what the heads found into one D-dimensional vector per token.",
    "twice": "forward applies out_proj twice. It comes once, after merge_heads.",
    "per head": "each head's output went through its own D/H × D/H block of out_proj before the merge. out_proj is "
                "one D × D map applied once to the merged heads, so every output entry can combine every head; "
                "a block per head keeps the heads apart.",
    "before": "out_proj was applied to the values before the heads mixed them, not to the merged heads. Each head "
              "must mix its own slice of v_proj(x); out_proj comes once, after merge_heads, where it combines the "
              "heads' outputs.",
}


UNRECOGNISED_FORWARD = (
    "forward(x) should be out_proj(merge_heads(weights @ split_heads(v_proj(x)))) with the weights your "
    "attention_weights(x) returns, but it differs (largest difference {difference:.3g}). Let forward call "
    "attention_weights, mix each head's slice of v_proj(x) (not k_proj(x), not x) with that head's weights, and "
    "apply out_proj once, after merge_heads.")


def _forward_judge(half: str):
    """The judge of one half of forward's path: ``"values"`` (the weights attention_weights returns, each
    head's own slice of the values, merged right) or ``"projection"`` (out_proj once, after the merge)."""

    def judge(request: Message, response: Message) -> None:
        taken, out, right = _forward_path(request, response)
        if taken is None:
            raise JudgeFailure(UNRECOGNISED_FORWARD.format(difference=largest_difference(out, right)))
        source, path, projection = taken
        if half == "values" and source != "returned":
            raise JudgeFailure(OWN_WEIGHTS)
        if half == "values" and path != "right":
            raise JudgeFailure(VALUE_PATH_MISTAKES[path])
        if half == "projection" and projection != "once":
            raise JudgeFailure(OUT_PROJ_MISTAKES[projection])

    return judge


# --------------------------------------------------------------------------- one head

ONE_HEAD = ("With one head (H = 1) the layer must be the single-head attention of the first assignment: one head "
            "of dimension D, scores divided by √D. ")
SQUEEZE_HINT = ("A head axis of size 1 must stay: squeeze() drops every axis of size 1 (the heads when H = 1, the "
                "batch when B = 1). Use merge_heads, or squeeze(1) only where you mean it.")


def _one_head_judge(request: Message, response: Message) -> None:
    params, x, causal = _params(request), _x(request), bool(request["causal"])
    try:
        weights, out = _weights(request, response), _forward(request, response)
    except JudgeFailure as failure:
        raise JudgeFailure(f"{ONE_HEAD}{failure} {SQUEEZE_HINT}") from None
    expected_weights = reference.attention_weights(params, x, 1, causal)
    if not close(weights, expected_weights, FLOAT32_WEIGHTS):
        raise JudgeFailure(f"{ONE_HEAD}Your weights differ from it (largest difference "
                           f"{largest_difference(weights, expected_weights):.3g}).")
    expected = reference.forward(params, x, 1, causal)
    if not close(out, expected, FLOAT32_OUTPUT, FLOAT32_OUTPUT):
        raise JudgeFailure(f"{ONE_HEAD}Your weights agree with it, but forward(x) does not (largest difference "
                           f"{largest_difference(out, expected):.3g}).")


JUDGES = [
    CheckJudge("mh_shapes", _shapes_request, _shapes_judge),
    CheckJudge("mh_split_order", lambda seed: _request(seed, 2, 5, 12, 3, True), _split_judge),
    CheckJudge("mh_merge_order", lambda seed: _request(seed, 2, 5, 12, 3, True), _merge_judge),
    CheckJudge("mh_head_scale", lambda seed: _request(seed, 2, 6, 12, 3, False), _head_scale_judge),
    CheckJudge("mh_softmax_dim", lambda seed: _request(seed, 3, 6, 8, 2, False), _softmax_dim_judge),
    CheckJudge("mh_mask_every_head", lambda seed: _request(seed, 2, 7, 12, 3, True), _mask_judge),
    CheckJudge("mh_causal_flag", lambda seed: _request(seed, 2, 6, 12, 3, False), _causal_flag_judge),
    CheckJudge("mh_heads_independent", lambda seed: _request(seed, 2, 6, 12, 3, False), _heads_independent_judge),
    CheckJudge("mh_values_per_head", lambda seed: _request(seed, 2, 6, 12, 3, True), _forward_judge("values")),
    CheckJudge("mh_one_out_proj", lambda seed: _request(seed, 2, 6, 12, 3, True), _forward_judge("projection")),
    CheckJudge("mh_one_head", lambda seed: _request(seed, 2, 5, 8, 1, True), _one_head_judge),
]
