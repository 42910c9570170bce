"""Neighbours stage: the per-cutoff k-NN corpus, proteins with an embedding and experimental annotations at
the cutoff."""

import dagster as dg

from tempo_assets.assets.common import binding_metadata, removal_metadata
from tempo_assets.core.audits.removals import REASON_NO_EMBEDDING, RemovalLog, log_proteins
from tempo_assets.core.pipeline.workflow import build_corpus
from tempo_assets.core.storage.artefacts import Artefact
from tempo_assets.partitions import CUTOFFS
from tempo_assets.resources import ArchiveResource, ArtefactStoreResource


@dg.asset(code_version="1", partitions_def=CUTOFFS, group_name="corpus")
def knn_corpus(
    context: dg.AssetExecutionContext, archive: ArchiveResource, artefact_store: ArtefactStoreResource,
    embeddings: Artefact, release_annotations: Artefact,
) -> dg.Output:
    """One row per protein with a sequence and an experimental term at the cutoff (TRAIN <= cutoff)."""
    cutoff = context.partition_key
    corpus = build_corpus(embeddings.value, release_annotations.value)
    ids = corpus["ids"]
    removals = RemovalLog()
    annotated = set(release_annotations.value["experimental"]["protein"])
    log_proteins(removals, annotated - set(ids), REASON_NO_EMBEDDING)
    return dg.Output(corpus, metadata=binding_metadata(
        archive.cutoff_of(cutoff), artefacts=[embeddings, release_annotations],
        proteins=len(ids), annotations=len(corpus["annotations"]), embedder_id=corpus["embedder_id"],
        **removal_metadata(context, artefact_store, removals)))


