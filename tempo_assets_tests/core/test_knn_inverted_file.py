"""KnnIndex with an inverted-file proposal (faiss IndexIVFFlat): only recall may change."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from tempo_assets.core.base.errors import TempoInputError
from tempo_assets.core.inputs.embedders import normalize_rows
from tempo_assets.core.neighbours.knn import InvertedFileSearch, KnnIndex
from tempo_assets_tests.core.test_knn import brute_force_neighbours, corpus, duplicated_corpus


def clustered_corpus(seed=7):
    """300 rows around 12 centres (so lists differ), plus copies of one row (a tie group of 15)."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(12, 10))
    m = centres[rng.integers(0, 12, size=300)] + 0.3 * rng.normal(size=(300, 10))
    m = np.vstack([m, np.tile(m[:1], (14, 1))]).astype(np.float32)
    return [f"C{i:03d}" for i in rng.permutation(len(m))], m


@pytest.mark.parametrize("k, exclude_self", [(1, True), (10, True), (20, True), (10, False)])
def test_probing_every_list_gives_the_flat_answer_exactly(k, exclude_self):
    for ids, m, nlist in (clustered_corpus() + (8,), duplicated_corpus() + (4,)):
        flat = KnnIndex.build(ids, m).search(ids, m, k=k, exclude_self=exclude_self, batch_size=16)
        inverted = KnnIndex.build(ids, m, inverted=InvertedFileSearch(nlist, nlist, seed=3))
        got = inverted.search(ids, m, k=k, exclude_self=exclude_self, batch_size=16)
        pd.testing.assert_frame_equal(got, flat, check_exact=True)


def test_fewer_lists_lose_recall_only():
    """nprobe < nlist: every reported similarity is the exact float64 one, ranks follow
    (similarity desc, id asc), self is excluded, k kept; some neighbours are missed."""
    ids, m = clustered_corpus()
    got = KnnIndex.build(ids, m, inverted=InvertedFileSearch(8, 1, seed=3)).search(ids, m, k=10)
    exact = brute_force_neighbours(ids, m, ids, m, 10)
    normed = normalize_rows(m).astype(np.float64)   # the float32 rows faiss holds, multiplied in float64
    row = {p: i for i, p in enumerate(ids)}
    expected = np.einsum("ij,ij->i", normed[got["query"].map(row)], normed[got["neighbour"].map(row)])
    np.testing.assert_allclose(got["similarity"], expected, rtol=0, atol=1e-12)
    assert not (got["query"] == got["neighbour"]).any()
    assert (got.groupby("query").size() == 10).all()
    for _, one in got.groupby("query", sort=False):
        keys = list(zip(-one["similarity"], one["neighbour"]))
        assert keys == sorted(keys) and one["rank"].tolist() == list(range(1, 11))
    recall = len(got.merge(exact, on=["query", "neighbour"])) / len(exact)
    assert 0.5 < recall < 1.0


def test_ties_among_copies_are_broken_by_id_beyond_the_first_list():
    """A tie group of 12 copies (longer than the first list of k + 5): in one list, searched deeper."""
    rng = np.random.default_rng(2)
    base = rng.normal(size=8).astype(np.float32)
    m = np.vstack([np.tile(base, (12, 1)), rng.normal(size=(40, 8)).astype(np.float32)])
    ids = [f"T{i:02d}" for i in range(11, -1, -1)] + [f"O{i:02d}" for i in range(40)]
    index = KnnIndex.build(ids, m, inverted=InvertedFileSearch(4, 1, seed=0))
    assert index.search(["T00"], base[None, :], k=3)["neighbour"].tolist() == ["T01", "T02", "T03"]
    assert index.search(["Q"], 3 * base[None, :], k=3)["neighbour"].tolist() == ["T00", "T01", "T02"]


def test_a_short_list_means_the_probed_lists_are_exhausted():
    """faiss returns fewer rows than asked when the probed lists hold fewer: no longer list is asked
    for (it would add nothing), and the query keeps what its lists hold."""
    ids, m = corpus(n=200, dim=8, seed=8)
    index = KnnIndex.build(ids, m, inverted=InvertedFileSearch(40, 1, seed=3))
    depths, search = [], index._faiss_search
    index._faiss_search = lambda queries, depth: depths.append(depth) or search(queries, depth)
    got = index.search(ids, m, k=10, batch_size=256)
    assert depths == [15] and (got.groupby("query").size() <= 10).all()
    assert got.groupby("query").size().min() < 10


def test_the_settings_are_kept_and_the_build_is_repeatable(tmp_path):
    ids, m = clustered_corpus()
    settings = InvertedFileSearch(8, 2, train_rows=100, seed=5)
    index = KnnIndex.build(ids, m, inverted=settings)
    assert settings.name == "ivf8x2" and index.inverted == settings
    assert settings.training_rows(len(ids)).tolist() == settings.training_rows(len(ids)).tolist()
    first = index.search(ids, m, k=5)
    pd.testing.assert_frame_equal(KnnIndex.build(ids, m, inverted=settings).search(ids, m, k=5), first)
    index.save(tmp_path / "ivf.knn.npz")
    loaded = KnnIndex.load(tmp_path / "ivf.knn.npz")
    assert loaded.inverted == settings
    np.testing.assert_array_equal(loaded.matrix, index.matrix)
    pd.testing.assert_frame_equal(loaded.search(ids, m, k=5), first)


@pytest.mark.parametrize("settings, named", [
    (InvertedFileSearch(8, 9), "nprobe 9 exceeds nlist 8"),
    (InvertedFileSearch(400, 1), "nlist 400 exceeds the corpus's 314 rows"),
    (InvertedFileSearch(0, 1), "nlist must be >= 1"),
    (InvertedFileSearch(8, 0), "nprobe must be >= 1"),
    (InvertedFileSearch(8, 2, train_rows=7), "train_rows 7"),
    (InvertedFileSearch(8, 2, train_rows=315), "train_rows 315"),
])
def test_bad_settings_are_refused_by_name(settings, named):
    ids, m = clustered_corpus()
    with pytest.raises(TempoInputError, match=named):
        KnnIndex.build(ids, m, inverted=settings)
