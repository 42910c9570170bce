"""Choosing an inverted file for bench_scale's KNN: recall@k and CPU per setting, on a tuning sample.

Reads the embedding a ``bench_scale.py --stages embedding`` run left in ``--work``, takes the LAST
``--queries`` of its queries in bench_scale's chunk order (copies of a row together; the last chunk,
so never the first chunk, whose flat answer is bench_scale's declared recall sample), finds their
exact neighbours with the flat ``KnnIndex`` (k = 10, self excluded), then for each ``--nlist`` builds
``KnnIndex(inverted=InvertedFileSearch(nlist, ...))`` (k-means training and adding, timed) and for
each ``--nprobe`` times Tempo's ``search`` and faiss ``IndexIVFFlat.search`` alone (k + 1) on the same
queries, and prints recall@k of Tempo's answer against the exact one, CPU seconds (user + sys) and
the KNN stage that rate projects to for every query of the folder (Tempo's build + search only).

    nice -n 5 .venv/bin/python benchmarks/bench_knn_ivf.py --work bench_out/scale/proteins_all \\
        --queries 3000 --nlist 1024,2048 --nprobe 8,16,32,64 [--threads 2]
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))
from tempo_assets.core.inputs.embedders import normalize_rows  # noqa: E402
from tempo_assets.core.neighbours.knn import InvertedFileSearch, KnnIndex, identical_rows  # noqa: E402

K = 10


def timed(fn):
    """``(fn(), CPU seconds, wall seconds)``."""
    before, started = os.times(), time.perf_counter()
    result = fn()
    after = os.times()
    return result, (after.user - before.user) + (after.system - before.system), time.perf_counter() - started


def tuning_queries(work: Path, n: int) -> tuple[list[str], np.ndarray, np.ndarray, list[str], int]:
    """The corpus (ids, matrix), the last ``n`` queries in bench_scale's chunk order and their rows,
    and the number of queries in the folder."""
    ids = np.load(work / "embedding_ids.npy").tolist()
    matrix = np.load(work / "embedding_matrix.npy")
    queries = np.load(work / "queries.npy").tolist()
    row_of = {a: i for i, a in enumerate(ids)}
    rows = np.array([row_of[q] for q in queries], dtype=np.int64)
    order = np.concatenate(identical_rows(normalize_rows(matrix[rows])))[-n:]
    return ids, matrix, matrix[rows[order]], [queries[i] for i in order], len(queries)


def recall(got, exact) -> float:
    return len(got.merge(exact, on=["query", "neighbour"])) / len(exact)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, required=True)
    parser.add_argument("--queries", type=int, default=3000)
    parser.add_argument("--nlist", default="1024,2048")
    parser.add_argument("--nprobe", default="8,16,32,64")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    ids, matrix, rows, names, total = tuning_queries(args.work, args.queries)
    print(f"{len(names):,} tuning queries (the last of {total:,} in chunk order) x {len(ids):,} corpus; "
          f"load {os.getloadavg()[0]:.2f}", flush=True)
    flat = KnnIndex.build(ids, matrix, threads=args.threads)
    exact, cpu, wall = timed(lambda: flat.search(names, rows, K))
    print(f"flat: search {cpu:.1f} CPU s ({1000 * cpu / len(names):.2f} ms a query), {wall:.1f} s", flush=True)
    del flat
    print("| nlist | nprobe | recall@10 | build CPU s | Tempo search ms/query | faiss alone ms/query "
          "| Tempo / faiss | projected KNN stage CPU s (build + all queries) |")
    print("|---|---|---|---|---|---|---|---|")
    for nlist in [int(x) for x in args.nlist.split(",")]:
        settings = InvertedFileSearch(nlist, 1, seed=args.seed)
        index, build, _ = timed(lambda: KnnIndex.build(ids, matrix, threads=args.threads, inverted=settings))
        for nprobe in [int(x) for x in args.nprobe.split(",")]:
            index.inverted, index.index.nprobe = dataclasses.replace(settings, nprobe=nprobe), nprobe
            got, tempo, _ = timed(lambda: index.search(names, rows, K))
            _, alone, _ = timed(lambda: index.index.search(normalize_rows(rows), K + 1))
            print(f"| {nlist} | {nprobe} | {recall(got, exact):.4f} | {build:.1f} | {1000 * tempo / len(names):.2f} "
                  f"| {1000 * alone / len(names):.2f} | {tempo / max(alone, 1e-9):.2f}x "
                  f"| {build + tempo / len(names) * total:,.0f} |", flush=True)
        del index
    return 0


if __name__ == "__main__":
    sys.exit(main())
