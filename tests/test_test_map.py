"""conftest.py's map of the tests names every test file there is, and only those."""

import re
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def test_the_conftest_map_lists_every_test_file():
    doc = (TESTS / "conftest.py").read_text().split('"""')[1]
    mapped = set(re.findall(r"\btest_\w+", doc))
    files = {p.stem for p in TESTS.glob("test_*.py")} - {Path(__file__).stem}
    assert mapped == files, {"not in the map": sorted(files - mapped), "no such file": sorted(mapped - files)}
