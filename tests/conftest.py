"""Fixtures for the platform's tests.

- ``native_hub`` (session): one ``attention-course hub`` (the README's first command) shared by
  the browser walk-through and the hub API tests, started with --no-release.
- ``security_hub`` (session): a second hub, released, for the attacks on the formgrader
  (tests/hub/test_formgrader_gate.py, tests/reporting/test_hostile_submission.py), the exchange view's
  (tests/hub/test_exchange_hub.py) and the other tests that ask for it, so what they leave behind never
  meets the walk-through's expectations.
- ``released_course`` (session): ``released_course(dest, assignment, notebooks=None)`` copies to ``dest``
  the course after a real ``nbgrader generate_assignment`` that runs once per run for each assignment
  (and set of notebooks) asked for (``released_courses.ReleasedCourses``).
- ``autograded_e2e_class`` (session): the end-to-end class (``e2e_class``) graded once by a real
  ``nbgrader autograde``, for tests/grading/test_autograde_e2e.py and tests/reporting/test_report.py;
  each grades nothing again and works on its own copy (``e2e_class.graded_copy``).
- ``sandbox_broker`` (session): ``sandbox_broker(*options)`` is a root sandbox broker for the grader
  account (``broker_helpers.SharedBroker``: socket, folder, grader), started by the first test that asks
  for those broker options and shared by every later one, so a run starts one broker per configuration
  (the broker's and the validate service's tests). A test that must see a broker start,
  or gives it its own environment, starts its own (``broker_helpers.start_broker``).

``make test`` runs two pytest-xdist workers (``-n 2 --dist loadgroup``; ``TEST_WORKERS=0``: one process);
``pytest_collection_modifyitems`` below puts the tests that share the machine in groups, each run by one
worker in file order: ``machine`` (every test marked ``root``, ``hub``, ``browser`` or ``docker`` or asking
for one of the fixtures above: they share Unix users, ports and /srv), ``sandbox`` (of those, the tests
that grade in sandboxes of their own or test the broker, start no hub and make only their own accounts)
and ``docker`` (the Docker round trip). The other tests are spread over both workers.

Helpers (plain modules, imported by name): ``hub_helpers`` (launch a hub, log in, sessions),
``e2e_class`` (a graded sample class), ``accessibility`` (axe-core and the keyboard in a page), ``fault_helpers``, ``gradebooks``, ``broker_helpers`` (a
sandbox broker and the accounts that talk to it), ``grader_helpers`` (the feedback-on-submit grader driven by
a script, a policy parser's errors), ``services_lms`` (an LMS's token, grade and roster services); ``cheats/`` is the cheat-attempt catalogue.

Where each part's tests are: one folder per package of ``attention_platform/`` (a test keeps
the folders and this list whole, tests/test_test_map.py); the hidden checks' own proofs are in
grader_tests/tests/.

- authoring/ (the new-assignment scaffold, prove-checks): test_scaffold, test_prove_checks
- course/ (notebooks, graded cells, settings, demo, variants): test_release_in_sync, test_graded_cells_in_sync,
  test_validation, test_demo_table, test_settings, test_nbgrader_steps, test_variants
- grading/ (preprocessors, sandbox, batch, the course's grading lock): test_sandbox_grading,
  test_sandbox_isolation, test_sandbox_broker, test_cheats, test_autograde_e2e, test_autograde_parts_e2e,
  test_autograde_multi_head_e2e,
  test_autograde_progress, test_course_lock, test_batch, test_huge_pages, test_first_use, test_sandbox_protocol,
  test_probe_text_leak, test_generated_classes, test_sandbox_uids, test_public_checks, test_restore_cells, test_autograde_all
- hub/ (native hub, accounts, LTI; and what is tested on its live hub: exchange/, formgrader/, lab/,
  the load test): test_hub_native, test_hub_api, test_hub_accounts, test_hub_culler, test_lti, test_lti_tool_keys,
  test_lti_platform, test_exchange_attacks, test_exchange_hub, test_exchange_variants,
  test_faults_exchange, test_faults_hub, test_formgrader_gate, test_instructor_source, test_course_lab,
  test_lti_roster, test_lti_services_hub, test_validate_service, test_intra_hub_http, test_hub_request_limits, test_student_request_limits,
  test_lms_page, test_service_supervisor, test_student_lab_browser, test_every_assignment_hub, test_formgrader_browser,
  test_accessibility_browser, test_bench_cpu, test_remembered_config, test_remembered_checksums
- deadlines/ (late policies, extensions, standing, the student's deadline file; collect by each
  student's own deadline; the gradebook's late penalty; its Lab and formgrader sides): test_deadlines_units,
  test_deadlines_collect, test_deadlines_grading, test_deadlines_pages_units
- feedback_on_submit/ (intake, fair queue, grader, pages; attempts/: policy, ledger, status; its Lab and formgrader sides):
  test_feedback_on_submit_units, test_feedback_on_submit_hub, test_grader_crash_hub,
  test_feedback_on_submit_every_assignment, test_best_keeps_written_work, test_feedback_on_submit_flat_cost,
  test_feedback_on_submit_deadlines, test_formgrader_pages_browser, test_feedback_on_submit_variant,
  test_feedback_on_submit_set_aside, test_status_wait, test_gradebook_router, test_same_grades_as_the_ta
- reporting/ (report, exports, feedback page, safe HTML, similarity report, reused pages, reads made once): test_report,
  test_exports, test_feedback_page, test_hostile_submission, test_feedback_every_assignment, test_safe_html, test_similarity,
  test_page_reuse, test_read_once
- lms/ (the LMS's services: service tokens, grades, the roster, the outbox): test_lms_services,
  test_lti_platform_grades (and the lms-sync command)
- deploy/ (not a package: the Docker and Kubernetes deployments): test_compose_static, test_docker_guard,
  test_compose_roundtrip (marker docker), test_kubernetes (marker kubernetes; golden files in z2jh/)
- e2e/ (not a package: the whole walk in a browser, marker browser): test_browser_e2e; it runs before
  the hub API tests (hub/), which check the protections on the same hub and then stop it
- here, the command line and the repository as a whole: test_cli, test_product_text, test_lockfile,
  test_test_map, test_third_party_patches, test_deferred_iri_syntax, test_start_up_gc, test_docs, test_package_layers,
  test_sqlite_files
"""


from pathlib import Path

import pytest

MACHINE_MARKERS = ("root", "hub", "browser", "docker")
MACHINE_FIXTURES = ("native_hub", "security_hub", "sandbox_broker", "autograded_e2e_class")
HUB_MARKERS = ("hub", "browser", "docker")
HUB_FIXTURES = ("native_hub", "security_hub", "autograded_e2e_class")
# Folders whose root tests grade in sandboxes of their own (nbgrader as root, a grader of their own): beside
# the hubs they share no account, port or folder; a hub's tests there are marked and stay in ``machine``.
SANDBOX_TESTS = tuple(Path(__file__).parent / folder for folder in
                      ("grading", "feedback_on_submit", "deadlines", "reporting", "course", "authoring"))


def _shared_fixtures(item) -> set:
    """(module, name) of the module- and class-scoped fixtures ``item`` uses: built once per worker."""
    info = getattr(item, "_fixtureinfo", None)
    return {(item.module.__name__, name) for name, defs in (info.name2fixturedefs.items() if info else ())
            if defs and defs[-1].scope in ("module", "class")}


def _with_what_they_share(chosen: list, items: list) -> list:
    """``chosen`` and every other item of ``items`` that shares a module's fixture with one of them."""
    theirs = set().union(*map(_shared_fixtures, chosen))
    return chosen + [item for item in items if item not in chosen and _shared_fixtures(item) & theirs]


def _sandbox_only(item) -> bool:
    """A test that grades in sandboxes of its own or tests the broker (a folder of ``SANDBOX_TESTS``, or
    one asking for ``sandbox_broker``) and starts no hub: it makes only its own accounts (broker_helpers)
    and cgroups."""
    fixtures = set(getattr(item, "fixturenames", ()))
    return ((set(SANDBOX_TESTS) & set(Path(item.path).parents) or "sandbox_broker" in fixtures)
            and not any(item.get_closest_marker(name) for name in HUB_MARKERS) and not fixtures & set(HUB_FIXTURES))


@pytest.hookimpl(wrapper=True)  # a wrapper runs before every plain hook, pytest-xdist's (which reads the group) too
def pytest_collection_modifyitems(items):
    """The groups pytest-xdist keeps on one worker each, in collection order (``make test``).

    ``machine``: tests that use the machine's users, ports or /srv, or a hub or the graded class of the run
    (tests/e2e before tests/hub on ``native_hub``); ``sandbox``: the sandboxes' and the broker's own tests,
    which start no hub; ``docker``: the Docker round trip, in its containers through ports it picks. A test
    that shares a module's fixture (a zygote, a hub) with one of a group is in that group."""
    uses_the_machine = [item for item in items if any(item.get_closest_marker(name) for name in MACHINE_MARKERS)
                        or set(MACHINE_FIXTURES) & set(getattr(item, "fixturenames", ()))]
    machine = _with_what_they_share(uses_the_machine, items)
    sandbox = [item for item in machine if _sandbox_only(item)]
    rest = [item for item in machine if item not in sandbox]
    sandbox = [item for item in sandbox if item not in _with_what_they_share(rest, sandbox)]
    for item in machine:
        group = ("docker" if item.get_closest_marker("docker") else "sandbox" if item in sandbox else "machine")
        item.add_marker(pytest.mark.xdist_group(group))
    return (yield)


@pytest.fixture(scope="session")
def native_hub():
    """One ``attention-course hub`` (the README's first command) for the hub tests of a
    session: tests/e2e/test_browser_e2e.py plays the assignment on it, tests/hub/test_hub_api.py
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

    # short login waits, so the password-guessing tests can show them grow, stop growing and end; the
    # tests' own failed logins from 127.0.0.1 stay below the address's allowance
    with launch_hub("security-hub", env={"HUB_LOGIN_MAX_FAILURES": "5", "HUB_LOGIN_WAIT_SECONDS": "1",
                                         "HUB_LOGIN_MAX_WAIT_SECONDS": "4",
                                         "HUB_LOGIN_ADDRESS_MAX_FAILURES": "100"}) as hub:
        yield hub


@pytest.fixture(scope="session")
def sandbox_broker():
    """``sandbox_broker(*options)``: the run's root sandbox broker started with ``options`` (none: the
    default, every first use paid), started on first use; all of them stop at the end of the run."""
    import os

    if os.geteuid() != 0:
        pytest.skip("the sandbox broker runs as root (CI is root)")
    from broker_helpers import SharedBrokers

    brokers = SharedBrokers()
    try:
        yield brokers
    finally:
        brokers.close()


@pytest.fixture(scope="session")
def released_course(tmp_path_factory):
    """``released_course(dest, assignment, notebooks=None)``: a copy at ``dest`` of the course released by
    one real ``nbgrader generate_assignment`` per run for that assignment (of those notebooks alone)."""
    from released_courses import ReleasedCourses

    return ReleasedCourses(tmp_path_factory.mktemp("released-courses"))


@pytest.fixture(scope="session")
def autograded_e2e_class(tmp_path_factory, released_course):
    """The course of tests/e2e_class.py's class after one real ``nbgrader autograde``, and that
    command's completed process. Read only: a test that writes copies it (e2e_class.graded_copy)."""
    from attention_platform.course.directory import nbgrader
    from e2e_class import write_class
    from grader_tests.self_attention.answers import ASSIGNMENT

    course = released_course(tmp_path_factory.mktemp("e2e-class") / "course", ASSIGNMENT)
    write_class(course)
    return course, nbgrader(course, "autograde", ASSIGNMENT, "--force")
