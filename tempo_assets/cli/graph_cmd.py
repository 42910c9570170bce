"""``tempo init | cutoffs | windows | materialize``: the asset graph from the command line."""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

# test_growth and test_score share a pool (``pool="test_score"``): a limit of 1 serialises their
# steps across runs, so queued TEST reads and scorings wait for one another (the claims still decide)
DAGSTER_YAML = "telemetry:\n  enabled: false\nconcurrency:\n  pools:\n    default_limit: 1\n"
# the SQL warehouse models; the window evaluation sets that scoring reads come from them
WAREHOUSE_ASSETS = ("stg_annotations", "experimental_annotations", "annotation_growth", "valid_evaluation_set")


def ensure_dagster_home() -> Path:
    """``$DAGSTER_HOME`` (default ``<repo>/.dagster_home``) with telemetry disabled."""
    from tempo_assets.resources import default_dagster_home

    home = Path(default_dagster_home())
    home.mkdir(parents=True, exist_ok=True)
    if not (home / "dagster.yaml").exists():
        (home / "dagster.yaml").write_text(DAGSTER_YAML, encoding="utf-8")
    os.environ["DAGSTER_HOME"] = str(home)
    return home


def ensure_test_pool(instance) -> bool:
    """Create the ``test_score`` pool's limit row (test_growth and test_score) from ``default_limit`` now.

    Dagster creates it lazily on the first slot claim; doing it before any run starts keeps
    concurrent first claims from racing on the empty pool. ``False`` when no limit applies.
    """
    from tempo_assets.assets.scoring import TEST_POOL

    return bool(instance.event_log_storage.initialize_concurrency_limit_to_default(TEST_POOL))


def current_plan():
    from tempo_assets.partitions import plan_partitions
    from tempo_assets.resources import default_archive_root, open_archive

    return plan_partitions(open_archive(default_archive_root()))


def plan_steps(plan, target: str, key: str | None = None) -> list[tuple[str, str]]:
    """``(job, partition)`` runs the target needs, in dependency order, without duplicates."""
    from tempo_assets.partitions import parse_window_key, previous_release, unique

    windows = plan.windows if target == "all" else ([key] if target == "window" else [])
    releases, cutoffs = [], []
    for w in map(parse_window_key, windows):
        releases += list(w.releases)
        cutoffs += [w.t_minus_1, w.t0]
    if target in ("cutoff", "all"):
        submit = [key] if target == "cutoff" else plan.cutoffs[-1:]
        for c in submit:
            releases += [previous_release(plan.releases, c), c]
            cutoffs.append(c)
    for c in list(cutoffs):
        releases += [previous_release(plan.releases, c), c]
    order = {r: i for i, r in enumerate(plan.releases)}
    steps = [("release_job", r) for r in sorted(unique(releases), key=order.get)]
    steps += [("cutoff_job", c) for c in sorted(unique(cutoffs), key=order.get)]
    steps += [("window_job", w) for w in windows]
    if target in ("cutoff", "all"):
        steps += [("submission_job", c) for c in submit]
    if target == "all":
        steps.append(("catalog_job", None))  # the cross-window catalog and report, rebuilt every time
    return steps


def run_steps(steps, instance, resources=None, echo=print, exclude=(),
              log_level: str | None = None) -> list[tuple[str, str, str, float]]:
    """Materialise each step unless all its artefacts exist; returns (job, key, status, seconds).

    ``exclude`` names assets left out of every step (e.g. the SQL warehouse models, which no
    score depends on); the run stops at the first failed step. Dagster's console log shows
    ``log_level`` and above (default ``$TEMPO_LOG_LEVEL`` or WARNING); the event log in the
    instance keeps everything.
    """
    log_level = (log_level or os.environ.get("TEMPO_LOG_LEVEL", "WARNING")).upper()
    import dagster as dg

    from tempo_assets.assets.scoring import test_refusal
    from tempo_assets.definitions import ASSETS, build_resources
    from tempo_assets.core.artefacts import ArtefactStore
    from tempo_assets.resources import default_artefacts_root
    from tempo_assets.sensors import CUTOFF_ASSETS, RELEASE_ASSETS, WINDOW_ASSETS
    from tempo_assets.audit_checks import AUDIT_CHECKS
    from tempo_assets.checks import CHECKS
    from tempo_assets.warehouse_checks import WAREHOUSE_CHECKS

    resources = resources or build_resources()
    store = ArtefactStore(resources["artefact_store"].root if "artefact_store" in resources else default_artefacts_root())
    selections = {"release_job": RELEASE_ASSETS, "cutoff_job": CUTOFF_ASSETS, "window_job": WINDOW_ASSETS,
                  "submission_job": ["submission"], "catalog_job": ["benchmark_catalog"]}
    report = []
    for number, (job, key) in enumerate(steps, start=1):
        names = [n for n in selections[job] if n not in set(exclude)]
        # only what is missing: e.g. a window scored before `benchmark` existed gets just its benchmark
        # (test_growth and test_score refuse a second read or score)
        missing = names if job == "catalog_job" else [n for n in names if not store.exists(n, key)]
        if not missing:
            echo(f"[{number}/{len(steps)}] {job} {key}: already materialised, skipped")
            report.append((job, key, "skipped", 0.0))
            continue
        started = time.perf_counter()
        result = dg.materialize(ASSETS + CHECKS + AUDIT_CHECKS + WAREHOUSE_CHECKS, selection=missing, partition_key=key,
                                instance=instance, resources=resources, raise_on_error=False,
                                run_config={"loggers": {"console": {"config": {"log_level": log_level}}}})
        seconds = time.perf_counter() - started
        status = "ok" if result.success else "FAILED"
        touches_test = {"test_growth", "test_score"} & set(missing)
        refusal = test_refusal(instance, result.run_id) if touches_test else None
        if refusal is not None:  # the run succeeded without reading or scoring TEST: say so, and go on
            status = "refused"
            echo(f"[{number}/{len(steps)}] {job} {key}: TEST not read nor scored: {refusal}")
        echo(f"[{number}/{len(steps)}] {job} {key}: {status} in {seconds:.1f}s")
        report.append((job, key, status, seconds))
        if not result.success:
            break
    return report


def _init(args) -> int:
    import dagster as dg

    from tempo_assets.partitions import register_partitions

    home = ensure_dagster_home()
    plan = current_plan()
    instance = dg.DagsterInstance.get()
    added = register_partitions(instance, plan)
    ensure_test_pool(instance)
    print(f"DAGSTER_HOME={home}")
    for name, keys in plan.as_dict().items():
        print(f"{name}: {len(keys)} ({len(added[name])} new)")
    return 0


def _list(attribute: str):
    def run(args) -> int:
        for key in getattr(current_plan(), attribute):
            print(key)
        return 0
    return run


def _materialize(args) -> int:
    import dagster as dg

    from tempo_assets.partitions import register_partitions

    ensure_dagster_home()
    plan = current_plan()
    instance = dg.DagsterInstance.get()
    register_partitions(instance, plan)
    ensure_test_pool(instance)
    if args.window and args.window not in plan.windows:
        print(f"tempo: error: unknown window {args.window!r} (see `tempo windows`)", file=sys.stderr)
        return 2
    if args.cutoff and args.cutoff not in plan.cutoffs:
        print(f"tempo: error: unknown cutoff {args.cutoff!r} (see `tempo cutoffs`)", file=sys.stderr)
        return 2
    target = "all" if args.all else ("window" if args.window else "cutoff")
    report = run_steps(plan_steps(plan, target, args.window or args.cutoff), instance)
    failed = any(status == "FAILED" for _, _, status, _ in report)
    if not failed:
        print_outputs(report)
    return 1 if failed else 0


def print_outputs(report) -> None:
    """Where the results a user came for lie: CAFA submissions and TEST scores."""
    from tempo_assets.core.artefacts import ArtefactStore
    from tempo_assets.resources import default_artefacts_root

    root = Path(default_artefacts_root())
    store = ArtefactStore(root)
    for job, key, status, _ in report:
        if status == "refused":
            continue
        if job == "submission_job":
            value = store.folder("submission", key) / store.read_meta("submission", key)["file"]
            print(f"CAFA submission for cutoff {key}: {value} "
                  f"(manifest: {store.sidecar_path('submission', key)})")
        elif job == "window_job":
            print(f"TEST score of window {key}: {root / 'test_score' / key} "
                  f"(tempo report --window {key})")
        elif job == "catalog_job":
            print(f"Catalog of every window: {root / 'benchmark_catalog' / '__unpartitioned__' / 'report.html'}")


def register(subparsers) -> None:
    parser = subparsers.add_parser("init", help="create $DAGSTER_HOME and register the archive's partitions")
    parser.set_defaults(func=_init)
    parser = subparsers.add_parser("cutoffs", help="list cutoff partition keys, oldest first")
    parser.set_defaults(func=_list("cutoffs"))
    parser = subparsers.add_parser("windows", help="list window partition keys, oldest first")
    parser.set_defaults(func=_list("windows"))
    parser = subparsers.add_parser("materialize", help="materialise what a target needs, in dependency order")
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--all", action="store_true", help="every window through test_score and the latest submission")
    group.add_argument("--window", metavar="KEY", help="one window through test_score")
    group.add_argument("--cutoff", metavar="KEY", help="one cutoff's submission")
    parser.set_defaults(func=_materialize)
