"""Dagster's share of a `tempo materialize` run, read back from the instance it ran in.

For the runs in ``$DAGSTER_HOME`` (or ``--home``): the span from the first run's creation to the
last run's end, each run's wall time (its record's start to end) and the steps' durations (the
``STEP_START``..``STEP_SUCCESS`` times Dagster records, the asset checks summed under
``checks``). What is not step time — run setup, the event log writes between steps, and
`tempo materialize`'s planning between runs — is the overhead, printed as a share of step time
(the issue's measure) and of the span, then per job and per asset.

    DAGSTER_HOME=.dagster_home .venv/bin/python benchmarks/dagster_overhead.py
"""
from __future__ import annotations

import argparse
import os
from collections import defaultdict


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--home", default=os.environ.get("DAGSTER_HOME"), help="the instance folder ($DAGSTER_HOME)")
    parser.add_argument("--top", type=int, default=25, help="assets listed by step time")
    args = parser.parse_args(argv)
    if not args.home:
        parser.error("name the instance: --home FOLDER or $DAGSTER_HOME")

    import dagster as dg
    from dagster._core.instance.ref import InstanceRef

    with dg.DagsterInstance.from_ref(InstanceRef.from_dir(args.home)) as instance:
        records = [r for r in (instance.get_run_record_by_id(run.run_id) for run in instance.get_runs())
                   if r is not None and r.start_time and r.end_time]
        if not records:
            print(f"no finished run in {args.home}")
            return 1
        jobs: dict[str, list[float]] = defaultdict(lambda: [0, 0.0, 0.0])
        assets: dict[str, float] = defaultdict(float)
        for record in records:
            steps = [s for s in instance.get_run_step_stats(record.dagster_run.run_id) if s.start_time and s.end_time]
            step_time = sum(s.end_time - s.start_time for s in steps)
            for s in steps:
                assets["checks" if "__" in s.step_key else s.step_key] += s.end_time - s.start_time
            job = jobs[record.dagster_run.job_name]
            job[0] += 1
            job[1] += record.end_time - record.start_time
            job[2] += step_time
    span = max(r.end_time for r in records) - min(r.create_timestamp.timestamp() for r in records)
    wall = sum(j[1] for j in jobs.values())
    steps = sum(j[2] for j in jobs.values())
    overhead = span - steps
    print(f"{len(records)} runs: span {span:.1f} s, run wall {wall:.1f} s, step time {steps:.1f} s")
    print(f"overhead (span - step time) {overhead:.1f} s = {100 * overhead / steps:.1f}% of step time, "
          f"{100 * overhead / span:.1f}% of the span")
    print(f"{'job':22s} {'runs':>5s} {'wall s':>9s} {'steps s':>9s} {'overhead s':>11s}")
    for name, (n, job_wall, job_steps) in sorted(jobs.items(), key=lambda kv: -kv[1][1]):
        print(f"{name:22s} {n:5d} {job_wall:9.1f} {job_steps:9.1f} {job_wall - job_steps:11.1f}")
    print(f"{'asset':40s} {'step s':>8s} {'share':>6s}")
    for name, seconds in sorted(assets.items(), key=lambda kv: -kv[1])[:args.top]:
        print(f"{name:40s} {seconds:8.1f} {100 * seconds / steps:5.1f}%")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
