"""KnnIndex.search before and after grouping identical queries, alternated, on bench_scale's window.

Loads two versions of ``tempo_assets/core/neighbours/knn.py`` side by side (``--before``: a tree
exported from an earlier commit; after: this tree's), builds both indexes on the embedding matrix a
``bench_scale.py --stages embedding`` run left in its work folder, and times ``search`` (k = 10,
self excluded) before / after / before / after in one process: CPU seconds (user + sys) and wall.
The two frames must be equal, exactly. ``--faiss`` also times faiss ``IndexFlatIP`` alone (k + 1)
on the same queries. Queries: ``all:N``, whole groups of identical rows of the 516,371 drawn at
random (seed 0) until N, as in the all-against-all window; ``bench:N``, the first N of the work
folder's queries in bench_scale's chunk order.

    git -C . archive HEAD~2 | tar -x -C /tmp/before
    nice -n 5 .venv/bin/python benchmarks/bench_knn_duplicates.py --before /tmp/before \\
        --work bench_out/scale/proteins_50000 --queries all:10000 [--threads 1] [--rounds 2] [--faiss]
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))


def load_module(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def pick_queries(spec: str, ids: list[str], matrix: np.ndarray, stored: list[str], knn) -> list[str]:
    mode, n = spec.split(":")
    if mode == "all":
        groups = knn.identical_rows(knn.normalize_rows(matrix))
        picked, total = [], 0
        for g in np.random.default_rng(0).permutation(len(groups)):
            picked.append(groups[g])
            total += len(groups[g])
            if total >= int(n):
                break
        return [ids[i] for i in np.concatenate(picked)]
    row_of = {a: i for i, a in enumerate(ids)}
    order = np.concatenate(knn.identical_rows(knn.normalize_rows(matrix[[row_of[q] for q in stored]])))
    return [stored[i] for i in order[:int(n)]]


def timed(fn):
    before, started = os.times(), time.perf_counter()
    result = fn()
    after = os.times()
    return result, sum(after[i] - before[i] for i in range(4)), time.perf_counter() - started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, required=True, help="a tree holding the earlier knn.py")
    parser.add_argument("--work", type=Path, required=True, help="a bench_scale work folder (proteins_N)")
    parser.add_argument("--queries", default="all:10000")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--faiss", action="store_true")
    args = parser.parse_args(argv)
    sides = {"before": load_module("knn_before", args.before / "tempo_assets/core/neighbours/knn.py"),
             "after": load_module("knn_after", REPO / "tempo_assets/core/neighbours/knn.py")}
    ids = np.load(args.work / "embedding_ids.npy").tolist()
    matrix = np.load(args.work / "embedding_matrix.npy")
    queries = pick_queries(args.queries, ids, matrix, np.load(args.work / "queries.npy").tolist(), sides["after"])
    row_of = {a: i for i, a in enumerate(ids)}
    rows = np.ascontiguousarray(matrix[[row_of[q] for q in queries]])
    distinct = len(sides["after"].identical_rows(sides["after"].normalize_rows(rows)))
    print(f"{len(queries):,} queries ({distinct:,} distinct rows) x {len(ids):,} corpus, {args.queries}, "
          f"{args.threads} thread(s); load {os.getloadavg()[0]:.2f}", flush=True)
    indexes = {side: module.KnnIndex.build(ids, matrix, threads=args.threads) for side, module in sides.items()}
    frames: dict[str, pd.DataFrame] = {}
    for r in range(args.rounds):
        for side in sides:
            frame, cpu, wall = timed(lambda: indexes[side].search(queries, rows, 10, exclude_self=True))
            print(f"round {r + 1} {side}: CPU {cpu:.1f} s, wall {wall:.1f} s; load {os.getloadavg()[0]:.2f}", flush=True)
            if side in frames:
                pd.testing.assert_frame_equal(frames[side], frame, check_exact=True)
            frames[side] = frame
        if args.faiss:
            index = indexes["after"]
            _, cpu, wall = timed(lambda: index._faiss_search(sides["after"].normalize_rows(rows), 11))
            print(f"round {r + 1} faiss alone (k + 1): CPU {cpu:.1f} s, wall {wall:.1f} s", flush=True)
    pd.testing.assert_frame_equal(frames["before"], frames["after"], check_exact=True)
    print(f"before and after: the same frame, exactly ({len(frames['after']):,} rows)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
