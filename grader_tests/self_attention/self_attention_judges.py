"""Requests and judges of the core notebook's checks (the graded ``SelfAttention``).

Trusted: runs in the grader's process, never in a sandbox. Each check isolates one idea so that a
failure names one misconception: judges compare the probe's raw tensors with ``reference`` or
with what the student's own attention must give (``attention_model``), never with anything
computed inside the sandbox.

Magnitudes. Unless a check says otherwise, weights are drawn so that the scaled scores have a
spread of about 2 (``reference.random_parameters``) and inputs are standard normal: a softmax is
peaked enough to tell a wrong scale or dim apart, and nothing is anywhere near float32's range,
so any correct idiom passes. ``large_scores`` is the one check that uses large scores, on purpose.
"""

from __future__ import annotations

import math

import torch

from . import reference
from .attention_model import SCORE_SOURCES, Layer, fit_attention, fit_layer, log_ratio_fit
from ..judging import (CheckJudge, JudgeFailure, Message, close, expect_shape, fetch, fetch_tensor, generator,
                      largest_difference, shape_text)
from ..probing import LAYER, error_key
from ..reasons import failure_phrase
from .self_attention_probes import LARGE_PARAM_PREFIX, PARAM_PREFIX

# Tolerances against float64 predictions: float32 results (errors ~1e-6) and float64 results (~1e-14).
FLOAT32_WEIGHTS, FLOAT32_OUTPUT = 2e-5, 1e-4
FLOAT64_WEIGHTS, FLOAT64_OUTPUT = 1e-11, 1e-10

DEPENDS = (
    "This check compares your layer with the attention it computes on ordinary inputs, and the grader could not "
    "recognise that attention: attention_weights(x) should be a softmax of scaled q·k scores and forward(x) should "
    "mix values with those same weights. Fix what the other failed checks point to first; this check follows."
)


# --------------------------------------------------------------------------- requests

def _request(seed: int, batch: int, seq_len: int, dim: int, causal: bool, dtype=torch.float32) -> Message:
    gen = generator(seed)
    params = reference.random_parameters(dim, gen, dtype=torch.float64)
    x = torch.randn(batch, seq_len, dim, generator=gen, dtype=torch.float64)
    message: Message = {"dim": dim, "causal": causal, "x": x.to(dtype)}
    message.update({PARAM_PREFIX + k: v.to(dtype) for k, v in params.items()})
    return message


def _params(request: Message, prefix: str = PARAM_PREFIX) -> dict[str, torch.Tensor]:
    """The parameters the student's layer was loaded with, in float64 (exactly the same values)."""
    return {k[len(prefix):]: v.to(torch.float64) for k, v in request.items() if k.startswith(prefix)}


def _x(request: Message, key: str = "x") -> torch.Tensor:
    return request[key].to(torch.float64)


def _with_future_changed(request: Message, keep: int, seed: int) -> Message:
    """Add ``x_changed``: x with every token after position ``keep`` redrawn."""
    x = request["x"]
    changed = x.clone()
    gen = generator(seed + 1)
    changed[:, keep + 1 :] = torch.randn(changed[:, keep + 1 :].shape, generator=gen, dtype=torch.float64).to(x.dtype)
    request["x_changed"] = changed
    request["keep"] = keep
    return request


# --------------------------------------------------------------------------- shared judge steps

def _weights(request: Message, response: Message, key: str = "weights", x_key: str = "x") -> torch.Tensor:
    x = request[x_key]
    weights = fetch_tensor(response, key, "attention_weights(x)")
    expect_shape(weights, (x.shape[0], x.shape[1], x.shape[1]), "attention_weights(x)")
    return weights.to(torch.float64)


def _forward(request: Message, response: Message, key: str = "forward", x_key: str = "x") -> torch.Tensor:
    out = fetch_tensor(response, key, "forward (calling layer(x))")
    expect_shape(out, tuple(request[x_key].shape), "layer(x)")
    return out.to(torch.float64)


def _close(a: torch.Tensor, b: torch.Tensor, tol: float = 1e-4) -> bool:
    return a.shape == b.shape and bool(torch.allclose(a, b, rtol=tol, atol=tol))


def _fitted_layer(request: Message, response: Message, *, weights_key="weights", forward_key="forward",
                  x_key="x", prefix=PARAM_PREFIX, float64=False) -> Layer:
    """The student's attention, read from their weights and output at ordinary inputs (or DEPENDS)."""
    weights = _weights(request, response, weights_key, x_key)
    out = _forward(request, response, forward_key, x_key)
    tolerance = (1e-6, 1e-5) if float64 else (FLOAT32_WEIGHTS, FLOAT32_OUTPUT)
    layer = fit_layer(weights, out, _params(request, prefix), _x(request, x_key), atol_weights=tolerance[0],
                      atol_forward=tolerance[1], rtol_forward=tolerance[1])
    if layer is None:
        raise JudgeFailure(DEPENDS)
    return layer


# --------------------------------------------------------------------------- shapes

SHAPE_CASES = [  # (batch, seq_len, dim, causal)
    (2, 5, 8, True),
    (1, 1, 4, True),
    (3, 7, 6, False),
    (2, 1, 3, False),
    (1, 12, 16, True),
]


def _shapes_request(seed: int) -> Message:
    gen = generator(seed)
    message: Message = {"cases": [list(case) for case in SHAPE_CASES]}
    for i, (b, t, d, _) in enumerate(SHAPE_CASES):
        message[f"x{i}"] = torch.randn(b, t, d, generator=gen)
    return message


def _shapes_judge(request: Message, response: Message) -> None:
    hint = (
        " Check which dims you transpose: for batched keys use k.transpose(-2, -1) or k.mT "
        "(k.T reverses every dim of a 3-D tensor), and take T and D from x.shape rather than fixed numbers."
    )
    for i, (b, t, d, causal) in enumerate(request["cases"]):
        where = f"for x of shape {shape_text((b, t, d))} with causal={causal}"
        for key, what, shape in (
            (f"forward{i}", "layer(x)", (b, t, d)),
            (f"weights{i}", "attention_weights(x)", (b, t, t)),
        ):
            try:
                value = fetch_tensor(response, key, what)
            except JudgeFailure as failure:
                raise JudgeFailure(f"{failure} ({where}).{hint}") from None
            if tuple(value.shape) != shape:
                raise JudgeFailure(
                    f"{where}, {what} returned shape {shape_text(value.shape)}; expected "
                    f"{shape_text(shape)}: forward keeps (B, T, D) and the weights are (B, T, T).{hint}"
                )


# --------------------------------------------------------------------------- √D scale

def _scale_judge(request: Message, response: Message) -> None:
    weights = _weights(request, response)
    if not torch.isfinite(weights).all():
        raise JudgeFailure("attention_weights(x) contains NaN or infinity, so no scale can be read from it.")
    x = _x(request)
    dim, seq_len = x.shape[-1], x.shape[-2]
    scores = reference.raw_scores(_params(request), x)
    log_w = _log_weights(weights)
    fits = [log_ratio_fit(log_w, scores, along_rows) for along_rows in (True, False)]
    c, residual, _ = min(fits, key=lambda fit: fit[1])
    if c is None or residual > 1e-2:
        raise JudgeFailure(
            "Your weights are not softmax(scores / c) for any single constant c, with scores = q_proj(x) @ k_proj(x)ᵀ. "
            "Compute the scores from the query and key projections of x, divide by √D, then apply softmax."
        )
    expected = math.sqrt(dim)
    if abs(c / expected - 1) <= 1e-2:
        return
    labels = [
        (1.0, "you did not scale the scores at all"),
        (float(dim), f"you divided by D = {dim} instead of √D"),
        (math.sqrt(seq_len), f"you divided by √T = √{seq_len} (the sequence length) instead of √D"),
        (float(seq_len), f"you divided by T = {seq_len} (the sequence length)"),
        (1.0 / expected, "you multiplied by √D instead of dividing"),
    ]
    label = next((text for value, text in labels if abs(c / value - 1) <= 2e-2), f"your scores are divided by {c:.3g}")
    raise JudgeFailure(
        f"With D = {dim}, scores must be divided by √D = {expected:.3g}, but {label}. "
        "Dot products of D-dimensional vectors grow like √D; without the division the softmax saturates "
        "and its gradients vanish."
    )


# --------------------------------------------------------------------------- which q and k a score pairs

PAIRING_FIT = 1e-2  # relative residual of log_ratio_fit: float32 rounding gives ~1e-6, a wrong pairing ~1

UNREAD_PAIRING = (
    "The grader could not read attention_weights(x) as a softmax of dot products between queries and keys, at any "
    "scale, so it cannot tell which query and key each score pairs. Fix what the other failed checks point to "
    "first; this check follows."
)
TRANSPOSED = (
    "Your scores are transposed: row i should hold query i's scores against every key (scores[b, i, j] = q_i·k_j), "
    "but your row i holds key i's scores against every query (k_i·q_j), so each token weighs the others by how "
    "much they look for it instead of by what it looks for. Compute q @ k.transpose(-2, -1) (or q @ k.mT); with "
    "einsum, keep the query's index first in the output: 'btd,bsd->bts'."
)
SCRAMBLED_KEYS = (
    "Your scores pair query i with keys that are not the tokens' keys: `view` reinterprets memory; use "
    "`transpose`. k.view(B, D, T) (or k.reshape(B, D, T)) keeps k's numbers in memory order and cuts them into "
    "rows of length T, so each column mixes pieces of different tokens' keys. k.transpose(-2, -1) (or k.mT) swaps "
    "the last two dims and keeps every key whole."
)


def _score_candidates(params: dict, x: torch.Tensor) -> dict[str, list[torch.Tensor]]:
    """Raw scores (B, T, T) each pairing gives: the right ones (any source ``attention_model`` knows, the
    symmetric ones included, where the order cannot be told), transposed ones, and keys cut out of memory."""
    batch, seq_len, dim = x.shape
    right = [scores_of(params, x) for scores_of in SCORE_SOURCES.values()]
    projections = [(reference.linear(params, "q_proj", x), reference.linear(params, "k_proj", x)),
                   (x @ params["q_proj.weight"].mT, x @ params["k_proj.weight"].mT)]
    scrambled = [q @ k.reshape(batch, dim, seq_len) for q, k in projections]
    return {
        "right": right,
        "transposed": [scores.mT for scores in right[:2]],
        "scrambled": scrambled + [scores.mT for scores in scrambled],
    }


def _log_weights(weights: torch.Tensor) -> torch.Tensor:
    """log w, with -inf where a weight is zero (masked), NaN or infinite, so that fits skip it."""
    return torch.where(weights > 1e-30, weights.clamp_min(1e-300).log(), torch.full_like(weights, -math.inf))


def _pairing_judge(request: Message, response: Message) -> None:
    """The weights, read as a softmax over either dim of scores / c for any c > 0 (so any scale and
    softmax dim pass, and masked positions are skipped), must come from scores whose row i pairs q_i
    with every k_j. Each candidate pairing is fitted; the right ones are tried first."""
    weights = _weights(request, response)
    log_w = _log_weights(weights)

    def fits(scores: torch.Tensor) -> bool:
        return min(log_ratio_fit(log_w, scores, along_rows)[1] for along_rows in (True, False)) <= PAIRING_FIT

    candidates = _score_candidates(_params(request), _x(request))
    if any(fits(scores) for scores in candidates["right"]):
        return
    if any(fits(scores) for scores in candidates["transposed"]):
        raise JudgeFailure(TRANSPOSED)
    if any(fits(scores) for scores in candidates["scrambled"]):
        raise JudgeFailure(SCRAMBLED_KEYS)
    raise JudgeFailure(UNREAD_PAIRING)


# --------------------------------------------------------------------------- softmax dim

def _softmax_dim_judge(request: Message, response: Message) -> None:
    weights = _weights(request, response)
    if not torch.isfinite(weights).all():
        raise JudgeFailure("attention_weights(x) contains NaN or infinity with causal=False.")
    ones = lambda t: bool(torch.allclose(t, torch.ones_like(t), atol=1e-4))
    if ones(weights.sum(dim=-1)):
        return
    if ones(weights.sum(dim=-2)):
        raise JudgeFailure(
            "Your weights sum to 1 down each column, not along each row: the softmax ran over the query "
            "positions (dim=-2). Each query distributes its attention over the keys, so use softmax(dim=-1)."
        )
    if weights.shape[0] > 1 and ones(weights.sum(dim=0)):
        raise JudgeFailure(
            "Your weights sum to 1 across the batch (dim=0): the softmax mixed different sequences. "
            "Normalise over the key positions with softmax(dim=-1)."
        )
    raise JudgeFailure(
        "Your weights do not sum to 1 along any dimension: apply softmax to the scaled scores, over the keys (dim=-1)."
    )


# --------------------------------------------------------------------------- mask checks

def _mask_rule(request: Message, weights: torch.Tensor) -> str:
    """Which positions the student's mask blocks: read from their attention when the grader recognises
    it (whatever its scale or softmax dim), else from where their weights are exactly zero."""
    attention = fit_attention(weights, _params(request), _x(request), atol=FLOAT32_WEIGHTS)
    if attention is not None:
        return "none" if attention.fill == 0.0 else attention.mask  # a 0-filled score still gets weight
    if not bool(torch.isfinite(weights).all()):
        return "past and self"  # a row with every position blocked: the usual sign of an inverted mask
    seq_len = weights.shape[-1]
    zero = weights == 0
    upper = torch.ones(seq_len, seq_len, dtype=torch.bool).triu(1)
    above, diagonal = bool(zero[..., upper].all()), bool(zero[:, 1:].diagonal(offset=1, dim1=-2, dim2=-1).all())
    if above:
        return "future and self" if diagonal else "future"
    lower = torch.ones(seq_len, seq_len, dtype=torch.bool).tril(-1)
    return "past and self" if bool(zero[..., lower].all()) else "none"


def _mask_polarity_judge(request: Message, response: Message) -> None:
    rule = _mask_rule(request, _weights(request, response))
    if rule == "future":
        return
    if rule == "future and self":
        raise JudgeFailure(
            "With causal=True a token gets zero weight on itself: your mask also blocks the diagonal "
            "(and the first token, which may only see itself, is left with nothing). Position t may attend "
            "to positions 0..t, itself included: causal_mask uses triu with diagonal=1."
        )
    if rule in ("past and self", "past"):
        raise JudgeFailure(
            "With causal=True your weights sit above the diagonal instead of below it (or a row is NaN because "
            "every position in it was blocked): the mask is inverted. causal_mask() is True where a position is "
            "blocked, which is what masked_fill expects; do not negate it (~mask) or build it with tril."
        )
    raise JudgeFailure(
        "With causal=True your weights above the diagonal are not zero: position t can see later positions. "
        "Give every score with s > t the value -inf before the softmax (masked_fill with causal_mask()), "
        "and do it whenever self.causal is True."
    )


def _no_future_leak_judge(request: Message, response: Message) -> None:
    """Relational: two raw outputs of the student's forward, on x and on x with its later tokens redrawn.
    A notebook rewriting the reply could copy one prefix onto the other, but it never sees this reply's
    layout (the probe code arrives after every student cell ran and nothing printed after that reaches
    the notebook), so it would have to guess blind which tensors to touch; the fix is one masked_fill."""
    out = _forward(request, response)
    out_changed = _forward(request, response, "forward_changed")
    keep = int(request["keep"])
    if not torch.allclose(out[:, : keep + 1], out_changed[:, : keep + 1], rtol=1e-5, atol=1e-5, equal_nan=True):
        raise JudgeFailure(
            f"Changing only the tokens after position {keep} changed your outputs at positions 0..{keep}: "
            "information leaks from the future. With causal=True, block every score with s > t before the softmax."
        )


def _mask_before_softmax_judge(request: Message, response: Message) -> None:
    weights = _weights(request, response)
    finite_rows = torch.isfinite(weights).all(dim=-1)
    if int(finite_rows.sum()) < weights.shape[0] * (weights.shape[1] - 1):
        raise JudgeFailure("With causal=True most rows of your weights are NaN; see the mask checks.")
    row_sums = weights.sum(dim=-1)[finite_rows]
    if bool(torch.allclose(row_sums, torch.ones_like(row_sums), atol=1e-4)):
        return
    if torch.isfinite(weights).all():
        col_sums = weights.sum(dim=-2)
        if bool(torch.allclose(col_sums, torch.ones_like(col_sums), atol=1e-4)):
            return  # normalised over the other dim, but after masking: the softmax-dim check covers that
    raise JudgeFailure(
        f"With causal=True your rows sum to between {float(row_sums.min()):.3f} and {float(row_sums.max()):.3f}, "
        "not 1: the future was zeroed after the softmax. Fill blocked scores with -inf before the softmax, "
        "so each row's probability is spread over the positions it may see."
    )


def _causal_flag_judge(request: Message, response: Message) -> None:
    """Relational, like ``_no_future_leak_judge``: raw weights and two raw outputs of the student's layer."""
    weights = _weights(request, response)
    seq_len = weights.shape[-1]
    upper = torch.ones(seq_len, seq_len, dtype=torch.bool).triu(1)
    if not bool((weights[..., upper] > 1e-12).any()):
        raise JudgeFailure(
            "With causal=False your weights above the diagonal are all zero: the layer masks the future even "
            "when it should not. Apply the mask only if self.causal is True."
        )
    out = _forward(request, response)
    out_changed = _forward(request, response, "forward_changed")
    if torch.allclose(out[:, 0], out_changed[:, 0], rtol=1e-6, atol=1e-7):
        raise JudgeFailure(
            "With causal=False, forward's output at position 0 does not change when later tokens change: "
            "forward masks regardless of self.causal."
        )


# --------------------------------------------------------------------------- value path / out_proj

def _value_path_judge(request: Message, response: Message) -> None:
    out = _forward(request, response)
    x = _x(request)
    params = _params(request)
    lin = lambda name, t: reference.linear(params, name, t)
    expected = lin("out_proj", lin("v_proj", x))
    if _close(out, expected):
        return
    if not torch.isfinite(out).all():
        raise JudgeFailure(
            "For a sequence of one token your output is NaN: its only position was masked. "
            "A token must always be able to attend to itself (see the mask checks)."
        )
    diagnoses = [
        (lin("v_proj", x), "forward skips the output projection: return self.out_proj(weights @ v)"),
        (lin("out_proj", lin("k_proj", x)), "forward mixes the keys instead of the values: use v = self.v_proj(x)"),
        (lin("out_proj", lin("q_proj", x)), "forward mixes the queries instead of the values: use v = self.v_proj(x)"),
        (lin("out_proj", x), "forward mixes the raw input instead of v = self.v_proj(x)"),
        (x, "forward returns its input unchanged"),
    ]
    for candidate, text in diagnoses:
        if _close(out, candidate):
            raise JudgeFailure(f"For a single token, the output must be out_proj(v_proj(x)), but {text}.")
    raise JudgeFailure(
        "For a single token (whose only weight is 1), the output must be out_proj(v_proj(x)); yours is not. "
        "forward should return self.out_proj(weights @ self.v_proj(x))."
    )


def _same_computation_judge(request: Message, response: Message) -> None:
    weights = _weights(request, response)
    out = _forward(request, response)
    x = _x(request)
    params = _params(request)
    expected = reference.linear(params, "out_proj", weights @ reference.linear(params, "v_proj", x))
    if not _close(out, expected):
        raise JudgeFailure(
            "forward(x) is not out_proj(attention_weights(x) @ v_proj(x)): the two methods compute attention "
            "differently, so the weights you plot are not the ones forward uses. Let forward call attention_weights."
        )


# --------------------------------------------------------------------------- gradients

def _gradient_request(seed: int) -> Message:
    message = _request(seed, 2, 5, 8, True)
    message["upstream"] = torch.randn(2, 5, 8, generator=generator(seed + 7))
    return message


def _gradients_judge(request: Message, response: Message) -> None:
    """The reply carries the gradients themselves; they must equal, within float32 rounding, the gradients
    of <upstream, forward(x)> that the student's own attention implies (fitted from their raw weights and
    output, then differentiated here in float64). A reply whose gradients were filled in, rescaled or
    copied from elsewhere does not match them: matching means running a connected autograd graph of
    that attention, which is the fix itself."""
    forward_error = response.get(error_key("forward"))
    if forward_error is not None and error_key(LAYER) not in response:
        if "does not require grad" in forward_error or "does not have a grad_fn" in forward_error:
            raise JudgeFailure(
                "No gradient reaches anything: your output is cut off from the autograd graph. "
                "Avoid .detach(), .numpy()/.item() round trips, .data and torch.no_grad() inside forward."
            )
    layer = _fitted_layer(request, response)
    params = {name: value.clone().requires_grad_(True) for name, value in _params(request).items()}
    x = _x(request).clone().requires_grad_(True)
    (layer.forward(params, x) * request["upstream"].to(torch.float64)).sum().backward()
    expected = {"x": x.grad, **{name: params[name].grad for name in reference.PARAMETER_NAMES}}
    cut, wrong = [], []
    for name, want in expected.items():
        want = torch.zeros_like(x if name == "x" else params[name]) if want is None else want
        got = response.get(f"grad.{name}")
        if not isinstance(got, torch.Tensor) or tuple(got.shape) != tuple(want.shape):
            got = torch.zeros_like(want)
        scale = float(want.abs().max())
        if close(got, want, atol=1e-4 * max(1.0, scale), rtol=1e-3):
            continue
        (cut if float(got.abs().max()) == 0.0 else wrong).append("the input x" if name == "x" else name)
    if cut:
        raise JudgeFailure(
            f"No gradient reaches {', '.join(cut)}, although your forward depends on it. Every step from the "
            "projections to the output must stay in the autograd graph: avoid .detach(), NumPy round trips, "
            ".data and torch.no_grad() in forward and attention_weights."
        )
    if wrong:
        raise JudgeFailure(
            f"The gradient of {', '.join(wrong)} is not the gradient of what your forward computes: part of the "
            "computation is hidden from autograd (.data, .detach() on a part of it, values copied in place). "
            "Compute the output from the projections with ordinary tensor operations."
        )


# --------------------------------------------------------------------------- input unchanged

def _input_unchanged_judge(request: Message, response: Message) -> None:
    """Whether the input changed can only be seen inside the sandbox, so the reply carries the raw input
    tensor as it is after each call, and the judge compares it bit for bit with the x it sent.

    What a forger could fake: a notebook that rewrites the reply could put the original x back in its
    place. What it could not: it never sees this reply's layout (the probe code arrives after every
    student cell ran, and nothing printed from then on reaches the notebook), so it would have to find,
    blind, which of several tensors of x's shape to replace, without touching the outputs the other
    checks read. Forging therefore costs far more than the fix, which is to write ``x = x + …`` (or
    any out-of-place operation) instead of ``x += …``, ``x.copy_(…)`` or ``x.data[...] = …``."""
    x = request["x"]
    for key, call in (("x_after_forward", "layer(x)"), ("x_after_weights", "layer.attention_weights(x)")):
        after = fetch_tensor(response, key, "the input after the call")
        if after.dtype != x.dtype or not torch.equal(after, x):
            raise JudgeFailure(
                f"Calling {call} changed its input x in place (for example x += …, x.mul_(…), x.copy_(…) or "
                "x.data[...] = …). The caller still needs x: use out-of-place operations on x."
            )
    fetch(response, "forward", "forward (calling layer(x))")
    fetch(response, "weights", "attention_weights(x)")


# --------------------------------------------------------------------------- float64

FLOAT64_HINT = (
    "Avoid hard-coded float32 (.float(), dtype=torch.float32, torch.tensor(D).sqrt() — a float32 tensor — or "
    "softmax(..., dtype=torch.float32)); build helper tensors with dtype=x.dtype, or use Python numbers (math.sqrt)."
)


def _float64_request(seed: int) -> Message:
    return _request(seed, 2, 5, 8, True, dtype=torch.float64)


def _float64_judge(request: Message, response: Message) -> None:
    """Inputs and weights are float64 and D = 8 (√8 is not exact in float32). The reply's tensors are
    compared with the float64 attention the student's own weights describe, at float64 tolerance
    (1e-11 on the weights, 1e-10 on the output): a computation that runs in float32 anywhere and casts
    back is off by about 1e-7 and fails, whatever dtype its result is labelled with."""
    for key, what in (("weights", "attention_weights(x)"), ("forward", "layer(x)")):
        try:
            value = fetch_tensor(response, key, f"{what} with float64 input")
        except JudgeFailure as failure:
            raise JudgeFailure(f"{failure} {FLOAT64_HINT}") from None
        if value.dtype != torch.float64:
            raise JudgeFailure(f"For float64 input, {what} returned {value.dtype}. {FLOAT64_HINT}")
    layer = _fitted_layer(request, response, float64=True)
    params, x = _params(request), _x(request)
    weights, out = response["weights"], response["forward"]
    expected_weights = layer.weights(params, x)
    expected_out = layer.forward(params, x)
    if close(weights, expected_weights, FLOAT64_WEIGHTS) and close(out, expected_out, FLOAT64_OUTPUT, FLOAT64_OUTPUT):
        return
    worst = max(largest_difference(weights, expected_weights), largest_difference(out, expected_out))
    raise JudgeFailure(
        f"Your float64 results differ from float64 attention by up to {worst:.1e}, about float32's precision: part "
        f"of the computation ran in float32 and was cast back. {FLOAT64_HINT}"
    )


# --------------------------------------------------------------------------- large scores

LARGE_DIM, LARGE_T = 8, 8
LARGE_SCALED_BOUND = 4000.0  # |scores / √D| stays below this: thousands, far from float32's range
FLOAT32_EXP_OVERFLOW, FLOAT32_EXP_UNDERFLOW = 88.0, 104.0  # exp(88.7) = inf, exp(-103.9) = 0 in float32


def _nan_rows(scores: torch.Tensor) -> dict[str, torch.Tensor]:
    """The rows each unsafe softmax over the keys turns into NaN or inf, given scaled scores (…, B, T, T)
    of one case (or of several, along leading dims)."""
    visible = scores.masked_fill(reference.causal_mask(scores.shape[-1]), -math.inf)
    visible_max = visible.max(dim=-1).values
    whole_case = visible_max.flatten(-2).max(dim=-1).values[..., None, None]
    return {
        "exp without the row maximum": (visible_max > FLOAT32_EXP_OVERFLOW) | (visible_max < -FLOAT32_EXP_UNDERFLOW),
        "maximum or softmax before the mask": scores.max(dim=-1).values - visible_max > FLOAT32_EXP_UNDERFLOW,
        "one maximum for the whole tensor": whole_case - visible_max > FLOAT32_EXP_UNDERFLOW,
    }


NAN_MESSAGES = {
    "exp without the row maximum": (
        "With scores in the hundreds, exp(score) overflows float32 (beyond about 88) and inf / inf is NaN: your "
        "softmax by hand does not subtract each row's largest score first. Use torch.softmax (it does), or "
        "subtract scores.amax(dim=-1, keepdim=True) after masking and before exp."),
    "maximum or softmax before the mask": (
        "In rows whose largest score sits in a masked (future) position, every visible weight underflowed to 0 and "
        "the row became 0 / 0 = NaN: the softmax, or the maximum it subtracts, was taken before the mask. Fill "
        "the blocked scores with -inf first, then take the softmax of what is left."),
    "one maximum for the whole tensor": (
        "Rows whose scores all lie far below the largest score of the whole tensor underflowed to 0 / 0 = NaN: "
        "you subtracted one maximum for everything. Subtract each row's own maximum "
        "(amax(dim=-1, keepdim=True)), or use torch.softmax."),
}


def _hostile(scaled: torch.Tensor) -> torch.Tensor:
    """For candidate cases of scaled scores (K, B, T, T): which exercise every unsafe idiom while a
    correct float32 answer stays exact on them."""
    blocked = reference.causal_mask(scaled.shape[-1])
    visible = scaled.masked_fill(blocked, -math.inf)
    future = scaled.masked_fill(~blocked, -math.inf)
    top2 = visible[..., 1:, :].topk(2, dim=-1).values  # rows with at least two visible positions
    visible_max = visible.max(dim=-1).values
    naive, before_mask, one_maximum = (rows.flatten(1) for rows in _nan_rows(scaled).values())
    every = lambda t: t.flatten(1).all(dim=1)
    some = lambda t: t.flatten(1).any(dim=1)
    return (
        every(scaled.abs() <= LARGE_SCALED_BOUND)
        # every softmax is one-hot to 1e-13, so float32 rounding of scores in the thousands cannot matter
        & every(top2[..., 0] - top2[..., 1] >= 30)
        # a finite fill value like -1000 outranks a row whose visible scores are all below -1500
        & some(visible_max < -1500)
        # a naive exp overflows
        & some(visible_max > 100)
        # a row's largest score lies in the future by far: a softmax or maximum before the mask leaves 0 / 0
        & some(future.max(dim=-1).values - visible_max > 200)
        # the rows each unsafe softmax turns into NaN differ, so a failure can name which one it was
        & some(naive != before_mask) & some(naive != one_maximum) & some(before_mask != one_maximum)
    )


def _large_case(gen: torch.Generator) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
    """Parameters and input (float32) of the large case, drawn 256 candidates at a time."""
    candidates, dim = 256, LARGE_DIM
    while True:
        params = {}
        for name in reference.PROJECTIONS:
            params[f"{name}.weight"] = torch.randn(candidates, 1, dim, dim, generator=gen,
                                                   dtype=torch.float64) / math.sqrt(dim)
            params[f"{name}.bias"] = torch.randn(candidates, 1, 1, dim, generator=gen, dtype=torch.float64) * 0.1
        x = torch.randn(candidates, 2, LARGE_T, dim, generator=gen, dtype=torch.float64)
        gain = (9000.0 / reference.raw_scores(params, x).abs().flatten(1).max(dim=1).values).sqrt()[:, None, None, None]
        for name in ("q_proj", "k_proj"):
            params[f"{name}.weight"] = params[f"{name}.weight"] * gain
            params[f"{name}.bias"] = params[f"{name}.bias"] * gain
        params = {k: v.to(torch.float32) for k, v in params.items()}  # exactly what the student's layer gets
        x = x.to(torch.float32)
        exact = {k: v.to(torch.float64) for k, v in params.items()}
        good = _hostile(reference.raw_scores(exact, x.to(torch.float64)) / math.sqrt(dim)).nonzero()
        if good.numel():
            k = int(good[0])
            return {name: value[k, 0, 0] if name.endswith("bias") else value[k, 0] for name, value in
                    params.items()}, x[k]


def _large_scores_request(seed: int) -> Message:
    """An ordinary case (for reading which attention the layer computes), and a large one: the same
    class with query and key weights scaled up so that the scaled scores reach the hundreds and the
    thousands (|scores / √D| ≤ 4000, far inside float32), drawn until every row is one-hot with a
    margin of 30 and the case contains a row whose visible scores are all below -1500, a row whose
    largest visible score exceeds 100, and a row whose largest score is masked by more than 200. On
    it a correct float32 answer is exact (after the usual max subtraction no exponent is near exp's
    range, and one-hot rows do not feel the rounding of scores in the thousands), while a naive exp
    overflows, a fill value like -1000 leaks and a softmax taken before the mask gives 0 / 0. A fill
    value is exactly right at these magnitudes when it lies more than 104 (where float32's exp
    underflows) below every score a row sees: -1e4, -1e9 and the dtype's minimum are; -1000 is not."""
    message = _request(seed, 2, 5, LARGE_DIM, True)
    params, x = _large_case(generator(seed + 101))
    message["x_large"] = x
    message.update({LARGE_PARAM_PREFIX + k: v for k, v in params.items()})
    return message


def _nan_rows_explained(bad_rows: torch.Tensor, scores: torch.Tensor) -> str | None:
    """Which unsafe softmax leaves NaN or inf in exactly ``bad_rows`` of the student's own scaled scores."""
    return next((NAN_MESSAGES[name] for name, rows in _nan_rows(scores).items() if torch.equal(bad_rows, rows)),
                None)


def _large_scores_judge(request: Message, response: Message) -> None:
    """See ``_large_scores_request`` for the magnitudes. The layer's attention is read at ordinary scores
    (any scale, mask or softmax dim, so a bug another check names is not blamed twice), then the large
    case must give what that same attention gives, computed here in float64."""
    layer = _fitted_layer(request, response)
    large_params, x_large = _params(request, LARGE_PARAM_PREFIX), _x(request, "x_large")
    weights = _weights(request, response, "weights_large", "x_large")
    expected = layer.weights(large_params, x_large)
    if not close(weights, expected, 1e-4):
        finite = torch.isfinite(weights)
        if not bool(finite.all()):
            attention = layer.attention
            own_scores = (SCORE_SOURCES[attention.scores](large_params, x_large)
                          / attention.scale_for(LARGE_DIM, LARGE_T))
            text = _nan_rows_explained(~finite.all(dim=-1), own_scores) if attention.axis == -1 else None
            raise JudgeFailure(text or (
                "With scores in the thousands your weights contain NaN or infinity. Mask the scores with -inf, "
                "then use torch.softmax, which subtracts each row's maximum before exp."))
        blocked = layer.attention.expected_zeros(weights.shape[-1]).expand_as(weights)
        if bool((weights[blocked] > 1e-6).any()):
            raise JudgeFailure(
                "With scores in the thousands the masked (future) positions get weight: a finite fill value such "
                "as -1000, or an offset such as -100 added to the blocked scores, can be larger than every score a "
                "row may see. Fill with float('-inf') or torch.finfo(scores.dtype).min; a constant is only safe "
                "far below every possible score (-1e9 is).")
        raise JudgeFailure(
            f"With scores in the thousands your weights differ from the softmax your layer computes at ordinary "
            f"scores (largest difference {largest_difference(weights, expected):.3g}). Guards such as clamping the "
            "scores change the result there: mask the scores with -inf, then use torch.softmax.")
    out = _forward(request, response, "forward_large", "x_large")
    expected_out = layer.forward(large_params, x_large)
    if not close(out, expected_out, FLOAT32_OUTPUT, FLOAT32_OUTPUT):
        raise JudgeFailure(
            "attention_weights(x) stays right with scores in the thousands but forward(x) does not "
            f"(largest difference {largest_difference(out, expected_out):.3g}): forward computes its own weights in "
            "a way that breaks there. Let forward call attention_weights.")


# --------------------------------------------------------------------------- one layer, called again

REUSED_LENGTHS = (5, 12, 6)  # a short T, a longer T, then a T after .double()


def _layer_reused_request(seed: int) -> Message:
    message = _request(seed, 2, REUSED_LENGTHS[0], 8, True)
    gen = generator(seed + 3)
    message["x1"] = message["x"]
    message["x2"] = torch.randn(2, REUSED_LENGTHS[1], 8, generator=gen)
    message["x3"] = torch.randn(2, REUSED_LENGTHS[2], 8, generator=gen, dtype=torch.float64)
    return message


def _layer_reused_judge(request: Message, response: Message) -> None:
    """A fresh layer at T = 5, then the same object at T = 12, then ``.double()`` and T = 6 in float64.
    Each call must give what the attention read from the first call gives (float32 tolerance, then
    float64 tolerance after ``.double()``), so a mask, buffer, scale or dtype kept from the first call
    shows up."""
    layer = _fitted_layer(request, response, weights_key="weights1", forward_key="forward1", x_key="x1")
    params = _params(request)
    remembered = ("Something made at the first call is being reused: a mask, buffer or scale sized or typed for "
                  "it. Build such tensors from the x of each call (x.shape, dtype=x.dtype, device=x.device), keep "
                  "one per length, or register a buffer long enough and slice it.")
    t1, t2, t3 = REUSED_LENGTHS
    for key, what in (("weights2", "attention_weights(x)"), ("forward2", "layer(x)")):
        error = response.get(error_key(key))
        if error is not None:
            raise JudgeFailure(f"Called first with T = {t1} and then with T = {t2}, {what} {failure_phrase(error)}. "
                               f"{remembered}")
    weights2 = _weights(request, response, "weights2", "x2")
    out2 = _forward(request, response, "forward2", "x2")
    expected2 = layer.weights(params, _x(request, "x2"))
    if not (close(weights2, expected2, FLOAT32_WEIGHTS)
            and close(out2, layer.forward(params, _x(request, "x2")), FLOAT32_OUTPUT, FLOAT32_OUTPUT)):
        raise JudgeFailure(f"Called first with T = {t1} and then with T = {t2}, your layer gives different attention "
                           f"than a fresh layer at T = {t2} would. {remembered}")
    for key, what in (("double", "layer.double()"), ("weights3", "attention_weights(x)"), ("forward3", "layer(x)")):
        error = response.get(error_key(key))
        if error is not None:
            raise JudgeFailure(f"After layer.double(), {what} {failure_phrase(error)}. {remembered}")
    weights3 = fetch_tensor(response, "weights3", "attention_weights(x)")
    out3 = fetch_tensor(response, "forward3", "layer(x)")
    expect_shape(weights3, (2, t3, t3), "attention_weights(x)")
    expect_shape(out3, tuple(request["x3"].shape), "layer(x)")
    if weights3.dtype != torch.float64 or out3.dtype != torch.float64:
        raise JudgeFailure(f"After layer.double(), float64 input gives a {out3.dtype} result: the layer computes in "
                           "float32 (see the float64 check), or something made at the first call (a mask, buffer or "
                           f"scale, or a dtype it remembers) is still float32. {FLOAT64_HINT}")
    # Read again at float64 precision, so that only what differs after .double() is judged here.
    x3 = _x(request, "x3")
    again = fit_layer(weights3, out3, params, x3, atol_weights=1e-6, atol_forward=1e-5, rtol_forward=1e-5)
    if again is None or again.shape() != layer.shape():
        raise JudgeFailure(f"After layer.double(), your layer gives different attention than before. {remembered}")
    expected3 = again.weights(params, x3)
    if not (close(weights3, expected3, FLOAT64_WEIGHTS)
            and close(out3, again.forward(params, x3), FLOAT64_OUTPUT, FLOAT64_OUTPUT)):
        raise JudgeFailure("After layer.double(), your float64 results have only float32 precision (differences "
                           "around 1e-7): the layer computes in float32 (see the float64 check), or something made at "
                           f"the first call (a mask, buffer or scale) is still float32. {FLOAT64_HINT}")


# --------------------------------------------------------------------------- long sequences

LONG_LENGTHS = (5, 100, 257)  # an ordinary T to read the attention, then longer than any usual block size


def _long_sequences_request(seed: int) -> Message:
    """Ordinary magnitudes; T = 100 and 257 lie beyond the block sizes an answer might hard-code (64, 128,
    256) and the layer has no maximum length of its own (any T is part of its contract). B = 1 keeps
    the replies small (257² weights)."""
    message = _request(seed, 2, LONG_LENGTHS[0], 8, True)
    gen = generator(seed + 5)
    message["lengths"] = list(LONG_LENGTHS)
    message["x0"] = message["x"]
    for i, length in enumerate(LONG_LENGTHS[1:], start=1):
        message[f"x{i}"] = torch.randn(1, length, 8, generator=gen)
    return message


def _long_sequences_judge(request: Message, response: Message) -> None:
    layer = _fitted_layer(request, response, weights_key="weights0", forward_key="forward0", x_key="x0")
    params = _params(request)
    for i, length in enumerate(request["lengths"][1:], start=1):
        for key, what in ((f"weights{i}", "attention_weights(x)"), (f"forward{i}", "layer(x)")):
            error = response.get(error_key(key))
            if error is not None:
                raise JudgeFailure(
                    f"For a sequence of T = {length} tokens, {what} {failure_phrase(error)}. Your layer seems to have a "
                    "maximum length built in (a mask or buffer of a fixed size, a loop bound, a constant). Attention "
                    "works for any T: build the mask from x.shape[-2] at every call.")
        weights = _weights(request, response, f"weights{i}", f"x{i}")
        out = _forward(request, response, f"forward{i}", f"x{i}")
        x = _x(request, f"x{i}")
        expected = layer.weights(params, x)
        if close(weights, expected, FLOAT32_WEIGHTS) and close(out, layer.forward(params, x), FLOAT32_OUTPUT,
                                                               FLOAT32_OUTPUT):
            continue
        wrong_rows = ((weights - expected).abs() > FLOAT32_WEIGHTS).any(dim=-1).any(dim=0).nonzero()
        first = int(wrong_rows[0]) if wrong_rows.numel() else 0
        raise JudgeFailure(
            f"For a sequence of T = {length} tokens your layer no longer computes the attention it computes for short "
            f"sequences (the first wrong row is position {first}). A mask, buffer or loop sized for a fixed maximum "
            "length cuts it off: build the mask from x.shape[-2] at every call.")


# --------------------------------------------------------------------------- the catalogue's core checks

def _leak_request(causal: bool):
    def build(seed: int) -> Message:
        return _with_future_changed(_request(seed, 2, 7, 8, causal), keep=0 if not causal else 3, seed=seed)

    return build


JUDGES = [
    CheckJudge("shapes", _shapes_request, _shapes_judge),
    CheckJudge("score_pairing", lambda seed: _request(seed, 2, 6, 8, False), _pairing_judge),
    CheckJudge("sqrt_d_scale", lambda seed: _request(seed, 2, 9, 16, False), _scale_judge),
    CheckJudge("softmax_dim", lambda seed: _request(seed, 3, 6, 8, False), _softmax_dim_judge),
    CheckJudge("mask_polarity", lambda seed: _request(seed, 2, 7, 8, True), _mask_polarity_judge),
    CheckJudge("no_future_leak", _leak_request(True), _no_future_leak_judge),
    CheckJudge("mask_before_softmax", lambda seed: _request(seed, 2, 7, 8, True), _mask_before_softmax_judge),
    CheckJudge("causal_flag", _leak_request(False), _causal_flag_judge),
    CheckJudge("value_and_out_proj", lambda seed: _request(seed, 3, 1, 8, True), _value_path_judge),
    CheckJudge("same_computation", lambda seed: _request(seed, 2, 6, 8, True), _same_computation_judge),
    CheckJudge("gradients", _gradient_request, _gradients_judge),
    CheckJudge("input_unchanged", lambda seed: _request(seed, 2, 5, 8, True), _input_unchanged_judge),
    CheckJudge("float64", _float64_request, _float64_judge),
    CheckJudge("large_scores", _large_scores_request, _large_scores_judge),
    CheckJudge("layer_reused", _layer_reused_request, _layer_reused_judge),
    CheckJudge("long_sequences", _long_sequences_request, _long_sequences_judge),
]
