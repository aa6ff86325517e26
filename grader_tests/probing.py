"""The probe side of every hidden check: what runs inside the sandbox, next to the student's code.

A *probe* calls the student's definitions on the inputs of a request (built outside from a seed
the grader chose) and returns a flat message of **raw results**: the tensors, strings and numbers
the student's code produced, and the text of any error it raised. Nothing in a reply is a
verdict, a comparison, a count of problems or a dtype decided here: the student's notebook runs
in the same interpreter and can rewrite any reply, so only the *judge* (``judging`` and the
``*_judges`` modules, outside the sandbox) decides, by comparing these raw results with values it
computes itself from inputs it chose.

Conventions every probe follows:

* a step of student code runs through ``record``; its result is stored under its key, or, if it
  fails, the error text under ``error_key(key)`` (``"<key>.error"``) and nothing under the key;
* building the student's module is the step ``LAYER`` (so its failure is ``"layer.error"``);
* a missing definition is a ``ProbeError`` whose text names what to run or define.

Only this module and the ``*_probes`` modules are sent into a sandbox; none of them imports
anything that judges, expects or computes a reference (``tests`` check the payload).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

Message = dict
LAYER = "layer"
ERROR_SUFFIX = ".error"
# The probe's own words. A judge shows them only as ``reasons`` rebuilds them from these templates
# (each field checked), because a notebook sharing the sandbox could make any text of a reply.
MISSING = (
    "`{name}` is not defined. Run the cell that computes it; if that cell still raises "
    "NotImplementedError, replace the stub with your code."
)
NO_CLASS = "there is no class named {cls}: run the cell that defines it and keep its name"
NOT_A_TENSOR = "returned a {type}, but a torch.Tensor was expected"
CONSTRUCTOR_RAISED = "{signature} raised {exception}"
WRONG_SHAPE = "{param} is missing or has the wrong shape: keep the layers created in __init__"


def error_key(key: str) -> str:
    return key + ERROR_SUFFIX


class ProbeError(Exception):
    """Raised inside a probe step with a message meant for the student."""


@dataclass(frozen=True)
class CheckProbe:
    """The sandbox side of one check: its id and the probe that calls the student's code."""

    id: str
    probe: Callable[[dict, Message], Message]


def describe_exception(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    if len(text) > 300:
        text = text[:300] + "…"
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


# --------------------------------------------------------------------------- how a step's result is kept

def tensor_copy(value) -> torch.Tensor:
    """The student's tensor, detached and copied, with its own dtype (the judge looks at it)."""
    if not isinstance(value, torch.Tensor):
        raise ProbeError(NOT_A_TENSOR.format(type=type(value).__name__))
    return value.detach().clone()


def float64_copy(value) -> torch.Tensor:
    """A float64 copy of a tensor, NumPy array, nested list or number."""
    if isinstance(value, torch.Tensor):
        return value.detach().to("cpu", torch.float64).clone()
    return torch.as_tensor(value, dtype=torch.float64).clone()


def nothing(value) -> None:
    """For steps whose success is all that is kept (building a module)."""
    return None


def record(response: Message, key: str, step: Callable[[], object], keep: Callable = tensor_copy):
    """Run one step of student code. Store ``keep(result)`` under ``key`` (unless it is None),
    or the error text under ``error_key(key)``. Return the live result, or None if it failed."""
    try:
        live = step()
        value = keep(live)
    except ProbeError as exc:
        response[error_key(key)] = str(exc)
        return None
    except Exception as exc:  # any failure of student code is data, not a crash
        response[error_key(key)] = describe_exception(exc)
        return None
    if value is not None:
        response[key] = value
    return live


# --------------------------------------------------------------------------- reading the student's definitions

def read_name(namespace: dict, name: str):
    if name not in namespace:
        raise ProbeError(MISSING.format(name=name))
    return namespace[name]


def read_tensors(names) -> Callable[[dict, Message], Message]:
    """A probe that reads each name from the namespace as a float64 tensor."""
    names = tuple(names)

    def probe(namespace: dict, request: Message) -> Message:
        response: Message = {}
        for name in names:
            record(response, name, lambda name=name: read_name(namespace, name), float64_copy)
        return response

    return probe


def parameters(request: Message, prefix: str, dtype=None) -> dict[str, torch.Tensor]:
    """The request's ``<prefix><module>.<weight|bias>`` tensors, by ``<module>.<kind>``."""
    return {k[len(prefix):]: (v if dtype is None else v.to(dtype))
            for k, v in request.items() if k.startswith(prefix)}


def build_module(namespace: dict, class_name: str, args: tuple, kwargs: dict, params: dict,
                 signature: str, *, dtype=None, wrong_shape: str | None = None):
    """The student's module built with ``args``/``kwargs``, cast to ``dtype`` and loaded with ``params``."""
    cls = namespace.get(class_name)
    if cls is None:
        raise ProbeError(NO_CLASS.format(cls=class_name))
    try:
        module = cls(*args, **kwargs)
    except Exception as exc:
        raise ProbeError(CONSTRUCTOR_RAISED.format(signature=signature, exception=type(exc).__name__)) from None
    if dtype is not None:
        module = module.to(dtype)
    with torch.no_grad():
        for name, value in params.items():
            owner_name, kind = name.split(".")
            owner = getattr(module, owner_name, None)
            target = getattr(owner, kind, None) if owner is not None else None
            if not isinstance(target, torch.Tensor) or tuple(target.shape) != tuple(value.shape):
                raise ProbeError((wrong_shape or WRONG_SHAPE).format(param=name, owner=owner_name))
            target.copy_(value.to(target.dtype))
    return module
