"""Per-window benchmark tables: every method scored on the same TEST targets, with CIs.

Pure functions behind the ``benchmark`` and ``benchmark_catalog`` assets and ``tempo report``:

* :func:`score_benchmark` scores each method per mode (NK/LK/PK, never pooled) and aspect with
  the cafaeval-exact evaluator: Fmax (and its tau), weighted Fmax, Smin, weighted micro F,
  coverage, case counts, and percentile-bootstrap 95% CIs resampling proteins;
  :func:`paired_differences` bootstraps ``metric(a) - metric(b)`` on the same resampled proteins.
* LAFA's conventions (:class:`BenchmarkOptions` ``lafa=True``): terms of interest present in both
  ontologies (:func:`lafa_terms_of_interest`), known terms for PK, ``-prop fill``,
  ``-no_orphans``, and MF targets whose only new terms are protein binding dropped
  (:func:`protein_binding_only_targets`).
* The longitudinal view: :func:`stale_inputs` / :func:`catalog_frame` (ready / stale / failed /
  pending per window), :func:`compare_windows` and :func:`decay_table`.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Iterable, Mapping

import numpy as np
import pandas as pd

from tempo_assets.core.errors import TempoInputError

__all__ = [
    "PROTEIN_BINDING",
    "BenchmarkOptions",
    "attach_valid_tau",
    "catalog_frame",
    "compare_windows",
    "decay_table",
    "lafa_terms_of_interest",
    "paired_differences",
    "protein_binding_only_targets",
    "results_frame",
    "score_benchmark",
    "stale_inputs",
]

PROTEIN_BINDING = "GO:0005515"
MODES = ("NK", "LK", "PK")
NAMESPACE = {"BP": "biological_process", "MF": "molecular_function", "CC": "cellular_component"}
# summary column -> (evaluator frame column, bootstrap metric, best is max?)
METRICS = {"fmax": ("f", "f", True), "wfmax": ("f_w", "f_w", True), "smin": ("s", "s", False),
           "f_micro_w": ("f_micro_w", "f_micro_w", True)}
STATUSES = ("ready", "stale", "failed", "pending")


@dataclass(frozen=True)
class BenchmarkOptions:
    """How a benchmark is scored.

    ``lafa`` switches on LAFA's conventions (terms of interest in both ontologies, ``prop='fill'``,
    no orphans, MF protein-binding-only targets dropped); ``ci_metrics`` are the summary metrics
    given a bootstrap CI (``n_boot`` resamples of proteins, ``seed``); ``reference`` is the method
    the paired bootstrap compares every other method against.
    """

    lafa: bool = False
    n_boot: int = 100
    seed: int = 0
    alpha: float = 0.05
    ci_metrics: tuple[str, ...] = ("fmax", "wfmax", "smin")
    reference: str = "recipe"

    @property
    def prop(self) -> str:
        return "fill" if self.lafa else "max"

    @property
    def orphans(self) -> bool:
        """Whether the evaluator keeps orphan terms (cafaeval's default; LAFA passes -no_orphans)."""
        return not self.lafa

    def __post_init__(self):
        unknown = [m for m in self.ci_metrics if m not in METRICS]
        if unknown:
            raise TempoInputError(f"ci_metrics {unknown} unknown (choose from {sorted(METRICS)})")
        if self.n_boot < 0:
            raise TempoInputError(f"n_boot must be >= 0, got {self.n_boot}")


def _require(frame: pd.DataFrame, columns: Iterable[str], what: str) -> None:
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise TempoInputError(f"{what} lacks columns {missing} (has {list(frame.columns)})", path=what)


def lafa_terms_of_interest(old_ontology, new_ontology) -> frozenset[str]:
    """Primary, non-obsolete GO ids present in both ontologies (LAFA's terms of interest).

    A term added after ``old_ontology`` could not have been predicted at the older cutoff, and one
    obsoleted by ``new_ontology`` cannot be true at the newer one.
    """
    def live(ontology) -> set[str]:
        return {t for t, term in ontology.terms.items() if not term.is_obsolete}

    return frozenset(live(old_ontology) & live(new_ontology))


def protein_binding_only_targets(ground_truth: pd.DataFrame, known: pd.DataFrame | None,
                                 ontology, term: str = PROTEIN_BINDING) -> set[str]:
    """MF targets whose only new terms are ``term`` (protein binding) or its descendants.

    New terms are the propagated MF ground truth minus the protein's known MF terms; the
    ancestors of ``term`` (binding, the root) come with any protein-binding annotation, so they
    do not count as other new terms. A protein gaining e.g. "binding" alone is kept.

    Parameters
    ----------
    ground_truth : DataFrame ``protein, term, aspect`` (propagated, at the newer release)
    known : DataFrame ``protein, term, aspect`` (propagated, at the older release) or None
    ontology : ``core.ontology.Ontology`` the ground truth is expressed in

    Returns
    -------
    set of protein accessions
    """
    _require(ground_truth, ("protein", "term", "aspect"), "ground truth")
    if term not in ontology:
        return set()
    above = set(ontology.ancestors(term))
    below = {t for t, info in ontology.terms.items()
             if not info.is_obsolete and info.aspect == "MF" and term in ontology.ancestors(t)}
    mf = ground_truth[ground_truth["aspect"] == "MF"][["protein", "term"]].drop_duplicates()
    if known is not None and len(known):
        old = known[known["aspect"] == "MF"][["protein", "term"]].drop_duplicates()
        mf = mf.merge(old, on=["protein", "term"], how="left", indicator=True)
        mf = mf[mf["_merge"] == "left_only"][["protein", "term"]]
    dropped = set()
    for protein, terms in mf.groupby("protein", sort=True)["term"]:
        new = set(terms)
        if new & below and new <= (above | below):
            dropped.add(protein)
    return dropped


def _by_aspect(predictions: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """Predictions split once per aspect (cells filter these small frames, not the whole one)."""
    return {a: rows for a, rows in predictions.groupby("aspect", sort=False, observed=True)}


def _cells(targets, ground_truth, known) -> dict[tuple[str, str], tuple]:
    """Per non-empty (mode, aspect): its targets, their ground truth and (PK) known terms."""
    out = {}
    for mode in MODES:
        for aspect in NAMESPACE:
            cell = targets[(targets["mode"] == mode) & (targets["aspect"] == aspect)]
            if cell.empty:
                continue
            keys = cell[["protein", "aspect"]].drop_duplicates()
            truth = ground_truth.merge(keys, on=["protein", "aspect"])[["protein", "term"]]
            kn = None
            if mode == "PK" and known is not None:
                kn = known[known["protein"].isin(cell["protein"]) & (known["aspect"] == aspect)][["protein", "term"]]
            out[(mode, aspect)] = (cell, truth, kn)
    return out


def _cell_predictions(split: Mapping[str, pd.DataFrame], cell: pd.DataFrame, aspect: str) -> pd.DataFrame:
    predictions = split.get(aspect)
    if predictions is None:
        return pd.DataFrame(columns=["protein", "term", "score"])
    return predictions[predictions["protein"].isin(cell["protein"])][["protein", "term", "score"]]


def _score_one(eval_ontology, aspect, truth, preds, known, toi, options: BenchmarkOptions) -> tuple[dict, pd.DataFrame]:
    from tempo_assets.core.evaluation import bootstrap_ci, evaluate_frames

    ns = NAMESPACE[aspect]
    opts = {"known": known, "toi": toi, "prop": options.prop}
    df_all = evaluate_frames(eval_ontology, truth, preds, **opts)
    row: dict[str, Any] = {"fmax": 0.0}
    if ns not in set(df_all.index.get_level_values("ns")):
        # nothing predicted for any scored protein: Fmax 0, no curve
        return row, pd.DataFrame()
    curve = df_all.loc[ns].reset_index().assign(ns=ns)
    for column, (frame_column, _, best_max) in METRICS.items():
        if frame_column not in curve:
            row[column] = float("nan")
            continue
        values = curve[frame_column].to_numpy(dtype=float)
        row[column] = float(np.nanmax(values) if best_max else np.nanmin(values))
    best = int(np.argmax(curve["f"].to_numpy(dtype=float)))
    row.update(tau_test=float(curve["tau"].iloc[best]), coverage=float(curve["cov"].iloc[best]),
               n_predicted=int(curve["n"].iloc[best]))
    for column in options.ci_metrics if options.n_boot else ():
        metric = METRICS[column][1]
        if metric.endswith("_w") and not eval_ontology.has_ia:
            continue
        ci = bootstrap_ci(eval_ontology, truth, preds, metric=metric, n_boot=options.n_boot,
                          seed=options.seed, alpha=options.alpha, **opts).get(ns, {})
        row[f"{column}_low"], row[f"{column}_high"] = ci.get("low"), ci.get("high")
    return row, curve


def score_benchmark(eval_ontology, targets: pd.DataFrame, ground_truth: pd.DataFrame,
                    known: pd.DataFrame | None, methods: Mapping[str, pd.DataFrame],
                    options: BenchmarkOptions = BenchmarkOptions(), toi: Iterable[str] | None = None,
                    ci_methods: Iterable[str] | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Every method on the same targets, per (mode, aspect): metrics, case counts and CIs.

    Parameters
    ----------
    eval_ontology : ``core.evaluation.EvalOntology`` of the newer release (IA attached for the
        weighted metrics)
    targets : DataFrame ``protein, aspect, mode`` (n_targets rows)
    ground_truth : DataFrame ``protein, term, aspect`` (propagated terms at the newer release)
    known : DataFrame ``protein, term, aspect`` (PK known terms) or None
    methods : name -> predictions DataFrame ``protein, term, aspect, score``
    options : see :class:`BenchmarkOptions`
    toi : terms of interest (None: all)
    ci_methods : the methods given bootstrap CIs (None: all)

    Returns
    -------
    (summary, curves) : ``summary`` one row per (method, mode, aspect) with ``n_targets``,
        ``truth_proteins``, ``truth_pairs``, ``predicted_pairs``, ``fmax, wfmax, smin,
        f_micro_w, coverage``, ``tau_test`` (where F peaks on TEST: shown, never used) and
        ``<metric>_low/_high``; ``curves`` the evaluator's all-threshold rows with ``method, mode, aspect`` columns. A target none of whose true
        terms was predicted scores 0 and stays in the denominator.
    """
    _require(targets, ("protein", "aspect", "mode"), "targets")
    _require(ground_truth, ("protein", "term", "aspect"), "ground truth")
    toi = None if toi is None else sorted(set(toi))
    ci_methods = None if ci_methods is None else set(ci_methods)
    rows, curves = [], []
    cells = _cells(targets, ground_truth, known)
    for name, predictions in methods.items():
        _require(predictions, ("protein", "term", "aspect", "score"), f"predictions of {name}")
        split = _by_aspect(predictions)
        cell_options = options if ci_methods is None or name in ci_methods else replace(options, n_boot=0)
        for (mode, aspect), (cell, truth, kn) in cells.items():
            preds = _cell_predictions(split, cell, aspect)
            counts = {"method": name, "mode": mode, "aspect": aspect, "n_targets": len(cell),
                      "truth_proteins": int(truth["protein"].nunique()), "truth_pairs": len(truth),
                      "predicted_pairs": len(preds)}
            row, curve = _score_one(eval_ontology, aspect, truth, preds, kn, toi, cell_options)
            rows.append({**counts, **row})
            if len(curve):
                curves.append(curve.assign(method=name, mode=mode, aspect=aspect))
    return pd.DataFrame(rows), (pd.concat(curves, ignore_index=True) if curves else pd.DataFrame())


def paired_differences(eval_ontology, targets: pd.DataFrame, ground_truth: pd.DataFrame,
                       known: pd.DataFrame | None, methods: Mapping[str, pd.DataFrame],
                       pairs: Iterable[tuple[str, str]], options: BenchmarkOptions = BenchmarkOptions(),
                       toi: Iterable[str] | None = None, metric: str = "fmax") -> pd.DataFrame:
    """Paired bootstrap of ``metric(a) - metric(b)`` per (mode, aspect), same resampled proteins.

    Returns
    -------
    DataFrame one row per (a, b, mode, aspect): ``delta, low, high, p_value, n_proteins``
    (the (1 - alpha) percentile interval of the replicate differences).
    """
    from tempo_assets.core.evaluation import paired_bootstrap

    if metric not in METRICS:
        raise TempoInputError(f"metric {metric!r} unknown (choose from {sorted(METRICS)})")
    toi = None if toi is None else sorted(set(toi))
    rows = []
    split = {name: _by_aspect(frame) for name, frame in methods.items()}
    cells = _cells(targets, ground_truth, known)
    for a, b in pairs:
        for name in (a, b):
            if name not in methods:
                raise TempoInputError(f"paired bootstrap: no method {name!r} (have {sorted(methods)})")
        for (mode, aspect), (cell, truth, kn) in cells.items():
            pa, pb = _cell_predictions(split[a], cell, aspect), _cell_predictions(split[b], cell, aspect)
            if pa.empty and pb.empty:
                # neither method predicts anything here: no replicate has a value to compare
                rows.append({"a": a, "b": b, "mode": mode, "aspect": aspect, "metric": metric,
                             "delta": 0.0, "n_proteins": int(truth["protein"].nunique())})
                continue
            try:
                result = paired_bootstrap(eval_ontology, truth, pa, pb, metric=METRICS[metric][1],
                                          n_boot=max(options.n_boot, 1), seed=options.seed,
                                          alpha=options.alpha, known=kn, toi=toi, prop=options.prop)
            except IndexError:
                # core.evaluation.paired_bootstrap has no replicate to summarise when one method
                # covers no protein at any threshold (its metric is undefined, not 0): no interval
                rows.append({"a": a, "b": b, "mode": mode, "aspect": aspect, "metric": metric,
                             "n_proteins": int(truth["protein"].nunique())})
                continue
            for values in result.values():
                rows.append({"a": a, "b": b, "mode": mode, "aspect": aspect, "metric": metric, **values})
    columns = ["a", "b", "mode", "aspect", "metric", "delta", "low", "high", "p_value", "n_proteins"]
    return pd.DataFrame(rows, columns=columns)


def attach_valid_tau(summary: pd.DataFrame, curves: pd.DataFrame,
                     taus: Mapping[tuple[str, str, str], float]) -> pd.DataFrame:
    """Add ``tau`` (fixed on VALID) and ``f_at_tau`` (TEST F at that threshold) where known.

    ``taus`` maps ``(method, mode, aspect)`` to the threshold the method froze on VALID (the
    recipe's ``tau_by_mode``); other rows get NaN. A threshold at which the method predicted
    nothing on TEST (no curve row) scores F = 0.
    """
    out = summary.copy()
    tau_col, f_col = [], []
    for row in out.itertuples(index=False):
        tau = taus.get((row.method, row.mode, row.aspect))
        if tau is None:
            tau_col.append(np.nan)
            f_col.append(np.nan)
            continue
        cell = curves[(curves["method"] == row.method) & (curves["mode"] == row.mode)
                      & (curves["aspect"] == row.aspect)] if len(curves) else curves
        hit = cell[np.isclose(cell["tau"].to_numpy(dtype=float), tau, rtol=0, atol=1e-9)] if len(cell) else cell
        tau_col.append(float(tau))
        f_col.append(float(hit["f"].iloc[0]) if len(hit) else 0.0)
    out["tau"], out["f_at_tau"] = tau_col, f_col
    return out


def results_frame(summary: pd.DataFrame, window: str, derived: bool) -> pd.DataFrame:
    """The report module's tidy results table (``core.report.RESULT_COLUMNS``) from a summary."""
    _require(summary, ("method", "mode", "aspect", "fmax"), "benchmark summary")
    frame = summary.copy()
    frame.insert(0, "window", window)
    frame["derived"] = bool(derived)
    return frame


# --------------------------------------------------------------------------------------------
# longitudinal view


def stale_inputs(sources: Iterable[Mapping[str, Any]], artefact_sha: Mapping[str, str | None],
                 file_sha: Mapping[tuple[str, str], str | None]) -> list[str]:
    """Inputs recorded in ``sources`` whose content changed since they were read.

    Parameters
    ----------
    sources : a sidecar's ``sources``: ``{"artefact": "asset[partition]", "sha256"}`` references
        and ``{"release", "path", "sha256"}`` raw files
    artefact_sha : ``"asset[partition]" -> current sha256`` (None or absent: gone)
    file_sha : ``(release, path) -> current sha256`` from the release manifests

    Returns
    -------
    list of reasons, empty when every input is unchanged
    """
    reasons = []
    for source in sources:
        if "artefact" in source:
            ref, recorded = source["artefact"], source.get("sha256")
            current = artefact_sha.get(ref)
            if current is None:
                reasons.append(f"{ref} no longer exists")
            elif recorded is not None and current != recorded:
                reasons.append(f"{ref} changed (sha256 {str(recorded)[:12]} -> {current[:12]})")
        elif "path" in source and "release" in source:
            key = (str(source["release"]), str(source["path"]))
            if key not in file_sha:
                continue
            current = file_sha[key]
            if current is None:
                reasons.append(f"release {key[0]} file {key[1]} no longer exists")
            elif source.get("sha256") and current != source["sha256"]:
                reasons.append(f"release {key[0]} file {key[1]} changed")
    return sorted(set(reasons))


def catalog_frame(windows: Iterable[str], metas: Mapping[str, Mapping[str, Any] | None],
                  failures: Mapping[str, str], artefact_sha: Mapping[str, str | None],
                  file_sha: Mapping[tuple[str, str], str | None],
                  derived: Mapping[str, bool] | None = None) -> pd.DataFrame:
    """One row per window: ``status`` (ready / stale / failed / pending) and why.

    ``metas`` holds each window's benchmark sidecar (None when never written); ``failures``
    maps a window to the ISO time of a failed benchmark run. A failure after the stored
    artefact was written (or with none written) makes the window ``failed``; otherwise a stored
    artefact is ``stale`` when any input it read changed (:func:`stale_inputs`), else ``ready``.
    """
    rows = []
    for window in windows:
        meta, failed_at = metas.get(window), failures.get(window)
        written = None if meta is None else meta.get("written_at")
        reasons: list[str] = []
        if failed_at is not None and (written is None or str(failed_at) > str(written)):
            status, reasons = "failed", [f"benchmark run failed at {failed_at}"]
        elif meta is None:
            status = "pending"
        else:
            reasons = stale_inputs(meta.get("sources", []), artefact_sha, file_sha)
            status = "stale" if reasons else "ready"
        rows.append({"window": window, "status": status, "written_at": written or "",
                     "derived": bool((derived or {}).get(window, False)), "reasons": "; ".join(reasons)})
    return pd.DataFrame(rows, columns=["window", "status", "written_at", "derived", "reasons"])


def compare_windows(results: pd.DataFrame, window_a: str, window_b: str,
                    metrics: Iterable[str] = ("fmax", "wfmax", "smin")) -> pd.DataFrame:
    """Side by side: one row per (mode, aspect, method) scored in both windows, ``b - a`` deltas."""
    _require(results, ("window", "mode", "aspect", "method"), "results")
    for window in (window_a, window_b):
        if window not in set(results["window"]):
            raise TempoInputError(f"no results for window {window!r}", path="results")
    metrics = [m for m in metrics if m in results.columns]
    keys = ["mode", "aspect", "method"]
    a = results[results["window"] == window_a][keys + metrics]
    b = results[results["window"] == window_b][keys + metrics]
    out = a.merge(b, on=keys, suffixes=("_a", "_b"))
    for metric in metrics:
        out[f"{metric}_delta"] = out[f"{metric}_b"] - out[f"{metric}_a"]
    return out.sort_values(keys, kind="mergesort").reset_index(drop=True)


def decay_table(summary: pd.DataFrame, paired: pd.DataFrame, suffix: str = "@t-1") -> pd.DataFrame:
    """The same method trained at the older cutoff (``<method><suffix>``) vs the newer one.

    Returns one row per (method, mode, aspect) scored both ways: ``fmax_newer, fmax_older,
    delta`` (newer - older) and, where ``paired`` holds the pair, its bootstrap interval.
    """
    _require(summary, ("method", "mode", "aspect", "fmax"), "benchmark summary")
    older = summary[summary["method"].str.endswith(suffix)].copy()
    older["method"] = older["method"].str[: -len(suffix)]
    keys = ["method", "mode", "aspect"]
    out = summary[keys + ["fmax"]].merge(older[keys + ["fmax"]], on=keys, suffixes=("_newer", "_older"))
    out["delta"] = out["fmax_newer"] - out["fmax_older"]
    if len(paired):
        p = paired[paired["b"] == paired["a"] + suffix].rename(columns={"a": "method", "low": "delta_low",
                                                                          "high": "delta_high"})
        out = out.merge(p[keys + ["delta_low", "delta_high", "p_value"]], on=keys, how="left")
    return out.sort_values(keys, kind="mergesort").reset_index(drop=True)
