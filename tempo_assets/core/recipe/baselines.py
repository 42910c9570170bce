"""The two CAFA reference baselines: naive term frequency and non-experimental GOA terms."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from tempo_assets.core.labels.annotations import require_columns
from tempo_assets.core.base.arrays import concat_ranges, positions_in
from tempo_assets.core.base.errors import TempoInputError

from tempo_assets.core.base.vocabulary import ASPECTS  # noqa: E402
SCORE_COLUMNS = ["protein", "term", "aspect", "score"]


def _require(frame: pd.DataFrame, columns: tuple[str, ...], what: str) -> None:
    require_columns(frame, columns, what)
    bad = set(frame["aspect"].unique().tolist()) - set(ASPECTS) if "aspect" in columns else set()
    if bad:
        raise TempoInputError(f"{what} has unknown aspects {sorted(map(str, bad))}; expected BP, MF, CC")


def term_frequencies(corpus_annotations: pd.DataFrame) -> pd.DataFrame:
    """Per aspect, the fraction of annotated proteins that carry each term.

    ``frequency(t) = |{p : p has t}| / |{p : p has any term of aspect(t)}|``.

    Returns
    -------
    DataFrame ``term, aspect, frequency``, sorted by aspect, frequency desc, term.
    """
    _require(corpus_annotations, ("protein", "term", "aspect"), "corpus annotations")
    ann = corpus_annotations[["protein", "term", "aspect"]].drop_duplicates()
    per_aspect = ann.groupby("aspect", observed=True)["protein"].nunique()
    counts = ann.groupby(["term", "aspect"], observed=True).size().rename("n").reset_index()
    counts["frequency"] = counts["n"] / counts["aspect"].map(per_aspect).astype(np.float64)
    counts = counts.sort_values(
        ["aspect", "frequency", "term"], ascending=[True, False, True], kind="mergesort"
    )
    return counts[["term", "aspect", "frequency"]].reset_index(drop=True)


def naive_term_scores(
    corpus_annotations: pd.DataFrame,
    targets: pd.DataFrame,
    min_frequency: float = 0.005,
    max_terms: int | None = None,
    leave_one_out: bool = False,
) -> pd.DataFrame:
    """The naive baseline: every target gets its aspect's corpus term frequencies.

    The score of term ``t`` for every target of ``aspect(t)`` is the fraction of corpus proteins
    annotated in that aspect that carry ``t`` (the CAFA "naive" method). To keep the frame
    small, only terms with ``frequency >= min_frequency`` are kept (default 0.005: anything
    lower rounds to 0.00 in a CAFA file and would be dropped anyway), and at most
    ``max_terms`` per aspect (highest frequency first, ties by term id).

    With ``leave_one_out`` a target that is itself in the corpus gets the frequencies of the corpus
    without its own labels, ``(n(t) - [p has t]) / (N(aspect) - [p is annotated in it])`` (the
    golden rule of docs/PROTOCOL.md, as ``core.recipe.candidates``' ``corpus_prior`` feature counts them), on
    the same terms; a target outside the corpus (every NK target) gets exactly the naive scores,
    and a term whose count without the target is 0 is dropped.

    Parameters
    ----------
    corpus_annotations : DataFrame ``protein, term, aspect``, propagated
    targets : DataFrame ``protein, aspect`` (duplicates ignored)

    Returns
    -------
    DataFrame ``protein, term, aspect, score``, sorted by protein, aspect, score desc, term.
    """
    _require(targets, ("protein", "aspect"), "targets")
    freq = term_frequencies(corpus_annotations)
    freq = freq[freq["frequency"] >= float(min_frequency)]
    if max_terms is not None:
        freq = freq.groupby("aspect", observed=True, sort=False).head(int(max_terms))
    tgt = targets[["protein", "aspect"]].drop_duplicates().sort_values(["protein", "aspect"], kind="mergesort")
    rows = _AspectTerms.of(tgt, freq.reset_index(drop=True))
    out = rows.frame()
    if leave_one_out:
        naive = out["score"].to_numpy(dtype=np.float64)
        out = _without_own_labels(out, corpus_annotations, rows)
        out = out.iloc[_recounted_order(rows, out.index.to_numpy(), naive, out["score"].to_numpy(dtype=np.float64))]
    return out[SCORE_COLUMNS].reset_index(drop=True)


def _recounted_order(rows: "_AspectTerms", kept: np.ndarray, naive: np.ndarray, score: np.ndarray) -> np.ndarray:
    """The order of the ``kept`` rows (positions in ``rows.frame()``, ascending) by target, score desc, then term
    (ranked as pandas sorts the ids): a target whose scores the recount moved is sorted again, the others keep
    ``rows``' order, which is that order already for the naive scores."""
    block = rows.block[kept]
    moved = np.zeros(len(rows.targets), dtype=bool)
    moved[block[score != naive[kept]]] = True
    again = np.flatnonzero(moved[block])  # whole targets, each one's rows together
    order = np.arange(len(kept))
    if len(again):
        term_rank = pd.factorize(rows.freq["term"], sort=True)[0][rows.pos[kept[again]]]
        order[again] = again[np.lexsort((term_rank, -score[again], block[again]))]
    return order


@dataclass(frozen=True)
class _AspectTerms:
    """``targets`` (distinct ``protein, aspect``, in the order wanted) each with every term of ``freq``
    (``term_frequencies``' rows, an aspect's rows together) in its aspect: the inner join on the aspect, each
    target's terms in ``freq``'s order (frequency desc, then term: the naive baseline's order, so the rows
    need no sort). ``block``: each row's target (its position in ``targets``); ``pos``: its row of ``freq``."""

    targets: pd.DataFrame
    freq: pd.DataFrame
    block: np.ndarray
    pos: np.ndarray

    @classmethod
    def of(cls, targets: pd.DataFrame, freq: pd.DataFrame) -> "_AspectTerms":
        aspects = freq["aspect"].to_numpy(dtype=object)
        first = {a: i for i, a in reversed(list(enumerate(aspects)))}
        size = pd.Series(aspects).value_counts(sort=False).to_dict()
        wanted = targets["aspect"].to_numpy(dtype=object)
        starts = np.array([first.get(a, 0) for a in wanted], dtype=np.int64)
        counts = np.array([size.get(a, 0) for a in wanted], dtype=np.int64)
        return cls(targets, freq, np.repeat(np.arange(len(targets), dtype=np.int64), counts),
                   concat_ranges(starts, counts))

    def frame(self) -> pd.DataFrame:
        """``protein, aspect, term, score`` (each column of its source's dtype, as the join keeps it), RangeIndex."""
        def taken(column: pd.Series, rows: np.ndarray) -> pd.Series:
            return column.take(rows).reset_index(drop=True)

        return pd.DataFrame({"protein": taken(self.targets["protein"], self.block),
                             "aspect": taken(self.targets["aspect"], self.block),
                             "term": taken(self.freq["term"], self.pos), "score": taken(self.freq["frequency"], self.pos)})

    def codes(self, ids: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Each row's protein, term and aspect as positions in ``ids`` (-1: absent), looked up once per
        target and per term of ``freq``, not once per row."""
        return (positions_in(self.targets["protein"], ids["protein"])[self.block],
                positions_in(self.freq["term"], ids["term"])[self.pos],
                positions_in(self.targets["aspect"], ids["aspect"])[self.block])


def _without_own_labels(scores: pd.DataFrame, corpus_annotations: pd.DataFrame, rows: _AspectTerms) -> pd.DataFrame:
    """Naive ``scores`` (``rows.frame()``) recounted, per target in the corpus, without that target's own labels."""
    if scores.empty:
        return scores
    ann = corpus_annotations[["protein", "term", "aspect"]].drop_duplicates()
    # integer codes of the corpus' proteins, terms and aspects (-1: not in the corpus), so the
    # per-row lookups below are array lookups, not merges on millions of string keys
    codes = {c: pd.factorize(ann[c]) for c in ("protein", "term", "aspect")}
    row_p, row_t, row_a = rows.codes({c: uniques for c, (_, uniques) in codes.items()})
    if not (row_p >= 0).any():  # no target in the corpus
        return scores
    n_terms, n_aspects = len(codes["term"][1]), len(codes["aspect"][1])
    ann_p, ann_t, ann_a = (codes[c][0].astype(np.int64) for c in ("protein", "term", "aspect"))
    complete = (ann_p >= 0) & (ann_t >= 0) & (ann_a >= 0)  # a missing id counts nowhere (as groupby drops it)
    ann_p, ann_t, ann_a = ann_p[complete], ann_t[complete], ann_a[complete]
    with_ta, with_pa = (row_t >= 0) & (row_a >= 0), (row_p >= 0) & (row_a >= 0)
    known = with_ta & (row_p >= 0)
    term_aspect = np.where(with_ta, row_t * n_aspects + row_a, -1)
    # n(t): corpus proteins carrying the term in its aspect; N(aspect): corpus proteins annotated in it
    n_by_term = np.bincount(ann_t * n_aspects + ann_a, minlength=n_terms * n_aspects).astype(np.float64)
    n_term = np.where(term_aspect >= 0, n_by_term[np.maximum(term_aspect, 0)], np.nan)
    own_keys = pd.Index(np.unique((ann_p * n_terms + ann_t) * n_aspects + ann_a))
    own = np.zeros(len(scores), dtype=np.float64)
    own[known] = own_keys.get_indexer((row_p[known] * n_terms + row_t[known]) * n_aspects + row_a[known]) >= 0
    in_keys = np.unique(ann_p * n_aspects + ann_a)  # (protein, aspect) pairs of the corpus
    in_aspect = np.zeros(len(scores), dtype=np.float64)
    in_aspect[with_pa] = pd.Index(in_keys).get_indexer(row_p[with_pa] * n_aspects + row_a[with_pa]) >= 0
    per_aspect = np.bincount(in_keys % n_aspects, minlength=n_aspects)
    denom = np.where(row_a >= 0, per_aspect[np.maximum(row_a, 0)].astype(np.float64), np.nan) - in_aspect
    numer = n_term - own
    loo = np.divide(numer, denom, out=np.zeros_like(numer), where=denom > 0)
    touched = (own > 0) | (in_aspect > 0)
    out = scores.reset_index(drop=True)
    out["score"] = np.where(touched, loo, out["score"].to_numpy(dtype=np.float64))
    return out[out["score"] > 0]



def goa_nonexperimental_scores(
    non_experimental_annotations: pd.DataFrame, targets: pd.DataFrame
) -> pd.DataFrame:
    """The GOA baseline: score 1.0 for each non-experimental term a target already carries.

    ``non_experimental_annotations`` must be the propagated non-experimental terms at the
    cutoff (NOT rows removed); only (protein, aspect) pairs listed in ``targets`` are kept.

    Returns
    -------
    DataFrame ``protein, term, aspect, score`` (score 1.0), sorted by protein, aspect, term.
    """
    _require(non_experimental_annotations, ("protein", "term", "aspect"), "non-experimental annotations")
    _require(targets, ("protein", "aspect"), "targets")
    ann = non_experimental_annotations[["protein", "term", "aspect"]].drop_duplicates()
    tgt = targets[["protein", "aspect"]].drop_duplicates()
    out = ann.merge(tgt, on=["protein", "aspect"], how="inner")
    out["score"] = 1.0
    out = out.sort_values(["protein", "aspect", "term"], kind="mergesort")
    return out[SCORE_COLUMNS].reset_index(drop=True)
