"""The evaluator's ontology: cafaeval's OBO reading rules, namespaces, IA weights, the threshold grid.

Part of the evaluator package (see ``tempo_assets/core/evaluation/__init__.py``)."""

from __future__ import annotations

import hashlib
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from tempo_assets.core.base.arrays import concat_ranges as _ranges
from tempo_assets.core.base.errors import TempoInputError
from tempo_assets.core.base.io import open_binary, open_text

logger = logging.getLogger(__name__)

NAMESPACE_ALIASES = {
    "BP": "biological_process", "MF": "molecular_function", "CC": "cellular_component",
    "P": "biological_process", "F": "molecular_function", "C": "cellular_component",
}
BASE_COLUMNS = ["n", "tp", "fp", "fn", "pr", "rc"]
FRAME_COLUMNS = ["n", "tp", "fp", "fn", "pr", "rc", "ns", "tau", "cov", "mi", "ru", "f", "s",
                 "pr_micro", "rc_micro", "f_micro"]
BEST_METRICS = [("f", "max"), ("f_w", "max"), ("s", "min"), ("f_micro", "max"),
                ("f_micro_w", "max")]


class EvaluationInputError(TempoInputError):
    """Bad evaluator input (OBO, ground truth, predictions, IA, toi, known)."""


def threshold_grid(th_step: float = 0.01) -> np.ndarray:
    """cafaeval's threshold grid, exactly ``numpy.arange(th_step, 1, th_step)``."""
    if not (0 < th_step < 1):
        raise EvaluationInputError(f"th_step must be in (0, 1), got {th_step!r}")
    return np.arange(th_step, 1, th_step)


# --------------------------------------------------------------------------------------------
# ontology (cafaeval's reading rules)


@dataclass
class _Namespace:
    """One namespace graph, indexed like cafaeval's ``Graph``."""

    name: str
    terms: list[str]
    index: dict[str, int]
    alt: dict[str, tuple[int, ...]]
    parent_ptr: np.ndarray  # (n_terms + 1,) CSR over children -> parents
    parent_idx: np.ndarray  # (n_edges,)
    level: np.ndarray  # (n_terms,) 0 for terms without children, else 1 + max(child level)
    has_parent: np.ndarray  # (n_terms,) bool
    ia: np.ndarray | None = None  # (n_terms,) float, cafaeval's cleaned IA
    toi_mask: np.ndarray = field(default=None)  # (n_terms,) bool
    toi_ia_mask: np.ndarray | None = None

    @property
    def n_terms(self) -> int:
        return len(self.terms)

    @cached_property
    def lookup(self) -> tuple[pd.Index, np.ndarray, pd.Index]:
        """(primary ids, their columns, alt ids): indexes that look many terms up at once."""
        return (pd.Index(list(self.index), dtype=object), np.fromiter(self.index.values(), dtype=np.int64,
                                                                        count=len(self.index)),
                pd.Index(list(self.alt), dtype=object))


# The only tags cafaeval reads, at the start of a line after leading whitespace (which its
# ``line.strip()`` drops); ``.`` stops at the newline, so one match is one line.
_OBO_TAG_LINE = re.compile(
    r"\n[^\S\n]*(id|alt_id|namespace|is_obsolete|is_a|relationship): (.*)")


# the last few OBO files parsed in this process, by the sha256 of their bytes: a window's run builds
# six evaluator ontologies from two files (the VALID set's, TEST's under both profiles, test_score's)
_PARSED_OBO: dict[bytes, dict[str, dict[str, dict]]] = {}
_PARSED_OBO_KEPT = 2  # a window reads two (t0, t1); each full GO parse holds about 25 MB


def _read_obo_cafaeval(path: str | Path) -> dict[str, dict[str, dict]]:
    """``namespace -> term -> {alt_id, rel}`` with cafaeval's line rules; the same bytes are parsed
    once per process (the dict is shared: callers never mutate it).

    cafaeval reads every line as ``tag: value`` (``line.strip()`` split on the first
    ``": "``) and ignores stanza headers. Instead of a Python loop over every line (most are
    ``name``, ``def``, ``synonym``, ``xref``), one regular-expression pass picks out the lines
    of the six tags it acts on, in file order; newlines are translated as text mode does.
    """
    with open_binary(path) as handle:
        data = handle.read()
    key = hashlib.sha256(data).digest()
    if key not in _PARSED_OBO:
        _PARSED_OBO[key] = _parse_obo_cafaeval(data.decode("utf-8", errors="replace"), path)
        while len(_PARSED_OBO) > _PARSED_OBO_KEPT:
            del _PARSED_OBO[next(iter(_PARSED_OBO))]
    return _PARSED_OBO[key]


def _parse_obo_cafaeval(text: str, path: str | Path) -> dict[str, dict[str, dict]]:
    """:func:`_read_obo_cafaeval` of ``text``, the decoded bytes of ``path`` (named in errors)."""
    if not text:
        raise EvaluationInputError("empty OBO file", path)
    if "\r" in text:  # universal newlines, as cafaeval's open() sees the file
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    term_dict: dict[str, dict[str, dict]] = {}
    term_id = None
    namespace = None
    alt_ids: list[str] = []
    rels: list[str] = []
    obsolete = True
    for key, value in _OBO_TAG_LINE.findall("\n" + text):
        value = value.rstrip()  # the end of cafaeval's strip(); "id: " alone is no tag line
        if not value:
            continue
        if key == "id":
            if term_id is not None and obsolete is False and namespace is not None:
                term_dict.setdefault(namespace, {})[term_id] = {"alt_id": alt_ids, "rel": rels}
            term_id = value
            alt_ids, rels = [], []
            obsolete = False
            namespace = None
        elif key == "is_a":
            rels.append(value.split("!")[0].strip())
        elif key == "namespace":
            if value != "external":
                namespace = value
        elif key == "relationship":
            if value.startswith("part_of"):
                parts = value.split()
                if len(parts) > 1:
                    rels.append(parts[1].strip())
        elif key == "alt_id":
            alt_ids.append(value)
        else:  # is_obsolete, whatever its value
            obsolete = True
    if term_id is not None and obsolete is False and namespace is not None:
        term_dict.setdefault(namespace, {})[term_id] = {"alt_id": alt_ids, "rel": rels}
    if not term_dict:
        raise EvaluationInputError("no term with a namespace in this OBO file", path)
    return term_dict


def _build_namespace(name: str, terms: dict[str, dict], orphans: bool) -> _Namespace:
    ids = list(terms)
    index = {t: i for i, t in enumerate(ids)}
    alt_sets: dict[str, set[int]] = {}
    children_edges: list[tuple[int, int]] = []
    for term_id, info in terms.items():
        i = index[term_id]
        for alt in info["alt_id"]:
            alt_sets.setdefault(alt, set()).add(i)
        for parent in info["rel"]:
            j = index.get(parent)
            if j is not None:
                children_edges.append((i, j))
    n = len(ids)
    edges = np.array(sorted(set(children_edges)), dtype=np.int64).reshape(-1, 2)
    child, parent = edges[:, 0], edges[:, 1]
    parent_ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(child, minlength=n), out=parent_ptr[1:])
    parent_idx = parent[np.argsort(child, kind="stable")]
    # heights by Kahn's algorithm from the leaves (cafaeval's top_sort raises on a cycle)
    n_children = np.bincount(parent, minlength=n)
    level = np.zeros(n, dtype=np.int64)
    frontier = np.flatnonzero(n_children == 0)
    remaining = n_children.copy()
    visited = 0
    while frontier.size:
        visited += frontier.size
        starts, stops = parent_ptr[frontier], parent_ptr[frontier + 1]
        counts = stops - starts
        src = np.repeat(frontier, counts)
        dst = parent_idx[_ranges(starts, counts)]
        np.maximum.at(level, dst, level[src] + 1)
        np.subtract.at(remaining, dst, 1)
        touched = np.unique(dst)
        frontier = touched[remaining[touched] == 0]
    if visited != n:
        raise EvaluationInputError(f"namespace {name}: is_a/part_of graph has a cycle")
    has_parent = np.diff(parent_ptr) > 0
    toi_mask = np.ones(n, dtype=bool) if orphans else has_parent.copy()
    alt = {a: tuple(sorted(s)) for a, s in alt_sets.items()}
    return _Namespace(name, ids, index, alt, parent_ptr, parent_idx, level, has_parent,
                      toi_mask=toi_mask)



def read_ia(source: str | Path | Mapping | pd.Series) -> dict[str, float]:
    """IA weights from a ``term<whitespace>ia`` file (cafaeval's format) or a mapping."""
    if isinstance(source, pd.Series):
        return {str(k): float(v) for k, v in source.items()}
    if isinstance(source, Mapping):
        return {str(k): float(v) for k, v in source.items()}
    weights: dict[str, float] = {}
    with open_text(source) as handle:
        for lineno, raw in enumerate(handle, start=1):
            parts = raw.split()
            if len(parts) != 2:
                raise EvaluationInputError(
                    f"IA line must be 'term ia', got {len(parts)} fields", source, lineno)
            try:
                weights[parts[0]] = float(parts[1])
            except ValueError:
                raise EvaluationInputError(f"IA value is not a number: {parts[1]!r}",
                                           source, lineno) from None
    if not weights:
        raise EvaluationInputError("empty IA file", source)
    return weights


class EvalOntology:
    """GO graphs per namespace, read with cafaeval 1.3.0's rules (not ``core.inputs.ontology``'s).

    Attributes
    ----------
    namespaces : dict[str, _Namespace]
        In cafaeval's order (first kept term of each namespace in the file).
    """

    def __init__(self, namespaces: dict[str, _Namespace], path: str | Path | None = None):
        self.namespaces = namespaces
        self.path = path
        self.has_ia = any(ns.ia is not None for ns in namespaces.values())
        # terms of interest -> their masks per namespace (read-only): see predictions._toi_masks
        self.toi_masks: dict[frozenset, dict[str, np.ndarray]] = {}
        # namespace names -> {term or alt id: index among them} (cafaeval's ns_dict), built once
        self.routes: dict[tuple[str, ...], dict[str, int]] = {}
        # what the evaluator derives from this ontology and reuses (``metrics.SetupCache`` under
        # "setups"); its keys carry ``ia_version``, which set_ia bumps, so IA never goes stale there
        self.caches: dict[str, Any] = {}
        self.ia_version = 0

    @classmethod
    def from_obo(cls, path: str | Path, ia: str | Path | Mapping | pd.Series | None = None,
                 orphans: bool = True) -> "EvalOntology":
        """Read an OBO file (plain or gzipped) and optional IA weights (file or mapping)."""
        term_dict = _read_obo_cafaeval(path)
        namespaces = {name: _build_namespace(name, terms, orphans)
                      for name, terms in term_dict.items()}
        ontology = cls(namespaces, path)
        if ia is not None:
            ontology.set_ia(read_ia(ia))
        return ontology

    def set_ia(self, weights: Mapping[str, float]) -> None:
        """Attach IA weights like cafaeval's ``Graph.set_ia``."""
        missing = 0
        for ns in self.namespaces.values():
            values = np.zeros(ns.n_terms, dtype=float)
            for i, term in enumerate(ns.terms):
                value = weights.get(term)
                if value:  # cafaeval: a missing or 0 weight stays 0
                    values[i] = value
                else:
                    missing += 1
            np.nan_to_num(values, copy=False, nan=0, posinf=0, neginf=0)
            ns.ia = values
            ns.toi_ia_mask = values > 0
        self.has_ia = True
        self.ia_version += 1
        logger.debug("IA: %d terms without a weight (weigh 0)", missing)

    def term_namespace_first(self, term: str) -> tuple[str, tuple[int, ...]] | None:
        """cafaeval's ground-truth lookup: first namespace whose primaries, then alt ids, know it."""
        for name, ns in self.namespaces.items():
            i = ns.index.get(term)
            if i is not None:
                return name, (i,)
            alts = ns.alt.get(term)
            if alts is not None:
                return name, alts
        return None
