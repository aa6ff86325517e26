"""Which attention a student's layer computes, read from its raw results (trusted: runs outside).

Several checks test one idea on top of an attention that may be wrong in another way: that the
gradients are those of what forward computes, that float64 stays float64, that scores in the
thousands do not overflow, that a longer sequence or a reused layer gives the same function. To
judge that one idea without blaming the student a second time for the other, the judge reads from
the student's own weights *at ordinary inputs* which attention they compute, within a family
that covers the usual variants:

    weights = factor · softmax_axis(mask(scores / c))      (or the mask applied after the softmax)

with ``scores`` one of q·kᵀ, q·kᵀ without the biases, q·qᵀ or x·xᵀ; ``c`` √D, D, 1, √T, T or 1/√D
(read as that rule, so a longer T changes it as the student's code would) or else any positive
constant; the softmax over the keys or over the queries; a causal, inverted, diagonal-blocking
or no mask, filling blocked scores with -inf (a row entirely blocked then becomes uniform, as a
finite fill value makes it) or with 0. The output is ``out_proj(weights @ values)`` or
``weights @ values`` with the values from ``v_proj``, ``k_proj``, ``q_proj`` or ``x`` itself, mixed
with the weights attention_weights returns or, when forward computes its own, with weights
recovered from forward's output (solvable while T ≤ D) and read the same way.

The fitted model is a float64 function of the grader's parameters and inputs, so the judge can
predict here, differentiably, what the *same* attention must give in the check's situation, and
compare the student's raw tensors with that prediction. A reply can only match it if the
student's code really computes it: writing the matching numbers without running that
computation costs more than fixing the bug.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, replace

import torch

ZERO = 1e-30  # a weight this small counts as masked: exp of a fill value far below the scores underflows here


def _linear(params, name, x, bias=True):
    out = x @ params[f"{name}.weight"].mT
    return out + params[f"{name}.bias"] if bias else out


SCORE_SOURCES = {
    "q·k": lambda p, x: _linear(p, "q_proj", x) @ _linear(p, "k_proj", x).mT,
    "q·k without bias": lambda p, x: _linear(p, "q_proj", x, False) @ _linear(p, "k_proj", x, False).mT,
    "q·q": lambda p, x: _linear(p, "q_proj", x) @ _linear(p, "q_proj", x).mT,
    "x·x": lambda p, x: x @ x.mT,
}

SCALE_RULES = {  # c as a function of (D, T)
    "√D": lambda dim, seq_len: math.sqrt(dim),
    "D": lambda dim, seq_len: float(dim),
    "1": lambda dim, seq_len: 1.0,
    "√T": lambda dim, seq_len: math.sqrt(seq_len),
    "T": lambda dim, seq_len: float(seq_len),
    "1/√D": lambda dim, seq_len: 1.0 / math.sqrt(dim),
}

MASKS = {  # True where a position is blocked, for a sequence of length T
    "future": lambda T: torch.ones(T, T, dtype=torch.bool).triu(1),
    "none": lambda T: torch.zeros(T, T, dtype=torch.bool),
    "past and self": lambda T: torch.ones(T, T, dtype=torch.bool).tril(0),
    "future and self": lambda T: torch.ones(T, T, dtype=torch.bool).triu(0),
    "past": lambda T: torch.ones(T, T, dtype=torch.bool).tril(-1),
}
FILLS = (-math.inf, 0.0)

VALUE_PATHS = (("v_proj", True), ("v_proj", False), ("k_proj", True), ("q_proj", True), ("x", True), ("x", False))


@functools.lru_cache(maxsize=256)
def _blocked(mask: str, axis: int, seq_len: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(where ``mask`` blocks a position, where a whole softmax slice along ``axis`` is blocked),
    made once per shape: a fit tries some forty candidates per judged tensor. Shared, so only read."""
    blocked = MASKS[mask](seq_len)
    return blocked, blocked.all(dim=axis, keepdim=True).expand_as(blocked)


@dataclass(frozen=True)
class Attention:
    scores: str = "q·k"
    scale: str | float = "√D"  # a SCALE_RULES name, or a fitted constant
    axis: int = -1
    mask: str = "future"
    fill: float = -math.inf
    mask_after_softmax: bool = False
    factor: float = 1.0

    def scale_for(self, dim: int, seq_len: int) -> float:
        return SCALE_RULES[self.scale](dim, seq_len) if isinstance(self.scale, str) else float(self.scale)

    def _blocked(self, seq_len: int):
        return _blocked(self.mask, self.axis, seq_len)

    def from_scores(self, scores: torch.Tensor, dim: int) -> torch.Tensor:
        """The weights for raw (unscaled) ``scores`` of D-dimensional tokens; differentiable."""
        seq_len = scores.shape[-1]
        blocked, full = (m.to(scores.device) for m in self._blocked(seq_len))
        z = scores / self.scale_for(dim, seq_len)
        if self.mask_after_softmax:
            weights = z.softmax(dim=self.axis).masked_fill(blocked, 0.0)
        else:
            # A slice with every position blocked has one fill value everywhere: a uniform softmax
            # (with -inf it would be NaN, which the family leaves out). Filled entries carry no gradient.
            fill = 0.0 if self.fill == 0.0 else float("-inf")
            z = z.masked_fill(blocked & ~full, fill).masked_fill(full, 0.0)
            weights = z.softmax(dim=self.axis)
        return weights * self.factor

    def weights(self, params: dict, x: torch.Tensor) -> torch.Tensor:
        return self.from_scores(SCORE_SOURCES[self.scores](params, x), x.shape[-1])

    def expected_zeros(self, seq_len: int) -> torch.Tensor:
        blocked, full = self._blocked(seq_len)
        if self.mask_after_softmax:
            return blocked
        return blocked & ~full if self.fill != 0.0 else torch.zeros_like(blocked)

    def shape(self) -> "Attention":
        """The same attention with its constants left out (a fitted constant scale, the factor)."""
        return replace(self, scale=self.scale if isinstance(self.scale, str) else None, factor=None)


@dataclass(frozen=True)
class Layer:
    attention: Attention  # what attention_weights returns
    mixing: Attention  # the weights forward mixes the values with (usually the same)
    values: str = "v_proj"
    out_proj: bool = True

    def weights(self, params: dict, x: torch.Tensor) -> torch.Tensor:
        return self.attention.weights(params, x)

    def output_from(self, weights: torch.Tensor, params: dict, x: torch.Tensor) -> torch.Tensor:
        values = x if self.values == "x" else _linear(params, self.values, x)
        mixed = weights @ values
        return _linear(params, "out_proj", mixed) if self.out_proj else mixed

    def forward(self, params: dict, x: torch.Tensor) -> torch.Tensor:
        return self.output_from(self.mixing.weights(params, x), params, x)

    def shape(self):
        return self.attention.shape(), self.mixing.shape(), self.values, self.out_proj


def log_ratio_fit(log_w: torch.Tensor, scores: torch.Tensor, along_rows: bool):
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


def _fit_inverse_scale(log_w: torch.Tensor, scores: torch.Tensor, kept: torch.Tensor, axis: int) -> float | None:
    """Least-squares 1/c with log w = scores / c + (a constant per softmax slice), over kept entries."""
    count = kept.sum(dim=axis, keepdim=True)
    usable = kept & (count >= 2)
    if int(usable.sum()) < 2:
        return None
    n = count.clamp_min(1)
    centred_l = torch.where(usable, log_w - (log_w * usable).sum(dim=axis, keepdim=True) / n, 0.0)
    centred_s = torch.where(usable, scores - (scores * usable).sum(dim=axis, keepdim=True) / n, 0.0)
    spread = float((centred_s * centred_s).sum())
    if spread <= 1e-18:
        return None
    return float((centred_l * centred_s).sum()) / spread


# Every (mask, axis, fill, mask after the softmax) the family holds, in the order a fit tries them.
SHAPES = tuple((mask, axis, after, fill) for mask in MASKS for axis in (-1, -2) for after in (False, True)
               for fill in FILLS if not (after and fill != FILLS[0]))


@functools.lru_cache(maxsize=64)
def _expected_zeros(seq_len: int) -> torch.Tensor:
    """(len(SHAPES), T, T): where each shape's weights are zero. Shared, so only read."""
    return torch.stack([Attention("q·k", 1.0, axis, mask, fill, after).expected_zeros(seq_len)
                        for mask, axis, after, fill in SHAPES])


def fit_attention(weights: torch.Tensor, params: dict, x: torch.Tensor, *, atol: float, snap: float = 1e-4,
                  zero: float = ZERO) -> Attention | None:
    """The member of the family that reproduces ``weights`` (B, T, T) within ``atol``, or None: the
    first that does, trying the score sources in ``SCORE_SOURCES`` order and for each the shapes in
    ``SHAPES`` order.

    Two tests leave a candidate out before its weights are computed, and neither can leave out one
    that reproduces ``weights``: its mask must block only positions that are zero in ``weights`` (the
    same for every score source, so decided once per shape), and, unless the mask comes after the
    softmax, every softmax slice of ``weights`` sums to the same factor within T·atol (a softmax slice
    sums to 1). Most of a fit's candidates used to be rejected only after that work."""
    weights = weights.to(torch.float64)
    x = x.to(torch.float64)
    batch, seq_len, dim = x.shape
    if tuple(weights.shape) != (batch, seq_len, seq_len) or not bool(torch.isfinite(weights).all()):
        return None
    log_w = weights.clamp_min(1e-300).log()
    not_zero = (weights.abs() > zero).any(dim=0)  # (T, T): a position some batch row gives weight
    # A candidate reproducing the weights has |w - factor·p| <= atol with p's slices summing to 1, so
    # the slice sums differ by at most 2·T·atol, plus rounding: relative to the sums' size (a factor
    # of 1e300 is still a member), and well above T·2^-52 of it.
    sums = {axis: weights.sum(dim=axis) for axis in (-1, -2)}
    one_sum = {axis: float(s.max() - s.min()) <= 2 * seq_len * atol + 1e-9 + 1e-12 * float(
        weights.abs().sum(dim=axis).max()) for axis, s in sums.items()}
    zeros_given = (_expected_zeros(seq_len) & not_zero).flatten(1).any(dim=1).tolist()
    shapes = [shape for shape, given in zip(SHAPES, zeros_given) if not given and (shape[2] or one_sum[shape[1]])]
    for source, scores_of in SCORE_SOURCES.items():
        if not shapes:
            break
        scores = scores_of(params, x)
        for mask, axis, after, fill in shapes:
            member = fitted_member(Attention(source, 1.0, axis, mask, fill, after), weights, log_w, scores, dim,
                                   atol=atol, snap=snap, zero=zero)
            if member is not None:
                return member
    return None


def fitted_member(candidate: Attention, weights: torch.Tensor, log_w: torch.Tensor, scores: torch.Tensor, dim: int,
                  *, atol: float, snap: float, zero: float) -> Attention | None:
    """``candidate`` (a score source and a shape) with the scale and factor that fit ``weights`` (float64,
    ``log_w`` their logarithm, ``scores`` the source's raw scores), if it then reproduces them within
    ``atol``; else None."""
    seq_len = weights.shape[-1]
    blocked, full = candidate._blocked(seq_len)
    kept = (~blocked & ~full).expand_as(weights) & (weights > zero)
    inverse = _fit_inverse_scale(log_w, scores, kept, candidate.axis)
    if inverse is not None and inverse <= 0:
        return None
    scale = math.sqrt(dim) if inverse is None else 1.0 / inverse
    scale = next((name for name, rule in SCALE_RULES.items() if abs(scale / rule(dim, seq_len) - 1) <= snap), scale)
    model = replace(candidate, scale=scale)
    predicted = model.from_scores(scores, dim)
    norm = float((predicted * predicted).sum())
    factor = float((weights * predicted).sum()) / norm if norm > 0 else 1.0
    if abs(factor - 1) <= snap:
        factor = 1.0
    if factor > 0 and bool(((weights - factor * predicted).abs() <= atol).all()):
        return replace(model, factor=factor)
    return None


def _recovered_mixing(forward: torch.Tensor, params: dict, x: torch.Tensor, values: str, out_proj: bool):
    """The (B, T, T) weights that forward's output implies for a value path, or None if T > D."""
    mixed = forward
    if out_proj:
        mixed = torch.linalg.solve(params["out_proj.weight"], (forward - params["out_proj.bias"]).mT).mT
    value = x if values == "x" else _linear(params, values, x)
    if value.shape[-2] > value.shape[-1]:
        return None
    return torch.linalg.lstsq(value.mT, mixed.mT).solution.mT


def fit_layer(weights: torch.Tensor, forward: torch.Tensor, params: dict, x: torch.Tensor, *,
              atol_weights: float, atol_forward: float, rtol_forward: float = 0.0,
              snap: float = 1e-4) -> Layer | None:
    """The member of the family whose weights reproduce ``weights`` and whose output reproduces
    ``forward`` (the student's, on the same ``x``), or None."""
    attention = fit_attention(weights, params, x, atol=atol_weights, snap=snap)
    if attention is None:
        return None
    x = x.to(torch.float64)
    forward = forward.to(torch.float64)
    if not bool(torch.isfinite(forward).all()) or forward.shape != x.shape:
        return None

    def reproduces(layer: Layer) -> bool:
        predicted = layer.forward(params, x)
        return bool(((forward - predicted).abs() <= atol_forward + rtol_forward * predicted.abs()).all())

    for values, out_proj in VALUE_PATHS:
        layer = Layer(attention, attention, values, out_proj)
        if reproduces(layer):
            return layer
    for values, out_proj in VALUE_PATHS:  # forward computes its own weights
        recovered = _recovered_mixing(forward, params, x, values, out_proj)
        mixing = None if recovered is None else fit_attention(recovered, params, x, atol=5e-3, snap=2e-2, zero=1e-3)
        if mixing is not None and reproduces(layer := Layer(attention, mixing, values, out_proj)):
            return layer
    return None
