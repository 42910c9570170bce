"""Violations planted in a tiny archive are caught by a named check or refused, and nothing downstream runs.

(The demo-graph plants, a VALID input reading TEST growth and a second TEST score, are in
``test_materialize_demo.py``; an upstream artefact whose sidecar claims a later date is in
``assets/test_materialize_tiny.py``.)
"""
import json

import dagster as dg
import numpy as np
import pytest
from dagster._core.instance.ref import InstanceRef

from tempo_assets.cli.graph_cmd import run_steps
from tempo_assets.core.base.errors import TempoInputError
from tempo_assets.core.base.io import sha256_file
from tempo_assets.definitions import build_resources, defs
from tempo_assets.io_managers import ArtefactStore
from tempo_assets.partitions import plan_partitions, register_partitions
from tempo_assets.resources import ArchiveResource, ArtefactStoreResource, open_archive
from tempo_assets.sensors import archive_sensor
from tempo_assets_tests.assets.tiny_archive import RELEASES, build_tiny_archive
from tempo_assets_tests.conftest import make_home


def rewrite_manifest(release_dir, edit) -> None:
    """Edit a release.json in place (the archive API would refuse to write these plants)."""
    path = release_dir / "release.json"
    manifest = json.loads(path.read_text())
    edit(manifest)
    path.write_text(json.dumps(manifest, indent=2))


def check_results(instance, name):
    found = []
    for record in instance.get_run_records():
        for entry in instance.all_logs(record.dagster_run.run_id, of_type=dg.DagsterEventType.ASSET_CHECK_EVALUATION):
            if entry.dagster_event.event_specific_data.check_name == name:
                found.append(entry.dagster_event.event_specific_data)
    return found


def materialised(instance, asset, key) -> bool:
    return bool(instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=dg.AssetKey(asset), asset_partitions=[key]), limit=1).records)


@pytest.fixture
def instance(tmp_path):
    with dg.DagsterInstance.from_ref(InstanceRef.from_dir(str(make_home(tmp_path / "home")))) as inst:
        yield inst


def test_gaf_rows_dated_after_the_cutoff_fail_the_check_and_block_downstream(tmp_path, instance):
    archive = build_tiny_archive(tmp_path, n_releases=2)
    release = archive / "releases" / RELEASES[1]
    gaf = next(release.glob("*.gaf"))
    row = "\t".join(["UniProtKB", "P00001", "P00001", "", "GO:0000003", "PMID:1", "IDA", "", "P", "", "",
                     "protein", "taxon:9606", "20160301", "UniProt", "", ""])
    with open(gaf, "a", encoding="utf-8") as handle:
        handle.write(row + "\n")  # an experimental row dated after the release's cutoff (2016-01-15)

    def fix_sha(manifest):
        for entry in manifest["files"]:
            if entry["kind"] == "gaf":
                entry["sha256"] = sha256_file(gaf)
    rewrite_manifest(release, fix_sha)

    plan = plan_partitions(open_archive(archive))  # the archive still loads
    register_partitions(instance, plan)
    resources = build_resources(str(archive), str(tmp_path / "art"), "sqlite:///" + str(tmp_path / "wh.sqlite"),
                                str(tmp_path / "cache"))
    report = run_steps([("release_job", RELEASES[0]), ("release_job", RELEASES[1]), ("cutoff_job", RELEASES[1])],
                       instance, resources, echo=lambda *_: None)
    # the failed release does not stop the run; what reads it is blocked by its failed check
    assert [r[2] for r in report] == ["ok", "FAILED", "blocked"]
    results = {r.partition: r for r in check_results(instance, "release_annotations__gaf_rows_within_file_date")}
    assert results[RELEASES[0]].passed and not results[RELEASES[1]].passed
    result = results[RELEASES[1]]
    assert result.metadata["gaf_rows_after_file_date"].value == 1
    for downstream in ("stg_annotations", "experimental_annotations"):
        assert not materialised(instance, downstream, RELEASES[1])

    # tempo materialize does not start a run that reads it: the failed check blocks the chain
    lines = []
    report = run_steps([("cutoff_job", RELEASES[1])], instance, resources, echo=lines.append)
    assert report[0][2] == "blocked"
    assert f"release_annotations__gaf_rows_within_file_date failed on release_annotations[{RELEASES[1]}]" in lines[0]
    # a run launched anyway (the UI, a backfill) is refused by the IO manager
    from tempo_assets.definitions import ASSETS

    result = dg.materialize(ASSETS, selection=["knn_corpus", "ia_weights", "reranker_labels"],
                            partition_key=RELEASES[1], instance=instance, resources=resources, raise_on_error=False)
    assert not result.success
    for downstream in ("knn_corpus", "ia_weights", "reranker_labels"):
        assert not materialised(instance, downstream, RELEASES[1])
        assert not ArtefactStore(tmp_path / "art").exists(downstream, RELEASES[1])


def test_an_embeddings_file_newer_than_its_release_is_refused_before_anything_runs(tmp_path, instance):
    archive = build_tiny_archive(tmp_path, n_releases=4)
    release = archive / "releases" / RELEASES[1]
    npz = release / "embeddings_prot_t5.npz"
    np.savez(npz, ids=np.array(["P00001"]), matrix=np.ones((1, 4), dtype=np.float32))

    def add_embeddings(manifest):  # computed 2017-03-01, after the next release (2017-01-15)
        manifest["files"].append({"path": npz.name, "kind": "embeddings", "date": "2017-03-01",
                                  "sha256": sha256_file(npz), "provenance": "real", "note": "planted"})
        manifest["as_of"] = "2017-03-01"
    rewrite_manifest(release, add_embeddings)

    assert open_archive(archive).release(RELEASES[1]).as_of.isoformat() == "2017-03-01"  # it loads
    with pytest.raises(TempoInputError, match=r"embeddings file 'embeddings_prot_t5.npz' is dated 2017-03-01"):
        plan_partitions(open_archive(archive))
    resources = {"archive": ArchiveResource(root=str(archive)),
                 "artefact_store": ArtefactStoreResource(root=str(tmp_path / "art"))}
    with pytest.raises(Exception, match="newer than its release"):
        archive_sensor(dg.build_sensor_context(definitions=defs, instance=instance, resources=resources))
    assert instance.get_dynamic_partitions("releases") == []
    assert not instance.get_run_records()
