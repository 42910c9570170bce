"""The method assets and jobs resolve, and nothing a method reads is window-bound (no TEST lineage)."""
import dagster as dg

from tempo_assets.definitions import defs
from tempo_assets_tests.test_definitions import graph_edges


def test_method_jobs_and_partitions_resolve():
    repo = defs.get_repository_def()
    for name in ("method_bundle_job", "method_job"):
        assert repo.get_job(name).name == name
    graph = defs.resolve_asset_graph()
    partitions = graph.get(dg.AssetKey("method_predictions")).partitions_def
    assert isinstance(partitions, dg.MultiPartitionsDefinition)
    assert [d.name for d in partitions.partitions_defs] == ["cutoff", "method"]
    assert graph.get(dg.AssetKey("method_bundle")).partitions_def.name == "cutoffs"


def test_method_inputs_have_no_window_lineage():
    edges = graph_edges()
    window_assets = {"valid_selection", "frozen_recipe", "test_score", "benchmark", "evaluation_sets", "submission"}
    upstream, frontier = set(), ["method_predictions"]
    while frontier:
        node = frontier.pop()
        for edge in edges:
            if edge["downstream"] == node and edge["upstream"] not in upstream:
                assert edge["role"] is None, edge
                upstream.add(edge["upstream"])
                frontier.append(edge["upstream"])
    assert "method_bundle" in upstream and not upstream & window_assets
