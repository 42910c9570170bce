"""Applying a frozen recipe at a new cutoff: ``fit_rerankers`` fits with the recipe's fixed
hyperparameters and ``n_estimators`` (no early stopping) on the labels it is given, and
``apply_recipe`` scores new candidates with them, blended with the prior at the recipe's weight.

Given the TRAIN labels it rebuilds the very rerankers VALID scored (LightGBM is deterministic
here), which is how the TEST score reads them at the thresholds VALID fixed
(``Window.recipe_labels``); a fresh-cutoff submission, which has no threshold, refits on its own
cutoff's labels.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Mapping, Sequence

import pandas as pd

from tempo_assets.core.recipe.candidates import CandidateSource, feature_set, recipe_features
from tempo_assets.core.recipe.features import prepare_neighbours
from tempo_assets.core.neighbours.knn import knn_term_scores
from tempo_assets.core.recipe.reranker import train_reranker
from tempo_assets.core.recipe.valid_grid import (
    RECIPE_FORMAT, SelectionInputError, _labelled, blend_with_prior, consistent, missing_inputs,
    prior_scores,
)


def fit_rerankers(recipe: Mapping[str, Any], train: CandidateSource,
                  scored: CandidateSource | None = None,
                  labelled: Mapping[tuple[int, str], pd.DataFrame] | None = None) -> dict[str, Any]:
    """Each LightGBM aspect's reranker of ``recipe``, fitted on ``train``'s labelled candidates with the
    recipe's hyperparameters and ``n_estimators`` (no early stopping); plain-KNN aspects have none.

    ``scored`` (the candidates to be scored, optional) is checked to offer the recipe's candidate
    sources too. ``labelled`` maps ``(K, candidate set)`` to ``train``'s labelled candidates already
    built (``selection.RecipeCandidates``); the others are built here."""
    _check_recipe(recipe)
    seed = int(recipe.get("seed", 0))
    labelled = dict(labelled or {})
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


@dataclass(frozen=True)
class BuiltForRecipe:
    """What the recipe's scoring is handed already built: ``rerankers`` (aspect -> the recipe's rerankers
    fitted on its TRAIN source, e.g. the frozen ones of ``core.pipeline.frozen_rerankers``; None: fitted
    by ``apply_recipe``) and ``features`` (``(K, candidate set)`` -> the scored source's candidates as the
    VALID grid built them, ``selection.RecipeCandidates``; None or a missing key: built by ``apply_recipe``)."""

    rerankers: Mapping[str, Any] | None = None
    features: Mapping[tuple[int, str], pd.DataFrame] | None = None


def apply_recipe(
    recipe: Mapping[str, Any],
    scored: CandidateSource,
    train: CandidateSource,
    *,
    proteins: Sequence[str] | None = None,
    ontology: Any = None,
    embedder: str | None = None,
    built: BuiltForRecipe = BuiltForRecipe(),
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
    embedder : str, optional
        When given, must equal the recipe's embedder.
    built : BuiltForRecipe, optional
        ``rerankers``: :func:`fit_rerankers` of this recipe, fitted once for scoring many protein
        chunks (default: fitted here on ``train``); ``features``: ``scored``'s candidates per
        (K, candidate set) already built (``selection.RecipeCandidates``; the others are built here).

    Returns
    -------
    DataFrame ``protein, term, aspect, score`` with scores in (0, 1], sorted by protein,
    aspect, term. ``tau`` is not applied: it stays in the recipe for reporting.
    """
    _check_recipe(recipe, embedder)
    rerankers = built.rerankers if built.rerankers is not None else fit_rerankers(recipe, train, scored)
    features = dict(built.features or {})  # candidates per (K, candidate set), shared by aspects
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
