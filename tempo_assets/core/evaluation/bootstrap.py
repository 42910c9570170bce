"""Bootstrap confidence intervals and paired bootstrap tests on per-protein sums, optionally cluster-resampled.

Part of the evaluator package (see ``tempo_assets/core/evaluation/__init__.py``)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np
import pandas as pd

from tempo_assets.core.neighbours.homology import cluster_codes, cluster_resample_counts
from tempo_assets.core.base.progress import Progress
from tempo_assets.core.evaluation.ontology import EvaluationInputError
from tempo_assets.core.evaluation.predictions import _build_predictions, _frame_raw
from tempo_assets.core.evaluation.propagation import _Cells
from tempo_assets.core.evaluation.metrics import EvalOptions, _Contrib, _f, _namespace_contribs, _setup_of

# --------------------------------------------------------------------------------------------
# bootstrap


_METRICS = {"f": (False, "f", "max"), "f_w": (True, "f", "max"), "s": (False, "s", "min"),
            "s_w": (True, "s", "min"), "f_micro": (False, "f_micro", "max"),
            "f_micro_w": (True, "f_micro", "max")}


_SUMS = {"f": ("pr", "rc"), "s": ("fp", "fn"), "f_micro": ("tp", "fp", "fn")}


def _replicate_metric(c: _Contrib, counts: np.ndarray, kind: str, norm: str,
                      column: int | None = None) -> np.ndarray:
    """Best metric per replicate (or, with ``column``, the metric at that threshold index).

    ``counts`` (n_rep, n_proteins) multiplicities. At a fixed threshold no protein may be covered
    in a replicate: F is then 0 (nothing predicted), S undefined (NaN).
    """
    valid = c.n_pred > 0  # (n_tau, n_p)
    cnt = counts.astype(float)
    n = cnt @ valid.T.astype(float)  # (n_rep, n_tau)
    ne = cnt.sum(axis=1, keepdims=True)
    # only the sums the metric reads (each computed exactly as when all five were)
    sums = {}
    for key in _SUMS[kind]:
        if key == "pr":
            sums[key] = cnt @ np.divide(c.tp, c.n_pred, out=np.zeros(c.tp.shape), where=valid).T
        elif key == "rc":
            sums[key] = cnt @ np.divide(c.tp, c.n_gt[None, :], out=np.zeros(c.tp.shape),
                                        where=(c.n_gt > 0)[None, :]).T
        else:
            sums[key] = cnt @ getattr(c, key).T.astype(float)

    def div(a, b):
        b = np.broadcast_to(b, a.shape)
        return np.divide(a, b, out=np.zeros_like(a), where=b > 0)

    norm_sums = {}
    for key, value in sums.items():
        den = n if (norm == "pred" or (norm == "cafa" and key == "pr")) else ne
        norm_sums[key] = div(value, den)
    if kind == "f":
        values = _f(norm_sums["pr"], norm_sums["rc"])
    elif kind == "s":
        values = np.sqrt(norm_sums["fn"] ** 2 + norm_sums["fp"] ** 2)
    else:
        tp, fp, fn = norm_sums["tp"], norm_sums["fp"], norm_sums["fn"]
        values = _f(div(tp, tp + fp), div(tp, tp + fn))
    covered = n > 0
    if column is not None:
        if column < 0:  # the threshold is off the grid: nothing is predicted there
            return np.full(counts.shape[0], np.nan if kind == "s" else 0.0)
        return np.where(covered[:, column], values[:, column], np.nan if kind == "s" else 0.0)
    fill = -np.inf if kind != "s" else np.inf
    values = np.where(covered, values, fill)
    best = values.max(axis=1) if kind != "s" else values.min(axis=1)
    return np.where(np.isfinite(best), best, np.nan)


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


@dataclass(frozen=True)
class _Reading:
    """What a replicate reads: the metric ``kind`` under ``norm``, at threshold ``column`` (None: best)."""

    kind: str
    norm: str
    column: int | None


def _contribs_of(eval_ontology, setup, predictions: pd.DataFrame, options: EvalOptions, weighted: bool) -> dict:
    """``{namespace: (contributions, protein rows)}`` of one method's predictions."""
    preds = _build_predictions(eval_ontology, setup.truths, _frame_raw(predictions),
                               setup.tau, options.prop, options.max_terms)
    return {name: _namespace_contribs(setup, name, preds.get(name, _Cells.empty()), weighted)
            for name in setup.truths}


def _bootstrap_setup(eval_ontology, ground_truth, predictions_list, metric, options: EvalOptions):
    """(setup, kind, norm, [contributions of each predictions frame])."""
    weighted, kind = _check_metric(eval_ontology, metric)
    setup = _setup_of(eval_ontology, ground_truth, options)
    per_method = [_contribs_of(eval_ontology, setup, predictions, options, weighted)
                  for predictions in predictions_list]
    return setup, kind, options.norm, per_method


def _resampled_counts(codes: np.ndarray, n_boot: int, rng: np.random.Generator):
    """Multiplicity matrices (size, n_units) of ``n_boot`` resamples, 100 replicates at a time.

    ``codes`` are the units' cluster codes (``core.homology.cluster_codes``): clusters are drawn
    with replacement and every protein of a drawn cluster counts as often as its cluster was
    drawn. With one protein per cluster (``arange(n)``) it is the protein bootstrap: one code path
    for both levels, and the draws are identical for every caller with one seed.
    """
    progress = Progress("bootstrap", n_boot, "replicates")
    for counts in cluster_resample_counts(codes, n_boot, rng):
        yield counts
        progress.advance(len(counts))


def _unit_codes(proteins: list[str], clusters) -> np.ndarray:
    return cluster_codes(proteins, clusters)


def _tau_column(tau_grid: np.ndarray, tau: float | None) -> int | None:
    if tau is None:
        return None
    hit = np.flatnonzero(np.isclose(tau_grid, float(tau), rtol=0, atol=1e-9))
    return int(hit[0]) if hit.size else -1


def _levels(clusters) -> list[tuple[str, Any]]:
    """(column prefix, clusters) of each bootstrap level: proteins, then clusters when given."""
    return [("", None)] + ([("cluster_", clusters)] if clusters is not None else [])


def bootstrap_ci(eval_ontology, ground_truth, predictions, metric="f", tau=None, subsets=None,
                 **options) -> dict[str, dict[str, float]]:
    """Percentile bootstrap CI of the best-threshold metric, resampling proteins (and clusters).

    Each replicate draws the namespace's evaluated proteins with replacement and re-picks the
    best threshold; with ``tau`` (a threshold fixed beforehand, e.g. on VALID) every replicate is
    read at that threshold instead. ``options``: :class:`Resampling`'s ``n_boot`` (1000),
    ``seed`` (0), ``alpha`` (0.05), ``clusters``, and the evaluator's :class:`EvalOptions`.
    With ``clusters`` (protein -> cluster id, or a frame
    ``protein, cluster`` of ``core.homology.homology_clusters``) a second interval resamples
    clusters (``cluster_low``, ``cluster_high``, ``n_clusters``), drawn by the same code with its
    own generator of ``seed``, so the protein-level interval is unchanged by it. ``subsets``
    (protein -> label, e.g. an identity stratum) adds ``subsets: {label: {estimate, n_proteins}}``,
    the metric on each subset's proteins alone. ``n_boot=0`` gives the estimate only.
    Returns ``{ns: {estimate, low, high, n_proteins, ...}}``.
    """
    return bootstrap_cis(eval_ontology, ground_truth, predictions, [(metric, tau, subsets)], **options)[0]


def bootstrap_cis(eval_ontology, ground_truth, predictions, requests, **options) -> list[dict[str, dict[str, float]]]:
    """:func:`bootstrap_ci` for several ``(metric, tau, subsets)`` requests on one set of predictions.

    The ground truth and the predictions are set up once (and the contributions once per
    weighting) instead of once per metric; each request draws from its own generator of
    ``seed``, so every result equals the corresponding :func:`bootstrap_ci` call.
    """
    resampling, opts = _split_options(options)
    checked = [(metric, tau, subsets, *_check_metric(eval_ontology, metric)) for metric, tau, subsets in requests]
    setup = _setup_of(eval_ontology, ground_truth, opts)
    preds = _build_predictions(eval_ontology, setup.truths, _frame_raw(predictions),
                               setup.tau, opts.prop, opts.max_terms)
    contribs: dict[bool, dict] = {}
    results = []
    for metric, tau, subsets, weighted, kind in checked:
        if weighted not in contribs:
            contribs[weighted] = {name: _namespace_contribs(setup, name, preds.get(name, _Cells.empty()), weighted)
                                  for name in setup.truths}
        reading = _Reading(kind, opts.norm, _tau_column(setup.tau, tau))
        results.append(_interval(setup, contribs[weighted], reading, resampling, subsets))
    return results


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


def _interval(setup, per_ns, reading: _Reading, resampling: Resampling, subsets):
    kind, norm, column = reading.kind, reading.norm, reading.column
    rngs = {prefix: np.random.default_rng(resampling.seed) for prefix, _ in _levels(resampling.clusters)}
    alpha = resampling.alpha
    out = {}
    for name, (contrib, rows) in per_ns.items():
        n_p = rows.size
        if n_p == 0:
            continue
        proteins = [setup.truths[name].proteins[r] for r in rows]
        estimate = _replicate_metric(contrib, np.ones((1, n_p)), kind, norm, column)[0]
        result = {"estimate": float(estimate), "n_proteins": int(n_p)}
        for prefix, level in (_levels(resampling.clusters) if resampling.n_boot else []):
            codes = _unit_codes(proteins, level)
            values = np.concatenate([_replicate_metric(contrib, counts, kind, norm, column)
                                     for counts in _resampled_counts(codes, resampling.n_boot, rngs[prefix])])
            result[f"{prefix}low"] = float(np.nanquantile(values, alpha / 2))
            result[f"{prefix}high"] = float(np.nanquantile(values, 1 - alpha / 2))
            if prefix:
                result["n_clusters"] = int(codes.max()) + 1
        if subsets is not None:
            result["subsets"] = _subset_estimates(contrib, reading, proteins, subsets)
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


@dataclass
class _Paired:
    """The paired bootstrap of one ground truth: each method's contributions and replicate values,
    computed once for every pair the method is in (each key's replicates start from the seed)."""

    eval_ontology: Any
    setup: Any
    predictions: Mapping[str, pd.DataFrame]
    options: EvalOptions
    metric: str
    resampling: Resampling
    contribs: dict = field(default_factory=dict)
    replicates: dict = field(default_factory=dict)

    def contrib(self, method: str) -> dict:
        if method not in self.contribs:
            self.contribs[method] = _contribs_of(self.eval_ontology, self.setup, self.predictions[method],
                                                 self.options, _METRICS[self.metric][0])
        return self.contribs[method]

    def values(self, method: str, name: str, column, prefix: str, codes: np.ndarray) -> np.ndarray:
        key = (method, name, column, prefix)
        if key not in self.replicates:
            c, kind = self.contrib(method)[name][0], _METRICS[self.metric][1]
            rng = np.random.default_rng(self.resampling.seed)
            self.replicates[key] = np.concatenate([
                _replicate_metric(c, counts, kind, self.options.norm, column)
                for counts in _resampled_counts(codes, self.resampling.n_boot, rng)])
        return self.replicates[key]

    def namespace(self, name: str, pair: tuple, columns: tuple) -> dict | None:
        """``{delta, low, high, p_value, n_proteins, ...}`` of one pair in one namespace."""
        (a, b), (col_a, col_b) = pair, columns
        kind, norm, alpha = _METRICS[self.metric][1], self.options.norm, self.resampling.alpha
        ca, rows = self.contrib(a)[name]
        cb, rows_b = self.contrib(b)[name]
        if not np.array_equal(rows, rows_b):
            raise EvaluationInputError(f"{name}: the two methods are scored on different proteins")
        if rows.size == 0:
            return None
        proteins = [self.setup.truths[name].proteins[r] for r in rows]
        ones = np.ones((1, rows.size))
        delta = (_replicate_metric(ca, ones, kind, norm, col_a)[0] - _replicate_metric(cb, ones, kind, norm, col_b)[0])
        result = {"delta": float(delta)}
        for prefix, level in _levels(self.resampling.clusters):
            codes = _unit_codes(proteins, level)
            values = self.values(a, name, col_a, prefix, codes) - self.values(b, name, col_b, prefix, codes)
            values = values[~np.isnan(values)]
            p = 2 * min(np.mean(values <= 0), np.mean(values >= 0)) if values.size else math.nan
            result.update({f"{prefix}low": float(np.quantile(values, alpha / 2)),
                           f"{prefix}high": float(np.quantile(values, 1 - alpha / 2)),
                           f"{prefix}p_value": float(min(1.0, p))})
            if prefix:
                result["n_clusters"] = int(codes.max()) + 1
        result["n_proteins"] = int(rows.size)
        return result


def paired_bootstraps(eval_ontology, ground_truth, predictions, pairs, metric="f", strict=False,
                      **options) -> list[dict[str, dict[str, float]] | None]:
    """:func:`paired_bootstrap` of several ``(a, b, tau_a, tau_b)`` pairs of ``predictions`` (name -> frame).

    The ground truth is set up once, each method's predictions once, and each (method, threshold)
    is evaluated on the resampled proteins once for all the pairs it is in: every replicate of a
    pair sees the draws a separate :func:`paired_bootstrap` call would (each pair starts from the
    seed), so the results are those calls'. A pair whose interval is undefined (a method covering
    no protein at any threshold) is None, or raises with ``strict``. ``options`` as in
    :func:`paired_bootstrap` (without the taus).
    """
    _check_metric(eval_ontology, metric)
    resampling, opts = _split_options(options)
    paired = _Paired(eval_ontology, _setup_of(eval_ontology, ground_truth, opts), predictions, opts, metric,
                     resampling)
    out: list = []
    for a, b, tau_a, tau_b in pairs:
        columns = (_tau_column(paired.setup.tau, tau_a), _tau_column(paired.setup.tau, tau_b))
        try:
            per_ns = {name: paired.namespace(name, (a, b), columns) for name in paired.setup.truths}
            out.append({name: result for name, result in per_ns.items() if result is not None})
        except IndexError:
            # np.quantile of no replicate: one method covers no protein at any threshold
            if strict:
                raise
            out.append(None)
    return out
