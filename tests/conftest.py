"""Fixtures for the platform's tests.

- ``graded_class`` (session): a scratch copy of the course in which real
  ``nbgrader`` graded a small class of submissions; yields ``GradedClass``.
"""
