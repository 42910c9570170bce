"""Release and cutoff partitions of the tiny archive (the session's tiny graph); planted violations are refused."""
import json

import dagster as dg
import pytest

from tempo_assets.cli.graph_cmd import run_steps
from tempo_assets.core.base.errors import CutoffViolation
from tempo_assets.io_managers import ArtefactStore
from tempo_assets_tests.conftest import tiny_copy
from tempo_assets_tests.toolkit import step_failures


@pytest.fixture(scope="module")
def tiny(tiny_build, tmp_path_factory):
    graph = tiny_copy(tiny_build, tmp_path_factory.mktemp("tiny") / "graph")
    yield graph
    graph.instance.dispose()


def test_release_and_cutoff_runs_succeed_with_binding_metadata(tiny):
    assert [r[2] for r in tiny.report] == ["ok"] * len(tiny.report)
    assert {job for job, *_ in tiny.report} >= {"release_job", "cutoff_job"}
    store = tiny.store()
    for cutoff in tiny.plan.cutoffs:
        meta = store.read_meta("knn_corpus", cutoff)
        assert meta["cutoff"] == tiny.plan.as_of[cutoff].isoformat()
        assert meta["max_source_date"] <= meta["cutoff"] and meta["sources"]
        record = tiny.instance.get_latest_materialization_event(dg.AssetKey("knn_corpus"))
        assert record is not None


def test_rerun_is_skipped(tiny):
    again = run_steps([("release_job", tiny.plan.releases[0])], tiny.instance, tiny.resources, echo=lambda *_: None)
    assert again[0][2] == "skipped"


def test_role_gate_refuses_a_later_partition(tiny):
    from tempo_assets.io_managers import ArtefactSet

    plan, store = tiny.plan, tiny.store()
    order = {r: i for i, r in enumerate(plan.releases)}
    gate = ArtefactSet("release_annotations", "valid", plan.releases[2], plan.as_of[plan.releases[2]], order,
                       fetch=lambda k: store.open("release_annotations", k), as_of=plan.as_of)
    assert gate.get(plan.releases[2]).meta["partition"] == plan.releases[2]
    with pytest.raises(CutoffViolation):
        gate.get(plan.releases[3])  # t1 read by a VALID input


def test_tampered_upstream_sidecar_is_refused_for_its_cutoff_and_the_stored_artefact_kept(tiny):
    """An upstream artefact claiming a source after the cutoff is never what downstream reads.

    A run launched on it (the UI, ``dagster asset materialize``) fails with a CutoffViolation that
    names the artefact and its date, and the knn_corpus stored before stays as it was.
    """
    from tempo_assets.checks import CHECKS
    from tempo_assets.definitions import ASSETS

    key = tiny.plan.cutoffs[0]
    store = ArtefactStore(tiny.artefacts)
    sidecar = store.sidecar_path("embeddings", key)
    meta = json.loads(sidecar.read_text())
    meta["max_source_date"] = "2099-01-01"  # plant: embeddings newer than their release
    sidecar.write_text(json.dumps(meta))
    corpus_sidecar = store.sidecar_path("knn_corpus", key).read_bytes()
    result = dg.materialize(ASSETS + CHECKS, selection=["knn_corpus"], partition_key=key, instance=tiny.instance,
                            resources=tiny.resources, raise_on_error=False)
    assert not result.success
    failures = step_failures(tiny.instance, result.run_id)
    assert list(failures) == ["knn_corpus"], failures
    cutoff = tiny.plan.as_of[key].isoformat()
    assert any(c.startswith("CutoffViolation: ") and f"embeddings[{key}]" in c and "dated 2099-01-01" in c
               and f"after the cutoff {cutoff}" in c for c in failures["knn_corpus"]), failures
    assert store.sidecar_path("knn_corpus", key).read_bytes() == corpus_sidecar
    store.open("knn_corpus", key).value  # the previous good artefact is still readable


def test_a_run_keeps_no_stored_value_and_gives_memory_back_once_per_step(tiny, monkeypatch):
    """A run's steps share one process (``execute_in_process``), which would keep every value an asset
    returned until the run ends: the IO manager drops it once stored (what reads it reads the store),
    and each step gives back what the earlier ones freed once, before its first input is loaded
    (``tempo_assets/step_memory.py``)."""
    from tempo_assets import step_memory
    from tempo_assets.definitions import ASSETS

    steps = []
    monkeypatch.setattr(step_memory, "release_unused_memory", lambda: steps.append(step_memory._last_step[0][1]))
    key = tiny.plan.cutoffs[-1]  # not the one whose embeddings another test here tampers with
    result = dg.materialize(ASSETS, selection=["knn_corpus", "ia_weights"], partition_key=key,
                            instance=tiny.instance, resources=tiny.resources)
    assert result.success
    for asset in ("knn_corpus", "ia_weights"):
        with pytest.raises(dg.DagsterInvariantViolationError, match="No outputs found"):
            result.output_for_node(asset)
    assert sorted(steps) == ["ia_weights", "knn_corpus"]  # each reads two inputs or more: one release each
