"""Stored numbers do not depend on the machine's cores (``core.base.arrays.one_blas_thread``).

OpenBLAS runs a product on one thread per core by default, and the partial sums of a threaded
product add up in another order, so the last bits of a bootstrap replicate moved with the number of
cores (3.6e-12 on the benchmark's ``(100, 20000) @ (20000, 101)``). The same replicates are computed
with BLAS allowed 4 threads and with 1, and must have the same bits. (The cluster bootstrap's
matrix-vector means, ``homology._as_statistic``, were checked the same way: OpenBLAS gives each
output element to one thread there, so they had the same bits already.)
"""
from __future__ import annotations

import numpy as np
from threadpoolctl import threadpool_limits

from tempo_assets.core.evaluation.bootstrap import _Reading, _Sums, _values

N_REPLICATES, N_PROTEINS, N_THRESHOLDS = 100, 20_000, 101


def draws(rng: np.random.Generator) -> np.ndarray:
    """Bootstrap multiplicities, as float (what the draws are): (replicates, proteins)."""
    return rng.multinomial(N_PROTEINS, np.full(N_PROTEINS, 1 / N_PROTEINS), size=N_REPLICATES).astype(float)


def on_threads(threads: int, compute):
    with threadpool_limits(limits=threads, user_api="blas"):
        return compute()


def test_bootstrap_replicates_have_the_same_bits_on_any_number_of_blas_threads():
    rng = np.random.default_rng(7)
    covered = (rng.random((N_THRESHOLDS, N_PROTEINS)) < 0.8).astype(float)
    sums = _Sums(covered, {"pr": rng.random((N_THRESHOLDS, N_PROTEINS)) * covered,
                           "rc": rng.random((N_THRESHOLDS, N_PROTEINS)) * covered})
    counts = draws(rng)
    for reading in (_Reading("f", "cafa", None), _Reading("f", "pred", None)):
        one = on_threads(1, lambda: _values(sums, counts, reading))
        four = on_threads(4, lambda: _values(sums, counts, reading))
        assert np.array_equal(one, four), (reading, np.abs(one - four).max())

