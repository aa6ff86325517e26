"""Fixtures for proving the hidden checks.

- ``release_nb``: the committed student notebook (release/self_attention).
- ``namespace_for``: builds the globals a student's kernel would have after
  running the import and class cells with a given answer.
- ``picture_cache_of_this_session`` (autouse): the teaching picture's kept measurement
  (grader_tests/picture_cache.py) goes to a folder of this session, never the account's own.
"""

import contextlib
import io
import warnings

import pytest

from grader_tests.self_attention.answers import class_namespace, release_notebook, with_answer


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


@pytest.fixture(scope="session", autouse=True)
def picture_cache_of_this_session(tmp_path_factory):
    from grader_tests.self_attention import picture_cache, pictures

    folder = tmp_path_factory.mktemp("picture-cache")
    folder.chmod(0o700)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(picture_cache.ENV, str(folder))
        yield folder
        pictures._FIGURE = None  # nothing left for the exit's save_measurements to put elsewhere
