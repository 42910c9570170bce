"""The UI says what ``tempo status`` says: Dagster's "Unsynced" exactly where status says ``stale``.

Dagster's staleness is read as the UI reads it (its ``CachingStaleStatusResolver`` over the code
location's asset graph and the instance) and compared, partition by partition, with
``graph_state.GraphState`` (``tempo status``): ``ok`` is FRESH, ``stale`` is STALE, ``missing`` is
MISSING. Both compare the same identities: the data version is the artefact's content sha256 and
the code version the one its asset declares. Before issue 20 a code change made status say stale
where the UI said fresh (status hashed the source text, Dagster knew no code version), and status
called stale what merely read a stale upstream, which the UI (like Dagster) calls fresh until that
upstream is rebuilt to other bytes. The moved checkout (``test_moved_checkout.py``) checks the UI too.
"""
from __future__ import annotations

import dagster as dg
import pytest
from dagster._core.asset_graph_view.asset_graph_view import AssetGraphView, TemporalContext
from dagster._core.definitions.assets.graph.asset_graph import AssetGraph
from dagster._core.definitions.data_version import CachingStaleStatusResolver
from dagster._time import get_current_datetime

import tempo_assets.definitions as definitions
from tempo_assets.core.inputs.releases import open_archive
from tempo_assets.graph_state import DefinedGraph, GraphState
from tempo_assets.partitions import plan_partitions
from tempo_assets_tests.conftest import graph_from

pytestmark = pytest.mark.slow

# unchecked: stored and current, its checks not yet run in this instance -- fresh to Dagster too
DAGSTER = {"ok": "FRESH", "unchecked": "FRESH", "stale": "STALE", "missing": "MISSING"}


def ui_staleness(instance, assets) -> CachingStaleStatusResolver:
    """Dagster's staleness over ``assets``' graph, as the webserver resolves "Unsynced"."""
    graph = AssetGraph.from_assets(assets)
    view = AssetGraphView(temporal_context=TemporalContext(effective_dt=get_current_datetime(), last_event_id=None),
                          instance=instance, asset_graph=graph)
    return CachingStaleStatusResolver(instance=instance, asset_graph=graph, loading_context=view)


def disagreements(graph) -> tuple[dict[str, str], dict[str, tuple[str, str, str]]]:
    """``(tempo states, {asset[partition]: (tempo state, Dagster status, reason)} where they differ)``."""
    archive = open_archive(graph.archive)
    defined = DefinedGraph.of_lists(definitions.ASSETS, definitions.ASSET_CHECKS)  # as patched by the test
    states = GraphState(graph.store(), plan_partitions(archive), defined, archive=archive,
                        instance=graph.instance).all_states()
    resolver = ui_staleness(graph.instance, definitions.ASSETS)
    seen, differ = {}, {}
    for state in states:
        name = f"{state.asset}[{state.partition}]"
        status = resolver.get_status(dg.AssetKey(state.asset), state.partition).value
        seen[name] = state.state
        if DAGSTER.get(state.state) != status:
            differ[name] = (state.state, status, state.reason)
    return seen, differ


def test_the_ui_is_unsynced_exactly_where_status_says_stale(demo_build, tmp_path, monkeypatch):
    graph = graph_from(demo_build, tmp_path / "graph")
    try:
        seen, differ = disagreements(graph)
        assert set(seen.values()) == {"ok"} and not differ, differ
        # a bumped code version: exactly that asset's artefacts are stale, in both
        bumped = [a.map_asset_specs(lambda spec: spec.replace_attributes(code_version="2"))
                  if a.key == dg.AssetKey("ia_weights") else a for a in definitions.ASSETS]
        monkeypatch.setattr(definitions, "ASSETS", bumped)
        seen, differ = disagreements(graph)
        assert not differ, differ
        stale = sorted(k for k, s in seen.items() if s == "stale")
        assert stale == sorted(f"ia_weights[{c}]" for c in graph.plan.cutoffs), stale
        # one of them rebuilt under the new code to the same bytes: current again, nothing downstream moves
        cutoff = graph.plan.cutoffs[-1]
        result = dg.materialize(bumped, selection=["ia_weights"], partition_key=cutoff, instance=graph.instance,
                                resources=graph.resources)
        assert result.success
        seen, differ = disagreements(graph)
        assert not differ, differ
        assert sorted(k for k, s in seen.items() if s == "stale") == [k for k in stale if k != f"ia_weights[{cutoff}]"]
    finally:
        graph.instance.dispose()
