"""The layout a newcomer finds (issue 21): core/ in stage groups that import one way, no import
cycles (imports inside functions counted), no import inside a core function but of the heavy
libraries ``tempo_assets.core.IMPORTED_WHERE_USED`` names (issue 22), no module over 600 lines, no
function over 60 lines or 7 parameters, docs/ARCHITECTURE.md in step with the modules.

Asset, check and sensor functions are exempt from the parameter count only: Dagster passes their
inputs by name, so their parameters are the graph's edges. A method's ``self``/``cls`` does not count.
"""
from __future__ import annotations

import ast
import functools
import re
import sys
from pathlib import Path

import pytest

import tempo_assets.core
from tempo_assets.core import IMPORTED_WHERE_USED
from tempo_assets.warehouse_checks import WAREHOUSE_CHECKS

from tempo_assets_tests.toolkit import REPO

sys.path.insert(0, str(REPO / "scripts"))
import import_graph  # noqa: E402  (scripts/ is not a package)

PACKAGE = REPO / "tempo_assets"
CORE = "tempo_assets.core."
MAX_MODULE_LINES, MAX_LINES, MAX_PARAMETERS, MAX_ASSET_BODY = 600, 60, 7, 25
DAGSTER_DECORATORS = {"asset", "multi_asset", "asset_check", "multi_asset_check", "sensor", "op",
                      "schedule", "graph_asset"}

imports_by_module = functools.cache(import_graph.graph)


def group_order() -> list[str]:
    match = re.search(r"^GROUPS: (.+)$", tempo_assets.core.__doc__, re.M)
    return [name.strip() for name in match.group(1).split(",")]


def group_of(module: str) -> str | None:
    return module[len(CORE):].split(".")[0] if module.startswith(CORE) else None


def core_edges(graph) -> list[tuple[str, str, bool]]:
    return [(source, target, in_function) for source, edges in graph.items() for target, in_function in edges
            if group_of(source) and group_of(target)]


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for target in sorted(graph.get(node, ())):
            if state.get(target) == 1:
                return stack[stack.index(target):] + [target]
            if target not in state and (found := visit(target)):
                return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def module_graph(graph, prefix: str) -> dict[str, set[str]]:
    """module -> the modules it imports (inside functions too), both under ``prefix``; a package's
    ``__init__`` imported by its own modules is not a cycle of code."""
    return {source: {t for t, _ in edges if t != source and t.startswith(prefix) and not source.startswith(t + ".")}
            for source, edges in graph.items() if source.startswith(prefix)}


def _decorator_names(node: ast.FunctionDef) -> set[str]:
    names = set()
    for decorator in node.decorator_list:
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        names.add(target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", ""))
    return names


def parameter_count(node: ast.FunctionDef) -> int:
    args = node.args
    names = [a.arg for a in args.posonlyargs + args.args + args.kwonlyargs]
    count = len(names) + bool(args.vararg) + bool(args.kwarg)
    return count - (1 if names[:1] in (["self"], ["cls"]) else 0)


def line_count(node: ast.AST) -> int:
    return node.end_lineno - node.lineno + 1


@functools.cache
def functions() -> list[tuple[str, ast.FunctionDef]]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                found.append((f"{path.relative_to(REPO)}:{node.lineno} {node.name}", node))
    return found


def too_long(found) -> list[str]:
    return [f"{where} ({line_count(node)} lines)" for where, node in found if line_count(node) > MAX_LINES]


def too_wide(found) -> list[str]:
    return [f"{where} ({parameter_count(node)} parameters)" for where, node in found
            if parameter_count(node) > MAX_PARAMETERS and not (_decorator_names(node) & DAGSTER_DECORATORS)]


def test_every_core_module_is_in_a_listed_group():
    groups = set(group_order())
    strays = [m for m in import_graph.modules() if group_of(m) and group_of(m) not in groups]
    loose = sorted(p.name for p in (PACKAGE / "core").glob("*.py") if p.name != "__init__.py")
    assert not strays and not loose, f"core modules outside the groups of core/__init__.py: {strays + loose}"


def test_no_group_imports_a_later_group():
    rank = {name: i for i, name in enumerate(group_order())}
    upward = [f"{s} -> {t}" for s, t, _ in core_edges(imports_by_module()) if rank[group_of(t)] > rank[group_of(s)]]
    assert not upward, f"a core group imports a later group: {upward}"


def imports_inside_functions(modules: dict[str, Path]) -> list[str]:
    """``module:line imports target`` for each import inside a function of ``modules`` (name -> path)
    but of a library ``tempo_assets.core.IMPORTED_WHERE_USED`` lists."""
    return [f"{name}:{line} imports {target}"
            for name, path in modules.items()
            for target, in_function, line in import_graph.imported_modules(name, path, set(modules))
            if in_function and target.split(".")[0] not in IMPORTED_WHERE_USED]


def test_core_imports_inside_a_function_only_the_libraries_imported_where_used():
    core = {name: path for name, path in import_graph.modules().items() if name.startswith(CORE)}
    hidden = imports_inside_functions(core)
    assert not hidden, ("imports inside functions in core/ (hoist them; only the libraries of "
                        "core/__init__.py's IMPORTED_WHERE_USED are imported where used):\n" + "\n".join(hidden))


def test_core_has_no_import_cycles_counting_imports_inside_functions():
    cycle = find_cycle(module_graph(imports_by_module(), CORE))
    assert cycle is None, f"import cycle in core/: {' -> '.join(cycle)}"


def test_no_import_cycles_counting_imports_inside_functions():
    cycle = find_cycle(module_graph(imports_by_module(), "tempo_assets."))
    assert cycle is None, f"import cycle: {' -> '.join(cycle)}"


def test_core_module_names_do_not_repeat_asset_module_names():
    assets = {p.stem for p in (PACKAGE / "assets").glob("*.py")} - {"__init__"}
    core = {p.stem for p in (PACKAGE / "core").rglob("*.py")} - {"__init__"}
    shared = sorted(assets & core)
    assert not shared, f"file names in both assets/ and core/: {shared}"


def test_no_core_module_reads_as_a_test_file():
    named_like_tests = sorted(str(p) for p in (PACKAGE / "core").rglob("test_*.py"))
    assert not named_like_tests, f"core modules named like tests: {named_like_tests}"


def test_no_module_is_longer_than_six_hundred_lines():
    long = sorted(f"{p.relative_to(REPO)} ({n} lines)" for p in PACKAGE.rglob("*.py")
                  if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES)
    assert not long, f"split by what the parts are about (at most {MAX_MODULE_LINES} lines):\n" + "\n".join(long)


def test_no_function_is_longer_than_sixty_lines():
    long = too_long(functions())
    assert not long, f"split into named steps (at most {MAX_LINES} lines each):\n" + "\n".join(long)


def test_no_function_takes_more_than_seven_parameters():
    wide = too_wide(functions())
    assert not wide, f"pass a parameter object (at most {MAX_PARAMETERS} parameters):\n" + "\n".join(wide)


def asset_body_lines(node: ast.FunctionDef) -> int:
    """Lines of an asset function's body after its docstring (the decorator and signature are wiring)."""
    body = node.body[1:] if isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant) \
        else node.body
    return body[-1].end_lineno - body[0].lineno + 1 if body else 0


def fat_assets(found) -> list[str]:
    return [f"{where} ({asset_body_lines(node)} lines)" for where, node in found
            if _decorator_names(node) & {"asset", "multi_asset"} and asset_body_lines(node) > MAX_ASSET_BODY]


def test_every_asset_body_is_a_call_into_core_of_at_most_25_lines():
    fat = fat_assets(functions())
    assert not fat, f"move the logic into core/ (an asset body is at most {MAX_ASSET_BODY} lines):\n" + "\n".join(fat)


def test_assets_are_one_module_per_stage_of_core():
    stages = set(group_order())
    modules = {p.stem for p in (PACKAGE / "assets").glob("*.py")} - {"__init__", "common"}
    assert modules <= stages, f"asset modules not named after a stage of core/__init__.py: {sorted(modules - stages)}"


def _planted(source: str) -> list[tuple[str, ast.FunctionDef]]:
    return [("planted", node) for node in ast.walk(ast.parse(source)) if isinstance(node, ast.FunctionDef)]


@pytest.mark.parametrize("source, check", [
    ("def f(a, b, c, d, e, f, g, h):\n    pass\n", too_wide),
    ("def f():\n" + "    x = 1\n" * 61, too_long),
    ("@dg.asset\ndef a():\n    \"\"\"Doc.\"\"\"\n" + "    x = 1\n" * 26, fat_assets),
])
def test_the_counts_see_a_planted_offender(source, check):
    assert check(_planted(source)), "the count missed a function over the limit"


def test_the_counts_spare_an_asset_and_a_method_self():
    source = ("import dagster as dg\n@dg.asset\ndef a(b, c, d, e, f, g, h, i):\n    pass\n"
              "class K:\n    def m(self, a, b, c, d, e, f, g):\n        pass\n")
    assert not too_wide(_planted(source))


@pytest.mark.parametrize("body, allowed", [
    ("    import json\n", False),
    ("    from tempo_assets.core.base import io\n", False),
    ("    from . import io\n", False),
    ("    import lightgbm_fork\n", False),
    ("    import lightgbm as lgb\n", True),
    ("    from scipy.sparse.csgraph import connected_components\n", True),
    ("    from matplotlib.figure import Figure\n", True),
])
def test_the_import_rule_sees_a_planted_import_inside_a_function(tmp_path, body, allowed):
    path = tmp_path / "planted.py"
    path.write_text("import json\n\n\ndef f():\n" + body)
    flagged = imports_inside_functions({"tempo_assets.core.base.planted": path})
    assert (flagged == []) is allowed, flagged


def test_the_cycle_finder_sees_a_cycle_through_a_function_level_import():
    graph = {"tempo_assets.a": [("tempo_assets.b", False)], "tempo_assets.b": [("tempo_assets.a", True)]}
    assert find_cycle(module_graph(graph, "tempo_assets.")) == ["tempo_assets.a", "tempo_assets.b", "tempo_assets.a"]


def test_architecture_lists_every_core_module_and_the_sql_check_count():
    text = (REPO / "docs" / "ARCHITECTURE.md").read_text(encoding="utf-8")
    core = PACKAGE / "core"
    unlisted = sorted(str(p.relative_to(core)) for p in core.rglob("*.py")
                      if p.name != "__init__.py" and f"`{p.relative_to(core).as_posix()}`" not in text)
    assert not unlisted, f"docs/ARCHITECTURE.md does not list the core modules {unlisted}"
    assert f"the {len(WAREHOUSE_CHECKS)} SQL warehouse checks" in text, "docs/ARCHITECTURE.md counts the SQL checks wrong"
