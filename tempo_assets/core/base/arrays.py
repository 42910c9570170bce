"""Small vectorised array helpers shared by the numeric core modules."""
from __future__ import annotations

import functools

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
from threadpoolctl import ThreadpoolController


def concat_ranges(starts: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Concatenation of ``arange(s, s + c)`` over the pairs ``(starts[i], counts[i])``.

    The CSR gather: with ``starts = indptr[rows]`` and ``counts = indptr[rows + 1] - starts`` it
    returns the positions of those rows' entries. int64, shape ``(sum(counts),)``.
    """
    counts = np.asarray(counts, dtype=np.int64)
    total = int(counts.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    offsets = np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(counts) - counts, counts)
    return np.repeat(np.asarray(starts, dtype=np.int64), counts) + offsets


def strings_at(uniques, codes: np.ndarray) -> pd.Series | np.ndarray:
    """``uniques[codes]`` as a column: the values and dtype pandas gives the object array ``uniques[codes]``.

    Strings are gathered by Arrow's ``take`` from the uniques (no Python string per row: 20x cheaper
    than pandas converting the object array to its Arrow-held ``str`` column); ``uniques`` that are
    not all strings, or no ``codes``, take the object array itself. ``codes`` (n,) non-negative ints.
    """
    values = np.asarray(uniques, dtype=object)
    codes = np.asarray(codes)
    if codes.size == 0:
        return values[codes]
    try:
        gathered = pa.array(values, type=pa.large_string(), from_pandas=False).take(pa.array(codes))
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        return values[codes]
    return gathered.to_pandas()



def positions_in(values: pd.Series, ids) -> np.ndarray:
    """Each of ``values``' position in ``ids`` (distinct values), -1 where absent: int64, shape ``(len(values),)``.

    The distinct values are looked up, not every row (factorizing a string column is several times
    faster than hashing each row into an index)."""
    row_codes, distinct = pd.factorize(values)
    if len(distinct) == 0:
        return np.full(len(values), -1, dtype=np.int64)
    found = pd.Index(ids).get_indexer(distinct).astype(np.int64)
    return np.where(row_codes >= 0, found[row_codes], -1)


def values_in(column: pd.Series, values) -> np.ndarray:
    """(n,) bool: whether each value of ``column`` is one of ``values``; an Arrow-held string column asks
    Arrow itself (half the time of pandas' ``isin`` on millions of rows)."""
    arrow = column.array.__arrow_array__() if hasattr(column.array, "__arrow_array__") else None
    if arrow is not None and (pa.types.is_string(arrow.type) or pa.types.is_large_string(arrow.type)):
        try:
            wanted = pa.array(np.asarray(values, dtype=object), type=arrow.type, from_pandas=True)
        except (pa.ArrowInvalid, pa.ArrowTypeError):  # a value that is no string: pandas compares
            wanted = None
        if wanted is not None:
            return pc.is_in(arrow, value_set=wanted).to_numpy(zero_copy_only=False).astype(bool, copy=False)
    return column.isin(values).to_numpy(dtype=bool)


_CODES_LIMIT = 2 ** 62  # the combined codes of ``rows_in`` stay below it (int64)


def grouped_order(group_of: np.ndarray, n_groups: int) -> tuple[np.ndarray, np.ndarray]:
    """``(order, bounds)``: the positions of the rows in some group, grouped by group, each group's in their
    order, and (n_groups + 1,) ``bounds``: group ``i``'s rows are ``order[bounds[i]:bounds[i + 1]]``, so the
    rows cut once in this order give each group as a slice (no copy, where a cut per group is a pass over
    every row).

    ``group_of`` (n_rows,) each row's group in ``[0, n_groups)``, -1 in none; the stable sort of small
    integer codes is a radix sort."""
    small = group_of.astype(np.int16) if n_groups < np.iinfo(np.int16).max else group_of
    order = np.argsort(small, kind="stable")
    counts = np.bincount(group_of + 1, minlength=n_groups + 1)
    return order[counts[0]:], np.concatenate([[0], np.cumsum(counts[1:])])


def rows_in(frame: pd.DataFrame, other: pd.DataFrame, keys: list[str]) -> np.ndarray:
    """Whether each row of ``frame[keys]`` is a row of ``other[keys]``: bool, shape ``(len(frame),)``.

    What a left merge on ``keys`` finds (rows with a missing key value excepted: never found), without
    the merged frame or its key columns: each key column becomes integer codes (:func:`positions_in`),
    the codes of a row one integer, and those are looked up."""
    mine, theirs = np.zeros(len(frame), dtype=np.int64), np.zeros(len(other), dtype=np.int64)
    my_rows, their_rows = np.ones(len(frame), dtype=bool), np.ones(len(other), dtype=bool)
    span = 1  # the number of distinct combined codes so far
    for key in keys:
        their_codes, distinct = pd.factorize(other[key])
        my_codes = positions_in(frame[key], distinct)
        my_rows &= my_codes >= 0
        their_rows &= their_codes >= 0
        if span * max(len(distinct), 1) >= _CODES_LIMIT:  # renumber the combined codes so far: no overflow
            codes, uniques = pd.factorize(np.concatenate([mine, theirs]))
            mine, theirs, span = codes[:len(mine)], codes[len(mine):], len(uniques)
        mine = mine * len(distinct) + np.maximum(my_codes, 0)
        theirs = theirs * len(distinct) + np.maximum(their_codes, 0)
        span *= max(len(distinct), 1)
    return my_rows & pd.Series(mine, copy=False).isin(theirs[their_rows]).to_numpy()


@functools.lru_cache(maxsize=1)
def _threadpools() -> ThreadpoolController:
    return ThreadpoolController()  # scans the loaded BLAS libraries once (numpy's is loaded by now)


def one_blas_thread():
    """A context in which BLAS runs on one thread, for the products whose results are stored.

    OpenBLAS splits a matrix product over its threads (one per core by default) and the partial sums
    then add up in another order: the last bits of a product depend on the machine's cores (a float64
    ``(100, 20000) @ (20000, 101)`` differs by 3.6e-12 between 2 threads and 1). On one thread a
    bootstrap interval has the same bits on a laptop, on this 2-core machine and on a 64-core server.
    It is also what a step should use: parallelism comes from the executor's processes (two window
    runs at once already fill two cores). Entering and leaving costs microseconds.
    """
    return _threadpools().limit(limits=1, user_api="blas")
