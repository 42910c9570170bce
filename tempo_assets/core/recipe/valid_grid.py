"""The VALID grid and its building blocks: ``SelectionGrid`` (embedder x K x reranker variant x
candidate sources x prior weights), the recipe format and grid columns, the scorer a cell's
curves come from (``cafa_scorer``), the naive prior, ontology-consistent scores and the prior
blend, shared by selecting a recipe (``selection.py``) and applying it (``frozen_recipe.py``).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import pandas as pd

from tempo_assets.core.base.errors import TempoInputError
from tempo_assets.core.recipe.baselines import naive_term_scores
from tempo_assets.core.recipe.candidates import CandidateSource, feature_set, parse_sources
from tempo_assets.core.base.vocabulary import ASPECTS
from tempo_assets.core.evaluation.cells import evaluation_cells
from tempo_assets.core.evaluation.scoring import cell_curve, curve_best
from tempo_assets.core.recipe.reranker import label_candidates


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
    # candidate sets (``core.recipe.candidates.parse_sources``: "knn+diamond+goa+prior") and feature sets
    # (``core.recipe.candidates.FEATURE_SETS``) every LightGBM setting is tried with
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
    weight = float(weight)
    if weight == 0.0:
        return scores[list(_BLEND_KEYS) + ["score"]].reset_index(drop=True)
    return PriorAligned.of(scores, prior).blend(weight)


_BLEND_KEYS = ("protein", "term", "aspect")


@dataclass(frozen=True)
class PriorAligned:
    """``scores`` and ``prior`` over the union of their (protein, term, aspect) pairs, 0 where one lacks
    the pair: joined once, blended at every weight (``blend_with_prior``'s rule)."""

    keys: pd.DataFrame
    score: np.ndarray
    prior: np.ndarray

    @classmethod
    def of(cls, scores: pd.DataFrame, prior: pd.DataFrame) -> "PriorAligned":
        keys = list(_BLEND_KEYS)
        both = scores[keys + ["score"]].merge(prior[keys + ["score"]].rename(columns={"score": "_prior"}),
                                              on=keys, how="outer")
        return cls(both[keys], both["score"].fillna(0.0).to_numpy(dtype=np.float64),
                   both["_prior"].fillna(0.0).to_numpy(dtype=np.float64))

    def blend(self, weight: float) -> pd.DataFrame:
        """The pairs scoring above 0 at ``(1 - weight) * score + weight * prior`` (``weight`` > 0)."""
        weight = float(weight)
        out = self.keys.assign(score=np.clip((1.0 - weight) * self.score + weight * self.prior, 0.0, 1.0))
        return out[out["score"] > 0].reset_index(drop=True)


def _objectives(frame: pd.DataFrame) -> np.ndarray:
    """Each grid row's cell objective (``selection``'s rule 1): the mean over its modes scored ``ok`` of Fmax."""
    keys = list(CELL_KEYS) + ["aspect"]
    ok = frame["status"] == "ok"
    means = frame[ok].groupby(keys)["fmax"].mean().rename("_objective")
    return frame[keys].join(means, on=keys)["_objective"].to_numpy(dtype=np.float64)


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
    """VALID cells of one candidate source (``core.evaluation.cells.evaluation_cells``), scored per mode for one aspect."""

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
