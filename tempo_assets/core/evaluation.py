"""CAFA evaluation, number for number with cafaeval 1.3.0, on sparse data.

Reproduces ``cafaeval`` 1.3.0 (Piovesan et al., CAFA-evaluator) as printed: every cell of
``evaluation_all.tsv`` and ``evaluation_best_{f,f_w,s,f_micro,f_micro_w}.tsv``. cafaeval builds
dense ``proteins x terms`` float matrices and thresholds them 99 times; here every raw score is
turned once into a threshold-bin code (``searchsorted`` on the exact
``numpy.arange(th_step, 1, th_step)`` grid: max and fill propagation commute with that
monotone map), codes are propagated by term height over a CSR parent graph in one-byte blocks,
and per-protein counts per bin become per-threshold counts by reverse cumulative sums.

Reproduced cafaeval rules (see ``parser.py``, ``graph.py``, ``evaluation.py`` of cafaeval):

* OBO: a line is ``tag: value`` split on the first ``": "``; only ``is_a`` and
  ``relationship: part_of``; obsolete terms, namespace-less terms and ``namespace: external``
  are dropped; parents outside the namespace (or obsolete) are dropped; ``alt_id`` maps to the
  set of primaries claiming it; term index = file order inside the namespace; namespaces in
  order of their first kept term. ``orphans=False`` evaluates only terms with a parent.
* Ground truth: whitespace-split lines, first namespace whose primaries (then alt ids) know the
  term, unknown terms dropped, rows in order of first appearance, boolean ``max`` propagation.
* Predictions: lines with more than two fields; only proteins of that namespace's ground truth;
  an id that is an alt_id in its namespace is replaced by all its primaries; duplicate pairs
  keep the max, starting from 0 (so NaN and negative scores never count, scores above 1 and
  ``inf`` count at every threshold); ``max_terms``: an insertion happens only while the raw
  row holds ``<= max_terms`` non-zero terms (so up to ``max_terms + 1`` survive, file order).
* Propagation ``max`` (a term takes the max of its descendants) or ``fill`` (only a term whose
  own score is 0 takes the max of its children).
* Metrics at ``tau`` in the grid with ``score >= tau``; IA weights (missing or 0 -> 0, NaN/inf
  -> 0, only ``ia > 0`` terms weighted); ``norm`` cafa/pred/gt; micro averages; ``s``; rows with
  ``cov == 0`` removed; best rows by first ``idxmax``/``idxmin`` with ``cov_max``.

Float exactness: unweighted per-protein quantities are integers and the per-threshold sums over
proteins use the same 1-D ``numpy`` sums on the same arrays in the same protein order, so they
are bit-identical. Weighted per-protein sums are sequential sums in a canonical order (cafaeval
uses numpy's pairwise sum over the dense row): they can differ in the last ulp, but equal term
sets give equal sums, so ratios that are exactly 1 stay exactly 1. A printed digit could only
differ if a weighted value sat within ~1e-15 of a rounding boundary.

Deliberate differences (documented, all on inputs where cafaeval crashes or has no rule):

* A namespace whose inserted predictions are all zero/NaN: cafaeval raises ``IndexError`` in
  ``propagate``; here it yields no rows (every ``cov`` is 0).
* Malformed ground-truth, IA or score fields raise :class:`EvaluationInputError` naming the
  file and line (cafaeval raises a bare ``ValueError``); a non-numeric score on a line that
  cafaeval never converts (protein or term outside the ground truth) is skipped and counted.
* An alt_id claimed by several primaries is expanded in sorted order (cafaeval iterates a
  ``set``, so with ``max_terms`` its own result depends on the hash seed).
* OBO/GT/prediction files may be gzipped.
* ``n_cpu`` (``-threads``) is not a process pool over thresholds: with ``n_cpu > 1`` the
  prediction file is parsed by Arrow's threads and namespaces are propagated in threads.

LAFA mode (``toi`` and/or ``known``, following cafaeval-protea 0.1.0's ``-toi``/``-known``):
``toi`` terms (alt ids mapped) are intersected with the evaluated terms and with the IA terms;
``known`` pairs are mapped and propagated like ground truth and removed from that protein's
ground truth and predictions. Coverage fix (docs/PROTOCOL.md): a protein whose remaining ground truth
inside the evaluated terms is empty is not counted at all. cafaeval-protea drops such a protein
from the denominator ``ne`` but still counts its predictions in ``n``, precision and
misinformation (so its coverage can exceed 1); we drop it everywhere.
"""
from __future__ import annotations

import logging
import math
import os
import re
from collections.abc import Iterable, Mapping
from typing import Any
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from tempo_assets.core.arrays import concat_ranges as _ranges
from tempo_assets.core.errors import TempoInputError
from tempo_assets.core.io import atomic_write, open_binary, open_text
from tempo_assets.core.progress import Progress

__all__ = [
    "EvalOntology",
    "EvaluationInputError",
    "best_rows",
    "bootstrap_ci",
    "bootstrap_cis",
    "cafa_eval",
    "evaluate_frames",
    "fmax_score",
    "paired_bootstrap",
    "paired_bootstraps",
    "read_ia",
    "smin_loss",
    "threshold_curve",
    "threshold_grid",
    "write_results",
]

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


# The only tags cafaeval reads, at the start of a line after leading whitespace (which its
# ``line.strip()`` drops); ``.`` stops at the newline, so one match is one line.
_OBO_TAG_LINE = re.compile(
    r"\n[^\S\n]*(id|alt_id|namespace|is_obsolete|is_a|relationship): (.*)")


def _read_obo_cafaeval(path: str | Path) -> dict[str, dict[str, dict]]:
    """``namespace -> term -> {alt_id, rel}`` with cafaeval's line rules.

    cafaeval reads every line as ``tag: value`` (``line.strip()`` split on the first
    ``": "``) and ignores stanza headers. Instead of a Python loop over every line (most are
    ``name``, ``def``, ``synonym``, ``xref``), one regular-expression pass picks out the lines
    of the six tags it acts on, in file order; newlines are translated as text mode does.
    """
    with open_binary(path) as handle:
        text = handle.read().decode("utf-8", errors="replace")
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
    """GO graphs per namespace, read with cafaeval 1.3.0's rules (not ``core.ontology``'s).

    Attributes
    ----------
    namespaces : dict[str, _Namespace]
        In cafaeval's order (first kept term of each namespace in the file).
    """

    def __init__(self, namespaces: dict[str, _Namespace], path: str | Path | None = None):
        self.namespaces = namespaces
        self.path = path
        self.has_ia = any(ns.ia is not None for ns in namespaces.values())
        # terms of interest -> their masks per namespace (read-only): see _toi_masks
        self.toi_masks: dict[frozenset, dict[str, np.ndarray]] = {}

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


# --------------------------------------------------------------------------------------------
# ground truth, predictions, propagation


@dataclass
class _Truth:
    """Propagated ground truth of one namespace; rows in cafaeval's protein order."""

    proteins: list[str]
    row_of: dict[str, int]
    keys: np.ndarray  # sorted int64 row * n_terms + term


def _read_pairs(path: str | Path, what: str) -> tuple[list[str], list[str]]:
    proteins: list[str] = []
    terms: list[str] = []
    seen = False
    with open_text(path) as handle:
        for lineno, raw in enumerate(handle, start=1):
            parts = raw.split()
            if not parts:
                continue
            seen = True
            if len(parts) < 2:
                raise EvaluationInputError(f"{what} line needs 'protein term'", path, lineno)
            proteins.append(parts[0])
            terms.append(parts[1])
    if not seen:
        raise EvaluationInputError(f"empty {what} file", path)
    return proteins, terms


def _group_pairs(ontology: EvalOntology, proteins: Iterable[str], terms: Iterable[str],
                 ) -> dict[str, tuple[list[str], np.ndarray, np.ndarray]]:
    """cafaeval's ``gt_parser`` grouping, on factorised ids.

    Returns
    -------
    dict
        ``ns -> (proteins, rows, cols)`` for the namespaces that got a pair: ``proteins`` in
        first-seen order within the namespace (cafaeval's row order), ``rows`` and ``cols``
        int64 (n_pairs,) a row and a term index per pair (an alt id adds one pair per primary).
        A term goes to the first namespace whose primaries, then alt ids, know it.
    """
    p_codes, p_uniques = pd.factorize(np.asarray(list(proteins), dtype=object))
    t_codes, t_uniques = pd.factorize(np.asarray(list(terms), dtype=object))
    names = list(ontology.namespaces)
    ns_of = np.full(len(t_uniques), -1, dtype=np.int64)
    columns: list[tuple[int, ...]] = []
    for t, term in enumerate(t_uniques):
        hit = ontology.term_namespace_first(term)
        if hit is None:
            columns.append(())
        else:
            ns_of[t] = names.index(hit[0])
            columns.append(hit[1])
    sizes = np.array([len(c) for c in columns], dtype=np.int64)
    flat_cols = np.fromiter((c for cs in columns for c in cs), dtype=np.int64,
                            count=int(sizes.sum()))
    starts = np.cumsum(sizes) - sizes
    row_ns = ns_of[t_codes]
    dropped = int(np.count_nonzero(row_ns < 0))
    if dropped:
        logger.info("%d annotation rows with terms unknown to the ontology dropped", dropped)
    grouped: dict[str, tuple[list[str], np.ndarray, np.ndarray]] = {}
    for k, name in enumerate(names):
        sel = np.flatnonzero(row_ns == k)
        if sel.size == 0:
            continue
        pc = p_codes[sel]
        uniq, first = np.unique(pc, return_index=True)
        in_order = uniq[np.argsort(first, kind="stable")]
        row_of = np.empty(len(p_uniques), dtype=np.int64)
        row_of[in_order] = np.arange(in_order.size)
        tc = t_codes[sel]
        counts = sizes[tc]
        cols = flat_cols[_ranges(starts[tc], counts)]
        rows = np.repeat(row_of[pc], counts)
        grouped[name] = ([p_uniques[c] for c in in_order], rows, cols)
    return grouped


def _build_truths(ontology: EvalOntology, proteins, terms) -> dict[str, _Truth]:
    grouped = _group_pairs(ontology, proteins, terms)
    truths: dict[str, _Truth] = {}
    for name in ontology.namespaces:  # cafaeval: gts in ontology order
        if name not in grouped:
            continue
        ns = ontology.namespaces[name]
        ids, rows, cols = grouped[name]
        keys = _propagated_keys(rows, cols, ns)
        truths[name] = _Truth(ids, {p: i for i, p in enumerate(ids)}, keys)
        logger.info("Ground truth: %s, proteins %d, annotations %d", name, len(ids), keys.size)
    return truths


def _level_layout(ns: _Namespace) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray,
                                             np.ndarray]:
    """Terms sorted by height (0 = no children), cached per namespace.

    Returns
    -------
    order : int64 (n_terms,), the term at each position; position : int64 (n_terms,), the
    position of each term; bounds : int64 (n_levels + 1,), level slices of the positions;
    ptr, parents : CSR (n_terms + 1,), (n_edges,) from a position to its parents' positions
    (so the propagation loop never maps back and forth between terms and positions).
    """
    cached = getattr(ns, "_layout", None)
    if cached is None:
        order = np.argsort(ns.level, kind="stable")
        position = np.empty_like(order)
        position[order] = np.arange(order.size)
        bounds = np.searchsorted(ns.level[order], np.arange(int(ns.level.max()) + 2))
        counts = np.diff(ns.parent_ptr)[order]
        ptr = np.zeros(order.size + 1, dtype=np.int64)
        np.cumsum(counts, out=ptr[1:])
        parents = position[ns.parent_idx[_ranges(ns.parent_ptr[order], counts)]]
        cached = ns._layout = (order, position, bounds, ptr, parents)
    return cached


@dataclass
class _Cells:
    """Non-zero cells of a propagated ``proteins x terms`` code matrix, in no fixed order.

    ``rows`` int32 (n,), ``terms`` int32 (n,), ``codes`` uint8/uint16/int64 (n,) and
    ``flags`` bool (n,) or None: whether the cell is one of the ``flag_keys`` given to
    :func:`_propagate` (for predictions, the propagated ground truth: the cell is a true
    positive).
    """

    rows: np.ndarray
    terms: np.ndarray
    codes: np.ndarray
    flags: np.ndarray | None = None

    @classmethod
    def empty(cls) -> "_Cells":
        return cls(np.zeros(0, np.int32), np.zeros(0, np.int32), np.zeros(0, np.uint8),
                   np.zeros(0, bool))

    def keys(self, n_terms: int) -> np.ndarray:
        """int64 (n,) ``row * n_terms + term``."""
        return self.rows.astype(np.int64) * np.int64(n_terms) + self.terms


_BLOCK_BYTES = 1 << 24  # one block's code matrix: fits the last-level cache of a small machine


def _propagate(rows: np.ndarray, cols: np.ndarray, codes: np.ndarray, ns: _Namespace,
               mode: str, flag_keys: np.ndarray | None = None) -> _Cells:
    """Propagate positive codes up the namespace graph, level by level.

    Parameters
    ----------
    rows, cols, codes : int64 arrays (n_raw,)
        Raw entries (duplicates allowed: the max is kept); rows >= 0, codes > 0.
    mode : ``"max"`` (a term takes the max over its descendants) or ``"fill"`` (a term with a
        raw entry keeps it; otherwise it takes the max of its children's final values).
    flag_keys : int64 (n_flag,), sorted ``row * n_terms + term``, optional
        Cells to flag in the output (looked up in a dense block, not by a search per cell).

    Returns
    -------
    _Cells
        Every non-zero cell of the propagated matrix, in height order within row blocks.

    Notes
    -----
    Terms are finalised by height (a term after all its children), which is what cafaeval's
    topological sweep computes. A block of ``2**k`` rows is a flat ``(terms, rows)`` code
    matrix whose term axis is ordered by height, so each height is one contiguous slice; only
    its non-zero cells (found 8 bytes at a time) are pushed to their parents with a 1-D
    ``maximum.at`` (numpy's fast path). The buffers are reused across blocks, so the kernel
    touches a cache-sized working set and allocates no large temporary per block.
    """
    n_terms = ns.n_terms
    if rows.size == 0:
        return _Cells.empty()
    top = int(codes.max())
    dtype = np.uint8 if top < 256 else (np.uint16 if top < 65536 else np.int64)
    order, position, bounds, ptr, parents = _level_layout(ns)
    n_rows = int(rows.max()) + 1
    # rows per block: a power of two (cells split with a shift and a mask), at least a word
    shift = max(3, min(int(_BLOCK_BYTES // (n_terms * np.dtype(dtype).itemsize)).bit_length() - 1,
                       max(3, (n_rows - 1).bit_length())))
    width = 1 << shift
    n_blocks = -(-n_rows // width)
    flat_in = (position[cols] << shift) | (rows & (width - 1))
    codes = codes.astype(dtype)
    if n_blocks > 1:
        block_of = (rows >> shift).astype(np.uint16 if n_blocks < 65536 else np.int64)
        by_block = np.argsort(block_of, kind="stable")  # radix sort for 16-bit keys
        flat_in, codes = flat_in[by_block], codes[by_block]
        cuts = np.searchsorted(block_of[by_block], np.arange(n_blocks + 1))
    else:
        cuts = np.array([0, rows.size])
    per_word = 8 // np.dtype(dtype).itemsize
    matrix = np.zeros(n_terms * width, dtype=dtype)
    flag_buf = np.zeros(n_terms * width, dtype=bool) if flag_keys is not None else None
    raw = None
    out_rows, out_terms, out_codes, out_flags = [], [], [], []
    for block in range(n_blocks):
        lo, hi = cuts[block], cuts[block + 1]
        if lo == hi:
            continue
        start = block * width
        np.maximum.at(matrix, flat_in[lo:hi], codes[lo:hi])
        if mode == "fill":
            raw = matrix != 0
        if flag_buf is not None:
            f_lo, f_hi = np.searchsorted(flag_keys, [start * n_terms, (start + width) * n_terms])
            fk = flag_keys[f_lo:f_hi]
            flag_at = (position[fk % n_terms] << shift) | (fk // n_terms - start)
            flag_buf[flag_at] = True
        for a, b in zip(bounds[:-1], bounds[1:]):
            # (x != 0 then a boolean nonzero: numpy's fast path, several times quicker than
            # nonzero on an integer array)
            sub = matrix[a << shift:b << shift].view(np.uint64)
            words = np.flatnonzero(sub != 0)
            if words.size == 0:
                continue
            # the non-zero cells inside the non-zero words, found on a compact copy
            packed = sub[words].view(dtype)
            hit = np.flatnonzero(packed != 0)
            values = packed[hit]
            flat = words[hit // per_word] * per_word + hit % per_word
            r = flat & (width - 1)
            pos = a + (flat >> shift)
            out_rows.append((start + r).astype(np.int32))
            out_terms.append(order[pos].astype(np.int32))
            out_codes.append(values)
            if flag_buf is not None:
                out_flags.append(flag_buf[(a << shift) + flat])
            counts = ptr[pos + 1] - ptr[pos]
            if not counts.any():
                continue
            targets = (parents[_ranges(ptr[pos], counts)] << shift) | np.repeat(r, counts)
            values = np.repeat(values, counts)
            if raw is not None:
                open_cell = ~raw[targets]
                targets, values = targets[open_cell], values[open_cell]
            np.maximum.at(matrix, targets, values)
        matrix.fill(0)
        if flag_buf is not None:
            flag_buf[flag_at] = False
    return _Cells(np.concatenate(out_rows), np.concatenate(out_terms), np.concatenate(out_codes),
                  np.concatenate(out_flags) if flag_buf is not None else None)


def _propagated_keys(rows: np.ndarray, cols: np.ndarray, ns: _Namespace) -> np.ndarray:
    """Sorted int64 keys ``row * n_terms + term`` of the boolean ``max`` propagation."""
    cells = _propagate(rows, cols, np.ones(rows.size, dtype=np.int64), ns, "max")
    return np.sort(cells.keys(ns.n_terms))


@dataclass
class _Raw:
    """Prediction rows in file order, before namespace routing, as codes into uniques."""

    protein_codes: np.ndarray  # int32 or int64 (n,)
    proteins: np.ndarray  # object (n_proteins,)
    term_codes: np.ndarray  # int32 or int64 (n,)
    terms: np.ndarray  # object (n_terms,)
    score_codes: np.ndarray | None  # int32 or int64 (n,) into score_text, for text input
    score_text: np.ndarray | None  # object (n_distinct,) score strings, parsed once each
    scores: np.ndarray | None  # float64 (n,), for frame input
    lines: np.ndarray | None  # int64 (n,) line numbers or row positions; None: not known yet
    path: str | None = None

    @classmethod
    def from_values(cls, proteins, terms, scores, lines, path) -> "_Raw":
        p_codes, p_uniques = pd.factorize(np.asarray(proteins, dtype=object))
        t_codes, t_uniques = pd.factorize(np.asarray(terms, dtype=object))
        scores = np.asarray(scores)
        if scores.dtype == object:
            s_codes, s_uniques = pd.factorize(scores)
            return cls(p_codes.astype(np.int64), np.asarray(p_uniques, dtype=object),
                       t_codes.astype(np.int64), np.asarray(t_uniques, dtype=object),
                       s_codes.astype(np.int64), np.asarray(s_uniques, dtype=object), None,
                       np.asarray(lines, dtype=np.int64), path)
        return cls(p_codes.astype(np.int64), np.asarray(p_uniques, dtype=object),
                   t_codes.astype(np.int64), np.asarray(t_uniques, dtype=object), None, None,
                   scores.astype(np.float64), np.asarray(lines, dtype=np.int64), path)


_PLAIN_BYTES = bytes([9, 10, *range(32, 127)])


def _read_prediction_file(path: str | Path, n_threads: int = 1) -> _Raw:
    """Rows of lines with more than two whitespace-separated fields (cafaeval's rule).

    Plain-ASCII files whose lines all split into exactly three non-empty fields on tabs (after
    spaces become tabs) go through Arrow's CSV reader, which dictionary-encodes the three
    columns in C++ (no Python string per row); ``n_threads > 1`` lets it parse blocks in
    parallel. Anything else (non-ASCII, carriage returns, other control characters, runs of
    separators, lines with fewer or more fields) takes a line loop with ``str.split``, the
    rule's own definition. Line numbers are recovered by the loop when an error must name one.
    """
    with open_binary(path) as handle:
        data = handle.read()
    raw = _read_prediction_arrow(data, str(path), n_threads) if data else None
    return raw if raw is not None else _read_prediction_lines(path)


def _read_prediction_arrow(data: bytes, path: str, n_threads: int) -> _Raw | None:
    """Arrow fast path of :func:`_read_prediction_file`; None when its preconditions fail."""
    # only printable ASCII, tabs and newlines: then str.split() splits on tabs and spaces only
    # (translate deletes the allowed bytes in one C pass without a file-sized temporary)
    if data.translate(None, _PLAIN_BYTES):
        return None
    if data.find(b" ") >= 0:
        data = data.replace(b" ", b"\t")
    import pyarrow as pa
    import pyarrow.csv as pa_csv

    # With tab as the only separator, a run of separators or a leading/trailing one shows up
    # as an empty field (checked below) or as a 4th column (a parse error), and a line with
    # fewer than three fields is a parse error too; then the loop decides. A line that
    # splits into three non-empty tab fields splits into the same three on whitespace.
    as_dict = pa.dictionary(pa.int32(), pa.string())
    names = ["protein", "term", "score"]
    try:
        table = pa_csv.read_csv(
            pa.py_buffer(data),
            read_options=pa_csv.ReadOptions(
                use_threads=n_threads > 1, column_names=names,
                # one block single-threaded (one dictionary per column, no unification)
                block_size=(len(data) + 1 if n_threads <= 1
                            else max(1 << 22, len(data) // (4 * n_threads)))),
            parse_options=pa_csv.ParseOptions(delimiter="\t", quote_char=False,
                                               double_quote=False, escape_char=False,
                                               newlines_in_values=False, ignore_empty_lines=True),
            convert_options=pa_csv.ConvertOptions(column_types={n: as_dict for n in names},
                                                  strings_can_be_null=False))
    except (pa.ArrowInvalid, pa.ArrowException):
        return None
    columns = []
    for name in names:
        chunked = table.column(name)
        if chunked.num_chunks > 1:
            chunked = chunked.unify_dictionaries()
        if chunked.num_chunks == 0:
            return None
        uniques = chunked.chunk(0).dictionary.to_numpy(zero_copy_only=False).astype(object)
        if (uniques == "").any():
            return None
        parts = [c.indices.to_numpy(zero_copy_only=False) for c in chunked.chunks]
        codes = parts[0] if len(parts) == 1 else np.concatenate(parts)  # int32, read-only
        columns.append((codes, uniques))
    (p_codes, proteins), (t_codes, terms), (s_codes, score_text) = columns
    return _Raw(p_codes, proteins, t_codes, terms, s_codes, score_text, None, None, path)


def _read_prediction_lines(path: str | Path) -> _Raw:
    proteins: list[str] = []
    terms: list[str] = []
    scores: list[str] = []
    lines: list[int] = []
    with open_text(path) as handle:
        for lineno, raw in enumerate(handle, start=1):
            parts = raw.split()
            if len(parts) > 2:
                proteins.append(parts[0])
                terms.append(parts[1])
                scores.append(parts[2])
                lines.append(lineno)
    return _Raw.from_values(np.array(proteins, dtype=object), np.array(terms, dtype=object),
                            np.array(scores, dtype=object), lines, str(path))


def _score_bins(raw: _Raw, sel: np.ndarray, tau: np.ndarray) -> tuple[np.ndarray, int]:
    """Threshold bins of the scores of rows ``sel``, parsed with Python's ``float``.

    Returns
    -------
    bins : int64 (n_sel,)
        0 for a score that never counts (``<= 0`` or NaN: cafaeval's ``max`` starting from 0),
        else ``1 + #{tau <= score}``.
    n_nan : int
        Rows whose score is NaN.

    Text scores are parsed and binned once per distinct string (a prediction file holds few),
    and only the strings that rows ``sel`` use: a bad score elsewhere is never read, as in
    cafaeval.
    """
    if raw.scores is not None:
        values, codes = raw.scores[sel], None
    else:
        codes = raw.score_codes[sel]
        values = np.full(raw.score_text.size, np.nan)
        for code in np.flatnonzero(np.bincount(codes, minlength=raw.score_text.size)):
            try:
                values[code] = float(raw.score_text[code])
            except ValueError:
                pos = sel[np.flatnonzero(codes == code)[0]]
                line = int(raw.lines[pos]) if raw.lines is not None else -1
                if line < 0 and raw.path:  # fast reader: find the line number now
                    line = int(_read_prediction_lines(raw.path).lines[pos])
                raise EvaluationInputError(f"score is not a number: {raw.score_text[code]!r}",
                                           raw.path, line) from None
    nan = np.isnan(values)
    bins = np.where(values > 0, 1 + np.searchsorted(tau, values, side="right"), 0)
    if codes is None:
        return bins.astype(np.int64), int(nan.sum())
    return bins.astype(np.int64)[codes], int(np.count_nonzero(nan[codes]))


def _build_predictions(ontology: EvalOntology, truths: dict[str, _Truth], raw: _Raw,
                       tau: np.ndarray, prop: str, max_terms: int | None,
                       n_threads: int = 1) -> dict[str, _Cells]:
    """Route, map, bin and propagate one method's predictions, per namespace (cafaeval order).

    ``n_threads > 1`` propagates the namespaces in a thread pool.
    """
    if prop not in ("max", "fill"):
        raise EvaluationInputError(f"prop must be 'max' or 'fill', got {prop!r}")
    # cafaeval's ns_dict: namespaces with ground truth, primaries then alt ids, last one wins
    ns_of: dict[str, int] = {}
    names = list(truths)
    for k, name in enumerate(names):
        ns = ontology.namespaces[name]
        for term in ns.terms:
            ns_of[term] = k
        for term in ns.alt:
            ns_of[term] = k
    if raw.term_codes.size == 0:
        return {}
    term_codes, term_uniques = raw.term_codes, raw.terms
    uniq_ns = np.array([ns_of.get(t, -1) for t in term_uniques], dtype=np.int16)
    row_ns = uniq_ns[term_codes] if term_codes.size else np.zeros(0, dtype=np.int64)
    out: dict[str, _Cells] = {}
    jobs: dict[str, tuple] = {}
    skipped_nan = 0
    for k, name in enumerate(names):
        ns = ontology.namespaces[name]
        truth = truths[name]
        in_ns = np.flatnonzero(row_ns == k)
        if in_ns.size == 0:
            continue
        uniq_rows = np.array([truth.row_of.get(p, -1) for p in raw.proteins], dtype=np.int64)
        rows = uniq_rows[raw.protein_codes[in_ns]]
        keep = rows >= 0
        sel = in_ns[keep]
        rows = rows[keep]
        if sel.size == 0:
            continue
        bins, n_nan = _score_bins(raw, sel, tau)
        skipped_nan += n_nan
        # term -> column(s); an alt id (checked first, as cafaeval does) expands to its primaries
        tcode = term_codes[sel]
        uniq_t = np.flatnonzero(np.bincount(tcode, minlength=term_uniques.size))
        col_lists = []
        for t in uniq_t:
            term = term_uniques[t]
            alts = ns.alt.get(term)
            col_lists.append(alts if alts is not None else (ns.index[term],))
        sizes = np.array([len(c) for c in col_lists], dtype=np.int64)
        flat_cols = np.fromiter((c for cl in col_lists for c in cl), dtype=np.int64,
                                count=int(sizes.sum()))
        # flat_cols is ordered by uniq_t; each unique term code's slice starts here
        starts_by_code = np.zeros(term_uniques.size, dtype=np.int64)
        starts_by_code[uniq_t] = np.cumsum(sizes) - sizes
        if (sizes == 1).all():  # no alt id with several primaries: one column per row
            cols = flat_cols[starts_by_code[tcode]]
        else:
            lens = np.zeros(term_uniques.size, dtype=np.int64)
            lens[uniq_t] = sizes
            counts = lens[tcode]
            cols = flat_cols[_ranges(starts_by_code[tcode], counts)]
            rows = np.repeat(rows, counts)
            bins = np.repeat(bins, counts)
        if max_terms is not None:
            allowed = _max_terms_mask(rows, cols, bins, ns.n_terms, int(max_terms))
            rows, cols, bins = rows[allowed], cols[allowed], bins[allowed]
        if rows.size == 0:
            continue  # nothing inserted: cafaeval does not evaluate this namespace
        positive = bins > 0
        jobs[name] = (rows[positive], cols[positive], bins[positive], ns, prop, truth.keys)
    if skipped_nan:
        logger.warning("%s: %d NaN scores ignored (as cafaeval does)", raw.path, skipped_nan)
    if n_threads > 1 and len(jobs) > 1:
        # namespaces are independent and numpy releases the GIL in the kernel's big calls
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=min(n_threads, len(jobs))) as pool:
            done = dict(zip(jobs, pool.map(lambda args: _propagate(*args), jobs.values())))
    else:
        done = {name: _propagate(*args) for name, args in jobs.items()}
    for name, cells in done.items():
        out[name] = cells
        logger.info("Prediction: %s, %s, annotations %d", raw.path, name, cells.rows.size)
    return out


def _max_terms_mask(rows, cols, scores, n_terms, max_terms) -> np.ndarray:
    """cafaeval's insertion rule: insert while the raw row has ``<= max_terms`` non-zeros.

    Rows are in file order; a term becomes non-zero at its first positive score.
    """
    order = np.argsort(rows, kind="stable")
    r, c, s = rows[order], cols[order], scores[order]
    key = r * np.int64(n_terms) + c
    positive = s > 0
    # first positive occurrence of each (row, term), in file order
    pos_idx = np.flatnonzero(positive)
    _, first = np.unique(key[pos_idx], return_index=True)
    is_first = np.zeros(r.size, dtype=np.int64)
    is_first[pos_idx[first]] = 1
    cum = np.cumsum(is_first)
    group_start = np.flatnonzero(np.r_[True, r[1:] != r[:-1]])
    base = np.repeat(np.r_[0, cum][group_start], np.diff(np.r_[group_start, r.size]))
    before = cum - is_first - base
    allowed_sorted = before <= max_terms
    allowed = np.empty(rows.size, dtype=bool)
    allowed[order] = allowed_sorted
    return allowed


# --------------------------------------------------------------------------------------------
# metrics


@dataclass
class _Contrib:
    """Per-protein, per-threshold quantities of one namespace and one variant.

    Arrays are (n_tau, n_proteins) except ``n_gt`` (n_proteins,); proteins in cafaeval order
    (LAFA mode drops proteins with no remaining ground truth).
    """

    n_pred: np.ndarray
    tp: np.ndarray
    fp: np.ndarray
    fn: np.ndarray
    n_gt: np.ndarray


def _isin_sorted(values: np.ndarray, sorted_ref: np.ndarray) -> np.ndarray:
    if sorted_ref.size == 0 or values.size == 0:
        return np.zeros(values.size, dtype=bool)
    pos = np.searchsorted(sorted_ref, values)
    pos[pos == sorted_ref.size] = 0
    return sorted_ref[pos] == values


_BITMAP_LIMIT = 1 << 31  # bits (256 MiB); above it, fall back to a sorted search


def _member(values: np.ndarray, ref: np.ndarray, universe: int) -> np.ndarray:
    """``isin(values, ref)`` for non-negative int64 keys below ``universe``; ref in any order.

    A bitmap gather (one random read per value) beats a binary search over unsorted queries.
    """
    if ref.size == 0 or values.size == 0:
        return np.zeros(values.size, dtype=bool)
    if universe > _BITMAP_LIMIT:
        return _isin_sorted(values, np.sort(ref))
    bits = np.zeros((universe >> 3) + 1, dtype=np.uint8)
    np.bitwise_or.at(bits, ref >> 3, (np.uint8(1) << (ref & 7).astype(np.uint8)))
    return ((bits[values >> 3] >> (values & 7).astype(np.uint8)) & 1).astype(bool)


def _contributions(ns: _Namespace, n_rows: int, gt_keys: np.ndarray, pred: _Cells,
                   n_tau: int, term_mask: np.ndarray, weights: np.ndarray | None,
                   known_keys: np.ndarray | None, lafa: bool) -> tuple[_Contrib, np.ndarray]:
    """Per-protein quantities for the terms in ``term_mask``; returns (contrib, kept rows)."""
    n_terms = np.int64(ns.n_terms)
    g_keys = gt_keys[term_mask[gt_keys % n_terms]]
    # pred.flags marks the cells in the full ground truth; a kept cell's term is in term_mask
    # and its key is not known, so the flag is also membership in the filtered g_keys
    p_rows, p_terms, p_codes, is_tp = pred.rows, pred.terms, pred.codes, pred.flags
    keep = None if term_mask.all() else term_mask[p_terms]
    if weights is not None:
        # unweighted counts drop code 1 (below the first threshold) with bin 0 anyway
        keep = pred.codes >= 2 if keep is None else keep & (pred.codes >= 2)
    if keep is not None:
        p_rows, p_terms, p_codes, is_tp = p_rows[keep], p_terms[keep], p_codes[keep], is_tp[keep]
    p_codes = p_codes.astype(np.int64) - 1  # c: taus counted
    universe = n_rows * int(n_terms)
    if known_keys is not None and known_keys.size:
        g_keys = g_keys[~_isin_sorted(g_keys, known_keys)]
        mask = ~_member(p_rows.astype(np.int64) * n_terms + p_terms, known_keys, universe)
        p_rows, p_terms, p_codes, is_tp = p_rows[mask], p_terms[mask], p_codes[mask], is_tp[mask]
    rows = np.arange(n_rows, dtype=np.int64)
    if lafa:
        has_gt = np.zeros(n_rows, dtype=bool)
        has_gt[g_keys // n_terms] = True
        rows = np.flatnonzero(has_gt)
        remap = np.full(n_rows, -1, dtype=np.int64)
        remap[rows] = np.arange(rows.size)
        p_mask = has_gt[p_rows]
        p_rows, p_terms, p_codes, is_tp = (p_rows[p_mask], p_terms[p_mask], p_codes[p_mask],
                                           is_tp[p_mask])
        g_row = remap[g_keys // n_terms]
        p_row = remap[p_rows]
    else:
        g_row = g_keys // n_terms
        p_row = p_rows.astype(np.int64)
    n_p = rows.size
    if weights is None:
        n_gt = np.bincount(g_row, minlength=n_p).astype(np.int64)
        width = n_tau + 1
        cell = p_row * width + p_codes
        pred_bins = np.bincount(cell, minlength=n_p * width).reshape(n_p, width)
        tp_bins = np.bincount(cell[is_tp], minlength=n_p * width).reshape(n_p, width)
        # at threshold k (0-based) a term counts when c >= k + 1
        n_pred = np.cumsum(pred_bins[:, ::-1], axis=1)[:, ::-1][:, 1:].T.copy()
        tp = np.cumsum(tp_bins[:, ::-1], axis=1)[:, ::-1][:, 1:].T.copy()
        return _Contrib(n_pred, tp, n_pred - tp, n_gt[None, :] - tp, n_gt), rows
    p_keys = p_rows.astype(np.int64) * n_terms + p_terms
    return _weighted_contributions(ns, n_p, g_keys, g_row, p_keys, p_row, p_codes, is_tp,
                                   n_tau, weights), rows


def _weighted_contributions(ns, n_p, g_keys, g_row, p_keys, p_row, p_codes, is_tp, n_tau,
                            weights) -> _Contrib:
    """Weighted sums as sequential per-protein sums over (code desc, term) order.

    Equal term sets give bit-equal sums (so a protein whose predictions are all correct has
    precision exactly 1, as in cafaeval).
    """
    n_terms = np.int64(ns.n_terms)
    # entries: every predicted term, plus ground-truth terms that are not predicted (c = 0)
    universe = max(int(g_keys.max(initial=0)), int(p_keys.max(initial=0))) + 1
    gt_only = ~_member(g_keys, p_keys, universe)
    e_row = np.concatenate([p_row, g_row[gt_only]])
    e_col = np.concatenate([p_keys % n_terms, g_keys[gt_only] % n_terms])
    e_c = np.concatenate([p_codes, np.zeros(int(gt_only.sum()), dtype=np.int64)])
    e_gt = np.concatenate([is_tp, np.ones(int(gt_only.sum()), dtype=bool)])
    order = np.lexsort((e_col, -e_c, e_row))
    e_row, e_col, e_c, e_gt = e_row[order], e_col[order], e_c[order], e_gt[order]
    w = weights[e_col]
    predicted = e_c > 0
    columns = np.stack([
        np.where(predicted, w, 0.0),  # n_pred
        np.where(predicted & e_gt, w, 0.0),  # tp
        np.where(predicted & ~e_gt, w, 0.0),  # fp
        np.where(e_gt, w, 0.0),  # gt
    ], axis=1)
    prefix = _segment_cumsum(e_row, columns, n_p, reverse=False)
    suffix_gt = _segment_cumsum(e_row, columns[:, 3:4], n_p, reverse=True)[:, 0]
    counts = np.bincount(e_row, minlength=n_p)
    row_start = np.zeros(n_p + 1, dtype=np.int64)
    np.cumsum(counts, out=row_start[1:])
    width = n_tau + 1
    bins = np.bincount(e_row * width + e_c, minlength=n_p * width).reshape(n_p, width)
    m = np.cumsum(bins[:, ::-1], axis=1)[:, ::-1][:, 1:].T  # (n_tau, n_p) entries with c > k
    n_gt = np.zeros(n_p)
    has = counts > 0
    n_gt[has] = prefix[row_start[1:][has] - 1, 3]
    last = row_start[:-1][None, :] + m - 1
    valid = m > 0
    safe_last = np.where(valid, last, 0)
    take = lambda j: np.where(valid, prefix[safe_last, j] if prefix.size else 0.0, 0.0)  # noqa: E731
    n_pred, tp, fp = take(0), take(1), take(2)
    nxt = row_start[:-1][None, :] + m
    rest = nxt < row_start[1:][None, :]
    safe_nxt = np.where(rest, nxt, 0)
    fn = np.where(rest, suffix_gt[safe_nxt] if suffix_gt.size else 0.0, 0.0)
    return _Contrib(n_pred, tp, fp, fn, n_gt)


def _segment_cumsum(seg: np.ndarray, values: np.ndarray, n_seg: int, reverse: bool) -> np.ndarray:
    """Sequential (left-to-right, or right-to-left) cumulative sums inside sorted segments.

    ``values`` (n, k) float; ``seg`` (n,) sorted segment ids. Exact sequential order, unlike a
    global cumsum minus offsets.
    """
    n = seg.size
    out = np.zeros_like(values)
    if n == 0:
        return out
    counts = np.bincount(seg, minlength=n_seg)
    starts = np.zeros(n_seg + 1, dtype=np.int64)
    np.cumsum(counts, out=starts[1:])
    rank = np.arange(n, dtype=np.int64) - starts[seg]
    if reverse:
        rank = counts[seg] - 1 - rank
    order = np.lexsort((seg, rank))  # by rank, then segment
    by_rank = np.bincount(rank, minlength=int(counts.max()))
    bounds = np.zeros(by_rank.size + 1, dtype=np.int64)
    np.cumsum(by_rank, out=bounds[1:])
    acc = np.zeros((n_seg, values.shape[1]))
    for r in range(by_rank.size):
        idx = order[bounds[r]:bounds[r + 1]]
        s = seg[idx]
        acc[s] += values[idx]
        out[idx] = acc[s]
    return out


def _sum_metrics(c: _Contrib) -> np.ndarray:
    """cafaeval's ``compute_confusion_matrix`` sums, (n_tau, 6): n, tp, fp, fn, pr, rc."""
    n_tau = c.n_pred.shape[0]
    metrics = np.zeros((n_tau, 6), dtype=float)
    n_gt = c.n_gt
    for k in range(n_tau):
        n_pred = np.ascontiguousarray(c.n_pred[k])
        tp = np.ascontiguousarray(c.tp[k])
        metrics[k, 0] = (n_pred > 0).sum()
        metrics[k, 1] = tp.sum()
        metrics[k, 2] = np.ascontiguousarray(c.fp[k]).sum()
        metrics[k, 3] = np.ascontiguousarray(c.fn[k]).sum()
        metrics[k, 4] = np.divide(tp, n_pred, out=np.zeros_like(tp, dtype="float"),
                                  where=n_pred > 0).sum()
        metrics[k, 5] = np.divide(tp, n_gt, out=np.zeros_like(n_gt, dtype="float"),
                                  where=n_gt > 0).sum()
    return metrics


def _f(pr: np.ndarray, rc: np.ndarray) -> np.ndarray:
    num = 2 * pr * rc
    den = pr + rc
    return np.divide(num, den, out=np.zeros_like(num, dtype=float), where=den != 0)


def _normalize(metrics: np.ndarray, name: str, tau: np.ndarray, ne: int, norm: str) -> pd.DataFrame:
    """cafaeval's ``normalize``: same columns, same arithmetic order."""
    if norm not in ("cafa", "pred", "gt"):
        raise EvaluationInputError(f"norm must be cafa, pred or gt, got {norm!r}")
    n = metrics[:, 0].copy()
    ne_arr = np.full(tau.size, ne)
    cols = {"n": n}
    for j, column in enumerate(BASE_COLUMNS[1:], start=1):
        den = n if (norm == "pred" or (norm == "cafa" and column == "pr")) else ne_arr
        cols[column] = np.divide(metrics[:, j], den, out=np.zeros_like(metrics[:, j], dtype=float),
                                 where=den > 0)
    cov = n / ne_arr if ne else np.zeros_like(n)
    tp, fp, fn = cols["tp"], cols["fp"], cols["fn"]
    pr_micro = np.divide(tp, tp + fp, out=np.zeros_like(tp, dtype=float), where=(tp + fp) > 0)
    rc_micro = np.divide(tp, tp + fn, out=np.zeros_like(tp, dtype=float), where=(tp + fn) > 0)
    frame = pd.DataFrame({
        "n": n, "tp": tp, "fp": fp, "fn": fn, "pr": cols["pr"], "rc": cols["rc"],
        "ns": [name] * tau.size, "tau": tau, "cov": cov, "mi": fp, "ru": fn,
        "f": _f(cols["pr"], cols["rc"]), "s": np.sqrt(fn ** 2 + fp ** 2),
        "pr_micro": pr_micro, "rc_micro": rc_micro, "f_micro": _f(pr_micro, rc_micro),
    })
    return frame


@dataclass
class _Setup:
    ontology: EvalOntology
    truths: dict[str, _Truth]
    tau: np.ndarray
    toi: dict[str, np.ndarray] | None
    known: dict[str, np.ndarray] | None
    lafa: bool
    norm: str


def _toi_masks(ontology: EvalOntology, toi) -> dict[str, np.ndarray]:
    """cafaeval-protea's ``update_toi``: per namespace, a mask of the listed terms.

    The masks of a set of terms (not a file) are built once per ontology and shared: never write to them.
    """
    if isinstance(toi, (str, Path)):
        return _read_toi_masks(ontology, toi)
    key = frozenset(toi)
    if key not in ontology.toi_masks:
        ontology.toi_masks[key] = _read_toi_masks(ontology, key)
    return ontology.toi_masks[key]


def _read_toi_masks(ontology: EvalOntology, toi) -> dict[str, np.ndarray]:
    if isinstance(toi, (str, Path)):
        terms = []
        with open_text(toi) as handle:
            for raw in handle:
                parts = raw.split()
                if parts:
                    terms.append(parts[0])
        if not terms:
            raise EvaluationInputError("empty terms-of-interest file", toi)
    else:
        terms = list(toi)
    masks = {name: np.zeros(ns.n_terms, dtype=bool) for name, ns in ontology.namespaces.items()}
    for term in terms:
        for name, ns in ontology.namespaces.items():
            i = ns.index.get(term)
            if i is not None:
                masks[name][i] = True
            elif term in ns.alt:
                masks[name][list(ns.alt[term])] = True
    return masks


def _known_keys(ontology: EvalOntology, truths: dict[str, _Truth], known) -> dict[str, np.ndarray]:
    if isinstance(known, (str, Path)):
        proteins, terms = _read_pairs(known, "known-terms")
    else:
        if not {"protein", "term"} <= set(known.columns):
            raise EvaluationInputError("known frame needs 'protein' and 'term' columns")
        proteins, terms = known["protein"].tolist(), known["term"].tolist()
    grouped = _group_pairs(ontology, proteins, terms)
    out: dict[str, np.ndarray] = {}
    for name, truth in truths.items():
        ns = ontology.namespaces[name]
        if name not in grouped:
            out[name] = np.zeros(0, dtype=np.int64)
            continue
        ids, rows, cols = grouped[name]
        # known rows -> ground-truth rows; pairs of proteins without ground truth are dropped
        truth_row = np.array([truth.row_of.get(p, -1) for p in ids], dtype=np.int64)
        rows = truth_row[rows]
        keep = rows >= 0
        out[name] = _propagated_keys(rows[keep], cols[keep], ns)
    return out


def _namespace_contribs(setup: _Setup, name: str, pred: _Cells, weighted: bool):
    ns = setup.ontology.namespaces[name]
    truth = setup.truths[name]
    mask = ns.toi_ia_mask if weighted else ns.toi_mask
    if setup.toi is not None:
        mask = mask & setup.toi[name]
    known = setup.known.get(name) if setup.known is not None else None
    return _contributions(ns, len(truth.proteins), truth.keys, pred, setup.tau.size, mask,
                          ns.ia if weighted else None, known, setup.lafa)


def _evaluate_setup(setup: _Setup, preds: dict[str, _Cells]) -> pd.DataFrame | None:
    frames, frames_w = [], []
    for name in setup.truths:
        pred = preds.get(name)
        if pred is None:
            continue
        contrib, rows = _namespace_contribs(setup, name, pred, weighted=False)
        ne = rows.size
        if ne == 0:
            logger.warning("%s: no protein with ground truth left to evaluate", name)
            continue
        frames.append(_normalize(_sum_metrics(contrib), name, setup.tau, ne, setup.norm))
        if setup.ontology.has_ia:
            contrib_w, rows_w = _namespace_contribs(setup, name, pred, weighted=True)
            frames_w.append(_normalize(_sum_metrics(contrib_w), name, setup.tau, rows_w.size,
                                       setup.norm))
    if not frames:
        return None
    df = pd.concat(frames)
    if frames_w:
        df = pd.merge(df, pd.concat(frames_w), on=["ns", "tau"], suffixes=("", "_w"))
    return df


def _setup(ontology: EvalOntology, truth_pairs, th_step, toi, known, norm) -> _Setup:
    truths = _build_truths(ontology, *truth_pairs)
    if not truths:
        raise EvaluationInputError("no ground-truth term is known to the ontology")
    toi_masks = _toi_masks(ontology, toi) if toi is not None else None
    known_keys = _known_keys(ontology, truths, known) if known is not None else None
    return _Setup(ontology, truths, threshold_grid(th_step), toi_masks, known_keys,
                  lafa=toi is not None or known is not None, norm=norm)


class SetupCache:
    """The set-up ground truth of one cell, built once for every method scored on it.

    Setting up a ground truth (grouping, propagating, the known terms and the terms of interest)
    does not depend on the predictions. Scoring several methods on one cell passes the same cache
    and the very same ``ground_truth``, ``known`` and ``toi`` objects to :func:`evaluate_frames`,
    :func:`bootstrap_cis` and :func:`paired_bootstraps`; an entry is reused only for those same
    objects (by identity, which the cache keeps alive) and the same ``th_step`` and ``norm``.
    The results are those of uncached calls.
    """

    def __init__(self) -> None:
        self._entries: list[tuple[tuple, _Setup]] = []

    def get(self, ontology: EvalOntology, ground_truth: pd.DataFrame, th_step, toi, known, norm) -> _Setup:
        key = (ontology, ground_truth, toi, known, float(th_step), norm)
        for held, setup in self._entries:
            if all(a is b for a, b in zip(held[:4], key[:4])) and held[4:] == key[4:]:
                return setup
        setup = _setup(ontology, _frame_truth(ground_truth), th_step, toi, known, norm)
        self._entries.append((key, setup))
        return setup


def _setup_of(ontology: EvalOntology, ground_truth: pd.DataFrame, opts: Mapping[str, Any]) -> _Setup:
    """The setup of ``ground_truth`` under ``opts`` (``th_step, toi, known, norm, setups``)."""
    args = (opts.get("th_step", 0.01), opts.get("toi"), opts.get("known"), opts.get("norm", "cafa"))
    cache = opts.get("setups")
    if cache is not None:
        return cache.get(ontology, ground_truth, *args)
    return _setup(ontology, _frame_truth(ground_truth), *args)


def _best_tables(df: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """cafaeval's best rows: first ``idxmax`` (``idxmin`` for s) per (filename, ns)."""
    out = {}
    for metric, how in BEST_METRICS:
        if metric not in df.columns:
            continue
        grouped = df.groupby(level=["filename", "ns"])[metric]
        index_best = grouped.idxmax() if how == "max" else grouped.idxmin()
        best = df.loc[list(index_best)].copy()
        cov_col = "cov_w" if metric.endswith("_w") else "cov"
        cov_max = df.groupby(level=["filename", "ns"])[cov_col].max()
        best["cov_max"] = [cov_max.loc[(f, ns)] for f, ns, _ in best.index]
        out[metric] = best
    return out


def _finish(dfs: list[pd.DataFrame]) -> tuple[pd.DataFrame | None, dict[str, pd.DataFrame]]:
    if not dfs:
        logger.info("No predictions evaluated")
        return None, {}
    df = pd.concat(dfs)
    df = df[df["cov"] > 0].reset_index(drop=True)
    df = df.set_index(["filename", "ns", "tau"])
    return df, _best_tables(df)


# --------------------------------------------------------------------------------------------
# public API


def cafa_eval(obo_file, pred_dir, gt_file, ia=None, no_orphans=False, norm="cafa", prop="max",
              max_terms=None, th_step=0.01, n_cpu=1, toi=None, known=None):
    """Evaluate every prediction file under ``pred_dir`` like cafaeval 1.3.0's ``cafa_eval``.

    Returns
    -------
    df_all : DataFrame indexed (filename, ns, tau), or None when nothing was evaluated
    dfs_best : dict metric -> DataFrame of best rows (with ``cov_max``)
    """
    n_threads = max(1, int(n_cpu or 1))
    ontology = EvalOntology.from_obo(obo_file, ia=ia, orphans=not no_orphans)
    setup = _setup(ontology, _read_pairs(gt_file, "ground-truth"), th_step, toi, known, norm)
    pred_folder = os.path.normpath(str(pred_dir)) + "/"
    if not os.path.isdir(pred_folder):
        raise EvaluationInputError("prediction folder does not exist", pred_dir)
    files = [os.path.join(root, f) for root, _, names in os.walk(pred_folder) for f in names]
    dfs = []
    for file_name in files:
        raw = _read_prediction_file(file_name, n_threads)
        preds = _build_predictions(ontology, setup.truths, raw, setup.tau, prop, max_terms,
                                   n_threads)
        if not preds:
            logger.warning("Prediction: %s, not evaluated (no overlap with the ground truth)",
                           file_name)
            continue
        df = _evaluate_setup(setup, preds)
        if df is None:
            continue
        df["filename"] = file_name.replace(pred_folder, "").replace("/", "_")
        dfs.append(df)
    return _finish(dfs)


def write_results(df_all, dfs_best, out_dir="results", th_step=0.01) -> None:
    """Write ``evaluation_all.tsv`` and ``evaluation_best_<metric>.tsv`` as cafaeval does."""
    if df_all is None:
        raise EvaluationInputError("no prediction was evaluated: nothing to write")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    decimals = int(np.ceil(-np.log10(th_step))) + 1
    fmt = f"%.{decimals}f"
    with atomic_write(out / "evaluation_all.tsv") as handle:
        df_all.to_csv(handle, float_format=fmt, sep="\t")
    for metric, frame in dfs_best.items():
        with atomic_write(out / f"evaluation_best_{metric}.tsv") as handle:
            frame.to_csv(handle, float_format=fmt, sep="\t")


def _frame_truth(ground_truth: pd.DataFrame) -> tuple[list[str], list[str]]:
    if not {"protein", "term"} <= set(ground_truth.columns):
        raise EvaluationInputError("ground_truth needs 'protein' and 'term' columns")
    if len(ground_truth) == 0:
        raise EvaluationInputError("empty ground truth")
    return ground_truth["protein"].astype(str).tolist(), ground_truth["term"].astype(str).tolist()


def _frame_raw(predictions: pd.DataFrame) -> _Raw:
    if not {"protein", "term", "score"} <= set(predictions.columns):
        raise EvaluationInputError("predictions need 'protein', 'term' and 'score' columns")
    return _Raw.from_values(
        predictions["protein"].astype(str).to_numpy(dtype=object),
        predictions["term"].astype(str).to_numpy(dtype=object),
        pd.to_numeric(predictions["score"], errors="raise").to_numpy(dtype=np.float64),
        np.arange(len(predictions), dtype=np.int64), "<predictions frame>")


def evaluate_frames(eval_ontology: EvalOntology, ground_truth: pd.DataFrame,
                    predictions: pd.DataFrame, known=None, toi=None, norm="cafa", prop="max",
                    max_terms=None, th_step=0.01, setups: SetupCache | None = None) -> pd.DataFrame:
    """cafaeval's all-threshold frame for one method, index (ns, tau), rows with cov > 0.

    ``ground_truth``: DataFrame ``protein, term`` (row order = file order);
    ``predictions``: DataFrame ``protein, term, score``; ``known``: DataFrame ``protein,
    term`` or a file; ``toi``: an iterable of terms or a file; ``setups``: a
    :class:`SetupCache` shared by the methods scored on this ground truth.
    """
    setup = _setup_of(eval_ontology, ground_truth, {"th_step": th_step, "toi": toi, "known": known, "norm": norm,
                                                     "setups": setups})
    preds = _build_predictions(eval_ontology, setup.truths, _frame_raw(predictions), setup.tau,
                               prop, max_terms)
    df = _evaluate_setup(setup, preds) if preds else None
    if df is None:
        columns = FRAME_COLUMNS.copy()
        return pd.DataFrame(columns=columns).set_index(["ns", "tau"])
    df = df[df["cov"] > 0].reset_index(drop=True)
    return df.set_index(["ns", "tau"])


def _ns_name(ns: str) -> str:
    return NAMESPACE_ALIASES.get(ns, ns)


def _ns_rows(df_all: pd.DataFrame, ns: str) -> pd.DataFrame:
    name = _ns_name(ns)
    frame = df_all.reset_index()
    if "filename" in frame.columns and frame["filename"].nunique() > 1:
        raise EvaluationInputError("df_all holds several prediction files: select one first")
    rows = frame[frame["ns"] == name]
    if rows.empty:
        raise EvaluationInputError(f"no evaluated rows for namespace {name!r}")
    return rows.reset_index(drop=True)


def best_rows(df_all: pd.DataFrame, metric: str = "f") -> pd.DataFrame:
    """The best row per namespace for ``metric`` (max, or min for ``s``/``s_w``), first tau."""
    frame = df_all.reset_index()
    if metric not in frame.columns:
        raise EvaluationInputError(f"unknown metric column {metric!r}")
    keys = ["filename", "ns"] if "filename" in frame.columns else ["ns"]
    grouped = frame.groupby(keys, sort=True)[metric]
    idx = grouped.idxmin() if metric in ("s", "s_w") else grouped.idxmax()
    return frame.loc[list(idx)].set_index(keys + ["tau"])


def fmax_score(df_all: pd.DataFrame, ns: str, weighted: bool = False) -> tuple[float, float]:
    """(Fmax, tau at the first maximum) for one namespace (``"BP"`` or the full name)."""
    rows = _ns_rows(df_all, ns)
    column = "f_w" if weighted else "f"
    i = rows[column].idxmax()
    return float(rows.loc[i, column]), float(rows.loc[i, "tau"])


def smin_loss(df_all: pd.DataFrame, ns: str, weighted: bool = False) -> tuple[float, float]:
    """(Smin, tau at the first minimum) for one namespace."""
    rows = _ns_rows(df_all, ns)
    column = "s_w" if weighted else "s"
    i = rows[column].idxmin()
    return float(rows.loc[i, column]), float(rows.loc[i, "tau"])


def threshold_curve(df_all: pd.DataFrame, ns: str, weighted: bool = False) -> pd.DataFrame:
    """Precision/recall/F at every evaluated threshold: columns ``tau, pr, rc, f``."""
    rows = _ns_rows(df_all, ns)
    sfx = "_w" if weighted else ""
    return pd.DataFrame({"tau": rows["tau"], "pr": rows["pr" + sfx], "rc": rows["rc" + sfx],
                         "f": rows["f" + sfx]})


# --------------------------------------------------------------------------------------------
# bootstrap


_METRICS = {"f": (False, "f", "max"), "f_w": (True, "f", "max"), "s": (False, "s", "min"),
            "s_w": (True, "s", "min"), "f_micro": (False, "f_micro", "max"),
            "f_micro_w": (True, "f_micro", "max")}


_SUMS = {"f": ("pr", "rc"), "s": ("fp", "fn"), "f_micro": ("tp", "fp", "fn")}


def _replicate_metric(c: _Contrib, counts: np.ndarray, kind: str, norm: str,
                      column: int | None = None) -> np.ndarray:
    """Best metric per replicate (or, with ``column``, the metric at that threshold index).

    ``counts`` (n_rep, n_proteins) multiplicities. At a fixed threshold no protein may be covered
    in a replicate: F is then 0 (nothing predicted), S undefined (NaN).
    """
    valid = c.n_pred > 0  # (n_tau, n_p)
    cnt = counts.astype(float)
    n = cnt @ valid.T.astype(float)  # (n_rep, n_tau)
    ne = cnt.sum(axis=1, keepdims=True)
    # only the sums the metric reads (each computed exactly as when all five were)
    sums = {}
    for key in _SUMS[kind]:
        if key == "pr":
            sums[key] = cnt @ np.divide(c.tp, c.n_pred, out=np.zeros(c.tp.shape), where=valid).T
        elif key == "rc":
            sums[key] = cnt @ np.divide(c.tp, c.n_gt[None, :], out=np.zeros(c.tp.shape),
                                        where=(c.n_gt > 0)[None, :]).T
        else:
            sums[key] = cnt @ getattr(c, key).T.astype(float)

    def div(a, b):
        b = np.broadcast_to(b, a.shape)
        return np.divide(a, b, out=np.zeros_like(a), where=b > 0)

    norm_sums = {}
    for key, value in sums.items():
        den = n if (norm == "pred" or (norm == "cafa" and key == "pr")) else ne
        norm_sums[key] = div(value, den)
    if kind == "f":
        values = _f(norm_sums["pr"], norm_sums["rc"])
    elif kind == "s":
        values = np.sqrt(norm_sums["fn"] ** 2 + norm_sums["fp"] ** 2)
    else:
        tp, fp, fn = norm_sums["tp"], norm_sums["fp"], norm_sums["fn"]
        values = _f(div(tp, tp + fp), div(tp, tp + fn))
    covered = n > 0
    if column is not None:
        if column < 0:  # the threshold is off the grid: nothing is predicted there
            return np.full(counts.shape[0], np.nan if kind == "s" else 0.0)
        return np.where(covered[:, column], values[:, column], np.nan if kind == "s" else 0.0)
    fill = -np.inf if kind != "s" else np.inf
    values = np.where(covered, values, fill)
    best = values.max(axis=1) if kind != "s" else values.min(axis=1)
    return np.where(np.isfinite(best), best, np.nan)


def _check_metric(eval_ontology, metric: str) -> tuple[bool, str]:
    if metric not in _METRICS:
        raise EvaluationInputError(f"metric must be one of {sorted(_METRICS)}, got {metric!r}")
    weighted, kind, _ = _METRICS[metric]
    if weighted and not eval_ontology.has_ia:
        raise EvaluationInputError(f"metric {metric!r} needs IA weights on the ontology")
    return weighted, kind


def _bootstrap_setup(eval_ontology, ground_truth, predictions_list, metric, opts):
    weighted, kind = _check_metric(eval_ontology, metric)
    norm = opts.get("norm", "cafa")
    setup = _setup_of(eval_ontology, ground_truth, opts)
    per_method = []
    for predictions in predictions_list:
        preds = _build_predictions(eval_ontology, setup.truths, _frame_raw(predictions),
                                   setup.tau, opts.get("prop", "max"), opts.get("max_terms"))
        per_ns = {}
        for name in setup.truths:
            pred = preds.get(name, _Cells.empty())
            contrib, rows = _namespace_contribs(setup, name, pred, weighted)
            per_ns[name] = (contrib, rows)
        per_method.append(per_ns)
    return setup, kind, norm, per_method


def _resampled_counts(codes: np.ndarray, n_boot: int, rng: np.random.Generator):
    """Multiplicity matrices (size, n_units) of ``n_boot`` resamples, 100 replicates at a time.

    ``codes`` are the units' cluster codes (``core.homology.cluster_codes``): clusters are drawn
    with replacement and every protein of a drawn cluster counts as often as its cluster was
    drawn. With one protein per cluster (``arange(n)``) it is the protein bootstrap: one code path
    for both levels, and the draws are identical for every caller with one seed.
    """
    from tempo_assets.core.homology import cluster_resample_counts

    progress = Progress("bootstrap", n_boot, "replicates")
    for counts in cluster_resample_counts(codes, n_boot, rng):
        yield counts
        progress.advance(len(counts))


def _unit_codes(proteins: list[str], clusters) -> np.ndarray:
    from tempo_assets.core.homology import cluster_codes

    return cluster_codes(proteins, clusters)


def _tau_column(tau_grid: np.ndarray, tau: float | None) -> int | None:
    if tau is None:
        return None
    hit = np.flatnonzero(np.isclose(tau_grid, float(tau), rtol=0, atol=1e-9))
    return int(hit[0]) if hit.size else -1


def _levels(clusters) -> list[tuple[str, Any]]:
    """(column prefix, clusters) of each bootstrap level: proteins, then clusters when given."""
    return [("", None)] + ([("cluster_", clusters)] if clusters is not None else [])


def bootstrap_ci(eval_ontology, ground_truth, predictions, metric="f", n_boot=1000, seed=0,
                 alpha=0.05, tau=None, clusters=None, subsets=None, **opts) -> dict[str, dict[str, float]]:
    """Percentile bootstrap CI of the best-threshold metric, resampling proteins (and clusters).

    Each replicate draws the namespace's evaluated proteins with replacement and re-picks the
    best threshold; with ``tau`` (a threshold fixed beforehand, e.g. on VALID) every replicate is
    read at that threshold instead. With ``clusters`` (protein -> cluster id, or a frame
    ``protein, cluster`` of ``core.homology.homology_clusters``) a second interval resamples
    clusters (``cluster_low``, ``cluster_high``, ``n_clusters``), drawn by the same code with its
    own generator of ``seed``, so the protein-level interval is unchanged by it. ``subsets``
    (protein -> label, e.g. an identity stratum) adds ``subsets: {label: {estimate, n_proteins}}``,
    the metric on each subset's proteins alone. ``n_boot=0`` gives the estimate only.
    Returns ``{ns: {estimate, low, high, n_proteins, ...}}``.
    """
    return bootstrap_cis(eval_ontology, ground_truth, predictions, [(metric, tau, subsets)], n_boot=n_boot,
                         seed=seed, alpha=alpha, clusters=clusters, **opts)[0]


def bootstrap_cis(eval_ontology, ground_truth, predictions, requests, n_boot=1000, seed=0, alpha=0.05,
                  clusters=None, **opts) -> list[dict[str, dict[str, float]]]:
    """:func:`bootstrap_ci` for several ``(metric, tau, subsets)`` requests on one set of predictions.

    The ground truth and the predictions are set up once (and the contributions once per
    weighting) instead of once per metric; each request draws from its own generator of
    ``seed``, so every result equals the corresponding :func:`bootstrap_ci` call.
    """
    checked = [(metric, tau, subsets, *_check_metric(eval_ontology, metric)) for metric, tau, subsets in requests]
    norm = opts.get("norm", "cafa")
    setup = _setup_of(eval_ontology, ground_truth, opts)
    preds = _build_predictions(eval_ontology, setup.truths, _frame_raw(predictions),
                               setup.tau, opts.get("prop", "max"), opts.get("max_terms"))
    contribs: dict[bool, dict] = {}
    results = []
    for metric, tau, subsets, weighted, kind in checked:
        if weighted not in contribs:
            contribs[weighted] = {name: _namespace_contribs(setup, name, preds.get(name, _Cells.empty()), weighted)
                                  for name in setup.truths}
        results.append(_interval(setup, contribs[weighted], kind, norm, _tau_column(setup.tau, tau), n_boot, seed,
                                 alpha, clusters, subsets))
    return results


def _interval(setup, per_ns, kind, norm, column, n_boot, seed, alpha, clusters, subsets):
    rngs = {prefix: np.random.default_rng(seed) for prefix, _ in _levels(clusters)}
    out = {}
    for name, (contrib, rows) in per_ns.items():
        n_p = rows.size
        if n_p == 0:
            continue
        proteins = [setup.truths[name].proteins[r] for r in rows]
        estimate = _replicate_metric(contrib, np.ones((1, n_p)), kind, norm, column)[0]
        result = {"estimate": float(estimate), "n_proteins": int(n_p)}
        for prefix, level in (_levels(clusters) if n_boot else []):
            codes = _unit_codes(proteins, level)
            values = np.concatenate([_replicate_metric(contrib, counts, kind, norm, column)
                                     for counts in _resampled_counts(codes, n_boot, rngs[prefix])])
            result[f"{prefix}low"] = float(np.nanquantile(values, alpha / 2))
            result[f"{prefix}high"] = float(np.nanquantile(values, 1 - alpha / 2))
            if prefix:
                result["n_clusters"] = int(codes.max()) + 1
        if subsets is not None:
            labels = np.array([subsets.get(p) for p in proteins], dtype=object)
            result["subsets"] = {}
            for label in sorted({x for x in labels if x is not None}):
                member = (labels == label).astype(float)[None, :]
                result["subsets"][label] = {
                    "estimate": float(_replicate_metric(contrib, member, kind, norm, column)[0]),
                    "n_proteins": int(member.sum())}
        out[name] = result
    return out


def paired_bootstrap(eval_ontology, ground_truth, predictions_a, predictions_b, metric="f",
                     n_boot=1000, seed=0, alpha=0.05, tau_a=None, tau_b=None, clusters=None,
                     **opts) -> dict[str, dict[str, float]]:
    """Bootstrap of ``metric(a) - metric(b)`` with the same resampled proteins for both.

    With ``tau_a`` / ``tau_b`` (thresholds fixed beforehand, e.g. each method's VALID threshold)
    each method is read at its own threshold in every replicate instead of re-picking its best.
    With ``clusters`` (as in :func:`bootstrap_ci`) both methods also see the same resampled
    clusters: ``cluster_low``, ``cluster_high``, ``cluster_p_value``, ``n_clusters``.

    ``p_value`` is two-sided: twice the smaller share of replicate differences on either side
    of 0 (capped at 1; 0 when every replicate lies on one side: report ``< 1/n_boot``).
    Returns ``{ns: {delta, low, high, p_value, n_proteins, ...}}``.
    """
    result = paired_bootstraps(eval_ontology, ground_truth, {"a": predictions_a, "b": predictions_b},
                               [("a", "b", tau_a, tau_b)], metric=metric, n_boot=n_boot, seed=seed, alpha=alpha,
                               clusters=clusters, strict=True, **opts)
    return result[0]


def paired_bootstraps(eval_ontology, ground_truth, predictions, pairs, metric="f", n_boot=1000, seed=0,
                      alpha=0.05, clusters=None, strict=False, **opts) -> list[dict[str, dict[str, float]] | None]:
    """:func:`paired_bootstrap` of several ``(a, b, tau_a, tau_b)`` pairs of ``predictions`` (name -> frame).

    The ground truth is set up once, each method's predictions once, and each (method, threshold)
    is evaluated on the resampled proteins once for all the pairs it is in: every replicate of a
    pair sees the draws a separate :func:`paired_bootstrap` call would (each pair starts from the
    seed), so the results are those calls'. A pair whose interval is undefined (a method covering
    no protein at any threshold) is None, or raises with ``strict``.
    """
    _, kind = _check_metric(eval_ontology, metric)
    weighted = _METRICS[metric][0]
    norm = opts.get("norm", "cafa")
    setup = _setup_of(eval_ontology, ground_truth, opts)
    contribs: dict[str, dict] = {}

    def contrib(method: str) -> dict:
        if method not in contribs:
            preds = _build_predictions(eval_ontology, setup.truths, _frame_raw(predictions[method]),
                                       setup.tau, opts.get("prop", "max"), opts.get("max_terms"))
            contribs[method] = {name: _namespace_contribs(setup, name, preds.get(name, _Cells.empty()), weighted)
                                for name in setup.truths}
        return contribs[method]

    replicates: dict[tuple, np.ndarray] = {}

    def values_of(method: str, name: str, column, prefix: str, codes: np.ndarray) -> np.ndarray:
        key = (method, name, column, prefix)
        if key not in replicates:
            c = contrib(method)[name][0]
            rng = np.random.default_rng(seed)
            replicates[key] = np.concatenate([_replicate_metric(c, counts, kind, norm, column)
                                              for counts in _resampled_counts(codes, n_boot, rng)])
        return replicates[key]

    out: list = []
    for a, b, tau_a, tau_b in pairs:
        col_a, col_b = _tau_column(setup.tau, tau_a), _tau_column(setup.tau, tau_b)
        try:
            result_ns = {}
            for name in setup.truths:
                ca, rows = contrib(a)[name]
                cb, rows_b = contrib(b)[name]
                if not np.array_equal(rows, rows_b):
                    raise EvaluationInputError(f"{name}: the two methods are scored on different proteins")
                n_p = rows.size
                if n_p == 0:
                    continue
                proteins = [setup.truths[name].proteins[r] for r in rows]
                ones = np.ones((1, n_p))
                delta = (_replicate_metric(ca, ones, kind, norm, col_a)[0]
                         - _replicate_metric(cb, ones, kind, norm, col_b)[0])
                result = {"delta": float(delta)}
                for prefix, level in _levels(clusters):
                    codes = _unit_codes(proteins, level)
                    values = values_of(a, name, col_a, prefix, codes) - values_of(b, name, col_b, prefix, codes)
                    values = values[~np.isnan(values)]
                    p = 2 * min(np.mean(values <= 0), np.mean(values >= 0)) if values.size else math.nan
                    result.update({f"{prefix}low": float(np.quantile(values, alpha / 2)),
                                   f"{prefix}high": float(np.quantile(values, 1 - alpha / 2)),
                                   f"{prefix}p_value": float(min(1.0, p))})
                    if prefix:
                        result["n_clusters"] = int(codes.max()) + 1
                result["n_proteins"] = int(n_p)
                result_ns[name] = result
            out.append(result_ns)
        except IndexError:
            # np.quantile of no replicate: one method covers no protein at any threshold
            if strict:
                raise
            out.append(None)
    return out
