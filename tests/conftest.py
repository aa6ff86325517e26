"""Fixtures for the platform's tests.

- ``native_hub`` (session): one ``attention-course hub`` (the README's first command) shared by
  the browser walk-through and the hub API tests, started with --no-release.
- ``security_hub`` (session): a second hub, released, for the attacks on the formgrader
  (tests/test_formgrader_gate.py, tests/test_hostile_submission.py), so what they leave
  behind never meets the walk-through's expectations.
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


@pytest.fixture(scope="session")
def security_hub():
    """A released course on its own hub, for tests that attack it."""
    import os

    if os.geteuid() != 0:
        pytest.skip("the hub's real Unix users need root (CI is root)")
    from hub_helpers import launch_hub

    # a short lock-out, so the password-guessing test can also show that it ends
    with launch_hub("security-hub", env={"HUB_LOGIN_LOCKOUT_SECONDS": "8"}) as hub:
        yield hub
