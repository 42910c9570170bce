"""Print the import graph of tempo_assets (module -> imported tempo_assets modules), counting
imports inside function bodies; `--fn` lists only the function-level ones."""
from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "tempo_assets"


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted((ROOT / PACKAGE).rglob("*.py"))}


def _resolve(node: ast.ImportFrom, here: str, is_package: bool) -> str:
    if not node.level:
        return node.module or ""
    base = here.split(".") if is_package else here.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def imported_modules(name: str, path: Path, known: set[str]) -> list[tuple[str, bool, int]]:
    """(imported module, inside a function?, line) for each import in `path`, of any package;
    ``from package import name`` counts as the module ``package.name`` when that is in `known`."""
    tree = ast.parse(path.read_text(), str(path))
    found: list[tuple[str, bool, int]] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            nested = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef))
            if isinstance(child, ast.Import):
                found.extend((a.name, in_function, child.lineno) for a in child.names)
            elif isinstance(child, ast.ImportFrom):
                target = _resolve(child, name, path.name == "__init__.py")
                for alias in child.names:
                    sub = f"{target}.{alias.name}"
                    found.append((sub if sub in known else target, in_function, child.lineno))
            visit(child, nested)

    visit(tree, False)
    return found


def imports_of(name: str, path: Path, known: set[str]) -> list[tuple[str, bool]]:
    """(imported tempo_assets module, inside a function?) for each import in `path`."""
    return [(t, f) for t, f, _ in imported_modules(name, path, known) if t.startswith(PACKAGE) and t in known]


def graph() -> dict[str, list[tuple[str, bool]]]:
    mods = modules()
    return {name: imports_of(name, path, set(mods)) for name, path in mods.items()}


if __name__ == "__main__":
    only_fn = "--fn" in sys.argv
    for name, edges in graph().items():
        for target, in_function in edges:
            if in_function or not only_fn:
                print(f"{name}\t{target}\t{'function' if in_function else 'top'}")
