"""Which process runs each run, and the runs whose process died.

A run executed in process by ``tempo materialize`` carries the launching process's identity in
its tags (:func:`launch_tags`). Every other run (the ``dagster`` CLI, the UI's run worker, a
backfill) gets its orchestrating process's identity from inside the run, added to its tags when the
run's first step starts (:func:`tag_run_process`, called by the artefact store resource). When that
process is killed (``kill -9``, the OOM killer, a
reboot) Dagster never hears of it and the run stays ``STARTED`` for good; :func:`fail_dead_runs`,
called by every ``tempo`` command that reads run state and by the sensor, reports each such run
failed through the instance, naming what died, and frees the concurrency-pool slots it held.
Runs a Dagster daemon launches are watched by Dagster's own run monitoring instead
(``run_monitoring`` in ``docs/deploy/dagster.yaml``).
"""
from __future__ import annotations

import contextlib
import fcntl
import re
from datetime import datetime, timezone
from pathlib import Path

import dagster as dg

from tempo_assets.core.base.liveness import (
    ProcessIdentity, is_alive, orchestrating_parent, process_identity, this_process,
)
from tempo_assets.executors import executor_kind

PID_TAG, HOST_TAG, STARTED_TAG = "tempo/pid", "tempo/host", "tempo/process_started"
# statuses of a run that has not ended
UNFINISHED = (dg.DagsterRunStatus.NOT_STARTED, dg.DagsterRunStatus.STARTING, dg.DagsterRunStatus.STARTED,
              dg.DagsterRunStatus.CANCELING)


def launch_tags() -> dict[str, str]:
    """Tags naming the calling process, for a run it executes in process."""
    return process_tags(this_process())


def process_tags(process: ProcessIdentity) -> dict[str, str]:
    """``tempo/pid``, ``tempo/host`` and ``tempo/process_started`` naming ``process``."""
    started = {STARTED_TAG: f"{process.started:.3f}"} if process.started is not None else {}
    return {PID_TAG: str(process.pid), HOST_TAG: process.host, **started}


def run_process() -> ProcessIdentity:
    """The process orchestrating the run the calling code executes in.

    A step that Dagster's multiprocess executor (the default of the ``dagster`` CLI and the UI's
    run worker) started is a ``multiprocessing`` child of the run's orchestrator, with ``spawn`` and
    ``forkserver`` alike; a step executed in process is the orchestrator itself.
    """
    parent = orchestrating_parent()
    return process_identity(parent.pid) if parent is not None else this_process()


def tag_run_process(instance, run: dg.DagsterRun | None) -> None:
    """Name ``run``'s orchestrating process in its tags when nothing names one yet, so that
    :func:`fail_dead_runs` sees the run die whatever launched it.

    Runs whose steps go to celery workers are left alone: a worker is not the run's orchestrator.
    """
    if instance is None or run is None or PID_TAG in run.tags or executor_kind() == "celery":
        return
    instance.add_run_tags(run.run_id, process_tags(run_process()))


def launcher_of(run: dg.DagsterRun) -> ProcessIdentity | None:
    """The process that orchestrates ``run``, from its tags (None for a run that has not started a step)."""
    tags = run.tags
    if PID_TAG not in tags or HOST_TAG not in tags:
        return None
    started = tags.get(STARTED_TAG)
    return ProcessIdentity(tags[HOST_TAG], int(tags[PID_TAG]), float(started) if started else None)


def fail_dead_runs(instance) -> list[str]:
    """Report failed every unfinished run whose launching process is gone; one line per run so marked."""
    if instance is None:
        return []
    lines = []
    for run in instance.get_runs(filters=dg.RunsFilter(statuses=list(UNFINISHED)), limit=1000):
        launcher = launcher_of(run)
        if launcher is None or is_alive(launcher) is not False:
            continue
        now = datetime.now(timezone.utc).isoformat(timespec="seconds")
        message = (f"the process that ran it died ({launcher.describe()}, killed or crashed without ending "
                   f"the run); marked failed by tempo at {now}")
        instance.report_run_failed(run, message=message)
        with contextlib.suppress(Exception):  # storages without pools have nothing to free
            instance.event_log_storage.free_concurrency_slots_for_run(run.run_id)
        lines.append(f"run {run.run_id} ({run.job_name} {run.tags.get('dagster/partition', '')}) "
                     f"was {run.status.value}: {message}")
    return lines


def settle_dead_runs(instance, echo=print) -> None:
    """:func:`fail_dead_runs`, saying on ``echo`` what it marked: the first thing a command that reads run state does."""
    for line in fail_dead_runs(instance):
        echo(f"tempo: {line}")


def claim_ended(instance, claim) -> bool | None:
    """Whether the run holding a TEST claim is over: its run ended in ``instance``, or the process that
    took the claim is gone (a run another instance launched); ``None`` when neither can be told."""
    run = instance.get_run_by_id(claim.run_id) if instance is not None and claim.run_id != "unknown" else None
    if run is not None and run.is_finished:
        return True
    try:
        claimed_at = datetime.fromisoformat(claim.claimed_at).timestamp()
    except ValueError:
        claimed_at = None
    alive = is_alive(ProcessIdentity(claim.host, claim.pid), started_before=claimed_at)
    if alive is None:  # another host: trust the instance when it knows the run
        return False if run is not None else None
    return not alive


@contextlib.contextmanager
def step_lock(folder: Path | None, job: str, key: str | None):
    """Hold ``job[key]``'s lock while a launch plans and runs it; yields True when it had to wait.

    ``fcntl.flock`` on a file under ``folder`` (the artefact store's ``_locks/`` when it is a local
    folder): concurrent ``tempo materialize`` launches on one store build each step once, the later
    one re-planning after the first ends; the kernel drops the lock of a killed process, so a
    ``kill -9`` never wedges it. ``folder`` None (an object store) or unwritable locks nothing.
    """
    name = re.sub(r"[^0-9A-Za-z_.@-]", "_", f"{job}.{key or 'all'}") + ".lock"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        handle = open(folder / name, "a+b")
    except (OSError, AttributeError):  # no folder (an object store), or one this user cannot write:
        yield False                     # the step's own write then fails, naming the path
        return
    with handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            waited = False
        except BlockingIOError:
            fcntl.flock(handle, fcntl.LOCK_EX)
            waited = True
        try:
            yield waited
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
