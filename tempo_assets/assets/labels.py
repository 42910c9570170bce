"""Labels stage: the SQL warehouse models of annotations and their growth, information accretion and
the reranker's training labels, per release, cutoff or window.

The warehouse data lives in the warehouse (``dbt_like_sql/``); a warehouse asset's artefact is a
summary, except the window evaluation sets, whose rows (``evaluation_sets`` tagged ``window_role``)
are read back and stored as the ``EvaluationSet`` that scoring reads.
"""

import dagster as dg
import pandas as pd

from tempo_assets.assets.common import all_in, binding_metadata, growth_removals, removal_metadata, role_in
from tempo_assets.core.base.errors import TempoInputError
from tempo_assets.core.labels.growth import Growth
from tempo_assets.core.labels.ia import information_accretion
from tempo_assets.core.pipeline.workflow import (
    build_corpus, evaluation_set, release_growth, reranker_labels as labelled_candidates,
)
from tempo_assets.core.storage.artefact_types import EvaluationSet
from tempo_assets.core.storage.artefacts import Artefact, ArtefactSet
from tempo_assets.partitions import CUTOFFS, RELEASES, WINDOWS, parse_window_key, previous_release
from tempo_assets.resources import ArchiveResource, ArtefactStoreResource, GridResource, WarehouseResource


@dg.asset(code_version="1", partitions_def=RELEASES, group_name="warehouse")
def stg_annotations(
    context: dg.AssetExecutionContext, archive: ArchiveResource, warehouse: WarehouseResource,
    release_annotations: Artefact, ontology: Artefact, sequences: Artefact, embeddings: Artefact,
) -> dg.Output:
    """One row per cleaned GAF annotation at the release's cutoff, plus its term closure and the embedded sequences."""
    release = context.partition_key
    value = release_annotations.value
    frame = pd.concat([value["experimental_cleaned"].assign(is_experimental=True),
                       value["non_experimental_cleaned"].assign(is_experimental=False)], ignore_index=True)
    # growth targets need a sequence the embedder could embed (as the Python growth restricts them)
    embedded = sequences.value[sequences.value["protein"].isin(set(embeddings.value["ids"]))]
    wh = warehouse.warehouse()
    counts = {"stg_annotations": wh.load_annotations(release, frame),
              # a release sharing its ontology (by content hash) with one staged before copies those rows
              "stg_term_closure": wh.load_ontology(release, lambda: ontology.value, ontology.meta.get("sha256")),
              "stg_sequences": wh.load_sequences(release, embedded[["protein", "sequence_sha256"]])}
    return dg.Output(counts, metadata=binding_metadata(
        archive.cutoff_of(release), artefacts=[release_annotations, ontology, sequences, embeddings], **counts))


@dg.asset(code_version="1", partitions_def=RELEASES, group_name="warehouse")
def experimental_annotations(
    context: dg.AssetExecutionContext, archive: ArchiveResource, warehouse: WarehouseResource,
    stg_annotations: Artefact,
) -> dg.Output:
    """One row per (protein, term) propagated experimental annotation at the release (SQL model)."""
    release = context.partition_key
    run = warehouse.warehouse().run_model("experimental_annotations", release_id=release)
    return dg.Output({"rows": run.rows}, metadata=binding_metadata(
        archive.cutoff_of(release), artefacts=[stg_annotations], rows=run.rows, seconds=run.seconds))


@dg.asset(code_version="1", partitions_def=CUTOFFS, group_name="warehouse", ins={"experimental_annotations": all_in()})
def annotation_growth(
    context: dg.AssetExecutionContext, archive: ArchiveResource, warehouse: WarehouseResource,
    experimental_annotations: ArtefactSet,
) -> dg.Output:
    """One row per (protein, aspect, term) of the NK/LK/PK growth (prev, cutoff] (SQL model)."""
    cutoff = context.partition_key
    prev = previous_release(archive.release_ids(), cutoff)
    read = [experimental_annotations.get(prev), experimental_annotations.get(cutoff)]
    wh = warehouse.warehouse()
    wh.run_model("aligned_annotations", old_release=prev, new_release=cutoff)
    run = wh.run_model("annotation_growth", old_release=prev, new_release=cutoff)
    return dg.Output({"rows": run.rows}, metadata=binding_metadata(
        archive.cutoff_of(cutoff), artefacts=read, rows=run.rows, old_release=prev))


def warehouse_evaluation_set(warehouse: WarehouseResource, window, role: str, python_growth) -> tuple[EvaluationSet, int]:
    """Build the ``evaluation_sets`` rows of ``role``'s span from its growth partition and read the set back.

    The set is what scoring reads; it must equal the Python growth (``core.pipeline.workflow.evaluation_set``).
    The growth partition ``(old, new]`` is usually built already (``annotation_growth[new]`` of the
    cutoff job, or an earlier window's set on the same span): it is read as it stands, and rebuilt
    (``aligned_annotations``, ``annotation_growth``) when it holds no row or its set disagrees with the
    Python growth (built before a release changed), so the set is the one a rebuild gives.
    """
    old, new = window.growth_span(role)
    wh = warehouse.warehouse()

    def read_set() -> tuple[Growth, int]:
        rows = wh.run_model("evaluation_sets", window_key=window.key, window_role=role, old_release=old,
                            new_release=new).rows
        frames = wh.read_evaluation_set(window.key, role)
        return evaluation_set(frames, python_growth, f"evaluation_sets[{window.key}, {role}]"), rows

    try:  # the growth partition as it stands
        growth, rows = read_set()
    except TempoInputError:  # no row yet (a WarehouseError), or built before a release changed
        wh.run_model("aligned_annotations", old_release=old, new_release=new)
        wh.run_model("annotation_growth", old_release=old, new_release=new)
        growth, rows = read_set()
    return EvaluationSet(growth=growth, counts=growth.counts(), window_role=role), rows


@dg.asset(
    code_version="1",
    partitions_def=WINDOWS, group_name="warehouse",
    ins={"experimental_annotations": role_in("valid"), "release_annotations": role_in("valid"),
         "ontology": role_in("valid"), "sequences": role_in("valid"), "embeddings": role_in("train")},
)
def valid_evaluation_set(
    context: dg.AssetExecutionContext, archive: ArchiveResource, warehouse: WarehouseResource,
    experimental_annotations: ArtefactSet, release_annotations: ArtefactSet, ontology: ArtefactSet,
    sequences: ArtefactSet, embeddings: ArtefactSet,
) -> dg.Output:
    """One row per VALID target (protein, aspect, mode) of growth (t-1, t0]: evaluation_sets, window_role 'valid'."""
    window = parse_window_key(context.partition_key)
    old, new = window.growth_span("valid")
    (ann_old, ann_new), (seq_old, seq_new) = ((s.get(old), s.get(new)) for s in (release_annotations, sequences))
    onto_new, emb_old = ontology.get(new), embeddings.get(old)
    python = release_growth(ann_old.value, ann_new.value, onto_new.value, seq_old.value, seq_new.value,
                            emb_old.value["ids"])
    value, rows = warehouse_evaluation_set(warehouse, window, "valid", python)
    read = [experimental_annotations.get(old), experimental_annotations.get(new), ann_old, ann_new, onto_new,
            seq_old, seq_new, emb_old]
    return dg.Output(value, metadata=binding_metadata(
        archive.cutoff_of(new), artefacts=read, window=window.key, window_role="valid", warehouse_rows=rows,
        targets=len(value.growth.targets), excluded_by_sequence=len(value.growth.removed)))


@dg.asset(code_version="1", partitions_def=CUTOFFS, group_name="ia")
def ia_weights(
    context: dg.AssetExecutionContext, archive: ArchiveResource,
    release_annotations: Artefact, ontology: Artefact,
) -> dg.Output:
    """One IA value (bits) per GO term, estimated from experimental annotations at the cutoff."""
    cutoff = context.partition_key
    series = information_accretion(release_annotations.value["experimental"], ontology.value)
    frame = pd.DataFrame({"term": series.index.astype(str), "ia": series.to_numpy(dtype=float)})
    return dg.Output(frame, metadata=binding_metadata(
        archive.cutoff_of(cutoff), artefacts=[release_annotations, ontology],
        terms=len(frame), informative_terms=int((frame["ia"] > 0).sum())))


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
    return dg.Output(source, metadata=binding_metadata(
        archive.cutoff_of(cutoff), artefacts=[emb_prev, ann_prev, ann_now, onto_prev, onto_now, seq_prev, seq_now],
        candidate_release=prev, targets=len(growth.targets), neighbour_rows=len(source.neighbours),
        homology_hits=len(source.hits), nonexp_rows=len(source.nonexp),
        **removal_metadata(context, artefact_store, growth_removals(growth))))


