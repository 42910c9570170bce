"""Selection of a frozen recipe on the VALID window (the grid itself in ``valid_grid.py``, its
application at a new cutoff in ``frozen_recipe.py``).

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
"""
from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field, replace
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from tempo_assets.core.recipe.candidates import (
    SOURCES, CandidateSource, feature_set, parse_sources, recipe_features, restrict_sources,
)
from tempo_assets.core.recipe.features import prepare_neighbours
from tempo_assets.core.base.io import digest_json
from tempo_assets.core.base.memory import release_unused_memory
from tempo_assets.core.neighbours.knn import knn_term_scores
from tempo_assets.core.base.progress import Progress
from tempo_assets.core.base.vocabulary import ASPECTS, MODES
from tempo_assets.core.evaluation.scoring import PROFILES
from tempo_assets.core.recipe.reranker import RerankerInputError, _jsonable, train_reranker
from tempo_assets.core.recipe.valid_grid import (
    CELL_KEYS, GRID_COLUMNS, OBJECTIVE, RECIPE_FORMAT, Scorer, SelectionGrid, SelectionInputError,
    PriorAligned, _CellScorer, _curve_best, _labelled, _mean_curve_tau, _objectives, consistent,
    missing_inputs, prior_scores,
)


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
    # (embedder, K, candidate set) -> (aspects, its labelled TRAIN rows and VALID features of those aspects), held
    # while one of its LightGBM cells is the best so far in each of those aspects (``_hold_if_best``)
    candidate_sets: dict[tuple, tuple[frozenset, pd.DataFrame, pd.DataFrame]] = field(default_factory=dict)
    best_lgbm: dict[tuple[str, str], tuple[float, tuple]] = field(default_factory=dict)
    # (embedder, aspect, variant) -> (objective, the key in ``kept``) of the best cell so far (``_keep_if_best``)
    best_kept: dict[tuple[str, str, str], tuple[float, tuple]] = field(default_factory=dict)


@dataclass(frozen=True)
class _EmbedderCells:
    """One embedder's TRAIN and VALID sources (neighbours cut at ``K_max``) and its VALID cell scorer."""

    name: str
    train: CandidateSource
    valid: CandidateSource
    cells: _CellScorer


@dataclass(frozen=True)
class _CandidateSet:
    """One candidate set's labelled TRAIN rows and VALID features at one K (each aspect's VALID rows are
    labelled when its cell is fitted: the whole set's labelled VALID rows were one more copy held beside)."""

    k: int
    candidates: str
    train_labelled: pd.DataFrame
    valid_features: pd.DataFrame


@dataclass(frozen=True)
class RecipeCandidates:
    """The candidates the grid built for the recipe's LightGBM cells, keyed ``(K, candidate set)``:
    ``labelled`` the TRAIN source's labelled candidates (``frozen_recipe.fit_rerankers``' ``labelled``)
    and ``features`` the VALID source's (``frozen_recipe.apply_recipe``'s ``features``), so the recipe's
    rerankers are fitted and VALID scored without building them again."""

    labelled: Mapping[tuple[int, str], pd.DataFrame] = field(default_factory=dict)
    features: Mapping[tuple[int, str], pd.DataFrame] = field(default_factory=dict)


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
    frame, recipe, _ = select_recipe_candidates(grid, train_sets=train_sets, valid_sets=valid_sets, scorer=scorer,
                                                window=window, ontology=ontology, aspects=aspects)
    return frame, recipe


def select_recipe_candidates(grid: SelectionGrid | Mapping[str, Any], *, window: Any = None,
                             **inputs: Any) -> tuple[pd.DataFrame, dict[str, Any], RecipeCandidates]:
    """:func:`select_recipe`'s grid frame and recipe, and the candidates the grid built for the recipe's
    LightGBM cells (of its embedder's ``train_sets`` and ``valid_sets`` sources); ``inputs``:
    :func:`select_recipe`'s ``train_sets``, ``valid_sets``, ``scorer``, ``ontology`` and ``aspects``."""
    run = _selection(grid, **inputs)
    train_sets, valid_sets = inputs["train_sets"], inputs["valid_sets"]
    scores = _score_grid(run, train_sets, valid_sets)
    frame = pd.DataFrame(scores.rows)
    frame["objective"] = _objectives(frame)
    recipe = _choose(frame, scores, run, window)
    chosen = _recipe_candidates(recipe, scores)
    scores.candidate_sets.clear()
    chosen_cells = {_Pick.of_choice(c, None, 0.0).kept(recipe["embedder"], a) for a, c in recipe["aspects"].items()}
    scores.kept = {key: preds for key, preds in scores.kept.items() if key in chosen_cells}  # only they are blended
    blends = _blend_prior(recipe, scores, run, _valid_prior(valid_sets[recipe["embedder"]]))
    scores.kept.clear()
    if blends:
        frame = pd.concat([frame, pd.DataFrame(blends)], ignore_index=True)
        frame["objective"] = _objectives(frame)
    return _mark_selected(frame, recipe), recipe, chosen


def _recipe_candidates(recipe: Mapping[str, Any], scores: _GridScores) -> RecipeCandidates:
    """The grid's candidate sets of the recipe's LightGBM cells (each holding the rows of the aspects it serves)."""
    aspects: dict[tuple[int, str], set[str]] = {}
    for aspect, choice in recipe["aspects"].items():
        if choice["variant"] == "lgbm":
            aspects.setdefault((int(choice["k"]), choice.get("candidates") or "knn"), set()).add(aspect)
    labelled, features = {}, {}
    for key, served in aspects.items():
        held = scores.candidate_sets.get((recipe["embedder"],) + key)
        if held is not None and served <= held[0]:
            labelled[key], features[key] = held[1:]
    return RecipeCandidates(labelled, features)


def _selection(grid: SelectionGrid | Mapping[str, Any], train_sets: Mapping[str, CandidateSource],
               valid_sets: Mapping[str, CandidateSource], scorer: Scorer | None = None, ontology: Any = None,
               aspects: Sequence[str] = ASPECTS) -> _Selection:
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
        preds, first_row = knn[knn["aspect"] == aspect], len(scores.rows)
        for row in embedder.cells.score(cell, aspect, preds):
            scores.rows.append({"embedder": embedder.name, "k": k, "variant": "none", "candidates": "knn",
                                "features": "", "params_id": -1, "params": "", "prior_weight": 0.0,
                                "aspect": aspect, "best_iteration": -1, **row})
        _keep_if_best(scores, cell + (aspect,), preds, scores.rows[first_row:])


def _score_lgbm(run: _Selection, embedder: _EmbedderCells, k: int, scores: _GridScores, fits: Progress) -> None:
    """Every LightGBM cell at ``k``: each candidate set is cut out of the union of all the sets' sources,
    built once per split; a set whose inputs a source lacks gets ``missing_*`` rows."""
    spec, built = run.spec, {}
    union = sorted({s for c in spec.candidate_sets for s in parse_sources(c)}, key=SOURCES.index)
    for i, cand in enumerate(spec.candidate_sets):
        lacking = missing_inputs(cand, embedder.train, embedder.valid)
        if lacking:
            scores.rows.extend(_missing_rows(run, embedder, k, cand, lacking))
            continue
        if not built:
            built["train"] = _labelled_train_sets(run, embedder, k, union)
            built["valid"] = recipe_features(embedder.valid, k, union)
            release_unused_memory()  # what building them freed
        valid_features = restrict_sources(built["valid"], cand)
        candidate_set = _CandidateSet(k, cand, built["train"].pop(i), valid_features)
        if cand == spec.candidate_sets[-1]:
            built.clear()  # the union's features are not read again: each goes once restricted
        first_row = len(scores.rows)
        for fset in spec.feature_sets:
            for pid in range(len(spec.lgbm_params)):
                _score_lgbm_cell(run, embedder, candidate_set, (fset, pid), scores, fits)
        _hold_if_best(scores, (embedder.name, k, cand), (candidate_set.train_labelled, valid_features),
                      scores.rows[first_row:])
        del candidate_set, valid_features  # freed now (unless held as a best), not beside the next set's
        release_unused_memory()


def _labelled_train_sets(run: _Selection, embedder: _EmbedderCells, k: int, union: Sequence[str]) -> dict:
    """Each offered candidate set's labelled TRAIN rows at ``k`` by its place in the grid, all cut from the union of
    their sources at once: the union's rows outside the growth targets are not held while the sets' cells are fitted."""
    train_union = recipe_features(embedder.train, k, union)
    return {i: _labelled(embedder.train, restrict_sources(train_union, c))
            for i, c in enumerate(run.spec.candidate_sets) if not missing_inputs(c, embedder.train, embedder.valid)}


def _hold_if_best(scores: _GridScores, key: tuple, candidates: tuple[pd.DataFrame, pd.DataFrame],
                  rows: list[dict[str, Any]]) -> None:
    """Hold one candidate set's ``candidates`` while one of its LightGBM cells (``rows``) is the best so
    far of its embedder in an aspect, and let go of those no aspect's best is in: the sets are scored in
    ``_best_cell``'s tie order (K, then the grid's candidate sets), so a later set takes an aspect only
    with a higher objective, and the recipe's LightGBM cells are among those held at the end (at most one
    set per aspect held, not the whole grid's)."""
    if not rows:
        return
    cells = pd.DataFrame(rows)
    cells["objective"] = _objectives(cells)
    for aspect, objective in cells.groupby("aspect")["objective"].max().items():
        best = scores.best_lgbm.get((key[0], aspect))
        if np.isfinite(objective) and (best is None or objective > best[0]):
            scores.best_lgbm[(key[0], aspect)] = (float(objective), key)
    served: dict[tuple, set[str]] = {}  # held key -> the aspects whose best cell is in it
    for (_, aspect), (_, best_key) in scores.best_lgbm.items():
        served.setdefault(best_key, set()).add(aspect)
    if key in served:
        scores.candidate_sets[key] = (frozenset(cells["aspect"]), *candidates)  # every aspect's rows
    for held_key, (aspects, labelled, features) in list(scores.candidate_sets.items()):
        if held_key not in served:
            del scores.candidate_sets[held_key]
        elif served[held_key] != aspects:  # only the rows of the aspects it still serves: a copy of fewer rows
            kept = [frame[frame["aspect"].isin(served[held_key]).to_numpy()] for frame in (labelled, features)]
            scores.candidate_sets[held_key] = (frozenset(served[held_key]), *kept)


def _keep_if_best(scores: _GridScores, kept: tuple, predictions: pd.DataFrame, rows: list[dict[str, Any]]) -> None:
    """Keep a cell's VALID ``predictions`` (``kept``: its key in ``_GridScores.kept``) while it is the best so far
    of its embedder, aspect and variant, and let go of the one it beats: cells are scored in ``_best_cell``'s
    tie order, so only a higher objective takes over, and the cells ``_choose`` picks are among those kept."""
    objective = float(_objectives(pd.DataFrame(rows))[0]) if rows else math.nan
    slot = (kept[0], kept[-1], kept[2])
    best = scores.best_kept.get(slot)
    if not np.isfinite(objective) or (best is not None and objective <= best[0]):
        return
    if best is not None:
        del scores.kept[best[1]]
    scores.best_kept[slot] = (objective, kept)
    scores.kept[kept] = predictions


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
    train_lab, valid_feat = candidate_set.train_labelled, candidate_set.valid_features
    for aspect in run.aspects:
        fits.advance()  # fits started
        meta = {"embedder": embedder.name, "k": candidate_set.k, "variant": "lgbm",
                "candidates": candidate_set.candidates, "features": fset, "params_id": pid,
                "params": json.dumps(_jsonable(params), sort_keys=True), "prior_weight": 0.0, "aspect": aspect}
        try:
            model = train_reranker(train_lab[train_lab["aspect"] == aspect], params,
                                   valid=_labelled(embedder.valid, valid_feat[valid_feat["aspect"] == aspect]),
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
        first_row = len(scores.rows)
        for row in embedder.cells.score(cell, aspect, preds):
            scores.rows.append({**meta, "best_iteration": model.best_iteration, **row})
        _keep_if_best(scores, cell + (aspect,), preds, scores.rows[first_row:])


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

    def kept(self, name: str, aspect: str) -> tuple:  # the key of its VALID predictions in ``_GridScores.kept``
        return self.cell(name) + (aspect,)


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
        preds = scores.kept.get(pick.kept(name, aspect))
        if preds is None or choice.get("valid_objective") is None or not weights:
            continue  # no VALID target in this aspect: nothing to blend on
        aligned = PriorAligned.of(preds, prior[prior["aspect"] == aspect])  # joined once, blended per weight
        best_w, best_objective = 0.0, float(choice["valid_objective"])
        for w in weights:
            scored = cells.score(pick.cell(name)[:-1] + (w,), aspect, aligned.blend(w))
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
