"""The trusted multi-head attention the judges compare student tensors against.

It runs only in the grader's own process, on a plain ``{name: tensor}`` mapping of the layer's
parameters (the mapping the probe loads into the student's layer), so it never depends on a
student's module. Head h owns columns ``h*d … (h+1)*d - 1`` of q, k and v, where ``d = D / H``.
"""

from __future__ import annotations

import math

import torch

PROJECTIONS = ("q_proj", "k_proj", "v_proj", "out_proj")


def linear(params: dict[str, torch.Tensor], name: str, x: torch.Tensor) -> torch.Tensor:
    return x @ params[f"{name}.weight"].mT + params[f"{name}.bias"]


def split_heads(x: torch.Tensor, heads: int) -> torch.Tensor:
    """(B, T, D) -> (B, H, T, D/H): each token's vector cut into H pieces, then heads brought forward."""
    batch, seq_len, dim = x.shape
    return x.view(batch, seq_len, heads, dim // heads).transpose(1, 2)


def merge_heads(y: torch.Tensor) -> torch.Tensor:
    """(B, H, T, d) -> (B, T, H·d): the inverse of ``split_heads``."""
    batch, heads, seq_len, head_dim = y.shape
    return y.transpose(1, 2).reshape(batch, seq_len, heads * head_dim)


def head_scores(params: dict[str, torch.Tensor], x: torch.Tensor, heads: int) -> torch.Tensor:
    """q_h · k_h for every head, before scaling or masking: (B, H, T, T)."""
    q = split_heads(linear(params, "q_proj", x), heads)
    k = split_heads(linear(params, "k_proj", x), heads)
    return q @ k.mT


def causal_mask(seq_len: int) -> torch.Tensor:
    """Bool (T, T), True above the diagonal: the positions a query may not see."""
    return torch.ones(seq_len, seq_len, dtype=torch.bool).triu(diagonal=1)


def attention_weights(params: dict[str, torch.Tensor], x: torch.Tensor, heads: int, causal: bool) -> torch.Tensor:
    scores = head_scores(params, x, heads) / math.sqrt(x.shape[-1] // heads)
    if causal:
        scores = scores.masked_fill(causal_mask(x.shape[-2]), float("-inf"))
    return scores.softmax(dim=-1)


def forward_from_weights(params: dict[str, torch.Tensor], x: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """out_proj(merge(weights @ split(v))) for given (B, H, T, T) weights."""
    values = split_heads(linear(params, "v_proj", x), weights.shape[1])
    return linear(params, "out_proj", merge_heads(weights @ values))


def forward(params: dict[str, torch.Tensor], x: torch.Tensor, heads: int, causal: bool) -> torch.Tensor:
    return forward_from_weights(params, x, attention_weights(params, x, heads, causal))


def random_parameters(dim: int, generator: torch.Generator) -> dict[str, torch.Tensor]:
    """float64 weights whose scaled per-head scores have a spread of about 2: each head's softmax is
    peaked enough to tell a wrong scale apart, and nowhere near overflow."""
    params = {}
    for name in PROJECTIONS:
        # q and k entries have a spread of about gain, so q_h·k_h / √d has a spread of about gain².
        gain = 1.4 if name in ("q_proj", "k_proj") else 1.0
        params[f"{name}.weight"] = torch.randn(dim, dim, generator=generator, dtype=torch.float64) * gain / math.sqrt(dim)
        params[f"{name}.bias"] = torch.randn(dim, generator=generator, dtype=torch.float64) * 0.1
    return params
