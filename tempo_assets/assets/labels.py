"""Per-cutoff reranker training labels: candidates from the previous release's corpus."""
import dagster as dg

from tempo_assets.assets.common import all_in, binding_metadata, removal_metadata
from tempo_assets.core.pipeline.workflow import build_corpus, release_growth, reranker_labels as labelled_candidates
from tempo_assets.core.audits.removals import RemovalLog, log_growth
from tempo_assets.core.storage.artefacts import ArtefactSet
from tempo_assets.partitions import CUTOFFS, previous_release
from tempo_assets.resources import ArchiveResource, ArtefactStoreResource, GridResource


@dg.asset(
    code_version="1",
    partitions_def=CUTOFFS, group_name="labels",
    ins={"embeddings": all_in(), "release_annotations": all_in(), "ontology": all_in(), "sequences": all_in()},
)
def reranker_labels(
    context: dg.AssetExecutionContext, archive: ArchiveResource, grid: GridResource,
    artefact_store: ArtefactStoreResource, embeddings: ArtefactSet, release_annotations: ArtefactSet, ontology: ArtefactSet, sequences: ArtefactSet,
) -> dg.Output:
    """One candidate source per cutoff: growth (prev, cutoff] targets, neighbours in the prev corpus, truth at cutoff."""
    cutoff = context.partition_key
    prev = previous_release(archive.release_ids(), cutoff)
    emb_prev, ann_prev, ann_now = embeddings.get(prev), release_annotations.get(prev), release_annotations.get(cutoff)
    onto_prev, onto_now = ontology.get(prev), ontology.get(cutoff)
    corpus = build_corpus(emb_prev.value, ann_prev.value)
    seq_prev, seq_now = sequences.get(prev), sequences.get(cutoff)
    growth = release_growth(ann_prev.value, ann_now.value, onto_now.value, seq_prev.value, seq_now.value,
                            emb_prev.value["ids"])
    source = labelled_candidates(corpus, emb_prev.value, growth, onto_prev.value, max(grid.ks), seq_prev.value,
                                 ann_prev.value)
    removals = RemovalLog()
    log_growth(removals, growth)
    return dg.Output(source, metadata=binding_metadata(
        archive.cutoff_of(cutoff), artefacts=[emb_prev, ann_prev, ann_now, onto_prev, onto_now, seq_prev, seq_now],
        candidate_release=prev, targets=len(growth.targets), neighbour_rows=len(source.neighbours),
        homology_hits=len(source.hits), nonexp_rows=len(source.nonexp),
        **removal_metadata(context, artefact_store, removals)))
