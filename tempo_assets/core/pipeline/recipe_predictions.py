"""Predictions of the window's methods: the frozen recipe's (``method_predictions``, ``recipe_chunks``) and
the BLAST baseline's (``blast_predictions``).
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any, Iterable, Iterator, Mapping

import numpy as np
import pandas as pd

from tempo_assets.core.base.errors import TempoInputError
from tempo_assets.core.base.liveness import owned_temporary_folder
from tempo_assets.core.recipe.baselines import naive_term_scores
from tempo_assets.core.neighbours.blast import blast_term_scores, diamond_hits
from tempo_assets.core.recipe.candidates import CandidateSource
from tempo_assets.core.neighbours.knn import knn_term_scores
from tempo_assets.core.recipe.frozen_recipe import BuiltForRecipe, apply_recipe, fit_rerankers


def method_predictions(recipe: Mapping[str, Any], source: CandidateSource, train_source: CandidateSource,
                       targets: pd.DataFrame, k_plain: int, ontology=None,
                       built: BuiltForRecipe = BuiltForRecipe()) -> dict[str, pd.DataFrame]:
    """Predictions of the frozen recipe, plain KNN (``k_plain``) and the naive baseline.

    All three use the same neighbours and corpus of ``source``; ``train_source`` holds the
    labelled candidates the recipe's rerankers are refit on (unless ``built`` has them fitted);
    ``targets`` (``protein, aspect``) are the proteins the naive baseline scores; ``ontology`` (the
    candidate release's) makes the recipe's scores consistent with it (``apply_recipe``).
    """

    proteins = targets["protein"].unique()
    # a chunk of proteins at a time: the candidates' features follow the chunk, not every target's
    chunks = [] if built.features else list(recipe_chunks(recipe, source, train_source, proteins, ontology=ontology,
                                                          chunk=RECIPE_CHUNK_PROTEINS, rerankers=built.rerankers))
    if chunks:
        recipe_frame = pd.concat(chunks, ignore_index=True)
    else:  # the grid's candidates of every protein already built, or no target at all (an empty frame)
        recipe_frame = apply_recipe(recipe, source, train_source, proteins=proteins, ontology=ontology, built=built)
    return {"recipe": recipe_frame, **plain_predictions(source, targets, k_plain)}


def plain_predictions(source: CandidateSource, targets: pd.DataFrame, k_plain: int) -> dict[str, pd.DataFrame]:
    """Plain KNN (``k_plain`` of ``source``'s neighbours) and the naive baseline of ``targets``: they read only
    ``source``'s neighbours and corpus annotations."""
    return {
        "knn": knn_term_scores(source.neighbours, source.corpus_annotations, k=k_plain),
        "naive": naive_term_scores(source.corpus_annotations, targets[["protein", "aspect"]]),
    }


# proteins the recipe is applied to at a time (a CAFA submission, test_score's and benchmark's predictions)
RECIPE_CHUNK_PROTEINS = 2000


def recipe_chunks(recipe: Mapping[str, Any], source: CandidateSource, train_source: CandidateSource,
                  proteins: Iterable[str], ontology=None, chunk: int = RECIPE_CHUNK_PROTEINS,
                  rerankers: Mapping[str, Any] | None = None) -> Iterator[pd.DataFrame]:
    """The recipe's predictions for ``proteins`` in sorted order, ``chunk`` proteins at a time.

    The rerankers are ``rerankers`` (frozen ones) or fitted once on ``train_source``; each chunk's candidates are built from its
    own slice of ``source``'s neighbours, DIAMOND hits and non-experimental annotations, scored,
    made consistent and blended with the prior alone. Every one of those steps is per protein, so
    the chunks concatenate to ``apply_recipe`` over every protein at once (the submission's sha256
    on ``data/`` is the same either way) while memory follows the chunk, not the proteome.
    """

    if int(chunk) < 1:
        raise TempoInputError(f"chunk must be >= 1 protein, got {chunk!r}", path="recipe_chunks")
    ordered = sorted({str(p) for p in proteins})
    n_chunks = -(-len(ordered) // int(chunk))
    chunk_of = {p: i // int(chunk) for i, p in enumerate(ordered)}
    if rerankers is None:
        rerankers = fit_rerankers(recipe, train_source, source)

    def splitter(frame: pd.DataFrame | None, column: str):
        """``i -> frame's rows of chunk i`` in their order, the frame read once (not once per chunk)."""
        if frame is None:
            return lambda i: None
        codes = frame[column].astype(str).map(chunk_of).fillna(n_chunks).to_numpy(dtype=np.int64)
        order = np.argsort(codes, kind="stable")
        bounds = np.searchsorted(codes[order], np.arange(n_chunks + 1))
        return lambda i: frame.iloc[order[bounds[i]:bounds[i + 1]]].reset_index(drop=True)

    neighbours, hits = splitter(source.neighbours, "query"), splitter(source.hits, "query")
    nonexp = splitter(source.nonexp, "protein")
    for i in range(n_chunks):
        scored = replace(source, neighbours=neighbours(i), hits=hits(i), nonexp=nonexp(i))
        yield apply_recipe(recipe, scored, train_source, proteins=ordered[i * int(chunk):(i + 1) * int(chunk)],
                           ontology=ontology, built=BuiltForRecipe(rerankers=rerankers))


def blast_predictions(query: Mapping[str, str], corpus: Mapping[str, str], annotations: pd.DataFrame,
                      threads: int, sensitivity: str | None) -> pd.DataFrame:
    """The BLAST baseline: DIAMOND hits of ``query`` in ``corpus``, terms scored by max pident/100."""

    with owned_temporary_folder("tempo_blast_") as workdir:
        hits = diamond_hits(query, corpus, workdir, threads=threads, sensitivity=sensitivity or None)
    return blast_term_scores(hits, annotations)
