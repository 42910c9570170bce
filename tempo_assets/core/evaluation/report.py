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
from pathlib import Path
from typing import Any, Mapping

import jinja2
import numpy as np
import pandas as pd

from tempo_assets.core.evaluation.plots import (
    CURVE_PIXELS, LONGITUDINAL_PIXELS, METRIC_LABELS, CellPlots, plot_fmax_curve, plot_identity_strata,
    plot_longitudinal, plot_precision_recall,
)
from tempo_assets.core.evaluation.results import (
    ORACLE_NOTE, ReportInputError, _TABLE, _cell_text, _check_results, _esc, _of_profile, _order,
    _profiles_of, _short_aspect, profile_label,
)
from tempo_assets.core.evaluation.scoring import PROFILE_STATEMENTS
from tempo_assets.core.base.io import atomic_write
from tempo_assets.core.base.vocabulary import ASPECTS, MODES
from tempo_assets.core.base.windows import try_parse_window_key


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
    """``page`` (a rendered report) with the quality gate's verdict as the first element of its body; a banner
    it already carries (an earlier ``tempo report`` on the same page) is replaced."""
    if verdict not in _GATE_COLOURS:
        raise ReportInputError(f"gate verdict must be one of {sorted(_GATE_COLOURS)}, got {verdict!r}")
    if "<body>" not in page:
        raise ReportInputError("the report has no <body> to put the quality gate's banner in")
    head, _, body = page.partition("<body>")
    earlier = '\n<div id="quality-gate"'
    if body.startswith(earlier):  # the banner holds no other <div>
        body = body[body.index("</div>") + len("</div>"):]
    banner = _GATE_BANNER.render(colour=_GATE_COLOURS[verdict], headline=headline, reasons=list(reasons))
    return f"{head}<body>\n{banner}{body}"


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


def _profile_heading(profile: str | None, level: int) -> list[str]:
    if profile is None:
        return []
    statement = PROFILE_STATEMENTS.get(profile, "")
    return [f"<h{level}>Profile {_esc(profile)}</h{level}>", f'<p class="note profile">{_esc(statement)}.</p>']


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
    if "profile" in rows.columns:  # lines of profile-labelled curves (``<method> [<profile>]``) too
        labelled = zip(rows["method"], rows["profile"], rows["valid_tau"])
        taus.update({profile_label(m, p): float(t) for m, p, t in labelled if isinstance(p, str) and np.isfinite(t)})
    return taus or None


def render_window_report(window_key: str, results: pd.DataFrame,
                         curves: Mapping[str, Any], provenance: Mapping[str, Any] | None,
                         strata: pd.DataFrame | None = None,
                         drawn: Mapping[tuple[str, str], CellPlots] | None = None) -> str:
    """Self-contained HTML page of one window's TEST results.

    Parameters
    ----------
    window_key : ``t-2__t-1__t0__t1`` (rows of ``results`` with this ``window`` are shown)
    results : tidy results table (may hold other windows)
    curves : method -> ``df_all``, or mode -> {method -> ``df_all``}; one F-over-threshold and
        one precision-recall plot per (mode, namespace), tau marked where ``results`` has it
    provenance : key -> value (sources, cutoffs, recipe hash, ...), shown as a table
    strata : F at VALID tau per identity stratum (:data:`STRATA_REPORT_COLUMNS`), plotted per profile
    drawn : ``{(mode, aspect): CellPlots}`` already drawn from the same curves (the benchmark's, see
        ``window_markdown.draw_curves``): shown as they are instead of drawn again

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
            plots = (drawn or {}).get((mode, aspect)) or CellPlots(
                fmax=plot_fmax_curve(group, aspect, taus=taus), pr=plot_precision_recall(group, aspect, taus=taus))
            body.append(f"<h3>{_esc(label)}</h3>")
            body.append(_figure(plots.fmax,
                                f"F over threshold, {label}",
                                f"F over the threshold grid, {_esc(label)}; dotted lines mark "
                                f"{marked}.", CURVE_PIXELS))
            body.append(_figure(plots.pr,
                                f"precision-recall, {label}",
                                f"Precision against recall, {_esc(label)}; dots mark {marked}.",
                                CURVE_PIXELS))
    return _page(title, body)


def render_archive_report(results: pd.DataFrame, provenance: Mapping[str, Any] | None,
                          statuses: Mapping[str, tuple[str, str]] | None = None,
                          drawn: Mapping[str, bytes] | None = None) -> str:
    """Self-contained HTML page across all windows: longitudinal plots and every result row.

    One longitudinal plot per metric among ``f_at_valid_tau, fmax_oracle, wfmax, smin`` that ``results`` holds (with
    any finite value), then one table per window, under its status (``statuses``: window ->
    ``(status, reason)`` as the catalog states it, e.g. ``stale`` with why; ``ready`` said too).
    ``drawn``: metric -> the PNG :func:`plot_longitudinal` already drew of ``results`` for it (not drawn again).
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
            png = (drawn or {}).get(metric) or plot_longitudinal(frame, metric)
            body.append(_figure(png,
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
