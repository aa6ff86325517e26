"""Bring the course volume up to date with the course files the grader image ships.

    python course-sync.py IMAGE_COURSE_DIR VOLUME_COURSE_DIR

Docker fills a named volume from the image only when the volume is created, so a new image
(new notebooks in source/, a changed nbgrader_config.py) would never reach a running course.
At every start of the grader (as the grader account, never root) this compares a digest of the
image's files with the one recorded in the volume; when they differ it copies every file the
image ships over the volume's copy (each replaced in one rename) and records the new digest.
Everything else on the volume stays: release/, submitted/, autograded/, feedback/, files an
instructor created. An edit an instructor made to a file the image ships is kept until an image
with different course files starts; then the image's version wins (the log names each file).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
from pathlib import Path

STAMP = ".course-from-image.json"


def image_files(root: Path) -> dict[str, str]:
    files = {}
    for path in sorted(root.rglob("*")):
        if path.is_file() and not path.is_symlink() and "__pycache__" not in path.parts:
            files[str(path.relative_to(root))] = hashlib.sha256(path.read_bytes()).hexdigest()
    return files


def sync(image: Path, volume: Path) -> list[str]:
    files = image_files(image)
    digest = hashlib.sha256(json.dumps(files, sort_keys=True).encode()).hexdigest()
    stamp = volume / STAMP
    try:
        if json.loads(stamp.read_text()).get("digest") == digest:
            return []
    except (OSError, ValueError):
        pass
    changed = []
    for rel, sha in files.items():
        target = volume / rel
        if target.is_file() and not target.is_symlink() and hashlib.sha256(target.read_bytes()).hexdigest() == sha:
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f".{target.name}.from-image")
        shutil.copyfile(image / rel, tmp, follow_symlinks=False)
        os.replace(tmp, target)  # replaces a file or a symlink, never writes through one
        changed.append(rel)
    tmp = stamp.with_name(STAMP + ".tmp")
    tmp.write_text(json.dumps({"digest": digest, "files": files}, indent=1))
    os.replace(tmp, stamp)
    return changed


def main() -> None:
    image, volume = Path(sys.argv[1]), Path(sys.argv[2])
    changed = sync(image, volume)
    for rel in changed:
        print(f"course-sync: {rel} from the image", file=sys.stderr)
    print(f"course-sync: {len(changed)} file(s) updated from the image", file=sys.stderr)


if __name__ == "__main__":
    main()
