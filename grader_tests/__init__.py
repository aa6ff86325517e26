"""Hidden checks of the self-attention assignment.

Grader-only: never released to students. ``registry.CHECKS`` maps each check id
to its request builder, probe and judge (see ``core``); ``kernel.grade`` runs one
inside a notebook kernel for the stock nbgrader path.
"""
