"""Max propagation of sparse threshold codes up a namespace's graph, by term height, in cache-sized blocks.

Part of the evaluator package (see ``tempo_assets/core/evaluation/__init__.py``)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from tempo_assets.core.base.arrays import concat_ranges as _ranges
from tempo_assets.core.evaluation.ontology import _Namespace


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
    if rows.size == 0:
        return _Cells.empty()
    layout = _level_layout(ns)
    plan = _block_plan(rows, cols, codes, ns.n_terms, layout[1])
    size = ns.n_terms * plan.width
    sweep = _Sweep(layout, plan.shift, np.zeros(size, dtype=plan.dtype),
                   np.zeros(size, dtype=bool) if flag_keys is not None else None)
    for block in range(plan.n_blocks):
        lo, hi = plan.cuts[block], plan.cuts[block + 1]
        if lo == hi:
            continue
        start = block * plan.width
        np.maximum.at(sweep.matrix, plan.flat_in[lo:hi], plan.codes[lo:hi])
        raw = sweep.matrix != 0 if mode == "fill" else None
        flag_at = sweep.set_flags(flag_keys, start, ns.n_terms) if flag_keys is not None else None
        sweep.by_height(start, raw)
        sweep.matrix.fill(0)
        if flag_at is not None:
            sweep.flag_buf[flag_at] = False
    return sweep.cells()


@dataclass(frozen=True)
class _BlockPlan:
    """Raw entries cut into blocks of ``width = 2**shift`` rows, as flat (term position, row) cells."""

    shift: int
    n_blocks: int
    dtype: type
    flat_in: np.ndarray
    codes: np.ndarray
    cuts: np.ndarray

    @property
    def width(self) -> int:
        return 1 << self.shift


def _block_plan(rows: np.ndarray, cols: np.ndarray, codes: np.ndarray, n_terms: int,
                position: np.ndarray) -> _BlockPlan:
    """The smallest code type, the rows per block (a cache-sized matrix) and each block's entries."""
    top = int(codes.max())
    dtype = np.uint8 if top < 256 else (np.uint16 if top < 65536 else np.int64)
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
    return _BlockPlan(shift, n_blocks, dtype, flat_in, codes, cuts)


@dataclass
class _Sweep:
    """One propagation's reused buffers (a block's flat code matrix, its flags) and its output cells."""

    layout: tuple  # _level_layout: (order, position, bounds, ptr, parents)
    shift: int
    matrix: np.ndarray
    flag_buf: np.ndarray | None
    out: tuple = field(default_factory=lambda: ([], [], [], []))

    def set_flags(self, flag_keys: np.ndarray, start: int, n_terms: int) -> np.ndarray:
        """Flag the block's cells among ``flag_keys``; returns their flat positions (to clear)."""
        position = self.layout[1]
        f_lo, f_hi = np.searchsorted(flag_keys, [start * n_terms, (start + (1 << self.shift)) * n_terms])
        fk = flag_keys[f_lo:f_hi]
        flag_at = (position[fk % n_terms] << self.shift) | (fk // n_terms - start)
        self.flag_buf[flag_at] = True
        return flag_at

    def by_height(self, start: int, raw: np.ndarray | None) -> None:
        """Finalise the block's terms height by height, pushing each non-zero cell to its parents."""
        order, _, bounds, ptr, parents = self.layout
        shift, dtype = self.shift, self.matrix.dtype
        per_word = 8 // dtype.itemsize
        for a, b in zip(bounds[:-1], bounds[1:]):
            # (x != 0 then a boolean nonzero: numpy's fast path, several times quicker than
            # nonzero on an integer array)
            sub = self.matrix[a << shift:b << shift].view(np.uint64)
            words = np.flatnonzero(sub != 0)
            if words.size == 0:
                continue
            # the non-zero cells inside the non-zero words, found on a compact copy
            packed = sub[words].view(dtype)
            hit = np.flatnonzero(packed != 0)
            values = packed[hit]
            flat = words[hit // per_word] * per_word + hit % per_word
            r = flat & ((1 << shift) - 1)
            pos = a + (flat >> shift)
            self.out[0].append((start + r).astype(np.int32))
            self.out[1].append(order[pos].astype(np.int32))
            self.out[2].append(values)
            if self.flag_buf is not None:
                self.out[3].append(self.flag_buf[(a << shift) + flat])
            counts = ptr[pos + 1] - ptr[pos]
            if not counts.any():
                continue
            targets = (parents[_ranges(ptr[pos], counts)] << shift) | np.repeat(r, counts)
            values = np.repeat(values, counts)
            if raw is not None:
                open_cell = ~raw[targets]
                targets, values = targets[open_cell], values[open_cell]
            np.maximum.at(self.matrix, targets, values)

    def cells(self) -> _Cells:
        rows, terms, codes, flags = self.out
        return _Cells(np.concatenate(rows), np.concatenate(terms), np.concatenate(codes),
                      np.concatenate(flags) if self.flag_buf is not None else None)


def _propagated_keys(rows: np.ndarray, cols: np.ndarray, ns: _Namespace) -> np.ndarray:
    """Sorted int64 keys ``row * n_terms + term`` of the boolean ``max`` propagation."""
    cells = _propagate(rows, cols, np.ones(rows.size, dtype=np.int64), ns, "max")
    return np.sort(cells.keys(ns.n_terms))
