"""The one cell scorer: every method on the same targets, per (mode, aspect), one set of columns.

VALID selection (``core/recipe/selection.py``), ``test_score`` and ``benchmark`` all slice growth into
cells with :func:`evaluation_cells` and evaluate a cell with :func:`cell_curve` (the cafaeval-exact
evaluator); :func:`score_methods` turns each (method, cell) into one row of :data:`SUMMARY_COLUMNS`:

* counts: ``n_targets, truth_proteins, truth_pairs, truth_sha256, predicted_pairs``;
* the headline, at the threshold each method fixed on VALID: ``valid_tau``, ``p_at_valid_tau``,
  ``r_at_valid_tau``, ``f_at_valid_tau`` (with ``f_at_valid_tau_low/high``), ``wf_at_valid_tau``,
  ``s_at_valid_tau``, ``f_micro_w_at_valid_tau``;
* the curve's best over TEST thresholds, an oracle number shown beside it, never the result:
  ``fmax_oracle`` (``tau_oracle``, ``coverage`` and ``n_predicted`` at it), ``wfmax``, ``smin``,
  ``f_micro_w``, with percentile-bootstrap CIs ``<metric>_low/_high`` resampling proteins and,
  given the targets' sequence clusters, ``<metric>_cluster_low/_high`` resampling clusters
  (``core.neighbours.homology``; one code path: the protein bootstrap is one protein per cluster);
* the ``profile`` the cell was scored under (:data:`PROFILES`: ``cafaeval`` or ``lafa``).

Modes are scored separately, never pooled (docs/PROTOCOL.md); PK known terms are removed by the
evaluator; a target whose true terms were never predicted scores zero and stays in the denominator.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Iterable, Mapping

import numpy as np
import pandas as pd

from tempo_assets.core.labels.annotations import require_columns
from tempo_assets.core.base.errors import TempoInputError
from tempo_assets.core.evaluation.bootstrap import bootstrap_cis
from tempo_assets.core.evaluation.cells import Cell, CellFrames
from tempo_assets.core.evaluation.metrics import from_keywords
from tempo_assets.core.evaluation.tables import namespace_rows
from tempo_assets.core.neighbours.homology import IDENTITY_STRATA as IDENTITY_ORDER

from tempo_assets.core.base.vocabulary import ASPECTS, MODES, NAMESPACES
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
                  "s_at_valid_tau", "f_micro_w_at_valid_tau")
# the two scoring profiles (docs/PROTOCOL.md "Reporting"), in the order reports show them
PROFILES = ("lafa", "cafaeval")
PROFILE_STATEMENTS = {
    "lafa": ("LAFA's conventions: terms of interest present in both ontologies, known terms removed "
             "for PK, -prop fill -no_orphans, MF targets whose only new term is protein binding "
             "dropped, sequences unchanged t0..t1, IA from t0"),
    "cafaeval": ("cafaeval 1.3.0 defaults: every term of the newer ontology (roots and orphans kept), "
                 "max propagation, every growth target scored, IA from t0"),
}
ORACLE_COLUMNS = ("fmax_oracle", "tau_oracle", "coverage", "n_predicted", "wfmax", "smin", "f_micro_w")
SUMMARY_COLUMNS = (("profile",) + COUNT_COLUMNS + AT_TAU_COLUMNS
                   + ("f_at_valid_tau_low", "f_at_valid_tau_high", "f_at_valid_tau_cluster_low",
                      "f_at_valid_tau_cluster_high") + ORACLE_COLUMNS)
# one row per (profile, method, mode, aspect, identity stratum): F at the method's VALID threshold
IDENTITY_NO_HIT = IDENTITY_ORDER[0]  # a target without a DIAMOND hit in the corpus (core.neighbours.homology.identity_stratum)
STRATA_COLUMNS = ("profile", "method", "mode", "aspect", "identity_stratum", "n_targets", "valid_tau",
                  "f_at_valid_tau")


@dataclass(frozen=True)
class ScoringOptions:
    """How cells are scored.

    ``lafa`` switches on LAFA's conventions, the ``lafa`` profile (``prop='fill'``, no orphans;
    the caller supplies the terms of interest and drops the protein-binding-only MF targets);
    otherwise the profile is ``cafaeval``; ``ci_metrics`` are the summary metrics given a bootstrap CI (``n_boot``
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
    def profile(self) -> str:
        """``lafa`` or ``cafaeval`` (:data:`PROFILES`)."""
        return "lafa" if self.lafa else "cafaeval"

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


def cell_curve(eval_ontology, aspect: str, truth: pd.DataFrame, predictions: pd.DataFrame,
               **options) -> pd.DataFrame:
    """The evaluator's all-threshold rows of one cell (``tau`` and cafaeval's columns); empty if none.

    ``options``: the evaluator's (``core.evaluation.metrics.EvalOptions``: ``known``, ``toi``,
    ``prop``, ``setups``: None for the ontology's own cache, keyed by content) and ``predictions_content``
    (``core.evaluation.tables.evaluated_rows``).
    """
    rows = namespace_rows(eval_ontology, truth, predictions, NAMESPACES[aspect], **options)
    # evaluate_frames' rows of the aspect's namespace, with its index (ns, tau) as the first and last column
    return pd.DataFrame() if rows is None else rows


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
                "wf_at_valid_tau": 0.0, "s_at_valid_tau": float("nan"), "f_micro_w_at_valid_tau": 0.0}
    first = at.iloc[0]

    def value(column: str) -> float:
        return float(first[column]) if column in first.index else float("nan")

    return {"valid_tau": tau, "p_at_valid_tau": value("pr"), "r_at_valid_tau": value("rc"),
            "f_at_valid_tau": value("f"), "wf_at_valid_tau": value("f_w"), "s_at_valid_tau": value("s"),
            "f_micro_w_at_valid_tau": value("f_micro_w")}


@dataclass(frozen=True)
class CellReading:
    """What one cell's row reads besides the curve: the terms of interest ``toi``, the method's
    ``valid_tau``, sequence ``clusters`` for the cluster-level intervals, identity ``strata``
    (protein -> label) for F per stratum."""

    toi: Any = None
    valid_tau: float | None = None
    clusters: Any = None
    strata: Mapping[str, str] | None = None


def _curve_row(curve: pd.DataFrame) -> dict[str, Any]:
    """The best-threshold metrics of a non-empty curve (:data:`METRICS`), oracle tau and coverage."""
    row: dict[str, Any] = {}
    for column, (frame_column, _, best_max) in METRICS.items():
        if frame_column not in curve:
            row[column] = float("nan")
            continue
        values = curve[frame_column].to_numpy(dtype=float)
        row[column] = float(np.nanmax(values) if best_max else np.nanmin(values))
    best = int(np.argmax(curve["f"].to_numpy(dtype=float)))
    row.update(tau_oracle=float(curve["tau"].iloc[best]), coverage=float(curve["cov"].iloc[best]),
               n_predicted=int(curve["n"].iloc[best]))
    return row


def score_cell(eval_ontology, cell: Cell, predictions: pd.DataFrame, options: ScoringOptions,
               reading: CellReading = CellReading(), content: tuple | None = None) -> tuple[dict[str, Any], pd.DataFrame]:
    """One cell's metric row (see the module docstring) and its curve.

    ``reading.clusters`` (protein -> sequence cluster, or ``core.neighbours.homology.homology_clusters``' frame)
    adds the cluster-level twin ``*_cluster_low/high`` of every interval. ``reading.strata``
    (protein -> label) puts ``{label: F at valid_tau on the label's proteins}`` under the row's
    ``"_strata"`` key. ``content``: the predictions' content key (``CellFrames.content``), when the caller has it.
    """
    toi, valid_tau, strata = reading.toi, reading.valid_tau, reading.strata
    curve = cell_curve(eval_ontology, cell.aspect, cell.truth, predictions, known=cell.known, toi=toi,
                       prop=options.prop, setups=cell.setups, predictions_content=content)
    row: dict[str, Any] = {"fmax_oracle": 0.0}
    if valid_tau is not None:
        row.update(scores_at_tau(curve, valid_tau))
    if curve.empty:
        # nothing predicted for any scored protein: F 0, no curve
        if strata is not None and valid_tau is not None:
            row["_strata"] = {label: 0.0 for label in set(strata.values())}
        return row, curve
    row.update(_curve_row(curve))
    # every interval of the cell from one setup of its truth and predictions (one bootstrap per
    # metric, each drawn from the seed, as separate calls would draw them)
    columns = [c for c in (options.ci_metrics if options.n_boot else ())
               if not (METRICS[c][1].endswith("_w") and not eval_ontology.has_ia)]
    requests = [(METRICS[c][1], None, None) for c in columns]
    if valid_tau is not None and (options.n_boot or strata is not None):
        # F at the VALID threshold: both intervals and the strata's F
        columns.append("f_at_valid_tau")
        requests.append(("f", valid_tau, strata))
    if not requests:
        return row, curve
    ns = NAMESPACES[cell.aspect]
    levels = ("", "cluster_") if reading.clusters is not None else ("",)
    results = bootstrap_cis(eval_ontology, cell.truth, predictions, requests, n_boot=options.n_boot,
                            seed=options.seed, alpha=options.alpha, clusters=reading.clusters, known=cell.known,
                            toi=toi, prop=options.prop, setups=cell.setups, predictions_content=content)
    for column, result in zip(columns, results):
        ci = result.get(ns, {})
        if options.n_boot:
            for level in levels:
                row[f"{column}_{level}low"], row[f"{column}_{level}high"] = ci.get(f"{level}low"), ci.get(f"{level}high")
        if column == "f_at_valid_tau" and strata is not None:
            row["_strata"] = {label: v["estimate"] for label, v in ci.get("subsets", {}).items()}
    return row, curve


@dataclass(frozen=True)
class ScoredMethods:
    """:func:`score_profile`'s tables: the summary, the curves and (with strata) F per stratum."""

    summary: pd.DataFrame
    curves: pd.DataFrame
    strata: pd.DataFrame


@dataclass(frozen=True)
class ScoringExtras:
    """What :func:`score_profile` adds to its cells beyond :class:`ScoringOptions`.

    toi : terms of interest (None: all)
    ci_methods : the methods given bootstrap CIs (None: all)
    taus : ``(method, mode, aspect) -> tau`` each method fixed on VALID (the ``*_at_valid_tau``
        columns); rows without one carry NaN there
    clusters : DataFrame ``protein, cluster`` (``core.neighbours.homology.homology_clusters`` of the targets)
        or a mapping protein -> cluster; every interval gets its cluster-level twin
        ``*_cluster_low/high`` (clusters resampled; None: protein level only)
    strata : DataFrame ``protein, aspect, identity_stratum`` (``core.neighbours.homology.max_train_identity``)
        of the targets; each method of ``strata_methods`` (None: all) with a VALID threshold gets
        one :data:`STRATA_COLUMNS` row per (mode, aspect, stratum) holding targets
    frames : :class:`CellFrames` of the same growth and methods, shared with other passes (None: cut here)
    """

    toi: Iterable[str] | None = None
    ci_methods: Iterable[str] | None = None
    taus: Mapping[tuple[str, str, str], float] | None = None
    clusters: Any = None
    strata: pd.DataFrame | None = None
    strata_methods: Iterable[str] | None = None
    frames: CellFrames | None = None

    @classmethod
    def of(cls, extras: Mapping[str, Any]) -> ScoringExtras:
        """The extras from keyword arguments; an unknown key is named in the error."""
        made = from_keywords(cls, extras, "score_profile: unknown argument(s)", TempoInputError)
        # one frozenset for every cell: the setups are keyed by the set of terms, which a frozenset is (no copy per call)
        return made if made.toi is None else replace(made, toi=frozenset(made.toi))


def _strata_by_aspect(strata: pd.DataFrame | None) -> dict[str, dict[str, str]]:
    """``{aspect: {protein: identity stratum}}`` of the identity strata frame."""
    if strata is None:
        return {}
    require_columns(strata, ("protein", "aspect", "identity_stratum"), "identity strata")
    return {aspect: dict(zip(rows["protein"].astype(str).tolist(), rows["identity_stratum"].tolist()))
            for aspect, rows in strata.groupby("aspect", sort=False)}


def _stratum_rows(key: dict[str, Any], labels: Mapping[str, str], tau: float,
                  f_by_stratum: Mapping[str, float] | None) -> list[dict[str, Any]]:
    """One :data:`STRATA_COLUMNS` row per identity stratum holding targets of the cell ``key``."""
    sizes = pd.Series(list(labels.values())).value_counts()
    return [{**key, "identity_stratum": label, "n_targets": int(sizes[label]), "valid_tau": tau,
             "f_at_valid_tau": (f_by_stratum or {}).get(label, float("nan"))}
            for label in IDENTITY_ORDER if label in sizes.index]


@dataclass
class _ProfileTables:
    """The rows :func:`score_profile` collects: summary rows, curves, stratum rows."""

    rows: list = field(default_factory=list)
    curves: list = field(default_factory=list)
    strata: list = field(default_factory=list)


def _score_method(eval_ontology, frames: CellFrames, method: tuple[str, pd.DataFrame], options: ScoringOptions,
                  extras: ScoringExtras, tables: _ProfileTables) -> None:
    """Every cell of one ``(name, predictions)`` method into ``tables``."""
    name, predictions = method
    require_columns(predictions, ("protein", "term", "aspect", "score"), f"predictions of {name}")
    ci_methods = None if extras.ci_methods is None else set(extras.ci_methods)
    strata_methods = None if extras.strata_methods is None else set(extras.strata_methods)
    cell_options = options if ci_methods is None or name in ci_methods else replace(options, n_boot=0)
    with_strata = extras.strata is not None and (strata_methods is None or name in strata_methods)
    by_aspect_strata = _strata_by_aspect(extras.strata)
    for (mode, aspect), cell in frames.cells.items():
        preds = frames.of(name, (mode, aspect))
        key = {"profile": options.profile, "method": name, "mode": mode, "aspect": aspect}
        counts = {**key, "n_targets": len(cell.targets), "truth_proteins": int(cell.truth["protein"].nunique()),
                  "truth_pairs": len(cell.truth), "truth_sha256": cell.truth_sha256, "predicted_pairs": len(preds)}
        tau = (extras.taus or {}).get((name, mode, aspect))
        labels = None
        if with_strata and tau is not None:
            known_labels = by_aspect_strata.get(aspect, {})
            labels = {str(p): known_labels.get(str(p), IDENTITY_NO_HIT) for p in cell.proteins}
        row, curve = score_cell(eval_ontology, cell, preds, cell_options,
                                CellReading(extras.toi, tau, extras.clusters, labels), frames.content(name, (mode, aspect)))
        f_by_stratum = row.pop("_strata", None)
        tables.rows.append({**counts, **row})
        if labels is not None:
            tables.strata += _stratum_rows(key, labels, tau, f_by_stratum)
        if len(curve):
            tables.curves.append(curve.assign(**key))


def score_profile(eval_ontology, targets: pd.DataFrame, ground_truth: pd.DataFrame,
                  known: pd.DataFrame | None, methods: Mapping[str, pd.DataFrame],
                  options: ScoringOptions = ScoringOptions(), **extras) -> ScoredMethods:
    """Every method on the same targets under one profile (``options.profile``), per (mode, aspect).

    Parameters as in :func:`score_methods`; ``extras``: :class:`ScoringExtras` (``toi``,
    ``ci_methods``, ``taus``, ``clusters``, ``strata``, ``strata_methods``, ``frames``).

    Returns
    -------
    :class:`ScoredMethods`; ``summary`` one row of :data:`SUMMARY_COLUMNS` per (method, mode, aspect).
    """
    extras = ScoringExtras.of(extras)
    tables = _ProfileTables()
    growth = (targets, ground_truth, known)
    frames = (CellFrames(growth, methods, keep_frames=False) if extras.frames is None
              else extras.frames.check(growth, methods))
    for method in methods.items():
        _score_method(eval_ontology, frames, method, options, extras, tables)
    # no cell has a target (e.g. a window with no TEST growth): zero rows, every column still there
    summary = pd.DataFrame(tables.rows) if tables.rows else pd.DataFrame(columns=list(SUMMARY_COLUMNS))
    ordered = [c for c in SUMMARY_COLUMNS if c in summary.columns]
    summary = summary[ordered + [c for c in summary.columns if c not in ordered]]
    return ScoredMethods(summary, pd.concat(tables.curves, ignore_index=True) if tables.curves else pd.DataFrame(),
                         pd.DataFrame(tables.strata, columns=list(STRATA_COLUMNS)))


def score_methods(eval_ontology, targets: pd.DataFrame, ground_truth: pd.DataFrame,
                  known: pd.DataFrame | None, methods: Mapping[str, pd.DataFrame],
                  options: ScoringOptions = ScoringOptions(), **extras) -> tuple[pd.DataFrame, pd.DataFrame]:
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
    extras : :class:`ScoringExtras` (``toi``, ``ci_methods``, ``taus``, ``clusters``)

    Returns
    -------
    (summary, curves) : ``summary`` one row per (method, mode, aspect); ``curves`` the evaluator's
        all-threshold rows with ``profile, method, mode, aspect`` columns.
    """
    scored = score_profile(eval_ontology, targets, ground_truth, known, methods, options, **extras)
    return scored.summary, scored.curves


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
