"""Per-cutoff CAFA submission: the latest recipe frozen at or before the cutoff, applied at the cutoff."""

import tempfile
from pathlib import Path

import dagster as dg

from tempo_assets.assets.common import binding_metadata, removal_metadata
from tempo_assets.assets.scoring import verify_recipe
from tempo_assets.core.storage.artefacts import Artefact, WindowArtefactSet
from tempo_assets.core.base.errors import TempoInputError
from tempo_assets.core.audits.removals import RemovalLog, log_submission
from tempo_assets.core.pipeline.workflow import CandidateRelease, Queries, candidate_source, latest_recipe_key
from tempo_assets.partitions import CUTOFFS, parse_window_key, plan_partitions
from tempo_assets.resources import ArchiveResource, ArtefactStoreResource, GridResource


@dg.asset(code_version="1", partitions_def=CUTOFFS, group_name="submission",
          ins={"frozen_recipe": dg.AssetIn(partition_mapping=dg.AllPartitionMapping())})
def submission(
    context: dg.AssetExecutionContext, archive: ArchiveResource, grid: GridResource,
    artefact_store: ArtefactStoreResource, frozen_recipe: WindowArtefactSet, knn_corpus: Artefact,
    reranker_labels: Artefact, embeddings: Artefact, ontology: Artefact, sequences: Artefact,
    release_annotations: Artefact,
) -> dg.Output:
    """One CAFA row per (protein, term) predicted at the cutoff from inputs dated <= cutoff."""
    from tempo_assets.core.methods.submission import write_cafa_submission
    from tempo_assets.core.pipeline.workflow import recipe_chunks

    cutoff = context.partition_key
    # the archive's windows now, not every key ever registered: a superseded window's recipe never applies
    current = plan_partitions(archive.archive()).windows
    frozen_windows = [parse_window_key(w) for w in frozen_recipe.available() if w in set(current)]
    try:
        key = latest_recipe_key(frozen_windows, archive.release_ids(), cutoff, map(parse_window_key, current))
    except TempoInputError as exc:  # said plainly in the run (no stack trace to read through)
        raise dg.Failure(description=str(exc), allow_retries=False) from None
    frozen = frozen_recipe.get(key)  # refuses a recipe read past the cutoff
    recipe = verify_recipe(frozen)
    release = CandidateRelease(knn_corpus.value, ontology.value, sequences.value, release_annotations.value)
    source = candidate_source(release, Queries(embeddings.value), embeddings.value["ids"], max(grid.ks))
    removals = RemovalLog()

    def logged(chunks):  # what each chunk leaves out of the file, as it is written
        for chunk in chunks:
            log_submission(removals, chunk)
            yield chunk

    # the same leave-one-out IA counts the recipe's rerankers were trained on; the rerankers refit on
    # this cutoff's labels (a CAFA submission has no threshold), the proteins scored a chunk at a time
    chunks = recipe_chunks(recipe, source, reranker_labels.value, embeddings.value["ids"], ontology=ontology.value)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "submission.tsv"
        stats = write_cafa_submission(logged(chunks), path, author="Tempo", model=1, keywords=["k-nearest neighbors"])
        text = path.read_text(encoding="utf-8")
    read = [knn_corpus, reranker_labels, embeddings, ontology, sequences, release_annotations, frozen]
    return dg.Output(text, metadata=binding_metadata(
        archive.cutoff_of(cutoff), artefacts=read, recipe_window=key, recipe_hash=frozen.meta["recipe_hash"],
        rows=int(stats.get("rows", 0)) if isinstance(stats, dict) else 0, targets=len(embeddings.value["ids"]),
        **removal_metadata(context, artefact_store, removals)))
