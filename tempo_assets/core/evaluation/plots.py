"""Plots of evaluation results: threshold curves, precision-recall, and the modes x aspects facet figures
(longitudinal, identity strata).

matplotlib's Agg canvas directly (no pyplot state), the default style, a fixed size and dpi, and PNG
metadata without the ``Software`` stamp, so equal inputs give equal bytes. matplotlib is imported at
the first plot (``_agg_figure``, ``_legend_handle``), not with the module: every command imports this
module, few draw (``tempo_assets.core.IMPORTED_WHERE_USED``)."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterator, Mapping

import numpy as np
import pandas as pd

from tempo_assets.core.evaluation.results import (
    ReportInputError, _check_results, _order, _short_aspect, profile_label,
)
from tempo_assets.core.evaluation.scoring import ORACLE_LABEL
from tempo_assets.core.neighbours.homology import IDENTITY_STRATA
from tempo_assets.core.base.io import atomic_write
from tempo_assets.core.base.vocabulary import ASPECTS, MODES, NAMESPACES
from tempo_assets.core.base.windows import try_parse_window_key

if TYPE_CHECKING:
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D


METRIC_LABELS = {"f_at_valid_tau": "F at the VALID threshold",
                 "fmax_oracle": f"Fmax oracle ({ORACLE_LABEL})",
                 "wfmax": "weighted Fmax (oracle)", "smin": "Smin (oracle)", "f_micro_w": "weighted micro F",
                 "coverage": "coverage"}
DPI = 100
CURVE_INCHES = (8.0, 5.0)
LONGITUDINAL_INCHES = (12.0, 8.0)
CURVE_PIXELS = (int(CURVE_INCHES[0] * DPI), int(CURVE_INCHES[1] * DPI))
LONGITUDINAL_PIXELS = (int(LONGITUDINAL_INCHES[0] * DPI), int(LONGITUDINAL_INCHES[1] * DPI))
_COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
           "#7f7f7f", "#bcbd22", "#17becf"]


@dataclass(frozen=True)
class CellPlots:
    """The PNGs of one (mode, aspect) cell: F over the threshold and precision-recall."""

    fmax: bytes
    pr: bytes


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
    # numpy on the few rows of a curve (pandas' per-call overhead is most of a small frame's cost)
    keep = np.isin(np.asarray([str(v) for v in frame["ns"].tolist()], dtype=object), [full, _short_aspect(full)])
    if not keep.any():
        return None
    columns = {name: frame[column].to_numpy(dtype=np.float64)[keep]
               for name, column in (("tau", "tau"), ("pr", "pr" + sfx), ("rc", "rc" + sfx), ("f", "f" + sfx))}
    order = np.argsort(columns["tau"], kind="stable")
    return pd.DataFrame({name: values[order] for name, values in columns.items()})


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


@contextlib.contextmanager
def _agg_figure(inches: tuple[float, float]) -> Iterator[Figure]:
    """A figure of ``inches`` at :data:`DPI` on matplotlib's Agg canvas (no pyplot, no backend state),
    drawn under matplotlib's default style."""
    import matplotlib.style
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    with matplotlib.style.context("default"):
        figure = Figure(figsize=inches, dpi=DPI)
        FigureCanvasAgg(figure)
        yield figure


class CurveFigures:
    """One figure per curve plot kind, kept and reused by the plots drawn inside ``with CurveFigures():``.

    A window's report draws 18 curve plots of one size on unit axes: building each figure, its axes and
    their ticks again (and entering matplotlib's default style again) was about an eighth of drawing one.
    Each plot given these figures draws its lines, title and legend on the kept axes and removes them
    once its PNG is rendered; the axes' view is fixed (0 to 1 on both), so the ticks, the grid and the
    pixels are those of a fresh figure (a test compares the bytes). Not for use by two threads at once.
    """

    def __init__(self) -> None:
        self._axes: dict[str, Any] = {}
        self._style: contextlib.ExitStack | None = None

    def __enter__(self) -> CurveFigures:
        import matplotlib.style

        self._style = contextlib.ExitStack()
        self._style.enter_context(matplotlib.style.context("default"))
        return self

    def __exit__(self, *exc: object) -> None:
        self._axes.clear()
        if self._style is not None:
            self._style.close()

    @contextlib.contextmanager
    def axes(self, kind: str, fixed: Callable[[Any], None]) -> Iterator[Any]:
        """The kept axes of ``kind`` (made, with ``fixed`` drawn on them, at the first use); what the
        caller adds to them (lines, texts, the legend) is removed when it is done."""
        if self._style is None:
            raise RuntimeError("CurveFigures is used inside its with-block only")
        if kind not in self._axes:
            with _agg_figure(CURVE_INCHES) as figure:
                self._axes[kind] = figure.add_subplot()
                fixed(self._axes[kind])
        ax = self._axes[kind]
        kept = {id(artist) for artist in ax.get_children()}
        try:
            yield ax
        finally:
            for artist in ax.get_children():
                if id(artist) not in kept:
                    artist.remove()


@contextlib.contextmanager
def _curve_axes(figures: CurveFigures | None, kind: str, fixed: Callable[[Any], None]) -> Iterator[Any]:
    """Axes for one curve plot: ``figures``' kept ones of ``kind``, or a fresh figure's with ``fixed`` drawn."""
    if figures is not None:
        with figures.axes(kind, fixed) as ax:
            yield ax
        return
    with _agg_figure(CURVE_INCHES) as figure:
        ax = figure.add_subplot()
        fixed(ax)
        yield ax


def _legend_handle(**style: Any) -> Line2D:
    """A legend entry with no data: a line of ``style`` (``color``, ``marker``, ``lw``, ``label``, ...)."""
    from matplotlib.lines import Line2D

    return Line2D([], [], **style)


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
                    *, taus: Mapping[str, float] | None = None, weighted: bool = False,
                    figures: CurveFigures | None = None) -> bytes:
    """F over the threshold grid, one line per method, its ``tau`` marked.

    Parameters
    ----------
    curves : mapping method -> cafaeval ``df_all`` (rows over ``tau``, shape (n_tau, n_cols)
        per namespace)
    ns : ``"BP"``/``"MF"``/``"CC"`` or cafaeval's namespace string
    path : PNG written here (atomically) when given
    taus : method -> threshold fixed on VALID, marked instead of the curve's own argmax
    weighted : plot ``f_w`` instead of ``f``
    figures : :class:`CurveFigures` to draw on (None: a figure of its own)

    Returns
    -------
    bytes : the PNG, :data:`CURVE_PIXELS` wide x high
    """
    series = _curve_series(curves, ns, weighted)
    colors = _method_colors(series)
    aspect = _short_aspect(NAMESPACES.get(ns, ns))
    with _curve_axes(figures, "fmax", lambda ax: None) as ax:
        for method, rows in series.items():
            fixed = None if taus is None else taus.get(method)
            tau, f, _, _ = _point_at(rows, fixed)
            kind = "F at VALID" if fixed is not None else "Fmax oracle at"
            ax.plot(rows["tau"], rows["f"], color=colors[method], lw=1.8,
                    label=f"{method} ({kind} \u03c4={tau:.2f}: {f:.3f})")
            ax.axvline(tau, color=colors[method], ls=":", lw=1)
            ax.plot([tau], [f], "o", color=colors[method], ms=7)
        _finish_unit_axes(ax, ("threshold \u03c4", "weighted F" if weighted else "F"),
                          f"{'Weighted F' if weighted else 'F'} over threshold \u2014 {aspect}"
                          + _oracle_subtitle(series, taus))
        return _emit(_png_bytes(ax.figure), path)


def _finish_unit_axes(ax, labels: tuple[str, str], title: str) -> None:
    """A curve plot's axes: both from 0 to 1, ``labels`` (x, y), ``title``, a light grid, the legend."""
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_xlabel(labels[0])
    ax.set_ylabel(labels[1])
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(loc="upper right", fontsize=8)
    ax.figure.subplots_adjust(left=0.08, right=0.97, top=0.92, bottom=0.11)


def _oracle_subtitle(series: Mapping[str, Any], taus: Mapping[str, float] | None) -> str:
    """A second title line when a method is marked at its oracle point (no VALID threshold)."""
    oracle = [m for m in series if taus is None or taus.get(m) is None]
    return f"\n(oracle points: {ORACLE_LABEL})" if oracle else ""


def _iso_f_lines(ax) -> None:
    """The precision-recall plot's dashed lines of equal F (0.2 to 0.8), labelled."""
    grid = np.linspace(0.01, 1, 200)
    for level in (0.2, 0.4, 0.6, 0.8):
        recall = grid[grid > level / 2]
        precision = level * recall / (2 * recall - level)
        keep = (precision > 0) & (precision <= 1)
        ax.plot(recall[keep], precision[keep], color="#bbbbbb", lw=0.8, ls="--")
        ax.annotate(f"F={level}", (1.0, level / (2 - level)), fontsize=7, color="#888888",
                    xytext=(-30, 3), textcoords="offset points")


def plot_precision_recall(curves: Mapping[str, pd.DataFrame], ns: str,
                          path: str | Path | None = None, *,
                          taus: Mapping[str, float] | None = None,
                          weighted: bool = False, figures: CurveFigures | None = None) -> bytes:
    """Precision against recall over the threshold grid, iso-F lines, each method's tau marked.

    Parameters and return as :func:`plot_fmax_curve`.
    """
    series = _curve_series(curves, ns, weighted)
    colors = _method_colors(series)
    aspect = _short_aspect(NAMESPACES.get(ns, ns))
    with _curve_axes(figures, "pr", _iso_f_lines) as ax:
        for method, rows in series.items():
            fixed = None if taus is None else taus.get(method)
            tau, f, pr, rc = _point_at(rows, fixed)
            kind = "VALID " if fixed is not None else "oracle "
            ax.plot(rows["rc"], rows["pr"], color=colors[method], lw=1.8,
                    label=f"{method} ({kind}\u03c4={tau:.2f}, F={f:.3f})")
            ax.plot([rc], [pr], "o", color=colors[method], ms=7)
        _finish_unit_axes(ax, ("weighted recall" if weighted else "recall",
                               "weighted precision" if weighted else "precision"),
                          f"Precision\u2013recall \u2014 {aspect}" + _oracle_subtitle(series, taus))
        return _emit(_png_bytes(ax.figure), path)


def _window_label(key: str) -> str:
    window = try_parse_window_key(key)
    return f"{window.t0}\n\u2192 {window.t1}" if window else key


@dataclass(frozen=True)
class _Facets:
    """What a modes (rows) x aspects (columns) figure shows besides its per-method lines."""

    x_labels: list[str]
    x_fontsize: int
    x_pad: float  # the x axis spans (-x_pad, n - 1 + x_pad)
    y_label: str
    title: str
    cell_title: Callable[[str, str, pd.DataFrame], tuple[str, int]]  # (mode, aspect, cell) -> text, size
    line_width: float
    hspace: float
    x_axis_label: str | None = None
    y_limits: tuple[float, float] | None = None
    extra_handles: tuple = ()


def _facet_plot(frame: pd.DataFrame, facets: _Facets, draw: Callable, path: str | Path | None) -> bytes:
    """One panel per (mode, aspect) of ``frame``, ``draw(ax, rows, color)`` for each method's rows."""
    modes = _order(frame["mode"], MODES)
    aspects = [a for a in ASPECTS if a in set(frame["aspect"])]
    methods = sorted(set(frame["method"]))
    colors = _method_colors(methods)
    with _agg_figure(LONGITUDINAL_INCHES) as figure:
        axes = figure.subplots(len(modes), len(aspects), sharex=True, sharey=True, squeeze=False)
        # no autoscaling while the lines go in: each artist added to one of the shared axes would
        # otherwise scale every panel again over everything drawn so far (quadratic in the lines);
        # the limits are scaled once below, from the same data, to the same view
        for ax in axes.flat:
            ax.set_autoscale_on(False)
        for r, mode in enumerate(modes):
            for c, aspect in enumerate(aspects):
                ax = axes[r][c]
                cell = frame[(frame["mode"] == mode) & (frame["aspect"] == aspect)]
                # each method's rows in frame order, split once (a mask per method was most of a small plot)
                by_method = dict(tuple(cell.groupby("method", sort=False))) if len(cell) else {}
                for method in methods:
                    draw(ax, by_method.get(method, cell.iloc[:0]), colors[method])
                text, size = facets.cell_title(mode, aspect, cell)
                ax.set_title(text, fontsize=size)
                ax.grid(alpha=0.3)
                if facets.y_limits is not None:
                    ax.set_ylim(*facets.y_limits)
                if c == 0:
                    ax.set_ylabel(facets.y_label)
        if facets.y_limits is None:
            for ax in axes.flat:
                ax.set_autoscaley_on(True)
            axes[0][0].autoscale_view(scalex=False)  # the axes share y: one scaling over every panel's data
        for ax in axes[-1]:
            ax.set_xticks(range(len(facets.x_labels)))
            ax.set_xticklabels(facets.x_labels, fontsize=facets.x_fontsize)
            ax.set_xlim(-facets.x_pad, len(facets.x_labels) - 1 + facets.x_pad)
            if facets.x_axis_label:
                ax.set_xlabel(facets.x_axis_label, fontsize=8)
        handles = [_legend_handle(color=colors[m], marker="o", lw=facets.line_width, label=m) for m in methods]
        handles += list(facets.extra_handles)
        figure.legend(handles=handles, loc="lower center", ncol=min(len(handles), 6), fontsize=9, frameon=False)
        figure.suptitle(facets.title, fontsize=12)
        figure.subplots_adjust(left=0.07, right=0.98, top=0.92, bottom=0.16, hspace=facets.hspace, wspace=0.08)
        return _emit(_png_bytes(figure), path)


def _positions(labels: list, x_of: Mapping[str, int]) -> tuple[np.ndarray, np.ndarray]:
    """(each label's x position, the order of the rows whose label is in ``x_of``, by x): what
    ``assign(x=labels.map(x_of)).dropna(subset=["x"]).sort_values("x")`` gave, on a few rows without
    pandas' per-call cost. The positions are int64 as ``map`` makes them, float64 when a label is
    missing, and sorted by numpy's quicksort argsort of that dtype, as ``sort_values`` sorts them."""
    found = [x_of.get(label) for label in labels]
    if all(position is not None for position in found):
        x = np.array(found, dtype=np.int64)
        return x, np.argsort(x, kind="quicksort")
    x = np.array([np.nan if position is None else position for position in found], dtype=np.float64)
    kept = np.flatnonzero(~np.isnan(x))
    return x, kept[np.argsort(x[kept], kind="quicksort")]


def _draw_window_line(ax, rows: pd.DataFrame, color: str, metric: str, x_of: Mapping[str, int]) -> None:
    """One method's metric across windows: band and whiskers when CI columns exist, hollow derived points.

    The rows in window order (:func:`_positions`). A line with no derived point carries its own filled
    markers (a line's markers are drawn right after its path: the pixels of a line, then of a
    markers-only line); an empty set of points is not drawn (it adds nothing to the figure)."""
    if rows.empty:
        return
    codes, order = _positions(rows["window"].tolist(), x_of)
    x, y = codes[order].astype(float), rows[metric].to_numpy(float)[order]
    low, high = f"{metric}_low", f"{metric}_high"
    if low in rows.columns and high in rows.columns:
        lo, hi = rows[low].to_numpy(float)[order], rows[high].to_numpy(float)[order]
        ok = np.isfinite(lo) & np.isfinite(hi)
        ax.fill_between(x[ok], lo[ok], hi[ok], color=color, alpha=0.18, lw=0)
        ax.vlines(x[ok], lo[ok], hi[ok], color=color, lw=1, alpha=0.7)
    derived = rows["derived"].to_numpy(bool)[order]
    if not derived.any():
        ax.plot(x, y, "o-", color=color, lw=1.6, ms=6)
        return
    ax.plot(x, y, "-", color=color, lw=1.6)
    if not derived.all():
        ax.plot(x[~derived], y[~derived], "o", color=color, ms=6)
    ax.plot(x[derived], y[derived], "o", mfc="white", mec=color, mew=1.6, ms=7)


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
        frame = frame.assign(method=[profile_label(m, p) for m, p in zip(frame["method"], frame["profile"])])
    windows = sorted(frame["window"].unique())
    x_of = {w: i for i, w in enumerate(windows)}
    derived = (_legend_handle(color="#555555", marker="o", mfc="white", lw=0, label="derived release"),)
    facets = _Facets(
        x_labels=[_window_label(w) for w in windows], x_fontsize=7, x_pad=0.5,
        y_label=METRIC_LABELS.get(metric, metric), title=f"{METRIC_LABELS.get(metric, metric)} by TEST window",
        cell_title=lambda mode, aspect, cell: (f"{mode} \u00b7 {aspect}", 10), line_width=1.6, hspace=0.3,
        extra_handles=derived if frame["derived"].any() else ())
    return _facet_plot(frame, facets, lambda ax, rows, color: _draw_window_line(ax, rows, color, metric, x_of), path)


def _strata_title(mode: str, aspect: str, cell: pd.DataFrame) -> tuple[str, int]:
    sizes = cell.drop_duplicates("identity_stratum").set_index("identity_stratum")["n_targets"]
    return (f"{mode} \u00b7 {aspect}  (n: " + " / ".join(
        str(int(sizes.get(label, 0))) for label in IDENTITY_STRATA) + ")", 9)


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
    frame = strata.assign(aspect=strata["aspect"].map(_short_aspect), method=strata["method"].astype(str))
    x_of = {label: i for i, label in enumerate(IDENTITY_STRATA)}

    def draw(ax, rows: pd.DataFrame, color: str) -> None:
        x, order = _positions(rows["identity_stratum"].tolist(), x_of)
        if len(order):
            ax.plot(x[order], rows["f_at_valid_tau"].to_numpy(float)[order], "o-", color=color, lw=1.5, ms=5)

    facets = _Facets(
        x_labels=[f"{label} %" for label in IDENTITY_STRATA], x_fontsize=8, x_pad=0.3,
        y_label="F at VALID \u03c4", title="F at each method's VALID threshold by identity stratum",
        cell_title=_strata_title, line_width=1.5, hspace=0.35,
        x_axis_label="max identity to a t0 training protein", y_limits=(0.0, 1.0))
    return _facet_plot(frame, facets, draw, path)
