# The course's commands. Every variable can be overridden: make test PYTEST_ARGS="-m 'not slow'"
# /usr/bin/python3 rather than a pyenv shim: non-root hub users must be able to run the venv.
PYTHON ?= $(shell test -x /usr/bin/python3 && echo /usr/bin/python3 || command -v python3)
VENV ?= .venv
BIN := $(abspath $(VENV))/bin
PYTEST_ARGS ?=
DEMO_DIR ?= build/demo
export PATH := $(BIN):$(PATH)

.PHONY: venv system-deps demo test release clean

$(VENV)/.installed: pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q -e '.[test]'
	touch $@

venv: $(VENV)/.installed

## Debian chromium + bubblewrap and npm configurable-http-proxy (idempotent).
system-deps:
	scripts/install-system-deps.sh

## Grade the bundled sample class end to end and print the grade table.
demo: venv
	$(BIN)/attention-course demo --workdir $(DEMO_DIR)

## The whole test suite (CI runs exactly this).
test: venv system-deps
	$(BIN)/python -m pytest $(PYTEST_ARGS)

## Regenerate release/ from source/ (commit the result).
release: venv
	$(BIN)/nbgrader generate_assignment self_attention --force

clean:
	rm -rf build submitted autograded/*/ feedback gradebook.db
