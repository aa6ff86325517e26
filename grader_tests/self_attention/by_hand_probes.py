"""Probes of part 2, attention by hand: they read the names the student's cells define.

Shipped into the sandbox (see ``probing``); the judges are in ``by_hand_judges``.
"""

from __future__ import annotations

from ..probing import CheckProbe, read_tensors

THREE_TOKEN_STEPS = ("Q3", "K3", "V3", "scores3", "weights3", "out3")

PROBES = [
    CheckProbe("by_hand_dot", read_tensors(["journey_starts"])),
    CheckProbe("by_hand_scores", read_tensors(["attn_scores"])),
    CheckProbe("by_hand_weights", read_tensors(["attn_weights"])),
    CheckProbe("by_hand_context", read_tensors(["context_vectors"])),
    CheckProbe("three_tokens", read_tensors(THREE_TOKEN_STEPS)),
]
