"""Recipe stage, per window: the whole grid scored on VALID (t-1, t0] with TRAIN read at t-1 only, and
the chosen recipe frozen (content-hashed, immutable once written)."""

import dagster as dg

from tempo_assets.assets.common import (
    binding_metadata, eval_ontology, growth_removals, removal_metadata, rerankers_metadata, role_in,
)
from tempo_assets.core.pipeline.workflow import CandidateRelease, ValidScoring, select_on_valid
from tempo_assets.core.recipe.selection import recipe_hash
from tempo_assets.core.storage.artefact_types import FrozenRecipe
from tempo_assets.core.storage.artefacts import Artefact, ArtefactSet
from tempo_assets.partitions import WINDOWS, parse_window_key
from tempo_assets.resources import ArchiveResource, ArtefactStoreResource, GridResource


@dg.asset(
    code_version="1",
    partitions_def=WINDOWS, group_name="selection",
    ins={"valid_evaluation_set": role_in("valid", dg.IdentityPartitionMapping()), "knn_corpus": role_in("train"),
         "reranker_labels": role_in("train"), "ia_weights": role_in("train"), "embeddings": role_in("train"),
         # the ontology at t-1 (the candidates') and, under lafa, at t0 (terms of interest in both)
         "ontology": role_in("valid"), "sequences": role_in("train"), "release_annotations": role_in("train")},
)
def valid_selection(
    context: dg.AssetExecutionContext, archive: ArchiveResource, grid: GridResource,
    artefact_store: ArtefactStoreResource, valid_evaluation_set: Artefact, knn_corpus: ArtefactSet,
    reranker_labels: ArtefactSet, ia_weights: ArtefactSet, embeddings: ArtefactSet, ontology: ArtefactSet,
    sequences: ArtefactSet, release_annotations: ArtefactSet,
) -> dg.Output:
    """One row per (config, aspect, mode) of the grid scored on VALID (t-1, t0]; TRAIN read at t-1 only."""
    window = parse_window_key(context.partition_key)
    old, new = window.growth_span("valid")
    corpus, ia, emb, onto_old, seq_old, ann_old = (s.get(old) for s in (
        knn_corpus, ia_weights, embeddings, ontology, sequences, release_annotations))
    labels = reranker_labels.get(window.recipe_labels)  # TRAIN: the rerankers test_score reads too
    growth = valid_evaluation_set.value.growth  # the warehouse's VALID set (window_role 'valid')
    # the grid is scored under the grid's profile (lafa by default), the one test_score scores the
    # frozen recipe under; benchmark's other profile fixes the recipe's threshold on VALID under its
    # conventions by the rule every method follows (core.pipeline.workflow.valid_taus)
    lafa = grid.profile() == "lafa"
    onto_new = ontology.get(new) if lafa else None  # LAFA's terms of interest: live at t-1 and at t0
    release = CandidateRelease(corpus.value, onto_old.value, seq_old.value, ann_old.value)
    scoring = ValidScoring(eval_ontology(archive, new, ia.value, orphans=not lafa), lafa=lafa,
                           ontology_t0=None if onto_new is None else onto_new.value)
    selection, methods = select_on_valid(grid.selection_grid(), window, release, labels.value, emb.value, growth,
                                         scoring)
    read = [valid_evaluation_set, corpus, labels, ia, emb, onto_old, seq_old, ann_old] + ([onto_new] if onto_new else [])
    return dg.Output(selection, metadata=binding_metadata(
        archive.cutoff_of(new), artefacts=read, window=window.key, window_role="valid",
        profile=selection.recipe["profile"], grid_rows=len(selection.grid), grid=dg.MetadataValue.json(grid.selection_grid()),
        grid_table=dg.MetadataValue.md(selection.grid.to_markdown(index=False)), valid_targets=len(growth.targets),
        excluded_by_sequence=len(growth.removed), **rerankers_metadata(archive, selection.rerankers),
        **removal_metadata(context, artefact_store, growth_removals(growth, methods))))


@dg.asset(
    code_version="1",
    partitions_def=WINDOWS, group_name="recipe", metadata={"tempo/immutable_key": "recipe_hash"},
    ins={"valid_selection": role_in("valid", dg.IdentityPartitionMapping())},
)
def frozen_recipe(
    context: dg.AssetExecutionContext, archive: ArchiveResource, valid_selection: Artefact
) -> dg.Output:
    """One recipe per window, chosen on VALID (t-1, t0] and frozen (sha256 of its canonical JSON), with its
    rerankers (fitted on the TRAIN labels at t-1, LightGBM's model text) frozen with it."""
    window = parse_window_key(context.partition_key)
    recipe, rerankers = valid_selection.value["recipe"], valid_selection.value.get("rerankers")
    digest = recipe_hash(recipe)
    frozen = FrozenRecipe(recipe=recipe, recipe_hash=digest, window=window.key, rerankers=rerankers)
    return dg.Output(frozen, metadata=binding_metadata(
        archive.cutoff_of(window.t0), artefacts=[valid_selection], window=window.key, window_role="valid",
        recipe_hash=digest, **rerankers_metadata(archive, rerankers)))


