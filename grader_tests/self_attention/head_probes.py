"""Probes of part 3 (notebook ``03_head_and_bias``): they build the student's ``AttentionHead`` and
``SingleHeadAttention`` with the grader's weights, call them, call ``weight_bars``, and read the
"two plus three" trace; every result goes back raw.

Shipped into the sandbox (see ``probing``); the judges are in ``head_judges``.
"""

from __future__ import annotations

import torch

from ..probing import (LAYER, CheckProbe, Message, ProbeError, build_module, nothing, parameters, read_name,
                      read_tensors, record)

HEAD_CLASS = "AttentionHead"
HEAD_PROJECTIONS = ("query", "key", "value")
BIAS_CLASS = "SingleHeadAttention"
BIAS_PROJECTIONS = ("W_q", "W_k", "W_v")
PARAM_PREFIX = "param."
TEXT_LIMIT = 20_000
NOT_TEXT = "weight_bars returned a {type}, not a str"


def _head(namespace: dict, request: Message, dim: int, head_size: int, causal: bool, params: dict):
    return build_module(namespace, HEAD_CLASS, (dim, head_size), {"causal": causal}, params,
                        f"{HEAD_CLASS}({dim}, {head_size}, causal={causal})")


def _head_calls(namespace: dict, request: Message) -> Message:
    response: Message = {}
    dim, head_size, causal = int(request["dim"]), int(request["head_size"]), bool(request["causal"])
    head = record(response, LAYER, lambda: _head(namespace, request, dim, head_size, causal,
                                                 parameters(request, PARAM_PREFIX)), nothing)
    if head is None:
        return response
    x = request["x"].clone()
    with torch.no_grad():
        record(response, "weights", lambda: head.attention_weights(x))
        record(response, "forward", lambda: head(x))
    return response


def _head_shapes(namespace: dict, request: Message) -> Message:
    """Fresh heads with their own initial weights, at every case of the request."""
    response: Message = {}
    for i, (_, _, dim, head_size, causal) in enumerate(request["cases"]):
        head = record(response, LAYER, lambda: _head(namespace, request, dim, head_size, causal, {}), nothing)
        if head is None:
            return response
        x = request[f"x{i}"].clone()
        with torch.no_grad():
            record(response, f"forward{i}", lambda: head(x))
            record(response, f"weights{i}", lambda: head.attention_weights(x))
    return response


def _text(value) -> str:
    if not isinstance(value, str):
        raise ProbeError(NOT_TEXT.format(type=type(value).__name__))
    return value[:TEXT_LIMIT]


def _weight_bars(namespace: dict, request: Message) -> Message:
    response: Message = {}
    record(response, "text", lambda: read_name(namespace, "weight_bars")(request["row"].clone()), _text)
    return response


def _unmasked_calls(namespace: dict, request: Message) -> Message:
    response: Message = {}
    dim = int(request["dim"])
    layer = record(response, LAYER, lambda: build_module(namespace, BIAS_CLASS, (dim,), {},
                                                         parameters(request, PARAM_PREFIX), f"{BIAS_CLASS}({dim})"),
                   nothing)
    if layer is None:
        return response
    x, x_changed = request["x"].clone(), request["x_changed"].clone()
    with torch.no_grad():
        record(response, "weights", lambda: layer.attention_weights(x))
        record(response, "forward", lambda: layer(x))
        record(response, "forward_changed", lambda: layer(x_changed))
    return response


PROBES = [
    CheckProbe("head_shapes", _head_shapes),
    CheckProbe("head_scale", _head_calls),
    CheckProbe("head_mask", _head_calls),
    CheckProbe("head_values", _head_calls),
    CheckProbe("weight_bars", _weight_bars),
    CheckProbe("unmasked_sees_future", _unmasked_calls),
    CheckProbe("unmasked_bias", _unmasked_calls),
    CheckProbe("two_plus_three", read_tensors(["trace_weights", "trace_output"])),
]
