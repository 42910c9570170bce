"""The one cell scorer: every method on the same targets, per (mode, aspect), one set of columns.

VALID selection (``core/selection.py``), ``test_score`` and ``benchmark`` all slice growth into
cells with :func:`evaluation_cells` and evaluate a cell with :func:`cell_curve` (the cafaeval-exact
evaluator); :func:`score_methods` turns each (method, cell) into one row of :data:`SUMMARY_COLUMNS`:

* counts: ``n_targets, truth_proteins, truth_pairs, truth_sha256, predicted_pairs``;
* the headline, at the threshold each method fixed on VALID: ``valid_tau``, ``p_at_valid_tau``,
  ``r_at_valid_tau``, ``f_at_valid_tau`` (with ``f_at_valid_tau_low/high``), ``wf_at_valid_tau``,
  ``s_at_valid_tau``;
* the curve's best over TEST thresholds, an oracle number shown beside it, never the result:
  ``fmax_oracle`` (``tau_oracle``, ``coverage`` and ``n_predicted`` at it), ``wfmax``, ``smin``,
  ``f_micro_w``, with percentile-bootstrap CIs ``<metric>_low/_high`` resampling proteins.

Modes are scored separately, never pooled (PROTOCOL.md); PK known terms are removed by the
evaluator; a target whose true terms were never predicted scores zero and stays in the denominator.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, replace
from typing import Any, Iterable, Mapping

import numpy as np
import pandas as pd

from tempo_assets.core.annotations import require_columns
from tempo_assets.core.errors import TempoInputError

from tempo_assets.core.vocabulary import ASPECTS, MODES, NAMESPACES  # noqa: E402,F401
# summary column -> (evaluator frame column, bootstrap metric, best is max?)
METRICS: dict[str, tuple[str, str, bool]] = {
    "fmax_oracle": ("f", "f", True), "wfmax": ("f_w", "f_w", True), "smin": ("s", "s", False),
    "f_micro_w": ("f_micro_w", "f_micro_w", True)}
METRIC_ALIASES = {"fmax": "fmax_oracle"}
# the protocol's number: F at the threshold each method fixed on VALID
HEADLINE = "f_at_valid_tau"
# how every human-readable output labels the threshold-swept best (fmax_oracle, tau_oracle)
ORACLE_LABEL = "best threshold on TEST — not a protocol number"
VALID_TAU_COLUMNS = ("method", "mode", "aspect", "valid_tau", "f_on_valid", "valid_targets", "source", "note")
COUNT_COLUMNS = ("method", "mode", "aspect", "n_targets", "truth_proteins", "truth_pairs", "truth_sha256",
                 "predicted_pairs")
AT_TAU_COLUMNS = ("valid_tau", "p_at_valid_tau", "r_at_valid_tau", "f_at_valid_tau", "wf_at_valid_tau",
                  "s_at_valid_tau")
ORACLE_COLUMNS = ("fmax_oracle", "tau_oracle", "coverage", "n_predicted", "wfmax", "smin", "f_micro_w")
SUMMARY_COLUMNS = COUNT_COLUMNS + AT_TAU_COLUMNS + ("f_at_valid_tau_low", "f_at_valid_tau_high") + ORACLE_COLUMNS


@dataclass(frozen=True)
class ScoringOptions:
    """How cells are scored.

    ``lafa`` switches on LAFA's conventions (``prop='fill'``, no orphans; the caller supplies the
    terms of interest); ``ci_metrics`` are the summary metrics given a bootstrap CI (``n_boot``
    resamples of proteins, ``seed``, ``alpha``); ``reference`` is the method the paired bootstrap
    compares every other method against.
    """

    lafa: bool = False
    n_boot: int = 100
    seed: int = 0
    alpha: float = 0.05
    ci_metrics: tuple[str, ...] = ("fmax_oracle", "wfmax", "smin")
    reference: str = "recipe"

    @property
    def prop(self) -> str:
        return "fill" if self.lafa else "max"

    @property
    def orphans(self) -> bool:
        """Whether the evaluator keeps orphan terms (cafaeval's default; LAFA passes -no_orphans)."""
        return not self.lafa

    def __post_init__(self):
        metrics = tuple(METRIC_ALIASES.get(m, m) for m in self.ci_metrics)
        object.__setattr__(self, "ci_metrics", metrics)
        unknown = [m for m in metrics if m not in METRICS]
        if unknown:
            raise TempoInputError(f"ci_metrics {unknown} unknown (choose from {sorted(METRICS)})")
        if self.n_boot < 0:
            raise TempoInputError(f"n_boot must be >= 0, got {self.n_boot}")


@dataclass(frozen=True, eq=False)
class Cell:
    """One (mode, aspect) of a growth: its targets, their ground truth and (PK) known terms."""

    mode: str
    aspect: str
    targets: pd.DataFrame
    truth: pd.DataFrame
    known: pd.DataFrame | None

    @property
    def proteins(self) -> pd.Series:
        return self.targets["protein"]


def frame_digest(frame: pd.DataFrame) -> str:
    """sha256 of a frame's rows, sorted (order-free identity of a target or truth set)."""
    text = "\n".join(sorted("\t".join(map(str, row)) for row in frame.itertuples(index=False)))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def evaluation_cells(targets: pd.DataFrame, ground_truth: pd.DataFrame, known: pd.DataFrame | None,
                     modes: Iterable[str] = MODES, aspects: Iterable[str] = ASPECTS,
                     keep_empty: bool = False) -> dict[tuple[str, str], Cell]:
    """Per (mode, aspect) with targets (all of them with ``keep_empty``): its :class:`Cell`.

    Parameters
    ----------
    targets : DataFrame ``protein, aspect, mode``
    ground_truth : DataFrame ``protein, term, aspect`` (propagated terms at the newer release)
    known : DataFrame ``protein, term, aspect`` (PK known terms) or None
    """
    require_columns(targets, ("protein", "aspect", "mode"), "targets")
    require_columns(ground_truth, ("protein", "term", "aspect"), "ground truth")
    out = {}
    for mode in modes:
        for aspect in aspects:
            cell = targets[(targets["mode"] == mode) & (targets["aspect"] == aspect)]
            if cell.empty and not keep_empty:
                continue
            keys = cell[["protein", "aspect"]].drop_duplicates()
            truth = ground_truth.merge(keys, on=["protein", "aspect"])[["protein", "term"]]
            kn = None
            if mode == "PK" and known is not None:
                kn = known[known["protein"].isin(cell["protein"]) & (known["aspect"] == aspect)][["protein", "term"]]
            out[(mode, aspect)] = Cell(mode, aspect, cell, truth, kn)
    return out


def cell_predictions(split: Mapping[str, pd.DataFrame], cell: Cell) -> pd.DataFrame:
    """The predictions of ``split`` (aspect -> frame) for the cell's proteins: ``protein, term, score``."""
    predictions = split.get(cell.aspect)
    if predictions is None:
        return pd.DataFrame(columns=["protein", "term", "score"])
    return predictions[predictions["protein"].isin(cell.proteins)][["protein", "term", "score"]]


def by_aspect(predictions: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """Predictions split once per aspect (cells filter these small frames, not the whole one)."""
    return {a: rows for a, rows in predictions.groupby("aspect", sort=False, observed=True)}


def cell_curve(eval_ontology, aspect: str, truth: pd.DataFrame, predictions: pd.DataFrame,
               known: pd.DataFrame | None = None, toi=None, prop: str = "max") -> pd.DataFrame:
    """The evaluator's all-threshold rows of one cell (``tau`` and cafaeval's columns); empty if none."""
    from tempo_assets.core.evaluation import evaluate_frames

    ns = NAMESPACES[aspect]
    df_all = evaluate_frames(eval_ontology, truth, predictions, known=known, toi=toi, prop=prop)
    if df_all is None or len(df_all) == 0 or ns not in set(df_all.index.get_level_values("ns")):
        return pd.DataFrame()
    return df_all.loc[ns].reset_index().assign(ns=ns)


def curve_best(curve: pd.DataFrame | None, column: str = "f") -> tuple[float, float | None, float]:
    """(max of ``column``, tau at its first maximum, coverage there); an empty curve scores zero."""
    if curve is None or len(curve) == 0:
        return 0.0, None, 0.0
    values = np.nan_to_num(curve[column].to_numpy(dtype=np.float64), nan=0.0)
    best = int(np.argmax(values))
    return float(values[best]), float(curve["tau"].iloc[best]), float(curve["cov"].iloc[best])


def scores_at_tau(curve: pd.DataFrame, tau: float) -> dict[str, float]:
    """Precision, recall, F, weighted F and S of the curve row at ``tau`` (the VALID threshold).

    cafaeval drops rows without coverage: no row at ``tau`` means nothing was predicted there, so
    precision, recall and F are 0 and S is undefined (NaN).
    """
    tau = float(tau)
    at = curve[np.isclose(curve["tau"].to_numpy(dtype=float), tau, rtol=0, atol=1e-9)] if len(curve) else curve
    if at.empty:
        return {"valid_tau": tau, "p_at_valid_tau": 0.0, "r_at_valid_tau": 0.0, "f_at_valid_tau": 0.0,
                "wf_at_valid_tau": 0.0, "s_at_valid_tau": float("nan")}
    first = at.iloc[0]

    def value(column: str) -> float:
        return float(first[column]) if column in first.index else float("nan")

    return {"valid_tau": tau, "p_at_valid_tau": value("pr"), "r_at_valid_tau": value("rc"),
            "f_at_valid_tau": value("f"), "wf_at_valid_tau": value("f_w"), "s_at_valid_tau": value("s")}


def score_cell(eval_ontology, cell: Cell, predictions: pd.DataFrame, options: ScoringOptions,
               toi=None, valid_tau: float | None = None) -> tuple[dict[str, Any], pd.DataFrame]:
    """One cell's metric row (see the module docstring) and its curve."""
    from tempo_assets.core.evaluation import bootstrap_ci

    curve = cell_curve(eval_ontology, cell.aspect, cell.truth, predictions, cell.known, toi, options.prop)
    row: dict[str, Any] = {"fmax_oracle": 0.0}
    if valid_tau is not None:
        row.update(scores_at_tau(curve, valid_tau))
    if curve.empty:
        # nothing predicted for any scored protein: F 0, no curve
        return row, curve
    for column, (frame_column, _, best_max) in METRICS.items():
        if frame_column not in curve:
            row[column] = float("nan")
            continue
        values = curve[frame_column].to_numpy(dtype=float)
        row[column] = float(np.nanmax(values) if best_max else np.nanmin(values))
    best = int(np.argmax(curve["f"].to_numpy(dtype=float)))
    row.update(tau_oracle=float(curve["tau"].iloc[best]), coverage=float(curve["cov"].iloc[best]),
               n_predicted=int(curve["n"].iloc[best]))
    if not options.n_boot:
        return row, curve
    opts = {"known": cell.known, "toi": toi, "prop": options.prop, "n_boot": options.n_boot,
            "seed": options.seed, "alpha": options.alpha}
    ns = NAMESPACES[cell.aspect]
    for column in options.ci_metrics:
        metric = METRICS[column][1]
        if metric.endswith("_w") and not eval_ontology.has_ia:
            continue
        ci = bootstrap_ci(eval_ontology, cell.truth, predictions, metric=metric, **opts).get(ns, {})
        row[f"{column}_low"], row[f"{column}_high"] = ci.get("low"), ci.get("high")
    if valid_tau is not None:
        ci = bootstrap_ci(eval_ontology, cell.truth, predictions, metric="f", tau=valid_tau, **opts).get(ns, {})
        row["f_at_valid_tau_low"], row["f_at_valid_tau_high"] = ci.get("low"), ci.get("high")
    return row, curve


def score_methods(eval_ontology, targets: pd.DataFrame, ground_truth: pd.DataFrame,
                  known: pd.DataFrame | None, methods: Mapping[str, pd.DataFrame],
                  options: ScoringOptions = ScoringOptions(), toi: Iterable[str] | None = None,
                  ci_methods: Iterable[str] | None = None,
                  taus: Mapping[tuple[str, str, str], float] | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Every method on the same targets, per (mode, aspect): one row of :data:`SUMMARY_COLUMNS` each.

    Parameters
    ----------
    eval_ontology : ``core.evaluation.EvalOntology`` of the newer release (IA attached for the
        weighted metrics)
    targets : DataFrame ``protein, aspect, mode`` (n_targets rows)
    ground_truth : DataFrame ``protein, term, aspect`` (propagated terms at the newer release)
    known : DataFrame ``protein, term, aspect`` (PK known terms) or None
    methods : name -> predictions DataFrame ``protein, term, aspect, score``
    options : see :class:`ScoringOptions`
    toi : terms of interest (None: all)
    ci_methods : the methods given bootstrap CIs (None: all)
    taus : ``(method, mode, aspect) -> tau`` each method fixed on VALID (the ``*_at_valid_tau``
        columns); rows without one carry NaN there

    Returns
    -------
    (summary, curves) : ``summary`` one row per (method, mode, aspect); ``curves`` the evaluator's
        all-threshold rows with ``method, mode, aspect`` columns.
    """
    toi = None if toi is None else sorted(set(toi))
    ci_methods = None if ci_methods is None else set(ci_methods)
    taus = taus or {}
    rows, curves = [], []
    cells = evaluation_cells(targets, ground_truth, known)
    for name, predictions in methods.items():
        require_columns(predictions, ("protein", "term", "aspect", "score"), f"predictions of {name}")
        split = by_aspect(predictions)
        cell_options = options if ci_methods is None or name in ci_methods else replace(options, n_boot=0)
        for (mode, aspect), cell in cells.items():
            preds = cell_predictions(split, cell)
            counts = {"method": name, "mode": mode, "aspect": aspect, "n_targets": len(cell.targets),
                      "truth_proteins": int(cell.truth["protein"].nunique()), "truth_pairs": len(cell.truth),
                      "truth_sha256": frame_digest(cell.truth), "predicted_pairs": len(preds)}
            row, curve = score_cell(eval_ontology, cell, preds, cell_options, toi, taus.get((name, mode, aspect)))
            rows.append({**counts, **row})
            if len(curve):
                curves.append(curve.assign(method=name, mode=mode, aspect=aspect))
    # no cell has a target (e.g. a window with no TEST growth): zero rows, every column still there
    summary = pd.DataFrame(rows) if rows else pd.DataFrame(columns=list(SUMMARY_COLUMNS))
    ordered = [c for c in SUMMARY_COLUMNS if c in summary.columns]
    summary = summary[ordered + [c for c in summary.columns if c not in ordered]]
    return summary, (pd.concat(curves, ignore_index=True) if curves else pd.DataFrame())


def recipe_valid_taus(recipe: Mapping[str, Any], names: Iterable[str] = ("recipe",),
                      by_mode: bool = True) -> dict[tuple[str, str, str], float]:
    """``(method, mode, aspect) -> tau`` the recipe fixed on VALID for each of ``names``.

    ``by_mode``: each mode's own VALID Fmax threshold (``tau_by_mode``, falling back to the
    aspect's ``tau``); otherwise the aspect's ``tau`` (the mean-over-modes operating point) for
    every mode.
    """
    taus = {}
    for aspect, choice in recipe.get("aspects", {}).items():
        for mode in MODES:
            tau = (choice.get("tau_by_mode") or {}).get(mode, choice.get("tau")) if by_mode else choice.get("tau")
            if tau is not None:
                taus.update({(name, mode, aspect): float(tau) for name in names})
    return taus


def valid_taus_from_summary(summary: pd.DataFrame) -> dict[tuple[str, str, str], float]:
    """``(method, mode, aspect) -> valid_tau`` from a VALID summary: THE rule for a VALID threshold.

    The threshold at the first maximum of F over the VALID curve (``tau_oracle`` of a summary
    scored on VALID growth ``(t-1, t0]`` by the method trained at ``t-1``) — the same rule the
    VALID selection applies to the recipe (``tau_by_mode``). A cell with no curve has none.
    """
    require_columns(summary, ("method", "mode", "aspect"), "VALID summary")
    if "tau_oracle" not in summary:
        return {}
    return {(r.method, r.mode, r.aspect): float(r.tau_oracle) for r in summary.itertuples() if pd.notna(r.tau_oracle)}


def valid_tau_table(valid_summary: pd.DataFrame, methods: Iterable[str], recipe: Mapping[str, Any] | None,
                    source: str, modes: Iterable[str] = MODES, aspects: Iterable[str] = ASPECTS) -> pd.DataFrame:
    """One row per (method, mode, aspect) of ``methods``: its VALID threshold and where it came from.

    ``valid_summary`` is every method trained at ``t-1`` scored on the VALID targets (see
    :func:`valid_taus_from_summary`); ``source`` names those data. The recipe (``"recipe"``) takes
    the threshold its frozen recipe fixed on VALID by the same rule (``tau_by_mode``), so
    ``test_score`` and ``benchmark`` read it at one threshold. A method with no VALID curve in a
    cell (no ``t-1`` predictions, nothing predicted) gets ``valid_tau`` missing and a ``note``.
    """
    taus = valid_taus_from_summary(valid_summary) if len(valid_summary) else {}
    scored = set(valid_summary["method"]) if len(valid_summary) else set()
    frozen = recipe_valid_taus(recipe) if recipe is not None else {}
    lookup = ({(r.method, r.mode, r.aspect): r for r in valid_summary.itertuples()} if len(valid_summary) else {})
    rows = []
    for method in methods:
        for mode in modes:
            for aspect in aspects:
                key = (method, mode, aspect)
                row = lookup.get(key)
                targets = int(row.n_targets) if row is not None else 0
                f_valid = float(row.fmax_oracle) if row is not None and key in taus else float("nan")
                if method == "recipe" and key in frozen:
                    tau, where, note = frozen[key], "frozen_recipe tau_by_mode (VALID selection)", ""
                    f_valid = float(((recipe or {}).get("aspects", {}).get(aspect, {}).get("valid_fmax_by_mode")
                                     or {}).get(mode, f_valid))
                elif key in taus:
                    tau, where, note = taus[key], source, ""
                else:
                    tau, where = float("nan"), source
                    note = ("no predictions at t-1 on VALID" if method not in scored
                            else "no VALID targets in this cell" if row is None
                            else "nothing predicted on VALID in this cell")
                rows.append({"method": method, "mode": mode, "aspect": aspect, "valid_tau": tau,
                             "f_on_valid": f_valid, "valid_targets": targets, "source": where, "note": note})
    return pd.DataFrame(rows, columns=list(VALID_TAU_COLUMNS))


def taus_of(table: pd.DataFrame, older_suffix: str | None = None) -> dict[tuple[str, str, str], float]:
    """``(method, mode, aspect) -> valid_tau`` of a :func:`valid_tau_table` (missing ones left out).

    With ``older_suffix`` each method's older-cutoff variant ``<method><suffix>`` reads the same
    threshold (the one its model trained at ``t-1`` fixed on VALID).
    """
    out = {}
    for r in table.itertuples():
        if pd.notna(r.valid_tau):
            out[(r.method, r.mode, r.aspect)] = float(r.valid_tau)
            if older_suffix:
                out[(f"{r.method}{older_suffix}", r.mode, r.aspect)] = float(r.valid_tau)
    return out
