"""``tempo materialize --jobs N`` starts its step processes' forkserver first of all (issue 22, start-up):
the forkserver imports what step runs use (``step_forkserver.PRELOAD``, seconds of CPU) beside the
launcher's own imports, instance and plan, instead of after them, when the first run is launched."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tempo_assets_tests.toolkit import REPO

# a launch stopped where it reads the archive's plan, before it opens its instance or plans a step; it
# prints whether the forkserver is running by then
PROBE = """
import json, multiprocessing.forkserver, sys
from types import SimpleNamespace
from tempo_assets.cli import graph_cmd

class Planned(Exception):
    pass

def current_plan():
    server = multiprocessing.forkserver._forkserver
    raise Planned(json.dumps({"forkserver": server._forkserver_pid is not None}))

graph_cmd.current_plan = current_plan
try:
    graph_cmd._materialize(SimpleNamespace(jobs=int(sys.argv[1]), all=True, window=None, cutoff=None))
except Planned as seen:
    print(seen)
"""


@pytest.mark.parametrize("jobs, started", [(2, True), (1, False)])
def test_materialize_starts_the_step_forkserver_before_it_opens_its_instance(tmp_path, jobs, started):
    """With ``--jobs 2`` the forkserver is up when the launch reads its plan (before the instance, the
    definitions and the first step); with ``--jobs 1`` (every run in the launcher) none is started."""
    env = {**os.environ, "DAGSTER_HOME": str(tmp_path / "home"), "TEMPO_ARTEFACTS": str(tmp_path / "artefacts"),
           "TEMPO_EXECUTOR": "multiprocess",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, "-c", PROBE, str(jobs)], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["forkserver"] is started, seen
