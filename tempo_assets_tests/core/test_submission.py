"""Tests for tempo_assets.core.methods.submission."""
from __future__ import annotations

import re
from decimal import ROUND_HALF_UP, Decimal

import numpy as np
import pandas as pd
import pytest

from tempo_assets.core.methods.submission import (
    _stable_order,
    SubmissionFormatError,
    read_cafa_submission,
    score_cents,
    submission_rows,
    write_cafa_submission,
)


def preds(rows):
    return pd.DataFrame(rows, columns=["protein", "term", "aspect", "score"])


def reference_cents(x: float) -> int:
    return int(Decimal(repr(float(x))).quantize(Decimal("0.01"), rounding=ROUND_HALF_UP) * 100)


@pytest.mark.parametrize(
    "score,cents",
    [(0.005, 1), (0.0049, 0), (0.995, 100), (1.0, 100), (0.125, 13), (0.115, 12), (0.285, 29),
     (0.575, 58), (0.0, 0), (0.994999, 99), (0.01, 1)],
)
def test_score_cents_edge_cases(score, cents):
    assert score_cents(np.array([score]))[0] == cents == reference_cents(score)


def test_score_cents_matches_decimal_reference():
    rng = np.random.default_rng(0)
    values = np.concatenate([rng.random(5000), np.round(rng.random(2000), 3), np.arange(0, 1001) / 1000])
    expected = np.array([reference_cents(v) for v in values])
    np.testing.assert_array_equal(score_cents(values), expected)


def test_write_format_order_rounding_and_stats(tmp_path):
    frame = preds(
        [
            ("T2", "GO:0000002", "BP", 0.5),
            ("T1", "GO:0000003", "MF", 0.995),
            ("T1", "GO:0000001", "BP", 0.5),
            ("T1", "GO:0000004", "BP", 0.004),  # rounds to 0.00: dropped
            ("T1", "GO:0000005", "CC", 0.005),
            ("T1", "GO:0000001", "BP", 0.2),  # duplicate pair: max kept
        ]
    )
    stats = write_cafa_submission(frame, tmp_path / "sub.tsv")
    text = (tmp_path / "sub.tsv").read_text()
    assert text == (
        "T1\tGO:0000003\t1.00\n"
        "T1\tGO:0000001\t0.50\n"
        "T1\tGO:0000005\t0.01\n"
        "T2\tGO:0000002\t0.50\n"
    )
    assert stats == {"rows": 4, "targets": 2, "dropped_zero": 1, "truncated": 0, "duplicates": 1}


def test_truncation_per_target_and_aspect_keeps_top_scores_ties_by_term(tmp_path):
    rows = [("T", f"GO:{i:07d}", "BP", 0.5) for i in range(10, 0, -1)]
    rows += [("T", "GO:0000100", "BP", 0.9)]
    rows += [("T", f"GO:{200 + i:07d}", "MF", 0.1) for i in range(3)]
    stats = write_cafa_submission(preds(rows), tmp_path / "s.tsv", max_terms_per_aspect=4)
    got = read_cafa_submission(tmp_path / "s.tsv")
    assert got["term"].tolist() == [
        "GO:0000100", "GO:0000001", "GO:0000002", "GO:0000003",
        "GO:0000200", "GO:0000201", "GO:0000202",
    ]
    assert stats["truncated"] == 7 and stats["rows"] == 7


def test_byte_identical_for_shuffled_input(tmp_path):
    rng = np.random.default_rng(1)
    frame = preds(
        [(f"T{rng.integers(5)}", f"GO:{rng.integers(50):07d}", str(rng.choice(["BP", "MF"])), float(rng.random()))
         for _ in range(300)]
    )
    write_cafa_submission(frame, tmp_path / "a.tsv", max_terms_per_aspect=7, author="Tempo", keywords=["knn"])
    write_cafa_submission(frame.sample(frac=1, random_state=3), tmp_path / "b.tsv", max_terms_per_aspect=7,
                          author="Tempo", keywords=["knn"])
    assert (tmp_path / "a.tsv").read_bytes() == (tmp_path / "b.tsv").read_bytes()


def test_chunks_of_whole_targets_write_the_file_the_whole_frame_writes(tmp_path):
    rng = np.random.default_rng(2)
    frame = preds(
        [(f"T{rng.integers(9)}", f"GO:{rng.integers(40):07d}", str(rng.choice(["BP", "MF"])), float(rng.random()))
         for _ in range(400)]
    )
    whole = write_cafa_submission(frame, tmp_path / "a.tsv", max_terms_per_aspect=5, author="Tempo")
    groups = [frame[frame["protein"].isin(ts)] for ts in (["T0", "T1", "T2"], ["T3"], [], ["T4", "T5", "T6", "T7", "T8"])]
    chunked = write_cafa_submission(iter(groups), tmp_path / "b.tsv", max_terms_per_aspect=5, author="Tempo")
    assert (tmp_path / "a.tsv").read_bytes() == (tmp_path / "b.tsv").read_bytes()
    assert chunked == whole
    # a target split over two chunks, or chunks out of order, would write another file: refused, the old one kept
    for bad in ([frame[frame["protein"] == "T3"], frame[frame["protein"] == "T1"]],
                [frame.iloc[:200], frame.iloc[200:]]):
        with pytest.raises(SubmissionFormatError, match="chunk 1 starts at target"):
            write_cafa_submission(bad, tmp_path / "a.tsv", max_terms_per_aspect=5, author="Tempo")
    assert (tmp_path / "a.tsv").read_bytes() == (tmp_path / "b.tsv").read_bytes()


def test_header_and_end(tmp_path):
    write_cafa_submission(preds([("T", "GO:0000001", "BP", 0.3)]), tmp_path / "h.tsv", author="Tempo",
                          model=2, keywords=["sequence similarity", "machine learning"])
    lines = (tmp_path / "h.tsv").read_text().splitlines()
    assert lines == ["AUTHOR\tTempo", "MODEL\t2", "KEYWORDS\tsequence similarity, machine learning.",
                     "T\tGO:0000001\t0.30", "END"]
    got = read_cafa_submission(tmp_path / "h.tsv")
    assert got.attrs["header"]["AUTHOR"] == "Tempo" and got["score"].tolist() == [0.3]


@pytest.mark.parametrize("score", [1.0000001, -0.1, float("nan")])
def test_bad_scores_raise_and_leave_previous_file(tmp_path, score):
    path = tmp_path / "s.tsv"
    path.write_text("previous\n")
    with pytest.raises(SubmissionFormatError, match="outside"):
        write_cafa_submission(preds([("T", "GO:0000001", "BP", score)]), path)
    assert path.read_text() == "previous\n"



@pytest.mark.parametrize("protein,term,message", [
    ("T 1", "GO:0000001", "protein 'T 1' is empty or contains whitespace"),
    ("T1", "", "term '' is empty or contains whitespace"),
    ("T1", "GO:\u20030000001", "term 'GO:\\u20030000001' is empty or contains whitespace"),
    (None, "GO:0000001", "a row's protein is missing"),
    (pd.NA, "GO:0000001", "a row's protein is missing"),
    ("T1", float("nan"), "a row's term is missing"),
])
def test_bad_ids_raise_naming_the_first_and_leave_previous_file(tmp_path, protein, term, message):
    """An id with whitespace, an empty one, and a missing one (never a row silently dropped)."""
    path = tmp_path / "s.tsv"
    path.write_text("previous\n")
    rows = [("T0", "GO:0000002", "BP", 0.5), (protein, term, "BP", 0.5), ("T9", "GO: 0000003", "BP", 0.5)]
    frame = preds(rows)
    for kind in ("object", "string"):
        with pytest.raises(SubmissionFormatError, match=re.escape(message)):
            write_cafa_submission(frame.astype({"protein": kind, "term": kind}), path)
    assert path.read_text() == "previous\n"

@pytest.mark.parametrize(
    "body,line,message",
    [
        ("T\tGO:0000001\t0.5\nT\tGO:0000001\t0.4\n", 2, "already given"),
        ("T\tGO:1\t0.5\n", 1, "not a GO id"),
        ("T\tGO:0000001\t0.00\n", 1, "outside"),
        ("T\tGO:0000001\t1.50\n", 1, "outside"),
        ("T\tGO:0000001\t0.555\n", 1, "two decimals"),
        ("T\tGO:0000001\n", 1, "fields"),
        ("AUTHOR\tX\nT\tGO:0000001\t0.5\nEND\nT\tGO:0000002\t0.5\n", 4, "after END"),
        ("T\tGO:0000001\t0.5\nMODEL\t1\n", 2, "after predictions"),
    ],
)
def test_reader_errors_name_file_and_line(tmp_path, body, line, message):
    path = tmp_path / "bad.tsv"
    path.write_text(body)
    with pytest.raises(SubmissionFormatError, match=rf"bad\.tsv:{line}: .*{message}"):
        read_cafa_submission(path)


def test_roundtrip_scores(tmp_path):
    rng = np.random.default_rng(2)
    frame = preds([("T", f"GO:{i:07d}", "BP", float(rng.random())) for i in range(100)])
    write_cafa_submission(frame, tmp_path / "r.tsv")
    got = read_cafa_submission(tmp_path / "r.tsv").set_index("term")["score"]
    expected = {t: reference_cents(s) / 100 for t, s in zip(frame["term"], frame["score"]) if reference_cents(s) > 0}
    assert got.to_dict() == expected


def pandas_submission_rows(protein, term, aspect, cents, max_terms):
    """The rules as three stable pandas sorts of the strings (the writer's code before the ranks)."""
    work = pd.DataFrame({"protein": protein, "term": term, "aspect": aspect, "cents": cents})
    work = work.sort_values(["protein", "term", "cents"], ascending=[True, True, False], kind="mergesort")
    first = ~work.duplicated(["protein", "term"], keep="first").to_numpy()
    duplicate, work = work.index[~first], work[first]
    zero = (work["cents"] == 0).to_numpy()
    zeros, work = work.index[zero], work[~zero]
    work = work.sort_values(["protein", "aspect", "cents", "term"], ascending=[True, True, False, True],
                            kind="mergesort")
    keep = (work.groupby(["protein", "aspect"], sort=False).cumcount() < max_terms).to_numpy()
    truncated, work = work.index[~keep], work[keep]
    work = work.sort_values(["protein", "cents", "term"], ascending=[True, False, True], kind="mergesort")
    return work.index.to_numpy(), {"duplicate": duplicate.to_numpy(), "zero": zeros.to_numpy(),
                                   "truncated": truncated.to_numpy()}


@pytest.mark.parametrize("seed", range(6))
def test_submission_rows_are_the_stable_string_sorts(seed):
    # few ids and cents: many ties in every key, repeated (protein, term) pairs with equal scores
    rng = np.random.default_rng(seed)
    n = 400
    protein = rng.choice(["P10", "P2", "P1", "Q", "p"], n).astype(object)
    term = np.array([f"GO:{t:07d}" for t in rng.integers(0, 60, n)], dtype=object)
    aspect = rng.choice(["BP", "MF", "CC"], n).astype(object)
    cents = rng.choice([0, 1, 5, 50, 99, 100], n).astype(np.int64)
    written, removed = submission_rows(protein, term, aspect, cents, 4)
    expected_written, expected_removed = pandas_submission_rows(protein, term, aspect, cents, 4)
    np.testing.assert_array_equal(written, expected_written)
    for rule in ("duplicate", "zero", "truncated"):
        np.testing.assert_array_equal(removed[rule], expected_removed[rule])
    assert min(len(v) for v in removed.values()) > 0


@pytest.mark.parametrize("size", [7, 2**40])  # packed into one int64; too wide to pack: np.lexsort
def test_stable_order_is_the_stable_sort_on_the_keys_in_turn(size):
    rng = np.random.default_rng(3)
    keys = [rng.integers(0, 3, 200), rng.integers(0, 7, 200)]
    expected = sorted(range(200), key=lambda row: (keys[0][row], keys[1][row]))  # Python's sort is stable
    np.testing.assert_array_equal(_stable_order((keys[0], size), (keys[1], size)), expected)
