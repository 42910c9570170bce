"""Every artefact that drops records writes ``removals.tsv.gz`` beside itself; counts equal its metadata.

A tiny archive with planted records (an obsolete, an alt_id and an unknown term, a NOT row, an
annotated protein without a sequence; separately a GAF row dated after the cutoff) is
materialised through the whole graph; each plant must appear in the right manifest with its
reason, and every manifest must agree with the sidecar and with the Dagster instance's record
of the materialisation (the instance audit).
"""
import json

import dagster as dg
import pytest

from tempo_assets.cli.graph_cmd import plan_steps, run_steps
from tempo_assets.core.base.io import sha256_file
from tempo_assets.core.audits.removals import MANIFEST_NAME, audit_removal_manifests, read_removal_manifest
from tempo_assets.definitions import build_resources
from tempo_assets.core.storage.artefacts import ArtefactStore
from tempo_assets.io_managers import unwrap_metadata
from tempo_assets.partitions import plan_partitions, register_partitions
from tempo_assets.resources import GridResource, open_archive
from tempo_assets_tests.conftest import GRID_BOOTSTRAP_SAMPLES
from tempo_assets_tests.assets.tiny_archive import RELEASES, build_tiny_archive

REMOVAL_ASSETS = ("release_annotations", "embeddings", "knn_corpus", "reranker_labels", "valid_selection",
                  "test_score", "submission")
# scored from the evaluation sets and the TEST score: no record dropped, no manifest written
UNMANIFESTED = ("benchmark", "benchmark_catalog")
PLANTED_RELEASE = RELEASES[1]
EXTRA_OBO = """
[Term]
id: GO:0000090
name: withdrawn
namespace: biological_process
is_obsolete: true

[Term]
id: GO:0000091
name: renamed
namespace: molecular_function
alt_id: GO:0000092
is_a: GO:0003674 ! parent
"""


def gaf_line(protein, term, aspect, day, qualifier="", evidence="IDA"):
    return "\t".join(["UniProtKB", protein, protein, qualifier, term, "PMID:1", evidence, "", aspect, "", "",
                      "protein", "taxon:9606", day, "UniProt", "", ""]) + "\n"


def plant(release_dir, gaf_lines, obo_text=""):
    """Append rows to the release's GAF (and stanzas to its OBO) and re-pin their sha256."""
    manifest_path = release_dir / "release.json"
    manifest = json.loads(manifest_path.read_text())
    for entry in manifest["files"]:
        path = release_dir / entry["path"]
        extra = "".join(gaf_lines) if entry["kind"] == "gaf" else obo_text if entry["kind"] == "obo" else ""
        if extra:
            with open(path, "a", encoding="utf-8") as handle:
                handle.write(extra)
            entry["sha256"] = sha256_file(path)
    manifest_path.write_text(json.dumps(manifest, indent=1))


def manifest_rows(store, asset, partition):
    frame = read_removal_manifest(store.folder(asset, partition) / MANIFEST_NAME)
    return {(r.record_id, r.kind, r.reason): r.count for r in frame.itertuples()}


def instance_metadata(instance, asset, partition):
    records = instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=dg.AssetKey(asset), asset_partitions=[partition]), limit=1).records
    assert records, f"{asset}[{partition}] was not materialised"
    return unwrap_metadata(records[0].asset_materialization.metadata)


def assert_manifests_agree(store, instance, assets=REMOVAL_ASSETS):
    """The instance audit: each materialisation's removed_* counts = its sidecar's = its manifest's."""
    assert audit_removal_manifests(store.root, required_assets=assets) == []
    checked = 0
    for asset in assets:
        for sidecar in sorted((store.root / asset).glob("*/artefact.json")):
            partition = sidecar.parent.name
            side = store.read_meta(asset, partition)
            recorded = instance_metadata(instance, asset, partition)
            frame = read_removal_manifest(sidecar.parent / MANIFEST_NAME)
            in_file = frame.groupby("reason")["count"].sum().to_dict()
            keys = [k for k in side if k.startswith("removed_")]
            assert keys and {k: recorded[k] for k in keys} == {k: side[k] for k in keys}
            assert recorded["removals_sha256"] == side["removals_sha256"] == sha256_file(sidecar.parent / MANIFEST_NAME)
            for key in keys:
                reason = key[len("removed_"):]
                assert side[key] == (int(frame["count"].sum()) if reason == "total" else in_file.get(reason, 0))
            checked += 1
    return checked


@pytest.fixture(scope="module")
def planted_graph(tmp_path_factory):
    root = tmp_path_factory.mktemp("removals")
    archive = build_tiny_archive(root)
    day = PLANTED_RELEASE.replace("-", "")
    plant(archive / "releases" / PLANTED_RELEASE, [
        gaf_line("P00001", "GO:0000090", "P", day),              # obsolete term
        gaf_line("P00002", "GO:0000092", "F", day),              # alt_id of GO:0000091
        gaf_line("P00003", "GO:0009999", "P", day),              # unknown to the ontology
        gaf_line("P00004", "GO:0000002", "P", day, "NOT"),       # a NOT row
        gaf_line("Q99999", "GO:0000012", "F", day),              # annotated, but no sequence
        gaf_line("P00010", "GO:0000001", "P", day),              # BP known at t-1 ...
    ], EXTRA_OBO)
    plant(archive / "releases" / RELEASES[2], [                 # ... and gains a term at t0: PK in VALID
        gaf_line("P00010", "GO:0000001", "P", RELEASES[2].replace("-", "")),
        gaf_line("P00010", "GO:0000003", "P", RELEASES[2].replace("-", "")),
    ])
    instance = dg.DagsterInstance.ephemeral()
    plan = plan_partitions(open_archive(archive))
    register_partitions(instance, plan)
    # the session builds' grid (fewer bootstrap resamples: no manifest counts them); the window's benchmark
    # and the catalog left out: they drop nothing and write no manifest (every asset that does is built)
    resources = build_resources(str(archive), str(root / "art"), "sqlite:///" + str(root / "wh.sqlite"),
                                str(root / "cache"), grid=GridResource(bootstrap_samples=GRID_BOOTSTRAP_SAMPLES))
    steps = [step for step in plan_steps(plan, "all") if step[0] != "catalog_job"]
    report = run_steps(steps, instance, resources, echo=lambda *_: None, exclude=UNMANIFESTED)
    yield ArtefactStore(root / "art"), instance, plan, report
    instance.dispose()


def test_the_whole_graph_ran_and_every_dropping_artefact_has_a_manifest(planted_graph):
    store, instance, plan, report = planted_graph
    assert [r[2] for r in report] == ["ok"] * len(report)
    for asset in REMOVAL_ASSETS:
        partitions = sorted(p.name for p in (store.root / asset).iterdir() if (p / "artefact.json").exists())
        assert partitions, asset
        assert all((store.folder(asset, p) / MANIFEST_NAME).exists() for p in partitions), asset
    assert assert_manifests_agree(store, instance) >= len(REMOVAL_ASSETS)


def test_planted_terms_and_not_row_are_in_the_release_manifest(planted_graph):
    store, instance, plan, report = planted_graph
    day = PLANTED_RELEASE.replace("-", "")
    rows = manifest_rows(store, "release_annotations", PLANTED_RELEASE)
    assert rows[("P00001|GO:0000090", "experimental_annotation", "obsolete_term")] == 1
    assert rows[("P00002|GO:0000092", "experimental_annotation", "alt_id_remapped")] == 1
    assert rows[("P00003|GO:0009999", "experimental_annotation", "unknown_term")] == 1
    assert rows[(f"P00004|GO:0000002|IDA|{day}", "gaf_row", "not_qualifier")] == 1
    meta = store.read_meta("release_annotations", PLANTED_RELEASE)
    obsolete = meta["experimental_obsolete_dropped"] + meta["non_experimental_obsolete_dropped"]
    assert meta["removed_obsolete_term"] == obsolete
    assert meta["removed_after_cutoff"] == 0
    # an unplanted release drops nothing for these reasons
    clean = store.read_meta("release_annotations", RELEASES[0])
    assert clean["removed_obsolete_term"] == clean["removed_not_qualifier"] == clean["removed_unknown_term"] == 0


def test_a_protein_without_sequence_is_left_out_of_the_corpus_and_the_targets(planted_graph):
    store, instance, plan, report = planted_graph
    assert manifest_rows(store, "knn_corpus", PLANTED_RELEASE)[("Q99999", "protein", "no_embedding")] == 1
    labels = manifest_rows(store, "reranker_labels", PLANTED_RELEASE)
    assert labels[("Q99999|MF|NK", "target", "no_sequence_at_a")] == 1
    assert store.read_meta("reranker_labels", PLANTED_RELEASE)["removed_no_sequence_at_a"] >= 1


def test_scoring_manifests_log_non_targets_and_pk_masks(planted_graph):
    store, instance, plan, report = planted_graph
    for asset in ("valid_selection", "test_score"):
        for window in plan.windows:
            meta = store.read_meta(asset, window)
            for reason in ("not_a_target", "pk_known_term_in_truth", "pk_known_term_predicted"):
                assert f"removed_{reason}" in meta
            rows = manifest_rows(store, asset, window)
            truth = {k for k in rows if k[2] == "pk_known_term_in_truth"}
            assert len(truth) == meta["removed_pk_known_term_in_truth"]
    valid = manifest_rows(store, "valid_selection", plan.windows[0])
    assert valid[("P00010|GO:0000001|BP", "ground_truth", "pk_known_term_in_truth")] == 1
    assert any(k[2] == "pk_known_term_predicted" and "|P00010|" in k[0] for k in valid)
    assert any(k[2] == "not_a_target" for k in valid)
    cutoff = plan.cutoffs[-1]
    sub = store.read_meta("submission", cutoff)
    assert {"removed_score_rounds_to_zero", "removed_beyond_max_terms"} <= set(sub)


def test_a_gaf_row_after_the_cutoff_is_in_the_manifest(tmp_path):
    archive = build_tiny_archive(tmp_path, n_releases=1, n_proteins=12)
    plant(archive / "releases" / RELEASES[0], [gaf_line("P00005", "GO:0000003", "P", "20150301")])
    instance = dg.DagsterInstance.ephemeral()
    plan = plan_partitions(open_archive(archive))
    register_partitions(instance, plan)
    resources = build_resources(str(archive), str(tmp_path / "art"), "sqlite:///" + str(tmp_path / "wh.sqlite"),
                                str(tmp_path / "cache"))
    run_steps([("release_job", RELEASES[0])], instance, resources, echo=lambda *_: None)
    store = ArtefactStore(tmp_path / "art")
    rows = manifest_rows(store, "release_annotations", RELEASES[0])
    assert rows == {("P00005|GO:0000003|IDA|20150301", "gaf_row", "after_cutoff"): 1}
    meta = store.read_meta("release_annotations", RELEASES[0])
    assert meta["removed_after_cutoff"] == meta["rows_after_cutoff_dropped"] == 1
    assert instance_metadata(instance, "release_annotations", RELEASES[0])["removed_after_cutoff"] == 1


@pytest.mark.slow
def test_demo_graph_manifests_agree_with_the_instance(demo_graph):
    """The instance audit on the materialised demo archive (shared session fixture)."""
    store = demo_graph.store()
    assert assert_manifests_agree(store, demo_graph.instance) >= len(REMOVAL_ASSETS)
