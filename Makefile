# The course's commands. Every variable can be overridden: make test PYTEST_ARGS="-m 'not slow'"
# /usr/bin/python3 rather than a pyenv shim: non-root hub users must be able to run the venv.
PYTHON ?= $(shell test -x /usr/bin/python3 && echo /usr/bin/python3 || command -v python3)
VENV ?= .venv
BIN := $(abspath $(VENV))/bin
PYTEST_ARGS ?=
DEMO_DIR ?= build/demo
export PATH := $(BIN):$(PATH)

.PHONY: venv lock system-deps demo test check docs compose-test release clean start load bench bench-feedback

## .venv: every package from requirements.lock, each pinned with its hashes (CPython 3.11 on Linux
## x86-64; torch is the CPU build), then this project itself, editable, and the .pth that defers
## jsonschema's IRI parser (attention_platform/third_party_patches.py: a venv built before it gets it).
$(VENV)/.installed: requirements.lock pyproject.toml attention_platform/third_party_patches.py
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --require-hashes -r requirements.lock
	$(BIN)/pip install -q --no-deps --no-build-isolation -e .
	$(BIN)/python -c 'from attention_platform import third_party_patches as p; p.main([])'
	touch $@

venv: $(VENV)/.installed

## Re-resolve requirements.lock from pyproject.toml's pins and extras (needs PyPI; commit the result).
PIP_TOOLS ?= pip-tools==7.5.2
lock:
	test -x build/lock-venv/bin/pip-compile || ($(PYTHON) -m venv build/lock-venv && build/lock-venv/bin/pip install -q $(PIP_TOOLS))
	build/lock-venv/bin/pip-compile --quiet --generate-hashes --allow-unsafe --strip-extras --no-emit-index-url \
	  --no-emit-find-links --extra test --output-file requirements.lock pyproject.toml

## Debian chromium + bubblewrap and npm configurable-http-proxy (idempotent).
system-deps:
	scripts/install-system-deps.sh

## The course's JupyterHub on 127.0.0.1, no Docker: prints the demo accounts; Ctrl-C stops it.
start: venv system-deps
	$(BIN)/attention-course hub

## Grade the bundled sample class end to end and print the grade table.
demo: venv
	$(BIN)/attention-course demo --workdir $(DEMO_DIR)

## Stock nbgrader autograde vs the sandboxed batch grader on BENCH_N generated submissions:
## identical grades, both throughputs and their ratio, submit-to-feedback latency (not part of CI).
BENCH_N ?= 100
bench: venv
	$(BIN)/attention-course bench-autograde -n $(BENCH_N)

## Feedback on submit: BENCH_STUDENTS submit at once on a fresh native hub (as root), --rounds times;
## p50/p95 submit-to-result against the 3 s target and the TA's collect+autograde+feedback on the same submissions.
BENCH_STUDENTS ?= 5
bench-feedback: venv system-deps
	$(BIN)/attention-course bench-feedback-on-submit -n $(BENCH_STUDENTS)

## The documentation site (docs/, Sphinx + MyST) with warnings as errors, into build/docs/html.
docs: venv
	$(BIN)/sphinx-build -W --keep-going -q -b html docs build/docs/html
	@echo "open build/docs/html/index.html"

## pytest-xdist workers of `make check` and `make test` (0: one process); the groups of tests/conftest.py
## keep the tests that share the machine on one worker each.
TEST_WORKERS ?= 2
XDIST = $(if $(filter-out 0,$(TEST_WORKERS)),-n $(TEST_WORKERS) --dist loadgroup)

## The fast tier, what a developer runs after each change: every test that needs no root, no hub, no Docker
## and no browser (the offline Kubernetes tests included); runs as any user.
CHECK_MARKERS ?= not slow and not browser and not docker and not hub and not root
check: venv
	scripts/install-system-deps.sh --proxy-only
	$(BIN)/python -m pytest $(XDIST) -m "$(CHECK_MARKERS)" $(PYTEST_ARGS)

## The whole test suite (CI runs exactly this), the hubs' tests on one worker and the rest on the other
## (docs/reference/testing.md).
test: venv system-deps
	$(BIN)/python -m pytest $(XDIST) $(PYTEST_ARGS)

## The Docker deployment built and run for real (tests/deploy/test_compose_roundtrip.py, marker `docker`; also part of
## `make test`): installs and starts the Docker engine if there is none (and stops it afterwards), makes the
## Debian-based base images, builds the images reusing the engine's cache, follows README "Running on a Docker
## host", drives a student's and a TA's round trip through 127.0.0.1, then deletes everything it made.
compose-test: venv
	$(BIN)/python -m pytest -m docker tests/deploy/test_compose_roundtrip.py $(PYTEST_ARGS)

## The deadline rush: LOAD_STUDENTS simulated students against a native hub;
## per-step latency, lost/duplicated submissions, memory. Figures: build/load/load-results.json
LOAD_STUDENTS ?= 50
load: venv system-deps
	$(BIN)/attention-course load-test -n $(LOAD_STUDENTS)

## Regenerate release/ from source/, every assignment (commit the result).
release: venv
	for folder in source/*/; do $(BIN)/nbgrader generate_assignment "$$(basename "$$folder")" --force || exit 1; done

clean:
	rm -rf build submitted autograded/*/ feedback gradebook.db attempts
