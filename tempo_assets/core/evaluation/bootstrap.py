"""Bootstrap confidence intervals and paired bootstrap tests on per-protein sums, optionally cluster-resampled.

Part of the evaluator package (see ``tempo_assets/core/evaluation/__init__.py``).

What every interval of a cell reads is prepared once and shared: the setup of the ground truth and
each method's prepared predictions (``metrics.SetupCache``), each namespace's cluster codes, the
draws of each (seed, number of replicates, clusters) and each method's replicate values per reading
(``_Setup.replicates``), so a paired bootstrap reads the replicates :func:`bootstrap_cis` computed
for the same method, threshold and draws. A reading at a fixed threshold (the VALID ``tau``) sums
that threshold's column only; a best-threshold reading sums every column as before.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, fields
from typing import Any, Callable

import numpy as np
import pandas as pd

from tempo_assets.core.base.arrays import one_blas_thread
from tempo_assets.core.neighbours.homology import cluster_codes
from tempo_assets.core.base.progress import Progress
from tempo_assets.core.evaluation.ontology import EvaluationInputError
from tempo_assets.core.evaluation.metrics import (
    EvalOptions, _Contrib, _f, _Setup, _setup_of, content_key, frame_key, prepared_predictions,
)

# --------------------------------------------------------------------------------------------
# bootstrap


_METRICS = {"f": (False, "f", "max"), "f_w": (True, "f", "max"), "s": (False, "s", "min"),
            "s_w": (True, "s", "min"), "f_micro": (False, "f_micro", "max"),
            "f_micro_w": (True, "f_micro", "max")}


_SUMS = {"f": ("pr", "rc"), "s": ("fp", "fn"), "f_micro": ("tp", "fp", "fn")}
_CHUNK = 100  # replicates per multiplicity matrix, as core.neighbours.homology.cluster_resample_counts draws them


@dataclass(frozen=True)
class _Reading:
    """What a replicate reads: the metric ``kind`` under ``norm``, at threshold ``column`` (None: best)."""

    kind: str
    norm: str
    column: int | None


@dataclass(frozen=True)
class _Sums:
    """Per-protein quantities a reading sums over each replicate's proteins, at the thresholds it reads.

    ``covered`` (n_cols, n_p) 1.0 where the protein predicts something; ``sums`` the metric's
    per-protein sums (:data:`_SUMS`), (n_cols, n_p) each; n_cols is 1 for a fixed threshold, else every
    threshold of the grid.
    """

    covered: np.ndarray
    sums: dict[str, np.ndarray]


def _sums_of(c: _Contrib, reading: _Reading) -> _Sums:
    """The per-protein sums of ``reading``, built once per (method, reading) and reused by every replicate."""
    cols = slice(None) if reading.column is None else [reading.column]
    valid = c.n_pred[cols] > 0  # (n_cols, n_p)
    sums = {}
    for key in _SUMS[reading.kind]:
        if key == "pr":
            sums[key] = np.divide(c.tp[cols], c.n_pred[cols], out=np.zeros(valid.shape), where=valid)
        elif key == "rc":
            sums[key] = np.divide(c.tp[cols], c.n_gt[None, :], out=np.zeros(valid.shape),
                                  where=(c.n_gt > 0)[None, :])
        else:
            sums[key] = getattr(c, key)[cols].astype(float)
    return _Sums(valid.astype(float), sums)


def _values(sums: _Sums, counts: np.ndarray, reading: _Reading) -> np.ndarray:
    """The metric of each replicate: the best threshold's (or, with ``reading.column``, that threshold's).

    ``counts`` (n_rep, n_proteins) multiplicities. At a fixed threshold no protein may be covered
    in a replicate: F is then 0 (nothing predicted), S undefined (NaN).
    """
    kind, norm = reading.kind, reading.norm
    cnt = np.asarray(counts, dtype=float)  # the draws are float already: no copy
    with one_blas_thread():  # the same bits on any number of cores
        n = cnt @ sums.covered.T  # (n_rep, n_cols)
        products = {key: cnt @ value.T for key, value in sums.sums.items()}
    ne = cnt.sum(axis=1, keepdims=True)

    def div(a, b):
        b = np.broadcast_to(b, a.shape)
        return np.divide(a, b, out=np.zeros_like(a), where=b > 0)

    norm_sums = {key: div(value, n if (norm == "pred" or (norm == "cafa" and key == "pr")) else ne)
                 for key, value in products.items()}
    if kind == "f":
        values = _f(norm_sums["pr"], norm_sums["rc"])
    elif kind == "s":
        values = np.sqrt(norm_sums["fn"] ** 2 + norm_sums["fp"] ** 2)
    else:
        tp, fp, fn = norm_sums["tp"], norm_sums["fp"], norm_sums["fn"]
        values = _f(div(tp, tp + fp), div(tp, tp + fn))
    covered = n > 0
    if reading.column is not None:
        return np.where(covered[:, 0], values[:, 0], np.nan if kind == "s" else 0.0)
    fill = -np.inf if kind != "s" else np.inf
    values = np.where(covered, values, fill)
    best = values.max(axis=1) if kind != "s" else values.min(axis=1)
    return np.where(np.isfinite(best), best, np.nan)


def _replicate_metric(c: _Contrib, counts: np.ndarray, kind: str, norm: str,
                      column: int | None = None) -> np.ndarray:
    """The metric of ``c`` in each replicate of ``counts`` (n_rep, n_proteins) (see :func:`_values`);
    a ``column`` below 0 is a threshold off the grid: nothing is predicted there."""
    reading = _Reading(kind, norm, column)
    if column is not None and column < 0:
        return np.full(counts.shape[0], np.nan if kind == "s" else 0.0)
    return _values(_sums_of(c, reading), counts, reading)


def _check_metric(eval_ontology, metric: str) -> tuple[bool, str]:
    if metric not in _METRICS:
        raise EvaluationInputError(f"metric must be one of {sorted(_METRICS)}, got {metric!r}")
    weighted, kind, _ = _METRICS[metric]
    if weighted and not eval_ontology.has_ia:
        raise EvaluationInputError(f"metric {metric!r} needs IA weights on the ontology")
    return weighted, kind


@dataclass(frozen=True)
class Resampling:
    """How a bootstrap resamples: ``n_boot`` replicates from generators of ``seed``, a two-sided
    ``alpha``, and optional ``clusters`` (protein -> cluster id, or a frame ``protein, cluster``)."""

    n_boot: int = 1000
    seed: int = 0
    alpha: float = 0.05
    clusters: Any = None


_RESAMPLING_KEYS = {f.name for f in fields(Resampling)}


def _split_options(options: Mapping[str, Any]) -> tuple[Resampling, EvalOptions]:
    """Keyword options as (resampling, evaluator options); an unknown key is named in the error."""
    resampling = Resampling(**{k: v for k, v in options.items() if k in _RESAMPLING_KEYS})
    return resampling, EvalOptions.of({k: v for k, v in options.items() if k not in _RESAMPLING_KEYS})


@functools.lru_cache(maxsize=64)
def _cluster_draws(seed: int, n_boot: int, before: tuple[int, ...], n_clusters: int) -> np.ndarray:
    """(n_boot, n_clusters) times each cluster is drawn in each replicate (read-only, smallest integer type).

    The generator of ``seed`` first draws the replicates of ``before`` (the cluster counts of the
    namespaces an interval read earlier from the same generator), then these: per chunk of 100
    replicates ``rng.integers(0, n_clusters, size=(chunk, n_clusters))``, the very draws of
    ``core.neighbours.homology.cluster_resample_counts``, counted by one ``np.bincount`` over
    ``replicate * n_clusters + cluster``. Generated once per process for every method and pair.
    """
    rng = np.random.default_rng(seed)
    chunks = [min(_CHUNK, n_boot - start) for start in range(0, n_boot, _CHUNK)]
    for earlier in before:
        for size in chunks:
            rng.integers(0, earlier, size=(size, earlier))
    parts = []
    for size in chunks:
        draws = rng.integers(0, n_clusters, size=(size, n_clusters))
        draws += (np.arange(size, dtype=draws.dtype) * n_clusters)[:, None]
        parts.append(np.bincount(draws.ravel(), minlength=size * n_clusters).reshape(size, n_clusters))
    picked = np.concatenate(parts)
    picked = picked.astype(np.min_scalar_type(int(picked.max(initial=0))))
    picked.flags.writeable = False
    return picked


@dataclass(frozen=True, eq=False)
class _Draws:
    """The replicates of one namespace at one level: each unit's cluster ``codes`` and the draws'
    ``key`` (clusters, n_boot, seed, clusterings drawn before from the same generator)."""

    codes: np.ndarray
    n_boot: int
    seed: int
    before: tuple[int, ...]
    key: tuple

    @property
    def n_clusters(self) -> int:
        return int(self.codes.max()) + 1

    def counts(self) -> Iterator[np.ndarray]:
        """Multiplicity matrices (size, n_units) float, 100 replicates at a time.

        Every protein of a drawn cluster counts as often as its cluster was drawn; with one protein
        per cluster it is the protein bootstrap: one code path for both levels.
        """
        if self.n_boot < 1:
            raise EvaluationInputError(f"n_boot must be >= 1, got {self.n_boot!r}")
        picked = _cluster_draws(self.seed, self.n_boot, self.before, self.n_clusters)
        progress = Progress("bootstrap", self.n_boot, "replicates")
        for start in range(0, self.n_boot, _CHUNK):
            counts = picked[start:start + _CHUNK][:, self.codes].astype(float)
            yield counts
            progress.advance(len(counts))


@dataclass(frozen=True)
class _Level:
    """One level of a bootstrap: the column ``prefix`` ("" proteins, "cluster_" clusters), the
    ``clusters`` and their content key."""

    prefix: str
    clusters: Any
    key: tuple


def _levels(clusters) -> list[_Level]:
    """Each bootstrap level: proteins, then clusters when given."""
    plain = _Level("", None, (None,))
    return [plain] + ([_Level("cluster_", clusters, content_key(clusters, ("protein", "cluster")))]
                      if clusters is not None else [])


@dataclass
class _Scored:
    """One method's predictions on a setup, read through the setup's caches: prepared once, each
    reading's estimate and replicate values computed once (:attr:`_Setup.replicates`)."""

    setup: _Setup
    predictions: pd.DataFrame
    options: EvalOptions
    content: tuple | None = None  # the predictions' content key, when the caller has it
    key: tuple = field(init=False)

    def __post_init__(self) -> None:
        self.key = frame_key(self.predictions, self.options, self.content)

    def contribs(self, weighted: bool) -> dict[str, tuple[_Contrib, np.ndarray]]:
        return prepared_predictions(self.setup, self.predictions, self.options, self.key).contribs(weighted)

    def rows(self, name: str, weighted: bool) -> np.ndarray:
        """The namespace's evaluated ground-truth rows (the setup's, whatever the predictions)."""
        key = (name, weighted)
        if key not in self.setup.rows:
            self.setup.rows[key] = self.contribs(weighted)[name][1]
        return self.setup.rows[key]

    def _cached(self, what: tuple, compute: Callable[[], Any]) -> Any:
        key = (self.key, *what)
        if key not in self.setup.replicates:
            self.setup.replicates[key] = compute()
        return self.setup.replicates[key]

    def estimate(self, name: str, weighted: bool, reading: _Reading) -> float:
        """The metric on the namespace's proteins, each counted once."""
        n_p = self.rows(name, weighted).size
        return self._cached((name, weighted, reading, None), lambda: float(_replicate_metric(
            self.contribs(weighted)[name][0], np.ones((1, n_p)), reading.kind, reading.norm, reading.column)[0]))

    def replicates(self, name: str, weighted: bool, reading: _Reading, draws: _Draws) -> np.ndarray:
        """(n_boot,) the metric in each replicate of ``draws``."""
        def compute() -> np.ndarray:
            if reading.column is not None and reading.column < 0:
                return _replicate_metric(None, np.zeros((draws.n_boot, 0)), reading.kind, reading.norm, -1)
            sums = _sums_of(self.contribs(weighted)[name][0], reading)
            return np.concatenate([_values(sums, counts, reading) for counts in draws.counts()])
        return self._cached((name, weighted, reading, draws.key), compute)

    def draws(self, name: str, weighted: bool, level: _Level, resampling: Resampling,
              before: tuple[int, ...] = ()) -> _Draws:
        """The namespace's draws at ``level`` (cluster codes computed once per setup)."""
        key = (name, weighted, level.key)
        if key not in self.setup.codes:
            proteins = self.setup.truths[name].proteins
            self.setup.codes[key] = cluster_codes([proteins[r] for r in self.rows(name, weighted)], level.clusters)
        return _Draws(self.setup.codes[key], int(resampling.n_boot), int(resampling.seed), before,
                      (level.key, int(resampling.n_boot), int(resampling.seed), before))


def _tau_column(tau_grid: np.ndarray, tau: float | None) -> int | None:
    if tau is None:
        return None
    hit = np.flatnonzero(np.isclose(tau_grid, float(tau), rtol=0, atol=1e-9))
    return int(hit[0]) if hit.size else -1


def bootstrap_ci(eval_ontology, ground_truth, predictions, metric="f", tau=None, subsets=None,
                 **options) -> dict[str, dict[str, float]]:
    """Percentile bootstrap CI of the best-threshold metric, resampling proteins (and clusters).

    Each replicate draws the namespace's evaluated proteins with replacement and re-picks the
    best threshold; with ``tau`` (a threshold fixed beforehand, e.g. on VALID) every replicate is
    read at that threshold instead. ``options``: :class:`Resampling`'s ``n_boot`` (1000),
    ``seed`` (0), ``alpha`` (0.05), ``clusters``, and the evaluator's :class:`EvalOptions`.
    With ``clusters`` (protein -> cluster id, or a frame
    ``protein, cluster`` of ``core.neighbours.homology.homology_clusters``) a second interval resamples
    clusters (``cluster_low``, ``cluster_high``, ``n_clusters``), drawn by the same code with its
    own generator of ``seed``, so the protein-level interval is unchanged by it. ``subsets``
    (protein -> label, e.g. an identity stratum) adds ``subsets: {label: {estimate, n_proteins}}``,
    the metric on each subset's proteins alone. ``n_boot=0`` gives the estimate only.
    Returns ``{ns: {estimate, low, high, n_proteins, ...}}``.
    """
    return bootstrap_cis(eval_ontology, ground_truth, predictions, [(metric, tau, subsets)], **options)[0]


def bootstrap_cis(eval_ontology, ground_truth, predictions, requests, predictions_content: tuple | None = None,
                  **options) -> list[dict[str, dict[str, float]]]:
    """:func:`bootstrap_ci` for several ``(metric, tau, subsets)`` requests on one set of predictions.

    The ground truth and the predictions are set up once (and the contributions once per
    weighting) instead of once per metric; each request draws from its own generator of
    ``seed``, so every result equals the corresponding :func:`bootstrap_ci` call.
    ``predictions_content``: the predictions' ``content_key`` when the caller has it.
    """
    resampling, opts = _split_options(options)
    checked = [(tau, subsets, *_check_metric(eval_ontology, metric)) for metric, tau, subsets in requests]
    setup = _setup_of(eval_ontology, ground_truth, opts)
    scored = _Scored(setup, predictions, opts, predictions_content)
    levels = _levels(resampling.clusters)
    return [_interval(scored, (weighted, _Reading(kind, opts.norm, _tau_column(setup.tau, tau))), resampling,
                      levels, subsets)
            for tau, subsets, weighted, kind in checked]


def _subset_estimates(contrib, reading: _Reading, proteins: list[str], subsets) -> dict:
    """``{label: {estimate, n_proteins}}``: the metric on each subset's proteins alone."""
    labels = np.array([subsets.get(p) for p in proteins], dtype=object)
    out = {}
    for label in sorted({x for x in labels if x is not None}):
        member = (labels == label).astype(float)[None, :]
        out[label] = {"estimate": float(_replicate_metric(contrib, member, reading.kind, reading.norm,
                                                          reading.column)[0]),
                      "n_proteins": int(member.sum())}
    return out


def _interval(scored: _Scored, read: tuple[bool, _Reading], resampling: Resampling, levels: list[_Level],
              subsets) -> dict:
    """``{ns: {estimate, low, high, n_proteins, ...}}`` of one request; each level's generator of ``seed``
    runs on through the namespaces in order (``before``), as one generator per request does."""
    weighted, reading = read
    before: dict[str, tuple[int, ...]] = {level.prefix: () for level in levels}
    out = {}
    for name in scored.setup.truths:
        rows = scored.rows(name, weighted)
        if rows.size == 0:
            continue
        result = {"estimate": scored.estimate(name, weighted, reading), "n_proteins": int(rows.size)}
        for level in (levels if resampling.n_boot else []):
            draws = scored.draws(name, weighted, level, resampling, before[level.prefix])
            values = scored.replicates(name, weighted, reading, draws)
            result[f"{level.prefix}low"] = float(np.nanquantile(values, resampling.alpha / 2))
            result[f"{level.prefix}high"] = float(np.nanquantile(values, 1 - resampling.alpha / 2))
            if level.prefix:
                result["n_clusters"] = draws.n_clusters
            before[level.prefix] += (draws.n_clusters,)
        if subsets is not None:
            proteins = [scored.setup.truths[name].proteins[r] for r in rows]
            result["subsets"] = _subset_estimates(scored.contribs(weighted)[name][0], reading, proteins, subsets)
        out[name] = result
    return out


def paired_bootstrap(eval_ontology, ground_truth, predictions_a, predictions_b, metric="f",
                     **options) -> dict[str, dict[str, float]]:
    """Bootstrap of ``metric(a) - metric(b)`` with the same resampled proteins for both.

    ``options``: ``tau_a`` / ``tau_b`` (thresholds fixed beforehand, e.g. each method's VALID
    threshold: each method is read at its own threshold in every replicate instead of re-picking
    its best), :class:`Resampling`'s ``n_boot``, ``seed``, ``alpha``, ``clusters`` and the
    evaluator's :class:`EvalOptions`. With ``clusters`` (as in :func:`bootstrap_ci`) both methods
    also see the same resampled clusters: ``cluster_low``, ``cluster_high``, ``cluster_p_value``,
    ``n_clusters``.

    ``p_value`` is two-sided: twice the smaller share of replicate differences on either side
    of 0 (capped at 1; 0 when every replicate lies on one side: report ``< 1/n_boot``).
    Returns ``{ns: {delta, low, high, p_value, n_proteins, ...}}``.
    """
    taus = (options.pop("tau_a", None), options.pop("tau_b", None))
    result = paired_bootstraps(eval_ontology, ground_truth, {"a": predictions_a, "b": predictions_b},
                               [("a", "b", *taus)], metric=metric, strict=True, **options)
    return result[0]


def _pair_namespace(pair: tuple[_Scored, _Scored], name: str, readings: tuple[_Reading, _Reading],
                    weighted: bool, resampling: Resampling, levels: list[_Level]) -> dict | None:
    """``{delta, low, high, p_value, n_proteins, ...}`` of one pair in one namespace: both methods
    read on the same draws (each level's generator of ``seed`` starts afresh per namespace)."""
    (a, b), (reading_a, reading_b) = pair, readings
    rows = a.rows(name, weighted)
    if not np.array_equal(rows, b.rows(name, weighted)):
        raise EvaluationInputError(f"{name}: the two methods are scored on different proteins")
    if rows.size == 0:
        return None
    result = {"delta": float(a.estimate(name, weighted, reading_a) - b.estimate(name, weighted, reading_b))}
    alpha = resampling.alpha
    for level in levels:
        draws = a.draws(name, weighted, level, resampling)
        values = a.replicates(name, weighted, reading_a, draws) - b.replicates(name, weighted, reading_b, draws)
        values = values[~np.isnan(values)]
        p = 2 * min(np.mean(values <= 0), np.mean(values >= 0)) if values.size else math.nan
        result.update({f"{level.prefix}low": float(np.quantile(values, alpha / 2)),
                       f"{level.prefix}high": float(np.quantile(values, 1 - alpha / 2)),
                       f"{level.prefix}p_value": float(min(1.0, p))})
        if level.prefix:
            result["n_clusters"] = draws.n_clusters
    result["n_proteins"] = int(rows.size)
    return result


def paired_bootstraps(eval_ontology, ground_truth, predictions, pairs, metric="f", strict=False,
                      **options) -> list[dict[str, dict[str, float]] | None]:
    """:func:`paired_bootstrap` of several ``(a, b, tau_a, tau_b)`` pairs of ``predictions`` (name -> frame).

    The ground truth is set up once, each method's predictions once, and each (method, threshold)
    is evaluated on the resampled proteins once for all the pairs it is in (and for the
    :func:`bootstrap_cis` of the same method, threshold and draws): every replicate of a pair sees
    the draws a separate :func:`paired_bootstrap` call would (each pair starts from the seed), so
    the results are those calls'. A pair whose interval is undefined (a method covering no protein
    at any threshold) is None, or raises with ``strict``. ``options`` as in :func:`paired_bootstrap` (without
    the taus), and ``contents``: name -> the predictions' ``content_key`` where the caller has it.
    """
    contents: Mapping[str, tuple] = options.pop("contents", None) or {}
    weighted, kind = _check_metric(eval_ontology, metric)
    resampling, opts = _split_options(options)
    setup = _setup_of(eval_ontology, ground_truth, opts)
    scored: dict[str, _Scored] = {}
    levels = _levels(resampling.clusters)
    out: list = []
    for a, b, tau_a, tau_b in pairs:
        for m in (a, b):
            if m not in scored:
                scored[m] = _Scored(setup, predictions[m], opts, contents.get(m))
        readings = (_Reading(kind, opts.norm, _tau_column(setup.tau, tau_a)),
                    _Reading(kind, opts.norm, _tau_column(setup.tau, tau_b)))
        try:
            per_ns = {name: _pair_namespace((scored[a], scored[b]), name, readings, weighted, resampling, levels)
                      for name in setup.truths}
            out.append({name: result for name, result in per_ns.items() if result is not None})
        except IndexError:
            # np.quantile of no replicate: one method covers no protein at any threshold
            if strict:
                raise
            out.append(None)
    return out
