"""Per-threshold counts and metrics (F, S, weighted, micro) of one namespace, and the prepared setup of a ground truth.

Part of the evaluator package (see ``tempo_assets/core/evaluation/__init__.py``)."""

from __future__ import annotations

import hashlib
import logging
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from tempo_assets.core.evaluation.ontology import (
    BASE_COLUMNS, EvalOntology, EvaluationInputError, _Namespace, threshold_grid,
)
from tempo_assets.core.evaluation.predictions import (
    _Truth, _build_predictions, _build_truths, _frame_raw, _frame_truth, _known_keys, _prediction_columns, _toi_masks,
)
from tempo_assets.core.evaluation.propagation import _Cells

logger = logging.getLogger(__name__)

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


@dataclass(frozen=True)
class _Scope:
    """Which cells a namespace's contributions count: terms of ``term_mask``, ``weights`` (IA, or
    None for plain counts), minus ``known_keys`` (LAFA's known terms), only proteins with ground
    truth left when ``lafa``."""

    term_mask: np.ndarray
    weights: np.ndarray | None
    known_keys: np.ndarray | None
    lafa: bool


@dataclass(frozen=True)
class _Entries:
    """Predicted cells: protein row, term, threshold code (taus counted) and whether in the ground truth."""

    rows: np.ndarray
    terms: np.ndarray
    codes: np.ndarray
    is_tp: np.ndarray

    def take(self, mask: np.ndarray) -> _Entries:
        return _Entries(self.rows[mask], self.terms[mask], self.codes[mask], self.is_tp[mask])


def _scoped_entries(pred: _Cells, scope: _Scope, universe: int, n_terms: np.int64) -> _Entries:
    """The predicted cells the scope counts, codes shifted to the number of thresholds counted."""
    # pred.flags marks the cells in the full ground truth; a kept cell's term is in term_mask
    # and its key is not known, so the flag is also membership in the filtered ground truth
    entries = _Entries(pred.rows, pred.terms, pred.codes, pred.flags)
    keep = None if scope.term_mask.all() else scope.term_mask[pred.terms]
    if scope.weights is not None:
        # unweighted counts drop code 1 (below the first threshold) with bin 0 anyway
        keep = pred.codes >= 2 if keep is None else keep & (pred.codes >= 2)
    if keep is not None:
        entries = entries.take(keep)
    entries = _Entries(entries.rows, entries.terms, entries.codes.astype(np.int64) - 1, entries.is_tp)  # c: taus counted
    if scope.known_keys is not None and scope.known_keys.size:
        entries = entries.take(~_member(entries.rows.astype(np.int64) * n_terms + entries.terms, scope.known_keys,
                                        universe))
    return entries


def _plain_contributions(n_p: int, g_row: np.ndarray, p_row: np.ndarray, entries: _Entries, n_tau: int) -> _Contrib:
    """Per-protein counts per threshold from per-bin counts (reverse cumulative sums)."""
    n_gt = np.bincount(g_row, minlength=n_p).astype(np.int64)
    width = n_tau + 1
    cell = p_row * width + entries.codes
    pred_bins = np.bincount(cell, minlength=n_p * width).reshape(n_p, width)
    tp_bins = np.bincount(cell[entries.is_tp], minlength=n_p * width).reshape(n_p, width)
    # at threshold k (0-based) a term counts when c >= k + 1
    n_pred = np.cumsum(pred_bins[:, ::-1], axis=1)[:, ::-1][:, 1:].T.copy()
    tp = np.cumsum(tp_bins[:, ::-1], axis=1)[:, ::-1][:, 1:].T.copy()
    return _Contrib(n_pred, tp, n_pred - tp, n_gt[None, :] - tp, n_gt)


def _contributions(ns: _Namespace, n_rows: int, gt_keys: np.ndarray, pred: _Cells,
                   n_tau: int, scope: _Scope) -> tuple[_Contrib, np.ndarray]:
    """Per-protein quantities for the cells ``scope`` counts; returns (contrib, kept rows)."""
    n_terms = np.int64(ns.n_terms)
    g_keys = gt_keys[scope.term_mask[gt_keys % n_terms]]
    entries = _scoped_entries(pred, scope, n_rows * int(n_terms), n_terms)
    if scope.known_keys is not None and scope.known_keys.size:
        g_keys = g_keys[~_isin_sorted(g_keys, scope.known_keys)]
    rows = np.arange(n_rows, dtype=np.int64)
    if scope.lafa:
        has_gt = np.zeros(n_rows, dtype=bool)
        has_gt[g_keys // n_terms] = True
        rows = np.flatnonzero(has_gt)
        remap = np.full(n_rows, -1, dtype=np.int64)
        remap[rows] = np.arange(rows.size)
        entries = entries.take(has_gt[entries.rows])
        g_row = remap[g_keys // n_terms]
        p_row = remap[entries.rows]
    else:
        g_row = g_keys // n_terms
        p_row = entries.rows.astype(np.int64)
    if scope.weights is None:
        return _plain_contributions(rows.size, g_row, p_row, entries, n_tau), rows
    p_keys = entries.rows.astype(np.int64) * n_terms + entries.terms
    predicted = _Entries(p_row, p_keys, entries.codes, entries.is_tp)
    return _weighted_contributions(ns, rows.size, (g_keys, g_row), predicted, n_tau, scope.weights), rows


def _weighted_contributions(ns, n_p: int, truth: tuple[np.ndarray, np.ndarray], predicted: _Entries, n_tau: int,
                            weights: np.ndarray) -> _Contrib:
    """Weighted sums as sequential per-protein sums over (code desc, term) order.

    ``truth`` is (ground-truth keys, their rows); ``predicted`` holds rows and keys (in ``terms``).
    Equal term sets give bit-equal sums (so a protein whose predictions are all correct has
    precision exactly 1, as in cafaeval).
    """
    (g_keys, g_row), (p_row, p_keys, p_codes, is_tp) = truth, (
        predicted.rows, predicted.terms, predicted.codes, predicted.is_tp)
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
    return _weighted_sums(e_row, e_c, columns, n_p, n_tau)


def _weighted_sums(e_row: np.ndarray, e_c: np.ndarray, columns: np.ndarray, n_p: int, n_tau: int) -> _Contrib:
    """Per-threshold sums of the sorted entries' weight ``columns`` (n_pred, tp, fp, gt) per protein."""
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
    global cumsum minus offsets: the segments of each length class (up to the next power of two)
    are laid out as the rows of one zero-padded (rows, width, k) block, whose ``cumsum`` along the
    width adds each row's entries one after the other (padding trails, so it never adds in).
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
    # a segment of c entries goes to the block of width 2**bit_length(c - 1) (1, 2, 4, ... >= c)
    width_bits = np.frexp(np.maximum(counts - 1, 0))[1]
    width_bits[counts == 0] = -1
    entry_bits = width_bits[seg]
    row_of = np.empty(n_seg, dtype=np.int64)
    for bits in np.unique(width_bits[counts > 0]):
        segments = np.flatnonzero(width_bits == bits)
        row_of[segments] = np.arange(segments.size)
        idx = np.flatnonzero(entry_bits == bits)
        rows, cols = row_of[seg[idx]], rank[idx]
        block = np.zeros((segments.size, 1 << int(bits), values.shape[1]), dtype=values.dtype)
        block[rows, cols] = values[idx]
        np.cumsum(block, axis=1, out=block)
        out[idx] = block[rows, cols]
    return out


def _sum_metrics(c: _Contrib) -> np.ndarray:
    """cafaeval's ``compute_confusion_matrix`` sums, (n_tau, 6): n, tp, fp, fn, pr, rc.

    Every threshold's row summed at once: a reduction along the last axis of a C-contiguous
    array sums each row pairwise, as numpy sums that row alone, so the sums are cafaeval's bits.
    """
    n_pred, tp = np.ascontiguousarray(c.n_pred), np.ascontiguousarray(c.tp)
    n_gt = c.n_gt
    metrics = np.empty((n_pred.shape[0], 6), dtype=float)
    metrics[:, 0] = (n_pred > 0).sum(axis=1)
    metrics[:, 1] = tp.sum(axis=1)
    metrics[:, 2] = np.ascontiguousarray(c.fp).sum(axis=1)
    metrics[:, 3] = np.ascontiguousarray(c.fn).sum(axis=1)
    metrics[:, 4] = np.divide(tp, n_pred, out=np.zeros(tp.shape), where=n_pred > 0).sum(axis=1)
    recall = np.divide(tp, n_gt[None, :], out=np.zeros(tp.shape), where=(n_gt > 0)[None, :])
    metrics[:, 5] = recall.sum(axis=1)
    return metrics


def _f(pr: np.ndarray, rc: np.ndarray) -> np.ndarray:
    num = 2 * pr * rc
    den = pr + rc
    return np.divide(num, den, out=np.zeros_like(num, dtype=float), where=den != 0)


def _normalize(metrics: np.ndarray, name: str, tau: np.ndarray, ne: int, norm: str) -> pd.DataFrame:
    """cafaeval's ``normalize``: same columns (``FRAME_COLUMNS``), same arithmetic order."""
    columns = _normalized(metrics, tau, ne, norm)
    return pd.DataFrame({**{c: columns[c] for c in BASE_COLUMNS}, "ns": [name] * tau.size,
                         **{c: v for c, v in columns.items() if c not in BASE_COLUMNS}})


def _normalized(metrics: np.ndarray, tau: np.ndarray, ne: int, norm: str) -> dict[str, np.ndarray]:
    """:func:`_normalize`'s columns but ``ns``, in its order: cafaeval's ``normalize`` arithmetic."""
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
    return {"n": n, "tp": tp, "fp": fp, "fn": fn, "pr": cols["pr"], "rc": cols["rc"], "tau": tau, "cov": cov,
            "mi": fp, "ru": fn, "f": _f(cols["pr"], cols["rc"]), "s": np.sqrt(fn ** 2 + fp ** 2),
            "pr_micro": pr_micro, "rc_micro": rc_micro, "f_micro": _f(pr_micro, rc_micro)}


class _Lru(OrderedDict):
    """A dict that keeps its ``limit`` most recently used entries."""

    def __init__(self, limit: int) -> None:
        super().__init__()
        self.limit = limit

    def recent(self, key) -> Any:
        """The entry under ``key`` (now the most recently used), or None."""
        if key not in self:
            return None
        self.move_to_end(key)
        return self[key]

    def put(self, key, value) -> None:
        self[key] = value
        while len(self) > self.limit:
            self.popitem(last=False)


@dataclass
class _Setup:
    """A ground truth set up for scoring, with what is derived from it once for every method.

    ``key`` says what it was built from (:func:`_setup_key`); ``prepared`` is the least recently used
    store of prepared predictions (:func:`prepared_predictions`) it shares with the other setups
    of its :class:`SetupCache`; ``rows`` ``(namespace, weighted) -> evaluated rows``, ``codes``
    ``(namespace, weighted, clusters key) -> cluster codes`` and ``replicates`` (bootstrap values per
    method, reading and draws) are filled by the bootstrap.
    """

    ontology: EvalOntology
    truths: dict[str, _Truth]
    tau: np.ndarray
    toi: dict[str, np.ndarray] | None
    known: dict[str, np.ndarray] | None
    lafa: bool
    norm: str
    key: tuple = ()
    prepared: _Lru = field(default_factory=lambda: _Lru(0), repr=False)
    rows: dict = field(default_factory=dict, repr=False)
    codes: dict = field(default_factory=dict, repr=False)
    replicates: dict = field(default_factory=dict, repr=False)


def _namespace_contribs(setup: _Setup, name: str, pred: _Cells, weighted: bool):
    ns = setup.ontology.namespaces[name]
    truth = setup.truths[name]
    mask = ns.toi_ia_mask if weighted else ns.toi_mask
    if setup.toi is not None:
        mask = mask & setup.toi[name]
    known = setup.known.get(name) if setup.known is not None else None
    scope = _Scope(mask, ns.ia if weighted else None, known, setup.lafa)
    return _contributions(ns, len(truth.proteins), truth.keys, pred, setup.tau.size, scope)


def _evaluate_setup(setup: _Setup, prepared: _Prepared) -> pd.DataFrame | None:
    frames, frames_w = [], []
    for name in setup.truths:
        if name not in prepared.preds:
            continue
        contrib, rows = prepared.contribs(weighted=False)[name]
        ne = rows.size
        if ne == 0:
            logger.warning("%s: no protein with ground truth left to evaluate", name)
            continue
        frames.append(_normalize(_sum_metrics(contrib), name, setup.tau, ne, setup.norm))
        if setup.ontology.has_ia:
            contrib_w, rows_w = prepared.contribs(weighted=True)[name]
            frames_w.append(_normalize(_sum_metrics(contrib_w), name, setup.tau, rows_w.size,
                                       setup.norm))
    if not frames:
        return None
    df = pd.concat(frames)
    if frames_w:
        # both frames hold the same (ns, tau) rows in the same order: cafaeval's merge on them is
        # the weighted columns put beside the plain ones
        weighted = pd.concat(frames_w, ignore_index=True).drop(columns=["ns", "tau"]).add_suffix("_w")
        df = pd.concat([df.reset_index(drop=True), weighted], axis=1)
    return df


def namespace_columns(setup: _Setup, prepared: _Prepared, name: str) -> dict[str, np.ndarray] | None:
    """One namespace's rows of :func:`_evaluate_setup` as columns (every threshold, ``ns`` left out): the
    plain ones, then the weighted ones suffixed ``_w`` (``tau`` once) when the ontology has IA; None where
    it evaluates nothing (no predictions, or no protein with ground truth left)."""
    if name not in prepared.preds:
        return None
    contrib, rows = prepared.contribs(weighted=False)[name]
    if rows.size == 0:
        logger.warning("%s: no protein with ground truth left to evaluate", name)
        return None
    columns = _normalized(_sum_metrics(contrib), setup.tau, rows.size, setup.norm)
    if setup.ontology.has_ia:
        contrib_w, rows_w = prepared.contribs(weighted=True)[name]
        weighted = _normalized(_sum_metrics(contrib_w), setup.tau, rows_w.size, setup.norm)
        columns.update({f"{c}_w": v for c, v in weighted.items() if c != "tau"})
    return columns


def _setup(ontology: EvalOntology, truth_pairs, th_step, toi, known, norm) -> _Setup:
    truths = _build_truths(ontology, *truth_pairs)
    if not truths:
        raise EvaluationInputError("no ground-truth term is known to the ontology")
    toi_masks = _toi_masks(ontology, toi) if toi is not None else None
    known_keys = _known_keys(ontology, truths, known) if known is not None else None
    return _Setup(ontology, truths, threshold_grid(th_step), toi_masks, known_keys,
                  lafa=toi is not None or known is not None, norm=norm)


def content_key(value: Any, columns: tuple[str, ...] = ("protein", "term")) -> tuple:
    """What a cache entry built from ``value`` is keyed by: its content, never its identity.

    A frame: the sha256 of its row count and ``columns``' values in row order (those it has; sha256
    because CPUs with SHA extensions hash it at twice blake2b's speed, and these are megabytes per frame);
    a mapping: of its items; a file: its path, size and modification time; an iterable of terms:
    the set of them; None: None.
    """
    if value is None:
        return (None,)
    if isinstance(value, (str, Path)):
        stat = Path(value).stat()
        return ("file", str(value), stat.st_size, stat.st_mtime_ns)
    if isinstance(value, Mapping):
        value = pd.DataFrame({"key": list(value.keys()), "value": list(value.values())})
        columns = ("key", "value")
    if isinstance(value, pd.DataFrame):
        digest = hashlib.sha256(str(len(value)).encode())
        for column in columns:
            if column in value.columns:
                digest.update(column.encode())
                for part in _column_bytes(value[column]):
                    digest.update(part)
        return ("frame", digest.hexdigest())
    return ("set", frozenset(value))


def _column_bytes(column: pd.Series) -> list:
    """A column's content as bytes: a numeric numpy column's dtype and values (its memory), an Arrow-held
    string column's own buffers (offsets from 0 and the characters they span; hashing them is ~100x faster
    than hashing each row), else pandas' row hashes."""
    if isinstance(column.dtype, np.dtype) and column.dtype.kind in "biuf":
        # equal bytes are equal values; equal values in other bytes (0.0 and -0.0) only miss a cache entry
        return [column.dtype.str.encode(), np.ascontiguousarray(column.to_numpy()).tobytes()]
    values = column.array
    arrow = values.__arrow_array__() if hasattr(values, "__arrow_array__") and not column.hasnans else None
    chunks = arrow.chunks if isinstance(arrow, pa.ChunkedArray) else []
    if arrow is None or not all(pa.types.is_string(c.type) or pa.types.is_large_string(c.type) for c in chunks):
        return [pd.util.hash_pandas_object(column, index=False).to_numpy().tobytes()]
    parts = []
    for chunk in chunks:
        _, offsets, data = chunk.buffers()
        width = np.int64 if pa.types.is_large_string(chunk.type) else np.int32
        spans = np.frombuffer(offsets, dtype=width)[chunk.offset:chunk.offset + len(chunk) + 1].astype(np.int64)
        parts += [(spans - spans[0]).tobytes(), memoryview(data)[spans[0]:spans[-1]] if data is not None else b""]
    return parts


def _setup_key(ontology: EvalOntology, ground_truth: pd.DataFrame, options: EvalOptions) -> tuple:
    """Everything a setup is built from: the ontology (and its IA), ground truth, known, toi, grid, norm."""
    return (id(ontology), ontology.ia_version, content_key(ground_truth), content_key(options.known),
            content_key(options.toi), float(options.th_step), options.norm)


class SetupCache:
    """Set-up ground truths, each built once for every method, replicate and call that scores on it.

    Setting up a ground truth (grouping, propagating, the known terms and the terms of interest)
    does not depend on the predictions. An entry is keyed by what it was built from
    (:func:`_setup_key`: the ontology object and its IA, the content of ``ground_truth``, ``known``
    and ``toi``, ``th_step`` and ``norm``), so a changed frame, or another window's ontology, never
    reads a stale entry; the ``limit`` least recently used setups are kept, with the
    ``prepared_limit`` least recently prepared predictions among them (:func:`prepared_predictions`).
    Every :class:`EvalOntology` holds one (``ontology.caches``), used when no other is passed.
    The results are those of uncached calls.
    """

    def __init__(self, limit: int = 32, prepared_limit: int = 3) -> None:
        self._entries = _Lru(limit)
        self.prepared = _Lru(prepared_limit)

    def get(self, ontology: EvalOntology, ground_truth: pd.DataFrame, options: EvalOptions) -> _Setup:
        key = _setup_key(ontology, ground_truth, options)
        held = self._entries.recent(key)
        if held is not None:
            return held[1]
        setup = _setup(ontology, _frame_truth(ground_truth), options.th_step, options.toi, options.known,
                       options.norm)
        setup.key, setup.prepared = key, self.prepared
        self._entries.put(key, (ontology, setup))  # the ontology kept alive: its id stays its own
        return setup


def from_keywords(cls, values: Mapping[str, Any], unknown: str, error: type[Exception] = EvaluationInputError):
    """``cls(**values)`` for a dataclass ``cls``; keys that are none of its fields are named in one
    error: ``"<unknown> [keys]; expected some of [fields]"``."""
    allowed = {f.name for f in fields(cls)}
    extra = sorted(set(values) - allowed)
    if extra:
        raise error(f"{unknown} {extra}; expected some of {sorted(allowed)}")
    return cls(**values)


@dataclass(frozen=True, eq=False)
class EvalOptions:
    """How predictions are scored against a ground truth: cafaeval's options and a setup cache.

    ``known``: frame ``protein, term`` (or a file) of terms known before (LAFA's PK/LK rule);
    ``toi``: the terms of interest (iterable or file); ``norm``, ``prop``, ``max_terms``,
    ``th_step``: as cafaeval's; ``setups``: a :class:`SetupCache` (None: the ontology's own).
    """

    known: Any = None
    toi: Any = None
    norm: str = "cafa"
    prop: str = "max"
    max_terms: int | None = None
    th_step: float = 0.01
    setups: SetupCache | None = None

    @classmethod
    def of(cls, options: Mapping[str, Any]) -> EvalOptions:
        """The options from keyword arguments; an unknown key is named in the error."""
        return from_keywords(cls, options, "unknown evaluation option(s)")


def _setup_of(ontology: EvalOntology, ground_truth: pd.DataFrame, options: EvalOptions) -> _Setup:
    """The setup of ``ground_truth`` under ``options``, from ``options.setups`` or the ontology's cache."""
    cache = options.setups
    if cache is None:
        cache = ontology.caches.get("setups")
        if cache is None:
            cache = ontology.caches["setups"] = SetupCache()
    return cache.get(ontology, ground_truth, options)


@dataclass
class _Prepared:
    """One method's predictions routed, binned and propagated on a setup, with their per-protein
    contributions per weighting, computed when first read."""

    setup: _Setup
    preds: dict[str, _Cells]
    by_weight: dict = field(default_factory=dict)

    def contribs(self, weighted: bool) -> dict[str, tuple[_Contrib, np.ndarray]]:
        """``{namespace: (contributions, evaluated rows)}`` for every namespace of the setup."""
        if weighted not in self.by_weight:
            self.by_weight[weighted] = {
                name: _namespace_contribs(self.setup, name, self.preds.get(name, _Cells.empty()), weighted)
                for name in self.setup.truths}
        return self.by_weight[weighted]


PREDICTION_KEY_COLUMNS = ("protein", "term", "score")


def frame_key(predictions: pd.DataFrame, options: EvalOptions, content: tuple | None = None) -> tuple:
    """What one method's prepared predictions are built from besides the setup: the content of the
    frame's ``protein, term, score`` (:func:`content_key` of :data:`PREDICTION_KEY_COLUMNS`: an Arrow
    string column's own buffers; ``content`` when the caller has it) and ``prop``, ``max_terms``.

    Computed without factorising the frame, so a curve, an interval or a pair that reads predictions
    already prepared on the setup costs a digest, not a second factorisation; a caller that hands the
    same frame to several of them (``core.evaluation.cells.CellFrames.content``) digests it once."""
    _prediction_columns(predictions)
    if content is None:
        content = content_key(predictions, PREDICTION_KEY_COLUMNS)
    return (content, options.prop, options.max_terms)


def prepared_predictions(setup: _Setup, predictions: pd.DataFrame, options: EvalOptions,
                         key: tuple | None = None) -> _Prepared:
    """One method's ``predictions`` (frame ``protein, term, score``) prepared on ``setup``: factorised
    and built once, then read from the setup's shared store by every curve, bootstrap and paired
    bootstrap of the same content (:class:`SetupCache`); ``key`` is :func:`frame_key`'s, when the
    caller has it."""
    key = (setup.key, key or frame_key(predictions, options))
    held = setup.prepared.recent(key)
    if held is not None:
        return held
    raw = _frame_raw(predictions)
    preds = _build_predictions(setup.ontology, setup.truths, raw, setup.tau, options.prop, options.max_terms)
    prepared = _Prepared(setup, preds)
    setup.prepared.put(key, prepared)
    return prepared
