"""The judge side of every hidden check: what runs in the grader's own process, never in a sandbox.

A check is a request builder, a probe and a judge:

* ``build_request(seed)`` chooses inputs and weights and returns a flat ``{name: tensor | value}``
  message (``wire`` carries it into the sandbox);
* the probe (``probing``) runs the student's code on it and returns raw results; every error among
  them reaches the judge as a reason of a fixed form (``reasons.screened``), never as the text the
  sandbox sent;
* the judge decides, from the request and those raw results only, by comparing them with values
  it computes here (``reference``, ``attention_model``), and writes the teaching message. It
  raises ``JudgeFailure`` with that message, or returns to pass.

``registry`` binds the three to the check's definition in ``catalogue``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import torch

from .probing import LAYER, Message, error_key
from .reasons import failure_phrase, is_exception


@dataclass(frozen=True)
class Verdict:
    passed: bool
    message: str = ""


class JudgeFailure(Exception):
    """Raised inside a judge to fail the check with a teaching message."""


@dataclass(frozen=True)
class CheckJudge:
    """The grader side of one check: how to build its request, and how to judge the reply."""

    id: str
    build_request: Callable[[int], Message]
    judge: Callable[[Message, Message], None]


def generator(seed: int) -> torch.Generator:
    gen = torch.Generator()
    gen.manual_seed(seed)
    return gen


def no_request(seed: int) -> Message:
    """For checks that only read what the student's cells computed."""
    return {}


# --------------------------------------------------------------------------- reading a reply

def fetch(response: Message, key: str, what: str | None = None):
    """The raw result stored under ``key``, or a ``JudgeFailure`` explaining why there is none."""
    what = what or f"`{key}`"
    layer_error = response.get(error_key(LAYER))
    if layer_error is not None:
        if is_exception(layer_error):
            raise JudgeFailure(f"The grader could not build your layer: it {failure_phrase(layer_error)}.")
        raise JudgeFailure(f"The grader could not build your layer: {layer_error}.")
    error = response.get(error_key(key))
    if error is not None:
        if error.startswith("NotImplementedError"):
            raise JudgeFailure(f"{what} still raises NotImplementedError: replace the stub with your code.")
        if error.startswith("`"):  # the probe's own words: a name the student has not defined
            raise JudgeFailure(error)
        raise JudgeFailure(f"{what} {failure_phrase(error)}.")
    if key not in response:
        raise JudgeFailure(f"{what} gave nothing the grader could read.")
    return response[key]


def fetch_tensor(response: Message, key: str, what: str | None = None) -> torch.Tensor:
    value = fetch(response, key, what)
    if not isinstance(value, torch.Tensor):
        raise JudgeFailure(f"{what or key} gave nothing the grader could read as a tensor.")
    return value


# --------------------------------------------------------------------------- comparing

def shape_text(shape) -> str:
    return "(" + ", ".join(str(int(n)) for n in shape) + ")"


def expect_shape(value: torch.Tensor, shape: tuple, what: str) -> None:
    if tuple(value.shape) != tuple(shape):
        raise JudgeFailure(f"{what} has shape {shape_text(value.shape)}, but {shape_text(shape)} was expected.")


def close(a: torch.Tensor, b: torch.Tensor, atol: float, rtol: float = 0.0) -> bool:
    """Same shape, finite, and within ``atol + rtol·|b|`` everywhere."""
    if tuple(a.shape) != tuple(b.shape):
        return False
    a, b = a.to(torch.float64), b.to(torch.float64)
    return bool(torch.isfinite(a).all()) and bool(((a - b).abs() <= atol + rtol * b.abs()).all())


def largest_difference(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a.to(torch.float64) - b.to(torch.float64)).abs().nan_to_num(math.inf).max())


def judge_value(value: torch.Tensor, expected: torch.Tensor, what: str, atol: float,
                diagnoses: list[tuple[torch.Tensor, str]] = (), hint: str = "") -> None:
    """Fail unless ``value`` equals ``expected`` within ``atol``; name a known mistake when one matches."""
    for candidate, text in diagnoses:
        if close(value, candidate, atol) and not close(value, expected, atol):
            raise JudgeFailure(f"{what}: {text}")
    if tuple(value.shape) != tuple(expected.shape):
        raise JudgeFailure(
            f"{what} has shape {shape_text(value.shape)}, but {shape_text(expected.shape)} was expected. {hint}".strip()
        )
    if not close(value, expected, atol):
        raise JudgeFailure(
            f"{what} has the right shape but not the right values (largest difference "
            f"{largest_difference(value, expected):.4g}). {hint}".strip()
        )
