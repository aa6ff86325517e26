"""requirements.lock, which `make venv` installs with --require-hashes, agrees with pyproject.toml."""

from __future__ import annotations

import re
import tomllib

from attention_platform.course.notebooks import COURSE_ROOT

LOCK = COURSE_ROOT / "requirements.lock"


def locked() -> dict[str, str]:
    """{normalised name: version} of every package in the lock; each must carry hashes."""
    text = LOCK.read_text()
    entries = re.findall(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)((?:\s*\\\n\s*--hash=sha256:[0-9a-f]{64})+)", text, re.M)
    assert len(entries) == len(re.findall(r"^[A-Za-z0-9][^ #\n]*==", text, re.M)), "a package without hashes"
    return {re.sub(r"[-_.]+", "-", name).lower(): version for name, version, _ in entries}


def pinned() -> dict[str, str]:
    project = tomllib.loads((COURSE_ROOT / "pyproject.toml").read_text())["project"]
    found = {}
    for spec in project["dependencies"] + project["optional-dependencies"]["test"]:
        name, version = re.match(r"([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?==([^;\s]+)", spec).groups()
        found[re.sub(r"[-_.]+", "-", name).lower()] = version
    return found


def test_every_pin_of_pyproject_is_locked_at_the_same_version():
    lock = locked()
    drift = {name: (version, lock.get(name)) for name, version in pinned().items()
             if lock.get(name, "").split("+")[0] != version}
    assert drift == {}, f"run `make lock`: {drift}"


def test_torch_is_locked_as_the_cpu_build():
    assert locked()["torch"] == "2.13.0+cpu"
