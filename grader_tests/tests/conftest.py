"""Fixtures for proving the hidden checks.

- ``release_nb``: the committed student notebook (release/self_attention).
- ``namespace_for``: builds the globals a student's kernel would have after
  running the import and class cells with a given answer.
"""

import contextlib
import io
import warnings

import pytest

from attention_platform.course.notebooks import class_namespace, release_notebook, with_answer


@pytest.fixture(scope="session")
def release_nb():
    return release_notebook()


@pytest.fixture
def namespace_for(release_nb):
    def build(answer_code):
        return class_namespace(with_answer(release_nb, answer_code))

    return build


@pytest.fixture
def quiet():
    """Swallow the warnings and stderr chatter some answers produce on purpose."""

    @contextlib.contextmanager
    def silence():
        with warnings.catch_warnings(), contextlib.redirect_stderr(io.StringIO()):
            warnings.simplefilter("ignore")
            yield

    return silence
