"""A method registered after its windows were scored is scored on them (issue 20, Build item 5).

``ARCHIVE/methods.yaml`` is an input of every window's ``benchmark``: registering a method makes the
benchmarks it is eligible for ``stale``, and ``tempo materialize --all`` runs it at every cutoff and
rebuilds exactly those benchmarks from the stored ``test_growth`` (TEST is read once): the frozen
recipe, TEST growth, TEST score and the TEST claims are left as they were, byte for byte, and every
number the recipe and the baselines had stays. Before, the method ran at every cutoff and was never
scored: ``window_job`` said "already materialised and current, skipped" and status said ``ok``.

The graph is the tiny archive with five releases (two windows, four cutoffs, as ``data/`` has) and one
method registered before it was scored (``data/`` registers two): the session's tiny build (its first
window scored) with the fifth release and the method added, materialised on. The promise does not depend
on the data's size, and ``data/``'s two benchmarks took most of this test's three CPU minutes. Nor does it
depend on the report's figures: they are drawn but not rendered to PNG (:func:`unrendered_figures`; the
figures are tested in ``core/test_report.py``), which took a fifth of what was left, and the run that sets
the graph up (the method registered before) draws none (:func:`undrawn_figures`: the same stored bytes);
nor on the bootstrap. The ``tempo`` commands run in this process (``cli_here``).
"""
from __future__ import annotations

import json
import shutil

import pandas as pd
import pytest

from tempo_assets.assets.evaluation import BenchmarkResource
from tempo_assets.cli.graph_cmd import plan_steps, run_steps
from tempo_assets.core.methods.eligibility import METHOD_PREFIX
from tempo_assets.core.methods.registry import MethodSpec, add_method
from tempo_assets.core.inputs.releases import open_archive
from tempo_assets.partitions import plan_partitions, register_partitions
from tempo_assets_tests.assets.tiny_archive import RELEASES, build_tiny_archive
from tempo_assets_tests.cli_here import tempo_here
from tempo_assets_tests.conftest import REPO, graph_from, subprocess_env
from tempo_assets_tests.unrendered import undrawn_figures, unrendered_figures

pytestmark = pytest.mark.slow

LATE = "freqlate@1"
KEPT = ("frozen_recipe", "test_growth", "test_score", "valid_selection", "valid_evaluation_set")
FREQPRIOR = REPO / "examples" / "methods" / "freqprior"
# no bootstrap in the benchmark (a fifth of this test's CPU): the promise is about which benchmarks are rebuilt and
# which rows they gain; every number compared is compared between two benchmarks made with these settings
UNBOOTSTRAPPED = BenchmarkResource(bootstrap_samples=0)


def scored_graph(tiny_build, root):
    """The tiny archive with five releases (two windows) and ``freqprior@1`` registered, materialised through
    every window's benchmark, the latest submission and the catalog (``tempo materialize --all``): a copy of
    the session's tiny build (four releases, its window scored) with the fifth release and the method added,
    benchmarked without a bootstrap (:data:`UNBOOTSTRAPPED`: the build's benchmark is rebuilt here either way)."""
    graph = graph_from(tiny_build / "scored", root / "graph", benchmark_config=UNBOOTSTRAPPED)
    fifth = build_tiny_archive(root / "five", n_releases=5) / "releases" / RELEASES[4]  # the first four are the build's
    shutil.copytree(fifth, graph.archive / "releases" / RELEASES[4])
    add_method(graph.archive, MethodSpec(name="freqprior", version="1", kind="command", dir=str(FREQPRIOR),
                                         command="python3 predict.py"))
    graph.plan = plan_partitions(open_archive(graph.archive))
    register_partitions(graph.instance, graph.plan)
    with undrawn_figures():  # what this sets up is scored, not drawn: the run the test checks draws its figures
        report = run_steps(plan_steps(graph.plan, "all"), graph.instance, graph.resources, echo=lambda *_: None)
    assert all(status in ("ok", "skipped") for _, _, status, _ in report), report
    return graph


def tempo(graph, *args) -> str:
    """``tempo ARGS`` on ``graph``, in this process (``cli_here``: what is checked is what the command says
    and writes, not how it is started; a console script costs a new interpreter, its imports and the
    definitions loaded again): its stdout."""
    run = tempo_here(*args, env=subprocess_env(graph))
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    return run.stdout


def states(graph) -> dict[str, tuple[str, str]]:
    return {f"{s['asset']}[{s['partition']}]": (s["state"], s["reason"])
            for s in json.loads(tempo(graph, "status", "--json"))}


def folder_bytes(folder) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def without_methods(summary: pd.DataFrame) -> pd.DataFrame:
    rows = summary[~summary["method"].astype(str).str.startswith(METHOD_PREFIX)]
    return rows.sort_values(["profile", "method", "mode", "aspect"]).reset_index(drop=True)


@pytest.fixture
def unrendered():
    with unrendered_figures():
        yield


def test_a_method_added_after_scoring_is_scored_on_every_window(tiny_build, tmp_path, unrendered):
    graph = scored_graph(tiny_build, tmp_path)
    try:
        store, windows = graph.store(), list(graph.plan.windows)
        assert len(windows) == 2
        kept = {(a, w): folder_bytes(store.folder(a, w)) for a in KEPT for w in windows}
        claims = folder_bytes(graph.artefacts / "_test_claims")
        old = {w: store.open("benchmark", w).value.summary for w in windows}
        assert all(f"{METHOD_PREFIX}freqprior@1" in set(s["method"]) for s in old.values())  # scored beside it
        assert not any(f"{METHOD_PREFIX}{LATE}" in set(s["method"]) for s in old.values())

        tempo(graph, "method", "add", "freqlate", "--version", "1",
              "--dir", str(FREQPRIOR), "--command", "python3 predict.py")
        before = states(graph)
        for window in windows:
            state, reason = before[f"benchmark[{window}]"]
            assert state == "stale" and f"method {LATE} registered since" in reason, (window, state, reason)
            for asset in ("frozen_recipe", "test_growth", "test_score"):
                assert before[f"{asset}[{window}]"][0] == "ok", (asset, window, before[f"{asset}[{window}]"])
        # the catalog says so too (it said "ready"); the HTML page shows each window's catalog status
        # (core/test_report.py::test_archive_report: a stale one too), checked on the page the run ends with
        catalog = tempo(graph, "report", "--format", "md")
        assert all(f"| {window} | stale " in catalog for window in windows), catalog[:3000]

        plan = plan_partitions(open_archive(graph.archive))
        lines: list[str] = []
        report = run_steps(plan_steps(plan, "all"), graph.instance, graph.resources, echo=lines.append)
        ran = {(job, key) for job, key, status, _ in report if status == "ok"}
        assert all(status in ("ok", "skipped") for *_, status, _ in report), lines
        assert {("method_job", f"{c}|{LATE}") for c in plan.cutoffs} <= ran, lines
        assert {("window_job", w) for w in windows} <= ran, lines
        for window in windows:  # the window runs rebuilt its benchmark only
            assert any(f"window_job {window}: started run" in line and line.endswith("(benchmark)") for line in lines), lines

        for (asset, window), files in kept.items():
            assert folder_bytes(store.folder(asset, window)) == files, f"{asset}[{window}] was touched"
        assert folder_bytes(graph.artefacts / "_test_claims") == claims, "a TEST claim was taken or changed"
        for window in windows:
            value = store.open("benchmark", window).value
            assert f"{METHOD_PREFIX}{LATE}" in set(value.summary["method"]), window
            assert LATE in set(value.methods["method"]) and set(value.methods["status"]) == {"eligible"}
            # the recipe's and the baselines' numbers did not move
            pd.testing.assert_frame_equal(without_methods(value.summary), without_methods(old[window]))
        # the catalog run_steps ended with: every window's benchmark ``ok`` again (``ready``), as status states it
        page = (store.folder("benchmark_catalog", None) / "report.html").read_text(encoding="utf-8")
        assert page.count("status: ready") == len(windows) and "status: stale" not in page, page[:2000]
        assert page.count(f"{METHOD_PREFIX}{LATE}") >= 2 * 2, page[:2000]  # rows in both windows
    finally:
        graph.instance.dispose()
