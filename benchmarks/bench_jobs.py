"""``tempo materialize --all`` with ``--jobs 1`` and ``--jobs 2`` side by side, each on a fresh copy of an archive.

For each setting, in the same run: the whole job's wall time, every step's run (release, cutoff,
method, window, submission, catalog) with its wall seconds (the run's start to end in the instance)
and CPU seconds (``tempo/cpu_s``, user + system of the process that executed it; ``tempo/children_cpu_s``,
of the processes it started and waited for: DIAMOND, a fenced method), the peak RSS of
each run's process (``tempo/peak_rss_mb``; under ``--jobs 1`` every run shares the launching
process, so that is its peak so far) and of the whole process tree (sampled every 0.5 s), and the
CAFA submission's sha256. Printed last: the ratio ``--jobs 1`` / ``--jobs 2`` of the wall times.

    .venv/bin/python benchmarks/bench_jobs.py [--archive data] [--jobs 1 2]
"""
from __future__ import annotations

import argparse
import hashlib
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import dagster as dg
import psutil
from dagster._core.instance.ref import InstanceRef

sys.path.insert(0, str(Path(__file__).resolve().parent))
from chaos import fresh_copy  # noqa: E402  (benchmarks/ is not a package)

from tempo_assets.cli.step_process import CHILDREN_CPU_TAG, CPU_TAG, PEAK_RSS_TAG  # noqa: E402

REPO = Path(__file__).resolve().parents[1]


class TreeMemory:
    """The largest RSS sum of a process and its descendants, sampled every ``every`` seconds."""

    def __init__(self, pid: int, every: float = 0.5):
        self.pid, self.every, self.peak_mb = pid, every, 0.0
        self.done = threading.Event()
        self.thread = threading.Thread(target=self.sample, daemon=True)
        self.thread.start()

    def sample(self) -> None:
        while not self.done.wait(self.every):
            try:
                root = psutil.Process(self.pid)
                tree = [root] + root.children(recursive=True)
                total = 0
                for process in tree:
                    try:
                        total += process.memory_info().rss
                    except psutil.Error:
                        continue
            except psutil.Error:
                continue
            self.peak_mb = max(self.peak_mb, total / 2 ** 20)

    def stop(self) -> float:
        self.done.set()
        self.thread.join()
        return self.peak_mb


def materialise(archive: Path, folder: Path, jobs: int) -> dict:
    """One ``tempo materialize --all --jobs N`` on a fresh copy; its wall time, runs, peak and sha256."""
    env = fresh_copy(archive, folder)
    started = time.perf_counter()
    process = subprocess.Popen([sys.executable, "-m", "tempo_assets.cli.main", "materialize", "--all",
                                "--jobs", str(jobs)], env=env, cwd=REPO, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
    memory = TreeMemory(process.pid)
    output = process.communicate()[0]
    wall = time.perf_counter() - started
    tree_peak = memory.stop()
    if process.returncode != 0:
        raise SystemExit(f"--jobs {jobs} exited {process.returncode}:\n{output[-4000:]}")
    found = re.search(r"CAFA submission for cutoff \S+: (\S+)", output)
    sha = hashlib.sha256(Path(found.group(1)).read_bytes()).hexdigest() if found else "none"
    with dg.DagsterInstance.from_ref(InstanceRef.from_dir(env["DAGSTER_HOME"])) as instance:
        runs = []
        for record in instance.get_run_records():
            tags = record.dagster_run.tags
            runs.append({"step": f"{record.dagster_run.job_name} {tags.get('dagster/partition', '')}".strip(),
                         "start": record.start_time, "wall": (record.end_time or 0) - (record.start_time or 0),
                         "cpu": float(tags.get(CPU_TAG, "nan")), "children": float(tags.get(CHILDREN_CPU_TAG, "nan")),
                         "rss": float(tags.get(PEAK_RSS_TAG, "nan"))})
    return {"wall": wall, "runs": sorted(runs, key=lambda r: r["start"]), "tree_peak": tree_peak, "sha": sha}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--archive", type=Path, default=REPO / "data")
    parser.add_argument("--jobs", type=int, nargs="+", default=[1, 2])
    args = parser.parse_args()
    results = {}
    for jobs in args.jobs:
        with tempfile.TemporaryDirectory() as tmp:
            results[jobs] = materialise(args.archive, Path(tmp), jobs)
        r = results[jobs]
        print(f"\n--jobs {jobs}: whole job {r['wall']:.1f} s wall, process tree peak {r['tree_peak']:.0f} MB, "
              f"submission sha256 {r['sha']}")
        print(f"{'step run':<44}{'wall s':>9}{'CPU s':>9}{'children':>10}{'peak RSS MB':>13}")
        for run in r["runs"]:
            print(f"{run['step']:<44}{run['wall']:>9.1f}{run['cpu']:>9.1f}{run['children']:>10.1f}{run['rss']:>13.0f}")
        walls, cpus = sum(x["wall"] for x in r["runs"]), sum(x["cpu"] for x in r["runs"])
        children = sum(x["children"] for x in r["runs"])
        print(f"{'sum':<44}{walls:>9.1f}{cpus:>9.1f}{children:>10.1f}", flush=True)
    if 1 in results and len(results) > 1:
        for jobs, r in results.items():
            if jobs != 1:
                print(f"\nwhole job --jobs 1 / --jobs {jobs}: {results[1]['wall'] / r['wall']:.2f}x "
                      f"({results[1]['wall']:.1f} s / {r['wall']:.1f} s); submissions "
                      f"{'identical' if results[1]['sha'] == r['sha'] else 'DIFFER'}")


if __name__ == "__main__":
    main()
