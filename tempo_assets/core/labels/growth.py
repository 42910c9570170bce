"""Annotation growth between two releases: NK / LK / PK targets and their ground truth.

Definitions (docs/PROTOCOL.md, "Growth"), per protein and aspect, on propagated experimental terms
at releases ``a < b``:

- NK: the protein has no experimental term in any aspect at ``a`` and some in this one at ``b``;
- LK: it has terms at ``a`` in other aspects only, and some in this one at ``b``;
- PK: it has terms in this aspect at ``a`` (its *known* terms) and at least one term at ``b``
  that is not among them. Sets are compared after propagation, so a protein whose ``b`` terms
  only re-state (or are ancestors of) what was known is not a target.

Both frames must use one vocabulary: map the ``a`` terms into the ``b`` ontology first
(``align_terms``), otherwise a renamed (alt_id) term looks like new knowledge.
"""
from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from tempo_assets.core.labels.annotations import (
    ASPECTS,
    classify_terms,
    propagate_annotations,
    require_columns,
)
from tempo_assets.core.base.errors import TempoInputError
from tempo_assets.core.base.io import atomic_write

from tempo_assets.core.base.vocabulary import MODES  # noqa: E402
REASON_NO_SEQUENCE = "no_sequence_at_a"
REASON_SEQUENCE_CHANGED = "sequence_changed"


def empty_frame(columns: list[str]) -> pd.DataFrame:
    return pd.DataFrame({column: pd.Series([], dtype=str) for column in columns})


def sort_frame(frame: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """Sort by mode and aspect in their canonical order, then by the other keys."""
    frame = frame.copy()
    order: dict[str, Any] = {}
    if "mode" in keys:
        order["mode"] = frame["mode"].map({m: i for i, m in enumerate(MODES)})
    if "aspect" in keys:
        order["aspect"] = frame["aspect"].map({a: i for i, a in enumerate(ASPECTS)})
    helper = pd.DataFrame({f"_{k}": order[k] if k in order else frame[k] for k in keys})
    index = helper.sort_values(list(helper.columns), kind="stable").index
    return frame.loc[index].reset_index(drop=True)


@dataclass
class Growth:
    """NK/LK/PK targets between two releases.

    Attributes
    ----------
    targets : DataFrame ``protein, aspect, mode``
        One row per (protein, aspect); a protein is in one mode per aspect.
    ground_truth : DataFrame ``protein, term, aspect, mode``
        All propagated terms at ``b`` in that aspect (known terms included: the evaluator
        removes them for PK).
    known : DataFrame ``protein, term, aspect``
        Propagated ``a`` terms of the PK targets, in that aspect.
    removed : DataFrame ``protein, aspect, mode, reason``
        Would-be targets excluded by the sequence restriction.
    """

    targets: pd.DataFrame
    ground_truth: pd.DataFrame
    known: pd.DataFrame
    removed: pd.DataFrame = field(default_factory=lambda: empty_frame(
        ["protein", "aspect", "mode", "reason"]))

    def counts(self) -> pd.DataFrame:
        """Targets and annotations per (mode, aspect), zeros included.

        Returns
        -------
        DataFrame, shape (9, 3)
            Index ``(mode, aspect)``; columns ``targets``, ``gt_annotations``,
            ``known_annotations``.
        """
        index = pd.MultiIndex.from_product([MODES, ASPECTS], names=["mode", "aspect"])
        targets = self.targets.groupby(["mode", "aspect"]).size()
        gt = self.ground_truth.groupby(["mode", "aspect"]).size()
        pk_known = self.known.groupby("aspect").size()
        known = pd.Series(
            [int(pk_known.get(aspect, 0)) if mode == "PK" else 0 for mode, aspect in index],
            index=index,
        )
        return pd.DataFrame({
            "targets": targets.reindex(index, fill_value=0).astype("int64"),
            "gt_annotations": gt.reindex(index, fill_value=0).astype("int64"),
            "known_annotations": known.astype("int64"),
        })

    def removed_counts(self) -> pd.DataFrame:
        """Excluded would-be targets per reason: distinct ``proteins`` and targets per mode."""
        reasons = [REASON_NO_SEQUENCE, REASON_SEQUENCE_CHANGED]
        per_mode = (
            self.removed.groupby(["reason", "mode"]).size().unstack("mode")
            .reindex(index=reasons, columns=list(MODES)).fillna(0).astype("int64")
        )
        proteins = self.removed.groupby("reason")["protein"].nunique()
        per_mode.insert(0, "proteins", proteins.reindex(reasons, fill_value=0).astype("int64"))
        per_mode.columns.name = None
        return per_mode


def check_propagated(frame: pd.DataFrame, what: str) -> pd.DataFrame:
    require_columns(frame, ("protein", "term", "aspect"), what)
    out = frame[["protein", "term", "aspect"]].astype(str)
    bad = ~out["aspect"].isin(ASPECTS)
    if bad.any():
        row = out.loc[bad].iloc[0]
        raise TempoInputError(
            f"{what}: aspect {row['aspect']!r} (protein {row['protein']}, term {row['term']}) "
            f"is not one of {list(ASPECTS)}"
        )
    return out.reset_index(drop=True)


def sequence_exclusions(
    proteins: pd.Series,
    sequences: Mapping[str, str] | Collection[str] | None,
    new_sequences: Mapping[str, str] | None,
) -> pd.Series:
    """Reason a protein is excluded (``<NA>`` where it is kept), aligned with ``proteins``."""
    reason = pd.Series(pd.NA, index=proteins.index, dtype=object)
    if sequences is None:
        if new_sequences is not None:
            raise TempoInputError(
                "new_sequences given without sequences: a change can only be detected "
                "against the sequences at the old release")
        return reason
    available = set(sequences.keys() if isinstance(sequences, Mapping) else sequences)
    reason[~proteins.isin(available)] = REASON_NO_SEQUENCE
    if new_sequences is not None:
        if not isinstance(sequences, Mapping):
            raise TempoInputError(
                "new_sequences given but sequences is a set of accessions: pass the old "
                "sequences as a mapping accession -> sequence to detect changes")
        changed = {acc for acc, seq in new_sequences.items()
                   if acc in sequences and sequences[acc] != seq}
        reason[reason.isna() & proteins.isin(changed)] = REASON_SEQUENCE_CHANGED
    return reason


def unique_sorted(values: np.ndarray, return_first: bool = False):
    """Sorted distinct int64 values (and the first position of each, if asked).

    A stable argsort beats ``np.unique``'s hash path on the million-row keys used here.
    """
    order = np.argsort(values, kind="stable")
    ordered = values[order]
    keep = np.ones(len(ordered), dtype=bool)
    if len(ordered):
        np.not_equal(ordered[1:], ordered[:-1], out=keep[1:])
    if return_first:
        return ordered[keep], order[keep]
    return ordered[keep]


def is_member(values: np.ndarray, sorted_set: np.ndarray) -> np.ndarray:
    """``np.isin(values, sorted_set)`` for a sorted, distinct ``sorted_set`` (binary search)."""
    if len(sorted_set) == 0:
        return np.zeros(len(values), dtype=bool)
    where = np.minimum(np.searchsorted(sorted_set, values), len(sorted_set) - 1)
    return sorted_set[where] == values


@dataclass(frozen=True)
class _GrowthCodes:
    """Both releases' rows as integers over one protein and term vocabulary: ``pair`` codes a
    (protein, aspect), ``row`` a (protein, term, aspect); ``old_*`` are release ``a``'s."""

    proteins: np.ndarray
    terms: np.ndarray
    n_terms: np.int64
    old_proteins: np.ndarray
    old_pair: np.ndarray
    new_pair: np.ndarray
    old_row: np.ndarray
    new_row: np.ndarray

    def decode(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(protein, term, aspect) codes of ``row`` codes."""
        return rows // 3 // self.n_terms, rows // 3 % self.n_terms, rows % 3


def annotation_growth(
    old: pd.DataFrame,
    new: pd.DataFrame,
    sequences: Mapping[str, str] | Collection[str] | None = None,
    new_sequences: Mapping[str, str] | None = None,
) -> Growth:
    """NK/LK/PK targets and ground truth between releases ``a < b``.

    Parameters
    ----------
    old, new : DataFrame, shapes (n_old, >= 3), (n_new, >= 3)
        Propagated experimental annotations ``protein, term, aspect`` at ``a`` and ``b``, in
        one term vocabulary (see ``align_terms``).
    sequences : mapping accession -> sequence, or a collection of accessions, or None
        Proteins whose sequence is available at ``a``; None means no restriction.
    new_sequences : mapping accession -> sequence, or None
        Sequences at ``b``; a protein known in both with a different sequence is excluded.

    Returns
    -------
    Growth
    """
    old = check_propagated(old, "annotation_growth(old)")
    new = check_propagated(new, "annotation_growth(new)")
    codes = _growth_codes(old, new)
    candidates, mode = _gaining_pairs(codes)
    reason = sequence_exclusions(pd.Series(codes.proteins[candidates // 3]), sequences,
                                 new_sequences).to_numpy()
    excluded = pd.notna(reason)
    removed = pd.DataFrame({
        "protein": codes.proteins[candidates[excluded] // 3],
        "aspect": np.asarray(ASPECTS, dtype=object)[candidates[excluded] % 3],
        "mode": np.asarray(MODES, dtype=object)[mode[excluded]],
        "reason": reason[excluded].astype(str),
    })
    target_pair, target_mode = candidates[~excluded], mode[~excluded]   # sorted by pair
    targets, ground_truth, known = _growth_frames(codes, target_pair, target_mode)
    return Growth(
        targets=targets.astype(str),
        ground_truth=ground_truth.astype(str),
        known=known.astype(str),
        removed=sort_frame(removed.astype(str), ["reason", "mode", "aspect", "protein"]),
    )


def _growth_codes(old: pd.DataFrame, new: pd.DataFrame) -> _GrowthCodes:
    """Integer codes over the union of both frames; sorted factorisation keeps string order."""
    n_old = len(old)
    p_codes, proteins = pd.factorize(pd.concat([old["protein"], new["protein"]],
                                               ignore_index=True), sort=True)
    t_codes, terms = pd.factorize(pd.concat([old["term"], new["term"]], ignore_index=True),
                                  sort=True)
    a_codes = pd.Categorical(pd.concat([old["aspect"], new["aspect"]], ignore_index=True),
                             categories=list(ASPECTS)).codes.astype(np.int64)
    terms = np.asarray(terms, dtype=object)
    n_terms = np.int64(max(len(terms), 1))
    p_codes = p_codes.astype(np.int64)
    pair = p_codes * 3 + a_codes                     # (protein, aspect)
    row = (p_codes * n_terms + t_codes) * 3 + a_codes   # (protein, term, aspect)
    return _GrowthCodes(
        proteins=np.asarray(proteins, dtype=object), terms=terms, n_terms=n_terms,
        old_proteins=p_codes[:n_old], old_pair=pair[:n_old], new_pair=pair[n_old:],
        old_row=row[:n_old], new_row=row[n_old:],
    )


def _gaining_pairs(codes: _GrowthCodes) -> tuple[np.ndarray, np.ndarray]:
    """The (protein, aspect) pairs that gain annotations from ``a`` to ``b``, and each one's mode
    (an index into MODES)."""
    candidates = unique_sorted(codes.new_pair)
    in_old = is_member(candidates // 3, unique_sorted(codes.old_proteins))
    known_here = is_member(candidates, unique_sorted(codes.old_pair))
    mode = np.where(~in_old, 0, np.where(known_here, 2, 1))   # index into MODES
    # PK needs at least one term at b that it did not hold at a; NK/LK gain all they have.
    gained_rows = ~is_member(codes.new_row, unique_sorted(codes.old_row))
    gained = is_member(candidates, unique_sorted(codes.new_pair[gained_rows]))
    keep = (mode != 2) | gained
    return candidates[keep], mode[keep]


def _rows_of_pairs(pairs: np.ndarray, rows: np.ndarray, wanted: np.ndarray
                   ) -> tuple[np.ndarray, np.ndarray]:
    """Distinct rows whose (protein, aspect) is in ``wanted`` and its position there."""
    rows, first = unique_sorted(rows, return_first=True)
    pairs = pairs[first]
    hit = is_member(pairs, wanted)
    return rows[hit], np.searchsorted(wanted, pairs[hit])


def _growth_frames(codes: _GrowthCodes, target_pair: np.ndarray, target_mode: np.ndarray
                   ) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """The targets, their ground truth at ``b`` and the PK targets' known terms at ``a``, sorted."""
    proteins, terms = codes.proteins, codes.terms
    gt_rows, gt_at = _rows_of_pairs(codes.new_pair, codes.new_row, target_pair)
    gt_mode = target_mode[gt_at]
    pk_pair = target_pair[target_mode == 2]
    known_rows, _ = _rows_of_pairs(codes.old_pair, codes.old_row, pk_pair)
    aspect_names = np.asarray(ASPECTS, dtype=object)
    mode_names = np.asarray(MODES, dtype=object)
    t_protein, t_aspect = target_pair // 3, target_pair % 3
    order = np.lexsort((t_protein, t_aspect, target_mode))
    targets = pd.DataFrame({"protein": proteins[t_protein[order]],
                            "aspect": aspect_names[t_aspect[order]],
                            "mode": mode_names[target_mode[order]]})
    g_protein, g_term, g_aspect = codes.decode(gt_rows)
    order = np.lexsort((g_term, g_protein, g_aspect, gt_mode))
    ground_truth = pd.DataFrame({"protein": proteins[g_protein[order]],
                                 "term": terms[g_term[order]],
                                 "aspect": aspect_names[g_aspect[order]],
                                 "mode": mode_names[gt_mode[order]]})
    k_protein, k_term, k_aspect = codes.decode(known_rows)
    order = np.lexsort((k_term, k_protein, k_aspect))
    known = pd.DataFrame({"protein": proteins[k_protein[order]],
                          "term": terms[k_term[order]],
                          "aspect": aspect_names[k_aspect[order]]})
    return targets, ground_truth, known


def align_terms(propagated: pd.DataFrame, ontology: Any) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Express an older release's propagated annotations in a newer ontology's vocabulary.

    alt_ids are mapped to their primary ids; terms obsolete (or absent) in ``ontology`` are
    dropped and counted. The result is re-closed under ``ontology``: an edge added between
    the releases makes the new parent part of what was already known, so it must not count
    as growth. Dropping a term never changes which aspects a protein was known in, because
    the namespace root is in every propagated set and is never obsoleted.

    Returns
    -------
    aligned : DataFrame ``protein, term, aspect``
    report : dict
        ``rows_in``, ``alt_mapped``, ``obsolete_dropped``, ``unknown_dropped``,
        ``rows_added_by_closure``, ``rows_out`` (ints) and ``dropped`` (``protein, term,
        reason``).
    """
    frame = check_propagated(propagated, "align_terms")
    terms = frame["term"]
    primary, dropped = classify_terms(pd.unique(terms).tolist(), ontology)
    mapped = terms.map(primary)
    keep = mapped.notna()
    reason = terms.map(dropped)
    seeds = pd.DataFrame({"protein": frame.loc[keep, "protein"], "term": mapped[keep]})
    seeds = seeds.drop_duplicates()
    aligned = propagate_annotations(seeds, ontology)
    manifest = (
        frame.assign(reason=reason).loc[~keep, ["protein", "term", "reason"]]
        .drop_duplicates().sort_values(["reason", "protein", "term"], kind="stable").reset_index(drop=True)
    )
    report = {
        "rows_in": int(len(frame)),
        "alt_mapped": int((keep & (mapped != terms)).sum()),
        "obsolete_dropped": int((reason == "obsolete").sum()),
        "unknown_dropped": int((reason == "unknown").sum()),
        "rows_added_by_closure": int(len(aligned) - len(seeds)),
        "rows_out": int(len(aligned)),
        "dropped": manifest,
    }
    return aligned, report


def check_selection(mode: str, aspect: str | None) -> None:
    if mode not in MODES:
        raise TempoInputError(f"mode {mode!r} is not one of {list(MODES)}")
    if aspect is not None and aspect not in ASPECTS:
        raise TempoInputError(f"aspect {aspect!r} is not one of {list(ASPECTS)}")


def write_pairs(path: str | Path, pairs: pd.DataFrame) -> int:
    pairs = pairs[["protein", "term"]].drop_duplicates().sort_values(["protein", "term"])
    with atomic_write(path) as handle:
        for protein, term in zip(pairs["protein"], pairs["term"]):
            handle.write(f"{protein}\t{term}\n")
    return int(len(pairs))


def write_ground_truth(path: str | Path, growth: Growth, mode: str,
                       aspect: str | None = None) -> int:
    """Write the ground truth of one mode (and aspect, or all) as ``protein<TAB>term`` lines.

    The cafaeval / LAFA ground-truth format: no header, one pair per line, sorted. Returns
    the number of lines written. The write is atomic.
    """
    check_selection(mode, aspect)
    selected = growth.ground_truth.loc[growth.ground_truth["mode"] == mode]
    if aspect is not None:
        selected = selected.loc[selected["aspect"] == aspect]
    return write_pairs(path, selected)


def write_known(path: str | Path, growth: Growth, mode: str = "PK",
                aspect: str | None = None) -> int:
    """Write the known terms (PK targets' propagated ``a`` terms) as ``protein<TAB>term``.

    NK and LK targets have no known terms by definition, so ``mode`` other than PK writes an
    empty file (kept for symmetry with ``write_ground_truth``). Returns the line count.
    """
    check_selection(mode, aspect)
    known = growth.known if mode == "PK" else growth.known.iloc[0:0]
    if aspect is not None:
        known = known.loc[known["aspect"] == aspect]
    return write_pairs(path, known)
