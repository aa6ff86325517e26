"""Hidden checks for the graded ``SelfAttention`` class (forward, attention_weights).

Each check isolates one idea so that a failure names one misconception. Probes
build the student's layer, load the grader's weights into it and call it;
judges compare the returned tensors with ``reference`` and never run student
code.
"""

from __future__ import annotations

import math

import torch

from . import reference
from .core import Check, JudgeFailure, Message, ProbeError, generator, judged, record_step

CLASS_NAME = "SelfAttention"
PARAM_PREFIX = "param."


# --------------------------------------------------------------------------- requests

def _request(seed: int, batch: int, seq_len: int, dim: int, causal: bool, dtype=torch.float32) -> Message:
    gen = generator(seed)
    params = reference.random_parameters(dim, gen, dtype=torch.float64)
    x = torch.randn(batch, seq_len, dim, generator=gen, dtype=torch.float64)
    message: Message = {"dim": dim, "causal": causal, "x": x.to(dtype)}
    message.update({PARAM_PREFIX + k: v.to(dtype) for k, v in params.items()})
    return message


def _params(request: Message, dtype=torch.float64) -> dict[str, torch.Tensor]:
    return {k[len(PARAM_PREFIX):]: v.to(dtype) for k, v in request.items() if k.startswith(PARAM_PREFIX)}


def _with_future_changed(request: Message, keep: int, seed: int) -> Message:
    """Add ``x_changed``: x with every token after position ``keep`` redrawn."""
    x = request["x"]
    changed = x.clone()
    gen = generator(seed + 1)
    changed[:, keep + 1 :] = torch.randn(changed[:, keep + 1 :].shape, generator=gen, dtype=torch.float64).to(x.dtype)
    request["x_changed"] = changed
    request["keep"] = keep
    return request


# --------------------------------------------------------------------------- probe helpers

def _student_class(namespace: dict):
    cls = namespace.get(CLASS_NAME)
    if cls is None:
        raise ProbeError(
            f"there is no class named {CLASS_NAME}: run the cell that defines it and keep its name"
        )
    return cls


def _build_layer(namespace: dict, request: Message, dtype=None):
    """The student's layer with the grader's weights loaded (or a ProbeError)."""
    cls = _student_class(namespace)
    dim, causal = int(request["dim"]), bool(request["causal"])
    try:
        layer = cls(dim, causal=causal)
    except Exception as exc:
        raise ProbeError(f"{CLASS_NAME}({dim}, causal={causal}) raised {type(exc).__name__}: {exc}") from None
    params = _params(request, dtype or request["x"].dtype)
    if dtype is not None:
        layer = layer.to(dtype)
    with torch.no_grad():
        for name, value in params.items():
            owner_name, kind = name.split(".")
            owner = getattr(layer, owner_name, None)
            target = getattr(owner, kind, None) if owner is not None else None
            if not isinstance(target, torch.Tensor) or tuple(target.shape) != tuple(value.shape):
                raise ProbeError(
                    f"the layer needs {owner_name} = nn.Linear({dim}, {dim}) with a bias, as given in __init__; "
                    f"{name} is missing or has the wrong shape"
                )
            target.copy_(value)
    return layer


def _layer_step(response: Message, namespace: dict, request: Message, dtype=None):
    try:
        return _build_layer(namespace, request, dtype)
    except ProbeError as exc:
        response["layer.error"] = str(exc)
        return None


def _probe_calls(namespace: dict, request: Message, *, weights=True, forward=True, changed=False) -> Message:
    response: Message = {}
    layer = _layer_step(response, namespace, request)
    if layer is None:
        return response
    x = request["x"].clone()
    with torch.no_grad():
        if weights:
            record_step(response, "weights", lambda: layer.attention_weights(x))
        if forward:
            record_step(response, "forward", lambda: layer(x))
        if changed:
            x_changed = request["x_changed"].clone()
            record_step(response, "forward_changed", lambda: layer(x_changed))
    return response


# --------------------------------------------------------------------------- judge helpers

def _fetch(response: Message, key: str, what: str) -> torch.Tensor:
    if "layer.error" in response:
        raise JudgeFailure(f"The grader could not build your layer: {response['layer.error']}.")
    if f"{key}.error" in response:
        error = response[f"{key}.error"]
        if error.startswith("NotImplementedError"):
            raise JudgeFailure(f"{what} still raises NotImplementedError: replace the stub with your implementation.")
        raise JudgeFailure(f"{what} failed with {error}")
    if key not in response:
        raise JudgeFailure(f"{what} returned nothing the grader could read.")
    return response[key]


def _expect_shape(value: torch.Tensor, shape: tuple, what: str) -> None:
    if tuple(value.shape) != tuple(shape):
        raise JudgeFailure(
            f"{what} has shape {tuple(value.shape)}, but {tuple(shape)} was expected."
        )


def _fmt_shape(shape) -> str:
    return "(" + ", ".join(str(int(n)) for n in shape) + ")"


def _weights(request: Message, response: Message) -> torch.Tensor:
    x = request["x"]
    weights = _fetch(response, "weights", "attention_weights(x)")
    _expect_shape(weights, (x.shape[0], x.shape[1], x.shape[1]), "attention_weights(x)")
    return weights.to(torch.float64)


def _forward(request: Message, response: Message, key: str = "forward") -> torch.Tensor:
    x = request["x"]
    out = _fetch(response, key, "forward (calling layer(x))")
    _expect_shape(out, tuple(x.shape), "layer(x)")
    return out.to(torch.float64)


def _close(a: torch.Tensor, b: torch.Tensor, tol: float = 1e-4) -> bool:
    return a.shape == b.shape and bool(torch.allclose(a, b, rtol=tol, atol=tol))


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


def _shapes_probe(namespace: dict, request: Message) -> Message:
    response: Message = {}
    try:
        cls = _student_class(namespace)
    except ProbeError as exc:
        response["layer.error"] = str(exc)
        return response
    for i, (_, _, d, causal) in enumerate(request["cases"]):
        x = request[f"x{i}"].clone()
        try:
            layer = cls(d, causal=causal)
        except Exception as exc:
            response[f"forward{i}.error"] = response[f"weights{i}.error"] = f"the constructor raised {exc!r}"
            continue
        with torch.no_grad():
            record_step(response, f"forward{i}", lambda: layer(x))
            record_step(response, f"weights{i}", lambda: layer.attention_weights(x))
    return response


@judged
def _shapes_judge(request: Message, response: Message) -> None:
    hint = (
        " Check which dims you transpose: for batched keys use k.transpose(-2, -1) or k.mT "
        "(k.T reverses every dim of a 3-D tensor), and take T and D from x.shape rather than fixed numbers."
    )
    for i, (b, t, d, causal) in enumerate(request["cases"]):
        where = f"for x of shape {_fmt_shape((b, t, d))} with causal={causal}"
        for key, what, shape in (
            (f"forward{i}", "layer(x)", (b, t, d)),
            (f"weights{i}", "attention_weights(x)", (b, t, t)),
        ):
            try:
                value = _fetch(response, key, what)
            except JudgeFailure as failure:
                raise JudgeFailure(f"{failure} ({where}).{hint}") from None
            if tuple(value.shape) != shape:
                raise JudgeFailure(
                    f"{where}, {what} returned shape {_fmt_shape(value.shape)}; expected "
                    f"{_fmt_shape(shape)}: forward keeps (B, T, D) and the weights are (B, T, T).{hint}"
                )


# --------------------------------------------------------------------------- √D scale

def _log_ratio_fit(log_w: torch.Tensor, scores: torch.Tensor, along_rows: bool):
    """Fit log_w differences to score differences / c within rows (or columns).

    Returns (c, relative residual, number of pairs) using every pair of entries
    that both carry weight; masked (zero) entries are simply skipped."""
    if not along_rows:
        log_w, scores = log_w.mT, scores.mT
    valid = torch.isfinite(log_w)
    dl = log_w.unsqueeze(-1) - log_w.unsqueeze(-2)
    ds = scores.unsqueeze(-1) - scores.unsqueeze(-2)
    pairs = valid.unsqueeze(-1) & valid.unsqueeze(-2)
    dl, ds = dl[pairs], ds[pairs]
    keep = ds.abs() > 1e-9
    dl, ds = dl[keep], ds[keep]
    if dl.numel() < 4:
        return None, math.inf, int(dl.numel())
    inv_c = float((dl * ds).sum() / (ds * ds).sum())
    if inv_c <= 0:
        return None, math.inf, int(dl.numel())
    residual = float((dl - ds * inv_c).norm() / dl.norm().clamp_min(1e-12))
    return 1.0 / inv_c, residual, int(dl.numel())


def _scale_judge_impl(request: Message, response: Message) -> None:
    weights = _weights(request, response)
    if not torch.isfinite(weights).all():
        raise JudgeFailure("attention_weights(x) contains NaN or infinity, so no scale can be read from it.")
    x = request["x"].to(torch.float64)
    dim, seq_len = x.shape[-1], x.shape[-2]
    scores = reference.raw_scores(_params(request), x)
    log_w = torch.where(weights > 1e-30, weights.clamp_min(1e-300).log(), torch.full_like(weights, -math.inf))
    fits = [_log_ratio_fit(log_w, scores, along_rows) for along_rows in (True, False)]
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


# --------------------------------------------------------------------------- softmax dim

def _softmax_dim_judge_impl(request: Message, response: Message) -> None:
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

def _mask_polarity_judge_impl(request: Message, response: Message) -> None:
    weights = _weights(request, response)
    seq_len = weights.shape[-1]
    upper = torch.ones(seq_len, seq_len, dtype=torch.bool).triu(1)
    lower = torch.ones(seq_len, seq_len, dtype=torch.bool).tril(-1)
    finite = bool(torch.isfinite(weights).all())
    later = weights[:, 1:]  # rows t >= 1 keep a visible position even when the diagonal is blocked
    rows = torch.arange(1, seq_len)
    diagonal_blocked = bool(torch.isfinite(later).all()) and bool((later[:, rows - 1, rows].abs() <= 1e-6).all())
    above_blocked = bool((later[..., upper[1:]].abs() <= 1e-6).all())
    if finite and not diagonal_blocked and bool((weights[..., upper].abs() <= 1e-6).all()) and bool(
        (weights[..., 0, 0] > 1e-6).all()
    ):
        return
    if above_blocked and diagonal_blocked:
        raise JudgeFailure(
            "With causal=True a token gets zero weight on itself: your mask also blocks the diagonal "
            "(and the first token, which may only see itself, is left with nothing). Position t may attend "
            "to positions 0..t, itself included: causal_mask uses triu with diagonal=1."
        )
    usable = weights[torch.isfinite(weights).all(dim=-1).all(dim=-1)]
    below_used = float((usable[..., lower] > 1e-6).float().mean()) if usable.numel() else 0.0
    above_used = float((usable[..., upper] > 1e-6).float().mean()) if usable.numel() else 1.0
    if not finite or (above_used > 0.5 and below_used < 0.5):
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


def _no_future_leak_judge_impl(request: Message, response: Message) -> None:
    out = _forward(request, response)
    out_changed = _forward(request, response, "forward_changed")
    keep = int(request["keep"])
    if not torch.allclose(out[:, : keep + 1], out_changed[:, : keep + 1], rtol=1e-5, atol=1e-5, equal_nan=True):
        raise JudgeFailure(
            f"Changing only the tokens after position {keep} changed your outputs at positions 0..{keep}: "
            "information leaks from the future. With causal=True, block every score with s > t before the softmax."
        )


def _mask_before_softmax_judge_impl(request: Message, response: Message) -> None:
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


def _causal_flag_judge_impl(request: Message, response: Message) -> None:
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

def _value_path_judge_impl(request: Message, response: Message) -> None:
    out = _forward(request, response)
    x = request["x"].to(torch.float64)
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


def _same_computation_judge_impl(request: Message, response: Message) -> None:
    weights = _weights(request, response)
    out = _forward(request, response)
    x = request["x"].to(torch.float64)
    params = _params(request)
    expected = reference.linear(params, "out_proj", weights @ reference.linear(params, "v_proj", x))
    if not _close(out, expected):
        raise JudgeFailure(
            "forward(x) is not out_proj(attention_weights(x) @ v_proj(x)): the two methods compute attention "
            "differently, so the weights you plot are not the ones forward uses. Let forward call attention_weights."
        )


# --------------------------------------------------------------------------- gradients, purity, dtype

def _gradients_probe(namespace: dict, request: Message) -> Message:
    response: Message = {}
    layer = _layer_step(response, namespace, request)
    if layer is None:
        return response
    x = request["x"].clone().requires_grad_(True)

    def backward():
        out = layer(x)
        if not isinstance(out, torch.Tensor):
            raise ProbeError(f"forward returned a {type(out).__name__}, not a tensor")
        (out * request["upstream"]).sum().backward()
        return out

    record_step(response, "forward", backward)
    for name, param in layer.named_parameters():
        if param.grad is not None:
            response[f"grad.{name}"] = param.grad.detach().clone()
    if x.grad is not None:
        response["grad.x"] = x.grad.detach().clone()
    return response


def _gradients_judge_impl(request: Message, response: Message) -> None:
    if "layer.error" in response:
        raise JudgeFailure(f"The grader could not build your layer: {response['layer.error']}.")
    if "forward.error" in response:
        error = response["forward.error"]
        if "does not require grad" in error:
            raise JudgeFailure(
                "No gradient reaches anything: your output is cut off from the autograd graph. "
                "Avoid .detach(), .numpy()/.item() round trips, .data and torch.no_grad() inside forward."
            )
        raise JudgeFailure(f"Backpropagating through forward failed with {error}")
    wanted = ["x"] + list(reference.PARAMETER_NAMES)
    missing = [name for name in wanted if f"grad.{name}" not in response]
    dead = [name for name in wanted if f"grad.{name}" in response and float(response[f"grad.{name}"].abs().max()) == 0.0]
    broken = missing + dead
    if broken:
        names = ", ".join("the input x" if n == "x" else n for n in broken)
        raise JudgeFailure(
            f"No gradient reaches {names}. Every projection and the input must stay in the autograd graph: "
            "avoid .detach(), NumPy round trips, .data and torch.no_grad() in forward, and use v_proj for the values."
        )
    for name in wanted:
        if not torch.isfinite(response[f"grad.{name}"]).all():
            raise JudgeFailure(f"The gradient of {name} contains NaN or infinity.")


def _input_unchanged_probe(namespace: dict, request: Message) -> Message:
    response: Message = {}
    layer = _layer_step(response, namespace, request)
    if layer is None:
        return response
    x = request["x"].clone()
    with torch.no_grad():
        record_step(response, "forward", lambda: layer(x))
        record_step(response, "weights", lambda: layer.attention_weights(x))
    response["x_after"] = x.clone()
    return response


def _input_unchanged_judge_impl(request: Message, response: Message) -> None:
    if "layer.error" in response:
        raise JudgeFailure(f"The grader could not build your layer: {response['layer.error']}.")
    if "x_after" not in response or not torch.equal(response["x_after"], request["x"]):
        raise JudgeFailure(
            "Calling your layer changed its input x in place (for example x += …, x.mul_(…) or x[...] = …). "
            "The caller still needs x: use out-of-place operations on x."
        )
    _fetch(response, "forward", "forward (calling layer(x))")
    _fetch(response, "weights", "attention_weights(x)")


def _float64_probe(namespace: dict, request: Message) -> Message:
    response: Message = {}
    layer64 = _layer_step(response, namespace, request, dtype=torch.float64)
    if layer64 is None:
        return response
    x64 = request["x"].to(torch.float64)
    with torch.no_grad():
        record_step(response, "forward64", lambda: layer64(x64.clone()))
        record_step(response, "weights64", lambda: layer64.attention_weights(x64.clone()))
    float_request = dict(request)
    float_request.update({k: v.to(torch.float32) for k, v in request.items() if isinstance(v, torch.Tensor)})
    layer32 = _layer_step(response, namespace, float_request)
    if layer32 is not None:
        x32 = x64.to(torch.float32)
        with torch.no_grad():
            record_step(response, "forward32", lambda: layer32(x32.clone()))
    return response


def _float64_judge_impl(request: Message, response: Message) -> None:
    hint = (
        "Avoid hard-coded dtypes (torch.float32, .float()); build helper tensors with dtype=x.dtype "
        "and device=x.device, or use Python numbers."
    )
    for key, what in (("forward64", "layer(x)"), ("weights64", "attention_weights(x)")):
        try:
            value = _fetch(response, key, f"{what} with float64 input")
        except JudgeFailure as failure:
            raise JudgeFailure(f"{failure} {hint}") from None
        if value.dtype != torch.float64:
            raise JudgeFailure(f"For float64 input, {what} returned {value.dtype}. {hint}")
    out32 = response.get("forward32")
    if out32 is not None and out32.shape == response["forward64"].shape:
        if not torch.allclose(response["forward64"], out32.to(torch.float64), rtol=1e-3, atol=1e-3):
            raise JudgeFailure(f"Your layer gives different results for float64 and float32 inputs. {hint}")


# --------------------------------------------------------------------------- the catalogue

def _calls(**kwargs):
    return lambda namespace, request: _probe_calls(namespace, request, **kwargs)


def _leak_request(causal: bool):
    def build(seed: int) -> Message:
        return _with_future_changed(_request(seed, 2, 7, 8, causal), keep=0 if not causal else 3, seed=seed)

    return build


def _gradient_request(seed: int) -> Message:
    message = _request(seed, 2, 5, 8, True)
    message["upstream"] = torch.randn(2, 5, 8, generator=generator(seed + 7))
    return message


CHECKS = [
    Check("shapes", "forward keeps (B, T, D) and attention_weights is (B, T, T), for any B, T (even 1) and D",
          2, "wrong shapes / transposed dims",
          _shapes_request, _shapes_probe, _shapes_judge),
    Check("sqrt_d_scale", "scores are q·k divided by √D", 2, "forgot √D (or misplaced it)",
          lambda seed: _request(seed, 2, 9, 16, False), _calls(forward=False), judged(_scale_judge_impl)),
    Check("softmax_dim", "each query's weights sum to 1 over the keys (softmax over dim=-1)", 2,
          "softmax over the wrong dim",
          lambda seed: _request(seed, 3, 6, 8, False), _calls(forward=False), judged(_softmax_dim_judge_impl)),
    Check("mask_polarity", "with causal=True nothing above the diagonal is seen, the diagonal is", 2,
          "mask inverted (or diagonal blocked)",
          lambda seed: _request(seed, 2, 7, 8, True), _calls(forward=False), judged(_mask_polarity_judge_impl)),
    Check("no_future_leak", "with causal=True, changing a later token never changes an earlier output", 1,
          "future leaks into the past",
          _leak_request(True), _calls(weights=False, changed=True), judged(_no_future_leak_judge_impl)),
    Check("mask_before_softmax", "the mask is applied before the softmax, so masked rows still sum to 1", 2,
          "masked after the softmax",
          lambda seed: _request(seed, 2, 7, 8, True), _calls(forward=False), judged(_mask_before_softmax_judge_impl)),
    Check("causal_flag", "with causal=False nothing is masked: a token sees the future", 1,
          "causal flag ignored",
          _leak_request(False), _calls(changed=True), judged(_causal_flag_judge_impl)),
    Check("value_and_out_proj", "the output is out_proj(weights @ v_proj(x))", 2,
          "wrong value path / output projection",
          lambda seed: _request(seed, 3, 1, 8, True), _calls(weights=False), judged(_value_path_judge_impl)),
    Check("same_computation", "forward uses exactly the weights attention_weights returns", 1,
          "forward ≠ attention_weights",
          lambda seed: _request(seed, 2, 6, 8, True), _calls(), judged(_same_computation_judge_impl)),
    Check("gradients", "gradients reach every parameter and the input", 1,
          "cut the autograd graph (detach, NumPy, no_grad)",
          _gradient_request, _gradients_probe, judged(_gradients_judge_impl)),
    Check("input_unchanged", "the input x is not modified in place", 1, "modified the input in place",
          lambda seed: _request(seed, 2, 5, 8, True), _input_unchanged_probe, judged(_input_unchanged_judge_impl)),
    Check("float64", "float64 input works and stays float64 (no hard-coded dtype)", 1, "hard-coded dtype",
          lambda seed: _request(seed, 2, 5, 8, True, dtype=torch.float64), _float64_probe, judged(_float64_judge_impl)),
]
