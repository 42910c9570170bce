"""Per-cutoff CAFA submission: the latest recipe frozen at or before the cutoff, applied at the cutoff."""

import tempfile
from pathlib import Path

import dagster as dg

from tempo_assets.assets.common import binding_metadata, candidate_source, removal_metadata
from tempo_assets.assets.scoring import verify_recipe
from tempo_assets.core.errors import TempoInputError
from tempo_assets.core.removals import RemovalLog, log_submission
from tempo_assets.io_managers import Artefact
from tempo_assets.core.errors import CutoffViolation
from tempo_assets.partitions import CUTOFFS, parse_window_key, plan_partitions
from tempo_assets.resources import ArchiveResource, ArtefactStoreResource, GridResource, open_archive


def latest_recipe_key(store, release_ids: list[str], windows: list[str], cutoff: str) -> str:
    """The latest window (by t0, then t1) whose t0 <= cutoff and whose recipe is frozen."""
    order = {r: i for i, r in enumerate(release_ids)}
    usable = [parse_window_key(w) for w in windows]
    usable = [w for w in usable if order.get(w.t0, 1 << 30) <= order[cutoff] and store.exists("frozen_recipe", w.key)]
    if not usable:
        raise TempoInputError(f"no frozen recipe on a window with t0 <= {cutoff}: materialise frozen_recipe first")
    return max(usable, key=lambda w: (order[w.t0], order[w.t1])).key


@dg.asset(partitions_def=CUTOFFS, group_name="submission")
def submission(
    context: dg.AssetExecutionContext, archive: ArchiveResource, grid: GridResource,
    artefact_store: ArtefactStoreResource, knn_corpus: Artefact, reranker_labels: Artefact,
    embeddings: Artefact, ontology: Artefact,
) -> dg.Output:
    """One CAFA row per (protein, term) predicted at the cutoff from inputs dated <= cutoff."""
    from tempo_assets.core.selection import CandidateSource, apply_recipe
    from tempo_assets.core.submission import write_cafa_submission

    cutoff = context.partition_key
    store = artefact_store.store()
    # the archive's windows now, not every key ever registered: a superseded window's recipe never applies
    key = latest_recipe_key(store, archive.release_ids(), plan_partitions(open_archive(archive.root)).windows, cutoff)
    frozen = store.open("frozen_recipe", key)
    recipe = verify_recipe(frozen)
    if frozen.max_source_date > archive.cutoff_of(cutoff):
        raise CutoffViolation(f"frozen_recipe[{key}]", frozen.max_source_date, archive.cutoff_of(cutoff), what="recipe")
    source = candidate_source(knn_corpus.value, embeddings.value, embeddings.value["ids"], ontology.value,
                              max(grid.ks))
    # the same leave-one-out IA counts the recipe's rerankers were trained on
    predictions = apply_recipe(recipe, source.neighbours, source.corpus_annotations,
                               CandidateSource(**reranker_labels.value), ia=source.ia, term_depth=source.term_depth)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "submission.tsv"
        stats = write_cafa_submission(predictions, path, author="Tempo", model=1, keywords=["k-nearest neighbors"])
        text = path.read_text(encoding="utf-8")
    removals = RemovalLog()
    log_submission(removals, predictions)
    read = [knn_corpus, reranker_labels, embeddings, ontology, frozen]
    return dg.Output(text, metadata=binding_metadata(
        archive.cutoff_of(cutoff), artefacts=read, recipe_window=key, recipe_hash=frozen.meta["recipe_hash"],
        rows=int(stats.get("rows", 0)) if isinstance(stats, dict) else 0, targets=len(embeddings.value["ids"]),
        **removal_metadata(context, artefact_store, removals)))
