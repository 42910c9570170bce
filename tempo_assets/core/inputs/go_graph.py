"""The Gene Ontology as a graph: ``Ontology`` (terms, alt ids, is_a/part_of parents within a
namespace, ancestors, depth, propagation of annotations) and its ``Term``; ``parse_obo``
(``ontology.py``) builds it from an OBO file.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np
import pandas as pd

from tempo_assets.core.base.arrays import strings_at
from tempo_assets.core.base.errors import TempoInputError
from tempo_assets.core.base.vocabulary import ASPECT_TO_NAMESPACE, ASPECTS, NAMESPACE_TO_ASPECT
from tempo_assets.core.inputs.obo_header import OboFormatError, _header_date


class UnknownTermError(TempoInputError):
    """A GO id is not a term of this ontology (or not a primary, non-obsolete one)."""


@dataclass(frozen=True)
class Term:
    """One ``[Term]`` stanza.

    ``namespace`` is the stanza's ``namespace`` (or the header's ``default-namespace``);
    ``is_a``/``part_of`` hold every declared parent, before the same-namespace filter that
    :meth:`Ontology.parents` applies.
    """

    id: str
    name: str
    namespace: str | None
    is_obsolete: bool
    alt_ids: tuple[str, ...]
    is_a: tuple[str, ...]
    part_of: tuple[str, ...]
    other_relations: tuple[tuple[str, str], ...]
    replaced_by: tuple[str, ...]
    consider: tuple[str, ...]

    @property
    def aspect(self) -> str | None:
        return NAMESPACE_TO_ASPECT.get(self.namespace or "")


class Ontology:
    """A parsed GO release.

    Attributes
    ----------
    terms : dict[str, Term]
        Every ``[Term]`` stanza by id, obsolete terms included.
    alt_ids : dict[str, str]
        ``alt_id -> primary id``. When two stanzas claim one alt_id, a non-obsolete primary wins,
        then the first in file order.
    date : datetime.date or None
        From the header (see :func:`obo_file_date`).
    data_version : str or None
    path : pathlib.Path or None
    """

    def __init__(self, terms: dict[str, Term], header: dict[str, str] | None = None,
                 path: str | Path | None = None):
        self.terms = terms
        self.header = dict(header or {})
        self.path = Path(path) if path is not None else None
        self.data_version = self.header.get("data-version")
        self.date = _header_date(self.header)
        alt_ids: dict[str, str] = {}
        for term in terms.values():
            for alt in term.alt_ids:
                if alt in terms:
                    continue  # a primary id is never shadowed by an alt_id
                previous = alt_ids.get(alt)
                if previous is None or (terms[previous].is_obsolete and not term.is_obsolete):
                    alt_ids[alt] = term.id
        self.alt_ids = alt_ids
        self.ignored_references = 0  # references to non-term pseudo-roots ("is_a: all")
        self._ancestors: dict[str, frozenset[str]] = {}
        self._depth: dict[str, int] = {}
        self._parents: dict[str, tuple[str, ...]] = {}

    def __repr__(self) -> str:
        return f"Ontology({len(self.terms)} terms, data_version={self.data_version!r}, path={str(self.path)!r})"

    def __contains__(self, term: str) -> bool:
        return term in self.terms

    def resolve(self, term: str) -> str | None:
        """Primary id of ``term`` (mapping an alt_id), or None when obsolete or unknown."""
        found = self.terms.get(term)
        if found is None:
            primary = self.alt_ids.get(term)
            if primary is None:
                return None
            found = self.terms[primary]
        if found.is_obsolete:
            return None
        return found.id

    def _term(self, term: str) -> Term:
        try:
            return self.terms[term]
        except KeyError:
            raise UnknownTermError(f"{term} is not a term id of this ontology", self.path) from None

    def aspect(self, term: str) -> str | None:
        """``"BP"``, ``"MF"`` or ``"CC"`` for a term id (alt ids resolved); None if none."""
        found = self.terms.get(term)
        if found is None:
            primary = self.alt_ids.get(term)
            if primary is None:
                return None
            found = self.terms[primary]
        return found.aspect

    def parents(self, term: str) -> tuple[str, ...]:
        """Direct ``is_a`` and ``part_of`` parents in the term's own namespace (file order)."""
        cached = self._parents.get(term)
        if cached is not None:
            return cached
        found = self._term(term)
        seen: dict[str, None] = {}
        for parent in found.is_a + found.part_of:
            other = self.terms.get(parent)
            if other is not None and other.namespace == found.namespace and not other.is_obsolete:
                seen.setdefault(parent, None)
        # the ancestor and depth walks ask each term's parents more than once
        self._parents[term] = parents = tuple(seen)
        return parents

    def ancestors(self, term: str) -> frozenset[str]:
        """``term`` and every term reachable through :meth:`parents` (cached)."""
        cached = self._ancestors.get(term)
        if cached is not None:
            return cached
        self._term(term)
        # iterative post-order walk: no recursion limit, and a cycle is reported, not looped
        stack: list[tuple[str, bool]] = [(term, False)]
        on_path: set[str] = set()
        while stack:
            node, expanded = stack.pop()
            if node in self._ancestors:
                continue
            parents = self.parents(node)
            if expanded:
                on_path.discard(node)
                closure = {node}
                for parent in parents:
                    closure |= self._ancestors[parent]
                self._ancestors[node] = frozenset(closure)
                continue
            if node in on_path:
                raise OboFormatError(f"is_a/part_of cycle through {node}", self.path)
            on_path.add(node)
            stack.append((node, True))
            for parent in parents:
                if parent not in self._ancestors:
                    if parent in on_path:
                        raise OboFormatError(f"is_a/part_of cycle through {parent}", self.path)
                    stack.append((parent, False))
        return self._ancestors[term]

    def depth(self, term: str) -> int:
        """Length of the LONGEST :meth:`parents` path from ``term`` to a root (a root is 0)."""
        cached = self._depth.get(term)
        if cached is not None:
            return cached
        self.ancestors(term)  # raises on unknown ids and on cycles
        stack = [term]
        while stack:
            node = stack[-1]
            pending = [p for p in self.parents(node) if p not in self._depth]
            if pending:
                stack.extend(pending)
                continue
            stack.pop()
            if node not in self._depth:
                parents = self.parents(node)
                self._depth[node] = 1 + max((self._depth[p] for p in parents), default=-1)
        return self._depth[term]

    def namespace_terms(self, aspect: str) -> frozenset[str]:
        """Primary, non-obsolete term ids of one aspect (``"BP"``, ``"MF"``, ``"CC"``)."""
        if aspect not in ASPECT_TO_NAMESPACE:
            raise TempoInputError(f"unknown aspect {aspect!r} (expected one of {ASPECTS})")
        return frozenset(t.id for t in self.terms.values()
                         if not t.is_obsolete and t.aspect == aspect)

    @cached_property
    def _closure(self) -> tuple[pd.Index, np.ndarray, np.ndarray, np.ndarray]:
        """Ancestor closure in CSR form over sorted live terms.

        Returns
        -------
        index : pd.Index, shape (n_terms,)
            Sorted ids of the non-obsolete terms that have an aspect.
        indptr : ndarray of int64, shape (n_terms + 1,)
        indices : ndarray of int32, shape (nnz,)
            ``indices[indptr[i]:indptr[i+1]]`` are the positions of term ``i``'s ancestors.
        aspects : ndarray of object, shape (n_terms,)
        """
        from scipy import sparse

        ids = sorted(t.id for t in self.terms.values() if not t.is_obsolete and t.aspect)
        index = pd.Index(ids)
        n = len(ids)
        position = dict(zip(ids, range(n)))
        child, parent = [], []
        for i, term in enumerate(ids):
            for above in self.parents(term):
                child.append(i)
                parent.append(position[above])
        # reach[i, j]: term j is term i or one of its ancestors; squared until it stops growing (each
        # squaring doubles the path length covered: ~5 for GO, where a walk per term took ~0.7 s)
        rows = np.concatenate([np.arange(n), np.asarray(child, dtype=np.int64)])
        cols = np.concatenate([np.arange(n), np.asarray(parent, dtype=np.int64)])
        reach = sparse.csr_matrix((np.ones(len(rows), dtype=np.int32), (rows, cols)), shape=(n, n))
        while True:
            grown = reach @ reach
            grown.data[:] = 1  # path counts reset: a sum stays <= n, far from int32's limit
            if grown.nnz == reach.nnz:
                break
            reach = grown
        cyclic = reach.multiply(reach.T).nnz > n or any(c == p for c, p in zip(child, parent))
        if cyclic:  # a term its own ancestor: the walk of :meth:`ancestors` names the cycle
            for term in ids:
                self.ancestors(term)
        reach.sort_indices()
        indptr = reach.indptr.astype(np.int64)
        indices = reach.indices.astype(np.int32)
        aspects = np.asarray([self.terms[t].aspect for t in ids], dtype=object)
        return index, indptr, indices, aspects

    def propagate_terms(self, frame: pd.DataFrame) -> pd.DataFrame:
        """Add every ancestor of each ``(protein, term)`` row; deduplicated.

        Parameters
        ----------
        frame : DataFrame with columns ``protein``, ``term`` (n_rows,)
            Terms must be primary, non-obsolete ids of this ontology (map alt ids first with
            :meth:`resolve`); other columns are ignored.

        Returns
        -------
        DataFrame with columns ``protein, term, aspect`` (n_propagated,), sorted by protein then
        term, one row per distinct pair.

        Raises
        ------
        UnknownTermError
            A term that is not a live primary id of this ontology (the first few are named).
        """
        for column in ("protein", "term"):
            if column not in frame.columns:
                raise TempoInputError(f"propagate_terms needs a {column!r} column")
        index, _, _, aspects = self._closure
        if len(frame) == 0:
            return pd.DataFrame({"protein": pd.Series([], dtype=object),
                                 "term": pd.Series([], dtype=object),
                                 "aspect": pd.Series([], dtype=object)})
        term_pos = index.get_indexer(frame["term"].to_numpy())
        bad = term_pos < 0
        if bad.any():
            offenders = pd.unique(frame["term"].to_numpy()[bad])
            raise UnknownTermError(
                f"{len(offenders)} term id(s) are not live primary ids of this ontology "
                f"(e.g. {', '.join(map(str, offenders[:5]))}); map them with Ontology.resolve first",
                self.path,
            )
        protein_codes, proteins = pd.factorize(frame["protein"].to_numpy(), sort=True)
        n_terms = np.int64(len(index))
        seeds = _sorted_unique(protein_codes.astype(np.int64) * n_terms + term_pos)
        seed_protein = seeds // n_terms
        counts, ancestor = self._ancestor_rows(seeds % n_terms)
        keys = _sorted_unique(np.repeat(seed_protein, counts) * n_terms + ancestor)
        out_protein = keys // n_terms
        out_term = keys % n_terms
        return pd.DataFrame({
            "protein": strings_at(proteins, out_protein),
            "term": strings_at(index, out_term),
            "aspect": strings_at(aspects, out_term),
        })

    def _ancestor_rows(self, term_pos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per term position, how many ancestors it has, and all their positions, term after term."""
        _, indptr, indices, _ = self._closure
        counts = indptr[term_pos + 1] - indptr[term_pos]
        starts = np.repeat(indptr[term_pos], counts)
        offsets = np.arange(int(counts.sum()), dtype=np.int64) - np.repeat(np.cumsum(counts) - counts, counts)
        return counts, indices[starts + offsets].astype(np.int64)

    def propagate_max(self, frame: pd.DataFrame, chunk_rows: int = 1_000_000) -> pd.DataFrame:
        """Scores made consistent with the ontology: each ancestor of a scored term gets at least
        its score (the ``max`` propagation cafaeval applies to predictions), one row per distinct pair.

        Parameters
        ----------
        frame : DataFrame ``protein, term, score[, ...]``; a term that is not a live primary id of
            this ontology keeps its own row and passes nothing up. Other columns are dropped but
            ``aspect``, which each term's (and so each ancestor's) namespace gives.
        chunk_rows : rows expanded at a time (whole proteins per chunk), to bound memory.

        Returns
        -------
        DataFrame ``protein, term[, aspect], score`` sorted by protein, then term.
        """
        for column in ("protein", "term", "score"):
            if column not in frame.columns:
                raise TempoInputError(f"propagate_max needs a {column!r} column")
        index, indptr, _, aspects = self._closure
        columns = ["protein", "term"] + (["aspect"] if "aspect" in frame.columns else []) + ["score"]
        if len(frame) == 0:
            return frame[columns].reset_index(drop=True)
        term_pos = index.get_indexer(frame["term"].to_numpy())
        known = term_pos >= 0
        unknown = frame.loc[~known, columns]
        frame, term_pos = frame[known], term_pos[known]
        protein_codes, proteins = pd.factorize(frame["protein"].to_numpy(), sort=True)
        protein_codes = protein_codes.astype(np.int64)
        scores = frame["score"].to_numpy(dtype=np.float64)
        order = np.argsort(protein_codes, kind="stable")
        protein_codes, term_pos, scores = protein_codes[order], term_pos[order], scores[order]
        counts = indptr[term_pos + 1] - indptr[term_pos]
        n_terms = np.int64(len(index))
        parts = []
        start = 0
        ends = np.cumsum(counts)
        while start < len(protein_codes):
            base = ends[start - 1] if start else 0
            stop = int(np.searchsorted(ends, base + chunk_rows, side="right"))
            stop = max(stop, start + 1)
            if stop < len(protein_codes):  # whole proteins: extend to the last row of this protein
                stop = int(np.searchsorted(protein_codes, protein_codes[stop - 1], side="right"))
            parts.append(self._max_over_ancestors(protein_codes[start:stop], term_pos[start:stop],
                                                  scores[start:stop], n_terms))
            start = stop
        keys = np.concatenate([k for k, _ in parts])
        values = np.concatenate([v for _, v in parts])
        out = pd.DataFrame({"protein": strings_at(proteins, keys // n_terms),
                            "term": strings_at(index, keys % n_terms)})
        if "aspect" in columns:
            out["aspect"] = strings_at(aspects, keys % n_terms)
        out["score"] = values
        if len(unknown):
            out = pd.concat([out, unknown], ignore_index=True).sort_values(["protein", "term"], kind="mergesort")
        return out[columns].reset_index(drop=True)

    def _max_over_ancestors(self, protein_codes: np.ndarray, term_pos: np.ndarray, scores: np.ndarray,
                            n_terms: np.int64) -> tuple[np.ndarray, np.ndarray]:
        """``protein * n_terms + ancestor`` keys, distinct and sorted, each with the highest score
        any of the protein's terms below it (or itself) has."""
        c, ancestor = self._ancestor_rows(term_pos)
        keys = np.repeat(protein_codes, c) * n_terms + ancestor
        values = np.repeat(scores, c)
        # one sort of the int64 keys and a max per run of equal keys: cheaper than sorting on
        # (key, -score) and taking each run's first; fmax, as that first, skips a NaN unless all are
        by = np.argsort(keys)
        keys = keys[by]
        first = np.ones(len(keys), dtype=bool)
        first[1:] = keys[1:] != keys[:-1]
        starts = np.flatnonzero(first)
        return keys[starts], np.fmax.reduceat(values[by], starts) if len(starts) else values[:0]


def _sorted_unique(values: np.ndarray) -> np.ndarray:
    """Sorted distinct values of an int64 array (a sort beats numpy's hash path here)."""
    values = np.sort(values, kind="stable")
    if values.size == 0:
        return values
    keep = np.empty(values.size, dtype=bool)
    keep[0] = True
    np.not_equal(values[1:], values[:-1], out=keep[1:])
    return values[keep]
