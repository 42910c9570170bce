"""Per-release protein embeddings: the configured embedder, or the release's precomputed file."""

import dagster as dg

from tempo_assets.assets.common import binding_metadata, removal_metadata
from tempo_assets.core.storage.artefact_types import Embeddings
from tempo_assets.core.inputs.embeddings import embed_proteins
from tempo_assets.core.audits.removals import REASON_NOT_IN_FILE, RemovalLog, log_proteins
from tempo_assets.core.storage.artefacts import Artefact
from tempo_assets.partitions import RELEASES
from tempo_assets.resources import ArchiveResource, ArtefactStoreResource, EmbedderResource


@dg.asset(code_version="1", partitions_def=RELEASES, group_name="embeddings")
def embeddings(
    context: dg.AssetExecutionContext, archive: ArchiveResource, embedder: EmbedderResource,
    artefact_store: ArtefactStoreResource, sequences: Artefact,
) -> dg.Output:
    """One vector per protein with a sequence at the release's cutoff (cached by sequence sha256)."""
    release = context.partition_key
    reader = archive.reader(release)
    # a precomputed file dated after the release's cutoff raises CutoffViolation here
    precomputed = reader.embeddings_path(release) if reader.has(release, "embeddings") else None
    model = embedder.embedder(str(precomputed) if precomputed else None)
    frame = sequences.value
    result = embed_proteins(model, dict(zip(frame["protein"], frame["sequence"])), cache=embedder.cache())
    stats = dict(result.stats)
    value = Embeddings(ids=list(result.ids), matrix=result.matrix, embedder_id=stats["embedder_id"])
    removals = RemovalLog()
    log_proteins(removals, stats.get("missing") or [], REASON_NOT_IN_FILE)
    return dg.Output(value, metadata=binding_metadata(
        archive.cutoff_of(release), reader=reader, artefacts=[sequences],
        embedder_id=stats["embedder_id"], proteins=len(result.ids),
        cache_hits=int(stats.get("hits", 0)), cache_misses=int(stats.get("misses", 0)),
        missing=len(stats.get("missing", []) or []), precomputed=bool(precomputed),
        **removal_metadata(context, artefact_store, removals)))
