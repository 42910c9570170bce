"""Materialise release and cutoff partitions of a tiny archive; planted violations are refused."""
import shutil
from datetime import date

import dagster as dg
import pytest

from tempo_assets.cli.graph_cmd import plan_steps, run_steps
from tempo_assets.core.errors import CutoffViolation
from tempo_assets.definitions import build_resources
from tempo_assets.io_managers import ArtefactStore
from tempo_assets.partitions import plan_partitions, register_partitions
from tempo_assets.resources import open_archive
from tempo_assets_tests.assets.tiny_archive import build_tiny_archive


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    root = tmp_path_factory.mktemp("tiny")
    archive = build_tiny_archive(root)
    instance = dg.DagsterInstance.ephemeral()
    plan = plan_partitions(open_archive(archive))
    register_partitions(instance, plan)
    resources = build_resources(str(archive), str(root / "art"), "sqlite:///" + str(root / "wh.sqlite"), str(root / "cache"))
    steps = [s for s in plan_steps(plan, "all") if s[0] in ("release_job", "cutoff_job")]
    report = run_steps(steps, instance, resources, echo=lambda *_: None)
    return root, archive, instance, plan, resources, report


def test_release_and_cutoff_runs_succeed_with_binding_metadata(tiny):
    root, archive, instance, plan, resources, report = tiny
    assert [r[2] for r in report] == ["ok"] * len(report)
    store = ArtefactStore(root / "art")
    for cutoff in plan.cutoffs:
        meta = store.read_meta("knn_corpus", cutoff)
        assert meta["cutoff"] == plan.as_of[cutoff].isoformat()
        assert meta["max_source_date"] <= meta["cutoff"] and meta["sources"]
        record = instance.get_latest_materialization_event(dg.AssetKey("knn_corpus"))
        assert record is not None
    checks = instance.event_log_storage  # check evaluations are recorded per run
    assert checks is not None


def test_rerun_is_skipped(tiny):
    root, archive, instance, plan, resources, report = tiny
    again = run_steps([("release_job", plan.releases[0])], instance, resources, echo=lambda *_: None)
    assert again[0][2] == "skipped"


def test_role_gate_refuses_a_later_partition(tiny):
    root, archive, instance, plan, resources, report = tiny
    from tempo_assets.io_managers import ArtefactSet

    store = ArtefactStore(root / "art")
    order = {r: i for i, r in enumerate(plan.releases)}
    gate = ArtefactSet("release_annotations", "valid", plan.releases[2], plan.as_of[plan.releases[2]], order,
                       fetch=lambda k: store.open("release_annotations", k), as_of=plan.as_of)
    assert gate.get(plan.releases[2]).meta["partition"] == plan.releases[2]
    with pytest.raises(CutoffViolation):
        gate.get(plan.releases[3])  # t1 read by a VALID input


def test_tampered_upstream_sidecar_is_refused_and_nothing_downstream_runs(tmp_path):
    """An upstream artefact claiming a source after the cutoff is never what downstream reads."""
    import json

    archive = build_tiny_archive(tmp_path, n_releases=2)
    instance = dg.DagsterInstance.ephemeral()
    plan = plan_partitions(open_archive(archive))
    register_partitions(instance, plan)
    resources = build_resources(str(archive), str(tmp_path / "art"), "sqlite:///" + str(tmp_path / "wh.sqlite"),
                                str(tmp_path / "cache"))
    key = plan.cutoffs[0]
    assert run_steps([("release_job", plan.releases[0]), ("release_job", key)], instance, resources,
                     echo=lambda *_: None)[-1][2] == "ok"
    store = ArtefactStore(tmp_path / "art")
    sidecar = store.sidecar_path("embeddings", key)
    meta = json.loads(sidecar.read_text())
    meta["max_source_date"] = "2099-01-01"  # plant: embeddings newer than their release
    sidecar.write_text(json.dumps(meta))
    report = run_steps([("cutoff_job", key)], instance, resources, echo=lambda *_: None)
    assert report[0][2] == "FAILED"
    assert not store.exists("knn_corpus", key)
    # reranker_labels reads only the previous release's embeddings, so it may still build
