"""Fixtures for the platform's tests.

- ``graded_class`` (session): a scratch copy of the course in which real
  ``nbgrader`` graded a small class of submissions; yields ``GradedClass``.
"""


import pytest


@pytest.fixture(scope="session")
def native_hub():
    """One ``attention-course hub`` (the README's first command) for the hub tests of a
    session: tests/test_browser_e2e.py plays the assignment on it, tests/test_hub_api.py
    then checks the protections and finally presses Ctrl-C. Started with --no-release:
    the instructor releases."""
    from hub_helpers import launch_hub

    with launch_hub("test-hub", release=False) as hub:
        yield hub
