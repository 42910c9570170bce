"""A refused TEST re-launch loads nothing of TEST and leaves the stored artefacts' checks passed.

Launching ``test_growth``/``test_score`` of a window again (as the UI's "Materialize" does: the
window job on that partition, the assets and their checks) is refused by the TEST claims. Before
issue 20 the run loaded its test-role inputs first (the log said ``Loaded input "test_growth"``
right before "TEST not read") and the checks it had planned ended "Skipped" (the UI: "0 / 3
Passed") though the stored score had not changed. Now the test-role inputs are read through the
store only after the claim, and the refusal restates the stored artefacts' check results.
"""
from __future__ import annotations

import dagster as dg
import pytest
from dagster._core.event_api import PartitionKeyFilter

from tempo_assets.assets import evaluation
from tempo_assets.audit_checks import AUDIT_CHECKS
from tempo_assets.checks import CHECKS
from tempo_assets.definitions import ASSETS
from tempo_assets.graph_state import DefinedGraph, GraphState, blocking_checks
from tempo_assets.sensors import JOBS
from tempo_assets.warehouse_checks import WAREHOUSE_CHECKS
from tempo_assets_tests.conftest import graph_from

pytestmark = pytest.mark.slow

DEFERRED = {"test_growth": {"experimental_annotations", "release_annotations", "ontology", "sequences"},
            "test_score": {"test_growth", "ontology"}}


def relaunch(graph, window: str, assets: list[str]):
    """The window job on ``window`` with ``assets`` selected (and their checks), as the UI launches it."""
    job = dg.Definitions(assets=ASSETS, asset_checks=CHECKS + AUDIT_CHECKS + WAREHOUSE_CHECKS, jobs=JOBS,
                         resources=graph.resources).resolve_job_def("window_job")
    return job.execute_in_process(partition_key=window, instance=graph.instance, raise_on_error=False,
                                  asset_selection=[dg.AssetKey(a) for a in assets])


def latest_checks(graph, asset: str, window: str) -> dict[str, tuple[str, str]]:
    keys = blocking_checks(CHECKS + AUDIT_CHECKS + WAREHOUSE_CHECKS)[asset]
    records = graph.instance.event_log_storage.get_latest_asset_check_execution_by_key(
        keys, partition_filter=PartitionKeyFilter(key=window))
    return {key.name: (records[key].status.value, records[key].run_id) for key in keys}


@pytest.mark.parametrize("assets", [["test_score"], ["test_growth", "test_score"]], ids=["score", "growth+score"])
def test_a_refused_relaunch_loads_no_test_input_and_keeps_the_checks_passed(demo_build, tmp_path, assets):
    graph = graph_from(demo_build, tmp_path / "graph")
    try:
        window = graph.plan.windows[0]
        store = graph.store()
        stored = {a: store.read_meta(a, window)["sha256"] for a in ("test_growth", "test_score")}
        before = {a: latest_checks(graph, a, window) for a in ("test_growth", "test_score")}
        assert all(status == "SUCCEEDED" for checks in before.values() for status, _ in checks.values()), before
        result = relaunch(graph, window, assets)
        assert result.success
        run_id = result.run_id
        assert evaluation.test_refusal(graph.instance, run_id) is not None  # refused, said so
        assert not result.asset_materializations_for_node("test_score")
        loaded = {(e.step_key, e.event_specific_data.input_name)
                  for e in result.all_events if e.event_type == dg.DagsterEventType.LOADED_INPUT}
        for asset in assets:
            assert not {(asset, name) for name in DEFERRED[asset]} & loaded, loaded
        for asset in ("test_growth", "test_score"):
            assert store.read_meta(asset, window)["sha256"] == stored[asset]
        after = {a: latest_checks(graph, a, window) for a in ("test_growth", "test_score")}
        # every check this run planned shows passed (restated in this run), none skipped
        planned = {a for a in ("test_growth", "test_score") if a in assets}
        for asset in planned:
            for name, (status, run) in after[asset].items():
                assert (status, run) == ("SUCCEEDED", run_id), (asset, name, status, run)
        state = GraphState(store, graph.plan, DefinedGraph.of_lists(ASSETS, CHECKS + AUDIT_CHECKS + WAREHOUSE_CHECKS),
                           archive=None, instance=graph.instance)
        assert state.check_result("test_score", window)[0] == "passed"
        assert state.state("test_score", window).state == "ok"
    finally:
        graph.instance.dispose()
