"""Grading: nbgrader preprocessors, the sandbox untrusted code runs in, the batch grader."""
