"""Probes of part 5, experiments: they call the student's tokenizer and ``count_parameters`` on
inputs from the request and read the recorded loss curves; every result goes back raw.

Shipped into the sandbox (see ``probing``); the judges are in ``experiment_judges``.
"""

from __future__ import annotations

import torch
from torch import nn

from ..probing import CheckProbe, Message, nothing, read_name, read_tensors, record

TOKENIZER_NAMES = ("build_vocab", "encode", "decode")


def _tokenizer(namespace: dict, request: Message) -> Message:
    response: Message = {}
    functions = record(response, "tokenizer", lambda: [read_name(namespace, n) for n in TOKENIZER_NAMES], nothing)
    if functions is None:
        return response
    build_vocab, encode, decode = functions
    for i, text in enumerate(request["texts"]):
        vocab = record(response, f"vocab{i}", lambda: list(build_vocab(text)), lambda v: [str(ch) for ch in v][:500])
        if vocab is None:
            continue
        ids = record(response, f"ids{i}", lambda: encode(text, vocab),
                     lambda v: torch.as_tensor(v).to(torch.int64).reshape(-1).clone())
        if ids is None:
            continue
        record(response, f"decoded{i}", lambda: decode(response[f"ids{i}"].tolist(), vocab), lambda v: str(v)[:5000])
    return response


class FourProjections(nn.Module):
    """A module shaped like the core layer: four D × D projections with biases."""

    def __init__(self, dim: int):
        super().__init__()
        self.q_proj, self.k_proj, self.v_proj, self.out_proj = (nn.Linear(dim, dim) for _ in range(4))


def counted_modules(request: Message) -> list[nn.Module]:
    """The modules handed to the student's count_parameters, in the order of the request's counts."""
    modules: list[nn.Module] = [FourProjections(d) for d in request["dims"]]
    modules.append(nn.Linear(int(request["linear_in"]), int(request["linear_out"]), bias=False))
    frozen = nn.Sequential(nn.Linear(3, 4), nn.Linear(4, 2))
    frozen[0].weight.requires_grad_(False)
    modules.append(frozen)
    return modules


def _parameter_counts(namespace: dict, request: Message) -> Message:
    response: Message = {}
    count = record(response, "count_parameters", lambda: read_name(namespace, "count_parameters"), nothing)
    if count is None:
        return response
    for i, module in enumerate(counted_modules(request)):
        record(response, f"count{i}", lambda module=module: count(module), float)
    return response


PROBES = [
    CheckProbe("char_tokenizer", _tokenizer),
    CheckProbe("param_count", _parameter_counts),
    CheckProbe("strip_mask_collapse", read_tensors(["losses_causal", "losses_unmasked"])),
]
