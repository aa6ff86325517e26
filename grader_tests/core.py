"""What a hidden check is: a request builder, a probe and a judge.

* ``build_request(seed)`` (trusted) chooses inputs and weights and returns a flat
  ``{name: tensor | scalar}`` message.
* ``probe(namespace, request)`` (untrusted: it calls student code) runs the
  student's definitions from ``namespace`` on the request and returns plain
  tensors and error strings, nothing else.
* ``judge(request, response)`` (trusted: never touches student objects) decides
  pass or fail and writes the teaching message.

The split lets the grader run probes in a sandbox and judges in its own process;
run back to back in one process they are the stock nbgrader path.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from typing import Callable

import torch

Message = dict


@dataclass(frozen=True)
class Verdict:
    passed: bool
    message: str = ""


class ProbeError(Exception):
    """Raised inside a probe step with a message meant for the student."""


class JudgeFailure(Exception):
    """Raised inside a judge to fail the check with a teaching message."""


@dataclass(frozen=True)
class Check:
    id: str
    title: str  # student-facing: what this check looks for
    points: float
    misconception: str  # short label for reports: the idea a failure points to
    build_request: Callable[[int], Message]
    probe: Callable[[dict, Message], Message]
    judge: Callable[[Message, Message], Verdict]

    def default_seed(self) -> int:
        """A fixed per-check seed, so the stock path grades reproducibly."""
        return zlib.crc32(self.id.encode()) & 0x7FFFFFFF

    def run_in_process(self, namespace: dict, seed: int | None = None) -> Verdict:
        """Probe and judge back to back (the stock, in-kernel path)."""
        request = self.build_request(self.default_seed() if seed is None else seed)
        response = self.probe(namespace, request)
        return self.judge(request, response)


def judged(judge: Callable[[Message, Message], None]) -> Callable[[Message, Message], Verdict]:
    """Turn a judge written with ``JudgeFailure`` into one that returns a Verdict."""

    def run(request: Message, response: Message) -> Verdict:
        try:
            judge(request, response)
        except JudgeFailure as failure:
            return Verdict(False, str(failure))
        return Verdict(True)

    run.__name__ = judge.__name__
    run.__doc__ = judge.__doc__
    return run


def describe_exception(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    if len(text) > 300:
        text = text[:300] + "…"
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def record_step(response: Message, key: str, step: Callable[[], object]):
    """Run one call into student code; keep a detached tensor copy or the error.

    Returns the live value (tensor) so later steps can use it, or None."""
    try:
        value = step()
    except ProbeError as exc:
        response[f"{key}.error"] = str(exc)
        return None
    except Exception as exc:  # any failure of student code is data, not a crash
        response[f"{key}.error"] = describe_exception(exc)
        return None
    if not isinstance(value, torch.Tensor):
        response[f"{key}.error"] = (
            f"returned a {type(value).__name__}, but a torch.Tensor was expected"
        )
        return None
    response[key] = value.detach().clone()
    return value


def generator(seed: int) -> torch.Generator:
    gen = torch.Generator()
    gen.manual_seed(seed)
    return gen
