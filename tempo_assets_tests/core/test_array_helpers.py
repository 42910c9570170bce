"""The vectorised helpers that replace row loops equal the loops they replace, bit for bit."""
from __future__ import annotations

import hashlib

import numpy as np
import pandas as pd
import pytest

from tempo_assets.core.base.arrays import positions_in, strings_at
from tempo_assets.core.evaluation.metrics import _segment_cumsum
from tempo_assets.core.evaluation.cells import frame_digest


def _loop_segment_cumsum(seg: np.ndarray, values: np.ndarray, reverse: bool) -> np.ndarray:
    """Each segment's entries added one after the other (from its last with ``reverse``)."""
    out = np.zeros_like(values)
    for s in np.unique(seg):
        idx = np.flatnonzero(seg == s)
        acc = np.zeros(values.shape[1])
        for i in (idx[::-1] if reverse else idx):
            acc = acc + values[i]
            out[i] = acc
    return out


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("reverse", [False, True])
def test_segment_cumsum_adds_in_the_loops_order(seed, reverse):
    rng = np.random.default_rng(seed)
    n_seg = int(rng.integers(1, 50))
    lengths = rng.integers(0, 20, n_seg)
    lengths[rng.integers(0, n_seg)] = int(rng.integers(100, 400))  # one long segment: several widths
    seg = np.repeat(np.arange(n_seg), lengths)
    # magnitudes far apart: another order of the additions gives other last bits
    values = rng.random((seg.size, 3)) * 10.0 ** rng.integers(-8, 8, (seg.size, 1))
    got = _segment_cumsum(seg, values, n_seg, reverse)
    assert np.array_equal(got, _loop_segment_cumsum(seg, values, reverse))


def test_segment_cumsum_of_nothing():
    assert _segment_cumsum(np.zeros(0, dtype=np.int64), np.zeros((0, 2)), 3, False).shape == (0, 2)


@pytest.mark.parametrize("uniques", [np.array(["P2", "P1", "Q9"], dtype=object), pd.Index(["GO:1", "GO:2", "GO:3"]),
                                     np.array([3, 1, 2], dtype=object), np.array(["a", None, "c"], dtype=object)])
def test_strings_at_is_the_object_column(uniques):
    codes = np.array([2, 0, 0, 1, 2])
    want = pd.Series(np.asarray(uniques, dtype=object)[codes])
    got = pd.Series(strings_at(uniques, codes))
    pd.testing.assert_series_equal(got, want)
    assert got.dtype == want.dtype
    empty = pd.Series(strings_at(uniques, codes[:0]))
    pd.testing.assert_series_equal(empty, pd.Series(np.asarray(uniques, dtype=object)[codes[:0]]))


def _loop_frame_digest(frame: pd.DataFrame) -> str:
    text = "\n".join(sorted("\t".join(map(str, row)) for row in frame.itertuples(index=False)))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@pytest.mark.parametrize("frame", [
    pd.DataFrame({"protein": ["P2", "P1", "P1"], "term": ["GO:2", "GO:1", "GO:3"]}),
    pd.DataFrame({"a": [1, 2, 3], "b": [0.1, float("nan"), 3.0], "c": ["x", None, "z"], "d": [True, False, True]}),
    pd.DataFrame({"protein": ["P1", "P2"], "term": ["GO:1", "GO:2"]}, index=[7, 3]).iloc[:0],
    pd.DataFrame(index=range(3)),
])
def test_frame_digest_is_the_row_loops(frame):
    assert frame_digest(frame) == _loop_frame_digest(frame)


@pytest.mark.parametrize("case", ["primary", "dual", "alt"])
def test_term_columns_look_up_what_the_loop_looks_up(case):
    """A predicted term's columns: its alt id's primaries when it is an alt id (checked first, as cafaeval
    does, even for an id that is also a primary: ``dual``), else its own column."""
    from tempo_assets.core.evaluation.ontology import _Namespace
    from tempo_assets.core.evaluation.predictions import _Raw, _term_columns

    terms = [f"GO:{i}" for i in range(6)]
    alt = {"GO:9": (1, 2), **({"GO:3": (4,)} if case == "dual" else {})}
    ns = _Namespace("biological_process", terms, {t: i for i, t in enumerate(terms)}, alt, np.zeros(7, dtype=np.int64),
                    np.zeros(0, dtype=np.int64), np.zeros(6, dtype=np.int64), np.zeros(6, dtype=bool))
    predicted = ["GO:3", "GO:0", "GO:5", "GO:3"] + (["GO:9"] if case == "alt" else [])
    raw = _Raw.from_values(["P1"] * len(predicted), predicted, np.ones(len(predicted)), range(len(predicted)), None)
    cols, counts = _term_columns(ns, raw, np.arange(len(predicted)))
    want = [c for t in predicted for c in (alt[t] if t in alt else (ns.index[t],))]
    assert cols.tolist() == want
    assert (counts is None) == (case != "alt")


@pytest.mark.parametrize("ns_label", ["biological_process", "BP"])
def test_curve_rows_are_the_namespaces_rows_by_tau(ns_label):
    """A plot's curve: the rows of its namespace (full or short name), tau ascending, as the frame-based cut."""
    from tempo_assets.core.evaluation.plots import _curve_rows

    rng = np.random.default_rng(5)
    tau = np.round(rng.permutation(np.arange(0.01, 1, 0.01)), 2)
    frame = pd.DataFrame({"ns": [ns_label] * tau.size + ["molecular_function"] * 3, "tau": np.r_[tau, 0.1, 0.2, 0.3],
                          **{c: rng.random(tau.size + 3) for c in ("pr", "rc", "f", "pr_w", "rc_w", "f_w")}})
    for weighted in (False, True):
        sfx = "_w" if weighted else ""
        rows = frame[frame["ns"].astype(str).isin(["biological_process", "BP"])]
        want = pd.DataFrame({"tau": rows["tau"].to_numpy(), "pr": rows["pr" + sfx].to_numpy(),
                             "rc": rows["rc" + sfx].to_numpy(), "f": rows["f" + sfx].to_numpy()})
        want = want.sort_values("tau", kind="mergesort").reset_index(drop=True)
        pd.testing.assert_frame_equal(_curve_rows(frame, "BP", weighted, "m"), want)
    assert _curve_rows(frame, "CC", False, "m") is None


@pytest.mark.parametrize("dtype", [object, "string[pyarrow]"])
def test_positions_in_matches_a_lookup_of_every_row(dtype):
    ids = np.array(["P3", "P1", "P2"], dtype=object)
    values = pd.Series(["P1", "P9", "P3", "P1", None, "P2"], dtype=dtype)
    expected = [1, -1, 0, 1, -1, 2]
    assert positions_in(values, ids).tolist() == expected
    assert positions_in(values.iloc[:0], ids).tolist() == []
    assert positions_in(values, ids[:0]).tolist() == [-1] * len(values)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("limit", [2 ** 62, 3])  # 3: the combined codes are renumbered after every key
def test_rows_in_finds_what_a_merge_finds(seed, limit, monkeypatch):
    from tempo_assets.core.base import arrays

    monkeypatch.setattr(arrays, "_CODES_LIMIT", limit)
    rng = np.random.default_rng(seed)

    def frame(n, dtype):
        return pd.DataFrame({"protein": rng.choice([f"P{i}" for i in range(9)], n),
                             "term": rng.choice([f"GO:{i:07d}" for i in range(7)], n),
                             "aspect": rng.choice(["BP", "MF", "CC"], n)}).astype(dtype)

    left, right = frame(400, object), frame(60, "str")
    right.loc[3, "term"] = None  # a missing key is never matched
    for keys in (["protein", "term", "aspect"], ["protein", "aspect"], ["term"]):
        merged = left[keys].merge(right[keys].dropna().drop_duplicates().assign(_in=1), on=keys, how="left")
        assert arrays.rows_in(left, right, keys).tolist() == merged["_in"].notna().tolist()
    assert not arrays.rows_in(left, right.iloc[:0], ["protein"]).any()
    assert arrays.rows_in(left.iloc[:0], right, ["protein"]).shape == (0,)
