"""``tempo materialize --jobs N``: independent steps run at once, each run in a process of its own;
``--jobs 1`` runs them one after the other in the launching process (cli/concurrent_steps.py)."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from dataclasses import replace
from types import SimpleNamespace

import dagster as dg
import psutil
import pytest
from dagster._core.instance.ref import InstanceRef

from tempo_assets.cli.concurrent_steps import (EXPECTED_RUN_S, LIGHT_JOBS, LIGHT_RUN_MB, MAX_WINDOWS_VARIABLE,
                                               ConcurrentSteps, StepGraph, launch_order, light_place_fits,
                                               max_parallel_windows, step_dependencies, window_memory_mb)
from tempo_assets.cli.graph_cmd import StepRunner, plan_steps, run_steps
from tempo_assets.cli.step_process import CHILDREN_CPU_TAG, CPU_TAG, PEAK_RSS_TAG, Usage
from tempo_assets.core.base.errors import TempoInputError
from tempo_assets.definitions import build_resources, defs
from tempo_assets.graph_state import JOB_ASSETS, DefinedGraph, GraphState
from tempo_assets.partitions import parse_window_key, plan_partitions, register_partitions
from tempo_assets.resources import open_archive, open_artefact_store
from tempo_assets.runs import PID_TAG
from tempo_assets_tests.assets.tiny_archive import build_tiny_archive
from tempo_assets_tests.conftest import make_home, tiny_copy
from tempo_assets_tests.toolkit import DATA, REPO

# what step runs import that the code location imports only where used (core.IMPORTED_WHERE_USED)
USED_BY_STEP_RUNS = ["faiss", "lightgbm", "matplotlib.backends.backend_agg", "matplotlib.figure", "scipy.sparse",
                     "sklearn"]



@pytest.fixture(scope="module")
def data_steps(tmp_path_factory):
    """``tempo materialize --all``'s steps on ``data/`` (five releases, two windows, two registered methods)
    and what the graph says each reads, on an empty store."""
    archive = open_archive(str(DATA))
    plan = plan_partitions(archive)
    defined = DefinedGraph.of(defs.get_repository_def())
    state = GraphState(open_artefact_store(str(tmp_path_factory.mktemp("store"))), plan, defined, archive=archive)
    steps = plan_steps(plan, "all")
    graph = StepGraph(state.upstream_of, defined.deps, {**JOB_ASSETS, **StepRunner.METHOD_ASSETS}, plan)
    return SimpleNamespace(plan=plan, steps=steps, graph=graph, index={step: i for i, step in enumerate(steps)})


def test_window_runs_at_once_are_capped_by_free_memory(tmp_path, monkeypatch):
    monkeypatch.delenv(MAX_WINDOWS_VARIABLE, raising=False)
    monkeypatch.setattr(psutil, "virtual_memory", lambda: SimpleNamespace(available=23_000 * 2 ** 20))
    with dg.DagsterInstance.ephemeral() as instance:
        (tmp_path / "archive").mkdir()
        (tmp_path / "archive" / "release.gaf").write_bytes(b"x" * 2 ** 20)  # 1 MB: an estimate of 700 MB
        assert window_memory_mb(instance, tmp_path / "archive") == 700
        assert max_parallel_windows(700) == 32
        # a window run measured its peak: the full human archive's, near 12 GB
        instance.add_run(dg.DagsterRun(job_name="window_job", run_id="0" * 8 + "-0000-4000-8000-" + "0" * 12,
                                       tags={PEAK_RSS_TAG: "11640"}))
        assert window_memory_mb(instance, tmp_path / "archive") == 11640
        assert max_parallel_windows(11640) == 1
        monkeypatch.setenv(MAX_WINDOWS_VARIABLE, "3")
        assert max_parallel_windows(11640) == 3
        monkeypatch.setenv(MAX_WINDOWS_VARIABLE, "0")
        with pytest.raises(TempoInputError, match=MAX_WINDOWS_VARIABLE):
            max_parallel_windows(11640)


def test_steps_wait_only_for_what_they_read(data_steps):
    steps, at, plan = data_steps.steps, data_steps.index, data_steps.plan
    depends = step_dependencies(steps, data_steps.graph)

    def waits_for(job, key):
        return {steps[j] for j in depends[at[(job, key)]]}

    first_cutoff, last_cutoff = plan.cutoffs[0], plan.cutoffs[-1]
    methods = [("method_job", f"{last_cutoff}|{k}") for k in plan.methods]
    assert all(not waits_for("release_job", r) for r in plan.releases)
    assert waits_for("cutoff_job", first_cutoff) == {("release_job", plan.releases[0]), ("release_job", first_cutoff)}
    assert waits_for("method_bundle_job", last_cutoff) == {("release_job", last_cutoff), ("cutoff_job", last_cutoff)}
    assert all(waits_for(*m) == {("method_bundle_job", last_cutoff)} for m in methods)
    # a window: its three releases, its two cutoffs and the method runs there (its benchmark scores them), and
    # the cutoff at t1, whose run builds the warehouse growth partition (t0, t1] its TEST set reads as it stands
    for key, window in zip(plan.windows, map(parse_window_key, plan.windows)):
        cutoffs = (window.t_minus_1, window.t0)
        assert waits_for("window_job", key) == ({("release_job", r) for r in (*cutoffs, window.t1)}
                                                | {("cutoff_job", c) for c in (*cutoffs, window.t1)}
                                                | {("method_job", f"{c}|{k}") for c in cutoffs for k in plan.methods})
    assert last_cutoff not in parse_window_key(plan.windows[0]).releases  # W1 reads nothing of the last cutoff's
    # the submission: its cutoff, its release and the window whose recipe it applies (not the methods)
    assert waits_for("submission_job", last_cutoff) == {("release_job", last_cutoff), ("cutoff_job", last_cutoff),
                                                         ("window_job", plan.windows[-1])}
    # the catalog (whatever is stored): every step but the submission, which it does not read
    assert waits_for("catalog_job", None) == set(steps[:-1]) - {("submission_job", last_cutoff)}
    unknown = step_dependencies(steps + [("some_new_job", None)], data_steps.graph)
    assert unknown[-1] == set(range(len(steps)))


def test_a_submission_waits_for_the_latest_windows_run_while_an_earlier_recipe_is_the_stored_one(data_steps):
    """W1's recipe stored, W2's not (a launch killed between their freezes): what the submission reads now
    names W1's recipe, but the recipe that applies once W2's run freezes its own is W2's (``tempo status``
    then calls a submission from W1's stale), so the submission waits for W2's run, not only for W1's."""
    steps, at, plan = data_steps.steps, data_steps.index, data_steps.plan
    w1, w2 = plan.windows[0], plan.windows[-1]
    graph = data_steps.graph

    def upstream_with_w1s_recipe_stored(job, key):
        return [(a, w1 if a == "frozen_recipe" else p) for a, p in graph.upstream_of(job, key)]

    depends = step_dependencies(steps, replace(graph, upstream_of=upstream_with_w1s_recipe_stored))
    submission = at[("submission_job", plan.cutoffs[-1])]
    assert {("window_job", w1), ("window_job", w2)} <= {steps[j] for j in depends[submission]}
    # and it does not start early on W1's recipe while both runs go on: only once W2's is stored and read
    stored = {w1}
    runner = SimpleNamespace(store=SimpleNamespace(exists=lambda asset, key: asset == "frozen_recipe" and key in stored),
                             plan_step=lambda job, key: SimpleNamespace(
                                 upstream=[("frozen_recipe", max(stored))], ready=True))
    launch = object.__new__(ConcurrentSteps)  # no forkserver: only the launch rule is under test
    launch.steps, launch.runner, launch.depends, launch.graph = steps, runner, depends, graph
    launch.report = {i: () for i, (job, _) in enumerate(steps)
                     if job not in ("window_job", "submission_job", "catalog_job")}  # all but these ended
    launch.running = {at[("window_job", w1)]: None, at[("window_job", w2)]: None}
    assert launch.waits_on_recipe(submission) and not launch.can_start(submission)
    stored.add(w2)
    assert launch.can_start(submission)


def test_the_launch_tries_first_what_the_longest_chain_of_runs_waits_for(data_steps):
    """A free slot goes to the step on the critical path: the later window (longer, and the submission
    applies its recipe) and what it reads first; the method runs only the submission and the catalog read
    after both windows, which do not read them. Never a step before one it waits for."""
    steps, at, plan = data_steps.steps, data_steps.index, data_steps.plan
    depends = step_dependencies(steps, data_steps.graph)
    order = launch_order(steps, depends)
    assert sorted(order) == list(range(len(steps)))
    place = {steps[i]: n for n, i in enumerate(order)}
    assert all(place[steps[j]] < place[steps[i]] for i in range(len(steps)) for j in depends[i])
    w1, w2 = ("window_job", plan.windows[0]), ("window_job", plan.windows[-1])
    assert place[w2] < place[w1]
    only_the_submissions = [("method_bundle_job", plan.cutoffs[-1])] + [
        ("method_job", f"{plan.cutoffs[-1]}|{k}") for k in plan.methods]
    assert min(place[s] for s in only_the_submissions) > place[w1]
    assert max(place[s] for s in steps if at[s] in depends[at[w2]]) < place[w2]


def simulated_launch(data_steps, jobs: int, light_place: bool) -> tuple[dict, list]:
    """``data/``'s steps launched by ``ConcurrentSteps``' own rule (``start_startable``: launch order, places,
    waits), each run lasting its job's ``EXPECTED_RUN_S`` and no submission started before its window ends:
    each step's (start, end) and the jobs under way just after each start."""
    steps = data_steps.steps
    launch = object.__new__(ConcurrentSteps)  # no forkserver, no runs: only the launch rule is under test
    launch.steps, launch.graph, launch.jobs, launch.windows = steps, data_steps.graph, jobs, 2
    launch.light_place, launch.depends = light_place, step_dependencies(steps, data_steps.graph)
    launch.runner = SimpleNamespace(store=SimpleNamespace(exists=lambda asset, key: False))  # no recipe stored early
    launch.report, launch.running, times, together, clock = {}, {}, {}, [], [0.0]

    def start(index):
        launch.running[index] = SimpleNamespace(index=index)
        times[index] = (clock[0], clock[0] + EXPECTED_RUN_S[steps[index][0]])
        together.append([steps[i][0] for i in launch.running])

    launch.start = start
    pending = launch_order(steps, launch.depends)
    while pending or launch.running:
        launch.start_startable(pending)
        ended = min(launch.running, key=lambda i: (times[i][1], i))
        clock[0] = times[ended][1]
        del launch.running[ended]
        launch.report[ended] = ()
    return times, together


def test_method_runs_take_a_place_beside_the_two_slots(data_steps):
    """With the light place, a method's bundle or run starts beside two runs: the method runs at the last
    cutoff, which only the submission and the catalog read, run beside the windows, so the catalog starts as
    soon as the last window ends, not after those runs; never more than one run beyond the slots, never a
    run of another job in that place, never a step before one it waits for."""
    steps, at, plan = data_steps.steps, data_steps.index, data_steps.plan
    catalog = at[("catalog_job", None)]
    windows = [at[("window_job", w)] for w in plan.windows]
    last_methods = [at[("method_bundle_job", plan.cutoffs[-1])]] + [
        at[("method_job", f"{plan.cutoffs[-1]}|{k}")] for k in plan.methods]
    depends = step_dependencies(steps, data_steps.graph)
    for light_place in (True, False):
        times, together = simulated_launch(data_steps, 2, light_place)
        assert sorted(times) == list(range(len(steps)))
        assert all(times[j][1] <= times[i][0] for i in range(len(steps)) for j in depends[i])
        assert max(len(jobs) for jobs in together) == (3 if light_place else 2)
        assert all(sum(job not in LIGHT_JOBS for job in jobs) <= 2 for jobs in together)
        last_window_end = max(times[w][1] for w in windows)
        if light_place:
            assert all(times[m][1] < last_window_end for m in last_methods)
            assert times[catalog][0] == last_window_end
        else:  # in a slot only once a window has ended: the catalog waits for them
            assert times[catalog][0] > last_window_end
    times, together = simulated_launch(data_steps, 1, False)
    assert max(len(jobs) for jobs in together) == 1


def test_the_light_place_is_given_when_the_memory_holds_it_and_never_with_one_job(tmp_path, monkeypatch):
    available_mb = [0.0]
    monkeypatch.setattr(psutil, "virtual_memory", lambda: SimpleNamespace(available=available_mb[0] * 2 ** 20))
    with dg.DagsterInstance.ephemeral() as instance:
        archive = tmp_path / "archive"
        archive.mkdir()
        (archive / "release.gaf").write_bytes(b"x" * 2 ** 20)  # 1 MB: a window run estimated at 700 MB
        window_mb = window_memory_mb(instance, archive)
        available_mb[0] = 2 * 700 + LIGHT_RUN_MB  # two windows at once and a light run
        assert light_place_fits(instance, 2, 2, window_mb) and not light_place_fits(instance, 1, 2, window_mb)
        available_mb[0] -= 1
        assert not light_place_fits(instance, 2, 2, window_mb)
        assert light_place_fits(instance, 2, 1, window_mb)  # one window at once: 700 + 500
        # a method run measured its peak: it replaces the estimate
        instance.add_run(dg.DagsterRun(job_name="method_job", run_id="1" * 8 + "-0000-4000-8000-" + "0" * 12,
                                       tags={PEAK_RSS_TAG: str(LIGHT_RUN_MB - 100)}))
        assert light_place_fits(instance, 2, 2, window_mb)


def test_the_submission_waits_for_its_windows_run_only_until_that_windows_recipe_is_ready(data_steps):
    steps, at, plan = data_steps.steps, data_steps.index, data_steps.plan
    w1, w2 = at[("window_job", plan.windows[0])], at[("window_job", plan.windows[-1])]
    submission, its_cutoff = at[("submission_job", plan.cutoffs[-1])], at[("cutoff_job", plan.cutoffs[-1])]
    planned = []

    class Runner:  # what recipe_ready asks of graph_cmd.StepRunner: the store and the step's plan now
        stored: set[str] = set()
        plan = SimpleNamespace(upstream=[], ready=False)
        store = SimpleNamespace(exists=lambda asset, key: asset == "frozen_recipe" and key in Runner.stored)

        def plan_step(self, job, key):
            planned.append((job, key))
            return Runner.plan

    launch = object.__new__(ConcurrentSteps)  # no forkserver: only the launch rule is under test
    launch.steps, launch.runner = steps, Runner()
    launch.graph = data_steps.graph
    launch.depends = step_dependencies(steps, launch.graph)
    launch.report = {i: () for i, (job, _) in enumerate(steps)
                     if job not in ("window_job", "submission_job", "catalog_job")}  # all but these ended
    launch.running = {w1: None, w2: None}
    assert launch.waits_on_recipe(submission)
    assert not launch.recipe_ready(submission) and not planned  # W2's recipe not stored: not even planned
    Runner.stored = {steps[w1][1]}
    assert not launch.recipe_ready(submission) and not planned  # W1's is not the one it waits for
    Runner.stored.add(steps[w2][1])
    Runner.plan = SimpleNamespace(upstream=[("frozen_recipe", steps[w2][1])], ready=False)  # its checks to come
    assert not launch.can_start(submission)
    Runner.plan = SimpleNamespace(upstream=[("frozen_recipe", steps[w2][1])], ready=True)
    assert launch.can_start(submission)
    Runner.plan = SimpleNamespace(upstream=[("frozen_recipe", steps[w1][1])], ready=True)  # it would apply W1's
    assert not launch.can_start(submission)
    Runner.plan = SimpleNamespace(upstream=[("frozen_recipe", steps[w2][1])], ready=True)
    del launch.running[w2]  # W2's run not started (or its step still to plan): wait for it to end
    assert not launch.waits_on_recipe(submission) and not launch.can_start(submission)
    launch.running[w2] = None
    del launch.report[its_cutoff]  # its cutoff's run still under way: the rule is only about window runs
    assert not launch.can_start(submission)
    assert not launch.waits_on_recipe(len(steps) - 1)  # the catalog never starts early


@pytest.fixture
def tiny(tmp_path):
    archive = build_tiny_archive(tmp_path / "archive", n_releases=4)
    plan = plan_partitions(open_archive(archive))
    resources = build_resources(str(archive), str(tmp_path / "artefacts"), "sqlite:///" + str(tmp_path / "wh.sqlite"),
                                str(tmp_path / "cache"))
    # entered: definitions load against this instance's defs-state storage (see test_ui_texts)
    with dg.DagsterInstance.from_ref(InstanceRef.from_dir(str(make_home(tmp_path / "home")))) as instance:
        register_partitions(instance, plan)
        yield instance, plan, resources


def run_times(instance, report_runs):
    records = [instance.get_run_record_by_id(r) for r in report_runs]
    return [(r.start_time, r.end_time) for r in records]


def runs_of(instance, job):
    return {r.tags["dagster/partition"]: r for r in instance.get_runs(filters=dg.RunsFilter(job_name=job))}


def test_jobs_2_overlaps_independent_runs_and_jobs_1_does_not(tiny):
    instance, plan, resources = tiny
    first, second, third, fourth = plan.releases
    lines: list[str] = []
    report = run_steps([("release_job", first), ("release_job", second)], instance, resources, echo=lines.append,
                       jobs=2)
    assert [r[2] for r in report] == ["ok", "ok"], lines
    runs = runs_of(instance, "release_job")
    (start_a, end_a), (start_b, end_b) = run_times(instance, [runs[first].run_id, runs[second].run_id])
    assert start_a < end_b and start_b < end_a, "the two independent runs did not overlap"
    # each ran in a child of its own, which named itself in the run's tags and measured itself
    pids = {runs[first].tags[PID_TAG], runs[second].tags[PID_TAG]}
    assert len(pids) == 2 and str(os.getpid()) not in pids
    assert all(CPU_TAG in runs[k].tags and PEAK_RSS_TAG in runs[k].tags for k in (first, second))
    assert all(float(runs[k].tags[CHILDREN_CPU_TAG]) >= 0 for k in (first, second))
    # both started before either ended; each one's closing line names its run
    started = [i for i, line in enumerate(lines) if ": started run " in line]
    ended = [i for i, line in enumerate(lines) if " ok in " in line]
    assert len(started) == len(ended) == 2 and max(started) < min(ended), lines

    report = run_steps([("release_job", third), ("release_job", fourth)], instance, resources, echo=lines.append,
                       jobs=1)
    assert [r[2] for r in report] == ["ok", "ok"]
    runs = runs_of(instance, "release_job")
    (_, end_c), (start_d, _) = run_times(instance, [runs[third].run_id, runs[fourth].run_id])
    assert end_c <= start_d, "--jobs 1 overlapped two runs"
    assert {runs[third].tags[PID_TAG], runs[fourth].tags[PID_TAG]} == {str(os.getpid())}



def test_the_submission_starts_once_its_recipe_is_ready_not_when_its_window_run_ends(tiny_build, tmp_path):
    # the session's tiny build made its scored stage with --jobs 2 from the unscored one, whose window's
    # frozen recipe was stored and checked: the window's TEST phase, the latest submission and the catalog
    graph = tiny_copy(tiny_build, tmp_path / "graph")
    try:
        [window], cutoff = graph.plan.windows, graph.plan.cutoffs[-1]
        # the window's second run (its first, in the unscored stage, built everything up to the recipe)
        [window_run] = [r for r in graph.instance.get_runs(filters=dg.RunsFilter(job_name="window_job"))
                        if dg.AssetKey("test_score") in r.asset_selection]
        assert window_run.tags["dagster/partition"] == window
        assert dg.AssetKey("frozen_recipe") not in window_run.asset_selection
        submission_run = runs_of(graph.instance, "submission_job")[cutoff]
        (_, window_ended), (submission_started, _) = run_times(graph.instance,
                                                               [window_run.run_id, submission_run.run_id])
        assert submission_started < window_ended, "the submission waited for the end of its window's run"
        # what it applied is the window's stored recipe, and it is current (a rerun would skip it)
        store = graph.store()
        assert store.read_meta("submission", cutoff)["recipe_window"] == window
        assert (store.read_meta("submission", cutoff)["recipe_hash"]
                == store.read_meta("frozen_recipe", window)["recipe_hash"])
        report = run_steps([("submission_job", cutoff)], graph.instance, graph.resources, echo=lambda *_: None)
        assert report[0][2] == "skipped"
    finally:
        graph.instance.dispose()



def seen_in_a_step_process(tmp_path, seen: str, **run) -> list:
    """``[seen in a process forked from forkserver_context(), seen in the process that forked it]``, ``seen``
    an expression over ``sys`` and ``signal``. One child and a pipe, as ``ConcurrentSteps`` starts them (a
    Pool's worker and result threads are not what a launch uses); the probe is a script file, whose
    ``__main__`` the forkserver's child imports."""
    script = tmp_path / "probe.py"
    script.write_text("import json, signal, sys\n"
                      "from tempo_assets.cli.concurrent_steps import forkserver_context\n"
                      f"def seen():\n    return {seen}\n"
                      "def send(conn):\n    conn.send(seen())\n"
                      "if __name__ == '__main__':\n"
                      "    context = forkserver_context()\n"
                      "    here, there = context.Pipe(duplex=False)\n"
                      "    child = context.Process(target=send, args=(there,))\n"
                      "    child.start()\n"
                      "    there.close()\n"
                      "    if not here.poll(240):\n"
                      "        sys.exit(f'the step process sent nothing (its exit code {child.exitcode})')\n"
                      "    print(json.dumps([here.recv(), seen()]))\n"
                      "    child.join()\n", encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, str(script)], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=300, **run)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_step_processes_take_sigint_as_ctrl_c_under_a_launch_that_ignores_it(tmp_path):
    """``tempo materialize --all &`` run from a script ignores SIGINT, and so did the step processes its
    forkserver forked: the stop the launcher sends them (SIGINT, as Ctrl-C) was lost when it landed before
    Dagster's own handler was set, and each was killed after the grace period. They now take it as Ctrl-C
    from the start; the launcher still ignores it."""
    named = "{signal.SIG_IGN: 'ignored', signal.default_int_handler: 'Ctrl-C'}.get(signal.getsignal(signal.SIGINT), 'other')"
    seen = seen_in_a_step_process(tmp_path, named, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    assert seen == ["Ctrl-C", "ignored"], seen


def test_step_processes_start_with_the_libraries_step_runs_import_and_the_launcher_without(tmp_path):
    """The forkserver preloads lightgbm, faiss, matplotlib's Agg canvas, ... (``PRELOAD``): a step process
    finds them imported (else each run imported them again, issue 22); the launching process, as
    ``tempo status``, has not imported them."""
    child, launcher = seen_in_a_step_process(tmp_path, f"[m for m in {USED_BY_STEP_RUNS!r} if m in sys.modules]")
    assert child == USED_BY_STEP_RUNS, f"a step process starts without {sorted(set(USED_BY_STEP_RUNS) - set(child))}"
    assert launcher == [], f"importing concurrent_steps imports {launcher}"


def test_a_run_s_usage_counts_apart_the_cpu_of_the_children_it_waited_for():
    """A run's own CPU (``tempo/cpu_s``) leaves out the processes it starts and waits for (DIAMOND, a fenced
    method's sandbox); ``tempo/children_cpu_s`` counts them."""
    burn = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.4:\n    pass\n"
    before = Usage.now()
    subprocess.run([sys.executable, "-c", burn], check=True)
    after = Usage.now()
    assert after.children_cpu_s - before.children_cpu_s >= 0.35
    assert after.cpu_s - before.cpu_s < 0.35
