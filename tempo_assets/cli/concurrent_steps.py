"""``tempo materialize --jobs N``: independent steps run at once, each run in a process of its own.

The steps ``graph_cmd.plan_steps`` lists (in dependency order) are launched as soon as every step
building what they read (:func:`step_dependencies`) has ended -- a submission as soon as the frozen
recipe it applies is ready, before its window's run ends -- the one with the longest chain of runs
after it first (:func:`launch_order`), at most ``N`` at once, each one's Dagster run
executing in a child process (``step_process.child_main``, forked from a forkserver that preloaded
the code location). Everything else is the sequential path's (``graph_cmd.StepRunner``): a step is
planned, gated and launched under its lock (held until its run ends), the TEST claims decide in the
run, statuses and exit codes are the same. A step's lines are printed together when it ends (its
progress lines while it runs), the closing summary in plan order.

Memory: the full human archive's ``window_job`` peaks near 12 GB, so window runs are also capped by
:func:`max_parallel_windows`: ``$TEMPO_MAX_PARALLEL_WINDOWS`` when set, else as many as the memory
available now holds at :func:`window_memory_mb` each (computed once per launch: before a window run has
recorded its peak, a walk of the archive's files).

Light runs (:data:`LIGHT_JOBS`: a method's bundle and its run) have one more place beside the ``N`` slots
(:func:`has_place`), when the memory available holds it (:func:`light_place_fits`): so the method runs a
window reads run beside the cutoff runs, and those only the submission and the catalog read beside the
windows, instead of waiting for a slot and holding up what comes after them. ``--jobs 1`` stays one run
at a time.
"""
from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from pathlib import Path

import dagster as dg
import psutil

from tempo_assets.cli.errors import ERROR_EXIT, ReportedError
from tempo_assets.core.base.errors import TempoInputError
from tempo_assets.core.base.windows import parse_window_key, release_of_partition
from tempo_assets.core.base.liveness import this_process
from tempo_assets.graph_state import JOB_ASSETS, PARTITION_ASSETS, latest_window_at
from tempo_assets.runs import fail_dead_runs
from tempo_assets.cli.step_process import PEAK_RSS_TAG, EndedRun, child_main, encode_resources
from tempo_assets.cli.step_forkserver import forkserver_context, stop_forkserver

MAX_WINDOWS_VARIABLE = "TEMPO_MAX_PARALLEL_WINDOWS"
# a window run's peak RSS before this instance has measured one: a floor plus a multiple of the
# archive's release files (data/: 9.7 MB -> 2.4 GB, measured 1.3 GB; a full human archive, a few
# hundred MB -> over 20 GB, measured 11.6 GB); a measured peak replaces it
WINDOW_BASE_MB, WINDOW_MB_PER_ARCHIVE_MB = 500.0, 200.0
# how long a stopped child gets to end its run before it is killed
STOP_GRACE_S = 20.0
# how often the launcher looks whether a submission's frozen recipe is ready while its window's run goes on
RECIPE_POLL_S = 3.0
# runs that may take the place beside the slots (:func:`has_place`): on `data/` a bundle 0.7-0.9 s, a method run
# 2-6 s (its own process 1.3-2.3 CPU s, a blast-transfer run's DIAMOND in the fence about 4.7 CPU s more, unseen
# by its CPU tag), each peaking at 350-500 MB, where the windows beside them leave about 30% of each core idle
LIGHT_JOBS = frozenset({"method_bundle_job", "method_job"})
LIGHT_RUN_MB = 500.0  # a light run's peak RSS before this instance has measured one; a measured peak replaces it
# a run's expected wall seconds by job: `data/`'s main job (CI18: idle, two runs at once). Only their ratios
# matter, to try first the step the longest chain of runs waits for (:func:`launch_order`); on the full human
# archive the windows are 8x longer, the other runs 4x-25x
EXPECTED_RUN_S = {"release_job": 6.0, "cutoff_job": 12.0, "method_bundle_job": 1.0, "method_job": 5.0,
                  "window_job": 100.0, "submission_job": 18.0, "catalog_job": 6.0}


@dataclass(frozen=True)
class StepGraph:
    """What the launch order asks of the graph: the partitions a step reads (``upstream_of``,
    ``graph_state.GraphState.upstream_of``), the assets each asset reads (``asset_deps``,
    ``graph_state.DefinedGraph.deps``), the assets each job's run builds on its step's key
    (``job_assets``: ``graph_state.JOB_ASSETS`` and ``graph_cmd.StepRunner.METHOD_ASSETS``) and the
    partition plan (``plan``: the window whose recipe a submission applies once it is frozen)."""

    upstream_of: Callable[[str, str], list[tuple[str, str]]]
    asset_deps: Mapping[str, set[str]]
    job_assets: Mapping[str, list[str]]
    plan: object

    @classmethod
    def of(cls, runner, state) -> "StepGraph":
        """``runner``'s (a ``graph_cmd.StepRunner``), over ``state`` (a ``graph_state.GraphState`` of now)."""
        return cls(state.upstream_of, runner.defined.deps, {**JOB_ASSETS, **runner.METHOD_ASSETS}, runner.plan)


def step_reads(steps: list[tuple[str, str | None]], index: int, graph: StepGraph) -> set[tuple[str, str]] | None:
    """The ``(asset, partition)`` step ``index``'s run reads, as the graph says; ``None``: whatever is stored.

    ``graph.upstream_of`` for the jobs of ``graph_state.JOB_ASSETS`` (release, cutoff, window, submission);
    for the others' (a method bundle or run) what its asset reads (``graph.asset_deps``) at its cutoff. A
    job whose assets read ``method_predictions`` (the window's ``benchmark``, at its t-1 and t0:
    ``window_benchmark.registered_methods``) reads the method runs at the cutoffs it reads. A submission
    applies the frozen recipe of the latest window with t0 at or before its cutoff that has one
    (``graph_state.latest_recipe_window``): with an earlier window's recipe stored and the latest one's
    not (a launch killed between the two), it would apply the earlier one and be stale as soon as the
    latest is frozen, so it also waits for the run of the latest window at its cutoff
    (``graph_state.latest_window_at``) when that is planned. A window's
    VALID and TEST sets read the warehouse's growth partitions ``(t-1, t0]`` and ``(t0, t1]`` as they stand
    and rebuild one that holds no row (``assets.labels.warehouse_evaluation_set``); the cutoff runs at t0
    and t1 build them (``annotation_growth``), so a window also waits for the one at t1 when it is planned:
    two runs never rebuild one partition at once (on PostgreSQL the second insert would fail on the
    first's keys). A submission whose reads name no frozen recipe reads every window's.
    """
    job, key = steps[index]
    built = graph.job_assets
    own = built.get(job)
    if own is None or job == "catalog_job":  # the catalog: each window's benchmark and state, every method run
        return None
    read_assets = {d for a in own for d in graph.asset_deps.get(a, ()) if d not in own}
    if job not in JOB_ASSETS:
        reads = {(d, release_of_partition(key)) for d in read_assets}
    else:
        reads = set(graph.upstream_of(job, key))
    cutoffs = {p for a, p in reads if a in PARTITION_ASSETS["cutoffs"]}
    recipe_named = any(a == "frozen_recipe" for a, _ in reads)
    for j, k in steps[:index]:
        for asset in set(built.get(j, ())) & read_assets:
            if (asset == "method_predictions" and release_of_partition(k) in cutoffs
                    or asset == "frozen_recipe" and not recipe_named):
                reads.add((asset, k))
    if job == "window_job":  # not a cutoff whose method runs it reads: its benchmark scores those at t-1 and t0
        reads.add(("annotation_growth", parse_window_key(key).t1))
    if job == "submission_job":  # the latest window at its cutoff freezes the recipe that applies then
        latest = latest_window_at(graph.plan, key)
        if latest is not None:
            reads.add(("frozen_recipe", latest))
    return reads


def step_dependencies(steps: list[tuple[str, str | None]], graph: StepGraph) -> list[set[int]]:
    """For each step, the indices of the earlier steps it must wait for: those whose run builds a
    partition it reads (:func:`step_reads`). So a cutoff waits for its two releases, a method bundle for
    its cutoff, a method run for its bundle, a window for its releases, its cutoffs at t-1, t0 and t1 and
    the method runs at the first two (not for the method runs only the submission reads), the submission for its cutoff and release
    and the window whose frozen recipe it applies. The catalog, which reads whatever is stored, waits for
    every step before it but the submission (it does not read it, so the two run side by side); a job
    this does not know for every step before it.

    The one wait that may end before the step waited for has ended: a submission's on the window of
    its recipe. It starts once every other step it waits for has ended and, while that window's run
    goes on, its own plan (``runner.plan_step``) reads that window's frozen recipe -- stored, current,
    its blocking checks passed in that run -- and has nothing waiting, unchecked or blocked
    (:meth:`ConcurrentSteps.recipe_ready`; a frozen recipe is never rewritten). Else, and when the
    window's run has not started, it waits for the run to end.
    """
    built = graph.job_assets
    builds = [{(a, k) for a in built.get(j, ())} for j, k in steps]
    out: list[set[int]] = []
    for i, (job, _) in enumerate(steps):
        reads = step_reads(steps, i, graph)
        if reads is None:  # the catalog: every step but the submission; a job this does not know: every step
            out.append({j for j in range(i) if job not in built or steps[j][0] != "submission_job"})
        else:
            out.append({j for j in range(i) if builds[j] & reads})
    return out


def launch_order(steps: list[tuple[str, str | None]], depends: list[set[int]]) -> list[int]:
    """The steps' indices in the order the launcher tries them when a slot is free: the one with the
    longest chain of runs from its start to the job's end first (:data:`EXPECTED_RUN_S`; the critical
    path), plan order between equals. A step comes after every step it waits for."""
    chain = [EXPECTED_RUN_S.get(job, 1.0) for job, _ in steps]
    for i in reversed(range(len(steps))):  # a step waits only for earlier ones: its chain is complete here
        for j in depends[i]:
            chain[j] = max(chain[j], EXPECTED_RUN_S.get(steps[j][0], 1.0) + chain[i])
    return sorted(range(len(steps)), key=lambda i: (-chain[i], i))


def has_place(job: str, running: list[str], jobs: int, light_place: bool) -> bool:
    """Whether a run of ``job`` may start beside the runs under way (``running``: their jobs): ``jobs`` slots,
    each for any run, and with ``light_place`` one more for a light run (:data:`LIGHT_JOBS`) -- at most
    ``jobs + 1`` runs at once, at most ``jobs`` of them not light. Which run holds that place is not fixed:
    two light runs in the slots leave room for one run of any job."""
    after = len(running) + 1
    heavy_after = sum(1 for j in [*running, job] if j not in LIGHT_JOBS)
    return after <= jobs or (light_place and after == jobs + 1 and heavy_after <= jobs)


def recorded_peak_mb(instance, jobs: tuple[str, ...]) -> float | None:
    """The largest peak RSS (``step_process.PEAK_RSS_TAG``) the latest runs of ``jobs`` in this instance
    recorded, or ``None`` before one has."""
    runs = [r for job in jobs for r in instance.get_runs(filters=dg.RunsFilter(job_name=job), limit=20)]
    measured = [float(r.tags[PEAK_RSS_TAG]) for r in runs if PEAK_RSS_TAG in r.tags]
    return max(measured) if measured else None


def window_memory_mb(instance, archive_root: Path) -> float:
    """The memory one ``window_job`` run is expected to peak at: the largest peak a window run of
    this instance recorded (:func:`recorded_peak_mb`), else an estimate from the archive's size."""
    measured = recorded_peak_mb(instance, ("window_job",))
    if measured is not None:
        return measured
    size = sum(f.stat().st_size for f in Path(archive_root).rglob("*") if f.is_file()) / 2 ** 20
    return WINDOW_BASE_MB + WINDOW_MB_PER_ARCHIVE_MB * size


def max_parallel_windows(window_mb: float) -> int:
    """How many ``window_job`` runs may execute at once (at least 1), each expected to peak at ``window_mb``
    (:func:`window_memory_mb`)."""
    given = os.environ.get(MAX_WINDOWS_VARIABLE, "").strip()
    if given:
        if not given.isdigit() or int(given) < 1:
            raise TempoInputError(f"{MAX_WINDOWS_VARIABLE}={given!r} is not a whole number of at least 1")
        return int(given)
    available_mb = psutil.virtual_memory().available / 2 ** 20
    return max(1, int(available_mb // window_mb))


def light_place_fits(instance, jobs: int, windows: int, window_mb: float) -> bool:
    """Whether the launch has the place for a light run beside its ``jobs`` slots (:func:`has_place`): not
    with ``jobs`` 1 (one run at a time), else when the memory available now holds the window runs that
    may run at once (``jobs`` and ``windows`` the cap) at ``window_mb`` each (:func:`window_memory_mb`, the
    one the cap was computed with) and one light run at the largest peak a light run of this instance
    recorded (else :data:`LIGHT_RUN_MB`)."""
    if jobs < 2:
        return False
    light_mb = recorded_peak_mb(instance, tuple(sorted(LIGHT_JOBS)))
    needed_mb = min(jobs, windows) * window_mb + (light_mb or LIGHT_RUN_MB)
    return psutil.virtual_memory().available / 2 ** 20 >= needed_mb


@dataclass
class Running:
    """A step whose run executes in a child process."""

    index: int
    where: str
    step: object
    run_id: str
    process: multiprocessing.Process
    held: contextlib.ExitStack
    errors: Connection
    started: float = field(default_factory=time.perf_counter)


class ConcurrentSteps:
    """Run ``steps`` with ``runner`` (a ``graph_cmd.StepRunner``), ``jobs`` at once (and with ``light_place``
    a light run beside them, :func:`has_place`), at most ``windows`` of them ``window_job`` runs;
    :meth:`run` returns the report in plan order."""

    def __init__(self, runner, steps: list[tuple[str, str | None]], jobs: int, windows: int,
                 light_place: bool = False):
        self.runner, self.steps, self.jobs, self.windows = runner, steps, jobs, windows
        self.light_place = light_place
        state = runner.graph_state()
        self.graph = StepGraph.of(runner, state)
        self.depends = step_dependencies(steps, self.graph)
        self.report: dict[int, tuple] = {}
        self.lines: dict[int, list[str]] = {}
        self.running: dict[int, Running] = {}
        self.context = None  # the forkserver's, taken when the first step process is forked
        if not any(runner.plan_step(job, key, state).todo for job, key in steps):
            stop_forkserver()  # nothing to build as the graph stands: `tempo materialize` started it for nothing
        self.instance_ref = runner.instance.get_ref()
        self.resources = encode_resources(runner.resources)
        self.launcher = this_process()

    def run(self) -> list[tuple]:
        pending = launch_order(self.steps, self.depends)
        try:
            while pending or self.running:
                self.start_startable(pending)
                if self.running:
                    polls = any(self.waits_on_recipe(i) and self.has_place(i) for i in pending)
                    ended = wait([r.process.sentinel for r in self.running.values()],
                                 RECIPE_POLL_S if polls else None)
                    for run in [r for r in list(self.running.values()) if r.process.sentinel in ended]:
                        self.finish(run)
        except KeyboardInterrupt as exc:  # Ctrl-C or SIGTERM: no child outlives the launch, none starts after
            stopped = ", ".join(run.where for run in self.running.values()) or "none"
            self.stop_all()
            raise KeyboardInterrupt(f"the runs under way were stopped and are failed ({stopped}); no later step "
                                    "was started (`tempo materialize` again builds what is missing)") from exc
        except BaseException:  # an error planning a step: no child outlives the launch
            self.stop_all()
            raise
        return [self.report[i] for i in range(len(self.steps))]

    def start_startable(self, pending: list[int]) -> None:
        """Start each step of ``pending`` (in launch order) that has a place (:meth:`has_place`) and can start
        (:meth:`can_start`) now, taking it off."""
        for index in list(pending):
            if self.has_place(index) and self.can_start(index):
                pending.remove(index)
                self.start(index)

    def has_place(self, index: int) -> bool:
        """Whether step ``index``'s run has a place beside the runs under way (:func:`has_place`)."""
        running = [self.steps[i][0] for i in self.running]
        return has_place(self.steps[index][0], running, self.jobs, self.light_place)

    def can_start(self, index: int) -> bool:
        if not self.depends[index] <= set(self.report) and not self.recipe_ready(index):
            return False
        if self.steps[index][0] != "window_job":
            return True
        return sum(1 for r in self.running.values() if self.steps[r.index][0] == "window_job") < self.windows

    def waits_on_recipe(self, index: int) -> bool:
        """Whether step ``index`` is a submission that waits only for window runs under way (its recipe's)."""
        left = self.depends[index] - set(self.report)
        return (self.steps[index][0] == "submission_job" and bool(left)
                and all(self.steps[j][0] == "window_job" and j in self.running for j in left))

    def recipe_ready(self, index: int) -> bool:
        """Whether submission ``index`` may start before its recipe's window run ends (:func:`step_dependencies`):
        the frozen recipe its plan reads now is the latest window's at its cutoff (the one that applies
        once frozen, ``graph_state.latest_window_at``: not an earlier window's stored before it), and
        nothing it reads waits, is unchecked (the window's run evaluates the recipe's checks itself) or
        blocked."""
        if not self.waits_on_recipe(index):
            return False
        job, key = self.steps[index]
        latest = latest_window_at(self.graph.plan, key)
        if latest is None or not self.runner.store.exists("frozen_recipe", latest):
            return False  # not stored yet: no need to plan
        step = self.runner.plan_step(job, key)
        return {p for a, p in step.upstream if a == "frozen_recipe"} == {latest} and step.ready

    def echo_for(self, index: int):
        return self.lines.setdefault(index, []).append

    def flush(self, index: int) -> None:
        for line in self.lines.pop(index, []):
            self.runner.echo(line)

    def start(self, index: int) -> None:
        """Plan step ``index`` under its lock; launch its run in a child, or report why it did not run."""
        job, key = self.steps[index]
        held = contextlib.ExitStack()
        try:
            where, ready = self.runner.prepare(held, index + 1, len(self.steps), job, key, self.echo_for(index))
        except BaseException:
            held.close()
            raise
        if isinstance(ready, tuple):
            held.close()
            self.report[index] = ready
            self.flush(index)
            return
        order = self.runner.order_for(ready, job, key)
        self.context = self.context or forkserver_context()  # one that was stopped or never started starts now
        errors, send_errors = self.context.Pipe(duplex=False)
        process = self.context.Process(target=child_main, name=f"tempo {job} {key}",
                                       args=(self.launcher, self.instance_ref, self.resources, order, send_errors))
        process.start()
        send_errors.close()
        held.callback(errors.close)
        held.enter_context(self.runner.progress(order.run_id, where))
        self.runner.echo(f"{where}: started run {order.run_id} in a process of its own ({', '.join(ready.todo)})")
        self.running[index] = Running(index, where, ready, order.run_id, process, held, errors)

    def finish(self, run: Running) -> None:
        run.process.join()
        seconds = time.perf_counter() - run.started
        echo = self.echo_for(run.index)
        if run.process.exitcode == ERROR_EXIT and run.errors.poll():  # as the same error in this process would
            self.flush(run.index)
            raise ReportedError(run.errors.recv())
        if run.process.exitcode not in (0, 1):  # killed or crashed: the run it left unfinished is failed now
            echo(f"{run.where}: its process ended with status {run.process.exitcode}")
            for line in fail_dead_runs(self.runner.instance):
                echo(f"{run.where}: {line}")
        stored = self.runner.instance.get_run_by_id(run.run_id)
        success = stored is not None and stored.status == dg.DagsterRunStatus.SUCCESS
        job, key = self.steps[run.index]
        try:
            self.report[run.index] = self.runner.outcome(run.step, (job, key), run.where,
                                                         EndedRun(run.run_id, success, seconds), echo)
        finally:
            del self.running[run.index]
            run.held.close()
            self.flush(run.index)

    def stop_all(self) -> None:
        """Interrupt every running child (as Ctrl-C would), kill what is left after the grace
        period, and mark the runs they left unfinished failed."""
        for run in self.running.values():
            if run.process.is_alive():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(run.process.pid, signal.SIGINT)  # Dagster ends the run as interrupted
        deadline = time.monotonic() + STOP_GRACE_S
        for run in self.running.values():
            run.process.join(max(0.0, deadline - time.monotonic()))
            if run.process.is_alive():
                run.process.kill()
                run.process.join()
        fail_dead_runs(self.runner.instance)
        for run in self.running.values():
            run.held.close()
        self.running.clear()
