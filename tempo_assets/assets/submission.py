"""Per-cutoff CAFA submission: the latest recipe frozen at or before the cutoff, applied at the cutoff."""

import tempfile
from pathlib import Path

import dagster as dg

from tempo_assets.assets.common import binding_metadata, removal_metadata
from tempo_assets.assets.scoring import verify_recipe
from tempo_assets.core.artefacts import Artefact, WindowArtefactSet
from tempo_assets.core.removals import RemovalLog, log_submission
from tempo_assets.core.workflow import candidate_source, latest_recipe_key
from tempo_assets.partitions import CUTOFFS, parse_window_key, plan_partitions
from tempo_assets.resources import ArchiveResource, ArtefactStoreResource, GridResource


@dg.asset(partitions_def=CUTOFFS, group_name="submission",
          ins={"frozen_recipe": dg.AssetIn(partition_mapping=dg.AllPartitionMapping())})
def submission(
    context: dg.AssetExecutionContext, archive: ArchiveResource, grid: GridResource,
    artefact_store: ArtefactStoreResource, frozen_recipe: WindowArtefactSet, knn_corpus: Artefact,
    reranker_labels: Artefact, embeddings: Artefact, ontology: Artefact, sequences: Artefact,
    release_annotations: Artefact,
) -> dg.Output:
    """One CAFA row per (protein, term) predicted at the cutoff from inputs dated <= cutoff."""
    from tempo_assets.core.selection import apply_recipe
    from tempo_assets.core.submission import write_cafa_submission

    cutoff = context.partition_key
    # the archive's windows now, not every key ever registered: a superseded window's recipe never applies
    current = set(plan_partitions(archive.archive()).windows)
    frozen_windows = [parse_window_key(w) for w in frozen_recipe.available() if w in current]
    key = latest_recipe_key(frozen_windows, archive.release_ids(), cutoff)
    frozen = frozen_recipe.get(key)  # refuses a recipe read past the cutoff
    recipe = verify_recipe(frozen)
    source = candidate_source(knn_corpus.value, embeddings.value, embeddings.value["ids"], ontology.value,
                              max(grid.ks), sequences=sequences.value, annotations=release_annotations.value)
    # the same leave-one-out IA counts the recipe's rerankers were trained on
    predictions = apply_recipe(recipe, source.neighbours, source.corpus_annotations, reranker_labels.value,
                               ia=source.ia, term_depth=source.term_depth, hits=source.hits, nonexp=source.nonexp,
                               ontology=ontology.value)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "submission.tsv"
        stats = write_cafa_submission(predictions, path, author="Tempo", model=1, keywords=["k-nearest neighbors"])
        text = path.read_text(encoding="utf-8")
    removals = RemovalLog()
    log_submission(removals, predictions)
    read = [knn_corpus, reranker_labels, embeddings, ontology, sequences, release_annotations, frozen]
    return dg.Output(text, metadata=binding_metadata(
        archive.cutoff_of(cutoff), artefacts=read, recipe_window=key, recipe_hash=frozen.meta["recipe_hash"],
        rows=int(stats.get("rows", 0)) if isinstance(stats, dict) else 0, targets=len(embeddings.value["ids"]),
        **removal_metadata(context, artefact_store, removals)))
