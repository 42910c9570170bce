"""TEST is read once, whatever launches it: the window claims under concurrent CLI launches.

The session's tiny graph materialised up to ``frozen_recipe`` (``test_growth`` never ran,
``conftest.tiny_build``); each test works on a copy of its instance, artefact store and warehouse.
An audit-hook probe (in this process and, through ``sitecustomize``, in every launched one) records
each process that opens for reading the window's raw TEST ground truth (``release_annotations[t1]``'s
stored value) or test_growth's stored value, so "refused before reading" is observed, not inferred.

Concurrent launches are released together by a barrier the test holds (also in ``sitecustomize``):
each launched process connects to it at a chosen point and waits until all of them have arrived,
so the race is real, not three runs that happen to follow one another, and the test asserts that
the runs overlapped in time.
"""
from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
from dataclasses import dataclass
from pathlib import Path

import dagster as dg
import pytest

from tempo_assets.core.storage.claims import ClaimStore
from tempo_assets_tests.cli_here import tempo_here
from tempo_assets_tests.conftest import REPO, TEST_ASSETS, copy_sqlite, tiny_copy
from tempo_assets_tests.toolkit import script

pytestmark = pytest.mark.slow

# watched prefixes as LABEL=PATH separated by os.pathsep; each read-open of a file under one is logged
PROBE = '''import os, sys
def _tempo_probe(event, args):
    if event != "open" or not args or not isinstance(args[0], (str, bytes, os.PathLike)):
        return
    watched, log = os.environ.get("TEMPO_PROBE_PREFIX"), os.environ.get("TEMPO_PROBE_LOG")
    if not watched or not log:
        return
    mode, flags = (args[1] if len(args) > 1 else None), (args[2] if len(args) > 2 else 0)
    writes = any(c in mode for c in "wax+") if isinstance(mode, str) else bool(flags & (os.O_WRONLY | os.O_RDWR))
    path = os.fsdecode(args[0])
    for entry in watched.split(os.pathsep):
        label, _, prefix = entry.partition("=")
        if not writes and path.startswith(prefix):
            with open(log, "a") as handle:
                handle.write(f"{os.getpid()} {label} {path}\\n")
sys.addaudithook(_tempo_probe)


def _tempo_barrier():
    """Wait at the test's barrier (127.0.0.1:$TEMPO_BARRIER_PORT) until every launch has arrived."""
    import socket
    with socket.create_connection(("127.0.0.1", int(os.environ["TEMPO_BARRIER_PORT"])), timeout=600) as barrier:
        barrier.sendall(b"%d\\n" % os.getpid())
        barrier.settimeout(600)
        if barrier.recv(2) != b"go":
            raise RuntimeError("the test's barrier closed without releasing this launch")


def _tempo_wrap_barrier():
    """TEMPO_BARRIER_AT: ``executor`` (a run started, before any step: before any pool slot is taken)
    or ``claim:ASSET`` (ASSET's TEST claim, once every run has found nothing materialised yet)."""
    at = os.environ.get("TEMPO_BARRIER_AT", "")
    if at == "executor":
        from dagster._core.executor.in_process import InProcessExecutor
        from dagster._core.executor.multiprocess import MultiprocessExecutor
        for cls in (InProcessExecutor, MultiprocessExecutor):
            def execute(self, plan_context, execution_plan, _original=cls.execute):
                _tempo_barrier()
                yield from _original(self, plan_context, execution_plan)
            cls.execute = execute
    elif at.startswith("claim:"):
        from tempo_assets.core.storage.claims import ClaimStore
        original = ClaimStore.claim
        def claim(self, window, run_id, asset="test_growth"):
            if asset == at[len("claim:"):]:
                _tempo_barrier()
            return original(self, window, run_id, asset=asset)
        ClaimStore.claim = claim


if os.environ.get("TEMPO_BARRIER_PORT"):
    _tempo_wrap_barrier()
'''
_PROBING: list[bool] = []


def probe_this_process() -> None:
    """The same probe in this process, for the in-process runs (idle while the env names no log)."""
    if not _PROBING:
        exec(PROBE, {})
        _PROBING.append(True)


@pytest.fixture(scope="module")
def unscored(tiny_build, tmp_path_factory):
    """The tiny graph materialised through frozen_recipe of its window; test_growth never ran."""
    graph = tiny_copy(tiny_build, tmp_path_factory.mktemp("unscored") / "graph", "unscored")
    [window] = graph.plan.windows
    assert graph.report and all(r[2] == "ok" for r in graph.report), graph.report
    store = graph.store()
    assert store.exists("frozen_recipe", window) and not any(store.exists(a, window) for a in TEST_ASSETS)
    graph.instance.dispose()
    yield graph, window


@dataclass
class Copy:
    home: Path
    artefacts: Path
    archive: Path
    window: str
    env: dict
    instance: object
    resources: dict
    probe_log: Path

    def claims(self) -> ClaimStore:
        return ClaimStore.beside(self.artefacts)

    def records(self, asset: str = "test_score", kind: str = "materializations") -> list:
        fetch = getattr(self.instance, f"fetch_{kind}")
        return fetch(dg.AssetRecordsFilter(asset_key=dg.AssetKey(asset), asset_partitions=[self.window]),
                     limit=100).records

    def observations(self, key: str, asset: str = "test_growth") -> list:
        return [r for r in self.records(asset, "observations") if key in r.asset_observation.metadata]

    def ui_status(self, asset: str = "test_score") -> tuple[set[str], set[str]]:
        """The partitions the UI shows as materialised and as failed for ``asset``."""
        from dagster._core.storage.partition_status_cache import get_and_update_asset_status_cache_value

        from tempo_assets.partitions import WINDOWS

        value = get_and_update_asset_status_cache_value(self.instance, dg.AssetKey(asset), WINDOWS)
        if value is None:
            return set(), set()
        return (set(value.deserialize_materialized_partition_subsets(WINDOWS).get_partition_keys()),
                set(value.deserialize_failed_partition_subsets(WINDOWS).get_partition_keys()))

    def readers(self, label: str = "test") -> set[str]:
        """Pids that opened for reading the window's raw TEST (``test``) or test_growth's value (``growth``)."""
        if not self.probe_log.exists():
            return set()
        lines = [line.split(" ", 2) for line in self.probe_log.read_text().splitlines()]
        return {pid for pid, name, _ in lines if name == label}


@pytest.fixture()
def fresh(unscored, tmp_path, monkeypatch):
    from dagster._core.instance.ref import InstanceRef

    from tempo_assets.definitions import build_resources
    from tempo_assets.resources import GridResource

    graph, window = unscored
    home, artefacts = tmp_path / "home", tmp_path / "artefacts"
    shutil.copytree(graph.home, home)
    shutil.copytree(graph.artefacts, artefacts)
    copy_sqlite(graph.root / "warehouse.sqlite", tmp_path / "warehouse.sqlite")
    warehouse = "sqlite:///" + str(tmp_path / "warehouse.sqlite")
    probe = tmp_path / "probe"
    probe.mkdir()
    (probe / "sitecustomize.py").write_text(PROBE)
    t1 = window.split("__")[3]
    watched = os.pathsep.join([f"test={artefacts / 'release_annotations' / t1 / 'versions'}",
                               f"growth={artefacts / 'test_growth' / window / 'versions'}"])
    probe_this_process()
    monkeypatch.setenv("TEMPO_PROBE_PREFIX", watched)
    monkeypatch.setenv("TEMPO_PROBE_LOG", str(tmp_path / "probe.log"))
    env = dict(os.environ)
    env.update(graph.env, DAGSTER_HOME=str(home), TEMPO_ARTEFACTS=str(artefacts), TEMPO_WAREHOUSE_URL=warehouse,
               PYTHONPATH=f"{probe}:{REPO}")
    instance = dg.DagsterInstance.from_ref(InstanceRef.from_dir(str(home)))
    resources = build_resources(str(graph.archive), str(artefacts), warehouse,
                                graph.env["TEMPO_CACHE"], grid=GridResource(bootstrap_samples=20))
    yield Copy(home, artefacts, graph.archive, window, env, instance, resources, tmp_path / "probe.log")
    instance.dispose()


def tempo(copy: Copy, *args: str) -> subprocess.CompletedProcess:
    """``tempo ARGS`` on the copy, in this process (``cli_here``; the probe watches it as it watches the
    launches): the audit and the claim commands, whose output and exit status are what is checked."""
    return tempo_here(*args, env=copy.env)


def tempo_instance_limit(copy: Copy):
    """The ``test_score`` pool's slot limit in the copy's instance, read as its own process would."""
    from dagster._core.instance.ref import InstanceRef

    with dg.DagsterInstance.from_ref(InstanceRef.from_dir(str(copy.home))) as instance:
        info = instance.event_log_storage.get_concurrency_info("test_score")
        return info.slot_count


# each launch runs its steps in its own process (Dagster's in-process executor, which takes the pool's slots
# too): the race is between the launches. The default multiprocess executor started a Python process per
# step and per check (about 20 CPU s a launch, 60 to 80 a test); a run it executes is killed in test_recovery.py's
# test_killed_after_each_test_write_and_at_benchmark_and_the_next_launches_finish
IN_PROCESS = json.dumps({"execution": {"config": {"in_process": {}}}})


def launch(copy: Copy, selection: str, barrier_at: str, n: int = 3) -> list[subprocess.CompletedProcess]:
    """``n`` concurrent ``dagster asset materialize --select SELECTION --partition W`` launches, released
    together at ``barrier_at`` (``executor`` or ``claim:ASSET``: see ``_tempo_wrap_barrier``)."""
    command = [script("dagster"), "asset", "materialize", "--select", selection, "--partition", copy.window,
               "-m", "tempo_assets.definitions", "--config-json", IN_PROCESS]
    logs = [copy.probe_log.with_name(f"launch{i}.log") for i in range(n)]
    with socket.socket() as barrier:
        barrier.bind(("127.0.0.1", 0))
        barrier.listen(n)
        env = dict(copy.env, TEMPO_BARRIER_PORT=str(barrier.getsockname()[1]), TEMPO_BARRIER_AT=barrier_at)
        procs = [subprocess.Popen(command, cwd=REPO, env=env, stdout=open(log, "w"), stderr=subprocess.STDOUT)
                 for log in logs]
        barrier.settimeout(300)
        waiting = []
        try:
            for _ in range(n):  # every launch has arrived at the barrier, none is past it ...
                waiting.append(barrier.accept()[0])
        except socket.timeout:
            for proc in procs:
                proc.kill()
            pytest.fail(f"{n - len(waiting)} launch(es) never reached the barrier at {barrier_at}: "
                        + " | ".join(log.read_text()[-2000:] for log in logs))
        for conn in waiting:  # ... and all of them go on at once
            conn.sendall(b"go")
            conn.close()
        codes = [proc.wait(timeout=600) for proc in procs]
    done = [subprocess.CompletedProcess(command, code, log.read_text(), "") for code, log in zip(codes, logs)]
    assert codes == [0] * n, [d.stdout[-3000:] for d in done]
    return done


def assert_overlapped(copy: Copy, run_ids) -> None:
    """Every run started before any of them ended: they ran at the same time, not one after another."""
    records = copy.instance.get_run_records(filters=dg.RunsFilter(run_ids=list(run_ids)))
    assert len(records) == len(run_ids) > 1
    assert max(r.start_time for r in records) < min(r.end_time for r in records), \
        sorted((r.start_time, r.end_time, r.dagster_run.run_id) for r in records)


def in_process(copy: Copy, selection=("test_growth", "test_score", "benchmark")):
    from tempo_assets.checks import CHECKS
    from tempo_assets.definitions import ASSETS

    return dg.materialize(ASSETS + CHECKS, selection=list(selection), partition_key=copy.window,
                          instance=copy.instance, resources=copy.resources, raise_on_error=False)


def audit_passes(copy: Copy) -> tuple[int, str]:
    done = tempo(copy, "audit-cutoffs", "--archive", str(copy.archive))
    return done.returncode, done.stdout + done.stderr


def use_the_pool(copy: Copy) -> None:
    """The instance config `tempo init` writes: test_growth and test_score share a pool limited to 1."""
    from tempo_assets.cli.graph_cmd import DAGSTER_YAML
    from tempo_assets.definitions import defs

    assert {defs.resolve_assets_def(a).op.pool for a in TEST_ASSETS} == {"test_score"}
    (copy.home / "dagster.yaml").write_text(DAGSTER_YAML)
    done = tempo(copy, "init")  # creates the pool's limit row before any run claims a slot
    assert done.returncode == 0, done.stderr
    assert tempo_instance_limit(copy) == 1


def new_runs(copy: Copy, before: set[str]) -> dict:
    runs = {r.run_id: r for r in copy.instance.get_runs() if r.run_id not in before}
    failures = [e for run_id in runs for e in copy.instance.all_logs(run_id, of_type=dg.DagsterEventType.STEP_FAILURE)]
    assert failures == []
    assert all(r.status == dg.DagsterRunStatus.SUCCESS for r in runs.values())
    return runs


def refusal_reasons(copy: Copy, asset: str) -> dict[str, str]:
    """Run id -> why that run refused ``asset`` on the window."""
    return {r.run_id: r.asset_observation.metadata["tempo/test_refused"].value
            for r in copy.observations("tempo/test_refused", asset)}


@pytest.mark.parametrize("pool", [False, True], ids=["claims only", "with the test_score pool"])
def test_three_concurrent_launches_read_test_once(fresh, pool):
    if pool:
        use_the_pool(fresh)
    before = {r.run_id for r in fresh.instance.get_runs()}
    # claims only: released together at the claim, after each found nothing materialised yet; with the
    # pool (limit 1, taken before a step starts): released together once each run has started
    launch(fresh, "test_growth,test_score", "executor" if pool else "claim:test_growth")
    # exactly one materialisation of each, one TEST read (event, claim, and process on the TEST file)
    [growth], [scored] = fresh.records("test_growth"), fresh.records("test_score")
    [read] = fresh.observations("tempo/test_read")
    [score_claim] = fresh.observations("tempo/test_score_claim", "test_score")
    claims = fresh.claims()
    assert read.run_id == growth.run_id == scored.run_id == score_claim.run_id == claims.get(fresh.window).run_id
    assert claims.get(fresh.window, "test_score").run_id == scored.run_id
    assert read.storage_id < growth.storage_id < score_claim.storage_id < scored.storage_id
    assert len(fresh.readers("test")) == 1 and len(fresh.readers("growth")) == 1, fresh.probe_log.read_text()
    # the two others were refused at test_growth before reading TEST, said why, and succeeded
    refusals = refusal_reasons(fresh, "test_growth")
    assert len(refusals) == 2 and growth.run_id not in refusals
    assert refusal_reasons(fresh, "test_score") == {}  # skipped, never started: nothing upstream
    for reason in refusals.values():
        if pool:  # the pool may have let a later run start only after test_growth was stored
            assert f"already claimed by run {growth.run_id}" in reason or "already materialised" in reason, reason
        else:  # the three claimed at once: the claim alone decided
            assert f"already claimed by run {growth.run_id}" in reason, reason
    runs = new_runs(fresh, before)
    assert len(runs) == 3
    assert_overlapped(fresh, runs)
    assert {r.run_id for r in runs.values() if "tempo/test_refused" in r.tags} == set(refusals)
    for run_id in refusals:  # nothing of the window's TEST went past test_growth in the refused runs
        skipped = {e.step_key for e in fresh.instance.all_logs(run_id, of_type=dg.DagsterEventType.STEP_SKIPPED)}
        assert "test_score" in skipped, skipped
    assert fresh.ui_status("test_growth") == fresh.ui_status("test_score") == ({fresh.window}, set())
    entries = fresh.claims().log()
    assert [(e["asset"], e["run_id"]) for e in entries if e["event"] == "claimed"] == [
        ("test_growth", growth.run_id), ("test_score", growth.run_id)]
    if pool:
        # The pool's limit is 1, but it is not what guarantees one read: Dagster's SQLite storage
        # claims a slot by selecting a free row and then updating it by id, so two processes can
        # take the same slot at once (seen in CI: a later launch refused as "already claimed", not
        # "already materialised"). The claim decides either way; the pool only makes the common
        # case wait.
        assert tempo_instance_limit(fresh) == 1
    code, printed = audit_passes(fresh)
    assert code == 0, printed
    listing = tempo(fresh, "test-claim", "list")
    assert f"test_score[{fresh.window}] scored claimed by run {growth.run_id}" in listing.stdout, listing.stdout


def test_three_concurrent_test_score_launches_score_once(fresh):
    """test_growth stored, then `--select test_score` three times at once: one scoring, two refusals."""
    assert in_process(fresh, ["test_growth"]).success
    [growth] = fresh.records("test_growth")
    before = {r.run_id for r in fresh.instance.get_runs()}
    launch(fresh, "test_score", "claim:test_score")
    [scored] = fresh.records("test_score")
    assert fresh.records("test_growth") == [growth] and len(fresh.observations("tempo/test_read")) == 1
    [score_claim] = fresh.observations("tempo/test_score_claim", "test_score")
    assert score_claim.run_id == scored.run_id == fresh.claims().get(fresh.window, "test_score").run_id
    assert score_claim.storage_id < scored.storage_id
    # only the scoring run's process opened test_growth's value; no launch opened raw TEST
    assert len(fresh.readers("growth")) == 1 and fresh.readers("test") == {str(os.getpid())}, \
        fresh.probe_log.read_text()
    refusals = refusal_reasons(fresh, "test_score")
    assert len(refusals) == 2 and scored.run_id not in refusals
    for reason in refusals.values():  # the three claimed at once: the claim alone decided
        assert f"already claimed by run {scored.run_id}" in reason, reason
    runs = new_runs(fresh, before)
    assert len(runs) == 3 and {r for r, run in runs.items() if "tempo/test_refused" in run.tags} == set(refusals)
    assert_overlapped(fresh, runs)
    assert fresh.ui_status("test_score") == ({fresh.window}, set())
    code, printed = audit_passes(fresh)
    assert code == 0, printed


def test_audit_fails_naming_the_window_when_test_was_read_twice(fresh):
    """What three concurrent reads left behind before claims: three materialisations of each, three reads."""
    assert in_process(fresh, TEST_ASSETS).success
    assert fresh.readers("test") == {str(os.getpid())}  # the probe sees this process's one read
    for asset in TEST_ASSETS:
        [record] = fresh.records(asset)
        for _ in range(2):  # two more runs that each read TEST and materialised it
            fresh.instance.report_runless_asset_event(dg.AssetMaterialization(
                asset_key=asset, partition=fresh.window, metadata=record.asset_materialization.metadata))
    code, printed = audit_passes(fresh)
    assert code == 1, printed
    assert f"VIOLATION [test_once] test_growth[{fresh.window}] was materialised 3 times" in printed
    assert f"VIOLATION [test_once] test_score[{fresh.window}] was materialised 3 times" in printed
    assert f"TEST of window {fresh.window} was read by 3 runs" in printed


def test_unwritable_claim_store_refuses_to_read_test(fresh):
    claims = fresh.artefacts / "_test_claims"
    claims.write_text("the claim store is down")  # a file where the folder should be (root ignores chmod)
    result = in_process(fresh)
    assert not result.success
    [failure] = [e for e in result.all_events if e.is_step_failure]
    assert failure.step_key == "test_growth"
    error, causes = failure.step_failure_data.error, []
    while error is not None:
        causes.append(f"{error.cls_name}: {error.message}")
        error = error.cause
    assert any(c.startswith("ClaimUnavailable: ") and "refusing to read or score TEST unclaimed" in c
               for c in causes), causes
    assert fresh.records("test_growth") == fresh.records("test_score") == []
    assert fresh.observations("tempo/test_read") == []
    assert fresh.readers("test") == set() and not (fresh.artefacts / "test_growth" / fresh.window).exists()
    assert fresh.ui_status("test_growth") == (set(), {fresh.window})  # a fault, unread: the UI says failed


def test_a_dead_claim_is_released_burned_and_never_rescored(fresh):
    from tempo_assets.cli.graph_cmd import run_steps

    fresh.claims().claim(fresh.window, "run-that-died")  # a run that claimed, read TEST and died
    result = in_process(fresh)
    assert result.success  # refused: no output, test_score, benchmark and the checks skipped, the run not failed
    skipped = {e.step_key for e in result.all_events if e.event_type_value == "STEP_SKIPPED"}
    assert {"test_score", "benchmark"} <= skipped, skipped
    assert result.get_asset_check_evaluations() == []  # the checks did not run on nothing
    assert fresh.records("test_growth") == fresh.records("test_score") == []
    assert not (fresh.artefacts / "benchmark" / fresh.window).exists() and fresh.readers("test") == set()
    assert fresh.ui_status("test_growth") == fresh.ui_status("test_score") == (set(), set())  # neither read nor failed
    [reason] = refusal_reasons(fresh, "test_growth").values()
    assert "already claimed by run run-that-died" in reason
    listing = tempo(fresh, "test-claim", "list", "--json")
    [row] = json.loads(listing.stdout)
    assert (row["state"], row["claim"]["run_id"], row["run_status"]) == ("claimed", "run-that-died", "unknown")

    no_reason = tempo(fresh, "test-claim", "release", fresh.window)
    assert no_reason.returncode == 2 and "--reason" in no_reason.stderr
    done = tempo(fresh, "test-claim", "release", fresh.window, "--reason", "worker OOM-killed after the claim")
    assert done.returncode == 0, done.stderr
    assert "burned: TEST read, not reported" in done.stdout
    listing = tempo(fresh, "test-claim", "list")
    assert f"test_score[{fresh.window}] burned TEST read, not reported" in listing.stdout
    assert "worker OOM-killed after the claim" in listing.stdout
    for asset in TEST_ASSETS:  # the burn is recorded on both assets in the instance
        burned = fresh.observations("tempo/test_claim", asset)
        assert [r.asset_observation.metadata["tempo/test_claim"].value for r in burned] == ["burned"]
    again = tempo(fresh, "test-claim", "release", fresh.window, "--reason", "twice")
    assert again.returncode == 2 and "is burned, not claimed" in again.stderr

    lines = []
    report = run_steps([("window_job", fresh.window)], fresh.instance, fresh.resources, echo=lines.append)
    # tempo materialize does not launch a run on a burned window (tempo status says claimed) ...
    assert [r[2] for r in report] == ["burned"], lines
    assert any(f"test_score[{fresh.window}] is claimed (TEST read, not reported" in line for line in lines), lines
    # ... and a run launched anyway (the UI, the dagster CLI) is refused before reading TEST
    assert in_process(fresh).success
    assert fresh.records("test_growth") == fresh.records("test_score") == [] and fresh.readers("test") == set()
    events = [(e["event"], e.get("state")) for e in fresh.claims().log()]
    assert events == [("claimed", None), ("refused", "claimed"), ("released", "burned"), ("refused", "burned")]
    code, printed = audit_passes(fresh)
    assert code == 0, printed
