"""Import boundaries: core imports no dagster, directly or through another tempo module; no import cycle."""
import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "tempo_assets"
CORE = PACKAGE / "core"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in PACKAGE.rglob("*.py")}


def _imports(path: Path, top_level_only: bool) -> set[str]:
    """Modules ``path`` imports (relative imports resolved); with ``top_level_only`` those run at import time."""
    tree = ast.parse(path.read_text(), filename=str(path))
    package = module_name(path) if path.name == "__init__.py" else module_name(path).rpartition(".")[0]
    nodes = ast.walk(tree)
    if top_level_only:
        nodes = [n for stmt in tree.body if not isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                                  ast.ClassDef)) for n in ast.walk(stmt)]
    names: set[str] = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            names.add(base)
            # ``from pkg import module`` imports the submodule
            names.update(f"{base}.{alias.name}" for alias in node.names if f"{base}.{alias.name}" in MODULES)
    return names


def _internal(names: set[str]) -> set[str]:
    return {n for n in names if n in MODULES and n != "tempo_assets"}


def test_core_module_does_not_import_dagster_directly_or_indirectly():
    """Every tempo module a core module reaches (lazy imports included) is core, and none imports dagster."""
    for name, path in sorted(MODULES.items()):
        if not name.startswith("tempo_assets.core"):
            continue
        seen, frontier = {name}, [name]
        while frontier:
            current = frontier.pop()
            imported = _imports(MODULES[current], top_level_only=False)
            dagster = sorted(n for n in imported if n.split(".")[0].startswith("dagster"))
            assert not dagster, f"{name} reaches {current}, which imports {dagster}; keep core free of dagster"
            for other in _internal(imported) - seen:
                assert other.startswith("tempo_assets.core"), (
                    f"{name} reaches {other} (through {current}): a core module may import only core")
                seen.add(other)
                frontier.append(other)


def test_the_purity_check_catches_an_indirect_import(tmp_path, monkeypatch):
    """A core module importing a non-core tempo module that imports dagster is caught."""
    fake_core = tmp_path / "tempo_assets" / "core"
    fake_core.mkdir(parents=True)
    (tmp_path / "tempo_assets" / "__init__.py").write_text("")
    (fake_core / "__init__.py").write_text("")
    (fake_core / "leaky.py").write_text("def f():\n    from tempo_assets.wiring import thing\n")
    (tmp_path / "tempo_assets" / "wiring.py").write_text("import dagster as dg\nthing = dg\n")
    monkeypatch.setattr(__import__(__name__, fromlist=["x"]), "PACKAGE", tmp_path / "tempo_assets")
    modules = {module_name(p): p for p in (tmp_path / "tempo_assets").rglob("*.py")}
    monkeypatch.setattr(__import__(__name__, fromlist=["x"]), "MODULES", modules)
    with pytest.raises(AssertionError, match="may import only core"):
        test_core_module_does_not_import_dagster_directly_or_indirectly()


def test_no_import_cycle_in_tempo_assets():
    """The module-level import graph of tempo_assets is acyclic (lazy imports inside functions aside)."""
    graph = {name: _internal(_imports(path, top_level_only=True)) - {name} for name, path in MODULES.items()}
    graph = {name: {d for d in deps if not name.startswith(d + ".")} for name, deps in graph.items()}
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for dep in sorted(graph.get(node, ())):
            if state.get(dep) == 1:
                cycle = stack[stack.index(dep):] + [dep]
                raise AssertionError("import cycle: " + " -> ".join(cycle))
            if dep not in state:
                visit(dep)
        stack.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node)


def test_resources_and_io_managers_do_not_import_each_other():
    resources = _internal(_imports(MODULES["tempo_assets.resources"], top_level_only=False))
    assert "tempo_assets.io_managers" not in resources


def test_core_has_modules():
    assert len(list(CORE.rglob("*.py"))) > 3
