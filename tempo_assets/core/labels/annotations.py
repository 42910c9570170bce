"""Experimental / non-experimental annotation sets: evidence split, term cleaning, propagation.

The ground truth of every window is built from experimental annotations only (docs/PROTOCOL.md,
"Annotations"); the other evidence codes (IEA, ISS, IBA, ...) are kept apart and feed the
non-experimental GOA baseline. Rows carrying a NOT qualifier assert the *absence* of a
function, so they belong to neither set.
"""
from __future__ import annotations

from typing import Any

import pandas as pd

from tempo_assets.core.base.errors import TempoInputError

EXPERIMENTAL_CODES: frozenset[str] = frozenset(
    {"EXP", "IDA", "IPI", "IMP", "IGI", "IEP", "TAS", "IC", "HTP", "HDA", "HMP", "HGI", "HEP"}
)
from tempo_assets.core.base.vocabulary import ASPECTS  # noqa: E402

# Reasons recorded in the removal manifest of ``clean_annotations``.
REASON_OBSOLETE = "obsolete"
REASON_UNKNOWN = "unknown"
REASON_NO_NAMESPACE = "no_namespace"


def require_columns(frame: pd.DataFrame, columns, what: str, error: type[TempoInputError] = TempoInputError) -> None:
    """Raise ``error`` (a ``TempoInputError``) naming the missing columns of ``what`` (the key at fault).

    The one column check of core: every module that validates an input frame calls it.
    """
    if not isinstance(frame, pd.DataFrame):
        raise error(f"{what}: expected a pandas DataFrame, got {type(frame).__name__}", path=what)
    missing = [column for column in columns if column not in frame.columns]
    if missing:
        raise error(f"{what}: missing column(s) {missing}; has {list(frame.columns)}", path=what)


def not_qualified_mask(qualifier: pd.Series) -> pd.Series:
    """True where a GAF qualifier holds a ``NOT`` token (``NOT``, ``NOT|enables``, ...)."""
    # A GAF has a handful of distinct qualifiers: decide once per distinct value. Token
    # match, so a relation whose name merely contains "NOT" is not caught.
    negated = [value for value in pd.unique(qualifier.dropna())
               if "NOT" in str(value).upper().split("|")]
    return qualifier.isin(negated)


def split_by_evidence(gaf_frame: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Split GAF rows into experimental and non-experimental annotations.

    Rows whose qualifier holds ``NOT`` are removed from both. The counts are attached to both
    returned frames as ``frame.attrs["evidence_split"]`` (``rows_in``, ``not_dropped``,
    ``experimental``, ``non_experimental``).

    Parameters
    ----------
    gaf_frame : DataFrame, shape (n_rows, >= 3)
        At least ``protein``, ``term``, ``evidence``; ``qualifier`` when present.

    Returns
    -------
    experimental, non_experimental : DataFrame
        Row subsets of ``gaf_frame`` (all columns kept, fresh index).
    """
    require_columns(gaf_frame, ("protein", "term", "evidence"), "split_by_evidence")
    if "qualifier" in gaf_frame.columns:
        negated = not_qualified_mask(gaf_frame["qualifier"])
    else:
        negated = pd.Series(False, index=gaf_frame.index)
    codes = [value for value in pd.unique(gaf_frame["evidence"].dropna())
             if str(value).strip() in EXPERIMENTAL_CODES]
    is_experimental = gaf_frame["evidence"].isin(codes)
    experimental = gaf_frame.loc[~negated & is_experimental].reset_index(drop=True)
    non_experimental = gaf_frame.loc[~negated & ~is_experimental].reset_index(drop=True)
    counts = {
        "rows_in": int(len(gaf_frame)),
        "not_dropped": int(negated.sum()),
        "experimental": int(len(experimental)),
        "non_experimental": int(len(non_experimental)),
    }
    experimental.attrs["evidence_split"] = dict(counts)
    non_experimental.attrs["evidence_split"] = dict(counts)
    return experimental, non_experimental


def classify_terms(terms: list[str], ontology: Any) -> tuple[dict[str, str], dict[str, str]]:
    """Map each distinct term to its primary id, or to a drop reason.

    Returns ``(primary, dropped)``: ``primary[term]`` for terms that survive, ``dropped[term]``
    = ``"obsolete"``, ``"unknown"`` or ``"no_namespace"`` for the others. An alt_id of an
    obsolete term counts as obsolete: the GO id existed, its meaning was withdrawn.
    """
    primary: dict[str, str] = {}
    dropped: dict[str, str] = {}
    for term in terms:
        resolved = ontology.resolve(term)
        if resolved is not None:
            if ontology.aspect(resolved) in ASPECTS:
                primary[term] = resolved
            else:
                dropped[term] = REASON_NO_NAMESPACE
        elif term in ontology.terms or term in ontology.alt_ids:
            dropped[term] = REASON_OBSOLETE
        else:
            dropped[term] = REASON_UNKNOWN
    return primary, dropped


def clean_annotations(frame: pd.DataFrame, ontology: Any) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Map alt_ids to primary ids and drop obsolete and unknown terms, counting each.

    The aspect of a surviving row is the namespace of its primary term in ``ontology`` (the
    release's own ontology is the authority; a GAF aspect that disagrees is counted in
    ``aspect_mismatch`` and overwritten).

    Parameters
    ----------
    frame : DataFrame, shape (n_rows, >= 2)
        ``protein``, ``term`` and optionally ``aspect`` plus any other columns (kept).
    ontology : Ontology
        ``.resolve``, ``.aspect``, ``.terms``, ``.alt_ids`` as in ``core/inputs/ontology.py``.

    Returns
    -------
    cleaned : DataFrame, shape (rows_out, n_columns)
        Same columns, ``term`` primary, ``aspect`` from the ontology.
    report : dict
        ``rows_in``, ``alt_mapped`` (rows whose term was an alt_id), ``obsolete_dropped``,
        ``unknown_dropped``, ``no_namespace_dropped`` (a live term outside BP/MF/CC),
        ``aspect_mismatch``, ``rows_out`` (ints) and ``dropped``: a
        DataFrame ``protein, term, reason`` of the distinct removed pairs (removal manifest).
    """
    require_columns(frame, ("protein", "term"), "clean_annotations")
    terms = frame["term"].astype(str)
    distinct = pd.unique(terms).tolist()
    primary, dropped = classify_terms(distinct, ontology)

    mapped = terms.map(primary)
    keep = mapped.notna()
    reason = terms.map(dropped)
    alt_rows = keep & (mapped != terms)

    cleaned, mismatch = _with_primary_terms(frame.loc[keep].copy(), mapped[keep], ontology)

    manifest = (
        pd.DataFrame({"protein": frame["protein"].astype(str), "term": terms, "reason": reason})
        .loc[~keep]
        .drop_duplicates()
        .sort_values(["reason", "protein", "term"], kind="stable")
        .reset_index(drop=True)
    )
    report: dict[str, Any] = {
        "rows_in": int(len(frame)),
        "alt_mapped": int(alt_rows.sum()),
        "obsolete_dropped": int((reason == REASON_OBSOLETE).sum()),
        "unknown_dropped": int((reason == REASON_UNKNOWN).sum()),
        "no_namespace_dropped": int((reason == REASON_NO_NAMESPACE).sum()),
        "aspect_mismatch": mismatch,
        "rows_out": int(len(cleaned)),
        "dropped": manifest,
    }
    return cleaned, report


def _with_primary_terms(kept: pd.DataFrame, primary: pd.Series, ontology: Any) -> tuple[pd.DataFrame, int]:
    """``kept`` with its primary terms and their ontology aspects; how many GAF aspects disagreed."""
    kept["term"] = primary.astype(str)
    primaries = pd.unique(kept["term"]).tolist()
    new_aspect = kept["term"].map({term: ontology.aspect(term) for term in primaries})
    mismatch = 0
    if "aspect" in kept.columns:
        mismatch = int((kept["aspect"].astype(str) != new_aspect.astype(str)).sum())
    kept["aspect"] = new_aspect.astype(str)
    return kept.reset_index(drop=True), mismatch


def propagate_annotations(frame: pd.DataFrame, ontology: Any) -> pd.DataFrame:
    """Close annotations under is_a + part_of inside each namespace.

    Parameters
    ----------
    frame : DataFrame, shape (n_rows, >= 2)
        Cleaned annotations (primary ids): ``protein``, ``term`` (``aspect`` is recomputed).

    Returns
    -------
    DataFrame, shape (n_propagated, 3)
        ``protein, term, aspect``, one row per distinct pair, sorted by protein, aspect, term.
    """
    require_columns(frame, ("protein", "term"), "propagate_annotations")
    seeds = frame[["protein", "term"]].astype(str).drop_duplicates().reset_index(drop=True)
    if seeds.empty:
        return pd.DataFrame(
            {"protein": pd.Series([], dtype=str), "term": pd.Series([], dtype=str),
             "aspect": pd.Series([], dtype=str)}
        )
    seeds["aspect"] = seeds["term"].map({t: ontology.aspect(t) for t in pd.unique(seeds["term"])})
    propagated = ontology.propagate_terms(seeds)
    propagated = (
        propagated[["protein", "term", "aspect"]]
        .astype(str)
        .drop_duplicates()
        .sort_values(["protein", "aspect", "term"], kind="stable")
        .reset_index(drop=True)
    )
    return propagated


def build_annotation_set(rows: pd.DataFrame, ontology: Any, split_counts: dict[str, int]
                         ) -> tuple[pd.DataFrame, dict[str, Any]]:
    cleaned, report = clean_annotations(rows, ontology)
    propagated = propagate_annotations(cleaned, ontology)
    report = {
        "gaf_rows": split_counts["rows_in"],
        "not_dropped": split_counts["not_dropped"],
        "experimental": split_counts["experimental"],
        "non_experimental": split_counts["non_experimental"],
        **report,
    }
    report["propagated_rows"] = int(len(propagated))
    report["proteins"] = int(propagated["protein"].nunique())
    for aspect in ASPECTS:
        in_aspect = propagated["aspect"] == aspect
        report[f"proteins_{aspect}"] = int(propagated.loc[in_aspect, "protein"].nunique())
    return propagated, report


def experimental_annotations(gaf_frame: pd.DataFrame, ontology: Any
                             ) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Propagated experimental annotations of a GAF frame: split, clean, propagate.

    Returns ``(propagated[protein, term, aspect], report)``; the report holds the evidence
    split counts (``gaf_rows``, ``not_dropped``, ``experimental``, ``non_experimental``), the ``clean_annotations`` report, ``propagated_rows``, ``proteins`` and
    ``proteins_<aspect>``.
    """
    experimental, _ = split_by_evidence(gaf_frame)
    return build_annotation_set(experimental, ontology, experimental.attrs["evidence_split"])


def non_experimental_annotations(gaf_frame: pd.DataFrame, ontology: Any
                                 ) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Propagated non-experimental annotations (IEA, ISS, IBA, ...): baseline input only."""
    _, non_experimental = split_by_evidence(gaf_frame)
    return build_annotation_set(non_experimental, ontology,
                                non_experimental.attrs["evidence_split"])
