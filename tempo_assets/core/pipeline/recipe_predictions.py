"""Predictions of the window's methods: the frozen recipe's (``method_predictions``) and the
BLAST baseline's (``blast_predictions``).
"""
from __future__ import annotations

import tempfile
from typing import Any, Mapping

import pandas as pd

from tempo_assets.core.recipe.baselines import naive_term_scores
from tempo_assets.core.neighbours.blast import blast_term_scores, diamond_hits
from tempo_assets.core.recipe.candidates import CandidateSource
from tempo_assets.core.neighbours.knn import knn_term_scores
from tempo_assets.core.recipe.frozen_recipe import BuiltForRecipe, apply_recipe


def method_predictions(recipe: Mapping[str, Any], source: CandidateSource, train_source: CandidateSource,
                       targets: pd.DataFrame, k_plain: int, ontology=None,
                       built: BuiltForRecipe = BuiltForRecipe()) -> dict[str, pd.DataFrame]:
    """Predictions of the frozen recipe, plain KNN (``k_plain``) and the naive baseline.

    All three use the same neighbours and corpus of ``source``; ``train_source`` holds the
    labelled candidates the recipe's rerankers are refit on (unless ``built`` has them fitted);
    ``targets`` (``protein, aspect``) are the proteins the naive baseline scores; ``ontology`` (the
    candidate release's) makes the recipe's scores consistent with it (``apply_recipe``).
    """

    return {
        "recipe": apply_recipe(recipe, source, train_source, proteins=targets["protein"].unique(), ontology=ontology,
                               built=built),
        **plain_predictions(source, targets, k_plain),
    }


def plain_predictions(source: CandidateSource, targets: pd.DataFrame, k_plain: int) -> dict[str, pd.DataFrame]:
    """Plain KNN (``k_plain`` of ``source``'s neighbours) and the naive baseline of ``targets``: they read only
    ``source``'s neighbours and corpus annotations."""
    return {
        "knn": knn_term_scores(source.neighbours, source.corpus_annotations, k=k_plain),
        "naive": naive_term_scores(source.corpus_annotations, targets[["protein", "aspect"]]),
    }


SUBMISSION_CHUNK_PROTEINS = 2000  # proteins scored at a time by a CAFA submission


def blast_predictions(query: Mapping[str, str], corpus: Mapping[str, str], annotations: pd.DataFrame,
                      threads: int, sensitivity: str | None) -> pd.DataFrame:
    """The BLAST baseline: DIAMOND hits of ``query`` in ``corpus``, terms scored by max pident/100."""

    with tempfile.TemporaryDirectory(prefix="tempo_blast_") as workdir:
        hits = diamond_hits(query, corpus, workdir, threads=threads, sensitivity=sensitivity or None)
    return blast_term_scores(hits, annotations)
