"""Plots and self-contained HTML/Markdown/TSV reports of evaluation results.

Two inputs, both produced by the evaluator:

* **curves**: cafaeval's all-thresholds frame per method (``df_all``; ``ns, tau`` as index or
  columns; ``pr, rc, f`` and their ``*_w`` variants), as from
  :func:`tempo_assets.core.evaluation.evaluate_frames`.
* **results**: the tidy table, one row per window x mode (NK/LK/PK) x aspect x method, columns
  :data:`RESULT_COLUMNS` (only :data:`REQUIRED_COLUMNS` are mandatory; any ``<metric>_low`` /
  ``<metric>_high`` pair is drawn as a confidence interval). ``derived`` flags a number that
  rests on a derived release; every place that number appears carries a visible marker.

Rows come in window, mode (NK, LK, PK), aspect (BP, MF, CC), method-name order, and a method
keeps its colour in every plot, whatever the order of the inputs.

Plots use matplotlib's Agg canvas directly (no pyplot state), the default style, a fixed size
and dpi, and PNG metadata without the ``Software`` stamp, so equal inputs give equal bytes.
HTML reports inline their images as ``data:`` URIs and their CSS, and forbid every external
fetch with a Content-Security-Policy, so one file is the whole report.
"""
from __future__ import annotations

import base64
import html
import io
import math
from pathlib import Path
from typing import Any, Mapping

import jinja2
import matplotlib
import matplotlib.style
import numpy as np
import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from tempo_assets.core.errors import TempoInputError
from tempo_assets.core.windows import try_parse_window_key
from tempo_assets.core.io import atomic_write

__all__ = [
    "CURVE_PIXELS",
    "LONGITUDINAL_PIXELS",
    "REQUIRED_COLUMNS",
    "RESULT_COLUMNS",
    "ReportInputError",
    "plot_fmax_curve",
    "plot_longitudinal",
    "plot_precision_recall",
    "render_archive_report",
    "render_window_report",
    "results_to_markdown",
    "results_to_tsv",
    "write_report",
]

from tempo_assets.core.homology import IDENTITY_STRATA  # noqa: E402
from tempo_assets.core.scoring import ORACLE_LABEL, PROFILE_STATEMENTS, PROFILES  # noqa: E402
from tempo_assets.core.vocabulary import ASPECTS, MODES, NAMESPACES  # noqa: E402
_SHORT = {v: k for k, v in NAMESPACES.items()}
_KEY_COLUMNS = ["window", "profile", "mode", "aspect", "method"]
RESULT_COLUMNS = _KEY_COLUMNS + [
    "f_at_valid_tau", "valid_tau", "f_at_valid_tau_low", "f_at_valid_tau_high", "f_at_valid_tau_cluster_low",
    "f_at_valid_tau_cluster_high", "wf_at_valid_tau", "s_at_valid_tau", "f_micro_w_at_valid_tau", "fmax_oracle",
    "tau_oracle", "fmax_oracle_low", "fmax_oracle_high", "fmax_oracle_cluster_low", "fmax_oracle_cluster_high",
    "wfmax", "smin", "f_micro_w", "coverage", "n_targets", "derived"]
REQUIRED_COLUMNS = ["window", "mode", "aspect", "method", "fmax_oracle", "derived"]
# the columns of `tempo report --by identity` rows (core.scoring.STRATA_COLUMNS, with the window)
STRATA_REPORT_COLUMNS = ["window", "profile", "mode", "aspect", "method", "identity_stratum", "n_targets",
                         "valid_tau", "f_at_valid_tau", "derived"]
METRIC_LABELS = {"f_at_valid_tau": "F at the VALID threshold",
                 "fmax_oracle": f"Fmax oracle ({ORACLE_LABEL})",
                 "wfmax": "weighted Fmax (oracle)", "smin": "Smin (oracle)", "f_micro_w": "weighted micro F",
                 "coverage": "coverage"}
ORACLE_NOTE = (f"* Fmax oracle, \u03c4 oracle, wFmax, Smin: {ORACLE_LABEL}. The protocol's numbers are "
               "F, wF and S at each method's VALID threshold.")
# table columns: (results column, header, digits)
_TABLE = [("f_at_valid_tau", "F at VALID &tau; [95% CI]", 3), ("valid_tau", "&tau; (VALID)", 2),
          ("wf_at_valid_tau", "wF at VALID &tau;", 3), ("s_at_valid_tau", "S at VALID &tau;", 3),
          ("f_micro_w_at_valid_tau", "F<sub>micro,w</sub> at VALID &tau;", 3),
          ("fmax_oracle", "Fmax oracle* [95% CI]", 3), ("tau_oracle", "&tau; oracle*", 2),
          ("wfmax", "wFmax*", 3), ("smin", "Smin*", 3), ("f_micro_w", "F<sub>micro,w</sub>*", 3),
          ("coverage", "coverage", 3)]
# what each column of a results table means (the Markdown legend; the HTML report's too)
COLUMN_LEGEND = [
    ("profile", "scoring conventions (see each profile's one-line statement); never mixed in one number"),
    ("mode", "NK no knowledge, LK limited knowledge, PK partial knowledge (scored separately, never pooled)"),
    ("F at VALID tau", "the headline: F at the threshold each method fixed on VALID growth (t-1, t0], read on TEST"),
    ("[a, b]", "95 % percentile bootstrap interval resampling target proteins"),
    ("c[a, b]", "95 % interval resampling sequence clusters of the TEST targets (homologues are not independent)"),
    ("tau (VALID)", "that threshold"),
    ("wF / S / F_micro,w at VALID tau", "IA-weighted F, semantic distance S and IA-weighted micro F at it"),
    ("Fmax oracle*, tau oracle*, wFmax*, Smin*, F_micro,w*", f"{ORACLE_LABEL}"),
    ("coverage", "share of targets with a prediction at the oracle threshold"),
    ("targets", "TEST targets scored in the cell"),
    ("derived", "yes: the row rests on a derived release (see the caveat below)"),
]
DERIVED_CAVEAT = ("Derived releases: a row marked `derived` rests on a release reconstructed from another real "
                  "source (for example an older snapshot cut from a newer GAF at its dates) rather than a "
                  "verbatim upstream file; its numbers are indicative and not directly comparable with numbers "
                  "on real releases.")
DPI = 100
CURVE_INCHES = (8.0, 5.0)
LONGITUDINAL_INCHES = (12.0, 8.0)
CURVE_PIXELS = (int(CURVE_INCHES[0] * DPI), int(CURVE_INCHES[1] * DPI))
LONGITUDINAL_PIXELS = (int(LONGITUDINAL_INCHES[0] * DPI), int(LONGITUDINAL_INCHES[1] * DPI))
_COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
           "#7f7f7f", "#bcbd22", "#17becf"]
DERIVED_LEGEND = (
    "A number marked <sup class=\"derived\">derived</sup> rests on a <em>derived</em> release: "
    "one reconstructed from another real source (for example an older annotation snapshot cut "
    "from a newer GAF at its column-14 dates, or an ontology converted from another format) "
    "rather than a verbatim upstream file. Such reconstructions are imperfect, so these numbers "
    "are indicative and not directly comparable with numbers on real releases."
)
_CSS = """
body{font-family:-apple-system,"Segoe UI",Helvetica,Arial,sans-serif;margin:16px auto;
max-width:1180px;padding:0 12px;color:#1a1a1a;background:#fff;line-height:1.4}
h1{font-size:1.6em;margin-bottom:.2em}h2{border-bottom:1px solid #ccc;padding-bottom:.2em}
table{border-collapse:collapse;margin:.5em 0 1.5em;font-size:.92em}
th,td{border:1px solid #d0d0d0;padding:3px 8px;text-align:right;vertical-align:top}
th{background:#f2f2f2}td.text,th.text{text-align:left}
tr.derived-row td{background:#fff7e6}
sup.derived{color:#a34700;font-weight:bold;font-size:.72em;margin-left:2px}
p.legend{background:#fff7e6;border-left:4px solid #a34700;padding:6px 10px}
figure{margin:0 0 1.5em}figcaption{font-size:.9em;color:#444}
img{max-width:100%;height:auto;border:1px solid #eee}
pre{white-space:pre-wrap;margin:0;font-size:.85em}
.note{color:#555;font-size:.92em}
""".strip()
_CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'"


class ReportInputError(TempoInputError):
    """A results table or curve frame handed to the report renderer is malformed."""


# --------------------------------------------------------------------------------------------
# inputs


def _short_aspect(value: Any) -> str:
    text = str(value)
    return _SHORT.get(text, text)


def _order(values, preferred) -> list:
    seen = list(dict.fromkeys(values))
    return [v for v in preferred if v in seen] + sorted(v for v in seen if v not in preferred)


def _check_results(results: pd.DataFrame) -> pd.DataFrame:
    """Validated copy: short aspects, boolean ``derived``, rows in report order."""
    if not isinstance(results, pd.DataFrame):
        raise ReportInputError(f"results must be a DataFrame, got {type(results).__name__}")
    missing = [c for c in REQUIRED_COLUMNS if c not in results.columns]
    if missing:
        raise ReportInputError(f"results table lacks columns {missing} "
                               f"(has {list(results.columns)})", path="results")
    frame = results.reset_index(drop=True).copy()
    for column in ("window", "mode", "method"):
        frame[column] = frame[column].astype(str)
    frame["aspect"] = frame["aspect"].map(_short_aspect)
    bad = ~frame["aspect"].isin(ASPECTS)
    if bad.any():
        row = int(np.flatnonzero(bad.to_numpy())[0])
        raise ReportInputError(f"row {row}: aspect {results['aspect'].iloc[row]!r} is not "
                               "BP, MF or CC", path="results")
    derived = []
    for row, value in enumerate(frame["derived"].tolist()):
        if isinstance(value, (bool, np.bool_)) or value in (0, 1):
            derived.append(bool(value))
        else:
            raise ReportInputError(f"row {row}: derived must be a boolean, got {value!r}",
                                   path="results")
    frame["derived"] = derived
    for column in frame.columns:
        if column in RESULT_COLUMNS[len(_KEY_COLUMNS):-1] or column.endswith(("_low", "_high")):
            try:
                frame[column] = pd.to_numeric(frame[column], errors="raise").astype(np.float64)
            except (TypeError, ValueError) as exc:
                raise ReportInputError(f"column {column!r} is not numeric: {exc}",
                                       path="results") from exc
    methods = sorted(set(frame["method"]))
    if "profile" in frame.columns:
        frame["profile"] = frame["profile"].astype(str)
    profiles = _order(frame["profile"], PROFILES) if "profile" in frame.columns else []
    keys = pd.DataFrame({
        "w": frame["window"],
        "r": frame["profile"].map({p: i for i, p in enumerate(profiles)}) if profiles else 0,
        "m": frame["mode"].map({m: i for i, m in enumerate(_order(frame["mode"], MODES))}),
        "a": frame["aspect"].map({a: i for i, a in enumerate(ASPECTS)}),
        "p": frame["method"].map({m: i for i, m in enumerate(methods)}),
    })
    order = keys.sort_values(["w", "r", "m", "a", "p"], kind="mergesort").index
    return frame.loc[order].reset_index(drop=True)


def _curve_rows(df_all: pd.DataFrame, ns: str, weighted: bool, method: str) -> pd.DataFrame | None:
    """``tau, pr, rc, f`` of one namespace, tau ascending; None when the frame has no such rows."""
    if not isinstance(df_all, pd.DataFrame):
        raise ReportInputError(f"curve of {method!r} must be a DataFrame, got "
                               f"{type(df_all).__name__}")
    frame = df_all if {"ns", "tau"} <= set(df_all.columns) else df_all.reset_index()
    sfx = "_w" if weighted else ""
    needed = ["ns", "tau", "pr" + sfx, "rc" + sfx, "f" + sfx]
    missing = [c for c in needed if c not in frame.columns]
    if missing:
        raise ReportInputError(f"curve of {method!r} lacks columns {missing}", path=method)
    if "filename" in frame.columns and frame["filename"].nunique() > 1:
        raise ReportInputError(f"curve of {method!r} holds several prediction files",
                               path=method)
    full = NAMESPACES.get(ns, ns)
    rows = frame[frame["ns"].astype(str).isin([full, _short_aspect(full)])]
    if rows.empty:
        return None
    out = pd.DataFrame({"tau": rows["tau"].astype(np.float64).to_numpy(),
                        "pr": rows["pr" + sfx].astype(np.float64).to_numpy(),
                        "rc": rows["rc" + sfx].astype(np.float64).to_numpy(),
                        "f": rows["f" + sfx].astype(np.float64).to_numpy()})
    return out.sort_values("tau", kind="mergesort").reset_index(drop=True)


def _point_at(rows: pd.DataFrame, tau: float | None) -> tuple[float, float, float, float]:
    """(tau, f, pr, rc) at ``tau``, or at the first maximum of f when ``tau`` is None.

    A tau missing from the rows is a threshold where nothing was predicted (cafaeval drops
    rows with zero coverage): F, precision and recall count as 0 there.
    """
    if tau is None or not np.isfinite(tau):
        i = int(np.argmax(rows["f"].to_numpy()))
        return (float(rows["tau"].iloc[i]), float(rows["f"].iloc[i]), float(rows["pr"].iloc[i]),
                float(rows["rc"].iloc[i]))
    hit = np.flatnonzero(np.isclose(rows["tau"].to_numpy(), tau, rtol=0, atol=1e-9))
    if hit.size == 0:
        return float(tau), 0.0, 0.0, 0.0
    i = int(hit[0])
    return float(tau), float(rows["f"].iloc[i]), float(rows["pr"].iloc[i]), float(rows["rc"].iloc[i])


# --------------------------------------------------------------------------------------------
# plots


def _new_figure(inches: tuple[float, float]) -> Figure:
    figure = Figure(figsize=inches, dpi=DPI)
    FigureCanvasAgg(figure)
    return figure


def _png_bytes(figure: Figure) -> bytes:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=DPI, metadata={"Software": None})
    return buffer.getvalue()


def _emit(png: bytes, path: str | Path | None) -> bytes:
    if path is not None:
        with atomic_write(path, "wb") as handle:
            handle.write(png)
    return png


def _method_colors(methods) -> dict[str, str]:
    return {m: _COLORS[i % len(_COLORS)] for i, m in enumerate(methods)}


def _curve_series(curves: Mapping[str, pd.DataFrame], ns: str, weighted: bool):
    if not isinstance(curves, Mapping) or not curves:
        raise ReportInputError("curves must be a non-empty mapping method -> df_all")
    series = {}
    for method, df_all in sorted(curves.items(), key=lambda item: str(item[0])):
        rows = _curve_rows(df_all, ns, weighted, str(method))
        if rows is not None:
            series[str(method)] = rows
    if not series:
        raise ReportInputError(f"no curve has rows for namespace {ns!r}", path="curves")
    return series


def plot_fmax_curve(curves: Mapping[str, pd.DataFrame], ns: str, path: str | Path | None = None,
                    *, taus: Mapping[str, float] | None = None, weighted: bool = False) -> bytes:
    """F over the threshold grid, one line per method, its ``tau`` marked.

    Parameters
    ----------
    curves : mapping method -> cafaeval ``df_all`` (rows over ``tau``, shape (n_tau, n_cols)
        per namespace)
    ns : ``"BP"``/``"MF"``/``"CC"`` or cafaeval's namespace string
    path : PNG written here (atomically) when given
    taus : method -> threshold fixed on VALID, marked instead of the curve's own argmax
    weighted : plot ``f_w`` instead of ``f``

    Returns
    -------
    bytes : the PNG, :data:`CURVE_PIXELS` wide x high
    """
    series = _curve_series(curves, ns, weighted)
    colors = _method_colors(series)
    aspect = _short_aspect(NAMESPACES.get(ns, ns))
    with matplotlib.style.context("default"):
        figure = _new_figure(CURVE_INCHES)
        ax = figure.add_subplot()
        for method, rows in series.items():
            fixed = None if taus is None else taus.get(method)
            tau, f, _, _ = _point_at(rows, fixed)
            kind = "F at VALID" if fixed is not None else "Fmax oracle at"
            ax.plot(rows["tau"], rows["f"], color=colors[method], lw=1.8,
                    label=f"{method} ({kind} \u03c4={tau:.2f}: {f:.3f})")
            ax.axvline(tau, color=colors[method], ls=":", lw=1)
            ax.plot([tau], [f], "o", color=colors[method], ms=7)
        ax.set_xlim(0, 1)
        ax.set_ylim(0, 1)
        ax.set_xlabel("threshold \u03c4")
        ax.set_ylabel("weighted F" if weighted else "F")
        ax.set_title(f"{'Weighted F' if weighted else 'F'} over threshold \u2014 {aspect}"
                     + _oracle_subtitle(series, taus))
        ax.grid(alpha=0.3)
        ax.legend(loc="upper right", fontsize=8)
        figure.subplots_adjust(left=0.08, right=0.97, top=0.92, bottom=0.11)
        return _emit(_png_bytes(figure), path)


def _oracle_subtitle(series: Mapping[str, Any], taus: Mapping[str, float] | None) -> str:
    """A second title line when a method is marked at its oracle point (no VALID threshold)."""
    oracle = [m for m in series if taus is None or taus.get(m) is None]
    return f"\n(oracle points: {ORACLE_LABEL})" if oracle else ""


def plot_precision_recall(curves: Mapping[str, pd.DataFrame], ns: str,
                          path: str | Path | None = None, *,
                          taus: Mapping[str, float] | None = None,
                          weighted: bool = False) -> bytes:
    """Precision against recall over the threshold grid, iso-F lines, each method's tau marked.

    Parameters and return as :func:`plot_fmax_curve`.
    """
    series = _curve_series(curves, ns, weighted)
    colors = _method_colors(series)
    aspect = _short_aspect(NAMESPACES.get(ns, ns))
    with matplotlib.style.context("default"):
        figure = _new_figure(CURVE_INCHES)
        ax = figure.add_subplot()
        grid = np.linspace(0.01, 1, 200)
        for level in (0.2, 0.4, 0.6, 0.8):
            recall = grid[grid > level / 2]
            precision = level * recall / (2 * recall - level)
            keep = (precision > 0) & (precision <= 1)
            ax.plot(recall[keep], precision[keep], color="#bbbbbb", lw=0.8, ls="--")
            ax.annotate(f"F={level}", (1.0, level / (2 - level)), fontsize=7, color="#888888",
                        xytext=(-30, 3), textcoords="offset points")
        for method, rows in series.items():
            fixed = None if taus is None else taus.get(method)
            tau, f, pr, rc = _point_at(rows, fixed)
            kind = "VALID " if fixed is not None else "oracle "
            ax.plot(rows["rc"], rows["pr"], color=colors[method], lw=1.8,
                    label=f"{method} ({kind}\u03c4={tau:.2f}, F={f:.3f})")
            ax.plot([rc], [pr], "o", color=colors[method], ms=7)
        ax.set_xlim(0, 1)
        ax.set_ylim(0, 1)
        ax.set_xlabel("weighted recall" if weighted else "recall")
        ax.set_ylabel("weighted precision" if weighted else "precision")
        ax.set_title(f"Precision\u2013recall \u2014 {aspect}" + _oracle_subtitle(series, taus))
        ax.grid(alpha=0.3)
        ax.legend(loc="upper right", fontsize=8)
        figure.subplots_adjust(left=0.08, right=0.97, top=0.92, bottom=0.11)
        return _emit(_png_bytes(figure), path)


def _window_label(key: str) -> str:
    window = try_parse_window_key(key)
    return f"{window.t0}\n\u2192 {window.t1}" if window else key


def plot_longitudinal(results: pd.DataFrame, metric: str = "f_at_valid_tau",
                      path: str | Path | None = None) -> bytes:
    """One metric across windows: x = window (TEST span t0 -> t1), one line per method.

    Facets are modes (rows) x aspects (columns). ``<metric>_low``/``<metric>_high`` columns,
    when present, draw a confidence band; points resting on a derived release are hollow.

    Parameters
    ----------
    results : the tidy results table (n_rows rows)
    metric : a numeric column of ``results`` (``fmax``, ``wfmax``, ``smin``, ...)
    path : PNG written here (atomically) when given

    Returns
    -------
    bytes : the PNG, :data:`LONGITUDINAL_PIXELS` wide x high
    """
    frame = _check_results(results)
    if metric not in frame.columns:
        raise ReportInputError(f"results table has no column {metric!r}", path="results")
    if "profile" in frame.columns and frame["profile"].nunique() > 1:  # one line per (method, profile)
        frame = frame.assign(method=frame["method"] + " [" + frame["profile"] + "]")
    low, high = f"{metric}_low", f"{metric}_high"
    has_ci = low in frame.columns and high in frame.columns
    windows = sorted(frame["window"].unique())
    x_of = {w: i for i, w in enumerate(windows)}
    modes = _order(frame["mode"], MODES)
    aspects = [a for a in ASPECTS if a in set(frame["aspect"])]
    methods = sorted(set(frame["method"]))
    colors = _method_colors(methods)
    with matplotlib.style.context("default"):
        figure = _new_figure(LONGITUDINAL_INCHES)
        axes = figure.subplots(len(modes), len(aspects), sharex=True, sharey=True, squeeze=False)
        for r, mode in enumerate(modes):
            for c, aspect in enumerate(aspects):
                ax = axes[r][c]
                cell = frame[(frame["mode"] == mode) & (frame["aspect"] == aspect)]
                for method in methods:
                    rows = cell[cell["method"] == method]
                    if rows.empty:
                        continue
                    rows = rows.assign(x=rows["window"].map(x_of)).sort_values("x")
                    x, y = rows["x"].to_numpy(float), rows[metric].to_numpy(float)
                    color = colors[method]
                    if has_ci:
                        lo, hi = rows[low].to_numpy(float), rows[high].to_numpy(float)
                        ok = np.isfinite(lo) & np.isfinite(hi)
                        ax.fill_between(x[ok], lo[ok], hi[ok], color=color, alpha=0.18, lw=0)
                        ax.vlines(x[ok], lo[ok], hi[ok], color=color, lw=1, alpha=0.7)
                    ax.plot(x, y, "-", color=color, lw=1.6)
                    derived = rows["derived"].to_numpy(bool)
                    ax.plot(x[~derived], y[~derived], "o", color=color, ms=6)
                    ax.plot(x[derived], y[derived], "o", mfc="white", mec=color, mew=1.6, ms=7)
                ax.set_title(f"{mode} \u00b7 {aspect}", fontsize=10)
                ax.grid(alpha=0.3)
                if c == 0:
                    ax.set_ylabel(METRIC_LABELS.get(metric, metric))
        for ax in axes[-1]:
            ax.set_xticks(range(len(windows)))
            ax.set_xticklabels([_window_label(w) for w in windows], fontsize=7)
            ax.set_xlim(-0.5, len(windows) - 0.5)
        handles = [Line2D([], [], color=colors[m], marker="o", lw=1.6, label=m) for m in methods]
        if frame["derived"].any():
            handles.append(Line2D([], [], color="#555555", marker="o", mfc="white", lw=0,
                                  label="derived release"))
        figure.legend(handles=handles, loc="lower center", ncol=min(len(handles), 6),
                      fontsize=9, frameon=False)
        figure.suptitle(f"{METRIC_LABELS.get(metric, metric)} by TEST window", fontsize=12)
        figure.subplots_adjust(left=0.07, right=0.98, top=0.92, bottom=0.16, hspace=0.3,
                               wspace=0.08)
        return _emit(_png_bytes(figure), path)


# --------------------------------------------------------------------------------------------
# HTML


def _esc(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _fmt(value: Any, digits: int) -> str:
    if value is None:
        return "\u2013"
    try:
        number = float(value)
    except (TypeError, ValueError):
        return _esc(value)
    if not math.isfinite(number):
        return "\u2013"
    return f"{number:.{digits}f}"


def _cell_text(row: Mapping[str, Any], column: str, digits: int) -> str | None:
    """Formatted value with its CI, or None when the table has no such value."""
    if column not in row or row[column] is None or (
            isinstance(row[column], float) and not math.isfinite(row[column])):
        return None
    text = _fmt(row[column], digits)
    for level, opening in (("", "["), ("cluster_", "c[")):
        low, high = row.get(f"{column}_{level}low"), row.get(f"{column}_{level}high")
        if low is not None and high is not None and np.isfinite(low) and np.isfinite(high):
            text += f" {opening}{_fmt(low, digits)}, {_fmt(high, digits)}]"
    return text


_MARK = '<sup class="derived" title="rests on a derived release">derived</sup>'

# the HTML is rendered by jinja2 templates with autoescaping: values are escaped where they are
# written; ``|safe`` marks the fragments that are HTML already (formatted cells, figures, sections)
_HTML = jinja2.Environment(autoescape=True, trim_blocks=True, lstrip_blocks=True,
                           undefined=jinja2.StrictUndefined)
_RESULTS_TABLE = _HTML.from_string("""<table>
<thead><tr>{% if with_window %}<th class="text">window</th>{% endif %}<th class="text">mode</th>\
<th class="text">aspect</th><th class="text">method</th>{% for header in headers %}<th>{{ header|safe }}</th>\
{% endfor %}{% if targets %}<th>targets</th>{% endif %}</tr></thead>
<tbody>
{% for row in rows %}
<tr{% if row.derived %} class="derived-row"{% endif %}>{% if with_window %}<td class="text">{{ row.window }}</td>\
{% endif %}<td class="text">{{ row.mode }}</td><td class="text">{{ row.aspect }}</td>\
<td class="text">{{ row.method }}</td>{% for text in row.cells %}{% if text is none %}<td>–</td>\
{% else %}<td>{{ text|safe }}{% if row.derived %}{{ mark|safe }}{% endif %}</td>{% endif %}{% endfor %}\
{% if targets %}<td>{{ row.targets }}</td>{% endif %}</tr>
{% endfor %}
</tbody>
</table>""")
_PROVENANCE = _HTML.from_string("""{% if not rows %}<p class="note">No provenance recorded.</p>{% else %}<table>
{% for key, value in rows %}
<tr><th class="text">{{ key }}</th><td class="text">{{ value|safe }}</td></tr>
{% endfor %}
</table>{% endif %}""")
_FIGURE = _HTML.from_string("""<figure><img src="data:image/png;base64,{{ data }}" alt="{{ alt }}" \
width="{{ width }}" height="{{ height }}"><figcaption>{{ caption|safe }}</figcaption></figure>""")
_PAGE = _HTML.from_string("""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{{ csp|safe }}">
<title>{{ title }}</title>
<style>
{{ css|safe }}
</style>
</head>
<body>
{% for part in body %}
{{ part|safe }}
{% endfor %}
</body>
</html>
""")


_GATE_COLOURS = {"fail": "#b00020", "investigate": "#a34700", "pass": "#1b6e20"}
_GATE_BANNER = _HTML.from_string("""<div id="quality-gate" style="border:3px solid {{ colour }};padding:6px 10px;\
margin-bottom:1em"><strong style="color:{{ colour }}">{{ headline }}</strong>{% if reasons %}<ul>\
{% for reason in reasons %}<li>{{ reason }}</li>{% endfor %}</ul>{% endif %}</div>""")


def with_gate_banner(page: str, verdict: str, headline: str, reasons: list[str]) -> str:
    """``page`` (a rendered report) with the quality gate's verdict as the first element of its body."""
    if verdict not in _GATE_COLOURS:
        raise ReportInputError(f"gate verdict must be one of {sorted(_GATE_COLOURS)}, got {verdict!r}")
    if "<body>" not in page:
        raise ReportInputError("the report has no <body> to put the quality gate's banner in")
    banner = _GATE_BANNER.render(colour=_GATE_COLOURS[verdict], headline=headline, reasons=list(reasons))
    return page.replace("<body>", "<body>\n" + banner, 1)


def _results_table(frame: pd.DataFrame, with_window: bool) -> str:
    columns = [(c, h, d) for c, h, d in _TABLE if c in frame.columns]
    targets = "n_targets" in frame.columns
    rows = []
    for row in frame.to_dict("records"):
        n = row.get("n_targets")
        rows.append({**{k: row.get(k) for k in ("window", "mode", "aspect", "method")},
                     "derived": bool(row["derived"]), "cells": [_cell_text(row, c, d) for c, _, d in columns],
                     "targets": "–" if n is None or not np.isfinite(float(n)) else int(n)})
    table = _RESULTS_TABLE.render(with_window=with_window, headers=[h for _, h, _ in columns], targets=targets,
                                  rows=rows, mark=_MARK)
    return table + f'\n<p class="note oracle">{_esc(ORACLE_NOTE)}</p>'



def _provenance_value(value: Any) -> str:
    """HTML of one provenance value: a mapping or a list of mappings is a table, a list is joined."""
    if isinstance(value, Mapping):
        cells = "".join(f'<tr><th class="text">{_esc(k)}</th><td class="text">{_provenance_value(v)}</td></tr>'
                        for k, v in value.items())
        return f"<table>{cells}</table>"
    if isinstance(value, (list, tuple)):
        if value and all(isinstance(v, Mapping) for v in value):
            columns = list(dict.fromkeys(k for v in value for k in v))
            head = "".join(f'<th class="text">{_esc(c)}</th>' for c in columns)
            body = "".join("<tr>" + "".join(f'<td class="text">{_provenance_value(v.get(c, ""))}</td>'
                                            for c in columns) + "</tr>" for v in value)
            return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
        return _esc(", ".join(str(v) for v in value)) if value else "none"
    return _esc(value)


def _provenance_table(provenance: Mapping[str, Any] | None) -> str:
    if provenance and not isinstance(provenance, Mapping):
        raise ReportInputError(f"provenance must be a mapping, got {type(provenance).__name__}")
    rows = [(key, _provenance_value(value)) for key, value in (provenance or {}).items()]
    return _PROVENANCE.render(rows=rows)


def provenance_markdown(provenance: Mapping[str, Any] | None) -> str:
    """A provenance mapping as a two-column Markdown table (lists of records as their own tables)."""
    lines = ["| key | value |", "| --- | --- |"]
    extra = []
    for key, value in (provenance or {}).items():
        if isinstance(value, (list, tuple)) and value and all(isinstance(v, Mapping) for v in value):
            lines.append(f"| {key} | {len(value)} rows, below |")
            extra += ["", f"**{key}**", "", pd.DataFrame(list(value)).to_markdown(index=False)]
            continue
        if isinstance(value, Mapping):
            text = "; ".join(f"{k}: {v}" for k, v in value.items())
        elif isinstance(value, (list, tuple)):
            text = ", ".join(str(v) for v in value) or "none"
        else:
            text = str(value)
        lines.append(f"| {key} | {text.replace('|', '/')} |")
    return "\n".join(lines + extra) + "\n"


def _figure(png: bytes, alt: str, caption: str, pixels: tuple[int, int]) -> str:
    return _FIGURE.render(data=base64.b64encode(png).decode("ascii"), alt=alt, caption=caption,
                          width=pixels[0], height=pixels[1])


def _page(title: str, body: list[str]) -> str:
    return _PAGE.render(csp=_CSP, title=title, css=_CSS, body=body)


def _legend(frame: pd.DataFrame) -> list[str]:
    return [f'<p class="legend" id="derived-legend">{DERIVED_LEGEND}</p>'] if frame["derived"].any() else []


def _profiles_of(frame: pd.DataFrame) -> list[str | None]:
    """The profiles of a results frame in report order (LAFA's first); ``[None]`` without the column."""
    return _order(frame["profile"], PROFILES) if "profile" in frame.columns else [None]


def _of_profile(frame: pd.DataFrame, profile: str | None) -> pd.DataFrame:
    return frame if profile is None else frame[frame["profile"] == profile]


def _profile_heading(profile: str | None, level: int) -> list[str]:
    if profile is None:
        return []
    statement = PROFILE_STATEMENTS.get(profile, "")
    return [f"<h{level}>Profile {_esc(profile)}</h{level}>", f'<p class="note profile">{_esc(statement)}.</p>']


def plot_identity_strata(strata: pd.DataFrame, path: str | Path | None = None) -> bytes:
    """F at each method's VALID threshold by identity stratum: modes (rows) x aspects (columns).

    Parameters
    ----------
    strata : one profile's rows of :data:`STRATA_REPORT_COLUMNS` (``identity_stratum`` in
        ``<30, 30-60, 60-90, >=90``, ``n_targets``, ``f_at_valid_tau``); one line per method
    path : PNG written here (atomically) when given

    Returns
    -------
    bytes : the PNG, :data:`LONGITUDINAL_PIXELS` wide x high
    """
    missing = [c for c in ("mode", "aspect", "method", "identity_stratum", "n_targets", "f_at_valid_tau")
               if c not in strata.columns]
    if missing:
        raise ReportInputError(f"identity strata lack columns {missing}", path="strata")
    if strata.empty:
        raise ReportInputError("identity strata are empty", path="strata")
    frame = strata.assign(aspect=strata["aspect"].map(_short_aspect))
    modes = _order(frame["mode"], MODES)
    aspects = [a for a in ASPECTS if a in set(frame["aspect"])]
    methods = sorted(set(frame["method"].astype(str)))
    colors = _method_colors(methods)
    x_of = {label: i for i, label in enumerate(IDENTITY_STRATA)}
    with matplotlib.style.context("default"):
        figure = _new_figure(LONGITUDINAL_INCHES)
        axes = figure.subplots(len(modes), len(aspects), sharex=True, sharey=True, squeeze=False)
        for r, mode in enumerate(modes):
            for c, aspect in enumerate(aspects):
                ax = axes[r][c]
                cell = frame[(frame["mode"] == mode) & (frame["aspect"] == aspect)]
                for method in methods:
                    rows = cell[cell["method"] == method]
                    rows = rows.assign(x=rows["identity_stratum"].map(x_of)).dropna(subset=["x"]).sort_values("x")
                    if rows.empty:
                        continue
                    ax.plot(rows["x"], rows["f_at_valid_tau"].astype(float), "o-", color=colors[method], lw=1.5,
                            ms=5)
                sizes = cell.drop_duplicates("identity_stratum").set_index("identity_stratum")["n_targets"]
                ax.set_title(f"{mode} \u00b7 {aspect}  (n: " + " / ".join(
                    str(int(sizes.get(label, 0))) for label in IDENTITY_STRATA) + ")", fontsize=9)
                ax.grid(alpha=0.3)
                ax.set_ylim(0, 1)
                if c == 0:
                    ax.set_ylabel("F at VALID \u03c4")
        for ax in axes[-1]:
            ax.set_xticks(range(len(IDENTITY_STRATA)))
            ax.set_xticklabels([f"{label} %" for label in IDENTITY_STRATA], fontsize=8)
            ax.set_xlim(-0.3, len(IDENTITY_STRATA) - 0.7)
            ax.set_xlabel("max identity to a t0 training protein", fontsize=8)
        handles = [Line2D([], [], color=colors[m], marker="o", lw=1.5, label=m) for m in methods]
        figure.legend(handles=handles, loc="lower center", ncol=min(len(handles), 6), fontsize=9, frameon=False)
        figure.suptitle("F at each method's VALID threshold by identity stratum", fontsize=12)
        figure.subplots_adjust(left=0.07, right=0.98, top=0.92, bottom=0.16, hspace=0.35, wspace=0.08)
        return _emit(_png_bytes(figure), path)


def _strata_section(strata: pd.DataFrame | None, profile: str | None) -> list[str]:
    if strata is None or not len(strata):
        return []
    rows = strata if profile is None or "profile" not in strata.columns else strata[strata["profile"] == profile]
    if rows.empty:
        return []
    label = f" ({profile})" if profile else ""
    return [f"<h3>Identity strata{_esc(label)}</h3>",
            _figure(plot_identity_strata(rows), f"F at VALID tau by identity stratum{label}",
                    "F at each method's VALID threshold on the TEST targets whose maximum identity to a t0 "
                    "training protein annotated in the aspect falls in each stratum (no hit: &lt;30); n per "
                    "stratum in each title.", LONGITUDINAL_PIXELS)]


def _window_roles(window_key: str) -> str:
    window = try_parse_window_key(window_key)
    if window is None:
        return ""
    t2, t1m, t0, t1 = (_esc(p) for p in window.releases)
    return (f'<p class="note">TRAIN: data &le; {t1m} (reranker labels from {t2}); VALID: growth '
            f"({t1m}, {t0}], where every choice and &tau; were fixed; TEST: growth ({t0}, {t1}], "
            "scored once with the frozen recipe. Numbers below are TEST numbers.</p>")


def _curve_groups(curves) -> dict[str | None, Mapping[str, pd.DataFrame]]:
    """``{mode or None: {method: df_all}}`` from a flat or mode-nested mapping."""
    if not isinstance(curves, Mapping):
        raise ReportInputError(f"curves must be a mapping, got {type(curves).__name__}")
    if not curves:
        return {}
    values = list(curves.values())
    if all(isinstance(v, pd.DataFrame) for v in values):
        return {None: curves}
    if all(isinstance(v, Mapping) for v in values):
        return {str(mode): group for mode, group in curves.items() if group}
    raise ReportInputError("curves must map method -> df_all, or mode -> {method: df_all}")


def _namespaces(group: Mapping[str, pd.DataFrame]) -> list[str]:
    seen = set()
    for method, df_all in group.items():
        if not isinstance(df_all, pd.DataFrame):
            raise ReportInputError(f"curve of {method!r} must be a DataFrame")
        frame = df_all if "ns" in df_all.columns else df_all.reset_index()
        if "ns" not in frame.columns:
            raise ReportInputError(f"curve of {method!r} has no ns column or index level",
                                   path=str(method))
        seen.update(_short_aspect(v) for v in frame["ns"].astype(str).unique())
    return [a for a in ASPECTS if a in seen] + sorted(seen - set(ASPECTS))


def _valid_taus(frame: pd.DataFrame, mode: str | None, aspect: str) -> dict[str, float] | None:
    if "valid_tau" not in frame.columns:
        return None
    rows = frame[frame["aspect"] == aspect]
    if mode is not None:
        rows = rows[rows["mode"] == mode]
    elif rows["mode"].nunique() != 1:
        return None
    taus = {m: float(t) for m, t in zip(rows["method"], rows["valid_tau"]) if np.isfinite(t)}
    return taus or None


def render_window_report(window_key: str, results: pd.DataFrame,
                         curves: Mapping[str, Any], provenance: Mapping[str, Any] | None,
                         strata: pd.DataFrame | None = None) -> str:
    """Self-contained HTML page of one window's TEST results.

    Parameters
    ----------
    window_key : ``t-2__t-1__t0__t1`` (rows of ``results`` with this ``window`` are shown)
    results : tidy results table (may hold other windows)
    curves : method -> ``df_all``, or mode -> {method -> ``df_all``}; one F-over-threshold and
        one precision-recall plot per (mode, namespace), tau marked where ``results`` has it
    provenance : key -> value (sources, cutoffs, recipe hash, ...), shown as a table
    strata : F at VALID tau per identity stratum (:data:`STRATA_REPORT_COLUMNS`), plotted per profile

    Returns
    -------
    str : the HTML document
    """
    frame = _check_results(results)
    frame = frame[frame["window"] == str(window_key)].reset_index(drop=True)
    if frame.empty:
        raise ReportInputError(f"results hold no row for window {window_key!r}", path="results")
    title = f"Tempo window report \u2014 {window_key}"
    body = [f"<h1>{_esc(title)}</h1>", _window_roles(str(window_key)),
            "<h2>Provenance</h2>", _provenance_table(provenance), "<h2>Scores</h2>"]
    body += _legend(frame)
    for profile in _profiles_of(frame):
        rows = _of_profile(frame, profile)
        body += _profile_heading(profile, 3)
        for mode in _order(rows["mode"], MODES):
            body += [f"<h4>{_esc(mode)}</h4>", _results_table(rows[rows["mode"] == mode], False)]
        body += _strata_section(strata, profile)
    groups = _curve_groups(curves)
    if groups:
        body.append("<h2>Threshold curves</h2>")
    for mode, group in groups.items():
        for aspect in _namespaces(group):
            taus = _valid_taus(frame, mode, aspect)
            label = f"{mode} \u00b7 {aspect}" if mode else aspect
            marked = "the VALID-fixed \u03c4" if taus else "each curve's own maximum"
            body.append(f"<h3>{_esc(label)}</h3>")
            body.append(_figure(plot_fmax_curve(group, aspect, taus=taus),
                                f"F over threshold, {label}",
                                f"F over the threshold grid, {_esc(label)}; dotted lines mark "
                                f"{marked}.", CURVE_PIXELS))
            body.append(_figure(plot_precision_recall(group, aspect, taus=taus),
                                f"precision-recall, {label}",
                                f"Precision against recall, {_esc(label)}; dots mark {marked}.",
                                CURVE_PIXELS))
    return _page(title, body)


def render_archive_report(results: pd.DataFrame, provenance: Mapping[str, Any] | None,
                          statuses: Mapping[str, tuple[str, str]] | None = None) -> str:
    """Self-contained HTML page across all windows: longitudinal plots and every result row.

    One longitudinal plot per metric among ``f_at_valid_tau, fmax_oracle, wfmax, smin`` that ``results`` holds (with
    any finite value), then one table per window, under its status (``statuses``: window ->
    ``(status, reason)`` as the catalog states it, e.g. ``stale`` with why; ``ready`` said too).
    """
    frame = _check_results(results)
    if frame.empty:
        raise ReportInputError("results table is empty", path="results")
    title = "Tempo archive report"
    windows = sorted(frame["window"].unique())
    body = [f"<h1>{title}</h1>",
            f'<p class="note">{len(windows)} window(s), '
            f'{frame["method"].nunique()} method(s); TEST numbers, NK/LK/PK never pooled.</p>']
    for profile in _profiles_of(frame):
        if profile is not None:
            body.append(f'<p class="note profile"><strong>{_esc(profile)}</strong>: '
                        f'{_esc(PROFILE_STATEMENTS.get(profile, ""))}.</p>')
    body += ["<h2>Provenance</h2>", _provenance_table(provenance), "<h2>Across windows</h2>"]
    body += _legend(frame)
    for metric in ("f_at_valid_tau", "fmax_oracle", "wfmax", "smin"):
        if metric in frame.columns and np.isfinite(frame[metric].to_numpy(float)).any():
            name = METRIC_LABELS[metric]
            body.append(_figure(plot_longitudinal(frame, metric),
                                f"{name} by window",
                                f"{_esc(name)} per TEST window; bands are confidence intervals "
                                "where given; hollow points rest on a derived release.",
                                LONGITUDINAL_PIXELS))
    body.append("<h2>All results</h2>")
    for window in windows:
        body += [f"<h3>{_esc(window)}</h3>", _window_roles(window)]
        if statuses and window in statuses:
            status, reason = statuses[window]
            why = f": {_esc(reason)}" if reason else ""
            body.append(f'<p class="note status status-{_esc(status)}"><strong>status: {_esc(status)}</strong>{why}</p>')
        for profile in _profiles_of(frame):
            body += _profile_heading(profile, 4)
            body.append(_results_table(_of_profile(frame[frame["window"] == window], profile), False))
    return _page(title, body)


def write_report(path: str | Path, html_text: str) -> Path:
    """Write a rendered report atomically (a failure leaves any previous file in place)."""
    if not isinstance(html_text, str):
        raise ReportInputError(f"report must be a str, got {type(html_text).__name__}",
                               path=path)
    path = Path(path)
    with atomic_write(path) as handle:
        handle.write(html_text)
    return path


# --------------------------------------------------------------------------------------------
# text formats for `tempo report --format md|tsv`


def _markdown_table(frame: pd.DataFrame) -> list[str]:
    columns = [(c, h, d) for c, h, d in _TABLE if c in frame.columns]
    headers = ["window", "mode", "aspect", "method"]
    headers += [h.replace("<sub>micro,w</sub>", "_micro,w").replace("&tau;", "tau")
                for _, h, _ in columns]
    if "n_targets" in frame.columns:
        headers.append("targets")
    derived = bool(frame["derived"].any())
    if derived:
        headers.append("derived")
    lines = ["| " + " | ".join(headers) + " |",
             "|" + "|".join([" --- "] * 4 + [" ---: "] * (len(headers) - 4 - derived) + [" --- "] * derived) + "|"]
    for row in frame.to_dict("records"):
        cells = [str(row[k]).replace("|", "\\|") for k in ("window", "mode", "aspect", "method")]
        for column, _, digits in columns:
            text = _cell_text(row, column, digits)
            cells.append("\u2013" if text is None else text)
        if "n_targets" in frame.columns:
            n = row["n_targets"]
            cells.append("\u2013" if n is None or not np.isfinite(float(n)) else str(int(n)))
        if derived:
            cells.append("yes" if row["derived"] else "")
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def markdown_legend(derived: bool) -> str:
    """What each column of the Markdown tables means, the oracle label, and (once) the derived caveat."""
    lines = ["**Legend**", ""] + [f"- `{column}`: {meaning}" for column, meaning in COLUMN_LEGEND]
    lines += ["", ORACLE_NOTE]
    if derived:
        lines += ["", DERIVED_CAVEAT]
    return "\n".join(lines) + "\n"


def results_to_markdown(results: pd.DataFrame, legend: bool = True) -> str:
    """The results table as GitHub Markdown, one table per profile (LAFA's first) with its statement.

    A row resting on a derived release is marked once in its ``derived`` column; the caveat that
    explains it is written once, in the legend (``legend=False`` leaves the legend to the caller).
    """
    frame = _check_results(results)
    lines: list[str] = []
    for profile in _profiles_of(frame):
        if profile is not None:
            lines += [f"### Profile `{profile}`", "", f"{PROFILE_STATEMENTS.get(profile, '')}.", ""]
        lines += _markdown_table(_of_profile(frame, profile)) + [""]
    if legend:
        lines.append(markdown_legend(bool(frame["derived"].any())))
    return "\n".join(lines).rstrip("\n") + "\n"


def format_p_value(p: Any, n_boot: int | None) -> str:
    """A bootstrap p-value as text: ``< 1/n_boot`` when no replicate crossed 0, ``–`` when undefined."""
    try:
        value = float(p)
    except (TypeError, ValueError):
        return "\u2013"
    if not math.isfinite(value):
        return "\u2013"
    if value == 0.0:
        return f"< {1 / n_boot:.2g}" if n_boot else "< 1/n_boot"
    return f"{value:.3g}"


def interval_table_markdown(table: pd.DataFrame, n_boot: int | None, digits: int = 4) -> str:
    """A paired or decay table as Markdown: no ``nan`` (``–``), p-values via :func:`format_p_value`."""
    if table is None or not len(table):
        return ""
    frame = table.copy()
    for column in frame.columns:
        if column.endswith("p_value"):
            frame[column] = [format_p_value(v, n_boot) for v in frame[column]]
        elif frame[column].dtype.kind == "f":
            frame[column] = [("\u2013" if not math.isfinite(v) else f"{v:.{digits}f}") for v in frame[column]]
        else:
            frame[column] = ["" if not isinstance(v, (list, tuple, np.ndarray)) and pd.isna(v) else v
                             for v in frame[column]]
    return frame.to_markdown(index=False, disable_numparse=True)


def strata_frame(strata: pd.DataFrame, window: str, derived: bool) -> pd.DataFrame:
    """A benchmark's identity strata as report rows (:data:`STRATA_REPORT_COLUMNS`)."""
    frame = strata.copy()
    frame.insert(0, "window", window)
    frame["derived"] = bool(derived)
    return frame[[c for c in STRATA_REPORT_COLUMNS if c in frame.columns]]


def strata_to_markdown(strata: pd.DataFrame) -> str:
    """F at VALID tau per identity stratum: per profile, one row per (window, mode, aspect, method)."""
    if strata is None or not len(strata):
        return "no identity strata\n"
    lines = []
    profiles = _order(strata["profile"], PROFILES) if "profile" in strata.columns else [None]
    for profile in profiles:
        rows = strata if profile is None else strata[strata["profile"] == profile]
        if profile is not None:
            lines += [f"### Identity strata, profile `{profile}`", ""]
        wide = rows.assign(cell=[("\u2013" if not np.isfinite(f) else f"{f:.3f}") + f" (n={int(n)})"
                                 for f, n in zip(rows["f_at_valid_tau"].astype(float), rows["n_targets"])])
        table = wide.pivot_table(index=["window", "mode", "aspect", "method"], columns="identity_stratum",
                                 values="cell", aggfunc="first", sort=False)
        table = table[[c for c in IDENTITY_STRATA if c in table.columns]].fillna("\u2013").reset_index()
        order = {m: i for i, m in enumerate(MODES)}
        table = table.sort_values(["window", "mode", "aspect", "method"],
                                  key=lambda c: c.map(order) if c.name == "mode" else c, kind="mergesort")
        lines += [table.to_markdown(index=False, disable_numparse=True), ""]
    lines.append("Each cell: F at the method's VALID threshold on the TEST targets whose maximum identity to a "
                 "t0 training protein annotated in the aspect lies in the stratum (percent; no hit: `<30`), "
                 "and their number.")
    return "\n".join(lines) + "\n"


def results_to_tsv(results: pd.DataFrame) -> str:
    """The results table as TSV: known columns first, floats ``%.6g``, ``derived`` true/false."""
    frame = _check_results(results)
    ordered = [c for c in RESULT_COLUMNS if c in frame.columns]
    ordered += [c for c in frame.columns if c not in ordered]
    frame = frame[ordered].copy()
    frame["derived"] = frame["derived"].map({True: "true", False: "false"})
    if "n_targets" in frame.columns:
        frame["n_targets"] = frame["n_targets"].map(
            lambda v: "" if not np.isfinite(v) else str(int(v)))
    return frame.to_csv(sep="\t", index=False, lineterminator="\n", float_format="%.6g",
                        na_rep="")
