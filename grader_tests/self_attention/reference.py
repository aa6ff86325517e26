"""The trusted reference computation the judges compare student tensors against.

It runs only in the grader's own process. It takes the layer's parameters as a
plain ``{name: tensor}`` mapping (the same mapping the probe loads into the
student's layer) so it never depends on a student's module.
"""

from __future__ import annotations

import math

import torch

from .self_attention_probes import PROJECTIONS

PARAMETER_NAMES = tuple(f"{p}.{kind}" for p in PROJECTIONS for kind in ("weight", "bias"))


def linear(params: dict[str, torch.Tensor], name: str, x: torch.Tensor) -> torch.Tensor:
    return x @ params[f"{name}.weight"].mT + params[f"{name}.bias"]


def causal_mask(seq_len: int, device=None) -> torch.Tensor:
    """Bool (T, T), True above the diagonal: the positions a query may not see."""
    return torch.ones(seq_len, seq_len, dtype=torch.bool, device=device).triu(diagonal=1)


def raw_scores(params: dict[str, torch.Tensor], x: torch.Tensor) -> torch.Tensor:
    """Q Kᵀ before any scaling or masking: (B, T, T)."""
    return linear(params, "q_proj", x) @ linear(params, "k_proj", x).mT


def attention_weights(params: dict[str, torch.Tensor], x: torch.Tensor, causal: bool) -> torch.Tensor:
    scores = raw_scores(params, x) / math.sqrt(x.shape[-1])
    if causal:
        scores = scores.masked_fill(causal_mask(x.shape[-2], x.device), float("-inf"))
    return scores.softmax(dim=-1)


def forward(params: dict[str, torch.Tensor], x: torch.Tensor, causal: bool) -> torch.Tensor:
    mixed = attention_weights(params, x, causal) @ linear(params, "v_proj", x)
    return linear(params, "out_proj", mixed)


def random_parameters(dim: int, generator: torch.Generator, dtype=torch.float32) -> dict[str, torch.Tensor]:
    """Weights scaled so that scaled scores have a spread of about 2: softmax is
    peaked enough to tell a wrong scale apart, yet nowhere near underflow."""
    params = {}
    for name in PROJECTIONS:
        gain = 1.5 if name in ("q_proj", "k_proj") else 1.0
        params[f"{name}.weight"] = torch.randn(dim, dim, generator=generator, dtype=torch.float64) * gain / math.sqrt(dim)
        params[f"{name}.bias"] = torch.randn(dim, generator=generator, dtype=torch.float64) * 0.1
    return {k: v.to(dtype) for k, v in params.items()}
