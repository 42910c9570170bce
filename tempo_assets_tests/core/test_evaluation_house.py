"""core/evaluation/ reads like a house: short modules and functions, imports at the top, no circle."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

# read as text, not imported: a circle must show up here, not as an import error elsewhere
PACKAGE = Path(__file__).resolve().parents[2] / "tempo_assets" / "core" / "evaluation"
MODULES = sorted(PACKAGE.glob("*.py"))
MAX_MODULE_LINES, MAX_FUNCTION_LINES, MAX_PARAMETERS = 600, 60, 7


def parsed(path: Path) -> ast.Module:
    return ast.parse(path.read_text(), filename=str(path))


def parameters(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """Parameters a caller can pass (``self``/``cls`` aside, ``*args``/``**kwargs`` one each)."""
    a = node.args
    names = [*a.posonlyargs, *a.args, *a.kwonlyargs]
    count = len(names) + (a.vararg is not None) + (a.kwarg is not None)
    return count - (1 if names and names[0].arg in ("self", "cls") else 0)


def offenders(path: Path) -> list[str]:
    """Every function too long or too wide, and every import below the module level."""
    found = []
    for node in ast.walk(parsed(path)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            lines = node.end_lineno - node.lineno + 1
            if lines > MAX_FUNCTION_LINES or parameters(node) > MAX_PARAMETERS:
                found.append(f"{path.name}:{node.lineno} {node.name}: {lines} lines, {parameters(node)} parameters")
            found += [f"{path.name}:{inner.lineno} import inside {node.name}" for inner in ast.walk(node)
                      if isinstance(inner, (ast.Import, ast.ImportFrom))]
    return found


def package_imports(path: Path) -> set[str]:
    """The package's modules ``path`` imports (``tempo_assets.core.evaluation.<name>``)."""
    prefix = "tempo_assets.core.evaluation."
    return {node.module[len(prefix):] for node in ast.walk(parsed(path))
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith(prefix)}


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.name)
def test_functions_are_short_narrow_and_import_at_the_top(path):
    assert offenders(path) == []


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.name)
def test_modules_stay_readable(path):
    assert len(path.read_text().splitlines()) <= MAX_MODULE_LINES


def test_no_import_circle_inside_the_package():
    graph = {p.stem: package_imports(p) for p in MODULES if p.stem != "__init__"}
    done: set[str] = set()

    def visit(module: str, path: tuple[str, ...]) -> None:
        assert module not in path, f"import circle: {' -> '.join(path + (module,))}"
        if module in done:
            return
        for imported in graph.get(module, ()):
            visit(imported, path + (module,))
        done.add(module)

    for module in graph:
        visit(module, ())
