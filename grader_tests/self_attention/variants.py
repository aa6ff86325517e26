"""Each student's own numbers for part 2, attention by hand (notebook ``02_by_hand``).

The hand computations stay doable: embeddings are multiples of 0.05 between 0.05 and 0.95 and the
three-token projections multiples of 0.1 between 0.1 and 0.9, as in the release. The one-hot ``x3``
and the shapes are the same for everyone. Trusted: never in a sandbox (the judges build their
requests from ``inputs``).
"""

from __future__ import annotations

import torch

from ..variants import is_variant

NOTEBOOK = "02_by_hand"
CHECKS = ("by_hand_dot", "by_hand_scores", "by_hand_weights", "by_hand_context", "three_tokens")
TOKENS = ("Your", "journey", "starts", "with", "one", "step")

RELEASED = {
    "inputs": torch.tensor([[0.43, 0.15, 0.89],
                            [0.55, 0.87, 0.66],
                            [0.57, 0.85, 0.64],
                            [0.22, 0.58, 0.33],
                            [0.77, 0.25, 0.10],
                            [0.05, 0.80, 0.55]], dtype=torch.float64),
    "W_Q": torch.tensor([[0.5, 0.2], [0.1, 0.8], [0.3, 0.4], [0.7, 0.1]], dtype=torch.float64),
    "W_K": torch.tensor([[0.6, 0.1], [0.2, 0.9], [0.4, 0.3], [0.1, 0.6]], dtype=torch.float64),
    "W_V": torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [0.5, 0.5]], dtype=torch.float64),
}


def _steps(gen: torch.Generator, shape: tuple, low: int, high: int, step: float) -> torch.Tensor:
    return torch.randint(low, high + 1, shape, generator=gen).to(torch.float64) * step


def inputs(seed: int) -> dict[str, torch.Tensor]:
    """The numbers of ``seed``'s variant; the release's for any seed that is not a variant's."""
    if not is_variant(seed):
        return {name: value.clone() for name, value in RELEASED.items()}
    gen = torch.Generator()
    gen.manual_seed(seed)
    return {"inputs": _steps(gen, (6, 3), 1, 19, 0.05), "W_Q": _steps(gen, (4, 2), 1, 9, 0.1),
            "W_K": _steps(gen, (4, 2), 1, 9, 0.1), "W_V": _steps(gen, (4, 2), 0, 10, 0.1)}


def _row(values) -> str:
    return "[" + ", ".join(f"{float(v):.2f}" for v in values) + "]"


def _small(matrix: torch.Tensor) -> str:
    return "[" + ", ".join("[" + ", ".join(f"{float(v):.1f}" for v in row) + "]" for row in matrix) + "]"


def cells(seed: int) -> dict[str, str]:
    """``{grade id: source}`` of the notebook's input cells for ``seed``'s numbers."""
    numbers = inputs(seed)
    rows = [_row(row) for row in numbers["inputs"]]
    lines = [f"    [{row},   # {token}" if i == 0 else f"     {row},   # {token}" for i, (row, token) in
             enumerate(zip(rows, TOKENS))]
    lines[-1] = lines[-1].replace("],   #", "]]   #")
    inputs_source = "\n".join([f"tokens = {list(TOKENS)!r}".replace("'", '"'), "inputs = torch.tensor(", *lines,
                               ")", "print(inputs.shape)"])
    three = "\n".join([
        "x3 = torch.eye(4)[:3]                      # The, cat, sat as one-hot rows",
        f"W_Q = torch.tensor({_small(numbers['W_Q'])})",
        f"W_K = torch.tensor({_small(numbers['W_K'])})",
        f"W_V = torch.tensor({_small(numbers['W_V'])})",
    ])
    return {"inputs": inputs_source, "three_inputs": three}


def edits(seed: int) -> dict[str, list[tuple[str, str]]]:
    """``{grade id: [(release's text, this variant's)]}`` for the instructions that quote a number."""
    six = inputs(seed)["inputs"]
    return {"dot_intro": [("0.8296", f"{float(six[2] @ six[3]):.4f}")]}
