"""Every probe, as the sandbox's loader wants them.

The sandbox (``attention_platform/grading/sandbox/zygote.py``, ``Worker.load_probes``) imports the
modules the grader names as its check modules and reads their ``CHECKS``: entries with ``.id`` and
``.probe``. This module is that one name. It imports probe-side modules only, so what the grader
sends into a sandbox (this module and what it imports from ``grader_tests``) holds no judge, no
expected value and no reference.
"""

from __future__ import annotations

from . import by_hand_probes, experiment_probes, head_probes, self_attention_probes, shapes_probes

CHECKS = [
    *self_attention_probes.PROBES,
    *by_hand_probes.PROBES,
    *head_probes.PROBES,
    *shapes_probes.PROBES,
    *experiment_probes.PROBES,
]
