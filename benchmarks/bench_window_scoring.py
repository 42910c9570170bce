"""One real window's scoring (the ``benchmark`` step's ``benchmark_window``): this checkout against another.

``--capture WINDOW`` re-materialises ``benchmark[WINDOW]`` in ``$DAGSTER_HOME`` (its inputs must be
stored there, e.g. by ``tempo materialize --window WINDOW``) and pickles the arguments the step hands
to ``core.pipeline.workflow.benchmark_window``: both profiles' TEST and VALID cells, every method's
predictions at t0 and t-1, the homology. Without it the pickle ``--args`` is scored by each side in
a child process of its own (every ontology cache emptied first), alternating ``--repeat`` times,
and the script prints each side's CPU seconds, the ratio, peak RSS and whether every table of the
two results is equal (``assert_frame_equal`` with ``check_exact``: the same bits).

    DAGSTER_HOME=.dagster_home .venv/bin/python benchmarks/bench_window_scoring.py --capture KEY --args w.pkl
    .venv/bin/python benchmarks/bench_window_scoring.py --args w.pkl [--before main] [--repeat 2]
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import pickle
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_evaluator import REPO, export_revision, peak_rss_mb, reset_peak_rss


def capture(window: str, out: Path) -> None:
    """Materialise ``benchmark[window]``, pickling ``benchmark_window``'s arguments on the way."""
    import dagster as dg
    from dagster._core.instance.ref import InstanceRef

    import tempo_assets.core.pipeline.window_benchmark as step
    from tempo_assets.checks import CHECKS
    from tempo_assets.definitions import ASSETS, build_resources

    real = step.benchmark_window

    def pickled(*args, **kwargs):
        with open(out, "wb") as handle:
            pickle.dump((args, kwargs), handle, protocol=5)
        return real(*args, **kwargs)

    step.benchmark_window = pickled
    with dg.DagsterInstance.from_ref(InstanceRef.from_dir(os.environ["DAGSTER_HOME"])) as instance:
        dg.materialize(ASSETS + CHECKS, selection=["benchmark"], partition_key=window, instance=instance,
                       resources=build_resources(), raise_on_error=True)


def run_side(root: str, args_path: str, out: str) -> None:
    """In a child: import ``tempo_assets`` from ``root``, score the captured window, pickle times and result."""
    sys.path.insert(0, root)
    from tempo_assets.core.pipeline.workflow import benchmark_window

    with open(args_path, "rb") as handle:
        args, kwargs = pickle.load(handle)
    for cells in args[0]:
        for targets in cells:
            for cache in (targets.eval_ontology.caches, targets.eval_ontology.routes, targets.eval_ontology.toi_masks):
                cache.clear()
    resident = reset_peak_rss()
    started, cpu = time.perf_counter(), time.process_time()
    result = benchmark_window(*args, **kwargs)
    times = {"cpu_s": time.process_time() - cpu, "wall_s": time.perf_counter() - started,
             "scoring_peak_mb": peak_rss_mb() - resident,
             "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}
    with open(out, "wb") as handle:
        pickle.dump((times, result), handle)


def child(root: Path, args_path: Path, out: Path) -> tuple[dict, object]:
    code = ("import sys; sys.path.insert(0, %r); import bench_window_scoring as b; b.run_side(%r, %r, %r)"
            % (str(Path(__file__).parent), str(root), str(args_path), str(out)))
    subprocess.run([sys.executable, "-c", code], check=True, cwd=tempfile.gettempdir())
    with open(out, "rb") as handle:
        return pickle.load(handle)


def differing_tables(a, b) -> list[str]:
    """The fields of two ``Benchmark`` values that differ (frames compared bit for bit)."""
    import pandas as pd

    differ = []
    for f in dataclasses.fields(a):
        x, y = getattr(a, f.name), getattr(b, f.name)
        try:
            if isinstance(x, pd.DataFrame):
                pd.testing.assert_frame_equal(x, y, check_exact=True)
            elif x != y:
                differ.append(f.name)
        except AssertionError:
            differ.append(f.name)
    return differ


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--args", type=Path, required=True, help="the pickle of benchmark_window's arguments")
    parser.add_argument("--capture", metavar="WINDOW", help="write --args from benchmark[WINDOW] and stop")
    parser.add_argument("--before", default="main", help="git revision or folder with tempo_assets/")
    parser.add_argument("--repeat", type=int, default=1)
    options = parser.parse_args()
    if options.capture:
        capture(options.capture, options.args)
        return
    with tempfile.TemporaryDirectory(prefix="bench_window_scoring_") as work:
        work = Path(work)
        before = Path(options.before) if Path(options.before).is_dir() else export_revision(options.before, work)
        runs: dict[str, list] = {"before": [], "after": []}
        for _ in range(options.repeat):  # alternate the sides so machine load hits both alike
            for side, root in (("before", before), ("after", REPO)):
                runs[side].append(child(root, options.args.resolve(), work / f"{side}.pkl"))
    for side, results in runs.items():
        cpu = sorted(t["cpu_s"] for t, _ in results)
        print(f"{side:>6}: CPU {cpu[len(cpu) // 2]:7.2f} s (runs {', '.join(f'{c:.2f}' for c in cpu)}), "
              f"wall {min(t['wall_s'] for t, _ in results):7.2f} s, peak RSS {max(t['peak_rss_mb'] for t, _ in results):.0f} MB, "
              f"while scoring +{max(t['scoring_peak_mb'] for t, _ in results):.0f} MB")
    median = {side: sorted(t["cpu_s"] for t, _ in results)[len(results) // 2] for side, results in runs.items()}
    print(f"ratio before/after (CPU): {median['before'] / median['after']:.2f}")
    differ = differing_tables(runs["before"][0][1], runs["after"][0][1])
    print("every table equal, bit for bit" if not differ else f"tables that differ: {', '.join(differ)}")


if __name__ == "__main__":
    main()
