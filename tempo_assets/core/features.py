"""Candidate features for the reranker, built from a protein's neighbours only.

A candidate is a (protein, term, aspect) triple where the term is carried by at least one
of the protein's top-k neighbours in the KNN corpus. Every feature obeys the golden rule of
``PROTOCOL.md``: it is identical when the scored protein's own labels are removed from the
corpus. Concretely

- the protein is never its own neighbour (rows with ``query == neighbour`` are dropped);
- the corpus prior of a term is computed leave-one-out when the scored protein is itself in
  the corpus (its own contribution is subtracted from numerator and denominator);
- duplicated input rows collapse, and neighbours are ranked by (similarity desc, neighbour id),
  so nothing depends on row order, replication or label-derived bucket ids.

``ia`` and ``term_depth`` are term-level inputs held fixed by the audit: depth comes from the
ontology alone; the IA series must come from a corpus bound to the candidate cutoff (see
``candidate_features``).
"""
from __future__ import annotations

from typing import Callable, Iterable, Mapping

import numpy as np
import pandas as pd

from tempo_assets.core.errors import TempoInputError

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
    "ia",  # information accretion of the term (NaN when unknown)
    "depth",  # depth of the term in the ontology (NaN when unknown)
    "n_candidates",  # candidate terms for this protein in this aspect
    "aspect_code",  # BP=0, MF=1, CC=2
)

KEY_COLUMNS: tuple[str, str, str] = ("protein", "term", "aspect")


class FeatureInputError(TempoInputError):
    """A neighbour or annotation frame handed to the feature builder is malformed."""


def _require_columns(frame: pd.DataFrame, columns: Iterable[str], what: str) -> None:
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise FeatureInputError(f"missing column(s) {missing}; has {list(frame.columns)}", path=what)


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
    if k is not None and int(k) < 1:
        raise FeatureInputError(f"k must be >= 1, got {k}", path="neighbours")
    frame = pd.DataFrame(
        {
            "query": neighbours["query"].astype(str).to_numpy(),
            "neighbour": neighbours["neighbour"].astype(str).to_numpy(),
            "similarity": pd.to_numeric(neighbours["similarity"], errors="coerce").to_numpy(
                dtype=np.float64
            ),
        }
    )
    bad = ~np.isfinite(frame["similarity"].to_numpy())
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        raise FeatureInputError(
            f"non-finite similarity {neighbours['similarity'].iloc[row]!r} "
            f"(query {frame['query'].iloc[row]!r}, neighbour {frame['neighbour'].iloc[row]!r})",
            path="neighbours",
            line=row,
        )
    # The golden rule's first clause: a protein never votes for itself.
    frame = frame[frame["query"] != frame["neighbour"]]
    frame = frame.sort_values(
        ["query", "similarity", "neighbour"], ascending=[True, False, True], kind="mergesort"
    )
    frame = frame.drop_duplicates(["query", "neighbour"], keep="first")
    frame["rank"] = frame.groupby("query", sort=False).cumcount().to_numpy() + 1
    if k is not None:
        frame = frame[frame["rank"] <= int(k)]
    return frame.reset_index(drop=True)


def prepare_annotations(corpus_annotations: pd.DataFrame) -> pd.DataFrame:
    """Deduplicated ``protein, term, aspect`` rows with the aspect validated."""
    _require_columns(corpus_annotations, KEY_COLUMNS, "corpus_annotations")
    frame = pd.DataFrame(
        {c: corpus_annotations[c].astype(str).to_numpy() for c in KEY_COLUMNS}
    ).drop_duplicates()
    unknown = ~frame["aspect"].isin(list(ASPECT_CODES))
    if unknown.any():
        row = int(np.flatnonzero(unknown.to_numpy())[0])
        raise FeatureInputError(
            f"aspect {frame['aspect'].iloc[row]!r} is not one of {sorted(ASPECT_CODES)}",
            path="corpus_annotations",
            line=row,
        )
    return frame.reset_index(drop=True)


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
    ia: pd.Series | Mapping[str, float] | None = None,
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
    ia : Series or mapping, optional
        Term -> information accretion (bits). It is a term-level weight: bind it to a corpus
        at or before the candidate cutoff (the ``t-2`` corpus for reranker labels), never to
        the release that supplies the labels.
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
    nb = prepare_neighbours(neighbours, k)
    ann = prepare_annotations(corpus_annotations)
    columns = list(KEY_COLUMNS) + list(FEATURE_COLUMNS)
    if nb.empty or ann.empty:
        return pd.DataFrame({c: pd.Series([], dtype=object if c in KEY_COLUMNS else float)
                             for c in columns})

    # Integer codes keep the large merges and groupbys cheap.
    # Sorted factorisation: code order equals string order, so sorting on codes is
    # sorting on ids (the output order is a function of ids only).
    protein_codes, protein_ids = pd.factorize(
        np.concatenate([nb["query"].to_numpy(dtype=object), nb["neighbour"].to_numpy(dtype=object),
                        ann["protein"].to_numpy(dtype=object)]),
        sort=True,
    )
    protein_ids = np.asarray(protein_ids, dtype=object)
    n_nb = len(nb)
    q_code = protein_codes[:n_nb]
    n_code = protein_codes[n_nb:2 * n_nb]
    a_prot = protein_codes[2 * n_nb:]
    t_code, term_ids = pd.factorize(ann["term"].to_numpy(dtype=object), sort=True)
    term_ids = np.asarray(term_ids, dtype=object)
    a_code = ann["aspect"].map(ASPECT_CODES).to_numpy(dtype=np.int64)

    nbc = pd.DataFrame({"q": q_code, "n": n_code, "sim": nb["similarity"].to_numpy(),
                        "rank": nb["rank"].to_numpy(dtype=np.int64)})
    annc = pd.DataFrame({"p": a_prot, "t": t_code, "a": a_code})

    per_query = nbc.groupby("q").agg(k_eff=("sim", "size"), sim_total=("sim", "sum"),
                                     top_similarity=("sim", "max"))

    pairs = nbc.merge(annc, left_on="n", right_on="p", how="inner", sort=False)
    grouped = pairs.groupby(["q", "a", "t"], sort=False)
    cand = grouped.agg(sim_max=("sim", "max"), sim_sum=("sim", "sum"), count=("sim", "size"),
                       best_rank=("rank", "min")).reset_index()
    cand = cand.join(per_query, on="q")
    k_eff = cand["k_eff"].to_numpy(dtype=np.float64)
    sim_total = cand["sim_total"].to_numpy()
    count = cand["count"].to_numpy(dtype=np.float64)
    sim_sum = cand["sim_sum"].to_numpy()

    # Distinct neighbours annotated in each aspect (label-free for the query itself).
    prot_aspect = annc[["p", "a"]].drop_duplicates()
    in_aspect = (
        nbc[["q", "n"]].merge(prot_aspect, left_on="n", right_on="p", how="inner")
        .groupby(["q", "a"]).size().rename("n_in_aspect")
    )
    cand = cand.join(in_aspect, on=["q", "a"])
    n_candidates = cand.groupby(["q", "a"], sort=False)["t"].transform("size")

    # Leave-one-out corpus prior: subtract the scored protein's own contribution so the value
    # equals the prior of a corpus from which its labels were removed.
    term_count = annc.groupby(["a", "t"]).size().rename("term_count")
    aspect_count = prot_aspect.groupby("a").size().rename("aspect_count")
    cand = cand.join(term_count, on=["a", "t"]).join(aspect_count, on="a")
    own_term = cand[["q", "a", "t"]].merge(
        annc.assign(own=1), left_on=["q", "a", "t"], right_on=["p", "a", "t"], how="left"
    )["own"].fillna(0).to_numpy(dtype=np.float64)
    own_aspect = cand[["q", "a"]].merge(
        prot_aspect.assign(own=1), left_on=["q", "a"], right_on=["p", "a"], how="left"
    )["own"].fillna(0).to_numpy(dtype=np.float64)
    numer = cand["term_count"].to_numpy(dtype=np.float64) - own_term
    denom = cand["aspect_count"].to_numpy(dtype=np.float64) - own_aspect
    with np.errstate(invalid="ignore", divide="ignore"):
        prior = np.where(denom > 0, numer / np.where(denom > 0, denom, 1.0), 0.0)
        weighted = np.where(sim_total > 0, sim_sum / np.where(sim_total > 0, sim_total, 1.0), 0.0)

    order = np.lexsort((cand["t"].to_numpy(), cand["a"].to_numpy(), cand["q"].to_numpy()))
    cand = cand.iloc[order].reset_index(drop=True)
    n_candidates = n_candidates.to_numpy()[order]
    sim_sum, count, k_eff = sim_sum[order], count[order], k_eff[order]
    prior, weighted = prior[order], weighted[order]
    t_codes = cand["t"].to_numpy()
    aspect_names = np.array(sorted(ASPECT_CODES, key=ASPECT_CODES.get))
    out = pd.DataFrame(
        {
            "protein": protein_ids[cand["q"].to_numpy()],
            "term": term_ids[t_codes],
            "aspect": aspect_names[cand["a"].to_numpy()],
            "sim_max": cand["sim_max"].to_numpy(dtype=np.float64),
            "sim_mean": sim_sum / count,
            "sim_sum": sim_sum,
            "vote_share": count / k_eff,
            "weighted_vote_share": weighted,
            "best_rank": cand["best_rank"].to_numpy(dtype=np.int64),
            "top_similarity": cand["top_similarity"].to_numpy(dtype=np.float64),
            "aspect_neighbour_share": cand["n_in_aspect"].to_numpy(dtype=np.float64) / k_eff,
            "corpus_prior": prior,
            "ia": _term_values(ia, term_ids)[t_codes],
            "depth": _term_values(term_depth, term_ids)[t_codes],
            "n_candidates": n_candidates.astype(np.int64),
            "aspect_code": cand["a"].to_numpy(dtype=np.int64),
        }
    )
    return out[columns]


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
        before = _protein_rows(full, protein)
        after = _protein_rows(reduced, protein)
        if not before.index.equals(after.index):
            violations.append((protein, "candidates"))
            common = before.index.intersection(after.index)
            before, after = before.loc[common], after.loc[common]
        for col in feature_cols:
            if col not in after.columns:
                violations.append((protein, col))
                continue
            x = before[col].to_numpy(dtype=np.float64)
            y = after[col].to_numpy(dtype=np.float64)
            if not np.allclose(x, y, rtol=0.0, atol=atol, equal_nan=True):
                violations.append((protein, col))
    return violations


def _protein_rows(frame: pd.DataFrame, protein: str) -> pd.DataFrame:
    rows = frame[frame["protein"].astype(str) == protein]
    rows = rows.set_index(["aspect", "term"]).sort_index()
    return rows.drop(columns=["protein"])
