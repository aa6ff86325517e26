"""The course's hidden checks: one package per assignment, and what every assignment shares.

Grader-only: never released to students. Each ``grader_tests/<assignment>/`` holds that assignment's
catalogue, probes, judges, reference and proofs (docs/instructors/writing-an-assignment.md);
``registry`` discovers them and is the platform's one door to them. Shared here: ``probing`` and
``wire`` (what runs in a sandbox), ``judging`` and ``reasons`` (what runs in the grader), ``kernel``
(a check run inside a notebook's kernel), ``catalogue`` (the types), ``proofs``.
"""
