"""Probes of the multi-head attention assignment: they build the student's ``MultiHeadSelfAttention``
with the grader's weights, call its methods on the request's inputs and return what they produced,
raw. Shipped into the sandbox (see ``grader_tests.probing``); the judges are in ``judges``.
"""

from __future__ import annotations

import torch

from grader_tests.probing import LAYER, CheckProbe, Message, build_module, nothing, parameters, record

CLASS_NAME = "MultiHeadSelfAttention"
PARAM_PREFIX = "param."
PROJECTIONS = ("q_proj", "k_proj", "v_proj", "out_proj")

# What the probes' error words may name (the trusted screen in grader_tests.reasons rebuilds them).
DEFINED_NAMES: frozenset[str] = frozenset()
CLASS_NAMES = frozenset({CLASS_NAME})
PARAMETER_OWNERS = frozenset(PROJECTIONS)


def _signature(dim: int, heads: int, causal: bool) -> str:
    return f"{CLASS_NAME}({dim}, {heads}, causal={causal})"


def _layer(namespace: dict, dim: int, heads: int, causal: bool, params: dict):
    return build_module(namespace, CLASS_NAME, (dim, heads), {"causal": causal}, params,
                        _signature(dim, heads, causal))


def _calls(*methods: str):
    """A probe that builds one layer with the request's weights and calls each of ``methods``:
    ``split`` (split_heads(x)), ``merge`` (merge_heads(y)), ``weights`` (attention_weights(x)) and
    ``forward`` (layer(x))."""

    def probe(namespace: dict, request: Message) -> Message:
        response: Message = {}
        dim, heads, causal = int(request["dim"]), int(request["heads"]), bool(request["causal"])
        layer = record(response, LAYER, lambda: _layer(namespace, dim, heads, causal,
                                                       parameters(request, PARAM_PREFIX)), nothing)
        if layer is None:
            return response
        steps = {
            "split": lambda: layer.split_heads(request["x"].clone()),
            "merge": lambda: layer.merge_heads(request["y"].clone()),
            "weights": lambda: layer.attention_weights(request["x"].clone()),
            "forward": lambda: layer(request["x"].clone()),
        }
        with torch.no_grad():
            for method in methods:
                record(response, method, steps[method])
        return response

    return probe


def _shapes(namespace: dict, request: Message) -> Message:
    """Fresh layers with their own initial weights, at every (B, T, D, H, causal) of the request."""
    response: Message = {}
    for i, (_, _, dim, heads, causal) in enumerate(request["cases"]):
        layer = record(response, LAYER, lambda: _layer(namespace, dim, heads, causal, {}), nothing)
        if layer is None:
            return response
        x, y = request[f"x{i}"].clone(), request[f"y{i}"].clone()
        with torch.no_grad():
            record(response, f"split{i}", lambda: layer.split_heads(x.clone()))
            record(response, f"merge{i}", lambda: layer.merge_heads(y.clone()))
            record(response, f"weights{i}", lambda: layer.attention_weights(x.clone()))
            record(response, f"forward{i}", lambda: layer(x.clone()))
    return response


CHECKS = [
    CheckProbe("mh_shapes", _shapes),
    CheckProbe("mh_split_order", _calls("split")),
    CheckProbe("mh_merge_order", _calls("merge")),
    CheckProbe("mh_head_scale", _calls("weights")),
    CheckProbe("mh_softmax_dim", _calls("weights")),
    CheckProbe("mh_mask_every_head", _calls("weights")),
    CheckProbe("mh_causal_flag", _calls("weights")),
    CheckProbe("mh_heads_independent", _calls("weights")),
    CheckProbe("mh_values_per_head", _calls("weights", "forward")),
    CheckProbe("mh_one_out_proj", _calls("weights", "forward")),
    CheckProbe("mh_one_head", _calls("weights", "forward")),
]
