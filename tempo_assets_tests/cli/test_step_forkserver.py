"""``tempo materialize --jobs N`` starts its step processes' forkserver first of all (issue 22, start-up):
the forkserver imports what step runs use (``step_forkserver.PRELOAD``, seconds of CPU) beside the
launcher's own imports, instance and plan, instead of after them, when the first run is launched; and stops
it as soon as it knows it will fork no step process (nothing to build, or the launch failed at its start)."""
from __future__ import annotations

import json
import multiprocessing.forkserver
import os
import shutil
import subprocess
import sys

import dagster as dg
import pytest
from dagster._core.instance.ref import InstanceRef

from tempo_assets.cli.concurrent_steps import ConcurrentSteps
from tempo_assets.cli.graph_cmd import StepRunner, plan_steps
from tempo_assets.cli.step_forkserver import start_forkserver, stop_forkserver
from tempo_assets_tests.conftest import make_home, tiny_copy
from tempo_assets_tests.toolkit import REPO

# a launch stopped where it reads the archive's plan, before it opens its instance or plans a step (as a launch
# that fails at its start); it prints whether the forkserver is running by then, and once the launch has ended
PROBE = """
import json, multiprocessing.forkserver, os, sys
from types import SimpleNamespace
from tempo_assets.cli import graph_cmd

server = multiprocessing.forkserver._forkserver
seen = {}

class Planned(Exception):
    pass

def current_plan():
    seen["pid"] = server._forkserver_pid
    raise Planned()

graph_cmd.current_plan = current_plan
try:
    graph_cmd._materialize(SimpleNamespace(jobs=int(sys.argv[1]), all=True, window=None, cutoff=None))
except Planned:
    pass

def running(pid):  # the forkserver process, still importing PRELOAD or waiting for the launch's end
    try:
        return pid is not None and os.waitpid(pid, os.WNOHANG)[0] == 0
    except ChildProcessError:  # ended, and reaped already
        return False

print(json.dumps({"forkserver": seen["pid"] is not None, "after": running(seen["pid"])}))
"""


@pytest.mark.parametrize("jobs, started", [(2, True), (1, False)])
def test_materialize_starts_the_step_forkserver_before_it_opens_its_instance(tmp_path, jobs, started):
    """With ``--jobs 2`` the forkserver is up when the launch reads its plan (before the instance, the
    definitions and the first step); with ``--jobs 1`` (every run in the launcher) none is started. A launch
    that ends there (an error at its start) stops it: it would import PRELOAD to the end for nothing."""
    env = {**os.environ, "DAGSTER_HOME": str(tmp_path / "home"), "TEMPO_ARTEFACTS": str(tmp_path / "artefacts"),
           "TEMPO_EXECUTOR": "multiprocess",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, "-c", PROBE, str(jobs)], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["forkserver"] is started, seen
    assert seen["after"] is False, seen


def test_a_launch_with_nothing_to_build_stops_the_forkserver_and_one_with_something_keeps_it(tiny_build, tmp_path):
    """``tempo materialize --jobs 2`` started the forkserver first (above). When the graph says no planned step
    has anything to build, the launch stops it before it plans each step under its lock (an `--all` on a
    current instance, a second instance that only runs checks) and forks nothing; with something to build it
    keeps the one started first, whose preload is what the first run waits for."""
    server = multiprocessing.forkserver._forkserver
    graph = tiny_copy(tiny_build, tmp_path / "graph")
    try:
        steps = plan_steps(graph.plan, "all")
        runner = StepRunner(graph.instance, graph.resources, echo=lambda *_: None)
        start_forkserver()
        launch = ConcurrentSteps(runner, steps, 2, 1)
        assert server._forkserver_pid is None, "the forkserver still runs for a launch with nothing to build"
        assert {row[2] for row in launch.run()} == {"skipped"}
        assert server._forkserver_pid is None
        # a second instance on the store: every stored partition's checks to run first, which the catalog reads
        with dg.DagsterInstance.from_ref(InstanceRef.from_dir(str(make_home(tmp_path / "second")))) as second:
            start_forkserver()
            ConcurrentSteps(StepRunner(second, graph.resources, echo=lambda *_: None), steps, 2, 1)
            assert server._forkserver_pid is None, "the forkserver still runs for a launch that only runs checks"
        shutil.rmtree(graph.artefacts / "benchmark_catalog")  # the catalog to build again
        start_forkserver()
        started = server._forkserver_pid
        ConcurrentSteps(runner, steps, 2, 1)
        assert started is not None and server._forkserver_pid == started, "the forkserver started first was stopped"
    finally:
        stop_forkserver()
        graph.instance.dispose()
