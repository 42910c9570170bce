"""Per-window benchmark tables: every method scored on the same TEST targets, with CIs.

Pure functions behind the ``benchmark`` and ``benchmark_catalog`` assets and ``tempo report``:

* :func:`score_benchmark` is ``core.evaluation.scoring.score_methods``, the one cell scorer (F at the VALID
  threshold, the oracle Fmax beside it, weighted Fmax, Smin, weighted micro F, coverage, case
  counts, bootstrap CIs); :func:`paired_differences` bootstraps ``metric(a) - metric(b)`` on the
  same resampled proteins and cells.
* LAFA's conventions (:class:`BenchmarkOptions` ``lafa=True``): terms of interest present in both
  ontologies (:func:`lafa_terms_of_interest`), known terms for PK, ``-prop fill``,
  ``-no_orphans``, and MF targets whose only new terms are protein binding dropped
  (:func:`protein_binding_only_targets`).
* The longitudinal view: :func:`stale_inputs`, :func:`catalog_frame` (ready / stale / failed /
  pending / superseded per window, as ``tempo status`` says), :func:`compare_windows` and
  :func:`decay_table`.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Iterable, Mapping

import pandas as pd

from tempo_assets.core.labels.annotations import require_columns as _require
from tempo_assets.core.base.errors import TempoInputError
from tempo_assets.core.evaluation.bootstrap import paired_bootstraps
from tempo_assets.core.evaluation.metrics import from_keywords
from tempo_assets.core.evaluation.cells import CellFrames
from tempo_assets.core.evaluation.scoring import (
    HEADLINE, METRIC_ALIASES, METRICS, ScoringOptions, score_methods,
)

__all__ = [
    "PROTEIN_BINDING",
    "BenchmarkOptions",
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
STATUSES = ("ready", "stale", "failed", "pending", "superseded")
# tempo status's states of a window's benchmark under the catalog's names (the others as they are)
CATALOG_STATUS = {"ok": "ready", "missing": "pending"}
# one scorer and one set of options for VALID, test_score and the benchmark (core/evaluation/scoring.py)
BenchmarkOptions = ScoringOptions
score_benchmark = score_methods


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
    ontology : ``core.inputs.ontology.Ontology`` the ground truth is expressed in

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


@dataclass(frozen=True)
class PairedRequest:
    """What :func:`paired_differences` compares: ``metric``, the terms of interest ``toi``, each
    method's VALID ``taus`` ``(method, mode, aspect) -> tau``, the targets' sequence ``clusters`` and
    the ``frames`` (``core.evaluation.cells.CellFrames``) of the same growth and methods another pass
    cut (None: cut here)."""

    metric: str = "f_at_valid_tau"
    toi: Iterable[str] | None = None
    taus: Mapping[tuple[str, str, str], float] | None = None
    clusters: Any = None
    frames: CellFrames | None = None

    @classmethod
    def of(cls, extras: Mapping[str, Any]) -> PairedRequest:
        """The request from keyword arguments (metric alias resolved, toi sorted once); unknown keys named."""
        made = from_keywords(cls, extras, "paired_differences: unknown argument(s)", TempoInputError)
        metric = METRIC_ALIASES.get(made.metric, made.metric)
        if metric not in METRICS and metric != HEADLINE:
            raise TempoInputError(f"metric {metric!r} unknown (choose from {sorted(METRICS) + [HEADLINE]})")
        return replace(made, metric=metric, taus=made.taus or {},
                       toi=None if made.toi is None else frozenset(made.toi))


def _cell_pairs(cell, key: dict[str, Any], pairs: list[tuple[str, str]], frames: CellFrames, request: PairedRequest):
    """(``{pair index: rows}`` settled without a bootstrap, the predictions and their content keys, the pairs
    to bootstrap)."""
    at_tau, n_proteins = request.metric == HEADLINE, int(cell.truth["protein"].nunique())
    settled: dict[int, list[dict]] = {}
    preds: dict[str, pd.DataFrame] = {}
    contents: dict[str, tuple] = {}
    todo = []
    for i, (a, b) in enumerate(pairs):
        tau_a, tau_b = request.taus.get((a, cell.mode, cell.aspect)), request.taus.get((b, cell.mode, cell.aspect))
        if at_tau and (tau_a is None or tau_b is None):
            missing = [m for m, t in ((a, tau_a), (b, tau_b)) if t is None]
            settled[i] = [{**key, "a": a, "b": b, "n_proteins": n_proteins,
                           "note": f"no VALID threshold for {', '.join(missing)}"}]
            continue
        for m in (a, b):
            if m not in preds:
                preds[m] = frames.of(m, (cell.mode, cell.aspect))
                contents[m] = frames.content(m, (cell.mode, cell.aspect))
        if preds[a].empty and preds[b].empty:
            # neither method predicts anything here: no replicate has a value to compare
            settled[i] = [{**key, "a": a, "b": b, "delta": 0.0, "n_proteins": n_proteins}]
            continue
        todo.append((i, a, b, tau_a if at_tau else None, tau_b if at_tau else None))
    return settled, (preds, contents), todo


def paired_differences(eval_ontology, growth: tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame | None],
                       methods: Mapping[str, pd.DataFrame], pairs: Iterable[tuple[str, str]],
                       options: BenchmarkOptions = BenchmarkOptions(), **request) -> pd.DataFrame:
    """Paired bootstrap of ``metric(a) - metric(b)`` per (mode, aspect), same resampled proteins.

    ``growth`` is ``(targets, ground_truth, known)``; ``request``: :class:`PairedRequest`
    (``metric``, ``toi``, ``taus``, ``clusters``). ``metric`` ``f_at_valid_tau`` (the headline)
    reads each method at its own VALID threshold
    ``taus[(method, mode, aspect)]`` in every replicate; a pair where either method has no VALID
    threshold gets no delta and a ``note``. The oracle metrics (``fmax_oracle``, ...) re-pick the
    best TEST threshold per replicate. With ``clusters`` (the targets' sequence clusters,
    ``core.neighbours.homology.homology_clusters``) both methods also see the same resampled clusters.

    Returns
    -------
    DataFrame one row per (a, b, mode, aspect): ``profile`` (``options.profile``), ``delta, low,
    high, p_value, n_proteins`` (the (1 - alpha) percentile interval of the replicate differences)
    and, with ``clusters``, ``cluster_low, cluster_high, cluster_p_value, n_clusters``.
    """
    req = PairedRequest.of(request)
    at_tau = req.metric == HEADLINE
    pairs = list(pairs)
    for name in {m for pair in pairs for m in pair}:
        if name not in methods:
            raise TempoInputError(f"paired bootstrap: no method {name!r} (have {sorted(methods)})")
    # alone: every method's split held for the pairs of each cell, a cell's frames only while it is scored
    frames = (CellFrames(growth, methods, keep_frames=False, keep_splits=True) if req.frames is None
              else req.frames.check(growth, methods))
    cells = list(frames.cells.items())
    slots: dict[tuple[int, int], list[dict]] = {}
    for c, ((mode, aspect), cell) in enumerate(cells):
        key = {"profile": options.profile, "mode": mode, "aspect": aspect, "metric": req.metric}
        settled, (preds, contents), todo = _cell_pairs(cell, key, pairs, frames, req)
        slots.update({(i, c): rows for i, rows in settled.items()})
        if not todo:
            continue
        # one setup per cell, each method's replicates once for all its pairs (core.evaluation)
        results = paired_bootstraps(eval_ontology, cell.truth, preds, [t[1:] for t in todo],
                                    metric="f" if at_tau else METRICS[req.metric][1], n_boot=max(options.n_boot, 1),
                                    seed=options.seed, alpha=options.alpha, known=cell.known, toi=req.toi,
                                    prop=options.prop, clusters=req.clusters, contents=contents)
        n_proteins = int(cell.truth["protein"].nunique())
        for (i, a, b, _, _), result in zip(todo, results):
            # None: one method covers no protein at any threshold (its metric is undefined, not 0): no interval
            slots[(i, c)] = ([{**key, "a": a, "b": b, "n_proteins": n_proteins}] if result is None
                             else [{**key, "a": a, "b": b, **values} for values in result.values()])
    rows = [row for i in range(len(pairs)) for c in range(len(cells)) for row in slots.get((i, c), [])]
    columns = ["profile", "a", "b", "mode", "aspect", "metric", "delta", "low", "high", "p_value", "n_proteins"]
    columns += (["cluster_low", "cluster_high", "cluster_p_value", "n_clusters"] if req.clusters is not None else [])
    columns += ["note"]
    return pd.DataFrame(rows, columns=columns)


def results_frame(summary: pd.DataFrame, window: str, derived: bool) -> pd.DataFrame:
    """The report module's tidy results table (``core.evaluation.report.RESULT_COLUMNS``) from a summary."""
    _require(summary, ("method", "mode", "aspect", "fmax_oracle"), "benchmark summary")
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


def catalog_frame(windows: Iterable[str], states: Mapping[str, tuple[str, str]],
                  derived: Mapping[str, bool] | None = None) -> pd.DataFrame:
    """One row per window: ``status`` (ready / stale / failed / pending / superseded) and why.

    ``states`` maps a window to ``tempo status``'s state and reason of its ``benchmark``
    (``graph_state.GraphState``: the one rule for stale, failed and superseded), shown under the
    catalog's names (:data:`CATALOG_STATUS`); a window absent from it is pending.
    """
    rows = []
    for window in windows:
        state, reason = states.get(window, ("missing", ""))
        status = CATALOG_STATUS.get(state, state)
        rows.append({"window": window, "status": status, "derived": bool((derived or {}).get(window, False)),
                     "reasons": "" if status in ("ready", "pending") else reason})
    return pd.DataFrame(rows, columns=["window", "status", "derived", "reasons"])


def compare_windows(results: pd.DataFrame, window_a: str, window_b: str,
                    metrics: Iterable[str] = ("f_at_valid_tau", "fmax_oracle", "wfmax", "smin")) -> pd.DataFrame:
    """Side by side: one row per (profile, mode, aspect, method) scored in both windows, ``b - a`` deltas."""
    _require(results, ("window", "mode", "aspect", "method"), "results")
    for window in (window_a, window_b):
        if window not in set(results["window"]):
            raise TempoInputError(f"no results for window {window!r}", path="results")
    metrics = [m for m in metrics if m in results.columns]
    keys = (["profile"] if "profile" in results.columns else []) + ["mode", "aspect", "method"]
    a = results[results["window"] == window_a][keys + metrics]
    b = results[results["window"] == window_b][keys + metrics]
    out = a.merge(b, on=keys, suffixes=("_a", "_b"))
    for metric in metrics:
        out[f"{metric}_delta"] = out[f"{metric}_b"] - out[f"{metric}_a"]
    return out.sort_values(keys, kind="mergesort").reset_index(drop=True)


def decay_table(summary: pd.DataFrame, paired: pd.DataFrame, suffix: str = "@t-1",
                metric: str = HEADLINE) -> pd.DataFrame:
    """The same method trained at the older cutoff (``<method><suffix>``) vs the newer one.

    Returns one row per (method, mode, aspect) scored both ways: ``<metric>_newer,
    <metric>_older, delta`` (newer - older; ``metric`` the headline F at the method's VALID
    threshold by default) and, where ``paired`` holds the pair, its bootstrap interval (and the
    cluster-level one, ``delta_cluster_low/high``). With a ``profile`` column, per profile.
    """
    _require(summary, ("method", "mode", "aspect", metric), "benchmark summary")
    older = summary[summary["method"].str.endswith(suffix)].copy()
    older["method"] = older["method"].str[: -len(suffix)]
    keys = (["profile"] if "profile" in summary.columns else []) + ["method", "mode", "aspect"]
    out = summary[keys + [metric]].merge(older[keys + [metric]], on=keys, suffixes=("_newer", "_older"))
    out["delta"] = out[f"{metric}_newer"] - out[f"{metric}_older"]
    if len(paired):
        p = paired[paired["b"] == paired["a"] + suffix].rename(columns={
            "a": "method", "low": "delta_low", "high": "delta_high", "cluster_low": "delta_cluster_low",
            "cluster_high": "delta_cluster_high"})
        extra = [c for c in ("delta_low", "delta_high", "p_value", "delta_cluster_low", "delta_cluster_high")
                 if c in p.columns]
        out = out.merge(p[[k for k in keys if k in p.columns] + extra], on=[k for k in keys if k in p.columns],
                        how="left")
    return out.sort_values(keys, kind="mergesort").reset_index(drop=True)
