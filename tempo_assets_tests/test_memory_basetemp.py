"""A killed or failed test run's folder in memory is removed by the next run; a live run's never is."""
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tempo_assets_tests.memory_basetemp import OWNER_LOCK, RUN, claim_folder, folder_prefix, remove_abandoned

REPO = str(Path(__file__).resolve().parents[1])
HOLD = """
import sys, time
sys.path.insert(0, {repo!r})
from pathlib import Path
from tempo_assets_tests.memory_basetemp import claim_folder
folder, handle = claim_folder(Path({root!r}))
print(folder, flush=True)
time.sleep(600)
"""


def _run_holding_a_folder(root, repo):
    process = subprocess.Popen([sys.executable, "-c", HOLD.format(repo=repo, root=str(root))],
                               stdout=subprocess.PIPE, text=True)
    return process, process.stdout.readline().strip()


def test_a_killed_runs_folder_is_removed_and_a_live_runs_kept(tmp_path):
    live, live_folder = _run_holding_a_folder(tmp_path, REPO)
    killed, killed_folder = _run_holding_a_folder(tmp_path, REPO)
    try:
        killed.send_signal(signal.SIGKILL)  # kill -9: no cleanup code runs
        killed.wait(timeout=30)
        old_scheme = tmp_path / f"{folder_prefix()}before"  # no lock file: not known to be abandoned
        old_scheme.mkdir()
        other = tmp_path / "someone-else"
        other.mkdir()
        removed = remove_abandoned(tmp_path)
        assert [str(p) for p in removed] == [killed_folder]
        assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
            [old_scheme.name, other.name, Path(live_folder).name])
    finally:
        live.kill()
        live.wait(timeout=30)
    # the live run ended too (as a failed run does, its folder kept): the next run removes it
    assert [str(p) for p in remove_abandoned(tmp_path)] == [live_folder]


def test_this_process_keeps_its_own_folder(tmp_path):
    folder, handle = claim_folder(tmp_path)
    assert (folder / OWNER_LOCK).exists() and not list(folder.glob(".*.new"))
    assert remove_abandoned(tmp_path) == [] and folder.is_dir()  # flock: another open file description
    handle.close()
    assert remove_abandoned(tmp_path) == [folder]


SLEEPING_TEST = "import time\n\n\ndef test_sleeps():\n    time.sleep(120)\n"


@pytest.mark.skipif(not Path("/dev/shm").is_dir(), reason="no memory filesystem here")
def test_a_kill_9_pytest_run_leaves_a_folder_the_next_run_removes(tmp_path):
    """The whole scheme through pytest itself (the repository's conftest as a plugin, two xdist workers):
    the run's folder in memory is held while it runs, and removed by the next run after a ``kill -9``."""
    memory = Path(conftest_module().MEMORY_FS)
    (tmp_path / "test_sleeping.py").write_text(SLEEPING_TEST)
    before = set(memory.glob(folder_prefix() + "*"))
    env = {**os.environ, "PYTHONPATH": REPO}
    env.pop("PYTEST_XDIST_WORKER", None)
    run = subprocess.Popen([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "conftest",
                            "-n", "2", "test_sleeping.py"], cwd=tmp_path, env=env,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        folder = _new_folder_with_workers(memory, before)
        assert folder not in remove_abandoned(memory) and folder.is_dir()
    finally:
        os.killpg(run.pid, signal.SIGKILL)  # kill -9 of the run and its workers
        run.wait(timeout=30)
    assert folder in remove_abandoned(memory) and not folder.exists()


def conftest_module():
    sys.path.insert(0, REPO)
    import conftest

    return conftest


def _new_folder_with_workers(memory: Path, before: set) -> Path:
    """The run's folder once its xdist workers have made theirs in it (pytest emptied it by then)."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        for folder in set(memory.glob(folder_prefix() + "*")) - before:
            if list(folder.glob("run/popen-gw*")):
                return folder
        time.sleep(0.2)
    raise AssertionError("the pytest run made no folder in memory in 120 s")


def test_an_abandoned_runs_servers_are_stopped_before_its_folder_goes(tmp_path, monkeypatch):
    """The servers a killed run started (recorded under its ``run/services``) are stopped through
    ``services.stop_run_services`` (dev_services.sh ``clean``: the recorded pids), a live run's never."""
    from tempo_assets_tests import services

    stopped = []
    monkeypatch.setattr(services, "stop_run_services", lambda run: stopped.append((run, run.exists())))
    live, live_handle = claim_folder(tmp_path)
    dead, dead_handle = claim_folder(tmp_path)
    dead_handle.close()  # its run ended without its own clean-up
    for folder in (live, dead):
        services.run_services_state(folder / RUN).mkdir(parents=True)
    assert remove_abandoned(tmp_path) == [dead]
    assert stopped == [(dead / RUN, True)] and live.is_dir()  # stopped while its state was still there
    live_handle.close()
