"""Per-cutoff KNN corpus: proteins with an embedding and experimental annotations at the cutoff."""

import dagster as dg

from tempo_assets.assets.common import binding_metadata, build_corpus
from tempo_assets.io_managers import Artefact
from tempo_assets.partitions import CUTOFFS
from tempo_assets.resources import ArchiveResource


@dg.asset(partitions_def=CUTOFFS, group_name="corpus")
def knn_corpus(
    context: dg.AssetExecutionContext, archive: ArchiveResource,
    embeddings: Artefact, release_annotations: Artefact,
) -> dg.Output:
    """One row per protein with a sequence and an experimental term at the cutoff (TRAIN <= cutoff)."""
    cutoff = context.partition_key
    corpus = build_corpus(embeddings.value, release_annotations.value)
    ids = corpus["ids"]
    return dg.Output(corpus, metadata=binding_metadata(
        archive.cutoff_of(cutoff), artefacts=[embeddings, release_annotations],
        proteins=len(ids), annotations=len(corpus["annotations"]), embedder_id=corpus["embedder_id"]))
