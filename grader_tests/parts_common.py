"""Helpers shared by the checks of the assignment's further parts (notebooks 02–05).

Those checks mostly read a value the student computed (a tensor, a number, a
dict of shapes) or call one small function of theirs. Probes turn whatever they
find into plain tensors, JSON values or error strings; judges compare them with
trusted numbers and explain the first thing that is wrong.
"""

from __future__ import annotations

import math
from typing import Callable, Iterable

import torch

from .core import JudgeFailure, Message, ProbeError, describe_exception

MISSING = (
    "`{name}` is not defined. Run the cell that computes it; if that cell still raises "
    "NotImplementedError, replace the stub with your code."
)


def read_name(namespace: dict, name: str):
    if name not in namespace:
        raise ProbeError(MISSING.format(name=name))
    return namespace[name]


def as_tensor(value) -> torch.Tensor:
    """A float64 copy of a tensor, NumPy array, nested list or number."""
    if isinstance(value, torch.Tensor):
        return value.detach().to("cpu", torch.float64).clone()
    return torch.as_tensor(value, dtype=torch.float64).clone()


def record(response: Message, key: str, step: Callable[[], object], convert: Callable = as_tensor) -> None:
    """Run one student step; store its converted value under ``key`` or the error under ``key.error``."""
    try:
        value = convert(step())
    except ProbeError as exc:
        response[f"{key}.error"] = str(exc)
        return
    except Exception as exc:  # student code failing is data
        response[f"{key}.error"] = describe_exception(exc)
        return
    response[key] = value


def probe_tensors(names: Iterable[str]):
    """A probe that reads each name from the namespace as a float64 tensor."""
    names = tuple(names)

    def probe(namespace: dict, request: Message) -> Message:
        response: Message = {}
        for name in names:
            record(response, name, lambda name=name: read_name(namespace, name))
        return response

    return probe


def fetch(response: Message, key: str, what: str | None = None):
    what = what or f"`{key}`"
    error = response.get(f"{key}.error")
    if error is not None:
        if error.startswith("NotImplementedError"):
            raise JudgeFailure(f"{what} still raises NotImplementedError: replace the stub with your code.")
        if error.startswith("`"):
            raise JudgeFailure(error)
        raise JudgeFailure(f"{what} could not be read: {error}")
    if key not in response:
        raise JudgeFailure(f"{what} gave nothing the grader could read.")
    return response[key]


def shape_text(shape) -> str:
    return "(" + ", ".join(str(int(n)) for n in shape) + ")"


def close(a: torch.Tensor, b: torch.Tensor, atol: float) -> bool:
    return tuple(a.shape) == tuple(b.shape) and bool(torch.isfinite(a).all()) and bool(
        ((a - b.to(a.dtype)).abs() <= atol).all()
    )


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
        worst = float((value - expected).abs().nan_to_num(math.inf).max())
        raise JudgeFailure(
            f"{what} has the right shape but not the right values (largest difference {worst:.4g}). {hint}".strip()
        )
