"""Recovery, tried as a user meets it: ``kill -9`` at the TEST claim, after test_growth's and
test_score's writes and during benchmark, a second instance on one store, and three concurrent
``tempo materialize --all`` launches; after each, ``tempo status``, ``tempo audit-cutoffs``,
``tempo test-claim release`` and ``tempo materialize --all`` say what happened and finish the work.

The kills are real ``SIGKILL``s the process sends itself at an exact point (``core/base/faults.py``,
``TEMPO_FAULT_AT``), so nothing of Python's or Dagster's clean-up runs, as with the OOM killer.
The launches (killed, signalled, raced, or finishing the work) are real processes; the commands that
read or release between them run their own code in this process (``cli_here.tempo_here``). What the
launches build is checked by its state, not by the reports' figures: they draw none
(``unrendered.undrawn_launch_env``; the figures are tested in ``core/test_report.py``).
"""
from __future__ import annotations

import json
import shutil
import subprocess
import threading

import dagster as dg
import psutil
import pytest

from tempo_assets_tests.cli_here import tempo_here
from tempo_assets_tests.conftest import make_home, subprocess_env, tiny_copy
from tempo_assets_tests.toolkit import script, tempo, wait_until
from tempo_assets_tests.unrendered import undrawn_launch_env

pytestmark = pytest.mark.slow


def _env(graph, **extra) -> dict:
    env = undrawn_launch_env(subprocess_env(graph), graph.root / "undrawn")
    env.update(extra)
    return env


def _here(graph, *args: str) -> subprocess.CompletedProcess:
    """``tempo ARGS`` on ``graph``, in this process (``cli_here``): the reads and releases between the
    launches, whose output is what is checked; the launches themselves are real processes."""
    return tempo_here(*args, env=_env(graph))


def _window(graph) -> str:
    [window] = graph.plan.windows
    return window


def _killed_at(graph, point: str) -> subprocess.CompletedProcess:
    """``tempo materialize --all --jobs 1`` killed with SIGKILL at ``point`` (``<asset>:<point>``): the
    launcher itself runs the step (``--jobs 2``: the step's own process dies, see below)."""
    graph.instance.dispose()
    # unbuffered: what it printed before the kill reaches the pipe (a terminal gets it line by line)
    result = tempo("materialize", "--all", "--jobs", "1", env=_env(graph, TEMPO_FAULT_AT=point, PYTHONUNBUFFERED="1"))
    assert result.returncode == -9, f"not killed at {point}: rc {result.returncode}\n{result.stdout}{result.stderr}"
    return result


def _status(graph) -> dict[str, tuple[str, str]]:
    out = _here(graph, "status", "--json")
    assert out.returncode == 0, out.stderr
    return {f"{s['asset']}[{s['partition']}]": (s["state"], s["reason"]) for s in json.loads(out.stdout)}


def _materialize_all(graph) -> subprocess.CompletedProcess:
    result = tempo("materialize", "--all", env=_env(graph))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "summary:" in result.stdout
    return result


def _all_ok(graph) -> None:
    states = _status(graph)
    assert {name: s for name, s in states.items() if s[0] != "ok"} == {}


def test_kill_at_the_test_claim_the_dead_run_is_failed_released_burned_and_the_rest_built(tiny_build, tmp_path):
    graph = tiny_copy(tiny_build, tmp_path / "g", stage="unscored")
    window = _window(graph)
    _killed_at(graph, "test_growth:claimed")
    status = _here(graph, "status")
    # the run the kill left STARTED is reported failed, naming the process that died
    assert "the process that ran it died" in status.stderr
    line = next(l for l in status.stdout.splitlines() if l.startswith(f"test_growth[{window}]"))
    assert " claimed " in line and "ended without storing test_growth" in line
    assert f"tempo test-claim release {window} --reason" in line
    audit = _here(graph, "audit-cutoffs")
    assert f"TEST dead [{window}]" in audit.stdout
    # the report advises the state's own command, not a materialize that would be refused
    report = _here(graph, "report", "--window", window)
    assert "its TEST is dead" in report.stderr and f"tempo test-claim release {window}" in report.stderr
    release = _here(graph, "test-claim", "release", window, "--reason", "killed at the claim")
    assert release.returncode == 0, release.stderr
    finished = _materialize_all(graph)
    assert "burned: window_job" in finished.stdout and "CAFA submission for cutoff" in finished.stdout
    assert f"TEST burned [{window}]" in _here(graph, "audit-cutoffs").stdout
    assert _status(graph)["submission[2018-01-15]"][0] == "ok"


def _unchecked_after_the_kill(graph, asset: str) -> None:
    """``asset`` of the window stored, its blocking checks never run: ``tempo status`` shows it so."""
    state, reason = _status(graph)[f"{asset}[{_window(graph)}]"]
    assert state == "unchecked" and "never ran" in reason, (state, reason)


def _ran_the_checks_that_never_ran(graph, asset: str, output: str) -> None:
    """The launch after a kill ran ``asset``'s checks that the killed one never ran, and they passed."""
    window = _window(graph)
    assert f"running the checks that never ran on {asset}[{window}]" in output, output
    assert f"checks of {asset}[{window}] passed" in output, output


def test_killed_after_each_test_write_and_at_benchmark_and_the_next_launches_finish(tiny_build, tmp_path):
    """One graph, killed in turn, each kill leaving the window one step further on. First ``dagster asset
    materialize`` (Dagster's multiprocess executor, no ``tempo`` tags at launch) killed with SIGKILL,
    orchestrator and step, just after test_growth's write: the run names its process from inside, so
    ``tempo status`` reports it failed naming that pid and test_growth stored with its blocking checks never
    run; the window is ``read``, which ``tempo test-claim release`` refuses (nothing of TEST was lost). Then
    ``tempo materialize --all --jobs 1`` (the launcher runs the step) killed after test_score's write: it ran
    test_growth's checks first; test_score is left unchecked in turn. Then ``tempo materialize --all --jobs
    2`` whose window step process is killed at benchmark's start: it ran test_score's checks first; the
    launcher sees its child die, marks the run it left STARTED failed and builds the rest. The next
    materialize finishes the window: its stored growth scored once."""
    graph = tiny_copy(tiny_build, tmp_path / "g", stage="unscored")
    window = _window(graph)
    graph.instance.dispose()
    launched = subprocess.Popen([script("dagster"), "asset", "materialize", "--select", "test_growth", "--partition",
                                 window, "-m", "tempo_assets.definitions"],
                                env=_env(graph, TEMPO_FAULT_AT="test_growth:written"), stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)
    output, _ = launched.communicate(timeout=900)
    assert launched.returncode == -9, f"not killed: rc {launched.returncode}\n{output}"
    status = _here(graph, "status")
    assert f"the process that ran it died (pid {launched.pid} on " in status.stderr, status.stderr
    _unchecked_after_the_kill(graph, "test_growth")
    release = tempo("test-claim", "release", window, "--reason", "killed after the read", env=_env(graph))
    # a subprocess: its stderr is all the script prints, Dagster's log handlers included (one line)
    assert release.returncode == 2 and len(release.stderr.strip().splitlines()) == 1, release.stderr
    assert f"`tempo materialize --window {window}` scores it once" in release.stderr
    claims = json.loads(_here(graph, "test-claim", "list", "--json").stdout)
    assert [c["state"] for c in claims] == ["read"]
    assert f"TEST read [{window}]" in _here(graph, "audit-cutoffs").stdout
    report = _here(graph, "report", "--window", window)
    assert f"tempo materialize --window {window}" in report.stdout + report.stderr

    killed = _killed_at(graph, "test_score:written")
    _ran_the_checks_that_never_ran(graph, "test_growth", killed.stdout)
    _unchecked_after_the_kill(graph, "test_score")

    killed = tempo("materialize", "--all", "--jobs", "2", env=_env(graph, TEMPO_FAULT_AT="benchmark:started"))
    assert killed.returncode == 1, killed.stdout + killed.stderr
    _ran_the_checks_that_never_ran(graph, "test_score", killed.stdout)
    # the launcher saw its child die, marked the run it left STARTED failed, and built the rest
    assert f"window_job {window}: its process ended with status -9" in killed.stdout
    assert "the process that ran it died" in killed.stdout
    assert f"failed: window_job {window}" in killed.stdout and "CAFA submission for cutoff" in killed.stdout
    _materialize_all(graph)
    _all_ok(graph)
    claims = json.loads(_here(graph, "test-claim", "list", "--json").stdout)
    assert [c["state"] for c in claims] == ["scored"]
    assert "PASS" in _here(graph, "audit-cutoffs").stdout


def test_a_second_instance_on_one_store_runs_the_checks_it_never_saw(tiny_build, tmp_path):
    graph = tiny_copy(tiny_build, tmp_path / "g", stage="scored")
    graph.instance.dispose()
    second = _env(graph, DAGSTER_HOME=str(make_home(tmp_path / "second_home")))
    states = json.loads(tempo_here("status", "--json", env=second).stdout)
    unchecked = {f"{s['asset']}[{s['partition']}]" for s in states if s["state"] == "unchecked"}
    assert f"test_score[{_window(graph)}]" in unchecked and len(unchecked) > 10
    finished = tempo("materialize", "--all", env=second)
    assert finished.returncode == 0, finished.stdout + finished.stderr
    after = json.loads(tempo_here("status", "--json", env=second).stdout)
    assert {s["state"] for s in after} == {"ok"}, [s for s in after if s["state"] != "ok"]


def test_three_concurrent_materialize_all_build_each_artefact_once(tiny_build, tmp_path):
    graph = tiny_copy(tiny_build, tmp_path / "g", stage="unscored")
    graph.instance.dispose()
    # a fresh instance: the three launches also race to register the archive's partitions; and the
    # window's VALID selection and recipe are built again, by one of them
    shutil.rmtree(graph.home)
    for asset in ("valid_selection", "frozen_recipe"):
        shutil.rmtree(graph.artefacts / asset)
    env = _env(graph, DAGSTER_HOME=str(make_home(graph.home)))
    barrier = threading.Barrier(3)
    results = [None] * 3

    def launch(i: int) -> None:
        barrier.wait()
        results[i] = subprocess.run([script("tempo"), "materialize", "--all"], env=env, capture_output=True,
                                    text=True, timeout=900)

    threads = [threading.Thread(target=launch, args=(i,)) for i in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for result in results:
        assert result.returncode == 0, result.stdout + result.stderr
        assert "IntegrityError" not in result.stderr
    with dg.DagsterInstance.from_config(str(graph.home)) as instance:
        for asset in ("valid_selection", "frozen_recipe", "test_growth", "test_score", "benchmark", "submission"):
            events = instance.fetch_materializations(dg.AssetKey(asset), limit=100).records
            assert len(events) == 1, f"{asset} materialised {len(events)} times by three concurrent launches"
    waited = sum("by another launch" in r.stdout for r in results)
    assert waited >= 1


def _kill_9_of_the_launcher(graph) -> None:
    """``tempo materialize --all --jobs 2`` killed with SIGKILL once it has started a step in a process of
    its own (``graph`` missing something such a step builds): its step processes end with it, and the run
    it started is not left to pass as a success."""
    launcher = subprocess.Popen([script("tempo"), "materialize", "--all", "--jobs", "2"], env=_env(graph),
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    for line in launcher.stdout:
        if ": started run " in line and "in a process of its own" in line:
            break
    children = psutil.Process(launcher.pid).children(recursive=True)
    assert children, "no step process under the launcher"
    launcher.kill()
    launcher.wait()

    def gone(process) -> bool:
        try:
            return process.status() == psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            return True

    wait_until(lambda: all(gone(c) for c in children), "the launcher's step processes ending after its kill -9")
    run_id = line.split(": started run ")[1].split()[0]
    with dg.DagsterInstance.from_config(str(graph.home)) as instance:  # ended with it, not by finishing its run
        run = instance.get_run_by_id(run_id)
        assert run is None or run.status != dg.DagsterRunStatus.SUCCESS


# what each launch finds missing, and the job whose run the signal interrupts: under ``--jobs 1`` the
# submission, the catalog after it; under ``--jobs 2`` the window's benchmark, the submission beside it
# (it waits only for the stored recipe) and the catalog, which waits for the window's run
SIGTERM_CASES = {"1": (("submission", "benchmark_catalog"), "submission_job"),
                 "2": (("benchmark", "submission", "benchmark_catalog"), "window_job")}


def _sigterm(graph, jobs: str) -> None:
    """``kill PID`` (SIGTERM: ``timeout``, a service manager) of ``tempo materialize --jobs JOBS`` on
    ``graph`` with SIGTERM_CASES' artefacts missing stops it as Ctrl-C would: the runs under way are ended
    as failed, no later step starts (the catalog waits in both cases), the exit status is 130 with one line
    saying so. Before, ``--jobs 1`` failed that run and went on with the next steps (exit 1), and
    ``--jobs 2``'s launcher died on the spot (its runs left ``STARTED`` until the next launch)."""
    missing, interrupted = SIGTERM_CASES[jobs]
    graph.instance.dispose()
    for asset in missing:  # those a signal before left missing are missing already
        shutil.rmtree(graph.artefacts / asset, ignore_errors=True)
    with dg.DagsterInstance.from_config(str(graph.home)) as instance:
        before = {run.run_id for run in instance.get_runs()}
    launcher = subprocess.Popen([script("tempo"), "materialize", "--all", "--jobs", jobs], env=_env(graph),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    seen = []
    for line in launcher.stdout:
        seen.append(line)
        if ": started run " in line:
            break
    assert interrupted in seen[-1], seen
    run_id = seen[-1].split(": started run ")[1].split()[0]
    with dg.DagsterInstance.from_config(str(graph.home)) as instance:  # the signal lands in the step's body
        wait_until(lambda: any(e.dagster_event.event_type == dg.DagsterEventType.STEP_START
                               for e in instance.all_logs(run_id) if e.dagster_event), f"the {interrupted} step starting",
                   limit_s=120)
    launcher.terminate()  # SIGTERM
    out, err = launcher.communicate(timeout=120)
    output = "".join(seen) + out
    assert launcher.returncode == 130, f"rc {launcher.returncode}\n{output}{err}"
    assert err.strip().splitlines()[-1].startswith("tempo: interrupted"), err
    assert "catalog_job" not in output and "summary:" not in output, output  # nothing started after it
    with dg.DagsterInstance.from_config(str(graph.home)) as instance:  # its runs ended, none left STARTED
        launched = {run.run_id: (run.job_name, run.status) for run in instance.get_runs() if run.run_id not in before}
    assert launched.pop(run_id) == (interrupted, dg.DagsterRunStatus.FAILURE), launched
    # under --jobs 2 the submission may have started beside the window's run (and even ended)
    assert all(job == "submission_job" and jobs == "2" and status != dg.DagsterRunStatus.STARTED
               for job, status in launched.values()), launched


def test_sigterm_of_jobs_1_then_of_jobs_2_then_kill_9_of_a_jobs_2_launcher_and_the_next_materialize_finishes(
        tiny_build, tmp_path):
    """One graph (a copy of the tiny build), stopped in turn: SIGTERM of ``tempo materialize --jobs 1`` in the
    submission's step (:func:`_sigterm`: its submission and catalog removed), then SIGTERM of ``--jobs 2`` in
    the window's step (its benchmark removed too: the first SIGTERM left the submission and the catalog to
    build, as it found them), then ``kill -9`` of a ``--jobs 2`` launcher, which takes its step processes with
    it (:func:`_kill_9_of_the_launcher`: the benchmark and the catalog at least are still to build); then one
    ``tempo materialize --all`` marks the run the kill left STARTED failed (if it had begun) and builds what
    all three left."""
    graph = tiny_copy(tiny_build, tmp_path / "g", stage="scored")
    _sigterm(graph, "1")
    _sigterm(graph, "2")
    _kill_9_of_the_launcher(graph)
    _materialize_all(graph)
    _all_ok(graph)
    with dg.DagsterInstance.from_config(str(graph.home)) as instance:
        assert not instance.get_runs(filters=dg.RunsFilter(statuses=[dg.DagsterRunStatus.STARTED]))
