"""Where the course is: the folder holding source/, release/, grader_tests/ and nbgrader_config.py.

What a notebook of an assignment holds and how answers are typed into one is the assignment's own
(``grader_tests/<assignment>/``, ``grader_tests.proofs``).
"""

from __future__ import annotations

from pathlib import Path

COURSE_ROOT = Path(__file__).resolve().parents[2]
