"""Per-window TEST score: the frozen recipe refit at t0, scored once on growth (t0, t1]."""

from datetime import datetime, timezone
from typing import Iterator

import dagster as dg

from tempo_assets.assets.common import (
    binding_metadata, candidate_source, growth_between, method_predictions, recipe_taus, removal_metadata,
    role_in, scalar_metadata, score_methods, sequence_map,
)
from tempo_assets.assets.ia import ia_series
from tempo_assets.core.errors import TempoInputError
from tempo_assets.core.removals import RemovalLog, log_evaluation, log_growth
from tempo_assets.io_managers import Artefact, ArtefactSet
from tempo_assets.partitions import WINDOWS, parse_window_key
from tempo_assets.resources import ArchiveResource, ArtefactStoreResource, GridResource


def verify_recipe(frozen: Artefact) -> dict:
    """The frozen recipe, after checking its content still hashes to what was frozen."""
    from tempo_assets.core.selection import recipe_hash

    value = frozen.value
    actual = recipe_hash(value["recipe"])
    if actual != value["recipe_hash"] or actual != frozen.meta.get("recipe_hash"):
        raise TempoInputError(f"frozen recipe of {frozen.meta.get('partition')} hashes to {actual}, "
                              f"not the frozen {frozen.meta.get('recipe_hash')}: refusing to score TEST")
    return value["recipe"]


TEST_POOL = "test_score"
REFUSED_TAG = "tempo/test_score_refused"


def already_scored(context: dg.AssetExecutionContext, store: ArtefactStoreResource, window: str) -> str | None:
    """Why TEST of ``window`` must not be scored again: a stored score or a recorded materialisation."""
    previous = context.instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=context.asset_key, asset_partitions=[window]), limit=1).records
    if store.store().exists("test_score", window) or previous:
        return (f"test_score[{window}] was already scored; TEST is scored exactly once with the frozen "
                "recipe (PROTOCOL.md). Nothing was read or written. Report the stored score instead.")
    return None


def claim_test(context: dg.AssetExecutionContext, store: ArtefactStoreResource, window: str) -> str | None:
    """Take the window's TEST claim (``core.test_claims``); the reason it is refused, or ``None``.

    A claim store that cannot be written raises ``ClaimUnavailable``: the run fails, unscored.
    """
    from tempo_assets.core.test_claims import ClaimRefused, ClaimStore

    refusal = already_scored(context, store, window)
    if refusal is not None:
        return refusal
    try:
        claim = ClaimStore.beside(store.root).claim(window, context.run.run_id)
    except ClaimRefused as exc:
        return str(exc)
    # the one TEST read of this window, recorded before anything of TEST is read
    context.log_event(dg.AssetObservation(asset_key=context.asset_key, partition=window, metadata={
        "tempo/test_read": claim.run_id, "claimed_at": claim.claimed_at, "host": claim.host, "pid": claim.pid}))
    return None


def refuse_test(context: dg.AssetExecutionContext, window: str, reason: str) -> None:
    """Skip the output (the stored score stays the only one) and say why, in the log, events and tags."""
    context.log.warning(f"test_score[{window}] not scored, TEST not read: {reason}")
    context.log_event(dg.AssetObservation(asset_key=context.asset_key, partition=window,
                                          metadata={"tempo/test_score_refused": reason}))
    context.instance.add_run_tags(context.run.run_id, {REFUSED_TAG: window})


def test_score_refusal(instance: dg.DagsterInstance, run_id: str) -> str | None:
    """Why run ``run_id`` skipped ``test_score`` (``None`` when it did not)."""
    run = instance.get_run_by_id(run_id)
    if run is None or REFUSED_TAG not in run.tags:
        return None
    for entry in instance.all_logs(run_id, of_type=dg.DagsterEventType.ASSET_OBSERVATION):
        metadata = entry.dagster_event.event_specific_data.asset_observation.metadata
        if "tempo/test_score_refused" in metadata:
            return str(metadata["tempo/test_score_refused"].value)
    return f"test_score[{run.tags[REFUSED_TAG]}] refused"


@dg.asset(
    partitions_def=WINDOWS, group_name="scoring", pool=TEST_POOL, output_required=False,
    ins={"frozen_recipe": role_in("valid", dg.IdentityPartitionMapping()), "knn_corpus": role_in("refit"),
         "reranker_labels": role_in("refit"), "ia_weights": role_in("refit"), "embeddings": role_in("refit"),
         "release_annotations": role_in("test"), "ontology": role_in("test"), "sequences": role_in("test")},
)
def test_score(
    context: dg.AssetExecutionContext, archive: ArchiveResource, grid: GridResource,
    artefact_store: ArtefactStoreResource, frozen_recipe: Artefact, knn_corpus: ArtefactSet,
    reranker_labels: ArtefactSet, ia_weights: ArtefactSet, embeddings: ArtefactSet,
    release_annotations: ArtefactSet, ontology: ArtefactSet, sequences: ArtefactSet,
) -> Iterator[dg.Output]:
    """One row per (method, mode, aspect) on TEST (t0, t1]: the frozen recipe refit at t0, scored once.

    Once the recipe is verified, the window's TEST claim is taken; a refused claim (scored,
    claimed or burned) yields no output, so the run succeeds and the stored score stays the
    window's only materialisation.
    """
    from tempo_assets.core.evaluation import EvalOntology
    from tempo_assets.core.selection import CandidateSource

    window = parse_window_key(context.partition_key)
    recipe = verify_recipe(frozen_recipe)
    refusal = claim_test(context, artefact_store, window.key)
    if refusal is not None:
        refuse_test(context, window.key, refusal)
        return
    t0 = window.t0
    corpus, labels, ia, emb = (s.get(t0) for s in (knn_corpus, reranker_labels, ia_weights, embeddings))
    ann_t0, onto_t0, seq_t0 = release_annotations.get(t0), ontology.get(t0), sequences.get(t0)
    test_read_at = datetime.now(timezone.utc).isoformat(timespec="microseconds")
    # TEST ground truth is read only from here on, after the recipe was verified
    ann_t1, onto_t1, seq_t1 = release_annotations.get(window.t1), ontology.get(window.t1), sequences.get(window.t1)
    growth = growth_between(ann_t0.value, ann_t1.value, onto_t1.value,
                            sequence_map(seq_t0.value, emb.value["ids"]), sequence_map(seq_t1.value))
    ia_bits = ia_series(ia.value)
    source = candidate_source(corpus.value, emb.value, growth.targets["protein"].unique(), onto_t0.value,
                              max(grid.ks))
    methods = method_predictions(recipe, source, CandidateSource(**labels.value), growth.targets,
                                 k_plain=min(grid.ks))
    eval_ontology = EvalOntology.from_obo(archive.reader(window.t1).obo_path(window.t1), ia=ia_bits)
    summary, curves = score_methods(eval_ontology, growth, methods, n_boot=grid.bootstrap_samples, seed=grid.seed,
                                    taus={"recipe": recipe_taus(recipe)})
    recipe_rows = summary[summary["method"] == "recipe"]
    removals = RemovalLog()
    log_growth(removals, growth)
    log_evaluation(removals, growth, methods)
    fmax = {f"fmax_{r.mode}_{r.aspect}": float(r.fmax) for r in recipe_rows.itertuples()}
    if "f_at_tau" in recipe_rows:  # F at the threshold frozen on VALID, beside the curve's best
        fmax.update({f"f_at_tau_{r.mode}_{r.aspect}": float(r.f_at_tau) for r in recipe_rows.itertuples()})
    read = [frozen_recipe, corpus, labels, ia, emb, ann_t0, onto_t0, seq_t0, ann_t1, onto_t1, seq_t1]
    yield dg.Output(
        {"summary": summary, "curves": curves, "counts": growth.counts(),
         "excluded_by_sequence": len(growth.removed)},
        metadata=binding_metadata(
            archive.cutoff_of(window.t1), artefacts=read, window=window.key, window_role="test",
            recipe_hash=frozen_recipe.meta["recipe_hash"], recipe_frozen_at=frozen_recipe.meta["written_at"],
            test_read_at=test_read_at, summary=dg.MetadataValue.md(summary.drop(columns=["truth_sha256"]).round(4).to_markdown(index=False)),
            **scalar_metadata(fmax), **removal_metadata(context, artefact_store, removals)))
