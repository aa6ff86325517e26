"""Hidden checks of part 5, experiments (notebook ``05_experiments``).

* the character tokenizer: ``build_vocab``, ``encode``, ``decode``;
* ``count_parameters(module)``, used to show that attention's parameter count
  grows with D and not with T;
* the strip-mask experiment: the loss curves ``losses_causal`` and
  ``losses_unmasked`` the notebook trained; without the mask the model can read
  the next character, so its loss must collapse far below the masked one.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from .core import Check, JudgeFailure, Message, describe_exception, generator, judged
from .parts_common import MISSING, fetch, probe_tensors

TOKENIZER_TEXTS = [
    "The animal didn't cross the street because it was too tired.",
    "The animal didn't cross the street because it was too wide.",
]


def _tokenizer_request(seed: int) -> Message:
    gen = generator(seed)
    alphabet = "abcdefghijklmnopqrstuvwxyz ABC.,'!?0123456789"
    picks = torch.randint(len(alphabet), (40,), generator=gen)
    return {"texts": TOKENIZER_TEXTS + ["".join(alphabet[i] for i in picks)]}


def _tokenizer_probe(namespace: dict, request: Message) -> Message:
    response: Message = {}
    for name in ("build_vocab", "encode", "decode"):
        if name not in namespace:
            response["error"] = MISSING.format(name=name)
            return response
    for i, text in enumerate(request["texts"]):
        try:
            vocab = list(namespace["build_vocab"](text))
            response[f"vocab{i}"] = [str(ch) for ch in vocab][:500]
            ids = namespace["encode"](text, vocab)
            response[f"ids{i}"] = torch.as_tensor(ids).to(torch.int64).reshape(-1).clone()
            response[f"decoded{i}"] = str(namespace["decode"](response[f"ids{i}"].tolist(), vocab))[:5000]
        except Exception as exc:
            response[f"error{i}"] = describe_exception(exc)
    return response


@judged
def _tokenizer_judge(request: Message, response: Message) -> None:
    if "error" in response:
        raise JudgeFailure(response["error"])
    for i, text in enumerate(request["texts"]):
        where = f"For the text {text!r}"
        if f"error{i}" in response:
            error = response[f"error{i}"]
            if error.startswith("NotImplementedError"):
                raise JudgeFailure("The tokenizer still raises NotImplementedError: replace the stubs with your code.")
            raise JudgeFailure(f"{where}, the tokenizer failed with {error}. encode gives each character its index "
                               "in the vocabulary (0 to len(vocab) - 1), and decode maps those ids back.")
        vocab = response[f"vocab{i}"]
        if vocab != sorted(set(text)):
            if sorted(vocab) == sorted(set(text)):
                raise JudgeFailure(f"{where}, build_vocab returned the right characters in an arbitrary order. Sort "
                                   "them (sorted(set(text))), so every run gives each character the same id.")
            raise JudgeFailure(f"{where}, build_vocab should return each distinct character once, sorted; it returned "
                               f"{len(vocab)} entries for {len(set(text))} distinct characters.")
        ids = response[f"ids{i}"].tolist()
        want = [vocab.index(ch) for ch in text]
        if ids != want:
            raise JudgeFailure(f"{where}, encode should give one id per character, the character's index in the "
                               "vocabulary (starting at 0).")
        if response[f"decoded{i}"] != text:
            raise JudgeFailure(f"{where}, decode(encode(text)) does not give the text back: decode maps each id to "
                               "vocab[id] and joins the characters.")


class _FourProjections(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.q_proj, self.k_proj, self.v_proj, self.out_proj = (nn.Linear(dim, dim) for _ in range(4))


def _count_modules(request: Message) -> list[nn.Module]:
    modules: list[nn.Module] = [_FourProjections(d) for d in request["dims"]]
    modules.append(nn.Linear(int(request["linear_in"]), int(request["linear_out"]), bias=False))
    frozen = nn.Sequential(nn.Linear(3, 4), nn.Linear(4, 2))
    frozen[0].weight.requires_grad_(False)
    modules.append(frozen)
    return modules


def expected_counts(request: Message) -> list[int]:
    counts = [4 * d * d + 4 * d for d in request["dims"]]
    counts.append(int(request["linear_in"]) * int(request["linear_out"]))
    counts.append(3 * 4 + 4 + 4 * 2 + 2)
    return counts


def _count_request(seed: int) -> Message:
    gen = generator(seed)
    dims = sorted(set(int(d) for d in torch.randint(3, 40, (2,), generator=gen))) + [64]
    return {"dims": dims, "linear_in": int(torch.randint(2, 9, (1,), generator=gen)), "linear_out": 7}


def _count_probe(namespace: dict, request: Message) -> Message:
    fn = namespace.get("count_parameters")
    if fn is None:
        return {"error": MISSING.format(name="count_parameters")}
    response: Message = {}
    for i, module in enumerate(_count_modules(request)):
        try:
            response[f"count{i}"] = float(fn(module))
        except Exception as exc:
            response[f"count{i}.error"] = describe_exception(exc)
    return response


@judged
def _count_judge(request: Message, response: Message) -> None:
    if "error" in response:
        raise JudgeFailure(response["error"])
    dims = list(request["dims"])
    for i, want in enumerate(expected_counts(request)):
        got = fetch(response, f"count{i}", "count_parameters(module)")
        if got == want:
            continue
        if i < len(dims):
            d = dims[i]
            known = {
                4 * d * d: "you counted the weight matrices but not the biases",
                8.0: "you counted parameter tensors, not the numbers in them: add up p.numel()",
                4 * d + 4.0: "you counted only the biases",
            }
            hint = known.get(got, "add up p.numel() over module.parameters()")
            raise JudgeFailure(f"For four nn.Linear({d}, {d}) layers, count_parameters gave {got:,.0f} instead of "
                               f"{want:,}: {hint}.")
        if i == len(dims) + 1:
            raise JudgeFailure(f"For a model whose first weight is frozen (requires_grad=False), count_parameters gave "
                               f"{got:,.0f} instead of {want}: count every parameter, trainable or not.")
        raise JudgeFailure(f"count_parameters gave {got:,.0f} instead of {want:,} for a plain nn.Linear: add up "
                           "p.numel() over module.parameters().")


def _tail(losses: torch.Tensor) -> float:
    n = max(1, len(losses) // 10)
    return float(losses[-n:].mean())


def _head(losses: torch.Tensor) -> float:
    n = max(1, len(losses) // 20)
    return float(losses[:n].mean())


@judged
def _strip_mask_judge(request: Message, response: Message) -> None:
    curves = {}
    for key in ("losses_causal", "losses_unmasked"):
        value = fetch(response, key).reshape(-1)
        if value.numel() < 50:
            raise JudgeFailure(f"`{key}` holds {value.numel()} losses; record the loss of every training step "
                               "(at least 50 steps).")
        if not torch.isfinite(value).all():
            raise JudgeFailure(f"`{key}` contains NaN or infinity: the training diverged.")
        curves[key] = value
    causal, unmasked = curves["losses_causal"], curves["losses_unmasked"]
    c_end, u_end = _tail(causal), _tail(unmasked)
    summary = f"(final losses: causal {c_end:.2f}, unmasked {u_end:.2f} nats)"
    if c_end < 0.5 and u_end < 0.5:
        raise JudgeFailure(f"Both models reach a loss near 0 {summary}. Even the masked model can see its answer: "
                           "the targets must be the *next* characters (y is x shifted left by one), and the mask "
                           "must be applied when causal=True.")
    if c_end > _head(causal) - 0.3 and u_end > _head(unmasked) - 0.3:
        raise JudgeFailure(f"Neither loss goes down {summary}. Check the training loop: zero the gradients, call "
                           "backward() on the loss and step the optimizer every iteration.")
    if u_end > 0.5 * c_end and abs(u_end - c_end) < 0.25 * max(c_end, 1e-9):
        raise JudgeFailure(f"Both models end at about the same loss {summary}: the causal flag does not change "
                           "your model. The unmasked layer must let position t read position t + 1.")
    if c_end < 0.5 * u_end:
        raise JudgeFailure(f"The masked model's loss collapsed and the unmasked one did not {summary}: the two runs "
                           "look swapped, or the mask is inverted.")
    if not (u_end < 0.5 * c_end and u_end < 0.75):
        raise JudgeFailure(f"The unmasked model's loss should collapse far below the masked one {summary}. Train "
                           "longer or check that the unmasked run really uses causal=False.")


CHECKS = [
    Check("char_tokenizer", "character tokenizer: sorted vocabulary, encode and decode round trip", 1,
          "tokenizer", _tokenizer_request, _tokenizer_probe, _tokenizer_judge),
    Check("param_count", "count_parameters counts every number in a module's parameters", 1, "parameter counting",
          _count_request, _count_probe, _count_judge),
    Check("strip_mask_collapse", "without the mask the model cheats: its loss collapses far below the masked one", 2,
          "why the causal mask matters",
          lambda seed: {}, probe_tensors(["losses_causal", "losses_unmasked"]), _strip_mask_judge),
]
