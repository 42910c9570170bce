"""The core package must not import dagster: the asset layer is the only place that does."""
import ast
from pathlib import Path

import pytest

CORE = Path(__file__).resolve().parents[1] / "tempo_assets" / "core"


def _imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


@pytest.mark.parametrize("path", sorted(CORE.rglob("*.py")), ids=lambda p: p.name)
def test_core_module_does_not_import_dagster(path):
    offending = {name for name in _imported_modules(path) if name.split(".")[0].startswith("dagster")}
    assert not offending, f"{path} imports {sorted(offending)}; keep core free of dagster"


def test_core_has_modules():
    assert len(list(CORE.glob("*.py"))) > 3
