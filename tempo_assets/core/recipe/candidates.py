"""The recipe's candidates: the union of four sources, and golden-rule features for each candidate.

A candidate is a ``(protein, term, aspect)`` triple proposed by at least one source:

- ``knn``: a term of one of the protein's top-k k-mer KNN neighbours (``features.candidate_features``);
- ``diamond``: a term of one of its top DIAMOND hits in the corpus (the corpus the KNN searched);
- ``goa``: a term of its own non-experimental GOA annotations at the cutoff (propagated, per
  evidence-code group of ``vocabulary.EVIDENCE_GROUPS``);
- ``prior``: one of the ``prior_top`` most frequent terms of the aspect in the corpus.

Features (``ALL_FEATURE_COLUMNS``): the KNN ones (``features.FEATURE_COLUMNS``, zero similarity and
no rank where the KNN did not propose the term), the DIAMOND ones (``DIAMOND_COLUMNS``), the
non-experimental GOA ones (``GOA_COLUMNS``), and which sources proposed it (``SOURCE_COLUMNS``).

The golden rule (docs/PROTOCOL.md) holds for each feature and for the candidate set itself:

- a protein is never its own hit (``query == subject`` rows are dropped before ranking, and the
  hit list is truncated at ``hit_top`` after that), as it is never its own KNN neighbour;
- the corpus prior, and so the ``prior`` candidates, leave the scored protein out: the top terms of
  protein p are the top terms of a corpus without p's labels (its counts minus its own terms);
- the IA of a candidate is leave-one-out (``ia.IaCounts``);
- the non-experimental annotations are inputs at the cutoff, not labels (docs/PROTOCOL.md: they feed
  the GOA baseline, never the ground truth), read at the candidate release, never later.

``tempo audit-features`` and the blocking check ``reranker_labels__golden_rule`` rebuild every
column here without the audited protein's labels (``core.audits``).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from tempo_assets.core.labels.annotations import propagate_annotations, require_columns
from tempo_assets.core.base.arrays import concat_ranges as _ranges, positions_in
from tempo_assets.core.base.errors import TempoInputError
from tempo_assets.core.recipe.features import (
    ASPECT_CODES, FEATURE_COLUMNS, KEY_COLUMNS, FeatureInputError, _contains, _term_values, candidate_features,
    prepare_neighbours,
)
from tempo_assets.core.labels.ia import IaCounts
from tempo_assets.core.base.vocabulary import EVIDENCE_GROUPS, evidence_group

SOURCES: tuple[str, ...] = ("knn", "diamond", "goa", "prior")
HIT_COLUMNS: tuple[str, ...] = ("query", "subject", "pident", "bitscore", "qcov", "scov")
HIT_TOP = 25  # DIAMOND hits kept per query after dropping the self hit
PRIOR_TOP = 25  # prior candidates per (protein, aspect)

DIAMOND_COLUMNS: tuple[str, ...] = (
    "dmd_pident_max",  # highest percent identity among hits carrying the term
    "dmd_bitscore_max",  # highest bitscore among hits carrying the term
    "dmd_qcov_max",  # highest query coverage (%) among hits carrying the term
    "dmd_scov_max",  # highest subject coverage (%) among hits carrying the term
    "dmd_best_rank",  # best (1-based) bitscore rank of a hit carrying the term (NaN: none)
    "dmd_vote",  # summed bitscore of hits carrying the term / summed bitscore of all hits
    "dmd_hit_share",  # hits carrying the term / hits of the protein
    "dmd_top_pident",  # percent identity of the protein's best hit (0: no hit)
    "dmd_n_hits",  # hits of the protein (after dropping itself, at most hit_top)
)
GOA_COLUMNS: tuple[str, ...] = tuple(f"goa_{g}" for g in EVIDENCE_GROUPS) + (
    "goa_groups",  # evidence groups annotating the protein with the term or a descendant
    "goa_aspect",  # the protein has a non-experimental annotation in the aspect
)
SOURCE_COLUMNS: tuple[str, ...] = tuple(f"src_{s}" for s in SOURCES)
ALL_FEATURE_COLUMNS: tuple[str, ...] = FEATURE_COLUMNS + DIAMOND_COLUMNS + GOA_COLUMNS + SOURCE_COLUMNS
FEATURE_SETS: dict[str, tuple[str, ...]] = {"knn": FEATURE_COLUMNS, "all": ALL_FEATURE_COLUMNS}
NONEXP_COLUMNS: tuple[str, ...] = ("protein", "term", "aspect", "group")

# KNN features of a candidate no neighbour proposed: no similarity, no vote, no rank
_KNN_ABSENT = {"sim_max": 0.0, "sim_mean": 0.0, "sim_sum": 0.0, "vote_share": 0.0,
               "weighted_vote_share": 0.0, "best_rank": np.nan}
_PER_CANDIDATE = ("corpus_prior", "ia", "depth", "n_candidates", "aspect_code", "top_similarity",
                  "aspect_neighbour_share")


@dataclass(frozen=True)
class CandidateSource:
    """Everything needed to build (and label) candidates at one cutoff for one embedder: data only.

    ``neighbours`` (``query, neighbour, similarity[, rank]``, searched at ``K_max``) and the
    propagated ``corpus_annotations`` they were searched in; ``ground_truth``
    (``protein, term, aspect[, mode]``) and ``known`` (``protein, term, aspect``) of the growth
    that labels the candidates; ``ia`` and ``term_depth`` term weights for the features;
    ``hits`` (DIAMOND hits of the queries in the same corpus, ``blast.homology_hits``) and
    ``nonexp`` (the queries' non-experimental annotations at the cutoff per evidence group,
    ``nonexp_groups``). Free functions take it: ``recipe_features`` here, the labelling in
    ``assets.recipe``.
    """

    neighbours: pd.DataFrame
    corpus_annotations: pd.DataFrame
    ground_truth: pd.DataFrame | None = None
    known: pd.DataFrame | None = None
    ia: pd.Series | Mapping[str, float] | None = None
    term_depth: pd.Series | Mapping[str, float] | None = None
    hits: pd.DataFrame | None = None
    nonexp: pd.DataFrame | None = None


def parse_sources(spec: str | Sequence[str]) -> tuple[str, ...]:
    """``"knn+diamond"`` (or a sequence of names) -> the sources in ``SOURCES`` order; knn is required."""
    names = spec.split("+") if isinstance(spec, str) else list(spec)
    unknown = sorted(set(names) - set(SOURCES))
    if unknown or "knn" not in names:
        raise TempoInputError(f"candidate set {spec!r}: sources must include knn and be among {SOURCES}"
                              + (f" (unknown {unknown})" if unknown else ""), path="grid.candidate_sets")
    return tuple(s for s in SOURCES if s in names)


def feature_set(name: str) -> tuple[str, ...]:
    """The columns of a named feature set (``FEATURE_SETS``)."""
    if name not in FEATURE_SETS:
        raise TempoInputError(f"feature set {name!r} is not one of {sorted(FEATURE_SETS)}", path="grid.feature_sets")
    return FEATURE_SETS[name]


def prepare_hits(hits: pd.DataFrame, top: int | None = HIT_TOP) -> pd.DataFrame:
    """Self hits dropped, one row per (query, subject) (best bitscore), ranked, top ``top`` kept.

    Ranks order hits by (bitscore desc, subject id), so they depend on ids and scores only.
    Returns ``query, subject, pident, bitscore, qcov, scov, rank``.
    """
    require_columns(hits, HIT_COLUMNS, "hits", error=FeatureInputError)
    frame = hits[list(HIT_COLUMNS)].copy()
    frame["query"], frame["subject"] = frame["query"].astype(str), frame["subject"].astype(str)
    for column in HIT_COLUMNS[2:]:
        values = pd.to_numeric(frame[column], errors="coerce")
        if values.isna().any():
            row = int(np.flatnonzero(values.isna().to_numpy())[0])
            raise FeatureInputError(f"non-numeric {column} {hits[column].iloc[row]!r}", path="hits", line=row)
        frame[column] = values.astype(np.float64)
    frame = _drop_self_hits(frame)
    frame = frame.sort_values(["query", "bitscore", "subject"], ascending=[True, False, True], kind="mergesort")
    frame = frame.drop_duplicates(["query", "subject"], keep="first")
    frame["rank"] = frame.groupby("query", sort=False).cumcount() + 1
    if top is not None:
        frame = frame[frame["rank"] <= int(top)]
    return frame.reset_index(drop=True)


def _drop_self_hits(frame: pd.DataFrame) -> pd.DataFrame:
    """A protein is never its own hit (its own labels would be transferred to it)."""
    return frame[frame["query"] != frame["subject"]]


def nonexp_groups(cleaned: pd.DataFrame, ontology, proteins: Iterable[str] | None = None) -> pd.DataFrame:
    """Propagated non-experimental annotations, one row per (protein, term, aspect, evidence group).

    ``cleaned`` is a release's ``non_experimental_cleaned`` frame (``protein, term, evidence``);
    each evidence group (``vocabulary.EVIDENCE_GROUPS``) is propagated on its own, so a row says
    that the protein holds the term or a descendant of it with evidence of that group.
    """
    require_columns(cleaned, ("protein", "term", "evidence"), "non_experimental_cleaned", error=FeatureInputError)
    rows = cleaned
    if proteins is not None:
        rows = rows[rows["protein"].astype(str).isin(set(map(str, proteins)))]
    groups = rows["evidence"].astype(str).map({c: evidence_group(c) for c in rows["evidence"].astype(str).unique()})
    parts = []
    for group in EVIDENCE_GROUPS:
        chosen = rows[(groups == group).to_numpy()]
        if len(chosen):
            parts.append(propagate_annotations(chosen, ontology).assign(group=group))
    if not parts:
        return pd.DataFrame({c: pd.Series([], dtype=object) for c in NONEXP_COLUMNS})
    return pd.concat(parts, ignore_index=True)[list(NONEXP_COLUMNS)]


def _empty(columns: Sequence[str]) -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series([], dtype=object if c in KEY_COLUMNS else float) for c in columns})


def _corpus(corpus_annotations: pd.DataFrame) -> tuple[pd.DataFrame, "_CorpusCodes"]:
    """The corpus as string ids, one row per distinct (protein, term, aspect) (``drop_duplicates``: the first
    of each, in order), and its codes: each column factorised once, the duplicates found on the codes."""
    frame = corpus_annotations[list(KEY_COLUMNS)].astype(str)
    (p, p_ids), (t, t_ids), (a, a_ids) = (pd.factorize(frame[c], use_na_sentinel=False) for c in KEY_COLUMNS)
    first = _first_of_each((p.astype(np.int64) * max(len(t_ids), 1) + t) * max(len(a_ids), 1) + a)[1]
    codes = _CorpusCodes(p[first].astype(np.int64), a[first].astype(np.int64), t[first].astype(np.int64),
                         tuple(np.asarray(ids, dtype=object) for ids in (p_ids, a_ids, t_ids)))
    return frame[first].reset_index(drop=True), codes


def _first_of_each(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(each key's code in first-seen order, the mask of the first row of each key): ``drop_duplicates``
    on integer keys. Codes come in first-seen order, so a row is the first of its key when its code exceeds
    every earlier one."""
    codes, _ = pd.factorize(keys)
    first = np.concatenate(([True], codes[1:] > np.maximum.accumulate(codes)[:-1])) if len(codes) else codes.astype(bool)
    return codes, first


@dataclass(frozen=True)
class _CorpusCodes:
    """The corpus' protein, aspect and term ids as integer codes (first-seen order), and the ids by code:
    factorised once per build, read by the prior candidates and the per-candidate features."""

    p: np.ndarray
    a: np.ndarray
    t: np.ndarray
    uniques: tuple[np.ndarray, np.ndarray, np.ndarray]  # the protein, aspect and term ids by code


def _rows_of(corpus: pd.DataFrame, proteins: pd.Series) -> pd.DataFrame:
    """The corpus rows of ``proteins``, in corpus order: what a join on them reads, without hashing the whole corpus."""
    return corpus[corpus["protein"].isin(proteins.unique())]


def _hit_candidates(hits: pd.DataFrame, corpus: pd.DataFrame, top: int | None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(candidates with the DIAMOND per-term features, per-query hit summaries)."""
    ranked = prepare_hits(hits, top)
    # one reduction per kind (sum, size, first, max, min), not a named aggregation per column: the same kernels
    by_query = ranked.groupby("query", sort=True)
    per_query = by_query["bitscore"].sum().rename("dmd_total").to_frame()
    per_query["dmd_n_hits"] = by_query.size()
    per_query["dmd_top_pident"] = by_query["pident"].first()
    joined = ranked.merge(_rows_of(corpus, ranked["subject"]), left_on="subject", right_on="protein", how="inner")
    by_term = joined.groupby(["query", "aspect", "term"], sort=True)
    grouped = by_term[["pident", "bitscore", "qcov", "scov"]].max().set_axis(list(DIAMOND_COLUMNS[:4]), axis=1)
    grouped["dmd_best_rank"] = by_term["rank"].min()
    grouped["_bits"] = by_term["bitscore"].sum()
    grouped["_n"] = by_term.size()
    grouped = grouped.reset_index().rename(columns={"query": "protein"})
    totals = per_query.reindex(grouped["protein"])
    grouped["dmd_vote"] = np.where(totals["dmd_total"].to_numpy() > 0,
                                   grouped["_bits"].to_numpy() / np.maximum(totals["dmd_total"].to_numpy(), 1e-300), 0.0)
    grouped["dmd_hit_share"] = grouped["_n"].to_numpy() / totals["dmd_n_hits"].to_numpy()
    grouped["dmd_best_rank"] = grouped["dmd_best_rank"].astype(np.float64)
    return grouped.drop(columns=["_bits", "_n"]), per_query.drop(columns="dmd_total")


def _prior_candidates(coded: "_CorpusCodes", queries: np.ndarray, top: int) -> pd.DataFrame:
    """The ``top`` most frequent terms per aspect for each query, counted without the query's own labels.

    The count of term t for protein p is ``n(t) - [p has t]``; ties break on the term id. The
    top ``top`` of p are among the overall top ``top + |own terms of p|`` (a term can drop by one
    only if p holds it), so only those are recounted; a term whose count without p is 0 is none.
    Counted on the corpus' integer codes (``coded``, one row per distinct triple); ``queries`` sorted, distinct.
    """
    if top < 1 or len(queries) == 0 or len(coded.p) == 0:
        return _empty(KEY_COLUMNS)
    protein_ids, aspect_ids, term_ids = coded.uniques
    a = np.array([ASPECT_CODES.get(str(x), -1) for x in aspect_ids], dtype=np.int64)[coded.a]
    by_id = np.argsort(term_ids, kind="stable")  # term codes renumbered in id order: ties break on the id
    id_rank = np.empty(len(term_ids), dtype=np.int64)
    id_rank[by_id] = np.arange(len(term_ids))
    t, term_ids, n_t = id_rank[coded.t], term_ids[by_id], len(term_ids)
    q = pd.Index(queries).get_indexer(pd.Index(protein_ids, dtype=object)).astype(np.int64)[coded.p]  # -1: no query
    named = a >= 0
    term_n = np.bincount(a[named] * n_t + t[named], minlength=3 * n_t)
    aspect_names = sorted(ASPECT_CODES, key=ASPECT_CODES.get)
    parts = []
    for code, aspect in enumerate(aspect_names):
        n_in = term_n[code * n_t:(code + 1) * n_t]
        terms = np.flatnonzero(n_in > 0)
        order = np.lexsort((terms, -n_in[terms]))  # the corpus ranking: count desc, term id
        ranked_t, ranked_n = terms[order], n_in[terms][order]
        mine = (a == code) & (q >= 0)
        own_key = np.sort(q[mine] * n_t + t[mine])  # a deduplicated corpus: one row per own term
        limit = np.minimum(top + np.bincount(q[mine], minlength=len(queries)), len(ranked_t))
        pair_q = np.repeat(np.arange(len(queries), dtype=np.int64), limit)
        pos = _ranges(np.zeros(len(queries), dtype=np.int64), limit)
        pair_t = ranked_t[pos]
        loo = ranked_n[pos] - _contains(own_key, pair_q * n_t + pair_t)
        keep = loo > 0  # a term only the protein holds is no term of the corpus without it
        pair_q, pair_t, loo = pair_q[keep], pair_t[keep], loo[keep]
        order = np.lexsort((pair_t, -loo, pair_q))
        pair_q, pair_t = pair_q[order], pair_t[order]
        head = np.arange(len(pair_q)) - np.searchsorted(pair_q, pair_q, side="left") < int(top)
        if head.any():
            parts.append(pd.DataFrame({"protein": queries[pair_q[head]], "term": term_ids[pair_t[head]],
                                       "aspect": aspect}))
    return pd.concat(parts, ignore_index=True) if parts else _empty(KEY_COLUMNS)


def recipe_features(
    source: CandidateSource,
    k: int | None = None,
    sources: str | Sequence[str] = SOURCES,
    prior_top: int = PRIOR_TOP,
    hit_top: int | None = HIT_TOP,
) -> pd.DataFrame:
    """Candidates of the union of ``sources`` with every feature of ``ALL_FEATURE_COLUMNS``.

    Parameters
    ----------
    source : CandidateSource
        Its ``neighbours``, ``corpus_annotations``, ``ia`` and ``term_depth`` as for
        ``features.candidate_features`` (KNN neighbours, the propagated experimental corpus they
        were searched in, leave-one-out IA counts, term depths); its ``hits``
        (``query, subject, pident, bitscore, qcov, scov``: DIAMOND hits of the queries in the same
        corpus, ``blast.homology_hits``; none: no hit) and ``nonexp`` (``protein, term, aspect,
        group``: the queries' propagated non-experimental annotations at the cutoff,
        ``nonexp_groups``). Its ground truth is not read.
    k : top-k KNN neighbours (``None``: all).
    sources : the candidate sources to unite (``parse_sources``; knn always).
    prior_top : prior candidates per (protein, aspect); hit_top : hits kept per protein.

    Returns
    -------
    DataFrame ``protein, term, aspect, *ALL_FEATURE_COLUMNS``, one row per candidate, sorted by
    protein, aspect code, term. Queries are the proteins of ``neighbours`` and ``hits``.
    """
    sources = parse_sources(sources)
    columns = list(KEY_COLUMNS) + list(ALL_FEATURE_COLUMNS)
    corpus, coded = _corpus(source.corpus_annotations)
    # no term weights: the KNN part's per-candidate columns (IA, depth...) are computed once, below
    knn = candidate_features(source.neighbours, source.corpus_annotations, k=k).astype(
        {"protein": str, "term": str, "aspect": str})
    queries = set(source.neighbours["query"].astype(str))
    if source.hits is not None:
        queries |= set(source.hits["query"].astype(str))
    hit_feats, hit_query = _hit_part(source.hits, corpus, hit_top)
    goa = _goa_part(source.nonexp, queries)
    proposed = {"knn": knn}
    if "diamond" in sources:
        proposed["diamond"] = hit_feats
    if "goa" in sources:
        proposed["goa"] = goa
    if "prior" in sources:
        proposed["prior"] = _prior_candidates(coded, np.array(sorted(queries), dtype=object), int(prior_top))
    out, rows = _union(proposed)
    if out.empty:
        return _empty(columns)
    for name in SOURCES:
        flag = np.zeros(len(out))
        flag[rows.get(name, [])] = 1.0
        out[f"src_{name}"] = flag
    for column, absent in _KNN_ABSENT.items():  # NaN best rank where no neighbour proposed the term
        values = np.full(len(out), absent, dtype=np.float64)
        values[rows["knn"]] = knn[column].to_numpy(dtype=np.float64)
        out[column] = values
    out = _with_goa_features(_with_hit_features(out, hit_feats, hit_query), goa)
    out = _per_candidate(out, source.neighbours, corpus, (source.ia, source.term_depth), k, coded=coded)
    return out.iloc[_candidate_order(out)][columns].reset_index(drop=True)


def _union(proposed: Mapping[str, pd.DataFrame]) -> tuple[pd.DataFrame, dict[str, np.ndarray]]:
    """The distinct (protein, term, aspect) keys of the sources' frames in first-seen order (one row per
    candidate), and per source the candidate row of each of its frame's rows (ids factorised together)."""
    ids = {c: pd.concat([frame[c] for frame in proposed.values()], ignore_index=True) for c in KEY_COLUMNS}
    key = np.zeros(len(ids["protein"]), dtype=np.int64)
    for column in KEY_COLUMNS:
        codes = pd.factorize(ids[column], use_na_sentinel=False)[0].astype(np.int64)
        key = key * (int(codes.max(initial=-1)) + 1) + codes
    row, first = _first_of_each(key)  # first-seen order: a candidate's row is its code
    out = pd.DataFrame({c: ids[c][first].reset_index(drop=True) for c in KEY_COLUMNS})
    ends = np.cumsum([len(frame) for frame in proposed.values()])
    return out, {name: row[end - len(frame):end] for (name, frame), end in zip(proposed.items(), ends)}


def _candidate_order(out: pd.DataFrame) -> np.ndarray:
    """The rows sorted by protein, aspect code, term (stable): sorted codes of the ids, not the strings."""
    protein, term = (pd.factorize(out[c].to_numpy(dtype=object), sort=True)[0] for c in ("protein", "term"))
    return np.lexsort((term, out["aspect_code"].to_numpy(dtype=np.float64), protein))


def _hit_part(hits: pd.DataFrame | None, corpus: pd.DataFrame,
              hit_top: int | None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(DIAMOND candidates with their per-term features, per-query hit summaries); empty without hits.
    The per-query summaries are features of every candidate, whatever the sources."""
    if hits is not None:
        return _hit_candidates(hits, corpus, hit_top)
    return (_empty(list(KEY_COLUMNS) + [c for c in DIAMOND_COLUMNS if c not in ("dmd_n_hits", "dmd_top_pident")]),
            pd.DataFrame({"dmd_n_hits": pd.Series([], dtype=float), "dmd_top_pident": pd.Series([], dtype=float)}))


def _goa_part(nonexp: pd.DataFrame | None, queries: set[str]) -> pd.DataFrame:
    """The queries' non-experimental annotations (``NONEXP_COLUMNS``), deduplicated; empty without them."""
    if nonexp is None:
        return _empty(NONEXP_COLUMNS)
    require_columns(nonexp, NONEXP_COLUMNS, "nonexp", error=FeatureInputError)
    goa = nonexp[list(NONEXP_COLUMNS)].astype(str).drop_duplicates()
    return goa[goa["protein"].isin(queries)]


def _with_hit_features(out: pd.DataFrame, hit_feats: pd.DataFrame, hit_query: pd.DataFrame) -> pd.DataFrame:
    """``out`` with the DIAMOND columns (0 where no hit carries the term)."""
    out = out.merge(hit_feats, on=list(KEY_COLUMNS), how="left")
    out[list(DIAMOND_COLUMNS[:4]) + ["dmd_vote", "dmd_hit_share"]] = out[
        list(DIAMOND_COLUMNS[:4]) + ["dmd_vote", "dmd_hit_share"]].fillna(0.0)
    per_query = hit_query.reindex(out["protein"])
    out["dmd_top_pident"] = per_query["dmd_top_pident"].fillna(0.0).to_numpy(dtype=np.float64)
    out["dmd_n_hits"] = per_query["dmd_n_hits"].fillna(0.0).to_numpy(dtype=np.float64)
    return out


def _with_goa_features(out: pd.DataFrame, goa: pd.DataFrame) -> pd.DataFrame:
    """``out`` with the non-experimental GOA columns (``GOA_COLUMNS``): 1.0 where the protein holds the term
    (``goa_<group>``: with evidence of that group) or the aspect (``goa_aspect``), else 0.0.

    Looked up on integer codes of the ids, factorised together: an id equality is a code equality."""
    n_out = len(out)
    p, t, a = (pd.factorize(pd.concat([out[c], goa[c]], ignore_index=True))[0].astype(np.int64) for c in KEY_COLUMNS)
    protein_aspect = p * (int(a.max(initial=-1)) + 1) + a
    key = protein_aspect * (int(t.max(initial=-1)) + 1) + t
    groups = goa["group"].to_numpy(dtype=object)
    group_cols = [f"goa_{g}" for g in EVIDENCE_GROUPS]
    for group, column in zip(EVIDENCE_GROUPS, group_cols):
        out[column] = _contains(np.sort(key[n_out:][groups == group]), key[:n_out]).astype(np.float64)
    out["goa_groups"] = out[group_cols].sum(axis=1)
    out["goa_aspect"] = _contains(np.sort(protein_aspect[n_out:]), protein_aspect[:n_out]).astype(np.float64)
    return out


@dataclass(frozen=True)
class _JointCodes:
    """The candidates' (first ``n_out`` rows) and the corpus' protein, aspect and term ids as integer codes
    factorised together, so an id equality is a code equality; strings stay at the edges."""

    n_out: int
    p: np.ndarray
    a: np.ndarray
    t: np.ndarray
    uniques: tuple[np.ndarray, np.ndarray, np.ndarray]  # the protein, aspect and term ids by code

    @classmethod
    def of(cls, out: pd.DataFrame, coded: _CorpusCodes) -> "_JointCodes":
        """The corpus' codes kept; the candidates' ids factorised after the corpus' distinct ids (which keep
        their codes, being distinct and first), so only the candidates and the distinct ids are hashed."""
        joint = []
        for column, corpus_codes, corpus_ids in zip(("protein", "aspect", "term"), (coded.p, coded.a, coded.t),
                                                    coded.uniques):
            codes, ids = pd.factorize(pd.concat([pd.Series(corpus_ids, dtype=out[column].dtype), out[column]],
                                                ignore_index=True), use_na_sentinel=False)
            joint.append((np.concatenate([codes[len(corpus_ids):].astype(np.int64), corpus_codes]),
                          np.asarray(ids, dtype=object)))
        (p, p_ids), (a, a_ids), (t, t_ids) = joint
        return cls(len(out), p, a, t, (p_ids, a_ids, t_ids))

    def keys(self, *, term: bool) -> tuple[np.ndarray, np.ndarray]:
        """(candidates' keys, corpus keys) of (protein, aspect[, term])."""
        n_a, n_t = len(self.uniques[1]), len(self.uniques[2])
        key = self.p * n_a + self.a
        if term:
            key = key * n_t + self.t
        return key[:self.n_out], key[self.n_out:]


def _per_candidate(out: pd.DataFrame, neighbours: pd.DataFrame, corpus: pd.DataFrame, weights: tuple,
                   k: int | None, coded: _CorpusCodes) -> pd.DataFrame:
    """The features every candidate has whatever proposed it: leave-one-out prior and IA, depth, counts
    (on integer codes of the ids; ``corpus`` holds each (protein, term, aspect) once; ``coded``: its codes)."""
    ia, term_depth = weights
    codes = _JointCodes.of(out, coded)
    n_a, n_t = len(codes.uniques[1]), len(codes.uniques[2])
    out_pat, corpus_pat = codes.keys(term=True)
    out_pa, corpus_pa = codes.keys(term=False)
    out_a, out_t = codes.a[:codes.n_out], codes.t[:codes.n_out]
    corpus_pairs = _sorted_unique(corpus_pa)
    term_n = np.bincount(codes.a[codes.n_out:] * n_t + codes.t[codes.n_out:], minlength=n_a * n_t)
    aspect_n = np.bincount(corpus_pairs % n_a, minlength=n_a)
    numer = term_n[out_a * n_t + out_t].astype(np.float64) - _contains(np.sort(corpus_pat), out_pat)
    denom = aspect_n[out_a].astype(np.float64) - _contains(corpus_pairs, out_pa)
    out["corpus_prior"] = np.where(denom > 0, numer / np.where(denom > 0, denom, 1.0), 0.0)
    term_ids = codes.uniques[2]
    if isinstance(ia, IaCounts):
        out["ia"] = ia.leave_one_out(out["protein"].to_numpy(dtype=object), term_ids[out_t])
    else:
        out["ia"] = _term_values(ia, term_ids)[out_t]
    out["depth"] = _term_values(term_depth, term_ids)[out_t]
    out["n_candidates"] = np.bincount(out_pa, minlength=len(codes.uniques[0]) * n_a)[out_pa].astype(np.float64)
    out["aspect_code"] = np.array([ASPECT_CODES.get(a, np.nan) for a in codes.uniques[1]], dtype=np.float64)[out_a]
    top, share = _knn_summaries(neighbours, k, codes.uniques[0], corpus_pairs, n_a)
    out["top_similarity"] = top[codes.p[:codes.n_out]]
    out["aspect_neighbour_share"] = share[out_pa]
    return out


def _knn_summaries(neighbours: pd.DataFrame, k: int | None, protein_ids: np.ndarray, corpus_pairs: np.ndarray,
                   n_a: int) -> tuple[np.ndarray, np.ndarray]:
    """Per protein code: the nearest neighbour's similarity; per (protein, aspect) code ``p * n_a + a``: the
    neighbours annotated in the aspect (``corpus_pairs``: sorted codes of the corpus' (protein, aspect) pairs)
    / the neighbours. 0 where the protein has none."""
    nb = prepare_neighbours(neighbours, k)
    q = positions_in(nb["query"], protein_ids)
    n = positions_in(nb["neighbour"], protein_ids)
    scored = q >= 0  # a query with no candidate row is not read
    q, n, rank, sim = q[scored], n[scored], nb["rank"].to_numpy()[scored], nb["similarity"].to_numpy(np.float64)[scored]
    top = np.zeros(len(protein_ids), dtype=np.float64)
    top[q[rank == 1]] = sim[rank == 1]
    size = np.bincount(q, minlength=len(protein_ids))
    aspects = np.arange(n_a, dtype=np.int64)
    annotated = _contains(corpus_pairs, (n[:, None] * n_a + aspects).ravel()).reshape(len(n), n_a) * (n >= 0)[:, None]
    in_aspect = np.bincount((q[:, None] * n_a + aspects).ravel(), weights=annotated.ravel(),
                            minlength=len(protein_ids) * n_a)
    per_pair = np.repeat(size, n_a)
    share = np.where(per_pair > 0, in_aspect / np.maximum(per_pair, 1), 0.0)
    return top, share


def _sorted_unique(keys: np.ndarray) -> np.ndarray:
    """``np.unique(keys)`` by a sort (numpy's hashing unique was 10x slower on a full corpus' int64 keys)."""
    ordered = np.sort(keys)
    return ordered[np.concatenate(([True], ordered[1:] != ordered[:-1]))] if len(ordered) else ordered


def restrict_sources(features: pd.DataFrame, sources: str | Sequence[str]) -> pd.DataFrame:
    """The candidates of ``sources`` out of a ``recipe_features`` frame built over more sources.

    Equal to ``recipe_features(..., sources=sources)`` on the same inputs: the rows some source of
    ``sources`` proposed, the other sources' flags cleared and ``n_candidates`` recounted (every
    other feature of a candidate does not depend on which sources are united).
    """
    sources = parse_sources(sources)
    flags = [f"src_{s}" for s in sources]
    out = features[(features[flags] > 0).any(axis=1).to_numpy()].reset_index(drop=True)
    for name in SOURCE_COLUMNS:
        if name not in flags:
            out[name] = 0.0
    protein, aspect = (pd.factorize(out[c].to_numpy(dtype=object))[0].astype(np.int64) for c in ("protein", "aspect"))
    pairs = protein * (int(aspect.max(initial=-1)) + 1) + aspect
    out["n_candidates"] = np.bincount(pairs, minlength=1)[pairs].astype(np.float64)
    return out

