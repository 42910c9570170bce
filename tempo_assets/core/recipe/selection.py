"""Selection of a frozen recipe on the VALID window, and its application at a new cutoff.

``select_recipe`` scores a grid (embedder x K x reranker variant) on VALID growth
``(t-1, t0]`` per aspect and per mode (NK, LK, PK are never pooled), then decides per aspect:

1. **Objective.** For one cell and aspect: the mean over the modes that have VALID targets of
   that mode's Fmax. Ties break towards the simpler cell (plain KNN, smaller K, earlier
   hyperparameter set).
2. **Selective deploy.** Per embedder and aspect, the best plain-KNN cell and the best
   LightGBM cell are compared; the reranker is deployed only where it strictly beats plain KNN.
3. **Embedder.** The embedder with the highest mean over aspects of its chosen objective.
4. **Prior blend.** The chosen cell's VALID scores are blended with the naive frequency prior,
   ``(1 - w) * score + w * prior`` for each ``w`` of the grid's ``prior_weights`` (``w = 1`` is the
   naive baseline itself, on the union of both methods' terms), and the ``w`` with the highest
   objective is kept (ties go to the smaller ``w``; ``w = 0`` is the cell unblended). The prior
   leaves the scored protein's own labels out (``baselines.naive_term_scores(leave_one_out=True)``,
   the golden rule), so for a protein without labels it is exactly the naive baseline.
5. **Threshold.** ``tau`` per aspect maximises the mean over modes of F(tau) of the chosen cell
   (the objective's own operating point); the per-mode Fmax thresholds are kept beside it.

Every cell's scores are made consistent with the ontology before they are scored (each ancestor
of a scored term at least its score, ``consistent``): cafaeval's ``max`` propagation leaves them as
they are, and under LAFA's ``fill`` a parent is no longer kept below its child.

The reranker of a cell is trained on TRAIN labels (candidates from the ``t-2`` corpus,
labelled by growth in ``(t-2, t-1]``) and early-stopped on VALID labelled candidates. Nothing
of TEST reaches this module's ``select_recipe``: its signature has no such input.

``apply_recipe`` fits with the recipe's fixed hyperparameters and ``n_estimators`` (no early
stopping) on the labels it is given and scores new candidates. Given the TRAIN labels it rebuilds
the very rerankers VALID scored (LightGBM is deterministic here), which is how the TEST score reads
them at the thresholds VALID fixed (``Window.recipe_labels``); a fresh-cutoff submission, which has
no threshold, refits on its own cutoff's labels.
"""
from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import pandas as pd

from tempo_assets.core.base.errors import TempoInputError
from tempo_assets.core.recipe.baselines import naive_term_scores
from tempo_assets.core.recipe.candidates import (
    SOURCES, CandidateSource, feature_set, parse_sources, recipe_features, restrict_sources,
)
from tempo_assets.core.recipe.features import prepare_neighbours
from tempo_assets.core.base.io import digest_json
from tempo_assets.core.neighbours.knn import knn_term_scores
from tempo_assets.core.base.progress import Progress
from tempo_assets.core.evaluation.scoring import (
    ASPECTS, MODES, NAMESPACES, PROFILES, cell_curve, curve_best, evaluation_cells,
)
from tempo_assets.core.recipe.reranker import (
    RerankerInputError,
    _jsonable,
    label_candidates,
    train_reranker,
)

RECIPE_FORMAT = "tempo-recipe-1"
OBJECTIVE = "mean over modes with VALID targets of per-mode Fmax, per aspect"

GRID_COLUMNS: tuple[str, ...] = (
    "embedder", "k", "variant", "candidates", "features", "params_id", "params", "prior_weight", "aspect", "mode",
    "n_targets", "fmax", "tau", "coverage", "best_iteration", "objective", "status", "selected",
)
# what identifies one scored cell of the grid (with ``aspect``, one row per mode)
CELL_KEYS: tuple[str, ...] = ("embedder", "k", "variant", "candidates", "features", "params_id", "prior_weight")

# scorer(predictions[protein, term, score], ground_truth[protein, term],
#        known[protein, term] or None, aspect) -> curve DataFrame[tau, f, cov]
Scorer = Callable[[pd.DataFrame, pd.DataFrame, "pd.DataFrame | None", str], pd.DataFrame]


class SelectionInputError(TempoInputError):
    """A grid, candidate source or recipe handed to selection is malformed."""


def _labelled(source: CandidateSource, features: pd.DataFrame) -> pd.DataFrame:
    """``features`` restricted to ``source``'s growth targets, known terms removed, ``label`` set."""
    if source.ground_truth is None:
        raise SelectionInputError("this candidate source has no ground truth to label with",
                                  path="CandidateSource.ground_truth")
    return label_candidates(features, source.ground_truth, source.known)


@dataclass(frozen=True)
class SelectionGrid:
    """The VALID grid: embedders, K values and LightGBM hyperparameter sets.

    ``embedders=None`` means every key of the neighbour sets. The plain-KNN variant is always
    scored: selective deploy compares against it. ``lgbm_params`` may be empty (KNN only).
    """

    ks: tuple[int, ...] = (5, 10, 25)
    lgbm_params: tuple[Mapping[str, Any], ...] = (
        {"num_leaves": 7, "learning_rate": 0.1, "min_data_in_leaf": 20, "n_estimators": 200},
        {"num_leaves": 31, "learning_rate": 0.05, "min_data_in_leaf": 50, "n_estimators": 400},
    )
    embedders: tuple[str, ...] | None = None
    early_stopping_rounds: int = 20
    seed: int = 0
    # candidate sets (``core.candidates.parse_sources``: "knn+diamond+goa+prior") and feature sets
    # (``core.candidates.FEATURE_SETS``) every LightGBM setting is tried with
    candidate_sets: tuple[str, ...] = ("knn", "knn+diamond+goa+prior")
    feature_sets: tuple[str, ...] = ("all",)
    # weights of the naive prior blended into the chosen cell (0: unblended, 1: the prior alone)
    prior_weights: tuple[float, ...] = (0.0, 0.25, 0.5, 0.75, 1.0)

    @classmethod
    def coerce(cls, grid: "SelectionGrid | Mapping[str, Any]") -> "SelectionGrid":
        if isinstance(grid, SelectionGrid):
            out = grid
        elif isinstance(grid, Mapping):
            unknown = set(grid) - set(cls.__dataclass_fields__)
            if unknown:
                raise SelectionInputError(f"unknown grid key(s) {sorted(unknown)}", path="grid")
            values = dict(grid)
            for key in ("ks", "lgbm_params", "embedders", "candidate_sets", "feature_sets", "prior_weights"):
                if values.get(key) is not None:
                    values[key] = tuple(values[key])
            out = cls(**values)
        else:
            raise SelectionInputError(f"grid must be a SelectionGrid or mapping, got {type(grid)}",
                                      path="grid")
        if not out.ks or any(int(k) < 1 for k in out.ks):
            raise SelectionInputError(f"ks must be positive integers, got {out.ks}", path="grid.ks")
        if out.lgbm_params and (not out.candidate_sets or not out.feature_sets):
            raise SelectionInputError("candidate_sets and feature_sets must not be empty", path="grid")
        for spec in out.candidate_sets:
            parse_sources(spec)
        for name in out.feature_sets:
            feature_set(name)
        weights = [float(w) for w in out.prior_weights]
        if not weights or any(not (0.0 <= w <= 1.0) for w in weights) or 0.0 not in weights:
            raise SelectionInputError(f"prior_weights must be in [0, 1] and include 0 (the cell unblended), "
                                      f"got {out.prior_weights}", path="grid.prior_weights")
        return replace(out, prior_weights=tuple(sorted(set(weights))))


_NEEDS = {"diamond": "hits", "goa": "nonexp"}


def missing_inputs(candidates: str, *sources: CandidateSource) -> list[str]:
    """The inputs (``hits``, ``nonexp``) a candidate set needs that one of ``sources`` lacks."""
    return sorted({_NEEDS[s] for s in parse_sources(candidates) if s in _NEEDS
                   for source in sources if getattr(source, _NEEDS[s]) is None})


def cafa_scorer(eval_ontology: Any, metric: str = "f", **options: Any) -> Scorer:
    """A scorer over the cafaeval-exact evaluator (``core.evaluation.scoring.cell_curve``).

    Returns a callable giving the threshold curve ``tau, f, cov`` of one aspect's namespace,
    where ``f`` is the cafaeval column ``metric`` (``"f"`` or ``"f_w"``); ``options`` are
    ``cell_curve``'s ``toi`` and ``prop``.
    """
    def score(predictions: pd.DataFrame, ground_truth: pd.DataFrame,
              known: pd.DataFrame | None, aspect: str) -> pd.DataFrame:
        curve = cell_curve(eval_ontology, aspect, ground_truth[["protein", "term"]],
                           predictions[["protein", "term", "score"]],
                           known=None if known is None else known[["protein", "term"]], **options)
        if curve.empty:
            return pd.DataFrame({"tau": [], "f": [], "cov": []})
        return pd.DataFrame({"tau": curve["tau"].to_numpy(dtype=np.float64),
                             "f": curve[metric].to_numpy(dtype=np.float64),
                             "cov": curve["cov"].to_numpy(dtype=np.float64)})

    return score


def prior_scores(corpus_annotations: pd.DataFrame, proteins: Sequence[str],
                 aspects: Sequence[str] = ASPECTS) -> pd.DataFrame:
    """The naive prior the recipe blends in: each of ``aspects``' corpus term frequencies for each of
    ``proteins``, without that protein's own labels (``baselines.naive_term_scores``)."""
    proteins = pd.unique(np.asarray(list(proteins), dtype=object))
    aspects = np.array(list(aspects), dtype=object)
    targets = pd.DataFrame({"protein": np.repeat(proteins, len(aspects)),
                            "aspect": np.tile(aspects, len(proteins))})
    return naive_term_scores(corpus_annotations, targets, leave_one_out=True)


def consistent(scores: pd.DataFrame, ontology: Any = None) -> pd.DataFrame:
    """``scores`` with every ancestor of a scored term at least as high (``Ontology.propagate_max``):
    a recipe's output is consistent with the ontology whichever way an evaluator propagates it
    (cafaeval's ``max`` leaves such scores as they are in the same ontology; LAFA's ``fill`` would
    keep a parent a reranker scored below its child). Without an ontology, ``scores`` unchanged."""
    if ontology is None or scores.empty:
        return scores
    return ontology.propagate_max(scores[["protein", "term", "aspect", "score"]])


def blend_with_prior(scores: pd.DataFrame, prior: pd.DataFrame, weight: float) -> pd.DataFrame:
    """``(1 - weight) * score + weight * prior`` over the union of both frames' (protein, term, aspect)
    pairs (a pair one of them lacks scores 0 there); pairs that end at 0 are dropped.

    ``weight = 0`` returns ``scores``; ``prior`` is restricted to the proteins and aspects of
    ``scores``' caller (pass the prior of the proteins being scored)."""
    keys = ["protein", "term", "aspect"]
    weight = float(weight)
    if weight == 0.0:
        return scores[keys + ["score"]].reset_index(drop=True)
    both = scores[keys + ["score"]].merge(prior[keys + ["score"]].rename(columns={"score": "_prior"}),
                                          on=keys, how="outer")
    blended = ((1.0 - weight) * both["score"].fillna(0.0).to_numpy(dtype=np.float64)
               + weight * both["_prior"].fillna(0.0).to_numpy(dtype=np.float64))
    out = both[keys].assign(score=np.clip(blended, 0.0, 1.0))
    return out[out["score"] > 0].reset_index(drop=True)


def _mode_targets(ground_truth: pd.DataFrame, what: str) -> pd.DataFrame:
    missing = [c for c in ("protein", "term", "aspect", "mode") if c not in ground_truth.columns]
    if missing:
        raise SelectionInputError(f"VALID ground truth lacks column(s) {missing}", path=what)
    return ground_truth[["protein", "aspect", "mode"]].drop_duplicates()


def _curve_best(curve: pd.DataFrame) -> tuple[float, float | None, float]:
    """(fmax, tau, coverage at tau) of a curve; an empty curve scores zero."""
    return curve_best(curve)


def _mean_curve_tau(curves: Sequence[pd.DataFrame]) -> float | None:
    """The tau maximising the mean over modes of F(tau); None when no curve has points."""
    frames = [c for c in curves if c is not None and len(c) > 0]
    if not frames:
        return None
    merged = None
    for i, curve in enumerate(frames):
        part = pd.DataFrame({"key": np.round(curve["tau"].to_numpy(dtype=np.float64), 9),
                             "tau": curve["tau"].to_numpy(dtype=np.float64),
                             f"f{i}": np.nan_to_num(curve["f"].to_numpy(dtype=np.float64))})
        merged = part if merged is None else merged.merge(part.drop(columns="tau"), on="key",
                                                          how="outer")
    merged = merged.sort_values("key").reset_index(drop=True)
    fcols = [f"f{i}" for i in range(len(frames))]
    mean_f = merged[fcols].fillna(0.0).mean(axis=1).to_numpy()
    best = int(np.argmax(mean_f))
    tau = merged["tau"].iloc[best]
    return float(merged["key"].iloc[best] if pd.isna(tau) else tau)


class _CellScorer:
    """VALID cells of one candidate source (``core.evaluation.scoring.evaluation_cells``), scored per mode for one aspect."""

    def __init__(self, scorer: Scorer, valid: CandidateSource, aspects: Sequence[str],
                 modes: Sequence[str]):
        self.scorer = scorer
        self.modes = tuple(modes)
        targets = _mode_targets(valid.ground_truth, "valid_sets[...].ground_truth")
        known = valid.known if valid.known is not None and len(valid.known) > 0 else None
        self.cells = evaluation_cells(targets, valid.ground_truth, known, modes=self.modes, aspects=aspects,
                                      keep_empty=True)
        self.curves: dict[tuple, pd.DataFrame] = {}

    def n_targets(self, aspect: str, mode: str) -> int:
        return len(self.cells[(mode, aspect)].targets)

    def score(self, cell: tuple, aspect: str, predictions: pd.DataFrame) -> list[dict[str, Any]]:
        rows = []
        for mode in self.modes:
            target = self.cells[(mode, aspect)]
            if target.targets.empty:
                rows.append({"mode": mode, "n_targets": 0, "fmax": np.nan, "tau": np.nan,
                             "coverage": np.nan, "status": "no_targets"})
                continue
            preds = predictions[predictions["protein"].isin(target.proteins)][["protein", "term", "score"]]
            curve = self.scorer(preds.reset_index(drop=True), target.truth.reset_index(drop=True), target.known,
                                aspect)
            self.curves[cell + (aspect, mode)] = curve
            fmax, tau, cov = _curve_best(curve)
            rows.append({"mode": mode, "n_targets": len(target.targets), "fmax": fmax,
                         "tau": np.nan if tau is None else tau, "coverage": cov, "status": "ok"})
        return rows


@dataclass(frozen=True)
class _Selection:
    """What one ``select_recipe`` call scores with: the grid, the scorer and the cells' shape."""

    spec: SelectionGrid
    scorer: Scorer
    embedders: tuple[str, ...]
    ks: tuple[int, ...]
    aspects: tuple[str, ...]
    modes: tuple[str, ...]
    ontology: Any = None


@dataclass
class _GridScores:
    """The grid's rows as they are scored, the curves and the VALID predictions of every cell."""

    rows: list[dict[str, Any]] = field(default_factory=list)
    curves: dict[tuple, pd.DataFrame] = field(default_factory=dict)
    kept: dict[tuple, pd.DataFrame] = field(default_factory=dict)
    scorers: dict[str, _CellScorer] = field(default_factory=dict)
    n_targets: dict[tuple[str, str], int] = field(default_factory=dict)


@dataclass(frozen=True)
class _EmbedderCells:
    """One embedder's TRAIN and VALID sources (neighbours cut at ``K_max``) and its VALID cell scorer."""

    name: str
    train: CandidateSource
    valid: CandidateSource
    cells: _CellScorer


@dataclass(frozen=True)
class _CandidateSet:
    """One candidate set's labelled TRAIN rows, VALID features and labelled VALID rows at one K."""

    k: int
    candidates: str
    train_labelled: pd.DataFrame
    valid_features: pd.DataFrame
    valid_labelled: pd.DataFrame


def select_recipe(
    grid: SelectionGrid | Mapping[str, Any],
    *,
    train_sets: Mapping[str, CandidateSource],
    valid_sets: Mapping[str, CandidateSource],
    scorer: Scorer | None = None,
    window: Any = None,
    ontology: Any = None,
    aspects: Sequence[str] = ASPECTS,
) -> tuple[pd.DataFrame, dict[str, Any]]:
    """Score the whole grid on VALID and freeze a recipe.

    Parameters
    ----------
    grid : SelectionGrid or mapping of its fields
    train_sets : mapping embedder -> CandidateSource
        TRAIN: neighbours of the ``(t-2, t-1]`` growth targets searched in the ``t-2`` corpus,
        that corpus, the ground truth at ``t-1`` and the known terms at ``t-2``.
    valid_sets : mapping embedder -> CandidateSource
        VALID: neighbours of the ``(t-1, t0]`` targets searched in the ``t-1`` corpus, that
        corpus, the VALID ground truth (with a ``mode`` column) and known terms.
    scorer : ``(predictions, ground_truth, known, aspect) -> curve[tau, f, cov]``, e.g.
        ``cafa_scorer(eval_ontology)``.
    window : any JSON-able value, the window the recipe is chosen on (recorded in the recipe).
    ontology : Ontology, optional
        The VALID candidates' ontology (``t-1``): every cell's scores are made consistent with it
        (``Ontology.propagate_max``) before they are scored and blended, as ``apply_recipe`` does.
    aspects : the aspects scored (every mode of ``core.evaluation.scoring.MODES`` is).

    Returns
    -------
    grid_frame : DataFrame
        One row per embedder x K x variant x hyperparameter set x aspect x mode with
        ``GRID_COLUMNS``; nothing is discarded. ``selected`` marks the recipe's cells.
    recipe : dict
        JSON-able; see ``recipe_hash``.
    """
    run = _selection(grid, train_sets, valid_sets, scorer, ontology, aspects)
    scores = _score_grid(run, train_sets, valid_sets)
    frame = pd.DataFrame(scores.rows)
    frame["objective"] = _objectives(frame)
    recipe = _choose(frame, scores, run, window)
    blends = _blend_prior(recipe, scores, run, _valid_prior(valid_sets[recipe["embedder"]]))
    scores.kept.clear()
    if blends:
        frame = pd.concat([frame, pd.DataFrame(blends)], ignore_index=True)
        frame["objective"] = _objectives(frame)
    return _mark_selected(frame, recipe), recipe


def _selection(grid: SelectionGrid | Mapping[str, Any], train_sets: Mapping[str, CandidateSource],
               valid_sets: Mapping[str, CandidateSource], scorer: Scorer | None, ontology: Any,
               aspects: Sequence[str]) -> _Selection:
    """The checked grid and scorer; every embedder of the grid must have a TRAIN and a VALID source."""
    spec = SelectionGrid.coerce(grid)
    if scorer is None:
        raise SelectionInputError("pass a scorer (e.g. cafa_scorer(eval_ontology))", path="select_recipe")
    embedders = tuple(spec.embedders) if spec.embedders is not None else tuple(sorted(valid_sets))
    for name in embedders:
        for what, sets in (("train_sets", train_sets), ("valid_sets", valid_sets)):
            if name not in sets:
                raise SelectionInputError(f"no candidate source for embedder {name!r}", path=what)
    if not embedders:
        raise SelectionInputError("no embedder to select from", path="valid_sets")
    return _Selection(spec=spec, scorer=scorer, embedders=embedders, ks=tuple(sorted({int(k) for k in spec.ks})),
                      aspects=tuple(aspects), modes=tuple(MODES), ontology=ontology)


def _score_grid(run: _Selection, train_sets: Mapping[str, CandidateSource],
                valid_sets: Mapping[str, CandidateSource]) -> _GridScores:
    """Step 1 of the module's rule for every cell: plain KNN and each LightGBM setting, per K and embedder."""
    spec, scores = run.spec, _GridScores()
    fits = Progress("lightgbm grid", len(run.embedders) * len(run.ks) * len(spec.candidate_sets)
                    * len(spec.feature_sets) * len(spec.lgbm_params) * len(run.aspects), "fits")
    for name in run.embedders:
        train, valid = train_sets[name], valid_sets[name]
        cells = scores.scorers[name] = _CellScorer(run.scorer, valid, run.aspects, run.modes)
        for aspect in run.aspects:
            for mode in run.modes:
                scores.n_targets[(aspect, mode)] = cells.n_targets(aspect, mode)
        # Neighbours are searched once at K_max and truncated per K.
        embedder = _EmbedderCells(name, replace(train, neighbours=prepare_neighbours(train.neighbours, run.ks[-1])),
                                  replace(valid, neighbours=prepare_neighbours(valid.neighbours, run.ks[-1])), cells)
        for k in run.ks:
            _score_plain(run, embedder, k, scores)
            if spec.lgbm_params:
                _score_lgbm(run, embedder, k, scores, fits)
        scores.curves.update(cells.curves)
    return scores


def _score_plain(run: _Selection, embedder: _EmbedderCells, k: int, scores: _GridScores) -> None:
    """The plain-KNN cell at ``k``: its VALID predictions kept and scored per aspect and mode."""
    valid_nb = embedder.valid.neighbours
    knn = consistent(knn_term_scores(valid_nb[valid_nb["rank"] <= k], embedder.valid.corpus_annotations, k=k),
                     run.ontology)
    cell = (embedder.name, k, "none", "knn", "", -1, 0.0)
    for aspect in run.aspects:
        scores.kept[cell + (aspect,)] = knn[knn["aspect"] == aspect]
        for row in embedder.cells.score(cell, aspect, scores.kept[cell + (aspect,)]):
            scores.rows.append({"embedder": embedder.name, "k": k, "variant": "none", "candidates": "knn",
                                "features": "", "params_id": -1, "params": "", "prior_weight": 0.0,
                                "aspect": aspect, "best_iteration": -1, **row})


def _score_lgbm(run: _Selection, embedder: _EmbedderCells, k: int, scores: _GridScores, fits: Progress) -> None:
    """Every LightGBM cell at ``k``: each candidate set is cut out of the union of all the sets' sources,
    built once per split; a set whose inputs a source lacks gets ``missing_*`` rows."""
    spec, built = run.spec, {}
    union = sorted({s for c in spec.candidate_sets for s in parse_sources(c)}, key=SOURCES.index)
    for cand in spec.candidate_sets:
        lacking = missing_inputs(cand, embedder.train, embedder.valid)
        if lacking:
            scores.rows.extend(_missing_rows(run, embedder, k, cand, lacking))
            continue
        if not built:
            built["all"] = (recipe_features(embedder.train, k, union), recipe_features(embedder.valid, k, union))
        valid_features = restrict_sources(built["all"][1], cand)
        candidate_set = _CandidateSet(k, cand, _labelled(embedder.train, restrict_sources(built["all"][0], cand)),
                                      valid_features, _labelled(embedder.valid, valid_features))
        for fset in spec.feature_sets:
            for pid in range(len(spec.lgbm_params)):
                _score_lgbm_cell(run, embedder, candidate_set, (fset, pid), scores, fits)


def _missing_rows(run: _Selection, embedder: _EmbedderCells, k: int, cand: str,
                  lacking: Sequence[str]) -> list[dict[str, Any]]:
    """A source without DIAMOND hits or non-experimental annotations cannot offer this candidate set."""
    return [{"embedder": embedder.name, "k": k, "variant": "lgbm", "candidates": cand, "features": fset,
             "params_id": pid, "params": json.dumps(_jsonable(params), sort_keys=True), "prior_weight": 0.0,
             "aspect": aspect, "mode": mode, "n_targets": embedder.cells.n_targets(aspect, mode), "fmax": np.nan,
             "tau": np.nan, "coverage": np.nan, "best_iteration": -1, "status": f"missing_{'_'.join(lacking)}"}
            for fset in run.spec.feature_sets for pid, params in enumerate(run.spec.lgbm_params)
            for aspect in run.aspects for mode in run.modes]


def _score_lgbm_cell(run: _Selection, embedder: _EmbedderCells, candidate_set: _CandidateSet,
                     setting: tuple[str, int], scores: _GridScores, fits: Progress) -> None:
    """One LightGBM cell (feature set and hyperparameter set ``setting``) per aspect: fitted on TRAIN,
    early-stopped and scored on VALID."""
    spec, (fset, pid) = run.spec, setting
    params = spec.lgbm_params[pid]
    cell = (embedder.name, candidate_set.k, "lgbm", candidate_set.candidates, fset, pid, 0.0)
    train_lab, valid_lab, valid_feat = (candidate_set.train_labelled, candidate_set.valid_labelled,
                                        candidate_set.valid_features)
    for aspect in run.aspects:
        fits.advance()  # fits started
        meta = {"embedder": embedder.name, "k": candidate_set.k, "variant": "lgbm",
                "candidates": candidate_set.candidates, "features": fset, "params_id": pid,
                "params": json.dumps(_jsonable(params), sort_keys=True), "prior_weight": 0.0, "aspect": aspect}
        try:
            model = train_reranker(train_lab[train_lab["aspect"] == aspect], params,
                                   valid=valid_lab[valid_lab["aspect"] == aspect],
                                   early_stopping_rounds=spec.early_stopping_rounds, seed=spec.seed,
                                   feature_columns=feature_set(fset))
        except RerankerInputError:
            # Too few TRAIN rows of one class: the reranker cannot exist here.
            scores.rows.extend({**meta, "mode": mode, "n_targets": embedder.cells.n_targets(aspect, mode),
                                "fmax": np.nan, "tau": np.nan, "coverage": np.nan, "best_iteration": -1,
                                "status": "untrainable"} for mode in run.modes)
            continue
        feat_a = valid_feat[valid_feat["aspect"] == aspect]
        preds = consistent(feat_a[["protein", "term", "aspect"]].assign(score=model.predict(feat_a)), run.ontology)
        scores.kept[cell + (aspect,)] = preds
        for row in embedder.cells.score(cell, aspect, preds):
            scores.rows.append({**meta, "best_iteration": model.best_iteration, **row})


def _valid_prior(valid: CandidateSource) -> pd.DataFrame:
    """The prior of every VALID protein the chosen embedder scored (its neighbours' queries and targets)."""
    proteins = set(valid.neighbours["query"].astype(str)) | set(valid.ground_truth["protein"].astype(str))
    return prior_scores(valid.corpus_annotations, sorted(proteins))


def _mark_selected(frame: pd.DataFrame, recipe: Mapping[str, Any]) -> pd.DataFrame:
    """``frame`` with ``selected`` set on the recipe's cells, in ``GRID_COLUMNS`` and the grid's order."""
    name = recipe["embedder"]
    frame["selected"] = False
    for aspect, choice in recipe["aspects"].items():
        mask = ((frame["embedder"] == name) & (frame["aspect"] == aspect)
                & (frame["k"] == choice["k"]) & (frame["variant"] == choice["variant"])
                & (frame["candidates"] == choice.get("candidates", "knn"))
                & (frame["features"] == (choice.get("features") or ""))
                & (frame["params_id"] == choice["params_id"])
                & (frame["prior_weight"] == float(choice.get("prior_weight") or 0.0)))
        frame.loc[mask, "selected"] = True
    frame = frame[list(GRID_COLUMNS)].sort_values(
        ["embedder", "aspect", "k", "variant", "candidates", "features", "params_id", "prior_weight", "mode"],
        kind="mergesort")
    return frame.reset_index(drop=True)


def _objectives(frame: pd.DataFrame) -> np.ndarray:
    keys = list(CELL_KEYS) + ["aspect"]
    ok = frame["status"] == "ok"
    means = frame[ok].groupby(keys)["fmax"].mean().rename("_objective")
    return frame[keys].join(means, on=keys)["_objective"].to_numpy(dtype=np.float64)


def _best_cell(cells: pd.DataFrame, spec: "SelectionGrid | None" = None) -> pd.Series | None:
    """Highest objective; ties go to the smaller K, then the earlier candidate set, feature set and
    hyperparameter set of the grid."""
    cells = cells[np.isfinite(cells["objective"].to_numpy(dtype=np.float64))]
    if cells.empty:
        return None
    cand_order = {c: i for i, c in enumerate(spec.candidate_sets)} if spec is not None else {}
    feat_order = {f: i for i, f in enumerate(spec.feature_sets)} if spec is not None else {}
    ordered = cells.assign(_neg=-cells["objective"], _c=cells["candidates"].map(cand_order).fillna(-1),
                           _f=cells["features"].map(feat_order).fillna(-1)).sort_values(
        ["_neg", "k", "_c", "_f", "params_id"], kind="mergesort")
    return ordered.iloc[0]


@dataclass(frozen=True)
class _Pick:
    """The cell chosen for one aspect, and the objectives it is recorded with."""

    k: int
    variant: str = "none"
    candidates: str = "knn"
    features: str = ""
    params_id: int = -1
    n_estimators: int | None = None
    objective: float | None = None
    plain_objective: float | None = None
    prior_weight: float = 0.0

    @classmethod
    def of_row(cls, pick: pd.Series, plain: pd.Series) -> "_Pick":
        return cls(int(pick["k"]), str(pick["variant"]), str(pick["candidates"]), str(pick["features"]),
                   int(pick["params_id"]), int(pick["best_iteration"]) if pick["variant"] == "lgbm" else None,
                   float(pick["objective"]), float(plain["objective"]))

    @classmethod
    def of_choice(cls, choice: Mapping[str, Any], objective: float, prior_weight: float) -> "_Pick":
        return cls(int(choice["k"]), choice["variant"], choice.get("candidates") or "knn",
                   choice.get("features") or "", int(choice["params_id"]), choice.get("n_estimators"),
                   objective, choice.get("plain_objective"), prior_weight)

    def cell(self, name: str) -> tuple:
        return (name, self.k, self.variant, self.candidates, self.features, self.params_id, float(self.prior_weight))


def _blend_prior(recipe: dict[str, Any], scores: _GridScores, run: _Selection,
                 prior: pd.DataFrame) -> list[dict[str, Any]]:
    """Step 4 of the module's rule, in place on ``recipe``: per aspect, the chosen cell blended with
    the prior at every weight of the grid, scored on VALID; the best weight is kept. Returns the
    grid rows of the blended cells."""
    rows: list[dict[str, Any]] = []
    name, cells = recipe["embedder"], scores.scorers[recipe["embedder"]]
    weights = [w for w in run.spec.prior_weights if w > 0]
    for aspect, choice in recipe["aspects"].items():
        choice["prior_weight"] = 0.0
        pick = _Pick.of_choice(choice, choice.get("valid_objective"), 0.0)
        preds = scores.kept.get(pick.cell(name) + (aspect,))
        if preds is None or choice.get("valid_objective") is None or not weights:
            continue  # no VALID target in this aspect: nothing to blend on
        mine = prior[prior["aspect"] == aspect]
        best_w, best_objective = 0.0, float(choice["valid_objective"])
        for w in weights:
            scored = cells.score(pick.cell(name)[:-1] + (w,), aspect, blend_with_prior(preds, mine, w))
            rows.extend(_blend_row(run, pick.cell(name), (aspect, w), choice, row) for row in scored)
            fmaxes = [r["fmax"] for r in scored if r["status"] == "ok"]
            objective = float(np.mean(fmaxes)) if fmaxes else -math.inf
            if objective > best_objective:
                best_w, best_objective = w, objective
        scores.curves.update(cells.curves)  # the blended cells' curves, for the chosen weight's thresholds
        if best_w > 0:
            entry = _aspect_entry(run, scores, (name, aspect), replace(pick, objective=best_objective,
                                                                         prior_weight=best_w))
            entry["unblended_objective"] = choice["valid_objective"]
            choice.clear()
            choice.update(entry)
    return rows


def _blend_row(run: _Selection, cell: tuple, blend: tuple[str, float], choice: Mapping[str, Any],
               row: Mapping[str, Any]) -> dict[str, Any]:
    """The grid row of one mode of a blended cell (``blend``: its aspect and prior weight)."""
    aspect, weight = blend
    return {"embedder": cell[0], "k": cell[1], "variant": cell[2], "candidates": cell[3], "features": cell[4],
            "params_id": cell[5],
            "params": "" if cell[2] == "none" else json.dumps(_jsonable(run.spec.lgbm_params[cell[5]]), sort_keys=True),
            "prior_weight": weight, "aspect": aspect, "best_iteration": choice.get("n_estimators") or -1, **row}


def _choose(frame: pd.DataFrame, scores: _GridScores, run: _Selection, window: Any) -> dict[str, Any]:
    """Steps 2 and 3 of the module's rule: per embedder and aspect the better of plain KNN and LightGBM,
    then the embedder with the highest mean objective (ties go to the embedder listed first)."""
    cells = frame.drop_duplicates(list(CELL_KEYS) + ["aspect"])
    cells = cells[cells["prior_weight"] == 0.0]  # the prior blend is step 4, on the cell chosen here
    best_by_embedder = {name: _choose_embedder(cells, scores, run, name) for name in run.embedders}
    embedders = list(run.embedders)
    best_name = max(embedders, key=lambda e: (best_by_embedder[e][0], -embedders.index(e)))
    spec = run.spec
    return {
        "format": RECIPE_FORMAT,
        "window": _jsonable(window),
        "objective": OBJECTIVE,
        "embedder": best_name,
        "embedder_objective": _finite(best_by_embedder[best_name][0]),
        "seed": int(spec.seed),
        "grid": {"embedders": embedders, "ks": sorted(int(k) for k in spec.ks),
                 "lgbm_params": [_jsonable(p) for p in spec.lgbm_params],
                 "early_stopping_rounds": int(spec.early_stopping_rounds),
                 "candidate_sets": list(spec.candidate_sets), "feature_sets": list(spec.feature_sets),
                 "prior_weights": [float(w) for w in spec.prior_weights]},
        "aspects": best_by_embedder[best_name][1],
    }


def _choose_embedder(cells: pd.DataFrame, scores: _GridScores, run: _Selection,
                     name: str) -> tuple[float, dict[str, Any]]:
    """(mean objective over aspects, aspect -> entry) of one embedder; the reranker is deployed only
    where it strictly beats plain KNN."""
    chosen: dict[str, Any] = {}
    objectives = []
    for aspect in run.aspects:
        mine = cells[(cells["embedder"] == name) & (cells["aspect"] == aspect)]
        plain = _best_cell(mine[mine["variant"] == "none"])
        lgbm = _best_cell(mine[mine["variant"] == "lgbm"], run.spec)
        if plain is None:
            # No VALID target in this aspect: nothing to choose on; fall back to plain KNN.
            chosen[aspect] = _aspect_entry(run, scores, (name, aspect), _Pick(int(max(run.spec.ks))))
            continue
        pick = plain
        if lgbm is not None and float(lgbm["objective"]) > float(plain["objective"]):
            pick = lgbm
        objectives.append(float(pick["objective"]))
        chosen[aspect] = _aspect_entry(run, scores, (name, aspect), _Pick.of_row(pick, plain))
    return (float(np.mean(objectives)) if objectives else -math.inf), chosen


def _finite(value: float | None) -> float | None:
    return None if value is None or not math.isfinite(value) else float(value)


def _aspect_entry(run: _Selection, scores: _GridScores, where: tuple[str, str], pick: _Pick) -> dict[str, Any]:
    """The recipe's entry for one aspect (``where``: embedder and aspect) of the chosen cell ``pick``."""
    name, aspect = where
    mode_curves = {m: scores.curves.get(pick.cell(name) + (aspect, m)) for m in run.modes}
    tau_by_mode, fmax_by_mode = {}, {}
    for mode, curve in mode_curves.items():
        if curve is None:
            continue
        fmax, tau, _ = _curve_best(curve)
        tau_by_mode[mode] = tau
        fmax_by_mode[mode] = fmax
    params = None
    if pick.variant == "lgbm":
        params = {k_: v for k_, v in _jsonable(run.spec.lgbm_params[pick.params_id]).items()
                  if k_ != "n_estimators"}
    return {
        "k": int(pick.k),
        "variant": pick.variant,
        "candidates": pick.candidates,
        "features": pick.features or None,
        "params_id": int(pick.params_id),
        "params": params,
        "n_estimators": pick.n_estimators,
        "prior_weight": float(pick.prior_weight),
        "tau": _mean_curve_tau([c for c in mode_curves.values() if c is not None]),
        "tau_by_mode": tau_by_mode,
        "valid_fmax_by_mode": fmax_by_mode,
        "valid_objective": _finite(pick.objective),
        "plain_objective": _finite(pick.plain_objective),
        "valid_targets": {m: int(scores.n_targets.get((aspect, m), 0)) for m in run.modes},
    }


def recipe_profile(recipe: Mapping[str, Any]) -> str:
    """The profile (``core.evaluation.scoring.PROFILES``) ``recipe`` was selected under: its VALID thresholds
    (``tau_by_mode``) are F-maximising under that profile's conventions, and ``test_score`` scores it
    under them. A recipe frozen before it recorded one was selected under ``cafaeval``."""
    profile = recipe.get("profile") or "cafaeval"
    if profile not in PROFILES:
        raise SelectionInputError(f"recipe profile {profile!r} is not one of {PROFILES}", path="recipe.profile")
    return str(profile)


def recipe_hash(recipe: Mapping[str, Any]) -> str:
    """sha256 hex of the recipe's canonical JSON (sorted keys, no spaces, no NaN)."""
    try:
        text = digest_json(_jsonable(recipe))
    except (TypeError, ValueError) as exc:
        raise SelectionInputError(f"recipe is not canonical JSON: {exc}", path="recipe")
    return hashlib.sha256(text.encode("ascii")).hexdigest()


def fit_rerankers(recipe: Mapping[str, Any], train: CandidateSource,
                  scored: CandidateSource | None = None) -> dict[str, Any]:
    """Each LightGBM aspect's reranker of ``recipe``, fitted on ``train``'s labelled candidates with the
    recipe's hyperparameters and ``n_estimators`` (no early stopping); plain-KNN aspects have none.

    ``scored`` (the candidates to be scored, optional) is checked to offer the recipe's candidate
    sources too."""
    _check_recipe(recipe)
    seed = int(recipe.get("seed", 0))
    labelled: dict[tuple, pd.DataFrame] = {}
    models: dict[str, Any] = {}
    for aspect, choice in sorted(recipe["aspects"].items()):
        if choice["variant"] == "none":
            continue
        if choice["variant"] != "lgbm" or not choice.get("n_estimators"):
            raise SelectionInputError(f"aspect {aspect}: variant {choice['variant']!r} with "
                                      f"n_estimators {choice.get('n_estimators')!r}",
                                      path=f"recipe.aspects.{aspect}")
        k, cand = int(choice["k"]), choice.get("candidates") or "knn"
        lacking = missing_inputs(cand, train, *(() if scored is None else (scored,)))
        if lacking:
            raise SelectionInputError(f"aspect {aspect}: candidate set {cand!r} needs {lacking} of the training "
                                      "and scored proteins, not given", path=f"recipe.aspects.{aspect}")
        if (k, cand) not in labelled:
            labelled[(k, cand)] = _labelled(train, recipe_features(train, k, cand))
        rows = labelled[(k, cand)][labelled[(k, cand)]["aspect"] == aspect]
        params = {**(choice.get("params") or {}), "n_estimators": int(choice["n_estimators"])}
        models[aspect] = train_reranker(rows, params, valid=None, seed=seed,
                                        feature_columns=feature_set(choice.get("features") or "knn"))
    return models


def apply_recipe(
    recipe: Mapping[str, Any],
    scored: CandidateSource,
    train: CandidateSource,
    *,
    proteins: Sequence[str] | None = None,
    ontology: Any = None,
    rerankers: Mapping[str, Any] | None = None,
    embedder: str | None = None,
) -> pd.DataFrame:
    """Score new candidates with a frozen recipe, its rerankers fitted on ``train``.

    Parameters
    ----------
    recipe : dict from ``select_recipe`` (possibly read back from JSON)
    scored : CandidateSource
        The proteins to score: their neighbours searched with the recipe's embedder in the
        propagated ``corpus_annotations``' corpus, at least ``max(K)`` deep; ``ia`` and
        ``term_depth`` for their features; ``hits`` and ``nonexp`` (DIAMOND hits in the corpus and
        non-experimental annotations), required when a chosen candidate set uses them. An aspect's
        choice without ``candidates``/``features`` (a recipe frozen before they existed) is the KNN
        candidates with the KNN features. Its ground truth, if any, is not read.
    train : CandidateSource
        Labelled candidates at the new cutoff (for the TEST score at ``t0``: neighbours of the
        ``(t-1, t0]`` targets in the ``t-1`` corpus, ground truth at ``t0``, known at ``t-1``).
        Rerankers are refit on it with the recipe's hyperparameters and ``n_estimators`` and no
        early stopping.
    proteins : the proteins being scored, for an aspect whose choice blends in the prior
        (``prior_weight > 0``: each of them gets the prior's terms); default the queries of
        ``scored``'s neighbours and hits.
    ontology : Ontology of the scored candidates' release, optional
        Each aspect's scores are made consistent with it (:func:`consistent`) before the prior is
        blended in, as ``select_recipe`` scored them on VALID.
    rerankers : mapping aspect -> reranker, optional
        :func:`fit_rerankers` of this recipe, fitted once for scoring many protein chunks; default
        fitted here on ``train``.
    embedder : str, optional
        When given, must equal the recipe's embedder.

    Returns
    -------
    DataFrame ``protein, term, aspect, score`` with scores in (0, 1], sorted by protein,
    aspect, term. ``tau`` is not applied: it stays in the recipe for reporting.
    """
    _check_recipe(recipe, embedder)
    if rerankers is None:
        rerankers = fit_rerankers(recipe, train, scored)
    features: dict[tuple, pd.DataFrame] = {}  # candidates per (K, candidate set), shared by aspects
    outputs = []
    for aspect, choice in sorted(recipe["aspects"].items()):
        scores = consistent(_aspect_scores(scored, (aspect, choice), rerankers, features), ontology)
        outputs.append(_blended(scored, (aspect, choice), proteins, scores))
    columns = ["protein", "term", "aspect", "score"]
    if not outputs:
        return pd.DataFrame({c: [] for c in columns})
    out = pd.concat(outputs, ignore_index=True)
    return out.sort_values(["protein", "aspect", "term"], kind="mergesort").reset_index(drop=True)[columns]


def _check_recipe(recipe: Mapping[str, Any], embedder: str | None = None) -> None:
    if recipe.get("format") != RECIPE_FORMAT or "aspects" not in recipe:
        raise SelectionInputError(f"not a {RECIPE_FORMAT} recipe", path="recipe")
    if embedder is not None and embedder != recipe["embedder"]:
        raise SelectionInputError(
            f"neighbours come from embedder {embedder!r}, the recipe uses {recipe['embedder']!r}",
            path="recipe.embedder")


def _aspect_scores(scored: CandidateSource, chosen: tuple[str, Mapping[str, Any]], rerankers: Mapping[str, Any],
                   features: dict[tuple, pd.DataFrame]) -> pd.DataFrame:
    """One aspect's scores of the chosen cell: plain KNN, or its reranker over its candidates."""
    aspect, choice = chosen
    k = int(choice["k"])
    nb = prepare_neighbours(scored.neighbours, k)
    if choice["variant"] == "none":
        scores = knn_term_scores(nb, scored.corpus_annotations, k=k)
        return scores[scores["aspect"] == aspect][["protein", "term", "aspect", "score"]]
    key = (k, choice.get("candidates") or "knn")
    if key not in features:
        features[key] = recipe_features(replace(scored, neighbours=nb), *key)
    if aspect not in rerankers:
        raise SelectionInputError(f"aspect {aspect}: no fitted reranker given", path=f"recipe.aspects.{aspect}")
    feats = features[key][features[key]["aspect"] == aspect]
    return feats[["protein", "term", "aspect"]].assign(score=rerankers[aspect].predict(feats))


def _blended(scored: CandidateSource, chosen: tuple[str, Mapping[str, Any]], proteins: Sequence[str] | None,
             scores: pd.DataFrame) -> pd.DataFrame:
    """``scores`` blended with the prior of every scored protein in the aspect at the chosen weight."""
    aspect, choice = chosen
    weight = float(choice.get("prior_weight") or 0.0)
    if weight == 0.0:
        return scores
    scored_proteins = set(scored.neighbours["query"].astype(str))
    if scored.hits is not None:
        scored_proteins |= set(scored.hits["query"].astype(str))
    if proteins is not None:
        scored_proteins |= {str(p) for p in proteins}
    return blend_with_prior(scores, prior_scores(scored.corpus_annotations, sorted(scored_proteins), (aspect,)),
                            weight)
