"""Embedding and KNN throughput on the real Swiss-Prot 2014-01 human+mouse FASTA.

Prints sequences/s for the k-mer embedder (all 35,071 sequences) and for NEAR (a sample), the
NEAR/k-mer ratio measured in the same run, the projected NEAR time for the ~4,000-protein
demo, and exact-cosine KNN search time on the k-mer corpus.

    .venv/bin/python benchmarks/bench_embed.py [--near-sample 200] [--knn-queries 4000]
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from tempo_assets.core.inputs.embeddings import embed_proteins
from tempo_assets.core.inputs.embedders import KmerEmbedder, NearEmbedder
from tempo_assets.core.inputs.fasta import read_fasta
from tempo_assets.core.neighbours.knn import KnnIndex

FASTA = (
    Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "goa_archive" / "uniprot"
    / "uniprot_sprot_2014-01-31_human_mouse.fasta.gz"
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fasta", type=Path, default=FASTA)
    parser.add_argument("--near-sample", type=int, default=200)
    parser.add_argument("--knn-queries", type=int, default=4000)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--demo-size", type=int, default=4000)
    args = parser.parse_args()

    sequences = read_fasta(args.fasta)
    lengths = np.array([len(s) for s in sequences.values()])
    print(f"{len(sequences)} sequences, mean length {lengths.mean():.0f}, max {lengths.max()}")

    start = time.perf_counter()
    ids, matrix = embed_proteins(KmerEmbedder(), sequences)
    kmer_s = time.perf_counter() - start
    kmer_rate = len(ids) / kmer_s
    print(f"kmer  : {len(ids)} sequences in {kmer_s:.1f}s = {kmer_rate:.0f} seq/s")

    rng = np.random.default_rng(0)
    sample_ids = sorted(rng.choice(sorted(sequences), size=args.near_sample, replace=False))
    sample = {acc: sequences[acc] for acc in sample_ids}
    residues = sum(len(s) for s in sample.values())
    near = NearEmbedder()
    start = time.perf_counter()
    embed_proteins(near, sample)
    near_s = time.perf_counter() - start
    near_rate = len(sample) / near_s
    print(
        f"near  : {len(sample)} sequences ({residues} residues) in {near_s:.1f}s = {near_rate:.1f} seq/s, "
        f"{residues / near_s:.0f} residues/s"
    )
    print(f"ratio : NEAR is {kmer_rate / near_rate:.0f}x slower than kmer per sequence")
    demo_s = args.demo_size * (lengths.mean() / (residues / len(sample))) / near_rate
    print(f"demo  : NEAR on {args.demo_size} proteins ~ {demo_s / 60:.1f} min (one core, mean length scaled)")

    n_query = min(args.knn_queries, len(ids))
    start = time.perf_counter()
    index = KnnIndex.build(ids, matrix, threads=args.threads)
    build_s = time.perf_counter() - start
    start = time.perf_counter()
    neighbours = index.search(ids[:n_query], matrix[:n_query], k=10)
    search_s = time.perf_counter() - start
    print(
        f"knn   : build {build_s:.2f}s; {n_query} queries x {len(ids)} corpus, k=10, "
        f"{args.threads} thread(s): {search_s:.1f}s ({len(neighbours)} rows)"
    )


if __name__ == "__main__":
    main()
