"""Candidate features for the reranker, built from a protein's neighbours only.

A candidate is a (protein, term, aspect) triple where the term is carried by at least one
of the protein's top-k neighbours in the KNN corpus. Every feature obeys the golden rule of
``docs/PROTOCOL.md``: it is identical when the scored protein's own labels are removed from the
corpus. Concretely

- the protein is never its own neighbour (rows with ``query == neighbour`` are dropped);
- the corpus prior of a term is computed leave-one-out when the scored protein is itself in
  the corpus (its own contribution is subtracted from numerator and denominator);
- duplicated input rows collapse, and neighbours are ranked by (similarity desc, neighbour id),
  so nothing depends on row order, replication or label-derived bucket ids.

- the IA of a term is leave-one-out too when ``ia`` is an ``ia.IaCounts``: for candidate
  (p, t) it is the IA estimated on the IA corpus without p (p's own contribution to
  ``n(t and P(t))`` and ``n(P(t))`` is subtracted), so it no longer carries p's labels at
  order 1/n. A plain term -> bits series is accepted for compatibility but leaks whenever the
  scored protein is in the corpus the series was estimated from.

``term_depth`` comes from the ontology alone. ``tempo_assets.core.audits.leakage`` re-checks all of
this on sampled proteins.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable, Mapping

import numpy as np
import pandas as pd

from tempo_assets.core.labels.annotations import require_columns
from tempo_assets.core.base.arrays import concat_ranges as _ranges
from tempo_assets.core.base.errors import TempoInputError
from tempo_assets.core.labels.ia import IaCounts

ASPECT_CODES: dict[str, int] = {"BP": 0, "MF": 1, "CC": 2}

FEATURE_COLUMNS: tuple[str, ...] = (
    "sim_max",  # highest similarity among neighbours carrying the term
    "sim_mean",  # mean similarity among neighbours carrying the term
    "sim_sum",  # summed similarity of neighbours carrying the term
    "vote_share",  # neighbours carrying the term / neighbours considered
    "weighted_vote_share",  # sim_sum / summed similarity of all neighbours considered
    "best_rank",  # best (smallest, 1-based) rank of a neighbour carrying the term
    "top_similarity",  # similarity of the protein's nearest neighbour
    "aspect_neighbour_share",  # neighbours annotated in the aspect / neighbours considered
    "corpus_prior",  # leave-one-out fraction of aspect-annotated corpus proteins carrying it
    "ia",  # information accretion of the term, leave-one-out with IaCounts (NaN when unknown)
    "depth",  # depth of the term in the ontology (NaN when unknown)
    "n_candidates",  # candidate terms for this protein in this aspect
    "aspect_code",  # BP=0, MF=1, CC=2
)

KEY_COLUMNS: tuple[str, str, str] = ("protein", "term", "aspect")


class FeatureInputError(TempoInputError):
    """A neighbour or annotation frame handed to the feature builder is malformed."""


def _require_columns(frame: pd.DataFrame, columns: Iterable[str], what: str) -> None:
    require_columns(frame, columns, what, error=FeatureInputError)


def _as_str(series: pd.Series) -> pd.Series:
    if pd.api.types.is_string_dtype(series.dtype) and series.dtype != object:
        return series
    return series.astype(str)


def _check_similarity(neighbours: pd.DataFrame) -> np.ndarray:
    sim = pd.to_numeric(neighbours["similarity"], errors="coerce").to_numpy(dtype=np.float64)
    bad = ~np.isfinite(sim)
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        raise FeatureInputError(
            f"non-finite similarity {neighbours['similarity'].iloc[row]!r} "
            f"(query {neighbours['query'].iloc[row]!r}, "
            f"neighbour {neighbours['neighbour'].iloc[row]!r})",
            path="neighbours",
            line=row,
        )
    return sim


def _check_k(k: int | None) -> None:
    if k is not None and int(k) < 1:
        raise FeatureInputError(f"k must be >= 1, got {k}", path="neighbours")


def _sorted_unique(values: np.ndarray) -> np.ndarray:
    """Sorted distinct values of an int64 array (sort-based: cheaper than hashing here)."""
    values = np.sort(values)
    if len(values) == 0:
        return values
    keep = np.ones(len(values), dtype=bool)
    keep[1:] = values[1:] != values[:-1]
    return values[keep]


def _group_starts(sorted_keys: np.ndarray) -> np.ndarray:
    """Start offsets of the runs of equal values in a sorted 1-d array."""
    if len(sorted_keys) == 0:
        return np.zeros(0, dtype=np.int64)
    return np.concatenate([[0], np.flatnonzero(np.diff(sorted_keys)) + 1]).astype(np.int64)



def _rank_neighbours(q: np.ndarray, n: np.ndarray, sim: np.ndarray, k: int | None,
                     n_proteins: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Drop self-hits, keep each (query, neighbour)'s best similarity, rank, truncate at k.

    Codes are sorted-order codes, so the order (query, similarity desc, neighbour id) is a
    function of ids and similarities only. Returns (q, n, sim, rank) sorted that way.
    """
    keep = q != n
    q, n, sim = q[keep], n[keep], sim[keep]
    order = np.lexsort((n, -sim, q))
    q, n, sim = q[order], n[order], sim[order]
    pair = q * np.int64(n_proteins) + n
    by_pair = np.argsort(pair, kind="stable")  # stable: the first of a pair is its best
    first = np.ones(len(q), dtype=bool)
    first[1:] = pair[by_pair][1:] != pair[by_pair][:-1]
    keep = np.zeros(len(q), dtype=bool)
    keep[by_pair[first]] = True
    q, n, sim = q[keep], n[keep], sim[keep]
    starts = _group_starts(q)
    sizes = np.diff(np.concatenate([starts, [len(q)]]))
    rank = np.arange(len(q), dtype=np.int64) - np.repeat(starts, sizes) + 1
    if k is not None:
        keep = rank <= int(k)
        q, n, sim, rank = q[keep], n[keep], sim[keep], rank[keep]
    return q, n, sim, rank


def prepare_neighbours(neighbours: pd.DataFrame, k: int | None = None) -> pd.DataFrame:
    """Clean a neighbour frame and keep each query's top ``k`` neighbours.

    Parameters
    ----------
    neighbours : DataFrame, shape (n_pairs, >=3)
        Columns ``query``, ``neighbour``, ``similarity`` (``rank`` is ignored: ranks are
        recomputed so ties break on the neighbour id, not on the search engine's order).
    k : int or None
        Neighbours kept per query after removing the query itself; ``None`` keeps all.

    Returns
    -------
    DataFrame, shape (n_kept, 4)
        ``query, neighbour, similarity, rank`` with ``rank`` 1-based, sorted by query then rank.
    """
    _require_columns(neighbours, ("query", "neighbour", "similarity"), "neighbours")
    _check_k(k)
    sim = _check_similarity(neighbours)
    ids = pd.concat([_as_str(neighbours["query"]), _as_str(neighbours["neighbour"])],
                    ignore_index=True)
    codes, uniques = pd.factorize(ids, sort=True)
    uniques = np.asarray(uniques, dtype=object)
    codes = codes.astype(np.int64)
    n_rows = len(neighbours)
    _check_present(codes, "neighbours", n_rows)
    q, n, sim, rank = _rank_neighbours(codes[:n_rows], codes[n_rows:], sim, k, len(uniques))
    return pd.DataFrame({"query": uniques[q], "neighbour": uniques[n], "similarity": sim,
                         "rank": rank})


def _check_present(codes: np.ndarray, what: str, n_rows: int) -> None:
    """Factorised id columns (stacked, ``n_rows`` each) must have no missing value."""
    missing = np.flatnonzero(codes < 0)
    if len(missing):
        raise FeatureInputError("missing protein or term id", path=what,
                                line=int(missing[0] % max(n_rows, 1)))


def _aspect_codes(aspects: pd.Series) -> np.ndarray:
    raw, uniques = pd.factorize(_as_str(aspects))
    lookup = np.array([ASPECT_CODES.get(str(u), -1) for u in uniques], dtype=np.int64)
    codes = lookup[raw] if len(raw) else np.zeros(0, dtype=np.int64)
    if (codes < 0).any():
        row = int(np.flatnonzero(codes < 0)[0])
        raise FeatureInputError(
            f"aspect {aspects.iloc[row]!r} is not one of {sorted(ASPECT_CODES)}",
            path="corpus_annotations",
            line=row,
        )
    return codes


def _term_values(values: pd.Series | Mapping[str, float] | None, terms: np.ndarray) -> np.ndarray:
    if values is None:
        return np.full(len(terms), np.nan)
    series = values if isinstance(values, pd.Series) else pd.Series(dict(values), dtype=float)
    series = pd.to_numeric(series, errors="coerce")
    series.index = series.index.astype(str)
    series = series[~series.index.duplicated(keep="first")]
    return series.reindex(terms).to_numpy(dtype=np.float64)


def candidate_features(
    neighbours: pd.DataFrame,
    corpus_annotations: pd.DataFrame,
    ia: IaCounts | pd.Series | Mapping[str, float] | None = None,
    term_depth: pd.Series | Mapping[str, float] | None = None,
    k: int | None = None,
) -> pd.DataFrame:
    """Candidate (protein, term, aspect) rows with golden-rule features.

    Parameters
    ----------
    neighbours : DataFrame, shape (n_pairs, >=3)
        ``query, neighbour, similarity`` from ``KnnIndex.search`` (usually at ``K_max``).
    corpus_annotations : DataFrame, shape (n_annotations, >=3)
        Propagated ``protein, term, aspect`` of the corpus the neighbours were searched in.
    ia : IaCounts, Series or mapping, optional
        ``IaCounts`` (``ia.ia_counts`` of a corpus at or before the candidate cutoff, never the
        release that supplies the labels): the ``ia`` feature of (p, t) is the IA of ``t``
        estimated without p (golden rule). A term -> bits series or mapping is used as is
        (a fixed weight; it leaks when p is in the corpus it was estimated from).
    term_depth : Series or mapping, optional
        Term -> depth in the ontology.
    k : int, optional
        Top-k neighbours per query (after dropping the query itself); ``None`` keeps all.

    Returns
    -------
    DataFrame, shape (n_candidates, 3 + len(FEATURE_COLUMNS))
        ``protein, term, aspect, *FEATURE_COLUMNS``, one row per candidate, sorted by
        protein, aspect code, term. A query with no annotated neighbour has no rows.
    """
    _require_columns(neighbours, ("query", "neighbour", "similarity"), "neighbours")
    _require_columns(corpus_annotations, KEY_COLUMNS, "corpus_annotations")
    _check_k(k)
    sim = _check_similarity(neighbours)
    codes = _Codes.of(neighbours, corpus_annotations)
    q, n, sim, rank = _rank_neighbours(codes.p_codes[:codes.n_rows], codes.p_codes[codes.n_rows:2 * codes.n_rows],
                                       sim, k, codes.n_prot)
    if len(q) == 0 or len(corpus_annotations) == 0:
        return _no_candidates()
    corpus = _CorpusIndex.of(codes)
    groups = _Candidates.of(corpus, codes.n_terms, (q, n, sim, rank))
    if groups is None:
        return _no_candidates()
    return _feature_frame(codes, corpus, groups, (q, n, sim), (ia, term_depth))


def _no_candidates() -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series([], dtype=object if c in KEY_COLUMNS else float)
                         for c in list(KEY_COLUMNS) + list(FEATURE_COLUMNS)})


@dataclass(frozen=True)
class _Codes:
    """Sorted factorisation of the proteins and terms: code order equals string order, so every sort
    on codes is a sort on ids, and the output order is a function of ids only."""

    n_rows: int  # neighbour rows; p_codes holds their queries, then neighbours, then corpus proteins
    p_codes: np.ndarray
    protein_ids: np.ndarray
    t_raw: np.ndarray
    term_ids: np.ndarray
    a_raw: np.ndarray

    @property
    def n_prot(self) -> int:
        return len(self.protein_ids)

    @property
    def n_terms(self) -> np.int64:
        return np.int64(max(len(self.term_ids), 1))

    @classmethod
    def of(cls, neighbours: pd.DataFrame, corpus_annotations: pd.DataFrame) -> "_Codes":
        a_raw = _aspect_codes(corpus_annotations["aspect"])
        n_rows = len(neighbours)
        ids = pd.concat([_as_str(neighbours["query"]), _as_str(neighbours["neighbour"]),
                         _as_str(corpus_annotations["protein"])], ignore_index=True)
        p_codes, protein_ids = pd.factorize(ids, sort=True)
        p_codes = p_codes.astype(np.int64)
        t_raw, term_ids = pd.factorize(_as_str(corpus_annotations["term"]), sort=True)
        _check_present(p_codes[:2 * n_rows], "neighbours", n_rows)
        _check_present(np.concatenate([p_codes[2 * n_rows:], t_raw]), "corpus_annotations",
                       len(corpus_annotations))
        return cls(n_rows, p_codes, np.asarray(protein_ids, dtype=object), t_raw,
                   np.asarray(term_ids, dtype=object), a_raw)


@dataclass(frozen=True)
class _CorpusIndex:
    """Deduplicated corpus as sorted keys (protein, aspect, term), indexed by protein (CSR), and the
    (protein, aspect) pairs annotated in it."""

    ann_key: np.ndarray
    ann_a: np.ndarray
    ann_t: np.ndarray
    ann_ptr: np.ndarray
    pa_key: np.ndarray
    pa_ptr: np.ndarray

    @classmethod
    def of(cls, codes: _Codes) -> "_CorpusIndex":
        n_terms, n_rows = codes.n_terms, codes.n_rows
        ann_key = _sorted_unique((codes.p_codes[2 * n_rows:] * 3 + codes.a_raw) * n_terms
                                 + codes.t_raw.astype(np.int64))
        ann_pa = ann_key // n_terms
        ann_p, ann_a, ann_t = ann_pa // 3, ann_pa % 3, ann_key % n_terms
        ann_ptr = np.searchsorted(ann_p, np.arange(codes.n_prot + 1))
        pa_key = _sorted_unique(ann_pa)
        pa_ptr = np.searchsorted(pa_key // 3, np.arange(codes.n_prot + 1))
        return cls(ann_key, ann_a, ann_t, ann_ptr, pa_key, pa_ptr)


@dataclass(frozen=True)
class _Candidates:
    """One row per (query, aspect, term) a neighbour proposed, with its neighbour statistics."""

    key: np.ndarray
    count: np.ndarray
    sim_max: np.ndarray
    sim_sum: np.ndarray
    best_rank: np.ndarray
    n_terms: np.int64

    @property
    def qa(self) -> np.ndarray:
        return self.key // self.n_terms

    @classmethod
    def of(cls, corpus: _CorpusIndex, n_terms: np.int64, ranked: tuple) -> "_Candidates | None":
        """Every (neighbour row, neighbour's annotation), grouped by (query, aspect, term); None: none."""
        q, n, sim, rank = ranked
        counts = corpus.ann_ptr[n + 1] - corpus.ann_ptr[n]
        idx = _ranges(corpus.ann_ptr[n], counts)
        rep = np.repeat(np.arange(len(q)), counts)
        key = (q[rep] * 3 + corpus.ann_a[idx]) * n_terms + corpus.ann_t[idx]
        order = np.argsort(key, kind="stable")
        key_s, sim_s, rank_s = key[order], sim[rep][order], rank[rep][order]
        starts = _group_starts(key_s)
        if len(starts) == 0:
            return None
        return cls(key_s[starts], np.diff(np.concatenate([starts, [len(key_s)]])).astype(np.float64),
                   np.maximum.reduceat(sim_s, starts), np.add.reduceat(sim_s, starts),
                   np.minimum.reduceat(rank_s, starts), n_terms)


def _feature_frame(codes: _Codes, corpus: _CorpusIndex, cand: _Candidates, searched: tuple,
                   weights: tuple) -> pd.DataFrame:
    """The feature columns of every candidate (``searched``: ranked queries, neighbours, similarities;
    ``weights``: the IA and depth term weights)."""
    q, n, sim = searched
    ia, term_depth = weights
    n_prot, n_terms = codes.n_prot, codes.n_terms
    cand_qa = cand.qa
    cand_q, cand_a, cand_t = cand_qa // 3, cand_qa % 3, cand.key % n_terms
    # Per-query neighbour summaries (label-free for the query itself).
    k_eff = np.bincount(q, minlength=n_prot).astype(np.float64)[cand_q]
    sim_total = np.bincount(q, weights=sim, minlength=n_prot)[cand_q]
    q_starts = _group_starts(q)
    pa_counts = corpus.pa_ptr[n + 1] - corpus.pa_ptr[n]
    pa_idx = _ranges(corpus.pa_ptr[n], pa_counts)
    in_aspect = np.bincount(np.repeat(q, pa_counts) * 3 + corpus.pa_key[pa_idx] % 3,
                            minlength=n_prot * 3)[cand_qa].astype(np.float64)
    aspect_names = np.array(sorted(ASPECT_CODES, key=ASPECT_CODES.get), dtype=object)
    out = pd.DataFrame({
        "protein": codes.protein_ids[cand_q],
        "term": codes.term_ids[cand_t],
        "aspect": aspect_names[cand_a],
        "sim_max": cand.sim_max,
        "sim_mean": cand.sim_sum / cand.count,
        "sim_sum": cand.sim_sum,
        "vote_share": cand.count / k_eff,
        "weighted_vote_share": np.where(sim_total > 0, cand.sim_sum / np.where(sim_total > 0, sim_total, 1.0), 0.0),
        "best_rank": cand.best_rank.astype(np.int64),
        "top_similarity": sim[q_starts][np.searchsorted(q[q_starts], cand_q)],
        "aspect_neighbour_share": in_aspect / k_eff,
        "corpus_prior": _loo_prior(corpus, cand, n_terms),
        "ia": _ia_values(ia, codes.protein_ids, cand_q, codes.term_ids, cand_t),
        "depth": _term_values(term_depth, codes.term_ids)[cand_t],
        "n_candidates": np.bincount(cand_qa, minlength=n_prot * 3)[cand_qa].astype(np.int64),
        "aspect_code": cand_a.astype(np.int64),
    })
    return out[list(KEY_COLUMNS) + list(FEATURE_COLUMNS)]


def _loo_prior(corpus: _CorpusIndex, cand: _Candidates, n_terms: np.int64) -> np.ndarray:
    """Leave-one-out corpus prior: the scored protein's own contribution subtracted, so the value
    equals the prior of a corpus from which its labels were removed."""
    cand_qa = cand.qa
    cand_a, cand_t = cand_qa % 3, cand.key % n_terms
    term_count = np.bincount(corpus.ann_a * n_terms + corpus.ann_t, minlength=int(3 * n_terms))
    aspect_count = np.bincount(corpus.pa_key % 3, minlength=3)
    numer = term_count[cand_a * n_terms + cand_t] - _contains(corpus.ann_key, cand.key)
    denom = (aspect_count[cand_a] - _contains(corpus.pa_key, cand_qa)).astype(np.float64)
    safe = np.where(denom > 0, denom, 1.0)
    return np.where(denom > 0, numer / safe, 0.0)


def _ia_values(ia, protein_ids: np.ndarray, cand_q: np.ndarray, term_ids: np.ndarray,
               cand_t: np.ndarray) -> np.ndarray:
    """The ``ia`` column: leave-one-out per candidate with ``IaCounts``, else per term."""
    if not isinstance(ia, IaCounts):
        return _term_values(ia, term_ids)[cand_t]
    return ia.leave_one_out(protein_ids[cand_q], term_ids[cand_t])


def _contains(sorted_unique: np.ndarray, values: np.ndarray) -> np.ndarray:
    """1 where ``values`` occur in ``sorted_unique``, else 0 (int64, shape of ``values``)."""
    if len(sorted_unique) == 0:
        return np.zeros(len(values), dtype=np.int64)
    pos = np.minimum(np.searchsorted(sorted_unique, values), len(sorted_unique) - 1)
    return (sorted_unique[pos] == values).astype(np.int64)


def golden_rule_violations(
    protein_ids: Iterable[str],
    build_features: Callable[[pd.DataFrame], pd.DataFrame],
    corpus_annotations: pd.DataFrame,
    *,
    atol: float = 1e-12,
) -> list[tuple[str, str]]:
    """Audit the golden rule: features must not move when a protein's own labels vanish.

    For each protein ``p`` in ``protein_ids`` the features are rebuilt by
    ``build_features(corpus_annotations without p's rows)`` and compared with
    ``build_features(corpus_annotations)`` on ``p``'s rows.

    Parameters
    ----------
    protein_ids : iterable of str
        The sampled proteins to audit (sample them beforehand; the audit is one rebuild each).
    build_features : callable
        ``corpus_annotations -> DataFrame[protein, term, aspect, *features]``. Every column
        other than the keys (and ``label``) is audited. For speed, close over a neighbour frame
        restricted to the audited proteins: a protein's features depend on its rows only.
    corpus_annotations : DataFrame
        The full ``protein, term, aspect`` corpus.
    atol : float
        Absolute tolerance of the comparison (NaN equals NaN).

    Returns
    -------
    list of (protein, feature)
        One entry per differing feature; ``(protein, "candidates")`` when the candidate set
        itself changed. Empty when the rule holds.
    """
    _require_columns(corpus_annotations, ("protein",), "corpus_annotations")
    full = build_features(corpus_annotations)
    _require_columns(full, KEY_COLUMNS, "build_features output")
    feature_cols = [c for c in full.columns if c not in KEY_COLUMNS and c != "label"]
    corpus_protein = corpus_annotations["protein"].astype(str)
    violations: list[tuple[str, str]] = []
    for protein in dict.fromkeys(str(p) for p in protein_ids):
        reduced = build_features(corpus_annotations[corpus_protein != protein])
        violations.extend((protein, col) for col in compare_protein_features(
            full, reduced, protein, feature_cols, atol=atol))
    return violations


def compare_protein_features(before: pd.DataFrame, after: pd.DataFrame, protein: str,
                             feature_cols: Iterable[str], *, atol: float = 1e-12) -> list[str]:
    """Features of ``protein`` that differ between two feature frames.

    Rows are matched on ``(aspect, term)``; ``"candidates"`` is reported first when the two
    frames propose different candidate sets (the common rows are then compared). A feature
    column missing from ``after`` differs. NaN equals NaN; tolerance ``atol``, no relative one.
    """
    feature_cols = list(feature_cols)
    present = [col for col in feature_cols if col in after.columns and col in before.columns]
    before_keys, before_values = _protein_rows(before, protein, present)
    after_keys, after_values = _protein_rows(after, protein, present)
    differing: list[str] = []
    if not before_keys.equals(after_keys):
        differing.append("candidates")
        common = before_keys.intersection(after_keys)
        before_values = pd.DataFrame(before_values, index=before_keys).loc[common].to_numpy()
        after_values = pd.DataFrame(after_values, index=after_keys).loc[common].to_numpy()
    # np.allclose of each column is np.isclose over its rows, all true: every column compared at once
    close = np.isclose(before_values, after_values, rtol=0.0, atol=atol, equal_nan=True).all(axis=0)
    same = dict(zip(present, close))
    differing.extend(col for col in feature_cols if not same.get(col, False))
    return differing


def _protein_rows(frame: pd.DataFrame, protein: str, columns: list[str]) -> tuple[pd.MultiIndex, np.ndarray]:
    """The ``(aspect, term)`` keys of ``protein``'s rows, sorted, and those rows' ``columns`` as float64
    (shape (n_rows, len(columns))); only the protein's rows are taken, column by column."""
    mine = (frame["protein"].astype(str) == protein).to_numpy()
    keys = pd.MultiIndex.from_arrays([np.asarray(frame[c].array[mine], dtype=object) for c in ("aspect", "term")],
                                     names=["aspect", "term"])
    order = keys.argsort()
    values = np.column_stack([frame[c].to_numpy(dtype=np.float64)[mine] for c in columns]) if columns else \
        np.zeros((int(mine.sum()), 0))
    return keys[order], values[order]
