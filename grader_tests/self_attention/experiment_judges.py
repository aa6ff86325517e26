"""Requests and judges of part 5, experiments (notebook ``05_experiments``). Trusted: never in a sandbox.

* the character tokenizer: ``build_vocab``, ``encode``, ``decode``;
* ``count_parameters(module)``, used to show that attention's parameter count
  grows with D and not with T;
* the strip-mask experiment: the loss curves ``losses_causal`` and
  ``losses_unmasked`` the notebook trained; without the mask the model can read
  the next character, so its loss must collapse far below the masked one.

The probes (``experiment_probes``) call the student's functions and read the curves.
"""

from __future__ import annotations

import torch

from ..judging import CheckJudge, JudgeFailure, Message, fetch, generator, no_request
from ..probing import error_key
from ..reasons import failure_phrase

TOKENIZER_TEXTS = [
    "The animal didn't cross the street because it was too tired.",
    "The animal didn't cross the street because it was too wide.",
]


def _tokenizer_request(seed: int) -> Message:
    gen = generator(seed)
    alphabet = "abcdefghijklmnopqrstuvwxyz ABC.,'!?0123456789"
    picks = torch.randint(len(alphabet), (40,), generator=gen)
    return {"texts": TOKENIZER_TEXTS + ["".join(alphabet[i] for i in picks)]}


def _tokenizer_judge(request: Message, response: Message) -> None:
    fetch_error(response, "tokenizer")
    for i, text in enumerate(request["texts"]):
        where = f"For the text {text!r}"
        for key in (f"vocab{i}", f"ids{i}", f"decoded{i}"):
            error = response.get(error_key(key))
            if error is None:
                continue
            if error.startswith("NotImplementedError"):
                raise JudgeFailure("The tokenizer still raises NotImplementedError: replace the stubs with your code.")
            raise JudgeFailure(f"{where}, the tokenizer {failure_phrase(error)}. encode gives each character its index "
                               "in the vocabulary (0 to len(vocab) - 1), and decode maps those ids back.")
        vocab = fetch(response, f"vocab{i}", "build_vocab(text)")
        if vocab != sorted(set(text)):
            if sorted(vocab) == sorted(set(text)):
                raise JudgeFailure(f"{where}, build_vocab returned the right characters in an arbitrary order. Sort "
                                   "them (sorted(set(text))), so every run gives each character the same id.")
            raise JudgeFailure(f"{where}, build_vocab should return each distinct character once, sorted; it returned "
                               f"{len(vocab)} entries for {len(set(text))} distinct characters.")
        ids = fetch(response, f"ids{i}", "encode(text, vocab)").tolist()
        want = [vocab.index(ch) for ch in text]
        if ids != want:
            raise JudgeFailure(f"{where}, encode should give one id per character, the character's index in the "
                               "vocabulary (starting at 0).")
        if fetch(response, f"decoded{i}", "decode(ids, vocab)") != text:
            raise JudgeFailure(f"{where}, decode(encode(text)) does not give the text back: decode maps each id to "
                               "vocab[id] and joins the characters.")


def fetch_error(response: Message, key: str) -> None:
    """Fail with the probe's words if the step ``key`` (reading the student's definitions) failed."""
    if error_key(key) in response:
        fetch(response, key)


def expected_counts(request: Message) -> list[int]:
    counts = [4 * d * d + 4 * d for d in request["dims"]]
    counts.append(int(request["linear_in"]) * int(request["linear_out"]))
    counts.append(3 * 4 + 4 + 4 * 2 + 2)
    return counts


def _count_request(seed: int) -> Message:
    gen = generator(seed)
    dims = sorted(set(int(d) for d in torch.randint(3, 40, (2,), generator=gen))) + [64]
    return {"dims": dims, "linear_in": int(torch.randint(2, 9, (1,), generator=gen)), "linear_out": 7}


def _count_judge(request: Message, response: Message) -> None:
    fetch_error(response, "count_parameters")
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


JUDGES = [
    CheckJudge("char_tokenizer", _tokenizer_request, _tokenizer_judge),
    CheckJudge("param_count", _count_request, _count_judge),
    CheckJudge("strip_mask_collapse", no_request, _strip_mask_judge),
]
