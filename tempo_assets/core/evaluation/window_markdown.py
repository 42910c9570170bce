"""What a window's benchmark shows in the Dagster UI and ``tempo report``: its tables as Markdown, its
F-over-threshold and precision-recall curves as inline PNG images, and the clustering of its TEST
targets as provenance entries.

Pure: the asset layer wraps the Markdown strings in ``dg.MetadataValue.md``.
"""
from __future__ import annotations

import base64
from pathlib import Path
from typing import Any, Mapping

import pandas as pd

from tempo_assets.core.base.vocabulary import ASPECTS, MODES
from tempo_assets.core.evaluation.plots import CellPlots, CurveFigures, plot_fmax_curve, plot_precision_recall
from tempo_assets.core.evaluation.results import profile_label
from tempo_assets.core.evaluation.scoring import ORACLE_LABEL, PROFILES

SUMMARY_COLUMNS = ("profile", "method", "mode", "aspect", "n_targets", "valid_tau", "f_at_valid_tau",
                   "f_at_valid_tau_low", "f_at_valid_tau_high", "f_at_valid_tau_cluster_low",
                   "f_at_valid_tau_cluster_high", "wf_at_valid_tau", "s_at_valid_tau", "f_micro_w_at_valid_tau",
                   "fmax_oracle", "tau_oracle", "wfmax", "smin", "f_micro_w", "coverage", "note")


def inline_png(png: bytes, alt: str) -> str:
    """Markdown image with the PNG inlined as a data URI (the Dagster UI renders it)."""
    return f"![{alt}](data:image/png;base64,{base64.b64encode(png).decode('ascii')})"


def by_profile_label(frame: pd.DataFrame) -> pd.DataFrame:
    """``method`` renamed ``<method> [<profile>]`` and the ``profile`` column dropped (one plot line each)."""
    if frame is None or not len(frame) or "profile" not in frame.columns:
        return frame
    labels = [profile_label(m, p) for m, p in zip(frame["method"], frame["profile"])]
    return frame.assign(method=labels).drop(columns=["profile"])


def _draw_cell(curves: pd.DataFrame, summary: pd.DataFrame, cell: tuple[str, str], folder: Path,
               figures: CurveFigures) -> CellPlots | None:
    """The two plots of one (mode, aspect) cell, drawn on ``figures`` and written to ``folder`` (None when the
    cell has no curve)."""
    mode, aspect = cell
    rows = curves[(curves["mode"] == mode) & (curves["aspect"] == aspect)] if len(curves) else curves
    if rows.empty:
        return None
    group = {m: frame.drop(columns=["method", "mode", "aspect"]) for m, frame in rows.groupby("method")}
    chosen = summary[(summary["mode"] == mode) & (summary["aspect"] == aspect)]
    valid = chosen["valid_tau"] if "valid_tau" in chosen else pd.Series(float("nan"), index=chosen.index)
    taus = {m: t for m, t in zip(chosen["method"], valid) if m in group and pd.notna(t)} or None
    return CellPlots(fmax=plot_fmax_curve(group, aspect, folder / f"fmax_{mode}_{aspect}.png", taus=taus,
                                          figures=figures),
                     pr=plot_precision_recall(group, aspect, folder / f"pr_{mode}_{aspect}.png", taus=taus,
                                              figures=figures))


def draw_curves(curves: pd.DataFrame, summary: pd.DataFrame, folder: Path) -> dict[tuple[str, str], CellPlots]:
    """``{(mode, aspect): CellPlots}``: the F-over-threshold and precision-recall plot of every cell with curves,
    one line per method and profile, each method's VALID threshold marked; drawn once, shown by the UI
    (:func:`curve_markdown`) and the window's HTML report, and written to ``folder``
    (``fmax_<mode>_<aspect>.png``, ``pr_<mode>_<aspect>.png``), all on one figure of each kind (``CurveFigures``)."""
    curves, summary = by_profile_label(curves), by_profile_label(summary)
    cells = ((mode, aspect) for mode in MODES for aspect in ASPECTS)
    with CurveFigures() as figures:
        drawn = {cell: _draw_cell(curves, summary, cell, folder, figures) for cell in cells}
    return {cell: plots for cell, plots in drawn.items() if plots is not None}


def curve_markdown(drawn: Mapping[tuple[str, str], CellPlots]) -> dict[str, str]:
    """Per mode (``curves_<mode>``): Markdown with the two plots of each aspect (:func:`draw_curves`)."""
    out = {}
    for mode in MODES:
        parts = [line for aspect in ASPECTS if (mode, aspect) in drawn for line in (
            f"**{mode} {aspect}**", inline_png(drawn[(mode, aspect)].fmax, f"F over threshold {mode} {aspect}"),
            inline_png(drawn[(mode, aspect)].pr, f"precision-recall {mode} {aspect}"))]
        if parts:
            out[f"curves_{mode}"] = "\n\n".join(parts)
    return out


def curve_groups(curves: pd.DataFrame) -> dict[str, dict[str, pd.DataFrame]]:
    """``{mode: {method: df_all}}`` as ``core.evaluation.report.render_window_report`` takes them."""
    if curves.empty:
        return {}
    curves = by_profile_label(curves)
    return {mode: {m: rows.drop(columns=["method", "mode", "aspect"]) for m, rows in by_mode.groupby("method")}
            for mode, by_mode in curves.groupby("mode")}


def homology_provenance(info: Mapping[str, Any]) -> dict[str, Any]:
    """The clustering of the TEST targets as metadata / provenance entries (thresholds, n_clusters)."""
    if not info:
        return {}
    return {"clusters": (f"{info['n_clusters']} clusters of {info['n_proteins']} TEST target proteins "
                         f"(largest {info['largest_cluster']}): DIAMOND all-vs-all, >= {info['min_identity']:g} % "
                         f"identity over >= {info['min_coverage']:g} % of the query"),
            "cluster_min_identity": float(info["min_identity"]), "cluster_min_coverage": float(info["min_coverage"]),
            "n_clusters": int(info["n_clusters"]), "identity_corpus": info.get("identity_corpus", "")}


def method_status_markdown(status: pd.DataFrame) -> str:
    """Registered methods per window: status and reason, the VALID-threshold note."""
    columns = ["window", "method", "trained_until", "status", "reason", "valid_tau_note"]
    return status[columns].to_markdown(index=False)


def summary_markdown(summary: pd.DataFrame) -> str:
    """The headline (F at each method's VALID threshold) first; the oracle columns labelled as such."""
    columns = [c for c in SUMMARY_COLUMNS if c in summary.columns]
    if "profile" in summary.columns:  # LAFA's profile first, as every report shows them
        order = {p: i for i, p in enumerate(PROFILES)}
        summary = summary.iloc[summary["profile"].map(order).argsort(kind="stable")]
    table = summary[columns].round(3).to_markdown(index=False)
    return f"{table}\n\n`fmax_oracle`, `tau_oracle`, `wfmax`, `smin`: {ORACLE_LABEL}."


def valid_tau_markdown(taus: pd.DataFrame) -> str:
    """Every method's VALID threshold per (mode, aspect), with the data it came from."""
    if taus is None or not len(taus):
        return "no VALID thresholds"
    return taus.round(4).to_markdown(index=False)
