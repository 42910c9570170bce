"""Inputs stage: per release, the ontology, cleaned annotations, sequences and protein embeddings, read as
of the release."""

import dagster as dg
import pandas as pd

from tempo_assets.assets.common import binding_metadata, removal_metadata, scalar_metadata
from tempo_assets.core.audits.removals import (
    REASON_NOT_IN_FILE, RemovalLog, gaf_rows_after_cutoff, log_gaf_rows, log_proteins, log_term_cleaning,
)
from tempo_assets.core.base.dates import date_to_int, parse_date
from tempo_assets.core.inputs.embeddings import embed_proteins
from tempo_assets.core.inputs.fasta import sequence_sha256
from tempo_assets.core.labels.annotations import clean_annotations, propagate_annotations, split_by_evidence
from tempo_assets.core.storage.artefact_types import Embeddings, ReleaseAnnotations
from tempo_assets.core.storage.artefacts import Artefact
from tempo_assets.partitions import RELEASES
from tempo_assets.resources import ArchiveResource, ArtefactStoreResource, EmbedderResource


@dg.asset(code_version="1", partitions_def=RELEASES, group_name="releases")
def ontology(context: dg.AssetExecutionContext, archive: ArchiveResource) -> dg.Output:
    """One GO ontology per release, read at the release's cutoff (its as-of date)."""
    release = context.partition_key
    reader = archive.reader(release)
    parsed = reader.ontology(release)
    return dg.Output(parsed, metadata=binding_metadata(
        archive.cutoff_of(release), reader=reader, terms=len(parsed.terms)))


@dg.asset(code_version="1", partitions_def=RELEASES, group_name="releases")
def release_annotations(
    context: dg.AssetExecutionContext, archive: ArchiveResource, artefact_store: ArtefactStoreResource,
    ontology: Artefact,
) -> dg.Output:
    """One row per (protein, term) per evidence class at the release's cutoff: cleaned and propagated."""
    release = context.partition_key
    reader = archive.reader(release)
    frame, dropped = reader.gaf_frame(release)
    experimental, non_experimental = split_by_evidence(frame)
    # a row dated after its GAF's declared date means the file is mislabelled: the reader dropped
    # those after the cutoff, and the check release_annotations__gaf_rows_within_file_date blocks
    # the rest, so nothing downstream reads this release until the archive is fixed
    newest_gaf = max(parse_date(s["date"]) for s in reader.sources if s["kind"] == "gaf")
    late = int(dropped) + int((frame["date"].to_numpy() > date_to_int(newest_gaf)).sum())
    report = {"gaf_rows": len(frame), "rows_after_cutoff_dropped": int(dropped), "gaf_rows_after_file_date": late}
    result, removals, onto = {}, RemovalLog(), ontology.value
    log_gaf_rows(removals, gaf_rows_after_cutoff(reader, release) if dropped else frame.iloc[:0], frame)
    for name, rows in (("experimental", experimental), ("non_experimental", non_experimental)):
        cleaned, clean_report = clean_annotations(rows, onto)
        log_term_cleaning(removals, rows, clean_report, onto, kind=f"{name}_annotation")
        result[f"{name}_cleaned"] = cleaned
        result[name] = propagate_annotations(cleaned, onto)
        report.update({f"{name}_{k}": v for k, v in clean_report.items() if not hasattr(v, "columns")})
        report[f"{name}_propagated_rows"] = len(result[name])
        report[f"{name}_proteins"] = int(result[name]["protein"].nunique())
    result["report"] = report
    return dg.Output(ReleaseAnnotations(**result), metadata=binding_metadata(
        archive.cutoff_of(release), reader=reader, artefacts=[ontology], violations=late, **scalar_metadata(report),
        **removal_metadata(context, artefact_store, removals)))


@dg.asset(code_version="1", partitions_def=RELEASES, group_name="releases")
def sequences(context: dg.AssetExecutionContext, archive: ArchiveResource) -> dg.Output:
    """One row per protein with a sequence at the release's cutoff (accession, sequence, sha256)."""
    release = context.partition_key
    reader = archive.reader(release)
    seqs = reader.sequences(release) if reader.has(release, "fasta") else {}
    frame = pd.DataFrame({"protein": sorted(seqs)})
    frame["sequence"] = [seqs[p] for p in frame["protein"]]
    frame["sequence_sha256"] = [sequence_sha256(s) for s in frame["sequence"]]
    return dg.Output(frame, metadata=binding_metadata(
        archive.cutoff_of(release), reader=reader, proteins=len(frame)))


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


