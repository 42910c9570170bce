"""benchmarks/bench_knn_ivf.py on a small random folder: recall per setting against the flat answer."""
from __future__ import annotations

import numpy as np

from tempo_assets_tests.toolkit import load_benchmark


def test_recall_is_one_when_every_list_is_probed_and_lower_otherwise(tmp_path, capsys):
    rng = np.random.default_rng(0)
    centres = rng.normal(size=(6, 16))
    matrix = (centres[rng.integers(0, 6, size=600)] + rng.normal(size=(600, 16))).astype(np.float32)
    ids = np.array([f"P{i:04d}" for i in range(600)])
    for name, array in (("embedding_ids", ids), ("embedding_matrix", matrix), ("queries", ids[::2])):
        np.save(tmp_path / f"{name}.npy", array)
    bench = load_benchmark("bench_knn_ivf")
    assert bench.main(["--work", str(tmp_path), "--queries", "100", "--nlist", "8",
                       "--nprobe", "1,8", "--threads", "1"]) == 0
    out = capsys.readouterr().out
    assert "100 tuning queries (the last of 300 in chunk order) x 600 corpus" in out
    rows = {int(line.split("|")[2]): float(line.split("|")[3]) for line in out.splitlines()
            if line.startswith("| 8 |")}
    assert rows[8] == 1.0 and 0.3 < rows[1] < 1.0
    names, _ = bench.tuning_queries(tmp_path, 100)[3:5]
    assert len(names) == 100 and set(names) <= set(ids[::2].tolist())
