"""Growth between releases as the window assets need it: the Python growth of two releases'
annotations, LAFA's growth (terms of interest), and the SQL warehouse's evaluation sets read back
as a ``Growth`` in ``annotation_growth``'s row order, to compare with the Python growth.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any, Iterable, Mapping

import pandas as pd

from tempo_assets.core.evaluation.benchmark import lafa_terms_of_interest, protein_binding_only_targets
from tempo_assets.core.labels.growth import Growth, align_terms, annotation_growth
from tempo_assets.core.base.vocabulary import MODES


def sequence_map(frame: pd.DataFrame, restrict: Iterable[str] | None = None) -> dict[str, str]:
    """``{protein: sequence sha256}`` of a stored ``sequences`` frame (optionally restricted)."""
    mapping = dict(zip(frame["protein"], frame["sequence_sha256"]))
    if restrict is not None:
        keep = set(restrict)
        mapping = {p: h for p, h in mapping.items() if p in keep}
    return mapping


def growth_between(old_annotations: Mapping[str, Any], new_annotations: Mapping[str, Any], new_ontology,
                   old_sequences: Mapping[str, str], new_sequences: Mapping[str, str] | None = None) -> Growth:
    """NK/LK/PK growth from an older release's experimental annotations to a newer one's.

    The older annotations are first expressed in the newer ontology (``align_terms``), so an edge
    added between releases is not counted as growth. Targets are restricted to proteins whose
    sequence is available at the older release (``old_sequences``: protein -> sequence sha256)
    and, where ``new_sequences`` knows the protein too, unchanged at the newer one (docs/PROTOCOL.md).
    """

    old_aligned, _ = align_terms(old_annotations["experimental"], new_ontology)
    return annotation_growth(old_aligned, new_annotations["experimental"], sequences=dict(old_sequences),
                             new_sequences=None if new_sequences is None else dict(new_sequences))


def lafa_growth(growth: Growth, ontology_old, ontology_new) -> tuple[Growth, frozenset[str], list[str]]:
    """Growth ``(old, new]`` under LAFA's conventions: (growth, terms of interest, dropped proteins).

    MF targets whose only new term is protein binding are dropped (targets and ground truth); the
    terms of interest are those live in both ontologies. VALID selection (``select_on_valid``),
    ``score_test`` and ``benchmark_targets`` all filter through here.
    """

    toi = lafa_terms_of_interest(ontology_old, ontology_new)
    dropped = sorted(protein_binding_only_targets(growth.ground_truth, growth.known, ontology_new))

    def keep(frame: pd.DataFrame) -> pd.DataFrame:
        return frame[~((frame["aspect"] == "MF") & frame["protein"].isin(dropped))].reset_index(drop=True)

    return replace(growth, targets=keep(growth.targets), ground_truth=keep(growth.ground_truth)), toi, dropped


_MODE_ORDER = pd.CategoricalDtype(list(MODES), ordered=True)
_ASPECT_ORDER = pd.CategoricalDtype(["BP", "MF", "CC"], ordered=True)


def _sorted(frame: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    order = frame.assign(**{k: frame[k].astype(_MODE_ORDER if k == "mode" else _ASPECT_ORDER)
                            for k in keys if k in ("mode", "aspect")})
    index = order.sort_values(keys, kind="mergesort").index
    return frame.loc[index].astype(str).reset_index(drop=True)


def warehouse_growth(frames, removed: pd.DataFrame) -> Growth:
    """A ``Growth`` from an evaluation set the warehouse returned
    (``core.storage.warehouse_models.GrowthFrames``).

    Rows are put in ``annotation_growth``'s order (targets by mode, aspect, protein; ground truth
    by mode, aspect, protein, term; known by aspect, protein, term) so a set equal to the Python
    growth is the same frame, row for row. ``removed`` (targets excluded by the sequence rule)
    comes from the Python growth: the warehouse keeps no exclusion reasons.
    """
    return Growth(targets=_sorted(frames.targets[["protein", "aspect", "mode"]], ["mode", "aspect", "protein"]),
                  ground_truth=_sorted(frames.ground_truth[["protein", "term", "aspect", "mode"]],
                                       ["mode", "aspect", "protein", "term"]),
                  known=_sorted(frames.known[["protein", "term", "aspect"]], ["aspect", "protein", "term"]),
                  removed=removed)


def growth_differences(sql: Growth, python: Growth) -> dict[str, int]:
    """Rows in one growth and not the other, per frame (all zero: the warehouse agrees with Python)."""
    out = {}
    for name in ("targets", "ground_truth", "known"):
        if getattr(sql, name).equals(getattr(python, name)):  # row for row (``warehouse_growth``'s order)
            out[f"{name}_only_sql"] = out[f"{name}_only_python"] = 0
            continue
        a = set(map(tuple, getattr(sql, name).astype(str).to_numpy()))
        b = set(map(tuple, getattr(python, name).astype(str).to_numpy()))
        out[f"{name}_only_sql"], out[f"{name}_only_python"] = len(a - b), len(b - a)
    return out
