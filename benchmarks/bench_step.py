"""CPU seconds of one asset step of one partition, re-run on a copy of an instance that has it materialised.

``--from`` names a folder laid out as ``home/`` (``$DAGSTER_HOME``), ``artefacts/`` (``$TEMPO_ARTEFACTS``)
and ``cache/`` (``$TEMPO_CACHE``) after ``tempo materialize --all``; each repeat copies it to a
temporary folder, so the step runs on the same inputs every time and the original is left as it is:

    mkdir -p bench_out/data/home
    DAGSTER_HOME=$PWD/bench_out/data/home TEMPO_ARTEFACTS=$PWD/bench_out/data/artefacts \\
        TEMPO_CACHE=$PWD/bench_out/data/cache .venv/bin/tempo materialize --all
    .venv/bin/python benchmarks/bench_step.py --from bench_out/data --asset benchmark \\
        --partition 2014-09-29__2016-01-15__2017-01-18__2018-02-13 [--repeat 2] [--profile out.prof]

It prints the step's CPU (user + system of this process and of the subprocesses it waited for:
DIAMOND) and wall seconds per repeat, this process's peak RSS during the repeat (Linux's ``VmHWM``,
reset before each), and the sha256 of the artefact it stored (compare it with the one stored in
``--from``); ``--profile`` writes a cProfile of the last repeat. Where the peak is allocated: run
it under memray (installed outside the project), ``python -m memray run -o out.bin
benchmarks/bench_step.py ...``, then ``python -m memray tree out.bin`` (the high-water mark's
allocations, by call stack).
"""
from __future__ import annotations

import argparse
import contextlib
import cProfile
import os
import resource
import shutil
import tempfile
import time
from pathlib import Path


def cpu_seconds() -> tuple[float, float]:
    """User + system CPU seconds of this process, and of the subprocesses it waited for (DIAMOND)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime


def reset_peak_rss() -> None:
    """Start this process's peak RSS (``VmHWM``) again from its current RSS (Linux 4.0 and later)."""
    with contextlib.suppress(OSError):
        Path("/proc/self/clear_refs").write_text("5")


def peak_rss_mb(field: str = "VmHWM") -> float:
    """This process's peak RSS in MB since it started or since :func:`reset_peak_rss` (``nan`` off Linux);
    ``field="VmRSS"``: its RSS now."""
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(f"{field}:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def run_step(source: Path, asset: str, partition: str, profile: Path | None) -> tuple[tuple, float, bool, str, float]:
    """``((own cpu s, subprocess cpu s), wall s, success, the stored artefact's sha256, peak RSS MB)`` of
    ``asset[partition]`` (its checks excluded) on a copy of ``source``."""
    import dagster as dg
    from dagster._core.instance.ref import InstanceRef

    from tempo_assets.definitions import ASSETS, build_resources

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for name in ("home", "artefacts", "cache"):
            if (source / name).exists():
                shutil.copytree(source / name, root / name, symlinks=True)
        os.environ["DAGSTER_HOME"] = str(root / "home")  # the warehouse URL's default lives there
        with dg.DagsterInstance.from_ref(InstanceRef.from_dir(str(root / "home"))) as instance:
            resources = build_resources(artefacts_root=str(root / "artefacts"), cache_root=str(root / "cache"))
            profiler = cProfile.Profile() if profile else None
            reset_peak_rss()
            started, cpu_before = time.perf_counter(), cpu_seconds()
            if profiler:
                profiler.enable()
            result = dg.materialize(ASSETS, selection=[asset], partition_key=partition, instance=instance,
                                    resources=resources, raise_on_error=False)
            if profiler:
                profiler.disable()
                profiler.dump_stats(str(profile))
            cpu = tuple(after - before for after, before in zip(cpu_seconds(), cpu_before))
            wall, peak = time.perf_counter() - started, peak_rss_mb()
            stored = resources["artefact_store"].store().open(asset, partition).meta.get("sha256")
            return cpu, wall, result.success, stored, peak


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--from", dest="source", type=Path, required=True)
    parser.add_argument("--asset", default="benchmark")
    parser.add_argument("--partition", required=True)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--profile", type=Path)
    args = parser.parse_args()
    for i in range(args.repeat):
        cpu, wall, ok, sha256, peak = run_step(args.source, args.asset, args.partition,
                                 args.profile if i == args.repeat - 1 else None)
        print(f"{args.asset}[{args.partition}] #{i + 1}: {'ok' if ok else 'FAILED'} CPU {sum(cpu):.1f} s "
              f"(Python {cpu[0]:.1f} s, subprocesses {cpu[1]:.1f} s), wall {wall:.1f} s, peak RSS {peak:,.0f} MB, "
              f"sha256 {sha256}",
              flush=True)


if __name__ == "__main__":
    main()
