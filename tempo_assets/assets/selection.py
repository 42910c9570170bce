"""Per-window VALID selection: the whole grid scored on growth (t-1, t0], TRAIN read at t-1 only."""

import dagster as dg

from tempo_assets.assets.common import (
    binding_metadata, candidate_source, growth_between, method_predictions, removal_metadata, role_in, score_methods,
    sequence_map,
)
from tempo_assets.assets.ia import ia_series
from tempo_assets.core.removals import RemovalLog, log_evaluation, log_growth
from tempo_assets.io_managers import ArtefactSet
from tempo_assets.partitions import WINDOWS, parse_window_key
from tempo_assets.resources import ArchiveResource, ArtefactStoreResource, GridResource


@dg.asset(
    partitions_def=WINDOWS, group_name="selection",
    ins={"knn_corpus": role_in("train"), "reranker_labels": role_in("train"), "ia_weights": role_in("train"),
         "embeddings": role_in("train"), "release_annotations": role_in("valid"), "ontology": role_in("valid"),
         "sequences": role_in("valid")},
)
def valid_selection(
    context: dg.AssetExecutionContext, archive: ArchiveResource, grid: GridResource,
    artefact_store: ArtefactStoreResource, knn_corpus: ArtefactSet, reranker_labels: ArtefactSet, ia_weights: ArtefactSet,
    embeddings: ArtefactSet, release_annotations: ArtefactSet, ontology: ArtefactSet, sequences: ArtefactSet,
) -> dg.Output:
    """One row per (config, aspect, mode) of the grid scored on VALID (t-1, t0]; TRAIN read at t-1 only."""
    from tempo_assets.core.evaluation import EvalOntology
    from tempo_assets.core.selection import CandidateSource, select_recipe

    window = parse_window_key(context.partition_key)
    train_at = window.t_minus_1
    corpus, labels, ia, emb = (s.get(train_at) for s in (knn_corpus, reranker_labels, ia_weights, embeddings))
    ann_old, ann_new = release_annotations.get(train_at), release_annotations.get(window.t0)
    onto_old, onto_new = ontology.get(train_at), ontology.get(window.t0)
    seq_old, seq_new = sequences.get(train_at), sequences.get(window.t0)
    growth = growth_between(ann_old.value, ann_new.value, onto_new.value,
                            sequence_map(seq_old.value, emb.value["ids"]), sequence_map(seq_new.value))
    ia_bits = ia_series(ia.value)
    valid = candidate_source(corpus.value, emb.value, growth.targets["protein"].unique(), onto_old.value,
                             max(grid.ks), growth=growth)
    embedder_id = corpus.value["embedder_id"]
    eval_ontology = EvalOntology.from_obo(archive.reader(window.t0).obo_path(window.t0), ia=ia_bits)
    train = CandidateSource(**labels.value)
    grid_frame, recipe = select_recipe(
        grid.selection_grid(), train_sets={embedder_id: train},
        valid_sets={embedder_id: valid}, eval_ontology=eval_ontology, window=window.key)
    # the recipe (refit on TRAIN labels) beside plain KNN and the naive baseline, on the same VALID targets
    methods = method_predictions(recipe, valid, train, growth.targets, k_plain=min(grid.ks))
    summary, _ = score_methods(eval_ontology, growth, methods)
    removals = RemovalLog()
    log_growth(removals, growth)
    log_evaluation(removals, growth, methods)
    read = [corpus, labels, ia, emb, ann_old, ann_new, onto_old, onto_new, seq_old, seq_new]
    return dg.Output({"grid": grid_frame, "recipe": recipe, "valid_counts": growth.counts(), "valid_summary": summary},
                     metadata=binding_metadata(archive.cutoff_of(window.t0), artefacts=read, window=window.key,
                                               window_role="valid", grid_rows=len(grid_frame),
                                               valid_targets=len(growth.targets),
                                               excluded_by_sequence=len(growth.removed),
                                               **removal_metadata(context, artefact_store, removals)))
