"""The packages are layers: no two of them import each other, directly or round a circle, none
imports another's private names, and the hidden checks (grader_tests) import nothing of the
platform.

Read from the source (ast), not by importing: an import inside a function counts as much as one at
the top, since it runs when that function does. A package is ``attention_platform.<sub-package>``
or a top-level module of ``attention_platform``; ``grader_tests`` is one package. Test folders are
left out."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
ROOTS = ("attention_platform", "grader_tests")


def modules() -> dict[str, Path]:
    """{dotted module name: its file} for every module under ROOTS outside test folders."""
    found = {}
    for root in ROOTS:
        for path in sorted((REPO / root).rglob("*.py")):
            parts = path.relative_to(REPO).with_suffix("").parts
            if "tests" in parts or "node_modules" in parts:
                continue
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def package_of(module: str) -> str:
    parts = module.split(".")
    return parts[0] if parts[0] == "grader_tests" or len(parts) == 1 else ".".join(parts[:2])


def imports(module: str, path: Path) -> list[tuple[str, str | None, int]]:
    """(imported module, imported name or None, line) for each of our imports in the file."""
    here = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(alias.name, None, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = here.split(".")[: len(here.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            found += [(target, alias.name, node.lineno) for alias in node.names]
    return sorted(((target, name, line) for target, name, line in found if target.split(".")[0] in ROOTS),
                  key=lambda found: found[2])


def package_graph() -> dict[str, dict[str, list[str]]]:
    """{package: {package it imports: ["module:line", ...]}}, imports within a package left out."""
    graph: dict[str, dict[str, list[str]]] = {}
    for module, path in modules().items():
        source = package_of(module)
        graph.setdefault(source, {})
        for target, name, line in imports(module, path):
            # ``from attention_platform import venv`` imports the top-level module attention_platform.venv
            imported = f"{target}.{name}" if name and target in ROOTS else target
            destination = package_of(imported)
            if destination not in (source, "attention_platform"):
                graph[source].setdefault(destination, []).append(f"{module}:{line}")
    return graph


def find_cycle(graph: dict[str, dict[str, list[str]]]) -> list[str]:
    """One circle of packages (first package repeated at the end), or [] when there is none."""
    state: dict[str, str] = {}
    trail: list[str] = []

    def visit(package: str) -> list[str]:
        state[package] = "open"
        trail.append(package)
        for follower in sorted(graph.get(package, {})):
            if state.get(follower) == "open":
                return trail[trail.index(follower):] + [follower]
            if follower not in state and (cycle := visit(follower)):
                return cycle
        state[package] = "done"
        trail.pop()
        return []

    for package in sorted(graph):
        if package not in state and (cycle := visit(package)):
            return cycle
    return []


def describe(cycle: list[str], graph: dict[str, dict[str, list[str]]]) -> str:
    return "\n".join(f"{a} -> {b} ({', '.join(graph[a][b][:3])})" for a, b in zip(cycle, cycle[1:]))


def test_the_graph_sees_imports_inside_functions_and_relative_ones(tmp_path):
    """The parser the layers rest on: a lazy import and a relative one are edges too."""
    package = tmp_path / "attention_platform" / "one"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    module = package / "mod.py"
    module.write_text("def f():\n    from attention_platform.two.x import _y\n\nfrom .sibling import z\n")
    assert imports("attention_platform.one.mod", module) == [("attention_platform.two.x", "_y", 2),
                                                             ("attention_platform.one.sibling", "z", 4)]
    assert find_cycle({"a": {"b": ["m:1"]}, "b": {"c": ["n:1"]}, "c": {"a": ["o:1"]}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b": ["m:1"]}, "b": {}, "c": {"a": ["o:1"]}}) == []


def test_no_package_imports_another_that_imports_it_back():
    graph = package_graph()
    cycle = find_cycle(graph)
    assert not cycle, "packages importing each other round a circle:\n" + describe(cycle, graph)


def is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def test_no_private_name_is_imported_from_another_package():
    crossings = []
    for module, path in modules().items():
        for target, name, line in imports(module, path):
            imported = f"{target}.{name}" if name and target in ROOTS else target
            if package_of(imported) != package_of(module) and any(map(is_private, (*target.split("."), name or ""))):
                crossings.append(f"{module}:{line} imports {name or ''} from {target}")
    assert not crossings, "private names used across packages:\n" + "\n".join(crossings)


def test_the_hidden_checks_import_nothing_of_the_platform():
    used = [f"{module}:{line} imports {target}" for module, path in modules().items() if package_of(module) == "grader_tests"
            for target, _, line in imports(module, path) if target.split(".")[0] == "attention_platform"]
    assert not used, "grader_tests is the lower layer:\n" + "\n".join(used)


@pytest.mark.parametrize("package", ["attention_platform.lab", "attention_platform.exchange",
                                     "attention_platform.attempts", "attention_platform.formgrader",
                                     "attention_platform.deadlines"])
def test_the_graph_holds_the_packages_it_is_about(package):
    """A renamed root or a parser that finds nothing would make every other test here pass."""
    assert package in package_graph()


def test_the_platform_names_no_assignment_or_notebook():
    """What a feature needs of an assignment it asks the registry or the course directory for, with the
    assignment as an argument: no file of the platform names one of the course's assignments or notebooks."""
    from grader_tests.registry import ASSIGNMENTS

    names = {name for found in ASSIGNMENTS.values() for name in (found.name, *found.notebooks)}
    pattern = re.compile(rf"(?<![A-Za-z0-9_])(?:{'|'.join(map(re.escape, sorted(names)))})(?![A-Za-z0-9_])")
    platform = REPO / "attention_platform"
    named = [f"{path.relative_to(platform)}: {match.group()}" for path in sorted(platform.rglob("*"))
             if path.is_file() and "node_modules" not in path.parts and path.suffix != ".pyc"
             for match in pattern.finditer(path.read_text(errors="replace"))]
    assert named == []
