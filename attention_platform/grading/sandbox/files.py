"""A submission's own files, read for a sandbox: a module of its own so that a student's
server (Validate) can use it without importing the grader's checks or torch."""

from __future__ import annotations

from pathlib import Path

# The folder's files one Validate request carries (ExchangeLimits' entries per submission): the
# student's client sends no more, the validate service refuses a request with more.
MAX_REQUEST_FILES = 1000


def submission_files(folder, notebook_name: str, max_bytes: int = 16 << 20) -> dict[str, bytes]:
    """The non-notebook files of a submission folder (its data), up to ``max_bytes`` in all."""
    files, total = {}, 0
    folder = Path(folder)
    if not folder.is_dir():
        return files
    for path in sorted(folder.rglob("*")):
        rel = path.relative_to(folder).as_posix()
        if not path.is_file() or path.is_symlink() or path.suffix == ".ipynb" or ".ipynb_checkpoints" in rel:
            continue
        size = path.stat().st_size
        if total + size > max_bytes:
            break
        files[rel] = path.read_bytes()
        total += size
    return files
