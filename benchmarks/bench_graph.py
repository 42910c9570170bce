"""Time and peak memory of every asset of the graph, materialised on ``data/`` in a fresh tmp instance.

Each (asset, partition) is one Dagster run in its own child process, forked from a forkserver
that has already imported dagster, pandas and the code location, so:

- **time** is the step duration Dagster records (``STEP_SUCCESS`` events read back from the run's
  event log; the asset's checks are separate steps, summed under ``checks``);
- **CPU** is the child's user + system seconds over the run (the asset and its checks), DIAMOND's
  and every other subprocess it waited for included;
- **peak memory** is the child's peak RSS (``resource.getrusage(RUSAGE_SELF).ru_maxrss`` at the
  end of the run), printed beside the baseline of an idle child (the preloaded imports), so the
  difference is what the asset itself needed.

The SQL warehouse models are steps like the others (``valid_evaluation_set`` and ``test_growth`` read
them); the registered methods' bundle and prediction runs and the catalog are measured too.

    .venv/bin/python benchmarks/bench_graph.py [--archive data]
"""
from __future__ import annotations

import argparse
import multiprocessing
import resource
import shutil
import tempfile
import time
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PRELOAD = ["dagster", "pandas", "numpy", "lightgbm", "faiss", "tempo_assets.definitions"]


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # Linux: KiB


def cpu_seconds() -> float:
    """User + system CPU seconds of this process and of the children it waited for (DIAMOND)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def idle_child() -> float:
    return peak_rss_mb()


def run_one(paths: dict, asset: str, key: str) -> dict:
    """Materialise ``asset[key]`` (and its checks) in this child; its run id, status and peak RSS."""
    import dagster as dg
    from dagster._core.instance.ref import InstanceRef

    from tempo_assets.checks import CHECKS
    from tempo_assets.definitions import ASSETS, build_resources

    started, cpu_before = time.perf_counter(), cpu_seconds()
    with dg.DagsterInstance.from_ref(InstanceRef.from_dir(paths["home"])) as instance:
        resources = build_resources(paths["archive"], paths["artefacts"], paths["warehouse"], paths["cache"])
        result = dg.materialize(ASSETS + CHECKS, selection=[asset], partition_key=key, instance=instance,
                                resources=resources, raise_on_error=False)
    return {"run_id": result.run_id, "success": result.success, "wall": time.perf_counter() - started,
            "cpu": cpu_seconds() - cpu_before, "peak_rss_mb": peak_rss_mb()}


def step_seconds(instance, run_id: str) -> dict[str, float]:
    import dagster as dg

    out = {}
    for entry in instance.all_logs(run_id, of_type=dg.DagsterEventType.STEP_SUCCESS):
        out[entry.dagster_event.step_key] = entry.dagster_event.event_specific_data.duration_ms / 1000.0
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--archive", type=Path, default=REPO / "data")
    args = parser.parse_args()

    import dagster as dg
    from dagster._core.instance.ref import InstanceRef

    from tempo_assets.cli.graph_cmd import plan_steps
    from tempo_assets.partitions import plan_partitions, register_partitions
    from tempo_assets.resources import open_archive
    from tempo_assets.sensors import CUTOFF_ASSETS, RELEASE_ASSETS, WINDOW_ASSETS

    selections = {"release_job": RELEASE_ASSETS, "cutoff_job": CUTOFF_ASSETS, "window_job": WINDOW_ASSETS,
                  "submission_job": ["submission"], "method_bundle_job": ["method_bundle"],
                  "method_job": ["method_predictions"], "catalog_job": ["benchmark_catalog"]}
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(PRELOAD)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        shutil.copytree(args.archive, root / "archive")
        (root / "home").mkdir()
        (root / "home" / "dagster.yaml").write_text("telemetry:\n  enabled: false\n", encoding="utf-8")
        paths = {"home": str(root / "home"), "archive": str(root / "archive"), "artefacts": str(root / "artefacts"),
                 "warehouse": "sqlite:///" + str(root / "wh.sqlite"), "cache": str(root / "cache")}
        instance = dg.DagsterInstance.from_ref(InstanceRef.from_dir(paths["home"]))
        plan = plan_partitions(open_archive(root / "archive"))
        register_partitions(instance, plan)
        rows = []
        started = time.perf_counter()
        with context.Pool(1, maxtasksperchild=1) as pool:
            baseline = pool.apply(idle_child)
            for job, key in plan_steps(plan, "all"):
                for asset in selections[job]:
                    result = pool.apply(run_one, (paths, asset, key))
                    steps = step_seconds(instance, result["run_id"])
                    rows.append({"asset": asset, "partition": key, "seconds": steps.get(asset, float("nan")),
                                 "checks": sum(v for k, v in steps.items() if k != asset), **result})
                    print(f"{asset}[{key}]: {'ok' if result['success'] else 'FAILED'} "
                          f"{rows[-1]['seconds']:.1f} s, CPU {result['cpu']:.1f} s, "
                          f"peak RSS {result['peak_rss_mb']:.0f} MB", flush=True)
                    if not result["success"]:
                        raise SystemExit(f"{asset}[{key}] failed; see run {result['run_id']}")
        total = time.perf_counter() - started
        instance.dispose()

    per_asset: dict[str, list[dict]] = defaultdict(list)
    for row in rows:
        per_asset[row["asset"]].append(row)
    step_total = sum(r["seconds"] for r in rows)
    print(f"\nbaseline peak RSS of an idle child (preloaded imports): {baseline:.0f} MB")
    print(f"{'asset':<22}{'parts':>6}{'total s':>9}{'mean s':>8}{'max s':>7}{'checks s':>9}{'CPU s':>8}"
          f"{'share':>7}{'peak RSS MB':>12}{'over base':>10}")
    for asset, group in per_asset.items():
        secs = [r["seconds"] for r in group]
        peak = max(r["peak_rss_mb"] for r in group)
        print(f"{asset:<22}{len(group):>6}{sum(secs):>9.1f}{sum(secs) / len(secs):>8.1f}{max(secs):>7.1f}"
              f"{sum(r['checks'] for r in group):>9.1f}{sum(r['cpu'] for r in group):>8.1f}{sum(secs) / step_total:>7.0%}"
              f"{peak:>12.0f}{peak - baseline:>10.0f}")
    runs_wall = sum(r["wall"] for r in rows)
    print(f"\nasset steps {step_total:.1f} s + check steps {sum(r['checks'] for r in rows):.1f} s; "
          f"{len(rows)} runs {runs_wall:.1f} s of which Dagster run overhead "
          f"{runs_wall - step_total - sum(r['checks'] for r in rows):.1f} s; wall total {total:.1f} s")


if __name__ == "__main__":
    main()
