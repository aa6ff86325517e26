"""Probes of the core notebook's checks: they build the student's ``SelfAttention`` with the
grader's weights, call it on the request's inputs and return what it produced, raw.

Shipped into the sandbox (see ``probing``); the judges are in ``self_attention_judges``.
"""

from __future__ import annotations

import torch

from ..probing import (CONSTRUCTOR_RAISED, LAYER, NO_CLASS, CheckProbe, Message, ProbeError, build_module, error_key,
                      nothing, parameters, record)

CLASS_NAME = "SelfAttention"
PROJECTIONS = ("q_proj", "k_proj", "v_proj", "out_proj")
PARAM_PREFIX = "param."
LARGE_PARAM_PREFIX = "large.param."
WRONG_PARAMETER = ("the layer needs {owner} = nn.Linear(D, D) with a bias, as given in __init__; "
                   "{param} is missing or has the wrong shape")


def _layer(namespace: dict, request: Message, *, prefix: str = PARAM_PREFIX, dtype=None):
    dim, causal = int(request["dim"]), bool(request["causal"])
    return build_module(namespace, CLASS_NAME, (dim,), {"causal": causal}, parameters(request, prefix),
                        f"{CLASS_NAME}({dim}, causal={causal})", dtype=dtype, wrong_shape=WRONG_PARAMETER)


def _fresh_layer(response: Message, namespace: dict, request: Message, **kwargs):
    return record(response, LAYER, lambda: _layer(namespace, request, **kwargs), nothing)


def _calls(weights=True, forward=True, changed=False):
    def probe(namespace: dict, request: Message) -> Message:
        response: Message = {}
        layer = _fresh_layer(response, namespace, request)
        if layer is None:
            return response
        x = request["x"].clone()
        with torch.no_grad():
            if weights:
                record(response, "weights", lambda: layer.attention_weights(x))
            if forward:
                record(response, "forward", lambda: layer(x))
            if changed:
                x_changed = request["x_changed"].clone()
                record(response, "forward_changed", lambda: layer(x_changed))
        return response

    return probe


def _student_class(namespace: dict):
    cls = namespace.get(CLASS_NAME)
    if cls is None:
        raise ProbeError(NO_CLASS.format(cls=CLASS_NAME))
    return cls


def _construct(cls, dim: int, causal: bool):
    try:
        return cls(dim, causal=causal)
    except Exception as exc:
        raise ProbeError(CONSTRUCTOR_RAISED.format(signature=f"{CLASS_NAME}({dim}, causal={causal})",
                                                   exception=type(exc).__name__)) from None


def _shapes(namespace: dict, request: Message) -> Message:
    """Fresh layers with their own initial weights, at every (B, T, D) of the request."""
    response: Message = {}
    cls = record(response, LAYER, lambda: _student_class(namespace), nothing)
    if cls is None:
        return response
    for i, (_, _, dim, causal) in enumerate(request["cases"]):
        x = request[f"x{i}"].clone()
        layer = record(response, f"forward{i}", lambda: _construct(cls, dim, causal), nothing)
        if layer is None:
            response[error_key(f"weights{i}")] = response[error_key(f"forward{i}")]
            continue
        with torch.no_grad():
            record(response, f"forward{i}", lambda: layer(x))
            record(response, f"weights{i}", lambda: layer.attention_weights(x))
    return response


def _gradients(namespace: dict, request: Message) -> Message:
    """The output, the weights and the gradient of <upstream, output> for the input and every parameter."""
    response: Message = {}
    layer = _fresh_layer(response, namespace, request)
    if layer is None:
        return response
    with torch.no_grad():
        record(response, "weights", lambda: layer.attention_weights(request["x"].clone()))
    x = request["x"].clone().requires_grad_(True)

    def forward_and_backward():
        out = layer(x)
        if isinstance(out, torch.Tensor):
            (out * request["upstream"]).sum().backward()
        return out

    record(response, "forward", forward_and_backward)
    for name, param in layer.named_parameters():
        if param.grad is not None:
            response[f"grad.{name}"] = param.grad.detach().clone()
    if x.grad is not None:
        response["grad.x"] = x.grad.detach().clone()
    return response


def _input_unchanged(namespace: dict, request: Message) -> Message:
    """The outputs, and the input tensor itself as it is after each call."""
    response: Message = {}
    layer = _fresh_layer(response, namespace, request)
    if layer is None:
        return response
    x = request["x"].clone()
    with torch.no_grad():
        record(response, "forward", lambda: layer(x))
        record(response, "x_after_forward", lambda: x)
        record(response, "weights", lambda: layer.attention_weights(x))
        record(response, "x_after_weights", lambda: x)
    return response


def _float64(namespace: dict, request: Message) -> Message:
    response: Message = {}
    layer = _fresh_layer(response, namespace, request, dtype=torch.float64)
    if layer is None:
        return response
    with torch.no_grad():
        record(response, "weights", lambda: layer.attention_weights(request["x"].clone()))
        record(response, "forward", lambda: layer(request["x"].clone()))
    return response


def _large_scores(namespace: dict, request: Message) -> Message:
    """Two fresh layers of the same class: ordinary weights and inputs, then weights that make scores large."""
    response: Message = {}
    ordinary = _fresh_layer(response, namespace, request)
    large = _fresh_layer(response, namespace, request, prefix=LARGE_PARAM_PREFIX)
    if ordinary is None or large is None:
        return response
    with torch.no_grad():
        record(response, "weights", lambda: ordinary.attention_weights(request["x"].clone()))
        record(response, "forward", lambda: ordinary(request["x"].clone()))
        record(response, "weights_large", lambda: large.attention_weights(request["x_large"].clone()))
        record(response, "forward_large", lambda: large(request["x_large"].clone()))
    return response


def _layer_reused(namespace: dict, request: Message) -> Message:
    """One layer: a short sequence, a longer one, then ``.double()`` and a float64 one."""
    response: Message = {}
    layer = _fresh_layer(response, namespace, request)
    if layer is None:
        return response
    with torch.no_grad():
        for i in (1, 2):
            x = request[f"x{i}"]
            record(response, f"forward{i}", lambda: layer(x.clone()))
            record(response, f"weights{i}", lambda: layer.attention_weights(x.clone()))
        if record(response, "double", lambda: layer.double(), nothing) is not None:
            x = request["x3"]
            record(response, "forward3", lambda: layer(x.clone()))
            record(response, "weights3", lambda: layer.attention_weights(x.clone()))
    return response


def _long_sequences(namespace: dict, request: Message) -> Message:
    """A fresh layer per sequence length."""
    response: Message = {}
    for i in range(len(request["lengths"])):
        layer = _fresh_layer(response, namespace, request)
        if layer is None:
            return response
        x = request[f"x{i}"]
        with torch.no_grad():
            record(response, f"forward{i}", lambda: layer(x.clone()))
            record(response, f"weights{i}", lambda: layer.attention_weights(x.clone()))
    return response


PROBES = [
    CheckProbe("shapes", _shapes),
    CheckProbe("score_pairing", _calls(forward=False)),
    CheckProbe("sqrt_d_scale", _calls(forward=False)),
    CheckProbe("softmax_dim", _calls(forward=False)),
    CheckProbe("mask_polarity", _calls(forward=False)),
    CheckProbe("no_future_leak", _calls(weights=False, changed=True)),
    CheckProbe("mask_before_softmax", _calls(forward=False)),
    CheckProbe("causal_flag", _calls(changed=True)),
    CheckProbe("value_and_out_proj", _calls(weights=False)),
    CheckProbe("same_computation", _calls()),
    CheckProbe("gradients", _gradients),
    CheckProbe("input_unchanged", _input_unchanged),
    CheckProbe("float64", _float64),
    CheckProbe("large_scores", _large_scores),
    CheckProbe("layer_reused", _layer_reused),
    CheckProbe("long_sequences", _long_sequences),
]
