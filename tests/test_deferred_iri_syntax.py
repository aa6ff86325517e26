"""jsonschema's IRI parser built on its first use, not at import (attention_platform/third_party_patches.py, defer_iri_syntax):
processes of the environment start without it, and an IRI format check still answers as the real
parser does. Each case runs in a fresh interpreter, as the .pth acts at start-up."""

from __future__ import annotations

import json
import subprocess
import sys
import sysconfig
from pathlib import Path

from attention_platform import third_party_patches

PARSER = "rfc3987_syntax.syntax_helpers"  # the module that builds the parser when imported
WITHOUT_DEFERRING = "sys.meta_path[:] = [f for f in sys.meta_path if type(f).__name__ != '_DeferredImport']"


def python(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip()


def test_the_environment_holds_the_pth_line():
    pth = Path(sysconfig.get_paths()["purelib"]) / third_party_patches.PTH_FILE
    assert pth.read_text() == third_party_patches.pth_line()


def test_a_new_process_imports_nbgrader_without_building_the_parser():
    assert python(f"import sys, nbgrader.api; print({PARSER!r} in sys.modules)") == "False"
    assert python(f"import sys; {WITHOUT_DEFERRING}; import nbgrader.api; print({PARSER!r} in sys.modules)") == "True"


FORMAT_CASES = [  # (format, value, valid)
    ("iri", "https://localhost/ä?q=1#top", True),
    ("iri", "two words", False),
    ("iri", "../relative/ä", False),
    ("iri-reference", "../relative/ä", True),
    ("iri-reference", "a b", False),
]

CHECKS = """
import json, sys
{setup}
import jsonschema
checker = jsonschema.Draft202012Validator.FORMAT_CHECKER
cases = {cases!r}
print(json.dumps({{"answers": [checker.conforms(value, fmt) for fmt, value, _ in cases],
                  "parser_loaded": {parser!r} in sys.modules}}))
"""


def test_an_iri_check_answers_as_the_real_parser_does():
    deferred = json.loads(python(CHECKS.format(setup="", cases=FORMAT_CASES, parser=PARSER)))
    real = json.loads(python(CHECKS.format(setup=WITHOUT_DEFERRING, cases=FORMAT_CASES, parser=PARSER)))
    assert deferred["answers"] == real["answers"] == [valid for _, _, valid in FORMAT_CASES]
    assert deferred["parser_loaded"]  # built when first needed


def test_the_package_still_imports_its_submodules_and_names():
    out = python("import rfc3987_syntax.utils, rfc3987_syntax as r; "
                 "print(r.deferred, r.is_valid_syntax('iri', 'https://localhost/'), bool(r.RFC3987_SYNTAX_TERMS))")
    assert out == "True True True"


def test_install_is_idempotent_and_leaves_an_imported_package_alone():
    before = list(sys.meta_path)
    third_party_patches.defer_iri_syntax()
    assert sys.meta_path == before  # this test process already has the finder (the .pth) or the package
    out = python(f"import sys; {WITHOUT_DEFERRING}; import rfc3987_syntax; "
                 "from attention_platform import third_party_patches as p; p.defer_iri_syntax(); "
                 "print(sum(type(f).__name__ == '_DeferredImport' for f in sys.meta_path))")
    assert out == "0"
