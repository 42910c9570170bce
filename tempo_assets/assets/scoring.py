"""Per-window TEST score: the frozen recipe refit at t0, scored once on growth (t0, t1]."""

from datetime import datetime, timezone

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


def refuse_second_score(context: dg.AssetExecutionContext, store: ArtefactStoreResource, window: str) -> None:
    """TEST is scored exactly once: a stored score or a recorded materialisation refuses a rerun."""
    previous = context.instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=context.asset_key, asset_partitions=[window]), limit=1).records
    if store.store().exists("test_score", window) or previous:
        raise TempoInputError(
            f"test_score[{window}] was already scored; TEST is scored exactly once with the frozen "
            "recipe (PROTOCOL.md). Nothing was read or written. Report the stored score instead.")


@dg.asset(
    partitions_def=WINDOWS, group_name="scoring",
    ins={"frozen_recipe": role_in("valid", dg.IdentityPartitionMapping()), "knn_corpus": role_in("refit"),
         "reranker_labels": role_in("refit"), "ia_weights": role_in("refit"), "embeddings": role_in("refit"),
         "release_annotations": role_in("test"), "ontology": role_in("test"), "sequences": role_in("test")},
)
def test_score(
    context: dg.AssetExecutionContext, archive: ArchiveResource, grid: GridResource,
    artefact_store: ArtefactStoreResource, frozen_recipe: Artefact, knn_corpus: ArtefactSet,
    reranker_labels: ArtefactSet, ia_weights: ArtefactSet, embeddings: ArtefactSet,
    release_annotations: ArtefactSet, ontology: ArtefactSet, sequences: ArtefactSet,
) -> dg.Output:
    """One row per (method, mode, aspect) on TEST (t0, t1]: the frozen recipe refit at t0, scored once."""
    from tempo_assets.core.evaluation import EvalOntology
    from tempo_assets.core.selection import CandidateSource

    window = parse_window_key(context.partition_key)
    refuse_second_score(context, artefact_store, window.key)
    recipe = verify_recipe(frozen_recipe)
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
    return dg.Output(
        {"summary": summary, "curves": curves, "counts": growth.counts(),
         "excluded_by_sequence": len(growth.removed)},
        metadata=binding_metadata(
            archive.cutoff_of(window.t1), artefacts=read, window=window.key, window_role="test",
            recipe_hash=frozen_recipe.meta["recipe_hash"], recipe_frozen_at=frozen_recipe.meta["written_at"],
            test_read_at=test_read_at, summary=dg.MetadataValue.md(summary.drop(columns=["truth_sha256"]).round(4).to_markdown(index=False)),
            **scalar_metadata(fmax), **removal_metadata(context, artefact_store, removals)))
