"""Every self-attention probe, as the sandbox's loader wants them.

The sandbox imports the ``probes`` module of every course part and reads its ``CHECKS``: entries with ``.id``
and ``.probe``. It imports probe-side modules only, so what the grader sends into a sandbox (this
module and what it imports from ``grader_tests``) holds no judge, no expected value and no reference.
The names below are what the probes' own words may name; the trusted screen (``grader_tests.reasons``)
lets a reply's error through only in those words, every field checked against them.
"""

from __future__ import annotations

from . import by_hand_probes, experiment_probes, head_probes, self_attention_probes, shapes_probes
from .by_hand_probes import THREE_TOKEN_STEPS
from .experiment_probes import TOKENIZER_NAMES

CHECKS = [
    *self_attention_probes.PROBES,
    *by_hand_probes.PROBES,
    *head_probes.PROBES,
    *shapes_probes.PROBES,
    *experiment_probes.PROBES,
]

# Every name a probe reads from the student's namespace (``probing.read_name``).
DEFINED_NAMES = frozenset({
    "journey_starts", "attn_scores", "attn_weights", "context_vectors", *THREE_TOKEN_STEPS,
    "weight_bars", "trace_weights", "trace_output", "shape_answers", "qkv_weight_count",
    *TOKENIZER_NAMES, "count_parameters", "losses_causal", "losses_unmasked",
})
CLASS_NAMES = frozenset({self_attention_probes.CLASS_NAME, head_probes.HEAD_CLASS, head_probes.BIAS_CLASS})
PARAMETER_OWNERS = frozenset({*self_attention_probes.PROJECTIONS, *head_probes.HEAD_PROJECTIONS,
                              *head_probes.BIAS_PROJECTIONS})
# The probes' own words besides the shared ones of ``probing``.
PROBE_WORDS = (self_attention_probes.WRONG_PARAMETER, head_probes.NOT_TEXT, shapes_probes.NOT_SHAPES,
               shapes_probes.NOT_NUMBER)
