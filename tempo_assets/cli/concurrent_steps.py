"""``tempo materialize --jobs N``: independent steps run at once, each run in a process of its own.

The steps ``graph_cmd.plan_steps`` lists (in dependency order) are launched as soon as every step
they depend on (:func:`step_dependencies`) has ended -- a submission as soon as the frozen recipe
it applies is ready, before its window's run ends -- at most ``N`` at once, each one's Dagster run
executing in a child process (``step_process.child_main``, forked from a forkserver that preloaded
the code location). Everything else is the sequential path's (``graph_cmd.StepRunner``): a step is
planned, gated and launched under its lock (held until its run ends), the TEST claims decide in the
run, statuses and exit codes are the same. A step's lines are printed together when it ends (its
progress lines while it runs), the closing summary in plan order.

Memory: the full human archive's ``window_job`` peaks near 12 GB, so window runs are also capped by
:func:`max_parallel_windows`: ``$TEMPO_MAX_PARALLEL_WINDOWS`` when set, else as many as the memory
available now holds at :func:`window_memory_mb` each.
"""
from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import time
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from pathlib import Path

import dagster as dg
import psutil

from tempo_assets.cli.errors import ERROR_EXIT, ReportedError
from tempo_assets.core.base.errors import TempoInputError
from tempo_assets.core.base.liveness import this_process
from tempo_assets.runs import fail_dead_runs
from tempo_assets.cli.step_process import PEAK_RSS_TAG, EndedRun, child_main, encode_resources
from tempo_assets.cli.step_forkserver import forkserver_context

MAX_WINDOWS_VARIABLE = "TEMPO_MAX_PARALLEL_WINDOWS"
# a window run's peak RSS before this instance has measured one: a floor plus a multiple of the
# archive's release files (data/: 9.7 MB -> 2.4 GB, measured 1.3 GB; a full human archive, a few
# hundred MB -> over 20 GB, measured 11.6 GB); a measured peak replaces it
WINDOW_BASE_MB, WINDOW_MB_PER_ARCHIVE_MB = 500.0, 200.0
# how long a stopped child gets to end its run before it is killed
STOP_GRACE_S = 20.0
# how often the launcher looks whether a submission's frozen recipe is ready while its window's run goes on
RECIPE_POLL_S = 3.0
SEQUENCE_JOBS = ("release_job", "cutoff_job", "method_bundle_job", "method_job")


def step_dependencies(steps: list[tuple[str, str | None]], upstream_of) -> list[set[int]]:
    """For each step, the indices of the earlier steps it must wait for.

    Conservative where a job reads partitions through ``AllPartitionMapping`` (the IO manager picks
    them): a cutoff waits for every release, a window for every release, cutoff and method run, the
    submission for those and the window whose frozen recipe it applies (``upstream_of``), the
    catalog for the windows and what they wait for (it reads each window's benchmark and state, not
    the submission, so the two run side by side), a job this does not know for everything before it.

    The one wait that may end before the step waited for has ended: a submission's on the window of
    its recipe. It starts once every other step it waits for has ended and, while that window's run
    goes on, its own plan (``runner.plan_step``) reads that window's frozen recipe -- stored, current,
    its blocking checks passed in that run -- and has nothing waiting, unchecked or blocked
    (:meth:`ConcurrentSteps.recipe_ready`; a frozen recipe is never rewritten). Else, and when the
    window's run has not started, it waits for the run to end.
    """
    out: list[set[int]] = []
    for i, (job, key) in enumerate(steps):
        def earlier(*jobs: str) -> set[int]:
            return {j for j in range(i) if steps[j][0] in jobs}

        if job == "release_job":
            deps = set()
        elif job == "cutoff_job":
            deps = earlier("release_job")
        elif job == "method_bundle_job":
            deps = earlier("release_job", "cutoff_job")
        elif job == "method_job":
            deps = earlier("release_job", "cutoff_job") | {
                j for j in earlier("method_bundle_job") if steps[j][1] == key.split("|")[0]}
        elif job == "window_job":
            deps = earlier(*SEQUENCE_JOBS)
        elif job == "submission_job":
            recipes = {p for a, p in upstream_of(job, key) if a == "frozen_recipe"}
            deps = earlier(*SEQUENCE_JOBS) | {j for j in earlier("window_job") if not recipes or steps[j][1] in recipes}
        elif job == "catalog_job":
            deps = earlier(*SEQUENCE_JOBS, "window_job")
        else:
            deps = set(range(i))
        out.append(deps)
    return out


def window_memory_mb(instance, archive_root: Path) -> float:
    """The memory one ``window_job`` run is expected to peak at: the largest peak a window run of
    this instance recorded (``step_process.PEAK_RSS_TAG``), else an estimate from the archive's size."""
    runs = instance.get_runs(filters=dg.RunsFilter(job_name="window_job"), limit=20)
    measured = [float(r.tags[PEAK_RSS_TAG]) for r in runs if PEAK_RSS_TAG in r.tags]
    if measured:
        return max(measured)
    size = sum(f.stat().st_size for f in Path(archive_root).rglob("*") if f.is_file()) / 2 ** 20
    return WINDOW_BASE_MB + WINDOW_MB_PER_ARCHIVE_MB * size


def max_parallel_windows(instance, archive_root: Path) -> int:
    """How many ``window_job`` runs may execute at once (at least 1)."""
    given = os.environ.get(MAX_WINDOWS_VARIABLE, "").strip()
    if given:
        if not given.isdigit() or int(given) < 1:
            raise TempoInputError(f"{MAX_WINDOWS_VARIABLE}={given!r} is not a whole number of at least 1")
        return int(given)
    available_mb = psutil.virtual_memory().available / 2 ** 20
    return max(1, int(available_mb // window_memory_mb(instance, archive_root)))


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
    """Run ``steps`` with ``runner`` (a ``graph_cmd.StepRunner``), ``jobs`` at once, at most
    ``windows`` of them ``window_job`` runs; :meth:`run` returns the report in plan order."""

    def __init__(self, runner, steps: list[tuple[str, str | None]], jobs: int, windows: int):
        self.runner, self.steps, self.jobs, self.windows = runner, steps, jobs, windows
        self.depends = step_dependencies(steps, runner.upstream_of)
        self.report: dict[int, tuple] = {}
        self.lines: dict[int, list[str]] = {}
        self.running: dict[int, Running] = {}
        self.context = forkserver_context()
        self.instance_ref = runner.instance.get_ref()
        self.resources = encode_resources(runner.resources)
        self.launcher = this_process()

    def run(self) -> list[tuple]:
        pending = list(range(len(self.steps)))
        try:
            while pending or self.running:
                for index in list(pending):
                    if len(self.running) >= self.jobs:
                        break
                    if self.can_start(index):
                        pending.remove(index)
                        self.start(index)
                if self.running:
                    polls = len(self.running) < self.jobs and any(self.waits_on_recipe(i) for i in pending)
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
        the frozen recipe its plan reads now is one of those windows', and nothing it reads waits,
        is unchecked (the window's run evaluates the recipe's checks itself) or blocked."""
        if not self.waits_on_recipe(index):
            return False
        windows = {self.steps[j][1] for j in self.depends[index] - set(self.report)}
        if not any(self.runner.store.exists("frozen_recipe", w) for w in windows):
            return False  # not stored yet: no need to plan
        job, key = self.steps[index]
        step = self.runner.plan_step(job, key)
        recipes = {p for a, p in step.upstream if a == "frozen_recipe"}
        return bool(recipes) and recipes <= windows and step.ready

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
