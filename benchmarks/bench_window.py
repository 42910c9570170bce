"""CPU seconds of one window's ``window_job`` (its asset steps and its check steps), re-run on a copy.

``--home`` names a ``$DAGSTER_HOME`` after ``tempo materialize --all`` with the defaults inside it
(``artefacts/``, ``embedding_cache/``, ``tempo_warehouse.sqlite``; e.g. CI's ``.dagster_home``). Each
repeat copies those three to a fresh instance, removes the window's own artefacts and TEST claims there
(so ``test_growth`` and ``test_score`` may claim it again), registers the partitions the artefacts
name, and runs ``window_job`` for ``--window`` in this process as ``tempo materialize`` runs one
step (``execute_in_process``). The original is left as it is:

    .venv/bin/python benchmarks/bench_window.py --home /path/to/.dagster_home \\
        --window 2016-01-15__2017-06-15__2019-01-14__2022-09-12 [--repeat 2]

It prints the run's CPU (user + system of this process and of the subprocesses it waited for:
DIAMOND) and wall seconds, each step's CPU seconds (largest first), and the sha256 (16 hex digits)
of every file the window's assets stored but ``artefact.json`` (which holds run ids and times):
compare them between two trees (``PYTHONPATH=...``) to see that a change left every byte as it was.
"""
from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import tempfile
import time
from pathlib import Path

from bench_graph import cpu_seconds  # this process's and its waited-for subprocesses' (DIAMOND)
from bench_step import peak_rss_mb, reset_peak_rss

# the asset whose folders in the original name each dynamic partition set's keys
PARTITIONS_FROM = {"releases": "ontology", "cutoffs": "knn_corpus", "windows": "frozen_recipe"}


def fresh_home(source: Path, home: Path, window: str, window_assets: list[str]) -> None:
    """``home``: a new instance with ``source``'s artefacts, embedding cache and warehouse, less ``window``'s own."""
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    for name in ("artefacts", "embedding_cache"):
        shutil.copytree(source / name, home / name, symlinks=True)
    shutil.copy(source / "tempo_warehouse.sqlite", home / "tempo_warehouse.sqlite")
    for claim in (home / "artefacts" / "_test_claims").glob(f"{window}.*"):
        claim.unlink()
    for asset in window_assets:
        shutil.rmtree(home / "artefacts" / asset / window, ignore_errors=True)


def run_window(source: Path, home: Path, window: str) -> tuple[float, float, bool, dict[str, list], dict[str, str]]:
    """``(cpu s, wall s, success, {step: [cpu s, RSS MB at its start, its peak RSS MB]}, {stored file:
    sha256})`` of ``window_job[window]`` on a copy of ``source`` at ``home`` (``$DAGSTER_HOME`` when the
    code location was imported); the run's peak RSS is under the step ``"(run)"``."""
    import dagster as dg
    from dagster._core.instance.ref import InstanceRef

    from tempo_assets.definitions import defs
    from tempo_assets.graph_state import WINDOW_ASSETS

    shutil.rmtree(home, ignore_errors=True)
    fresh_home(source, home, window, WINDOW_ASSETS)
    steps: dict[str, list] = {}
    run_peak = [0.0]  # the largest VmHWM seen: each step start resets it
    with dg.DagsterInstance.from_ref(InstanceRef.from_dir(str(home))) as instance:
        for name, asset in PARTITIONS_FROM.items():
            instance.add_dynamic_partitions(name, sorted(p.name for p in (source / "artefacts" / asset).iterdir()
                                                         if p.is_dir()))
        instance.add_dynamic_partitions("windows", [window])  # one whose run never stored its recipe too
        handle = instance.handle_new_event

        def timed(event, *args, **kwargs):
            # steps run one after the other in this process: CPU and peak RSS between a step's start
            # and end are its own
            step = event.dagster_event
            if step is not None and step.step_key:
                if step.event_type_value == "STEP_START":
                    run_peak[0] = max(run_peak[0], peak_rss_mb())
                    reset_peak_rss()
                    steps[step.step_key] = [-cpu_seconds(), peak_rss_mb("VmRSS"), 0.0]
                elif step.event_type_value in ("STEP_SUCCESS", "STEP_FAILURE"):
                    steps[step.step_key][0] += cpu_seconds()
                    steps[step.step_key][2] = peak_rss_mb()
            return handle(event, *args, **kwargs)

        instance.handle_new_event = timed
        started, cpu_before = time.perf_counter(), cpu_seconds()
        result = defs.resolve_job_def("window_job").execute_in_process(
            partition_key=window, instance=instance, raise_on_error=False)
        cpu, wall = cpu_seconds() - cpu_before, time.perf_counter() - started
        steps["(run)"] = [cpu, float("nan"), max(run_peak[0], peak_rss_mb())]
    stored = {}
    for asset in WINDOW_ASSETS:
        folder = home / "artefacts" / asset / window
        for path in sorted(folder.rglob("*")):
            if path.is_file() and path.name != "artefact.json":
                stored[f"{asset}/{path.relative_to(folder)}"] = hashlib.sha256(path.read_bytes()).hexdigest()[:16]
    return cpu, wall, result.success, steps, stored


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--home", type=Path, required=True)
    parser.add_argument("--window", required=True)
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "home"
        # the resources' defaults (artefacts, embedding cache, warehouse) are read from $DAGSTER_HOME
        # when the code location is imported: one path for every repeat
        os.environ["DAGSTER_HOME"] = str(home)
        for i in range(args.repeat):
            cpu, wall, ok, steps, stored = run_window(args.home.resolve(), home, args.window)
            print(f"window_job[{args.window}] #{i + 1}: {'ok' if ok else 'FAILED'} CPU {cpu:.1f} s, "
                  f"wall {wall:.1f} s", flush=True)
            for step, (seconds, start, peak) in sorted(steps.items(), key=lambda item: -item[1][0]):
                print(f"  {seconds:7.1f} s  RSS at start {start:7,.0f} MB, peak {peak:7,.0f} MB  {step}")
            for name, digest in stored.items():
                print(f"  sha256 {digest}  {name}")


if __name__ == "__main__":
    main()
