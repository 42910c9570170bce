"""The tidy results table of the reports: its columns, checks and legend, and its Markdown/TSV forms
(``tempo report --format md|tsv``)."""

from __future__ import annotations

import html
import math
from typing import Any, Mapping

import numpy as np
import pandas as pd

from tempo_assets.core.base.errors import TempoInputError
from tempo_assets.core.evaluation.scoring import ORACLE_LABEL, PROFILES, PROFILE_STATEMENTS
from tempo_assets.core.neighbours.homology import IDENTITY_STRATA
from tempo_assets.core.base.vocabulary import ASPECTS, MODES, NAMESPACES


_SHORT = {v: k for k, v in NAMESPACES.items()}
_KEY_COLUMNS = ["window", "profile", "mode", "aspect", "method"]
RESULT_COLUMNS = _KEY_COLUMNS + [
    "f_at_valid_tau", "valid_tau", "f_at_valid_tau_low", "f_at_valid_tau_high", "f_at_valid_tau_cluster_low",
    "f_at_valid_tau_cluster_high", "wf_at_valid_tau", "s_at_valid_tau", "f_micro_w_at_valid_tau", "fmax_oracle",
    "tau_oracle", "fmax_oracle_low", "fmax_oracle_high", "fmax_oracle_cluster_low", "fmax_oracle_cluster_high",
    "wfmax", "smin", "f_micro_w", "coverage", "n_targets", "derived"]
REQUIRED_COLUMNS = ["window", "mode", "aspect", "method", "fmax_oracle", "derived"]
# the columns of `tempo report --by identity` rows (core.evaluation.scoring.STRATA_COLUMNS, with the window)
STRATA_REPORT_COLUMNS = ["window", "profile", "mode", "aspect", "method", "identity_stratum", "n_targets",
                         "valid_tau", "f_at_valid_tau", "derived"]
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


class ReportInputError(TempoInputError):
    """A results table or curve frame handed to the report renderer is malformed."""


# --------------------------------------------------------------------------------------------
# inputs


def profile_label(method: Any, profile: Any) -> str:
    """A method's name under one scoring profile, as plot lines and legends show it: ``<method> [<profile>]``."""
    return f"{method} [{profile}]"


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


def _profiles_of(frame: pd.DataFrame) -> list[str | None]:
    """The profiles of a results frame in report order (LAFA's first); ``[None]`` without the column."""
    return _order(frame["profile"], PROFILES) if "profile" in frame.columns else [None]


def _of_profile(frame: pd.DataFrame, profile: str | None) -> pd.DataFrame:
    return frame if profile is None else frame[frame["profile"] == profile]


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
