"""What assets exchange: frozen dataclasses, each stored in open formats by ``core/storage/artefacts.py``.

Frames go to parquet, matrices to ``.npy``/sparse ``.npz`` (never pickled), small values to JSON.
Fields read by name (``value.experimental``); ``value["experimental"]`` also works, so code written
against the former dict values keeps reading them.
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np
import pandas as pd

from tempo_assets.core.storage.type_registry import ModelText, register_codec, register_type
from tempo_assets.core.labels.growth import Growth
from tempo_assets.core.labels.ia import IaCounts
from tempo_assets.core.inputs.go_graph import Ontology, Term
from tempo_assets.core.recipe.selection import CandidateSource

__all__ = [
    "Benchmark", "BenchmarkCatalog", "Embeddings", "FittedRerankers", "FrozenRecipe", "KnnCorpus", "ModelText",
    "ReleaseAnnotations", "Scores",
    "EvaluationSet", "ValidSelection",
]


class FieldAccess:
    """``value[name]`` and ``value.get(name)`` on a dataclass (the former dict values' interface)."""

    def __getitem__(self, name: str) -> Any:
        if name not in self.keys():
            raise KeyError(name)
        return getattr(self, name)

    def get(self, name: str, default: Any = None) -> Any:
        return getattr(self, name) if name in self.keys() else default

    def keys(self) -> list[str]:
        return [f.name for f in fields(self)]

    def __contains__(self, name: str) -> bool:
        return name in self.keys()


@register_type
@dataclass(frozen=True, eq=False)
class ReleaseAnnotations(FieldAccess):
    """One release's experimental and non-experimental annotations, cleaned and propagated."""

    experimental: pd.DataFrame
    non_experimental: pd.DataFrame
    experimental_cleaned: pd.DataFrame
    non_experimental_cleaned: pd.DataFrame
    report: dict


@register_type
@dataclass(frozen=True, eq=False)
class Embeddings(FieldAccess):
    """One vector per protein (``matrix`` float32, shape (len(ids), dim)) and the embedder's id."""

    ids: list
    matrix: np.ndarray
    embedder_id: str


@register_type
@dataclass(frozen=True, eq=False)
class KnnCorpus(FieldAccess):
    """Proteins with an embedding and an experimental term at a cutoff, and those annotations."""

    ids: list
    matrix: np.ndarray
    annotations: pd.DataFrame
    embedder_id: str


@register_type
@dataclass(frozen=True, eq=False)
class FittedRerankers(FieldAccess):
    """The recipe's rerankers of one window, fitted once on TRAIN: LightGBM's model text per aspect (stored as
    ``.txt`` parts), the ``window`` and the ``reranker_labels`` release (``Window.recipe_labels``) fitted on."""

    models: dict  # aspect -> ModelText
    window: str
    labels_release: str


@register_type
@dataclass(frozen=True, eq=False)
class ValidSelection(FieldAccess):
    """The VALID grid, the recipe it chose, VALID counts, the methods' VALID summary and the chosen
    recipe's rerankers (fitted on TRAIN; ``None`` in a selection stored before they were kept)."""

    grid: pd.DataFrame
    recipe: dict
    valid_counts: pd.DataFrame
    valid_summary: pd.DataFrame
    rerankers: FittedRerankers | None = None


@register_type
@dataclass(frozen=True, eq=False)
class FrozenRecipe(FieldAccess):
    """The recipe frozen on VALID, its content hash, the window it was chosen on and its rerankers, frozen with
    it before TEST (``None`` in a recipe frozen before they were kept: its readers refit them)."""

    recipe: dict
    recipe_hash: str
    window: str
    rerankers: FittedRerankers | None = None


@register_type
@dataclass(frozen=True, eq=False)
class EvaluationSet(FieldAccess):
    """A window's VALID (t-1, t0] or TEST (t0, t1] growth as the warehouse's ``evaluation_sets`` holds it."""

    growth: Growth
    counts: pd.DataFrame
    window_role: str


@register_type
@dataclass(frozen=True, eq=False)
class Scores(FieldAccess):
    """One row per (method, mode, aspect) and the threshold curves behind them; for ``test_score`` also the
    frozen recipe's predictions at t0 on every TEST growth target (``protein, term, aspect, score``), which
    ``benchmark`` reads instead of applying the recipe again (None: a score stored before they were kept)."""

    summary: pd.DataFrame
    curves: pd.DataFrame
    counts: pd.DataFrame
    excluded_by_sequence: int = 0
    recipe_predictions: pd.DataFrame | None = None


@register_type
@dataclass(frozen=True, eq=False)
class Benchmark(FieldAccess):
    """Every method on one window's TEST targets: summary, paired differences, decay, curves."""

    summary: pd.DataFrame
    paired: pd.DataFrame
    decay: pd.DataFrame
    curves: pd.DataFrame
    counts: pd.DataFrame
    derived_releases: list = field(default_factory=list)
    # every table above has a ``profile`` column with these values (core.evaluation.scoring.PROFILES)
    profiles: list = field(default_factory=lambda: ["lafa", "cafaeval"])
    # the lafa profile's MF targets dropped because their only new term is protein binding
    dropped_protein_binding: list = field(default_factory=list)
    # registered methods' status on this window (core.methods.eligibility.ELIGIBILITY_COLUMNS)
    methods: pd.DataFrame = field(default_factory=pd.DataFrame)
    # per (profile, method, mode, aspect): the VALID threshold read on TEST and the data it came from
    valid_taus: pd.DataFrame = field(default_factory=pd.DataFrame)
    # per TEST (target, aspect, mode): max identity to a t0 corpus protein annotated in the aspect
    identity: pd.DataFrame = field(default_factory=pd.DataFrame)
    # per (profile, method, mode, aspect, identity_stratum): n_targets and F at the VALID threshold
    strata: pd.DataFrame = field(default_factory=pd.DataFrame)
    # per TEST target protein: its sequence cluster (core.neighbours.homology.homology_clusters)
    clusters: pd.DataFrame = field(default_factory=pd.DataFrame)
    # clustering thresholds, n_clusters, n_proteins, largest cluster
    homology: dict = field(default_factory=dict)
    # bootstrap replicates behind every interval and p_value (a p_value 0 reads "< 1/n_boot")
    n_boot: int = 0
    # benchmarks stored before both profiles were scored held one profile and this flag; kept so
    # they still open (they are stale and rebuilt); None on every benchmark written since
    lafa: bool | None = None


@register_type
@dataclass(frozen=True, eq=False)
class BenchmarkCatalog(FieldAccess):
    """Status of every window, the results over stored benchmarks and their decay rows."""

    catalog: pd.DataFrame
    results: pd.DataFrame
    decay: pd.DataFrame
    # each registered method's status on every window (core.methods.eligibility.method_catalog)
    methods: pd.DataFrame = field(default_factory=pd.DataFrame)


for _cls in (CandidateSource, Growth, IaCounts):
    register_type(_cls)


TERM_LISTS = ("alt_ids", "is_a", "part_of", "replaced_by", "consider")


def _ontology_fields(ontology: Ontology) -> dict[str, Any]:
    terms = list(ontology.terms.values())
    table = pd.DataFrame({
        "id": [t.id for t in terms], "name": [t.name for t in terms],
        "namespace": [t.namespace for t in terms], "is_obsolete": [bool(t.is_obsolete) for t in terms],
        **{name: [list(getattr(t, name)) for t in terms] for name in TERM_LISTS},
        "relation": [[r for r, _ in t.other_relations] for t in terms],
        "relation_target": [[x for _, x in t.other_relations] for t in terms],
    })
    # no path: the OBO's location is not part of its content (the sidecar's ``sources`` name the
    # file by its path inside the archive), so a moved archive stores the same bytes
    return {"terms": table, "header": dict(ontology.header), "ignored_references": int(ontology.ignored_references)}


def _ontology_from_fields(values: dict[str, Any]) -> Ontology:
    table = values["terms"]
    # each column read as Python values once (what iterating the rows gives, without a row per term); a
    # list column's cells are arrays, each turned into a tuple through its ``tolist`` (iterating an array
    # element by element took most of the decode of a full GO)
    columns = {name: table[name].tolist() for name in ("id", "name", "namespace", "is_obsolete")}
    lists = {name: [tuple(cell.tolist()) for cell in table[name]]
             for name in (*TERM_LISTS, "relation", "relation_target")}
    terms = {}
    for i, term_id in enumerate(columns["id"]):
        terms[term_id] = Term(
            id=term_id, name=columns["name"][i], namespace=columns["namespace"][i],
            is_obsolete=bool(columns["is_obsolete"][i]), **{name: lists[name][i] for name in TERM_LISTS},
            other_relations=tuple(zip(lists["relation"][i], lists["relation_target"][i])))
    ontology = Ontology(terms, header=values["header"], path=values.get("path"))  # stored before: an absolute path
    ontology.ignored_references = int(values["ignored_references"])
    return ontology


register_codec(Ontology, _ontology_fields, _ontology_from_fields)
