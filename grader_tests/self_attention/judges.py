"""Every judge of the self-attention assignment: the registry binds each to its catalogue entry and probe.

Judges run in the grader's process only; each notebook's are in their own module.
"""

from __future__ import annotations

from . import by_hand_judges, experiment_judges, head_judges, self_attention_judges, shapes_judges

JUDGES = [
    *self_attention_judges.JUDGES,
    *by_hand_judges.JUDGES,
    *head_judges.JUDGES,
    *shapes_judges.JUDGES,
    *experiment_judges.JUDGES,
]
