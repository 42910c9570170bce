"""The k-NN corpus and its neighbours: term depths, the corpus's index, the query rows of an
embedding, the neighbours of proteins, and the DIAMOND hits the recipe's homology source reads.
"""
from __future__ import annotations

from typing import Any, Iterable, Mapping, Sequence

import pandas as pd

from tempo_assets.core.base.liveness import owned_temporary_folder
from tempo_assets.core.neighbours.blast import homology_hits
from tempo_assets.core.recipe.candidates import HIT_TOP
from tempo_assets.core.neighbours.knn import KnnIndex


def term_depths(ontology, terms: Iterable[str]) -> pd.Series:
    """Depth of each term in ``ontology`` (a feature of candidates)."""
    terms = sorted(set(terms))
    return pd.Series([ontology.depth(t) if t in ontology else 0 for t in terms], index=terms, dtype=float)


def corpus_index(corpus: Mapping[str, Any]):
    """The faiss index of a stored ``knn_corpus`` value (rebuilt: an exact flat index is cheap)."""

    return KnnIndex.build(corpus["ids"], corpus["matrix"])


def query_rows(embedded: Mapping[str, Any], proteins: Iterable[str]):
    """``(ids, matrix)`` of the ``proteins`` present in an ``embeddings`` value, in sorted order."""
    position = {p: i for i, p in enumerate(embedded["ids"])}
    ids = sorted(p for p in set(proteins) if p in position)
    return ids, embedded["matrix"][[position[p] for p in ids]]


def neighbours_of(corpus: Mapping[str, Any], embedded: Mapping[str, Any], proteins: Iterable[str], k: int):
    """Top-``k`` corpus neighbours (self excluded) of ``proteins`` embedded in ``embedded``."""
    ids, matrix = query_rows(embedded, proteins)
    return corpus_index(corpus).search(ids, matrix, k, exclude_self=True)


HOMOLOGY_THREADS = 2  # DIAMOND threads of the recipe's homology source (fixed: equal inputs, equal hits)


def recipe_hits(proteins: Iterable[str], query_sequences: Mapping[str, str], corpus: Mapping[str, Any],
                corpus_sequences: pd.DataFrame, groups: Sequence[Iterable[str]] | None = None) -> pd.DataFrame:
    """DIAMOND hits (``blast.homology_hits``) of ``proteins`` in the sequences of ``corpus``' proteins.

    ``groups`` (protein sets covering ``proteins``) are searched one DIAMOND run each, a protein in
    the first group holding it (DIAMOND picks its algorithm by the number of queries, see
    :func:`every_method`); without them all proteins are one run.
    """

    in_corpus = set(corpus["ids"])
    subjects = {p: q for p, q in zip(corpus_sequences["protein"], corpus_sequences["sequence"]) if p in in_corpus}
    wanted = [p for p in dict.fromkeys(map(str, proteins)) if p in query_sequences]
    seen: set[str] = set()
    parts = []
    for group in (groups or [wanted]):
        chosen = [p for p in dict.fromkeys(map(str, group)) if p not in seen and p in query_sequences]
        chosen = [p for p in chosen if p in set(wanted)]
        seen.update(chosen)
        if chosen or not parts:
            with owned_temporary_folder("tempo_homology_") as workdir:
                parts.append(homology_hits({p: query_sequences[p] for p in chosen}, subjects, workdir,
                                           threads=HOMOLOGY_THREADS, top=HIT_TOP))
    return parts[0] if len(parts) == 1 else pd.concat(parts, ignore_index=True)
