"""Small vectorised array helpers shared by the numeric core modules."""
from __future__ import annotations

import numpy as np


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
