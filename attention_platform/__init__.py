"""Tooling for the self-attention course: nbgrader preprocessors, sample
submissions, the demo grading run and the command line."""
