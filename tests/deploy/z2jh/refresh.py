"""Rebuild the chart's golden files from a checkout of jupyterhub/zero-to-jupyterhub-k8s.

    python tests/deploy/z2jh/refresh.py /path/to/zero-to-jupyterhub-k8s 4.4.0

reads ``jupyterhub/values.schema.yaml`` and ``jupyterhub/values.yaml`` at that tag (git show, the work tree
is not touched) and writes beside this file:

* values.schema.json: the schema with every "description" removed, which is what the chart packages as its
  values.schema.json (and what `helm install` validates the merged values with);
* values.defaults.json: the chart's default values (helm merges a values file onto them before validating).

PROVENANCE.md records the commit and the sources' SHA-256.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent


def drop_descriptions(schema: dict) -> None:
    """As the chart's packaging does: "description" goes at every level, except where it is the name of a
    value (a key of "properties")."""
    schema.pop("description", None)
    for value in schema.get("properties", {}).values():
        if isinstance(value, dict):
            drop_descriptions(value)


def git_show(checkout: str, tag: str, path: str) -> bytes:
    return subprocess.run(["git", "-C", checkout, "show", f"{tag}:{path}"], check=True, capture_output=True).stdout


def main(checkout: str, tag: str) -> None:
    commit = subprocess.run(["git", "-C", checkout, "rev-parse", f"{tag}^{{commit}}"], check=True,
                            capture_output=True, text=True).stdout.strip()
    sources = {path: git_show(checkout, tag, path)
               for path in ("jupyterhub/values.schema.yaml", "jupyterhub/values.yaml")}
    schema = yaml.safe_load(sources["jupyterhub/values.schema.yaml"])
    drop_descriptions(schema)
    defaults = yaml.safe_load(sources["jupyterhub/values.yaml"])
    (HERE / "values.schema.json").write_text(json.dumps(schema, indent=1, sort_keys=True) + "\n")
    (HERE / "values.defaults.json").write_text(json.dumps(defaults, indent=1, sort_keys=True) + "\n")
    print(f"tag {tag}, commit {commit}")
    for path, data in sources.items():
        print(f"{path}: sha256 {hashlib.sha256(data).hexdigest()}")


if __name__ == "__main__":
    main(*sys.argv[1:3])
