"""``hide_course_secrets``: students lose access to the checkout's secrets, its owner keeps it."""

from __future__ import annotations

import os
import stat

import pytest

from attention_platform.hub.native import SECRET_PATHS, hide_course_secrets

OWNER = 4242  # a developer's uid: not root, not a student


@pytest.mark.skipif(os.geteuid() != 0, reason="chowning the sample checkout needs root (CI is root)")
def test_secrets_lose_other_access_and_keep_their_owner(tmp_path):
    (tmp_path / "grader_tests").mkdir()
    (tmp_path / "grader_tests" / "reference.py").write_text("SOLUTION = 1\n")
    (tmp_path / "gradebook.db").write_text("")
    (tmp_path / "release").mkdir()
    for path in (tmp_path / "grader_tests", tmp_path / "gradebook.db", tmp_path / "release"):
        os.chown(path, OWNER, OWNER)
        path.chmod(0o755 if path.is_dir() else 0o644)

    hide_course_secrets(tmp_path, log=lambda _: None)

    for name, mode in (("grader_tests", 0o750), ("gradebook.db", 0o640)):
        info = (tmp_path / name).stat()
        assert (info.st_uid, stat.S_IMODE(info.st_mode)) == (OWNER, mode), name
    assert stat.S_IMODE((tmp_path / "release").stat().st_mode) == 0o755  # what students are given
    assert "release" not in SECRET_PATHS and "attention_platform" not in SECRET_PATHS
