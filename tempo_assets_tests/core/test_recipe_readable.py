"""The recipe path reads in steps (issue 21): no function of its modules over 60 lines or 7 parameters,
and its candidate source is data, not an object whose methods call back into other modules."""
from __future__ import annotations

import ast
import dataclasses
import inspect
from pathlib import Path

from tempo_assets.core.inputs import embedders, embeddings, precomputed_embeddings
from tempo_assets.core.neighbours import blast, homology, knn
from tempo_assets.core.pipeline import corpus_neighbours, recipe_predictions, workflow
from tempo_assets.core.recipe import baselines, candidates, features, frozen_recipe, reranker, selection, valid_grid
from tempo_assets.core.recipe.candidates import CandidateSource

RECIPE_MODULES = (selection, valid_grid, frozen_recipe, candidates, features, reranker, baselines, workflow,
                  corpus_neighbours, recipe_predictions, homology, blast, embeddings, embedders,
                  precomputed_embeddings, knn)
MAX_LINES, MAX_PARAMETERS = 60, 7


def too_long_or_wide(path: Path) -> list[str]:
    """``file:function lines=.. params=..`` of every function of ``path`` over the limits (self/cls not counted)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        a = node.args
        params = len(a.posonlyargs) + len(a.args) + len(a.kwonlyargs) + bool(a.vararg) + bool(a.kwarg)
        params -= bool(a.args and a.args[0].arg in ("self", "cls"))
        lines = node.end_lineno - node.lineno + 1
        if lines > MAX_LINES or params > MAX_PARAMETERS:
            found.append(f"{path.name}:{node.name} lines={lines} params={params}")
    return found


def test_no_recipe_function_is_over_60_lines_or_7_parameters():
    offenders = [row for module in RECIPE_MODULES for row in too_long_or_wide(Path(inspect.getfile(module)))]
    assert offenders == []


def test_the_candidate_source_is_data_without_methods():
    own = [name for name, value in vars(CandidateSource).items()
           if callable(value) and not name.startswith("__")]
    assert dataclasses.is_dataclass(CandidateSource) and own == []
    assert selection.CandidateSource is CandidateSource  # stored artefacts and importers still find it
