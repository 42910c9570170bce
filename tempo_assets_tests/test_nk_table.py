"""benchmarks/nk_table.py: the NK rows of docs/results/ from a benchmark's summary and paired tables."""
from __future__ import annotations

import pandas as pd

from tempo_assets_tests.toolkit import load_benchmark


def test_one_row_per_aspect_with_the_paired_difference_and_every_baseline():
    nk_table = load_benchmark("nk_table")
    f = {"recipe": 0.5, "naive": 0.4, "blast": 0.3, "goa_nonexp": 0.2, "knn": 0.1}
    summary = pd.DataFrame([{"profile": p, "mode": m, "aspect": "MF", "method": k, "n_targets": 7,
                             "f_at_valid_tau": v + (0.01 if p == "cafaeval" else 0.0)}
                            for p in ("lafa", "cafaeval") for m in ("NK", "LK") for k, v in f.items()])
    paired = pd.DataFrame([{"profile": "lafa", "mode": "NK", "aspect": "MF", "a": "recipe", "b": "naive",
                            "metric": "f_at_valid_tau", "delta": 0.1, "low": 0.02, "high": 0.2,
                            "cluster_low": -0.01, "cluster_high": 0.25}])
    rows = nk_table.nk_rows(summary, paired, "W1", "lafa")
    assert rows == ["| W1 | MF | `lafa` | 7 | 0.500 | 0.400 | +0.100 [0.020, 0.200] c[-0.010, 0.250] | 0.300 | 0.200 "
                    "| 0.100 |"]
    # no paired row under cafaeval here: the difference is n/a, the F values are cafaeval's
    assert nk_table.nk_rows(summary, paired, "W2", "cafaeval") == [
        "| W2 | MF | `cafaeval` | 7 | 0.510 | 0.410 | n/a | 0.310 | 0.210 | 0.110 |"]


def test_the_verdict_says_where_both_intervals_exclude_zero():
    nk_table = load_benchmark("nk_table")
    assert nk_table.verdict(0.1, 0.02, 0.2, 0.01, 0.25) == "+0.100 above"
    assert nk_table.verdict(-0.1, -0.2, -0.02, -0.3, -0.01) == "-0.100 below"
    assert nk_table.verdict(0.01, -0.01, 0.03, -0.02, 0.04) == "+0.010 holds 0"
    assert nk_table.verdict(0.01, -0.001, 0.03, 0.001, 0.04) == "+0.010 holds 0 (proteins), above (clusters)"
    paired = pd.DataFrame([{"profile": "lafa", "mode": "NK", "aspect": "CC", "a": "recipe", "b": b,
                            "metric": "f_at_valid_tau", "delta": d, "low": d - 0.05, "high": d + 0.05,
                            "cluster_low": d - 0.06, "cluster_high": d + 0.06}
                           for b, d in (("naive", 0.1), ("blast", -0.2), ("knn", 0.0))])
    # a baseline with no paired row (non-experimental GOA here) is n/a, never a made-up verdict
    assert nk_table.verdict_rows(paired, "W2", "lafa") == [
        "| W2 | CC | `lafa` | +0.100 above | -0.200 below | n/a | +0.000 holds 0 |"]
    assert nk_table.verdict_rows(paired, "W2", "cafaeval") == []
