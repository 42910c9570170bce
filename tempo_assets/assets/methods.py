"""Methods stage: third-party methods (the cutoff bundle they may read, their fenced predictions per
cutoff) and the per-cutoff CAFA submission (the latest recipe frozen at or before the cutoff, applied at
the cutoff)."""

import warnings
from pathlib import Path

import dagster as dg

from tempo_assets.assets.common import binding_metadata, removal_metadata, verify_recipe
from tempo_assets.core.audits.removals import RemovalLog
from tempo_assets.core.base.errors import TempoInputError
from tempo_assets.core.inputs.ontology import parse_obo
from tempo_assets.core.labels.ia import ia_series
from tempo_assets.core.methods.bundle import (
    BundleContent, prune_bundles, read_bundle_targets, verify_bundle, write_cutoff_bundle,
)
from tempo_assets.core.methods.fence import FenceLimits
from tempo_assets.core.methods.registry import load_registry, refuse_exposing
from tempo_assets.core.methods.run import MethodCall, run_method
from tempo_assets.core.pipeline.catalog import method_records  # noqa: F401  (docs/methods.md names it here)
from tempo_assets.core.pipeline.recipe_scoring import submission_text
from tempo_assets.core.pipeline.workflow import CandidateRelease, latest_recipe_key
from tempo_assets.core.storage.artefacts import Artefact, WindowArtefactSet
from tempo_assets.partitions import CUTOFF_METHODS, CUTOFFS, parse_window_key, plan_partitions
from tempo_assets.resources import (
    ArchiveResource, ArtefactStoreResource, GridResource, default_dagster_home,
)

# the cutoff dimension of method_predictions reads the bundle of its cutoff; the mapping is beta, used deliberately
warnings.filterwarnings("ignore", message=".*MultiToSingleDimensionPartitionMapping.*", category=dg.BetaWarning)


class MethodFenceResource(dg.ConfigurableResource):
    """Limits shared by every fenced run (time and memory are per method, in its registration)."""

    output_limit_mb: int = 1024
    tmp_limit_mb: int = 1024
    threads: int = 2
    max_invalid_fraction: float = 0.5

    def limits(self):
        return FenceLimits(output_bytes=self.output_limit_mb << 20, tmp_bytes=self.tmp_limit_mb << 20,
                           threads=self.threads)


@dg.asset(code_version="1", partitions_def=CUTOFFS, group_name="methods")
def method_bundle(context: dg.AssetExecutionContext, archive: ArchiveResource, artefact_store: ArtefactStoreResource,
                  release_annotations: Artefact, sequences: Artefact, ia_weights: Artefact) -> dg.Output:
    """One folder per cutoff: targets, sequences, annotations, GO and IA as of the cutoff, all a method may read."""
    cutoff = context.partition_key
    reader = archive.reader(cutoff)
    store = artefact_store.store()
    seqs = dict(zip(sequences.value["protein"], sequences.value["sequence"]))
    annotations = release_annotations.value
    folder = store.folder("method_bundle", cutoff)
    manifest = write_cutoff_bundle(folder, archive.cutoff_of(cutoff), BundleContent(
        targets=seqs, sequences=seqs,
        experimental=annotations["experimental_cleaned"], non_experimental=annotations["non_experimental_cleaned"],
        obo_path=reader.obo_path(cutoff), ia=ia_series(ia_weights.value)))
    # keep the folder the current sidecar names until the new sidecar replaces it
    previous = store.open("method_bundle", cutoff).value["folder"] if store.exists("method_bundle", cutoff) else None
    prune_bundles(folder, {manifest["folder"], previous})
    return dg.Output(manifest, metadata=binding_metadata(
        archive.cutoff_of(cutoff), reader=reader, artefacts=[release_annotations, sequences, ia_weights],
        bundle=str(folder / manifest["folder"]), **manifest["counts"]))


def hidden_paths(archive_root: str, artefacts_root: str) -> dict:
    """What the fence hides, so a method folder (mounted whole) may not contain it."""
    return {"archive": Path(archive_root), "artefact store": Path(artefacts_root),
            "DAGSTER_HOME": Path(default_dagster_home()), "home directory": Path.home()}


def bundle_folder(store, cutoff: str, bundle: Artefact):
    """The verified folder of a stored ``method_bundle`` (every file's sha256 checked)."""
    return verify_bundle(store.folder("method_bundle", cutoff) / bundle.value["folder"], bundle.value)


@dg.asset(code_version="1", partitions_def=CUTOFF_METHODS, group_name="methods",
          ins={"method_bundle": dg.AssetIn(partition_mapping=dg.MultiToSingleDimensionPartitionMapping(
              partition_dimension_name="cutoff"))})
def method_predictions(context: dg.AssetExecutionContext, archive: ArchiveResource,
                       artefact_store: ArtefactStoreResource, method_fence: MethodFenceResource,
                       method_bundle: Artefact) -> dg.Output:
    """One row per (target, term) a registered method predicted at the cutoff inside the fence, or its failure."""
    keys = context.partition_key.keys_by_dimension
    cutoff, key = keys["cutoff"], keys["method"]
    spec = load_registry(archive.root).get(key)
    if spec.kind == "command":  # methods.yaml may have been edited by hand since `tempo method add`
        refuse_exposing(spec.dir, hidden_paths(archive.root, artefact_store.root))
    folder = bundle_folder(artefact_store.store(), cutoff, method_bundle)
    context.log.info(f"{key} at {cutoff}: bundle {folder}")
    call = MethodCall(folder, cutoff, archive.cutoff_of(cutoff), read_bundle_targets(folder),
                      parse_obo(folder / "go.obo"))
    outcome = run_method(spec, call, method_fence.limits(),
                         on_line=lambda stream, line: context.log.info(f"[{key} {stream}] {line}"),
                         max_invalid_fraction=method_fence.max_invalid_fraction)
    (context.log.info if outcome.status == "ok" else context.log.warning)(
        f"{key} at {cutoff}: {outcome.status} {outcome.reason}".rstrip())
    removals = RemovalLog()
    if outcome.check is not None:
        outcome.check.log_into(removals)
    return dg.Output(outcome.value(), metadata=binding_metadata(
        archive.cutoff_of(cutoff), artefacts=[method_bundle], method=key, method_kind=spec.kind,
        status=outcome.status, reason=outcome.reason or "none", predictions=len(outcome.predictions),
        proteins=int(outcome.predictions["protein"].nunique()), seconds=round(outcome.seconds, 2),
        trained_until=spec.training_bound.isoformat() if spec.training_bound else "undeclared",
        **{k: v for k, v in outcome.provenance.items() if v is not None},  # where its code lived: sidecar only
        **removal_metadata(context, artefact_store, removals)))


@dg.asset(code_version="1", partitions_def=CUTOFFS, group_name="submission",
          ins={"frozen_recipe": dg.AssetIn(partition_mapping=dg.AllPartitionMapping())})
def submission(
    context: dg.AssetExecutionContext, archive: ArchiveResource, grid: GridResource,
    artefact_store: ArtefactStoreResource, frozen_recipe: WindowArtefactSet, knn_corpus: Artefact,
    reranker_labels: Artefact, embeddings: Artefact, ontology: Artefact, sequences: Artefact,
    release_annotations: Artefact,
) -> dg.Output:
    """One CAFA row per (protein, term) predicted at the cutoff from inputs dated <= cutoff."""
    cutoff = context.partition_key
    # the archive's windows now, not every key ever registered: a superseded window's recipe never applies
    current = plan_partitions(archive.archive()).windows
    frozen_windows = [parse_window_key(w) for w in frozen_recipe.available() if w in set(current)]
    try:
        key = latest_recipe_key(frozen_windows, archive.release_ids(), cutoff, map(parse_window_key, current))
    except TempoInputError as exc:  # said plainly in the run (no stack trace to read through)
        raise dg.Failure(description=str(exc), allow_retries=False) from None
    frozen = frozen_recipe.get(key)  # refuses a recipe read past the cutoff
    release = CandidateRelease(knn_corpus.value, ontology.value, sequences.value, release_annotations.value)
    written = submission_text(verify_recipe(frozen), release, embeddings.value, reranker_labels.value, grid.ks)
    read = [knn_corpus, reranker_labels, embeddings, ontology, sequences, release_annotations, frozen]
    return dg.Output(written.text, metadata=binding_metadata(
        archive.cutoff_of(cutoff), artefacts=read, recipe_window=key, recipe_hash=frozen.meta["recipe_hash"],
        rows=written.rows, targets=len(embeddings.value["ids"]),
        **removal_metadata(context, artefact_store, written.removals)))


method_bundle_job = dg.define_asset_job("method_bundle_job", selection=["method_bundle"])
method_job = dg.define_asset_job("method_job", selection=["method_predictions"])
METHOD_ASSETS = [method_bundle, method_predictions]
METHOD_JOBS = [method_bundle_job, method_job]
