"""The benchmark's inputs: the targets of one profile (``TestTargets``), merged embeddings,
predictions restricted to proteins, the VALID thresholds of every method, the TEST homology of a
window (``WindowHomology``) and the marks on summary rows.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Iterable, Mapping

import numpy as np
import pandas as pd

from tempo_assets.core.storage.artefact_types import Embeddings
from tempo_assets.core.base.errors import TempoInputError
from tempo_assets.core.evaluation.scoring import ScoringOptions, score_methods, valid_tau_table
from tempo_assets.core.recipe.selection import recipe_profile
from tempo_assets.core.pipeline.corpus_neighbours import query_rows


@dataclass(frozen=True)
class TestTargets:
    """The cells a benchmark scores under one profile: growth, LAFA's filters when ``lafa``, the evaluator."""

    targets: pd.DataFrame
    ground_truth: pd.DataFrame
    known: pd.DataFrame
    counts: pd.DataFrame
    eval_ontology: Any
    toi: Any = None
    dropped: list = field(default_factory=list)
    lafa: bool = False

    def options(self, options: ScoringOptions) -> ScoringOptions:
        """``options`` under this profile (``lafa``: prop fill, no orphans)."""
        return replace(options, lafa=self.lafa)


def mark_rows(summary: pd.DataFrame, notes: Mapping[str, str], no_valid_tau: Iterable[str]) -> pd.DataFrame:
    """``note`` per method row (``notes[name]``, else empty); the VALID-threshold columns of the
    ``no_valid_tau`` methods (no predictions at t-1 to fix a threshold on VALID) emptied.
    Without registered methods the summary is returned as it is (no ``note`` column)."""
    if summary.empty or not notes:
        return summary
    summary = summary.copy()
    summary["note"] = summary["method"].map(dict(notes)).fillna("")
    missing = summary["method"].isin(set(no_valid_tau))
    headline = [c for c in summary.columns if c.startswith("valid_tau") or "_at_valid_tau" in c]
    summary.loc[missing, headline] = float("nan")
    return summary


def merge_embeddings(first: Embeddings, second: Embeddings, first_proteins: Iterable[str],
                     second_proteins: Iterable[str]) -> Embeddings:
    """The rows of ``first_proteins`` from ``first`` and the other ``second_proteins`` from ``second``.

    Lets one run of every method at ``t-1`` score TEST targets (embedded at ``t0``) and VALID
    targets (embedded at ``t-1``) at once; a protein in both keeps ``first``'s row (both growths
    exclude proteins whose sequence changed, so the rows embed the same sequence).
    """
    if first["embedder_id"] != second["embedder_id"]:
        raise TempoInputError(f"embeddings of two embedders ({first['embedder_id']}, {second['embedder_id']}) "
                              "cannot be merged")
    ids_a, rows_a = query_rows(first, first_proteins)
    ids_b, rows_b = query_rows(second, set(second_proteins) - set(ids_a))
    return Embeddings(ids=list(ids_a) + list(ids_b), matrix=np.concatenate([rows_a, rows_b]),
                      embedder_id=first["embedder_id"])


def restrict(predictions: Mapping[str, pd.DataFrame], proteins: Iterable[str]) -> dict[str, pd.DataFrame]:
    """Every method's predictions for ``proteins`` only."""
    keep = set(proteins)
    return {m: p[p["protein"].isin(keep)].reset_index(drop=True) for m, p in predictions.items()}


def valid_taus(valid: TestTargets, older: Mapping[str, pd.DataFrame], methods: Iterable[str],
               recipe: Mapping[str, Any], options: ScoringOptions, source: str) -> pd.DataFrame:
    """Every method's VALID threshold per (mode, aspect) under ``valid``'s profile (``core.evaluation.scoring.valid_tau_table``).

    ``older`` holds the methods trained at ``t-1`` (predictions of at least the VALID targets);
    each is scored on VALID under the profile (no bootstrap) and its threshold maximising F is
    kept. Under the profile the recipe was selected under (``assets.recipe.recipe_profile``) the
    recipe keeps the thresholds its frozen recipe fixed on VALID by the same rule (``tau_by_mode``,
    so ``test_score`` and the benchmark read the recipe at one threshold). Under the other profile
    the frozen thresholds were chosen under other conventions, so the same rule is applied to
    ``recipe@t-1`` on the VALID targets scored under that profile (VALID data only, as every other
    method). A method missing from ``older`` gets none (and a note).
    """

    names = list(methods)
    frozen = bool(recipe.get("aspects")) and recipe_profile(recipe) == valid.options(options).profile
    scored = {m: older[m] for m in names if m in older and not (m == "recipe" and frozen)}
    summary = pd.DataFrame()
    if scored:
        summary, _ = score_methods(valid.eval_ontology, valid.targets, valid.ground_truth, valid.known,
                                   restrict(scored, valid.targets["protein"]),
                                   replace(valid.options(options), n_boot=0), toi=valid.toi)
    table = valid_tau_table(summary, names, recipe if frozen else None, source)
    table.insert(0, "profile", valid.options(options).profile)
    return table


@dataclass(frozen=True)
class WindowHomology:
    """A window's TEST targets' sequence clusters and identity to the t0 corpus (``core.neighbours.homology``)."""

    clusters: pd.DataFrame  # protein, cluster, cluster_size
    identity: pd.DataFrame  # protein, aspect, mode, max_identity, nearest_train, identity_stratum
    info: dict
