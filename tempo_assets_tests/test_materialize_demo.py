"""The demo archive ``data/`` materialised end to end (the ``demo_graph`` session fixture).

Every window through ``test_score`` and the submission at the latest cutoff, in a tmp instance:
the blocking checks all ran and passed, every artefact carries its time binding, the VALID/TEST
numbers are real scores on shared targets, TEST refuses a second score, a VALID input refuses
TEST data, and the submission reads nothing after its cutoff. A submission is rebuilt byte for byte
by the ``dagster`` CLI in a subprocess on a copy of the session's tiny build (``tiny_build``).
"""

import dagster as dg
import pytest

from tempo_assets.checks import CHECKS
from tempo_assets.core.base.io import sha256_file
from tempo_assets.definitions import ASSETS
from tempo_assets.partitions import parse_window_key
from tempo_assets_tests.conftest import tiny_copy
from tempo_assets_tests.toolkit import dagster, load_benchmark

pytestmark = pytest.mark.slow

WINDOW_ROLES = {"valid_evaluation_set": "valid", "valid_selection": "valid", "frozen_recipe": "valid",
                "test_growth": "test", "test_score": "test", "benchmark": "test"}
EXPECTED_CHECKS = {  # check -> partition kind it runs on
    "release_annotations__within_cutoff": "releases", "release_annotations__gaf_rows_within_file_date": "releases",
    "embeddings__within_cutoff": "releases", "knn_corpus__within_cutoff": "cutoffs",
    "ia_weights__within_cutoff": "cutoffs", "reranker_labels__within_cutoff": "cutoffs",
    "valid_selection__no_test_lineage": "windows", "frozen_recipe__hash_matches": "windows",
    "test_score__recipe_frozen_before_test": "windows", "test_score__scored_once": "windows",
    "test_score__no_lineage_past_t1": "windows", "submission__within_cutoff": "submission",
    # the SQL checks, as asset checks of the warehouse assets
    "stg_annotations__no_not_qualifier": "releases", "stg_term_closure__reflexive": "releases",
    "annotation_growth__targets_have_sequence": "cutoffs", "evaluation_sets__valid_precedes_test": "windows",
}


def check_evaluations(instance) -> list:
    """Every asset-check evaluation recorded in the instance, from every run's event log."""
    found = []
    for record in instance.get_run_records():
        for entry in instance.all_logs(record.dagster_run.run_id,
                                       of_type=dg.DagsterEventType.ASSET_CHECK_EVALUATION):
            found.append(entry.dagster_event.event_specific_data)
    return found


def error_text(event) -> str:
    """Class names and messages of a step failure's error and its causes."""
    error, parts = event.step_failure_data.error, []
    while error is not None:
        parts.append(f"{error.cls_name}: {error.message}")
        error = error.cause
    return "\n".join(parts)


def materialisations(instance, asset: str, partition: str | None) -> list:
    partitions = None if partition in (None, "__unpartitioned__") else [partition]
    return instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=dg.AssetKey(asset), asset_partitions=partitions), limit=100).records


def test_every_step_ran_and_every_blocking_check_passed(demo_graph):
    plan = demo_graph.plan
    assert len(plan.windows) == 2 and [r[2] for r in demo_graph.report] == ["ok"] * len(demo_graph.report)
    evaluations = check_evaluations(demo_graph.instance)
    assert evaluations and all(e.passed for e in evaluations), [e.check_name for e in evaluations if not e.passed]
    seen = {(e.check_name, e.partition) for e in evaluations}
    keys = {"releases": plan.releases, "cutoffs": plan.cutoffs, "windows": plan.windows,
            "submission": plan.cutoffs[-1:]}
    for name, kind in EXPECTED_CHECKS.items():
        for key in keys[kind]:
            assert (name, key) in seen, f"check {name} never evaluated on {key}"


def test_every_artefact_records_its_time_binding(demo_graph):
    store, instance = demo_graph.store(), demo_graph.instance
    sidecars = sorted(demo_graph.artefacts.glob("*/*/artefact.json"))
    assert len(sidecars) >= 5 * 4 + 4 * 3 + 2 * 3 + 1
    for sidecar in sidecars:
        asset, partition = sidecar.parent.parent.name, sidecar.parent.name
        meta = store.read_meta(asset, partition)
        assert meta["max_source_date"] <= meta["cutoff"], (asset, partition)
        assert meta["sources"] and all("sha256" in s for s in meta["sources"]), (asset, partition)
        recorded = materialisations(instance, asset, partition)[0].asset_materialization.metadata
        for key in ("cutoff", "max_source_date", "sources"):
            assert key in recorded, (asset, partition, key)
        assert recorded["cutoff"].value == meta["cutoff"]
        if asset in WINDOW_ROLES:
            window = parse_window_key(partition)
            assert (meta["window"], meta["window_role"]) == (partition, WINDOW_ROLES[asset])
            assert recorded["window"].value == partition and recorded["window_role"].value == WINDOW_ROLES[asset]
            limit = window.t0 if WINDOW_ROLES[asset] == "valid" else window.t1
            assert meta["cutoff"] == demo_graph.plan.as_of[limit].isoformat()
        elif partition == "__unpartitioned__":  # the catalog: bound to the latest t1 it read
            assert asset == "benchmark_catalog"
            assert meta["cutoff"] == max(demo_graph.plan.as_of[parse_window_key(w).t1]
                                         for w in demo_graph.plan.windows).isoformat()
        else:  # release/cutoff artefacts (and a method's cutoff|method) are bound to their cutoff
            assert meta["cutoff"] == demo_graph.plan.as_of[partition.split("|")[0]].isoformat()


def test_valid_and_test_numbers_are_real_scores_on_shared_targets(demo_graph, tmp_path):
    store = demo_graph.store()
    bench = load_benchmark("demo_results")
    table = bench.demo_results_table(store, demo_graph.plan.windows)  # raises if targets differ
    assert set(table["split"]) == {"VALID", "TEST"} and set(table["method"]) == {"recipe", "knn", "naive"}
    assert table["fmax_oracle"].between(0, 1).all() and (table["n_targets"] > 0).all()
    assert (table["truth_pairs"] > 0).all()
    for window in demo_graph.plan.windows:
        valid = store.open("valid_selection", window).value["valid_summary"]
        test = store.open("test_score", window).value["summary"]
        for summary in (valid, test):
            assert summary[["fmax_oracle", "coverage"]].dropna().stack().between(0, 1).all()
            # per (mode, aspect), the three methods share targets and ground truth
            per_cell = summary.groupby(["mode", "aspect"])
            assert (per_cell["truth_sha256"].nunique() == 1).all() and (per_cell["method"].nunique() == 3).all()
        nk = lambda s: set(s[s["mode"] == "NK"]["truth_sha256"])  # noqa: E731
        assert nk(valid).isdisjoint(nk(test)), "VALID and TEST scored the same NK ground truth"
    # window 1's TEST growth (t0, t1] is window 2's VALID growth (t-1, t0]: scored by two assets, the
    # baselines (same corpus, same targets) must agree exactly
    first, second = demo_graph.plan.windows
    assert parse_window_key(first).t0 == parse_window_key(second).t_minus_1
    key = ["mode", "aspect", "method"]
    test1 = store.open("test_score", first).value["summary"].set_index(key).sort_index()
    valid2 = store.open("valid_selection", second).value["valid_summary"].set_index(key).sort_index()
    for method in ("knn", "naive"):
        a, b = test1.xs(method, level="method"), valid2.xs(method, level="method")
        assert a[["n_targets", "truth_sha256"]].equals(b[["n_targets", "truth_sha256"]])
        assert (a["fmax_oracle"] - b["fmax_oracle"]).abs().max() < 1e-12
    out = tmp_path / "demo_results.md"
    recipes = {w: store.open("frozen_recipe", w).value["recipe"] for w in demo_graph.plan.windows}
    out.write_text(bench.to_markdown(table, recipes, "test run"), encoding="utf-8")
    assert out.read_text().count("| recipe ") == len(table) // 3
    lines, paired = bench.profile_sections(store, demo_graph.plan.windows)  # lafa first, then cafaeval
    assert list(paired) == ["lafa", "cafaeval"] and all(len(t) for t in paired.values())
    assert lines[0].startswith("## TEST, profile `lafa`")
    assert paired["lafa"]["cluster_low"].notna().all()


def test_second_test_read_and_score_are_refused_and_the_stored_score_is_unchanged(demo_graph):
    """A second launch reads nothing of TEST, yields no output and succeeds: the stored ones stay the only ones."""
    from tempo_assets.assets.evaluation import test_refusal
    from tempo_assets.core.storage.claims import ClaimStore

    store, instance = demo_graph.store(), demo_graph.instance
    window = demo_graph.plan.windows[0]
    sidecars = {a: store.sidecar_path(a, window).read_bytes() for a in ("test_growth", "test_score")}
    for selection, refused in ((["test_growth", "test_score", "benchmark"], "test_growth"),
                               (["test_score", "benchmark"], "test_score")):
        result = dg.materialize(ASSETS + CHECKS, selection=selection, partition_key=window, instance=instance,
                                resources=demo_graph.resources, raise_on_error=False)
        assert result.success and not [e for e in result.all_events if e.is_step_failure]
        assert {e.step_key for e in result.all_events if e.event_type_value == "STEP_SKIPPED"} >= {"benchmark"}
        refusal = test_refusal(instance, result.run_id)
        assert refusal.startswith(f"{refused}[{window}] was already materialised") and "exactly once" in refusal
    assert {a: store.sidecar_path(a, window).read_bytes() for a in sidecars} == sidecars
    assert len(materialisations(instance, "test_growth", window)) == 1
    assert len(materialisations(instance, "test_score", window)) == 1
    [status] = ClaimStore.beside(demo_graph.artefacts).claims(lambda w: store.exists("test_score", w), [window])
    assert status.state == "scored"
    assert {a: c.run_id for a, c in status.claims.items()} == {
        a: store.read_meta(a, window)["run_id"] for a in ("test_growth", "test_score")}


def test_a_valid_input_refuses_test_growth_and_nothing_downstream_runs(demo_graph):
    """A selection that tries to read t1 through its VALID-role input fails; frozen_recipe never runs."""
    from tempo_assets.assets.common import role_in
    from tempo_assets.io_managers import ArtefactSet
    from tempo_assets.partitions import WINDOWS

    window = parse_window_key(demo_graph.plan.windows[0])

    @dg.asset(name="valid_selection", partitions_def=WINDOWS, group_name="selection",
              ins={"release_annotations": role_in("valid")})
    def leaky_selection(context, release_annotations: ArtefactSet):
        release_annotations.get(window.t0)  # allowed
        return release_annotations.get(window.t1).value  # TEST ground truth: must be refused

    others = [a for a in ASSETS if a.key != dg.AssetKey("valid_selection")]
    before = len(materialisations(demo_graph.instance, "frozen_recipe", window.key))
    sidecar = demo_graph.store().sidecar_path("frozen_recipe", window.key).read_bytes()
    result = dg.materialize([leaky_selection, *others], selection=["valid_selection", "frozen_recipe"],
                            partition_key=window.key, instance=demo_graph.instance,
                            resources=demo_graph.resources, raise_on_error=False)
    assert not result.success
    failure = [e for e in result.all_events if e.is_step_failure][0]
    assert failure.step_key == "valid_selection" and "CutoffViolation: " in error_text(failure)
    assert repr(window.t1) in error_text(failure)
    assert "frozen_recipe" not in {e.step_key for e in result.all_events if e.is_step_success}
    assert len(materialisations(demo_graph.instance, "frozen_recipe", window.key)) == before
    assert demo_graph.store().sidecar_path("frozen_recipe", window.key).read_bytes() == sidecar


def test_submission_reads_nothing_later_and_is_rebuilt_byte_for_byte(demo_graph, tiny_build, tmp_path):
    store, plan = demo_graph.store(), demo_graph.plan
    cutoff = plan.cutoffs[-1]
    meta = store.read_meta("submission", cutoff)
    limit = plan.as_of[cutoff].isoformat()
    dates = [s["date"] for s in meta["sources"] if "date" in s]
    assert dates and max(dates) <= limit and meta["max_source_date"] <= limit == meta["cutoff"]
    read = {s["artefact"] for s in meta["sources"] if "artefact" in s}
    assert f"frozen_recipe[{meta['recipe_window']}]" in read
    assert parse_window_key(meta["recipe_window"]).t0 <= cutoff
    path = store.folder("submission", cutoff) / meta["file"]
    assert sha256_file(path) == meta["sha256"] and path.read_text().count("\n") > 100

    # materialised again, by the dagster CLI in a subprocess on the same instance and folders: the tiny
    # build's latest submission (a copy), the same code path as data/'s at a fifth of the cost (data/'s
    # bytes are the same in every run: test_numbers_unchanged compares them with the pinned sha256)
    tiny = tiny_copy(tiny_build, tmp_path / "tiny")
    try:
        tiny_store, cutoff = tiny.store(), tiny.plan.cutoffs[-1]
        before = tiny_store.read_meta("submission", cutoff)
        first = sha256_file(tiny_store.folder("submission", cutoff) / before["file"])
        assert first == before["sha256"] and before["rows"] > 100
        done = dagster("asset", "materialize", "--select", "submission", "--partition", cutoff,
                       "-m", "tempo_assets.definitions", env=tiny.env, timeout=300)
        assert done.returncode == 0, done.stderr[-3000:]
        records = materialisations(tiny.instance, "submission", cutoff)
        assert len(records) == 2 and records[0].run_id != records[1].run_id
        assert records[0].asset_materialization.metadata["sha256"].value == first
        after = tiny_store.read_meta("submission", cutoff)  # the CLI's run wrote it, to the same bytes
        assert after["run_id"] == records[0].run_id != before["run_id"]
        assert sha256_file(tiny_store.folder("submission", cutoff) / after["file"]) == first == after["sha256"]
    finally:
        tiny.instance.dispose()
