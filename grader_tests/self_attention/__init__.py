"""Hidden checks of the self-attention assignment (``source/self_attention/``).

Grader-only: never released to students. ``catalogue`` defines every graded item once; ``probes``
(the ``*_probes`` modules, the only code that runs in a sandbox, next to the student's) and ``judges``
(the ``*_judges`` modules, run in the grader's process) are bound to it by ``grader_tests.registry``;
``answers`` and ``answers_parts`` prove each check; ``pictures`` draws the feedback page's heat maps.
"""
