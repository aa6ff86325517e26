"""Hidden checks of the self-attention assignment.

Grader-only: never released to students. ``catalogue`` defines every graded item once;
``registry.CHECKS`` binds each check to its probe (``*_probes``, the only code that runs in a
sandbox, next to the student's) and to its request builder and judge (``*_judges``, run in the
grader's process); ``kernel.grade`` runs one inside a notebook kernel for the stock nbgrader path.
"""
