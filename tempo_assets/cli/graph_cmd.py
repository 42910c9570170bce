"""``tempo init | cutoffs | windows | materialize | status``: the asset graph from the command line."""
from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
from pathlib import Path

from tempo_assets.cli.progress_watch import ProgressWatch

# test_growth and test_score share a pool of limit 1: queued TEST reads and scorings wait for one another
DAGSTER_YAML = "telemetry:\n  enabled: false\nconcurrency:\n  pools:\n    default_limit: 1\n"
# core/base/progress.py's lines (logger tempo.progress) become events of the step that logs them
PYTHON_LOGS = "python_logs:\n  managed_python_loggers:\n    - tempo.progress\n  python_log_level: INFO\n"
# the run tag that finds a run launched by execute_job (the celery path) while it runs
LAUNCH_TAG = "tempo/launch"
# the SQL warehouse models; the window evaluation sets that scoring reads come from them
WAREHOUSE_ASSETS = ("stg_annotations", "experimental_annotations", "annotation_growth", "valid_evaluation_set")


def ensure_dagster_home() -> Path:
    """``$DAGSTER_HOME`` (default ``<repo>/.dagster_home``) with telemetry disabled."""
    from tempo_assets.postgres_pool import pool_connections
    from tempo_assets.resources import default_dagster_home

    home = Path(default_dagster_home())
    home.mkdir(parents=True, exist_ok=True)
    yaml = home / "dagster.yaml"
    # written by tempo (now, or by a version before progress lines): tempo's own content
    if not yaml.exists() or yaml.read_text(encoding="utf-8") == DAGSTER_YAML:
        yaml.write_text(DAGSTER_YAML + PYTHON_LOGS, encoding="utf-8")
    os.environ["DAGSTER_HOME"] = str(home)
    pool_connections(home)  # a PostgreSQL instance opened after this pools its connections
    return home


def ensure_test_pool(instance) -> bool:
    """Create the ``test_score`` pool's limit row (test_growth and test_score) from ``default_limit`` now.

    Dagster creates it lazily on the first slot claim; doing it before any run starts keeps
    concurrent first claims from racing on the empty pool. ``False`` when no limit applies.
    """
    from tempo_assets.assets.evaluation import TEST_POOL

    storage = instance.event_log_storage
    # a row that exists already (e.g. `dagster instance concurrency set`) is kept: Dagster's
    # initialisation inserts first, and on PostgreSQL the failed insert aborts its transaction
    if TEST_POOL in storage.get_concurrency_keys():
        return True
    return bool(storage.initialize_concurrency_limit_to_default(TEST_POOL))


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
    methods = list(getattr(plan, "methods", [])) if target in ("all", "window") else []
    if methods and target == "all":
        cutoffs += list(plan.cutoffs)  # registered methods run at every cutoff
    for c in list(cutoffs):
        releases += [previous_release(plan.releases, c), c]
    order = {r: i for i, r in enumerate(plan.releases)}
    steps = [("release_job", r) for r in sorted(unique(releases), key=order.get)]
    steps += [("cutoff_job", c) for c in sorted(unique(cutoffs), key=order.get)]
    if methods:
        steps += [("method_bundle_job", c) for c in sorted(unique(cutoffs), key=order.get)]
        steps += [("method_job", f"{c}|{m}") for c in sorted(unique(cutoffs), key=order.get) for m in methods]
    steps += [("window_job", w) for w in windows]
    if target in ("cutoff", "all"):
        steps += [("submission_job", c) for c in submit]
    if target == "all":
        steps.append(("catalog_job", None))  # the cross-window catalog and report, when they would change
    return steps


class MethodStep:
    """A method step's work: the assets it still has to build (nothing to wait for beyond its cutoff)."""

    def __init__(self, todo: list[str]):
        self.todo, self.blocked, self.waiting, self.unchecked, self.burned = todo, [], [], [], []


# statuses of a step in ``run_steps``' report, and what each means in the closing summary
BUILT, SKIPPED, BLOCKED, WAITING, BURNED, FAILED, REFUSED = "ok", "skipped", "blocked", "waiting", "burned", "FAILED", "refused"


def run_steps(steps, instance, resources=None, echo=print, exclude=(),
              log_level: str | None = None, jobs: int = 1) -> list[tuple[str, str, str, float]]:
    """Run each step under its named job (``release_job``, ``cutoff_job``, ...); returns (job, key, status, seconds).

    A step builds only its missing or stale artefacts (``graph_state``: a stored TEST growth,
    TEST score or frozen recipe is never rebuilt, a superseded window never re-scored), and runs
    only when every partition it reads is stored, current and passed its blocking checks
    (the Python, audit and SQL warehouse checks) in the instance. Checks that never ran on a
    stored partition it reads (``unchecked``: a kill between a write and its checks, another
    instance on the same store) are run first, on their own. A step that cannot run is
    ``blocked`` (a blocking check failed on what it reads), ``waiting`` (on a TEST claim, an
    upstream that failed or is missing) or ``burned`` (its window's TEST was released: its TEST
    growth and score are never built) and the others still run: the report
    ends with a summary of what was not built and why. ``catalog_job`` runs when the catalog would change.
    ``exclude`` names assets left out of every step. A line is printed when each run starts and
    ends, and, while it runs, the latest progress line of each running step (``core/base/progress.py``).
    Dagster's console log shows ``log_level`` and above (default ``$TEMPO_LOG_LEVEL`` or WARNING);
    the event log keeps everything. ``$TEMPO_RUN_CONFIG`` names a YAML file of run config merged
    into every run (e.g. ``resources: {grid: {config: {bootstrap_samples: 20}}}``). Concurrent
    launches on one local store take each step's lock (``runs.step_lock``): the later one waits,
    re-plans and skips what the first built.

    With ``TEMPO_EXECUTOR=celery`` each run goes through ``dagster.execute_job`` on the module's
    definitions (``tempo_assets.definitions``), whose jobs use the celery executor: every step is
    a task that a worker process picks up from the broker. The workers build their resources from
    their own environment, so ``resources`` must be ``None`` then, the instance must be one they
    share (PostgreSQL) and the artefact store an object store.

    ``jobs`` > 1 (``concurrent_steps.py``): steps that do not depend on one another run at once, at most
    ``jobs`` and a method's bundle or run beside them (windows as many as the free memory holds), each in a
    process of its own; else in this one.
    """
    runner = StepRunner(instance, resources, echo, exclude, log_level)
    if jobs > 1 and len(steps) > 1 and not runner.distributed and not instance.is_ephemeral:
        from tempo_assets.cli.concurrent_steps import (ConcurrentSteps, light_place_fits, max_parallel_windows,
                                                       window_memory_mb)

        window_mb = window_memory_mb(instance, runner.archive.root)
        windows = max_parallel_windows(window_mb)
        light_place = light_place_fits(instance, jobs, windows, window_mb)
        report = ConcurrentSteps(runner, steps, jobs, windows, light_place).run()
    else:
        report = [runner.run_one(number, len(steps), job, key) for number, (job, key) in enumerate(steps, start=1)]
    runner.summarise(report)
    return [(job, key, status, seconds) for job, key, status, seconds, _ in report]


class StepRunner:
    """What ``run_steps`` needs for every step: the definitions, the store, the plan and how to launch."""

    # a method's bundle and predictions are built once per (cutoff, method) and kept (a failed run is
    # recorded as its status); they are not part of the staleness graph
    METHOD_ASSETS = {"method_bundle_job": ["method_bundle"], "method_job": ["method_predictions"]}

    def __init__(self, instance, resources=None, echo=print, exclude=(), log_level: str | None = None):
        from tempo_assets.core.base.errors import TempoInputError
        from tempo_assets.core.inputs.releases import open_archive
        from tempo_assets.definitions import build_resources
        from tempo_assets.cli.step_process import defs_state_of, definitions_for
        from tempo_assets.executors import executor_kind
        from tempo_assets.graph_state import DefinedGraph
        from tempo_assets.partitions import plan_partitions
        from tempo_assets.resources import open_artefact_store

        log_level = (log_level or os.environ.get("TEMPO_LOG_LEVEL", "WARNING")).upper()
        self.distributed = executor_kind() == "celery"
        if self.distributed and resources is not None:
            raise TempoInputError("TEMPO_EXECUTOR=celery: the workers build the resources from their own "
                                  "environment; unset it to run with resources given in code")
        self.instance, self.echo, self.exclude = instance, echo, exclude
        self.resources = resources or build_resources()
        self.store = (self.resources["artefact_store"].store() if "artefact_store" in self.resources
                      else open_artefact_store())
        self.store.location.check()  # an object store that is down fails here, naming its endpoint
        self.archive = open_archive(self.resources["archive"].root)
        self.plan = plan_partitions(self.archive)
        self.defs = definitions_for(self.resources)
        with defs_state_of(instance):
            self.defined = DefinedGraph.of(self.defs.get_repository_def())
        self.run_config = merged_run_config({"loggers": {"console": {"config": {"log_level": log_level}}}})
        self.launch_celery = celery_launcher(instance, self.store, echo) if self.distributed else None
        self.locks = Path(self.store.root) / "_locks" if self.store.root is not None else None

    def graph_state(self):
        from tempo_assets.graph_state import GraphState

        return GraphState(self.store, self.plan, self.defined, archive=self.archive, instance=self.instance,
                          exclude=self.exclude)

    def plan_step(self, job: str, key: str, state=None):
        """What step ``job`` on ``key`` builds now (``state``: a ``graph_state.GraphState`` of now, else a new one)."""
        if job in self.METHOD_ASSETS:
            return MethodStep([n for n in self.METHOD_ASSETS[job] if not self.store.exists(n, key)])
        return (state or self.graph_state()).step(job, key)

    def upstream_of(self, job: str, key: str):
        """The upstream partitions ``job`` on ``key`` reads (``graph_state.GraphState.upstream_of``)."""
        return self.graph_state().upstream_of(job, key)

    def run_one(self, number: int, total: int, job: str, key: str) -> tuple[str, str, str, float, str]:
        """Plan, check what it reads, and run one step under its lock; ``(job, key, status, seconds, why)``."""
        with contextlib.ExitStack() as held:
            where, ready = self.prepare(held, number, total, job, key, self.echo)
            return ready if isinstance(ready, tuple) else self.launch(ready, job, key, where)

    def prepare(self, held: contextlib.ExitStack, number: int, total: int, job: str, key: str, echo):
        """Take the step's lock (into ``held``), plan it and run the checks it waits on;
        ``(where, step)`` when it has something to build, else ``(where, report row)``."""
        from tempo_assets.runs import step_lock

        where = f"[{number}/{total}] {job} {key}"
        waited = held.enter_context(step_lock(self.locks, job, key))
        step = self.plan_step(job, key)
        if step.unchecked:
            self.run_checks(step.unchecked, where, echo)
            step = self.plan_step(job, key)
        if not step.todo:
            meanwhile = " (by another launch, which this one waited for)" if waited else ""
            echo(f"{where}: already materialised and current, skipped{meanwhile}")
            return where, (job, key, SKIPPED, 0.0, "")
        if step.blocked or step.waiting or step.unchecked or step.burned:
            status = BLOCKED if step.blocked else WAITING if step.waiting or step.unchecked else BURNED
            why = "; ".join(step.blocked + step.waiting + step.burned
                            + [f"checks of {a}[{p}] did not run" for a, p, _ in step.unchecked])
            echo(f"{where}: {status}, not run: {why}")
            return where, (job, key, status, 0.0, why)
        return where, step

    def run_checks(self, unchecked, where: str, echo) -> None:
        """Run the blocking checks that never ran on stored partitions, each partition's on their own."""
        from tempo_assets.graph_state import JOB_ASSETS
        from tempo_assets.cli.step_process import defs_state_of
        from tempo_assets.runs import launch_tags

        for asset, partition, keys in unchecked:
            job = next(j for j, assets in JOB_ASSETS.items() if asset in assets)
            names = ", ".join(k.name for k in keys)
            echo(f"{where}: running the checks that never ran on {asset}[{partition}] ({names})")
            with defs_state_of(self.instance):
                subset = self.defs.resolve_job_def(job).get_subset(asset_selection=set(),
                                                                   asset_check_selection=set(keys))
                result = subset.execute_in_process(run_config=self.run_config, instance=self.instance,
                                                   partition_key=partition, raise_on_error=False, tags=launch_tags())
            outcome = "passed" if result.success and all(
                e.passed for e in result.get_asset_check_evaluations()) else "did not pass"
            echo(f"{where}: checks of {asset}[{partition}] {outcome} (run {result.run_id})")

    def order_for(self, step, job: str, key: str):
        """The run that builds ``step``'s selection (``step_process.RunOrder``), with a new run id."""
        import uuid

        from tempo_assets.cli.step_process import RunOrder

        return RunOrder(job, key, tuple(step.todo), str(uuid.uuid4()), self.run_config)

    def progress(self, run_id: str, where: str) -> "ProgressWatch":
        return ProgressWatch(self.instance, lambda: run_id, self.echo, where)

    def launch(self, step, job: str, key: str, where: str) -> tuple[str, str, str, float, str]:
        """Run ``step``'s selection in this process (or on the celery workers); ``(job, key, status, seconds, why)``."""
        import dagster as dg

        from tempo_assets.cli.step_process import EndedRun, execute_order

        started = time.perf_counter()
        if self.distributed:
            self.echo(f"{where}: started on the celery workers ({', '.join(step.todo)})")
            result = self.launch_celery(job, key, self.run_config, [dg.AssetKey(n) for n in step.todo], where)
            run_id = result.run_id
        else:
            order = self.order_for(step, job, key)
            run_id = order.run_id
            self.echo(f"{where}: started run {run_id} ({', '.join(step.todo)})")
            with self.progress(run_id, where):
                result = execute_order(self.defs, self.instance, order)
        return self.outcome(step, (job, key), where, EndedRun(run_id, result.success, time.perf_counter() - started),
                            self.echo)

    def outcome(self, step, job_key: tuple[str, str], where: str, ended, echo) -> tuple[str, str, str, float, str]:
        """The report row of a run that ended (``step_process.EndedRun``), and its closing line."""
        from tempo_assets.assets.evaluation import test_refusal

        (job, key), run_id, seconds = job_key, ended.run_id, ended.seconds
        status, why = (BUILT, "") if ended.success else (FAILED, f"run {run_id} failed (tempo status; the run's log)")
        refusal = test_refusal(self.instance, run_id) if {"test_growth", "test_score"} & set(step.todo) else None
        if refusal is not None:  # the run succeeded without reading or scoring TEST: say so, and go on
            status, why = REFUSED, refusal
            echo(f"{where}: TEST not read nor scored: {refusal}")
        echo(f"{where}: {status} in {seconds:.1f}s (run {run_id})")
        return job, key, status, seconds, why

    def summarise(self, report) -> None:
        """One closing line of counts, then one line per step not built, with why."""
        counts = {s: sum(1 for r in report if r[2] == s)
                  for s in (BUILT, SKIPPED, REFUSED, WAITING, BURNED, BLOCKED, FAILED)}
        if len(report) <= 1 and not (counts[WAITING] or counts[BURNED] or counts[BLOCKED] or counts[FAILED]):
            return
        self.echo("summary: " + ", ".join(f"{n} {s.lower()}" for s, n in counts.items() if n))
        for job, key, status, _, why in report:
            if status in (WAITING, BURNED, BLOCKED, FAILED, REFUSED):
                self.echo(f"  {status.lower()}: {job} {key}: {why}")


def merged_run_config(base: dict) -> dict:
    """``base`` with the YAML run config of ``$TEMPO_RUN_CONFIG`` merged in (its keys win)."""
    import yaml

    from tempo_assets.core.base.errors import TempoInputError

    path = os.environ.get("TEMPO_RUN_CONFIG", "").strip()
    if not path:
        return base
    try:
        extra = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise TempoInputError(f"cannot read the run config of TEMPO_RUN_CONFIG: {exc}", path=path) from exc
    if not isinstance(extra, dict):
        raise TempoInputError("run config is not a mapping", path=path)

    def merge(a: dict, b: dict) -> dict:
        out = dict(a)
        for k, v in b.items():
            out[k] = merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
        return out

    return merge(base, extra)


def celery_launcher(instance, store, echo):
    """``launch(job, key, run_config, selection, where)`` running one job through the celery
    executor; checks first that the run's storage, the object store and the workers are shared."""
    import uuid
    import warnings

    import dagster as dg
    from dagster._core.definitions.reconstruct import ReconstructableRepository

    from tempo_assets.core.base.errors import TempoInputError
    from tempo_assets.executors import check_celery

    if instance.is_ephemeral or type(instance.run_storage).__name__.startswith("Sqlite"):
        raise TempoInputError("TEMPO_EXECUTOR=celery needs an instance the workers share: PostgreSQL run "
                              "and event storage (docs/deploy/dagster.yaml), not SQLite", path=instance.root_directory)
    if store.local:
        raise TempoInputError("TEMPO_EXECUTOR=celery needs artefacts on an object store the workers share "
                              "(TEMPO_ARTEFACTS=s3://bucket/prefix), not a local folder", path=str(store.location))
    workers = check_celery()
    echo(f"celery: {len(workers)} worker(s) on the broker: {', '.join(workers)}")
    repository = ReconstructableRepository.for_module("tempo_assets.definitions", "defs",
                                                      working_directory=os.getcwd())

    def launch(job: str, key: str | None, run_config: dict, selection, where: str):
        tag = uuid.uuid4().hex
        tags = {LAUNCH_TAG: tag, **({"dagster/partition": key} if key else {})}

        def run_id():
            runs = instance.get_runs(filters=dg.RunsFilter(tags={LAUNCH_TAG: tag}), limit=1)
            return runs[0].run_id if runs else None

        with ProgressWatch(instance, run_id, echo, where), warnings.catch_warnings():
            # dagster-celery registers its step task again for every submission; celery warns each time
            warnings.filterwarnings("ignore", message="Task name 'execute_plan' is already registered")
            return dg.execute_job(repository.get_reconstructable_job(job), instance, run_config=run_config,
                                  tags=tags, raise_on_error=False, asset_selection=selection)

    return launch


def _init(args) -> int:
    import dagster as dg

    from tempo_assets.partitions import register_partitions

    home = ensure_dagster_home()
    plan = current_plan()
    with dg.DagsterInstance.get() as instance:  # closed again: nothing holds the instance's files open
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
    from tempo_assets.cli.step_forkserver import start_forkserver, stop_forkserver

    signal.signal(signal.SIGTERM, signal.default_int_handler)  # `kill PID` stops a launch as Ctrl-C does
    home = ensure_dagster_home()
    jobs = step_jobs(args.jobs)
    if jobs > 1:  # first: the step processes' forkserver imports what they use beside this process's set-up
        start_forkserver()
    try:
        return _materialize_with(args, home, jobs)
    finally:  # the launch is over (or failed at its start): a forkserver still importing stops now
        stop_forkserver()


def _materialize_with(args, home: Path, jobs: int) -> int:
    import dagster as dg

    from tempo_assets.cli.errors import require_free_space
    from tempo_assets.partitions import register_partitions
    from tempo_assets.resources import default_artefacts_root
    from tempo_assets.runs import settle_dead_runs, step_lock

    artefacts = default_artefacts_root()
    require_free_space(DAGSTER_HOME=str(home), **({} if "://" in artefacts else {"TEMPO_ARTEFACTS": artefacts}))
    plan = current_plan()
    # concurrent first launches on a fresh DAGSTER_HOME would race to create its SQLite schema
    with step_lock(home, "instance", "init"):
        instance = dg.DagsterInstance.get()
        settle_dead_runs(instance)
        register_partitions(instance, plan)
        ensure_test_pool(instance)
    if args.window and args.window not in plan.windows:
        print(f"tempo: error: unknown window {args.window!r} (see `tempo windows`)", file=sys.stderr)
        return 2
    if args.cutoff and args.cutoff not in plan.cutoffs:
        print(f"tempo: error: unknown cutoff {args.cutoff!r} (see `tempo cutoffs`)", file=sys.stderr)
        return 2
    target = "all" if args.all else ("window" if args.window else "cutoff")
    resources = None
    profile = getattr(args, "select_under", "lafa")
    if getattr(args, "grid", "default") != "default" or profile != "lafa":
        from tempo_assets.definitions import build_resources
        from tempo_assets.resources import GRIDS

        resources = build_resources(grid=GRIDS[args.grid](profile_name=profile))
    report = run_steps(plan_steps(plan, target, args.window or args.cutoff), instance, resources=resources,
                       jobs=jobs)
    print_outputs(report)
    # 0: everything buildable was built (what waits on a claim, a burned window or a user's action is
    # in the summary); 1: a run failed or a blocking check failed on what a step reads
    return 1 if any(status in (FAILED, BLOCKED) for _, _, status, _ in report) else 0


def step_jobs(asked: int | None) -> int:
    """How many steps ``tempo materialize`` runs at once: ``--jobs``, else the cores under the
    ``multiprocess`` executor and 1 under the others."""
    from tempo_assets.core.base.errors import TempoInputError
    from tempo_assets.executors import cpu_count, executor_kind

    kind = executor_kind()
    if asked is not None and asked < 1:
        raise TempoInputError(f"--jobs {asked}: give a whole number of at least 1")
    if kind != "multiprocess":
        if asked is not None and asked > 1:
            raise TempoInputError(f"--jobs {asked} needs TEMPO_EXECUTOR=multiprocess (it is {kind}): unset it, "
                                  "or run with --jobs 1")
        return 1
    return asked if asked is not None else cpu_count()


def graph_states(instance, exclude=()):
    """Every artefact's state (``graph_state.GraphState.all_states``) for the configured archive and store."""
    from tempo_assets.core.inputs.releases import open_archive
    from tempo_assets.cli.step_process import defs_state_of
    from tempo_assets.definitions import defs
    from tempo_assets.graph_state import DefinedGraph, GraphState
    from tempo_assets.partitions import plan_partitions
    from tempo_assets.resources import default_archive_root, open_artefact_store

    archive = open_archive(default_archive_root())
    store = open_artefact_store()
    store.location.check()  # an object store that is down fails here, naming its endpoint
    with defs_state_of(instance):
        defined = DefinedGraph.of(defs.get_repository_def())
    state = GraphState(store, plan_partitions(archive), defined, archive=archive, instance=instance, exclude=exclude)
    return state.all_states()


def _status(args) -> int:
    import json

    import dagster as dg

    from tempo_assets.cli.errors import ERROR_EXIT, instance_storage_failure
    from tempo_assets.runs import settle_dead_runs

    ensure_dagster_home()
    broken = None
    try:
        instance = dg.DagsterInstance.get()
        settle_dead_runs(instance, echo=lambda line: print(line, file=sys.stderr))
        states = graph_states(instance)
    except Exception as exc:
        broken = instance_storage_failure(exc)
        if broken is None:
            raise
        # the store alone still says what is stored; failed runs and check results need the instance
        states = graph_states(None)
    if args.json:
        print(json.dumps([s.as_dict() for s in states], indent=1))
    else:
        for state in states:
            print(state.line())
    if broken is not None:
        print(f"tempo: error: {broken} (the states above come from the artefact store alone: "
              "no failed runs or check results)", file=sys.stderr)
        return ERROR_EXIT
    return 0


def print_outputs(report) -> None:
    """Where the results a user came for lie: CAFA submissions and TEST scores."""
    from tempo_assets.resources import open_artefact_store

    store = open_artefact_store()
    for job, key, status, _ in report:
        if status not in (BUILT, SKIPPED):
            continue
        if job == "submission_job":
            value = store.where(f"{store.prefix('submission', key)}/{store.read_meta('submission', key)['file']}")
            print(f"CAFA submission for cutoff {key}: {value} "
                  f"(manifest: {store.sidecar_path('submission', key)})")
        elif job == "method_job":
            meta = store.read_meta("method_predictions", key)
            print(f"method {key.split('|')[1]} at cutoff {key.split('|')[0]}: {meta['status']}"
                  + (f" ({meta['reason']})" if meta["status"] != "ok" else f", {meta['predictions']} predictions"))
        elif job == "window_job":
            print(f"TEST score of window {key}: {store.where(store.prefix('test_score', key))} "
                  f"(tempo report --window {key})")
        elif job == "catalog_job":
            print(f"Catalog of every window: {store.folder('benchmark_catalog', None) / 'report.html'}")


def register(subparsers) -> None:
    parser = subparsers.add_parser("init", help="create $DAGSTER_HOME and register the archive's partitions")
    parser.set_defaults(func=_init)
    parser = subparsers.add_parser("cutoffs", help="list cutoff partition keys, oldest first")
    parser.set_defaults(func=_list("cutoffs"))
    parser = subparsers.add_parser("windows", help="list window partition keys, oldest first")
    parser.set_defaults(func=_list("windows"))
    parser = subparsers.add_parser(
        "materialize", help="materialise what a target needs, in dependency order",
        epilog="Every step that can run does, whatever another window's state; the output ends with a summary "
               "of what was not built and why. Exit status: 0 when everything buildable was built (steps waiting "
               "on a TEST claim, a burned window or a release are listed in the summary), 1 when a run failed or "
               "a blocking check failed on what a step reads, 2 for a usage or input error.")
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--all", action="store_true", help="every window through test_score and the latest submission")
    group.add_argument("--window", metavar="KEY", help="one window through test_score")
    group.add_argument("--cutoff", metavar="KEY", help="one cutoff's submission")
    parser.add_argument("--grid", choices=("default", "full"), default="default",
                        help="the VALID selection grid: default (small, the demo in minutes) or full "
                             "(more K, every candidate and feature set, four LightGBM settings; real runs)")
    parser.add_argument("--select-under", choices=("lafa", "cafaeval"), default="lafa",
                        help="the profile VALID selection scores the grid under and test_score scores the frozen "
                             "recipe under (default lafa, LAFA's conventions); benchmark reports both either way")
    parser.add_argument("--jobs", type=int, metavar="N",
                        help="run at most N independent steps at once, each in a process of its own (default: "
                             "the cores, under TEMPO_EXECUTOR=multiprocess, the default; 1: one after the other, "
                             "in this process), and a method's bundle or run beside them; window runs also no more than the free memory holds "
                             "($TEMPO_MAX_PARALLEL_WINDOWS caps them)")
    parser.set_defaults(func=_materialize)
    parser = subparsers.add_parser(
        "status", help="one line per artefact: <asset>[<partition>] <state> <reason>",
        description="State of every artefact: ok, stale, superseded, missing, failed or claimed, and why.")
    parser.add_argument("--json", action="store_true", help="a JSON list of {asset, partition, state, reason}")
    parser.set_defaults(func=_status)
