"""Probes of part 4, shapes and cost: they read the student's answers (a dict of shapes, one
number) as they are. Shipped into the sandbox (see ``probing``); the judges are in ``shapes_judges``.
"""

from __future__ import annotations

from ..probing import CheckProbe, Message, ProbeError, nothing, read_name, record

SHAPE_NAMES = ("Q", "K", "V", "scores", "output")
NOT_SHAPES = "`shape_answers` could not be read as a dict of shapes ({exception})"
NOT_NUMBER = "`qkv_weight_count` is not a number ({exception})"


def _shape(value) -> list[int]:
    try:
        return [int(n) for n in tuple(value)]
    except Exception as exc:
        raise ProbeError(NOT_SHAPES.format(exception=type(exc).__name__)) from None


def _shape_answers(namespace: dict, request: Message) -> Message:
    response: Message = {}
    answers = record(response, "shape_answers", lambda: read_name(namespace, "shape_answers"), nothing)
    if answers is None:
        return response
    for name in SHAPE_NAMES:
        record(response, f"shape.{name}", lambda name=name: answers[name], _shape)
    return response


def _number(value) -> float:
    try:
        return float(value)
    except Exception as exc:
        raise ProbeError(NOT_NUMBER.format(exception=type(exc).__name__)) from None


def _weight_count(namespace: dict, request: Message) -> Message:
    response: Message = {}
    record(response, "qkv_weight_count", lambda: read_name(namespace, "qkv_weight_count"), _number)
    return response


PROBES = [
    CheckProbe("shapes_n100", _shape_answers),
    CheckProbe("qkv_params_gpt3", _weight_count),
]
