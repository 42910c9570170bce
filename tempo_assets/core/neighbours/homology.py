"""Homology-aware uncertainty: sequence clusters of TEST targets, a cluster bootstrap, and
identity strata against the TRAIN corpus.

Homologous proteins are not independent evaluation units: a family of near-identical targets
gains the same terms and is predicted the same way, so a bootstrap that resamples proteins as
if they were independent understates the sampling variance of a metric (the same lesson as
resampling patients, not variants). The independent unit here is a *sequence cluster*: the
connected components of the graph whose edges are all-vs-all DIAMOND hits among the targets at
or above :data:`MIN_IDENTITY` percent identity over at least :data:`MIN_COVERAGE` percent of the
query (the cluster bootstrap: Davison & Hinkley 1997, section 3.8; Field & Welsh 2007,
"Bootstrapping clustered data", JRSS B 69:369).

Why these thresholds
--------------------
* 30 % identity is the classical bound above which a protein alignment of ordinary length
  reliably means common descent (Rost 1999, "Twilight zone of protein sequence alignments");
  it is also the lowest identity stratum of :data:`IDENTITY_STRATA`.
* 50 % coverage of the query keeps a short shared motif or a single shared domain of a long
  protein from joining two families, while an edge in either direction suffices (the graph is
  undirected), so a fragment fully contained in a longer homologue joins it.
* For a confidence interval the safe error is to merge too much: larger clusters give wider
  (conservative) intervals, whereas a family split in two leaves the dependence the cluster
  bootstrap is meant to remove. Both thresholds are parameters; the defaults sit at the
  permissive end of what still means homology.

A cluster bootstrap replicate draws ``n_clusters`` clusters with replacement and takes every
protein of each drawn cluster (:func:`cluster_resample_counts`); with one protein per cluster it
is exactly the protein bootstrap, draw for draw, so protein-level and cluster-level intervals
come from one code path (:func:`bootstrap_interval`, :func:`paired_bootstrap_interval`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator, Mapping, Sequence

import numpy as np
import pandas as pd

from tempo_assets.core.neighbours.blast import DiamondSearch, best_hsps, run_blastp
from tempo_assets.core.base.errors import TempoInputError

__all__ = [
    "ALIGNMENT_COLUMNS",
    "Clustering",
    "IDENTITY_STRATA",
    "MIN_COVERAGE",
    "MIN_IDENTITY",
    "bootstrap_interval",
    "cluster_codes",
    "cluster_resample_counts",
    "cluster_resample_indices",
    "diamond_alignments",
    "homology_clusters",
    "identity_stratum",
    "max_train_identity",
    "paired_bootstrap_interval",
    "target_homology",
]

MIN_IDENTITY = 30.0  # percent; see the module docstring
MIN_COVERAGE = 50.0  # percent of the query covered by the alignment
ALIGNMENT_COLUMNS = ["query", "subject", "pident", "qcov", "scov", "bitscore", "evalue"]
IDENTITY_STRATA = ("<30", "30-60", "60-90", ">=90")
_STRATUM_EDGES = np.array([30.0, 60.0, 90.0])
_CHUNK = 100


# --------------------------------------------------------------------------------------------
# alignments


def diamond_alignments(
    query_sequences: Mapping[str, str],
    corpus_sequences: Mapping[str, str],
    workdir: str | Path,
    threads: int = 1,
    sensitivity: str | None = "--sensitive",
    evalue: float = 1e-3,
    max_target_seqs: int = 0,
) -> pd.DataFrame:
    """``diamond blastp`` of queries against a corpus, with per-HSP coverage; self-hits dropped.

    The same run as :func:`tempo_assets.core.neighbours.blast.diamond_hits` (same FASTA writing, fixed
    threads, sorted output) with two more columns: ``qcov`` and ``scov``, DIAMOND's
    ``qcovhsp`` / ``scovhsp`` (percent of the query / subject covered by the HSP). When DIAMOND
    reports several HSPs of one pair, the one with the highest bitscore is kept.

    Parameters
    ----------
    query_sequences, corpus_sequences : mapping accession -> amino-acid sequence
    workdir : folder for DIAMOND's inputs, database and output (created).
    threads, sensitivity, evalue : as in ``diamond_hits`` (CAFA's BLAST e-value 1e-3).
    max_target_seqs : at most this many subjects per query; ``0`` (default) = all, because a
        clustering must see every qualifying pair, not the best 250.

    Returns
    -------
    DataFrame :data:`ALIGNMENT_COLUMNS`, one row per (query, subject) pair with
    ``query != subject``, sorted by query, bitscore descending, subject.
    """
    output = run_blastp(query_sequences, corpus_sequences, workdir,
                        ("pident", "qcovhsp", "scovhsp", "bitscore", "evalue"), "alignments.tsv",
                        DiamondSearch(threads, evalue, max_target_seqs, sensitivity))
    return best_hsps(output, ALIGNMENT_COLUMNS)


def _require(frame: pd.DataFrame, columns: Sequence[str], what: str) -> None:
    if not isinstance(frame, pd.DataFrame):
        raise TempoInputError(f"{what} must be a DataFrame, got {type(frame).__name__}")
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise TempoInputError(f"{what} lacks column(s) {missing} (has {list(frame.columns)})",
                              path=what)


def _percent(values: pd.Series, column: str, what: str) -> np.ndarray:
    numbers = pd.to_numeric(values, errors="coerce").to_numpy(dtype=np.float64)
    bad = np.isnan(numbers) | (numbers < 0) | (numbers > 100)
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        raise TempoInputError(f"row {row}: {column} {values.iloc[row]!r} is not a percentage in "
                              "[0, 100]", path=what)
    return numbers


# --------------------------------------------------------------------------------------------
# clusters


def homology_clusters(
    proteins: Sequence[str],
    alignments: pd.DataFrame,
    min_identity: float = MIN_IDENTITY,
    min_coverage: float = MIN_COVERAGE,
) -> pd.DataFrame:
    """Sequence clusters: connected components of the hits at the identity/coverage threshold.

    An edge joins ``query`` and ``subject`` when ``pident >= min_identity`` and
    ``qcov >= min_coverage`` (either direction of the pair suffices). Hits naming a protein not
    in ``proteins`` are ignored; a protein without a qualifying hit is its own cluster.

    Parameters
    ----------
    proteins : sequence of str, length n_proteins (duplicates collapse)
        The proteins to cluster (the TEST targets of one cell, or all of a window's).
    alignments : DataFrame ``query, subject, pident, qcov`` (n_hits rows), as from
        :func:`diamond_alignments` of the targets against themselves.
    min_identity, min_coverage : percent thresholds (defaults: :data:`MIN_IDENTITY`,
        :data:`MIN_COVERAGE`; see the module docstring for why).

    Returns
    -------
    DataFrame ``protein, cluster, cluster_size`` sorted by protein; ``cluster`` is an int in
    ``[0, n_clusters)``, numbered in order of each cluster's first protein (so the numbering
    is a function of the input sets only, not of row order).
    """
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    _require(alignments, ["query", "subject", "pident", "qcov"], "alignments")
    for name, value in (("min_identity", min_identity), ("min_coverage", min_coverage)):
        if not (0.0 <= float(value) <= 100.0):
            raise TempoInputError(f"{name} must be a percentage in [0, 100], got {value!r}")
    ids = np.array(sorted({str(p) for p in proteins}), dtype=object)
    n = ids.size
    if n == 0:
        return pd.DataFrame({"protein": pd.Series([], dtype=object),
                             "cluster": pd.Series([], dtype=np.int64),
                             "cluster_size": pd.Series([], dtype=np.int64)})
    pident = _percent(alignments["pident"], "pident", "alignments")
    qcov = _percent(alignments["qcov"], "qcov", "alignments")
    index = pd.Index(ids)
    q = index.get_indexer(alignments["query"].astype(str))
    s = index.get_indexer(alignments["subject"].astype(str))
    keep = (q >= 0) & (s >= 0) & (q != s) & (pident >= float(min_identity)) \
        & (qcov >= float(min_coverage))
    graph = coo_matrix((np.ones(int(keep.sum()), dtype=np.int8), (q[keep], s[keep])), shape=(n, n))
    _, labels = connected_components(graph, directed=True, connection="weak")
    # renumber by first protein so the ids do not depend on scipy's traversal order
    _, first = np.unique(labels, return_index=True)
    order = np.argsort(first, kind="stable")
    renumber = np.empty(order.size, dtype=np.int64)
    renumber[np.unique(labels)[order]] = np.arange(order.size)
    cluster = renumber[labels]
    sizes = np.bincount(cluster)
    return pd.DataFrame({"protein": ids, "cluster": cluster, "cluster_size": sizes[cluster]})


def cluster_codes(proteins: Sequence[str], clusters: pd.DataFrame | Mapping[str, int] | None) -> np.ndarray:
    """Cluster code of each protein in the order given, for the bootstrap.

    Parameters
    ----------
    proteins : sequence of str, length n_units
        The evaluated proteins in the scorer's row order.
    clusters : DataFrame ``protein, cluster`` (from :func:`homology_clusters`), a mapping
        protein -> cluster, or ``None`` (every protein its own cluster: the protein bootstrap).
        A protein the clustering does not know is its own cluster.

    Returns
    -------
    ndarray of int64, shape (n_units,): codes in ``[0, n_clusters)``, numbered by first
    appearance in ``proteins``.
    """
    proteins = [str(p) for p in proteins]
    if clusters is None:
        return np.arange(len(proteins), dtype=np.int64)
    if isinstance(clusters, pd.DataFrame):
        _require(clusters, ["protein", "cluster"], "clusters")
        mapping = dict(zip(clusters["protein"].astype(str), clusters["cluster"]))
    elif isinstance(clusters, Mapping):
        mapping = {str(k): v for k, v in clusters.items()}
    else:
        raise TempoInputError(f"clusters must be a DataFrame, a mapping or None, "
                              f"got {type(clusters).__name__}")
    keys = [("c", mapping[p]) if p in mapping else ("p", p) for p in proteins]
    codes: dict = {}
    return np.array([codes.setdefault(k, len(codes)) for k in keys], dtype=np.int64)


# --------------------------------------------------------------------------------------------
# the cluster bootstrap


def _codes(groups, n_units: int | None = None) -> np.ndarray:
    if groups is None:
        if n_units is None:
            raise TempoInputError("groups=None needs the number of units")
        return np.arange(int(n_units), dtype=np.int64)
    codes = np.asarray(groups)
    if codes.ndim != 1 or (codes.size and not np.issubdtype(codes.dtype, np.integer)):
        raise TempoInputError("groups must be a 1-D integer array of cluster codes "
                              "(see cluster_codes)")
    if n_units is not None and codes.size != int(n_units):
        raise TempoInputError(f"groups has {codes.size} entries for {n_units} units")
    _, dense = np.unique(codes, return_inverse=True)  # codes need not be contiguous
    return dense.astype(np.int64).ravel()


def cluster_resample_counts(groups: np.ndarray, n_boot: int, rng: np.random.Generator,
                            chunk: int = _CHUNK) -> Iterator[np.ndarray]:
    """Bootstrap multiplicities of each unit, clusters drawn with replacement, in chunks.

    Each replicate draws ``n_clusters`` cluster indices uniformly with replacement
    (``rng.integers(0, n_clusters, size=(chunk, n_clusters))``) and gives every unit the number
    of times its cluster was drawn. With one unit per cluster (``groups = arange(n)``) this
    consumes the generator exactly as the protein bootstrap of ``core.evaluation`` does and
    yields the same matrices.

    Parameters
    ----------
    groups : int array, shape (n_units,): cluster code of each unit.
    n_boot : number of replicates.
    rng : numpy Generator (its state advances).
    chunk : replicates per yielded matrix (bounds memory).

    Yields
    ------
    ndarray of float64, shape (size, n_units), ``size <= chunk``; rows sum to the size of the
    resampled dataset (which varies across replicates when clusters differ in size).
    """
    codes = _codes(groups)
    n_clusters = int(codes.max()) + 1 if codes.size else 0
    if int(n_boot) < 1:
        raise TempoInputError(f"n_boot must be >= 1, got {n_boot!r}")
    if n_clusters == 0:
        raise TempoInputError("cannot resample an empty set of units")
    for start in range(0, int(n_boot), int(chunk)):
        size = min(int(chunk), int(n_boot) - start)
        draws = rng.integers(0, n_clusters, size=(size, n_clusters))
        picked = np.zeros((size, n_clusters))
        np.add.at(picked, (np.repeat(np.arange(size), n_clusters), draws.ravel()), 1)
        yield picked[:, codes]


def cluster_resample_indices(groups: np.ndarray, n_boot: int, seed: int = 0) -> list[np.ndarray]:
    """Resampled index sets: each replicate lists every unit of each drawn cluster.

    The same draws as :func:`cluster_resample_counts` with ``rng = default_rng(seed)``, as
    index arrays (a unit appears as many times as its cluster was drawn), for metrics that take
    a list of rows rather than multiplicities.

    Returns
    -------
    list of ``n_boot`` int64 arrays (ascending unit indices, with repeats).
    """
    rng = np.random.default_rng(seed)
    out = []
    for counts in cluster_resample_counts(groups, n_boot, rng):
        for row in counts.astype(np.int64):
            out.append(np.repeat(np.arange(row.size), row))
    return out


Statistic = Callable[[np.ndarray], np.ndarray]


def _as_statistic(statistic, n_units: int | None) -> tuple[Statistic, int | None]:
    """A callable counts (n_rep, n_units) -> (n_rep,); a 1-D array means its weighted mean."""
    if callable(statistic):
        return statistic, n_units
    values = np.asarray(statistic, dtype=np.float64)
    if values.ndim != 1:
        raise TempoInputError("statistic must be a callable or a 1-D array of per-unit values")

    def mean(counts: np.ndarray) -> np.ndarray:
        total = counts.sum(axis=1)
        return np.divide(counts @ values, total, out=np.full(total.shape, np.nan), where=total > 0)

    return mean, values.size


def _replicates(statistic: Statistic, counts: np.ndarray) -> np.ndarray:
    values = np.asarray(statistic(counts), dtype=np.float64).ravel()
    if values.size != counts.shape[0]:
        raise TempoInputError(f"statistic returned {values.size} values for {counts.shape[0]} "
                              "replicates")
    return values


def bootstrap_interval(statistic, groups=None, n_boot: int = 1000, seed: int = 0,
                       alpha: float = 0.05, n_units: int | None = None) -> dict:
    """Percentile bootstrap interval of a statistic over units grouped in clusters.

    Parameters
    ----------
    statistic : callable ``counts -> values`` mapping multiplicities of shape
        (n_rep, n_units) to one value per replicate, shape (n_rep,) (the scorer passes its
        per-protein contributions reduced at the best threshold); or a 1-D array of per-unit
        values, whose (multiplicity-weighted) mean is the statistic.
    groups : int array (n_units,) of cluster codes (:func:`cluster_codes`), or ``None`` for
        the protein bootstrap (each unit its own cluster; then ``n_units`` or an array
        statistic gives the size).
    n_boot, seed, alpha : replicates, ``numpy.random.default_rng`` seed, two-sided level.

    Returns
    -------
    dict ``estimate`` (the statistic on the full set), ``low``, ``high`` (``alpha/2`` and
    ``1 - alpha/2`` quantiles of the replicates, NaN replicates ignored), ``n_units``,
    ``n_clusters``, ``n_boot``.
    """
    statistic, size = _as_statistic(statistic, n_units)
    codes = _codes(groups, size if groups is None else None)
    if size is not None and codes.size != size:
        raise TempoInputError(f"groups has {codes.size} entries for {size} units")
    if not (0.0 < float(alpha) < 1.0):
        raise TempoInputError(f"alpha must be in (0, 1), got {alpha!r}")
    estimate = _replicates(statistic, np.ones((1, codes.size)))[0]
    rng = np.random.default_rng(seed)
    values = np.concatenate([_replicates(statistic, c)
                             for c in cluster_resample_counts(codes, n_boot, rng)])
    finite = values[~np.isnan(values)]
    low, high = ((float(np.quantile(finite, alpha / 2)), float(np.quantile(finite, 1 - alpha / 2)))
                 if finite.size else (math.nan, math.nan))
    return {"estimate": float(estimate), "low": low, "high": high, "n_units": int(codes.size),
            "n_clusters": int(codes.max()) + 1, "n_boot": int(n_boot)}


def paired_bootstrap_interval(statistic_a, statistic_b, groups=None, n_boot: int = 1000,
                              seed: int = 0, alpha: float = 0.05,
                              n_units: int | None = None) -> dict:
    """Paired bootstrap of ``statistic_a - statistic_b``: both see the same resampled clusters.

    Parameters as in :func:`bootstrap_interval`; the two statistics score the same units in the
    same order.

    Returns
    -------
    dict ``delta``, ``low``, ``high`` (percentile interval of the replicate differences, NaN
    replicates dropped), ``p_value`` (two-sided: twice the smaller share of replicates on
    either side of 0, capped at 1; it is 0 when every replicate lies on one side, so report it
    as ``< 1/n_boot`` then), ``n_units``, ``n_clusters``, ``n_boot``.
    """
    stat_a, size_a = _as_statistic(statistic_a, n_units)
    stat_b, size_b = _as_statistic(statistic_b, n_units)
    if size_a is not None and size_b is not None and size_a != size_b:
        raise TempoInputError(f"the two statistics score {size_a} and {size_b} units")
    size = size_a if size_a is not None else size_b
    codes = _codes(groups, size if groups is None else None)
    if size is not None and codes.size != size:
        raise TempoInputError(f"groups has {codes.size} entries for {size} units")
    if not (0.0 < float(alpha) < 1.0):
        raise TempoInputError(f"alpha must be in (0, 1), got {alpha!r}")
    ones = np.ones((1, codes.size))
    delta = _replicates(stat_a, ones)[0] - _replicates(stat_b, ones)[0]
    rng = np.random.default_rng(seed)
    values = np.concatenate([_replicates(stat_a, c) - _replicates(stat_b, c)
                             for c in cluster_resample_counts(codes, n_boot, rng)])
    values = values[~np.isnan(values)]
    if values.size:
        low, high = float(np.quantile(values, alpha / 2)), float(np.quantile(values, 1 - alpha / 2))
        p = min(1.0, 2 * min(float(np.mean(values <= 0)), float(np.mean(values >= 0))))
    else:
        low = high = p = math.nan
    return {"delta": float(delta), "low": low, "high": high, "p_value": p,
            "n_units": int(codes.size), "n_clusters": int(codes.max()) + 1, "n_boot": int(n_boot)}


# --------------------------------------------------------------------------------------------
# identity strata


def identity_stratum(identity) -> np.ndarray:
    """Stratum label of each maximum identity (percent): ``<30``, ``30-60``, ``60-90``, ``>=90``.

    Bins are closed on the left: 30 -> ``30-60``, 60 -> ``60-90``, 90 -> ``>=90``. NaN (a
    target with no DIAMOND hit in the corpus at the e-value cut) is ``<30``: DIAMOND's
    sensitive mode finds nearly every pair above 30 % identity, so no hit means no detectable
    homologue, which is what ``<30`` stands for.

    Parameters
    ----------
    identity : array-like of float, shape (n,), percent in [0, 100] or NaN.

    Returns
    -------
    ndarray of str (object), shape (n,).
    """
    values = np.asarray(identity, dtype=np.float64).ravel()
    finite = values[~np.isnan(values)]
    if finite.size and ((finite < 0).any() or (finite > 100).any()):
        raise TempoInputError("identities must be percentages in [0, 100]")
    bins = np.searchsorted(_STRATUM_EDGES, np.nan_to_num(values, nan=0.0), side="right")
    return np.array(IDENTITY_STRATA, dtype=object)[bins]


def max_train_identity(
    targets: pd.DataFrame,
    hits: pd.DataFrame,
    train_annotations: pd.DataFrame,
    min_coverage: float | None = None,
) -> pd.DataFrame:
    """Each TEST target's maximum identity to a TRAIN protein annotated in the target's aspect.

    ``max_identity(q, a) = max { pident(q, s) : (q, s) in hits, s != q, s annotated in aspect a
    in the corpus }``, NaN when no such hit; ``identity_stratum`` labels it
    (:func:`identity_stratum`; no hit -> ``<30``). The corpus is the one the TEST score is
    refit on (proteins annotated at t0); the self pair is excluded, so a PK target is measured
    against the other proteins, never against its own earlier annotations.

    Parameters
    ----------
    targets : DataFrame ``protein, aspect`` (n_targets rows; other columns, e.g. ``mode``,
        are kept), one row per scored (target, aspect).
    hits : DataFrame ``query, subject, pident`` (and ``qcov`` when ``min_coverage`` is set), as
        from ``blast.diamond_hits`` or :func:`diamond_alignments` of the targets against the
        t0 corpus. The BLAST baseline's hits can be reused as they are.
    train_annotations : DataFrame ``protein, aspect`` (e.g. the t0 experimental annotations;
        other columns ignored, duplicates collapse).
    min_coverage : optional percent of the query a hit must cover to count; ``None`` (default)
        counts every hit, the same hits the BLAST baseline transfers from, so the ``>=90``
        stratum is where that baseline scores at least 0.9.

    Returns
    -------
    ``targets`` with ``max_identity`` (float, percent or NaN), ``nearest_train`` (the subject
    reaching it, ties broken by accession; None without a hit) and ``identity_stratum``, in the
    order of ``targets``.
    """
    _require(targets, ["protein", "aspect"], "targets")
    _require(hits, ["query", "subject", "pident"] + (["qcov"] if min_coverage is not None else []),
             "hits")
    _require(train_annotations, ["protein", "aspect"], "train annotations")
    pident = _percent(hits["pident"], "pident", "hits")
    pairs = pd.DataFrame({"query": hits["query"].astype(str), "subject": hits["subject"].astype(str),
                          "pident": pident})
    keep = pairs["query"] != pairs["subject"]
    if min_coverage is not None:
        keep &= _percent(hits["qcov"], "qcov", "hits") >= float(min_coverage)
    pairs = pairs[keep.to_numpy()]
    annotated = train_annotations[["protein", "aspect"]].astype(str).drop_duplicates()
    joined = pairs.merge(annotated, left_on="subject", right_on="protein", how="inner")
    joined = joined.sort_values(["query", "aspect", "pident", "subject"],
                                ascending=[True, True, False, True], kind="mergesort")
    best = joined.drop_duplicates(["query", "aspect"], keep="first")
    best = best.rename(columns={"query": "_target", "pident": "max_identity",
                                "subject": "nearest_train"})[["_target", "aspect", "max_identity",
                                                              "nearest_train"]]
    out = targets.copy()
    key = pd.DataFrame({"_target": out["protein"].astype(str).to_numpy(),
                        "aspect": out["aspect"].astype(str).to_numpy()})
    merged = key.merge(best, on=["_target", "aspect"], how="left")
    out["max_identity"] = merged["max_identity"].to_numpy(dtype=np.float64)
    out["nearest_train"] = merged["nearest_train"].where(merged["nearest_train"].notna(), None).to_numpy()
    out["identity_stratum"] = identity_stratum(out["max_identity"].to_numpy())
    return out


# --------------------------------------------------------------------------------------------
# both at once, as the benchmark calls it


@dataclass(frozen=True)
class Clustering:
    """How :func:`target_homology` clusters targets: DIAMOND's sensitivity flag and the percent
    identity and query coverage an alignment needs to join two targets."""

    sensitivity: str | None = "--sensitive"
    min_identity: float = MIN_IDENTITY
    min_coverage: float = MIN_COVERAGE


def target_homology(
    targets: pd.DataFrame,
    target_sequences: Mapping[str, str],
    corpus_sequences: Mapping[str, str],
    corpus_annotations: pd.DataFrame,
    workdir: str | Path,
    threads: int = 1,
    clustering: "Clustering | None" = None,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Clusters of a window's TEST targets and each target's identity stratum, in two DIAMOND runs.

    Parameters
    ----------
    targets : DataFrame ``protein, aspect[, mode...]``, every scored (target, aspect) of the window.
    target_sequences : accession -> sequence for (at least) every target protein.
    corpus_sequences : the corpus the TEST score is refit on (proteins at t0).
    corpus_annotations : DataFrame ``protein, aspect`` of that corpus (t0 experimental).
    workdir : scratch folder for DIAMOND (two sub-folders are made).
    threads : DIAMOND ``--threads``.
    clustering : DIAMOND's sensitivity and the identity and coverage an edge of the cluster graph
        needs (default :class:`Clustering`: ``--sensitive``, ``MIN_IDENTITY``, ``MIN_COVERAGE``).

    Returns
    -------
    clusters : DataFrame ``protein, cluster, cluster_size`` over all the window's target
        proteins together (clusters are computed once per window, then every cell's bootstrap
        takes ``cluster_codes(cell_proteins, clusters)``: restricting the graph to one cell could
        split a family through a member scored in another cell only, which would understate the
        dependence).
    identity : ``targets`` with ``max_identity``, ``nearest_train``, ``identity_stratum``.
    """
    _require(targets, ["protein", "aspect"], "targets")
    proteins = sorted(set(targets["protein"].astype(str)))
    missing = [p for p in proteins if p not in target_sequences]
    if missing:
        raise TempoInputError(f"{len(missing)} target(s) have no sequence, e.g. {missing[0]!r}",
                              path="target sequences")
    query = {p: target_sequences[p] for p in proteins}
    workdir, clustering = Path(workdir), clustering or Clustering()
    among = diamond_alignments(query, query, workdir / "targets", threads=threads,
                               sensitivity=clustering.sensitivity)
    to_corpus = diamond_alignments(query, corpus_sequences, workdir / "corpus", threads=threads,
                                   sensitivity=clustering.sensitivity)
    clusters = homology_clusters(proteins, among, min_identity=clustering.min_identity,
                                 min_coverage=clustering.min_coverage)
    return clusters, max_train_identity(targets, to_corpus, corpus_annotations)
