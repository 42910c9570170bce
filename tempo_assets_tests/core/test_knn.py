"""Tests for tempo_assets.core.neighbours.knn."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from tempo_assets.core.neighbours.knn import KnnIndex, KnnIndexError, knn_term_scores


def brute_force_neighbours(corpus_ids, corpus, query_ids, queries, k, exclude_self=True):
    """Loop reference: float64 cosine, rank by (similarity desc, id asc), self dropped by id."""
    rows = []
    c = corpus / np.maximum(np.linalg.norm(corpus, axis=1, keepdims=True), 1e-300)
    for qid, q in zip(query_ids, queries):
        q = q / np.linalg.norm(q)
        cands = []
        for cid, vec in zip(corpus_ids, c):
            if exclude_self and cid == qid:
                continue
            cands.append((-float(np.dot(vec.astype(np.float64), q.astype(np.float64))), cid))
        cands.sort()
        for rank, (neg, cid) in enumerate(cands[:k], start=1):
            rows.append((qid, cid, -neg, rank))
    return pd.DataFrame(rows, columns=["query", "neighbour", "similarity", "rank"])


def corpus(n=40, dim=8, seed=0):
    rng = np.random.default_rng(seed)
    ids = [f"P{i:03d}" for i in rng.permutation(n)]
    return ids, rng.normal(size=(n, dim)).astype(np.float32)


def assert_same_neighbours(got, expected):
    assert list(got.columns) == ["query", "neighbour", "similarity", "rank"]
    assert got["query"].tolist() == expected["query"].tolist()
    assert got["neighbour"].tolist() == expected["neighbour"].tolist()
    assert got["rank"].tolist() == expected["rank"].tolist()
    np.testing.assert_allclose(got["similarity"], expected["similarity"], atol=1e-6)


@pytest.mark.parametrize("k", [1, 5, 39, 60])
def test_search_matches_brute_force_with_self_exclusion(k):
    ids, m = corpus()
    index = KnnIndex.build(ids, m)
    got = index.search(ids, m, k=k)
    assert_same_neighbours(got, brute_force_neighbours(ids, m, ids, m, k))
    assert not (got["query"] == got["neighbour"]).any()
    assert got.groupby("query").size().max() == min(k, len(ids) - 1)


def test_search_external_queries_and_no_exclusion():
    ids, m = corpus()
    rng = np.random.default_rng(1)
    q = rng.normal(size=(6, 8)).astype(np.float32)
    qids = ["X1", "X2", "X3", "X4", "X5", ids[0]]
    index = KnnIndex.build(ids, m)
    got = index.search(qids, q, k=4, exclude_self=False)
    assert_same_neighbours(got, brute_force_neighbours(ids, m, qids, q, 4, exclude_self=False))


def test_ties_broken_by_neighbour_id_beyond_the_first_candidates():
    rng = np.random.default_rng(2)
    base = rng.normal(size=8).astype(np.float32)
    others = rng.normal(size=(10, 8)).astype(np.float32)
    # twelve identical rows: a tie group longer than the first candidate list
    m = np.vstack([np.tile(base, (12, 1)), others])
    ids = [f"T{i:02d}" for i in range(11, -1, -1)] + [f"O{i}" for i in range(10)]
    index = KnnIndex.build(ids, m)
    got = index.search(["Q"], base[None, :] * 3, k=3)
    assert got["neighbour"].tolist() == ["T00", "T01", "T02"]
    got_self = index.search(["T00"], base[None, :], k=3)
    assert got_self["neighbour"].tolist() == ["T01", "T02", "T03"]
    assert got_self["rank"].tolist() == [1, 2, 3]


def test_search_is_order_invariant_and_deterministic():
    ids, m = corpus(seed=3)
    order = np.random.default_rng(4).permutation(len(ids))
    a = KnnIndex.build(ids, m).search(ids, m, k=5)
    b = KnnIndex.build([ids[i] for i in order], m[order]).search(ids, m, k=5, batch_size=7)
    pd.testing.assert_frame_equal(a, b)


def duplicated_corpus(seed=5):
    """A corpus where most rows have copies: a group of 14 (more than k + 1), groups of 2-4,
    and singletons; ids shuffled so a group's ids are not contiguous."""
    rng = np.random.default_rng(seed)
    distinct = rng.normal(size=(9, 6)).astype(np.float32)
    copies = [14, 4, 3, 3, 2, 2, 1, 1, 1]
    m = np.vstack([np.tile(row, (c, 1)) for row, c in zip(distinct, copies)])
    ids = [f"D{i:02d}" for i in rng.permutation(len(m))]
    return ids, m


@pytest.mark.parametrize("k, exclude_self", [(1, True), (3, True), (5, True), (20, True), (5, False)])
def test_identical_queries_get_what_each_gets_alone(k, exclude_self):
    ids, m = duplicated_corpus()
    index = KnnIndex.build(ids, m)
    # the corpus in shuffled order, queries outside it that copy corpus rows (scaled: same direction),
    # and one close to the big group's row but not identical (its own faiss list)
    order = np.random.default_rng(6).permutation(len(ids))
    qids = [ids[i] for i in order] + ["X1", "X2", "X3", "X4"]
    near = m[:1] + 0.01 * (m[-1:] - m[:1])
    queries = np.vstack([m[order], m[:1] * 2, m[:1] * 2, m[-1:], near])
    together = index.search(qids, queries, k=k, exclude_self=exclude_self, batch_size=4)
    alone = pd.concat([index.search([q], queries[i:i + 1], k=k, exclude_self=exclude_self)
                       for i, q in enumerate(qids)], ignore_index=True)
    pd.testing.assert_frame_equal(together, alone, check_exact=True)
    assert_same_neighbours(together, brute_force_neighbours(ids, m, qids, queries, k, exclude_self))
    if exclude_self:
        assert not (together["query"] == together["neighbour"]).any()


def test_save_load_roundtrip(tmp_path):
    ids, m = corpus()
    index = KnnIndex.build(ids, m)
    index.save(tmp_path / "corpus.knn.npz")
    loaded = KnnIndex.load(tmp_path / "corpus.knn.npz")
    assert loaded.ids.tolist() == ids
    pd.testing.assert_frame_equal(index.search(ids, m, k=3), loaded.search(ids, m, k=3))
    (tmp_path / "broken.npz").write_bytes(b"nope")
    with pytest.raises(KnnIndexError, match="broken.npz"):
        KnnIndex.load(tmp_path / "broken.npz")


def test_build_rejects_bad_input():
    with pytest.raises(KnnIndexError, match="'A'"):
        KnnIndex.build(["A", "B", "A"], np.ones((3, 2)))
    with pytest.raises(KnnIndexError, match="non-finite"):
        KnnIndex.build(["A", "B"], np.array([[1.0, np.inf], [1.0, 0.0]]))
    with pytest.raises(KnnIndexError, match="2 ids but 3 rows"):
        KnnIndex.build(["A", "B"], np.ones((3, 2)))


# ---------------------------------------------------------------- term scores


def reference_term_scores(neighbours, annotations, k=None, method="max"):
    """Loop reference for knn_term_scores."""
    ann = {}
    for p, t, a in annotations[["protein", "term", "aspect"]].itertuples(index=False):
        ann.setdefault(p, set()).add((t, a))
    rows = []
    for q, group in neighbours.groupby("query"):
        group = group if k is None else group[group["rank"] <= k]
        scores = {}
        total = sum(max(s, 0.0) for s in group["similarity"])
        for n, s in zip(group["neighbour"], group["similarity"]):
            for ta in ann.get(n, ()):
                if method == "max":
                    scores[ta] = max(scores.get(ta, -np.inf), s)
                else:
                    scores[ta] = scores.get(ta, 0.0) + max(s, 0.0)
        for (t, a), s in scores.items():
            value = s if method == "max" else (s / total if total > 0 else 0.0)
            if value > 0:
                rows.append((q, t, a, min(value, 1.0)))
    out = pd.DataFrame(rows, columns=["protein", "term", "aspect", "score"])
    return out.sort_values(["protein", "aspect", "term"]).reset_index(drop=True)


def small_problem():
    neighbours = pd.DataFrame(
        {
            "query": ["q1", "q1", "q1", "q2", "q2", "q3"],
            "neighbour": ["a", "b", "c", "a", "c", "b"],
            "similarity": [0.9, 0.5, -0.2, 1.0000001, 0.3, 0.0],
            "rank": [1, 2, 3, 1, 2, 1],
        }
    )
    annotations = pd.DataFrame(
        {
            "protein": ["a", "a", "b", "b", "c", "c", "a"],
            "term": ["GO:1", "GO:2", "GO:1", "GO:3", "GO:4", "GO:2", "GO:1"],
            "aspect": ["BP", "MF", "BP", "BP", "CC", "MF", "BP"],
        }
    )
    return neighbours, annotations


@pytest.mark.parametrize("method", ["max", "weighted"])
@pytest.mark.parametrize("k", [None, 1, 2])
def test_knn_term_scores_match_reference(method, k):
    neighbours, annotations = small_problem()
    got = knn_term_scores(neighbours, annotations, k=k, method=method)
    expected = reference_term_scores(neighbours, annotations, k=k, method=method)
    assert got[["protein", "term", "aspect"]].values.tolist() == expected[["protein", "term", "aspect"]].values.tolist()
    np.testing.assert_allclose(got["score"], expected["score"])
    assert ((got["score"] > 0) & (got["score"] <= 1)).all()


def test_knn_term_scores_hand_values():
    neighbours, annotations = small_problem()
    got = knn_term_scores(neighbours, annotations).set_index(["protein", "term"])["score"]
    assert got[("q1", "GO:1")] == 0.9  # max of a (0.9) and b (0.5)
    assert ("q1", "GO:4") not in got.index  # only from c, similarity -0.2
    assert got[("q2", "GO:1")] == 1.0  # clipped
    assert "q3" not in got.index.get_level_values(0)  # similarity 0
    weighted = knn_term_scores(neighbours, annotations, method="weighted").set_index(["protein", "term"])["score"]
    assert weighted[("q1", "GO:1")] == pytest.approx(1.4 / 1.4)
    assert weighted[("q1", "GO:3")] == pytest.approx(0.5 / 1.4)


def test_knn_end_to_end_on_random_corpus():
    ids, m = corpus(n=30)
    rng = np.random.default_rng(5)
    annotations = pd.DataFrame(
        {
            "protein": rng.choice(ids, 80),
            "term": [f"GO:{i:07d}" for i in rng.integers(0, 10, 80)],
            "aspect": rng.choice(["BP", "MF", "CC"], 80),
        }
    )
    neighbours = KnnIndex.build(ids, m).search(ids, m, k=4)
    got = knn_term_scores(neighbours, annotations, method="max")
    expected = reference_term_scores(neighbours, annotations.drop_duplicates(), method="max")
    assert len(got) == len(expected)
    np.testing.assert_allclose(got["score"].to_numpy(), expected["score"].to_numpy())
