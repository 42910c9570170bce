"""Information accretion (IA) weights of GO terms, estimated from an annotated corpus.

Reproduces the estimator of Clark & Radivojac (2013), "Information-theoretic evaluation of
predicted ontological annotations", Bioinformatics 29(13): i53-i61:

    IA(t) = -log2 P(t | P(t)) = -log2( n(t and all of P(t)) / n(all of P(t)) )

where ``P(t)`` are the parents of ``t`` (is_a + part_of, same namespace) and ``n`` counts the
corpus proteins annotated with every term of the set. The file format is cafaeval's
``term<TAB>ia``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Sequence

import numpy as np
import pandas as pd

from tempo_assets.core.labels.annotations import require_columns
from tempo_assets.core.base.arrays import concat_ranges as _ranges
from tempo_assets.core.base.errors import TempoInputError
from tempo_assets.core.base.io import atomic_write, open_text

if TYPE_CHECKING:
    from scipy import sparse

ROW_CHUNK = 4096


def ontology_terms(ontology: Any) -> list[str]:
    """Primary, non-obsolete term ids with a GO namespace, sorted."""
    return sorted(
        term for term, record in ontology.terms.items()
        if not getattr(record, "is_obsolete", False) and ontology.resolve(term) == term
        and ontology.aspect(term) is not None
    )


def count_parent_sets(
    annotation: sparse.csr_matrix, parent_matrix: sparse.csc_matrix, n_parents: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Count proteins holding all parents of each term, and those holding the term as well.

    Parameters
    ----------
    annotation : csr_matrix, shape (n_proteins, n_terms), 0/1
        Protein-by-term incidence of the corpus.
    parent_matrix : csc_matrix, shape (n_terms, n_terms), 0/1
        ``parent_matrix[p, t] = 1`` when ``p`` is a parent of ``t``.
    n_parents : ndarray, shape (n_terms,)
        Number of parents of each term (column sums of ``parent_matrix``).

    Returns
    -------
    with_parents, with_term_and_parents : ndarray of int64, shape (n_terms,)
    """
    from scipy import sparse

    n_terms = parent_matrix.shape[1]
    with_parents = np.zeros(n_terms, dtype=np.int64)
    with_both = np.zeros(n_terms, dtype=np.int64)
    for start in range(0, annotation.shape[0], ROW_CHUNK):
        block = annotation[start:start + ROW_CHUNK]
        # held[i, t] = how many parents of t protein i is annotated with.
        held = (block @ parent_matrix).tocsr()
        complete = held.data == n_parents[held.indices]
        full = sparse.csr_matrix(
            (complete.astype(np.int32), held.indices, held.indptr), shape=held.shape
        )
        full.eliminate_zeros()
        with_parents += np.asarray(full.sum(axis=0)).ravel().astype(np.int64)
        with_both += np.asarray(full.multiply(block).sum(axis=0)).ravel().astype(np.int64)
    return with_parents, with_both


def information_accretion(propagated: pd.DataFrame, ontology: Any) -> pd.Series:
    """IA of every term of ``ontology`` from a propagated annotation corpus.

    Conventions: a root (no parent in its namespace) has IA 0; a term no protein holds
    together with its parents (``n(t and P(t)) = 0``, which includes the 0/0 case where no
    protein holds all the parents) has IA 0, as cafaeval gives a term missing from the IA
    file weight 0. The count of the term is taken jointly with its parents, so a corpus
    closed under a different ontology release still gives a probability in [0, 1].

    Parameters
    ----------
    propagated : DataFrame, shape (n_rows, >= 2)
        ``protein, term``: annotations closed under ``ontology`` (primary ids).
    ontology : Ontology
        ``.terms``, ``.resolve``, ``.parents``.

    Returns
    -------
    Series of float64, shape (n_terms,)
        Index: term id (primary, non-obsolete, sorted), name ``ia``; bits, all >= 0.
    """
    return ia_counts(propagated, ontology).series()


def _ia_bits(with_parents: np.ndarray, with_both: np.ndarray, n_parents: np.ndarray) -> np.ndarray:
    """``-log2(with_both / with_parents)`` with the conventions of ``information_accretion``."""
    ia = np.zeros(len(with_both), dtype=np.float64)
    scored = (n_parents > 0) & (with_both > 0)
    ia[scored] = -np.log2(with_both[scored] / with_parents[scored])
    return np.where(ia > 0, ia, 0.0)  # -log2(1) is -0.0


@dataclass(frozen=True)
class IaCounts:
    """The counts behind IA, kept so one protein's contribution can be removed exactly.

    ``IA(t) = -log2(with_both[t] / with_parents[t])`` where ``with_parents[t]`` counts the corpus
    proteins holding every parent of ``t`` and ``with_both[t]`` those also holding ``t``.
    Used as the ``ia`` input of ``features.candidate_features``, it gives each candidate
    (protein p, term t) the IA of a corpus without p (``leave_one_out``), so the feature obeys
    the golden rule even when p's own labels are in the corpus IA was estimated from.

    Attributes
    ----------
    terms : ndarray of str, shape (n_terms,)
        Primary, non-obsolete term ids, sorted.
    proteins : ndarray of str, shape (n_proteins,)
        Corpus proteins, sorted.
    annotation : csr_matrix of int32, shape (n_proteins, n_terms)
        0/1 incidence, sorted indices.
    parent_matrix : csc_matrix of int32, shape (n_terms, n_terms)
        ``parent_matrix[p, t] = 1`` when ``p`` is a parent of ``t``.
    n_parents, with_parents, with_both : ndarray of int64, shape (n_terms,)
    """

    terms: np.ndarray
    proteins: np.ndarray
    annotation: sparse.csr_matrix
    parent_matrix: sparse.csc_matrix
    n_parents: np.ndarray
    with_parents: np.ndarray
    with_both: np.ndarray

    def series(self) -> pd.Series:
        """IA of every term (bits), as ``information_accretion`` returns it."""
        ia = _ia_bits(self.with_parents, self.with_both, self.n_parents)
        return pd.Series(ia, index=pd.Index(list(self.terms), name="term"), name="ia")

    def drop_proteins(self, proteins: Iterable[str]) -> "IaCounts":
        """The counts of the corpus without ``proteins``: their rows removed, their own counts subtracted.

        Both counts are sums over proteins, so subtracting the dropped rows' ``count_parent_sets``
        equals recounting the reduced matrix (exact integers), at the cost of the dropped rows only.
        """
        drop = set(map(str, proteins))
        keep = np.array([p not in drop for p in self.proteins], dtype=bool)
        dropped_parents, dropped_both = count_parent_sets(self.annotation[np.flatnonzero(~keep)],
                                                          self.parent_matrix, self.n_parents)
        return replace(self, proteins=self.proteins[keep], annotation=self.annotation[np.flatnonzero(keep)],
                       with_parents=self.with_parents - dropped_parents, with_both=self.with_both - dropped_both)

    def leave_one_out(self, proteins: Sequence[str] | np.ndarray,
                      terms: Sequence[str] | np.ndarray) -> np.ndarray:
        """IA of ``terms[i]`` estimated on the corpus without ``proteins[i]``.

        Parameters
        ----------
        proteins, terms : array-like of str, shape (n_rows,)
            Candidate rows. A protein outside the corpus gets the plain IA of the term.

        Returns
        -------
        ndarray of float64, shape (n_rows,)
            Bits; NaN where the term is not a term of the ontology.
        """
        proteins = np.asarray(proteins, dtype=object)
        terms = np.asarray(terms, dtype=object)
        if len(proteins) != len(terms):
            raise TempoInputError(f"IaCounts.leave_one_out: {len(proteins)} proteins but "
                                  f"{len(terms)} terms")
        n_terms = len(self.terms)
        t = _lookup(self.terms, terms)
        p = _lookup(self.proteins, proteins)
        out = np.full(len(terms), np.nan)
        known = t >= 0
        t_k, p_k = t[known], p[known]
        # row-major keys of the candidates' proteins' rows of the incidence (only those are looked up):
        # sorted because the rows are taken in order and the CSR indices within a row are sorted
        in_corpus = p_k >= 0
        rows_of = np.unique(p_k[in_corpus])
        indptr = self.annotation.indptr.astype(np.int64)
        row_sizes = indptr[rows_of + 1] - indptr[rows_of]
        held_keys = (np.repeat(rows_of, row_sizes) * n_terms
                     + self.annotation.indices[_ranges(indptr[rows_of], row_sizes)].astype(np.int64))
        holds_term = in_corpus & _member(held_keys, p_k * n_terms + t_k)
        ptr, idx = self.parent_matrix.indptr, self.parent_matrix.indices
        counts = (ptr[t_k + 1] - ptr[t_k]).astype(np.int64)
        rows = np.repeat(np.arange(len(t_k)), counts)
        parents = idx[_ranges(ptr[t_k].astype(np.int64), counts)].astype(np.int64)
        held = _member(held_keys, p_k[rows] * n_terms + parents) & in_corpus[rows]
        held_parents = np.bincount(rows, weights=held, minlength=len(t_k))
        holds_parents = in_corpus & (held_parents == counts)
        with_parents = self.with_parents[t_k] - holds_parents
        with_both = self.with_both[t_k] - (holds_parents & holds_term)
        out[known] = _ia_bits(with_parents, with_both, self.n_parents[t_k])
        return out


def _lookup(sorted_ids: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Position of each value in ``sorted_ids`` (int64), -1 when absent.

    Candidate rows repeat few proteins and terms: each distinct value is looked up once (its string
    form, as the ids are strings) and the positions spread back by its factorised codes."""
    if len(sorted_ids) == 0 or len(values) == 0:
        return np.full(len(values), -1, dtype=np.int64)
    codes, uniques = pd.factorize(values, use_na_sentinel=False)
    # object indexes: the ids are hashed as they are held, not first copied into an Arrow string column
    found = pd.Index(sorted_ids, dtype=object).get_indexer(np.asarray(uniques).astype(str).astype(object))
    return np.asarray(found, dtype=np.int64)[codes]


def _member(sorted_keys: np.ndarray, values: np.ndarray) -> np.ndarray:
    if len(sorted_keys) == 0:
        return np.zeros(len(values), dtype=bool)
    pos = np.minimum(np.searchsorted(sorted_keys, values), len(sorted_keys) - 1)
    return sorted_keys[pos] == values



def ia_counts(propagated: pd.DataFrame, ontology: Any) -> IaCounts:
    """The ``IaCounts`` of a propagated corpus (see ``information_accretion`` for conventions).

    Parameters
    ----------
    propagated : DataFrame, shape (n_rows, >= 2)
        ``protein, term``: annotations closed under ``ontology`` (primary ids).
    ontology : Ontology

    Returns
    -------
    IaCounts
    """
    from scipy import sparse

    require_columns(propagated, ("protein", "term"), "information_accretion")
    terms = ontology_terms(ontology)
    column = {term: i for i, term in enumerate(terms)}
    pairs = propagated[["protein", "term"]].astype(str).drop_duplicates()
    term_index = pairs["term"].map(column)
    if term_index.isna().any():
        bad = pairs.loc[term_index.isna()].iloc[0]
        raise TempoInputError(
            f"information_accretion: term {bad['term']} (protein {bad['protein']}) is not a "
            "primary, non-obsolete term of the ontology; clean the annotations first")
    protein_codes, protein_ids = pd.factorize(pairs["protein"], sort=True)
    n_proteins = len(protein_ids)
    annotation = sparse.csr_matrix(
        (np.ones(len(pairs), dtype=np.int32),
         (protein_codes, term_index.to_numpy(dtype=np.int64))),
        shape=(n_proteins, len(terms)),
    )
    annotation.sort_indices()

    parent_rows: list[int] = []
    parent_cols: list[int] = []
    for child, term in enumerate(terms):
        for parent in set(ontology.parents(term)):
            if parent in column:
                parent_rows.append(column[parent])
                parent_cols.append(child)
    parent_matrix = sparse.csc_matrix(
        (np.ones(len(parent_rows), dtype=np.int32), (parent_rows, parent_cols)),
        shape=(len(terms), len(terms)),
    )
    parent_matrix.sort_indices()
    n_parents = np.asarray(parent_matrix.sum(axis=0)).ravel().astype(np.int64)
    with_parents, with_both = count_parent_sets(annotation, parent_matrix, n_parents)
    return IaCounts(terms=np.asarray(terms, dtype=object),
                    proteins=np.asarray(protein_ids, dtype=object), annotation=annotation,
                    parent_matrix=parent_matrix, n_parents=n_parents,
                    with_parents=with_parents, with_both=with_both)


def write_ia_file(path: str | Path, ia: pd.Series) -> int:
    """Write IA weights as cafaeval reads them: ``term<TAB>ia`` per line, no header.

    Values are written with ``repr`` so ``read_ia_file`` gives back the same floats. Raises
    ``TempoInputError`` naming the term on a NaN, infinite or negative weight. Atomic.
    """
    if not isinstance(ia, pd.Series):
        raise TempoInputError(f"write_ia_file: expected a pandas Series, got {type(ia).__name__}")
    lines = []
    for term, value in ia.items():
        term = str(term)
        if not term or any(ch.isspace() for ch in term):
            raise TempoInputError(f"write_ia_file: term {term!r} is empty or holds whitespace")
        value = float(value)
        if not math.isfinite(value) or value < 0:
            raise TempoInputError(f"write_ia_file: term {term}: IA {value!r} is not a finite "
                                  "non-negative number")
        lines.append(f"{term}\t{value!r}\n")
    with atomic_write(path) as handle:
        handle.writelines(lines)
    return len(lines)


def read_ia_file(path: str | Path) -> pd.Series:
    """Read a ``term<TAB>ia`` file into a float Series (index ``term``, name ``ia``).

    Blank lines are skipped; anything else that is not two fields with a finite float, or a
    term seen twice, raises ``TempoInputError`` naming the file and line.
    """
    terms: list[str] = []
    values: list[float] = []
    seen: dict[str, int] = {}
    with open_text(path) as handle:
        for number, line in enumerate(handle, start=1):
            fields = line.strip().split()
            if not fields:
                continue
            if len(fields) != 2:
                raise TempoInputError(f"expected 'term<TAB>ia', got {len(fields)} field(s)",
                                      path=path, line=number)
            term, text = fields
            try:
                value = float(text)
            except ValueError:
                raise TempoInputError(f"IA {text!r} of {term} is not a number",
                                      path=path, line=number) from None
            if not math.isfinite(value):
                raise TempoInputError(f"IA {text!r} of {term} is not finite",
                                      path=path, line=number)
            if term in seen:
                raise TempoInputError(f"term {term} already given on line {seen[term]}",
                                      path=path, line=number)
            seen[term] = number
            terms.append(term)
            values.append(value)
    return pd.Series(np.asarray(values, dtype=np.float64), index=pd.Index(terms, name="term"),
                     name="ia")


def ia_series(frame: pd.DataFrame) -> pd.Series:
    """A stored ``term, ia`` frame (the ``ia_weights`` artefact) back as a ``term -> bits`` series."""
    return pd.Series(frame["ia"].to_numpy(), index=frame["term"].to_numpy(), name="ia")
