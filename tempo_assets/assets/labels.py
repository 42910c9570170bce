"""Per-cutoff reranker training labels: candidates from the previous release's corpus."""
import dagster as dg

from tempo_assets.assets.common import (
    all_in, binding_metadata, build_corpus, candidate_source, growth_between, removal_metadata, sequence_map,
)
from tempo_assets.core.removals import RemovalLog, log_growth
from tempo_assets.io_managers import ArtefactSet
from tempo_assets.partitions import CUTOFFS, previous_release
from tempo_assets.resources import ArchiveResource, ArtefactStoreResource, GridResource


@dg.asset(
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
    growth = growth_between(ann_prev.value, ann_now.value, onto_now.value,
                            sequence_map(seq_prev.value, emb_prev.value["ids"]), sequence_map(seq_now.value))
    # IA and depth bound to the candidate release (prev), never to the label release
    source = candidate_source(corpus, emb_prev.value, growth.targets["protein"].unique(), onto_prev.value,
                              max(grid.ks), growth=growth)
    removals = RemovalLog()
    log_growth(removals, growth)
    value = {f: getattr(source, f) for f in ("neighbours", "corpus_annotations", "ground_truth", "known", "ia", "term_depth")}
    return dg.Output(value, metadata=binding_metadata(
        archive.cutoff_of(cutoff), artefacts=[emb_prev, ann_prev, ann_now, onto_prev, onto_now, seq_prev, seq_now],
        candidate_release=prev, targets=len(growth.targets), neighbour_rows=len(source.neighbours),
        **removal_metadata(context, artefact_store, removals)))
