"""tempo_assets/runs.py: a run whose launching process died is reported failed; the step lock; liveness."""
from __future__ import annotations

import multiprocessing
import os
import subprocess
import sys
import threading
from datetime import datetime, timezone

import dagster as dg

from tempo_assets.core.base.liveness import ProcessIdentity, is_alive, this_process
from tempo_assets.resources import ArtefactStoreResource
from tempo_assets.runs import (
    PID_TAG, claim_ended, fail_dead_runs, launch_tags, launcher_of, run_process, step_lock,
)
from tempo_assets.core.storage.claims import TestClaim


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def _started_run(instance, tags) -> dg.DagsterRun:
    run = instance.create_run_for_job(dg.GraphDefinition("g", node_defs=[]).to_job(), tags=tags)
    instance.handle_run_event(run.run_id, dg.DagsterEvent(dg.DagsterEventType.RUN_START.value, job_name=run.job_name))
    return instance.get_run_by_id(run.run_id)


def test_liveness_tells_this_process_a_dead_pid_and_a_reused_pid_apart():
    me = this_process()
    assert is_alive(me) is True
    assert is_alive(ProcessIdentity(me.host, _dead_pid())) is False
    assert is_alive(ProcessIdentity(me.host, me.pid, me.started - 100)) is False  # same pid, newer process
    assert is_alive(ProcessIdentity("another-host", me.pid)) is None


def test_a_started_run_whose_launcher_died_is_reported_failed_and_a_live_one_is_not():
    with dg.instance_for_test() as instance:
        live = _started_run(instance, launch_tags())
        dead = _started_run(instance, {**launch_tags(), PID_TAG: str(_dead_pid())})
        foreign = _started_run(instance, {})  # not launched by tempo: left to Dagster's run monitoring
        lines = fail_dead_runs(instance)
        assert len(lines) == 1 and dead.run_id in lines[0] and "the process that ran it died" in lines[0]
        assert instance.get_run_by_id(dead.run_id).status == dg.DagsterRunStatus.FAILURE
        assert instance.get_run_by_id(live.run_id).status == dg.DagsterRunStatus.STARTED
        assert instance.get_run_by_id(foreign.run_id).status == dg.DagsterRunStatus.STARTED
        assert fail_dead_runs(instance) == []


def test_a_claim_of_a_gone_process_is_ended_and_one_of_this_process_is_not():
    me = this_process()
    now = datetime.now(timezone.utc).isoformat()
    live = TestClaim("w", "unknown", now, me.host, me.pid)
    gone = TestClaim("w", "unknown", now, me.host, _dead_pid())
    # a claim older than this process: its pid was reused, the claiming process is gone
    assert claim_ended(None, TestClaim("w", "unknown", "2020-01-01T00:00:00+00:00", me.host, me.pid)) is True
    assert claim_ended(None, live) is False
    assert claim_ended(None, gone) is True
    assert claim_ended(None, TestClaim("w", "unknown", "2026-01-01T00:00:00+00:00", "elsewhere", 1)) is None


def test_the_step_lock_makes_a_second_launch_wait_and_says_so(tmp_path):
    order, inside = [], threading.Event()
    release = threading.Event()

    def first():
        with step_lock(tmp_path, "window_job", "w|1") as waited:
            order.append(("first", waited))
            inside.set()
            release.wait(30)

    thread = threading.Thread(target=first)
    thread.start()
    inside.wait(30)
    second_done = threading.Event()

    def second():
        with step_lock(tmp_path, "window_job", "w|1") as waited:
            order.append(("second", waited))
        second_done.set()

    other = threading.Thread(target=second)
    other.start()
    assert not second_done.wait(0.5)  # held: the second launch waits (flock is per open file)
    release.set()
    thread.join()
    other.join()
    assert order == [("first", False), ("second", True)]
    assert os.listdir(tmp_path) == ["window_job.w_1.lock"]


def _report_run_process(queue) -> None:
    queue.put(run_process().pid)


def test_a_step_process_of_the_multiprocess_executor_names_its_orchestrator():
    """Dagster's multiprocess executor spawns each step: the run's process is the step's parent."""
    assert run_process().pid == os.getpid()
    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    child = context.Process(target=_report_run_process, args=(queue,))
    child.start()
    try:
        assert queue.get(timeout=120) == os.getpid()
    finally:
        child.join()


def test_a_run_launched_without_tempo_names_its_process_from_inside(tmp_path):
    """A run no ``tempo`` command launched (the dagster CLI, the UI) gets its process's tags when a
    step sets up the artefact store, so a kill -9 of that process is seen as a death."""
    @dg.asset
    def one(artefact_store: ArtefactStoreResource) -> int:
        return 1

    with dg.instance_for_test() as instance:
        result = dg.materialize([one], instance=instance, resources={"artefact_store": ArtefactStoreResource(
            root=str(tmp_path))})
        launcher, me = launcher_of(instance.get_run_by_id(result.run_id)), this_process()
        assert (launcher.host, launcher.pid) == (me.host, me.pid) and abs(launcher.started - me.started) < 0.01
        tagged = dg.materialize([one], instance=instance, tags={PID_TAG: "1", "tempo/host": "elsewhere"},
                                resources={"artefact_store": ArtefactStoreResource(root=str(tmp_path))})
        assert instance.get_run_by_id(tagged.run_id).tags[PID_TAG] == "1"  # a launcher's own tags are kept
