"""TEST is read once, whatever launches it: the window claim under concurrent CLI launches.

A tiny archive is materialised once up to ``frozen_recipe`` (``test_score`` never ran); each test
works on a copy of its instance and artefact store. A ``sitecustomize`` probe on the copy's TEST
ground truth (the ``release_annotations[t1]`` value file) records every process that opens it,
so "refused before reading TEST" is observed, not inferred.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import dagster as dg
import pytest

from tempo_assets.cli import main as cli_main
from tempo_assets.core.test_claims import ClaimStore
from tempo_assets_tests.assets.tiny_archive import build_tiny_archive
from tempo_assets_tests.conftest import REPO, WAREHOUSE_ASSETS, materialise_archive

pytestmark = pytest.mark.slow

PROBE = '''import builtins, os
_prefix, _log = os.environ.get("TEMPO_PROBE_PREFIX"), os.environ.get("TEMPO_PROBE_LOG")
if _prefix and _log:
    _open = builtins.open
    def _probing_open(file, *args, **kwargs):
        if isinstance(file, (str, os.PathLike)) and os.fspath(file).startswith(_prefix):
            with _open(_log, "a") as handle:
                handle.write(f"{os.getpid()} {os.fspath(file)}\\n")
        return _open(file, *args, **kwargs)
    builtins.open = _probing_open
'''


@pytest.fixture(scope="module")
def unscored(tmp_path_factory):
    """A tiny archive materialised through frozen_recipe of its window; test_score never ran."""
    from tempo_assets.partitions import plan_partitions
    from tempo_assets.resources import open_archive

    root = tmp_path_factory.mktemp("unscored")
    archive = build_tiny_archive(root, n_releases=4)
    [window] = plan_partitions(open_archive(archive)).windows
    graph = materialise_archive(root, archive, exclude=WAREHOUSE_ASSETS + ("test_score", "benchmark"),
                                target="window", key=window)
    assert graph.report and all(r[2] == "ok" for r in graph.report), graph.report
    assert graph.store().exists("frozen_recipe", window) and not graph.store().exists("test_score", window)
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

    def records(self, kind: str = "materializations") -> list:
        fetch = getattr(self.instance, f"fetch_{kind}")
        return fetch(dg.AssetRecordsFilter(asset_key=dg.AssetKey("test_score"), asset_partitions=[self.window]),
                     limit=100).records

    def observations(self, key: str) -> list:
        return [r for r in self.records("observations") if key in r.asset_observation.metadata]

    def ui_status(self) -> tuple[set[str], set[str]]:
        """The partitions the UI shows as materialised and as failed for test_score."""
        from dagster._core.storage.partition_status_cache import get_and_update_asset_status_cache_value

        from tempo_assets.partitions import WINDOWS

        value = get_and_update_asset_status_cache_value(self.instance, dg.AssetKey("test_score"), WINDOWS)
        if value is None:
            return set(), set()
        return (set(value.deserialize_materialized_partition_subsets(WINDOWS).get_partition_keys()),
                set(value.deserialize_failed_partition_subsets(WINDOWS).get_partition_keys()))

    def test_readers(self) -> set[str]:
        """Pids that opened the window's TEST ground truth."""
        if not self.probe_log.exists():
            return set()
        return {line.split()[0] for line in self.probe_log.read_text().splitlines()}


@pytest.fixture()
def fresh(unscored, tmp_path):
    from dagster._core.instance.ref import InstanceRef

    from tempo_assets.definitions import build_resources
    from tempo_assets.resources import GridResource

    graph, window = unscored
    home, artefacts = tmp_path / "home", tmp_path / "artefacts"
    shutil.copytree(graph.home, home)
    shutil.copytree(graph.artefacts, artefacts)
    probe = tmp_path / "probe"
    probe.mkdir()
    (probe / "sitecustomize.py").write_text(PROBE)
    t1 = window.split("__")[3]
    env = dict(os.environ)
    env.update(graph.env, DAGSTER_HOME=str(home), TEMPO_ARTEFACTS=str(artefacts),
               PYTHONPATH=f"{probe}:{REPO}", TEMPO_PROBE_PREFIX=str(artefacts / "release_annotations" / t1 / "value"),
               TEMPO_PROBE_LOG=str(tmp_path / "probe.log"))
    instance = dg.DagsterInstance.from_ref(InstanceRef.from_dir(str(home)))
    resources = build_resources(str(graph.archive), str(artefacts), graph.env["TEMPO_WAREHOUSE_URL"],
                                graph.env["TEMPO_CACHE"], grid=GridResource(bootstrap_samples=20))
    yield Copy(home, artefacts, graph.archive, window, env, instance, resources, tmp_path / "probe.log")
    instance.dispose()


def tempo(copy: Copy, *args: str, timeout: int = 300) -> subprocess.CompletedProcess:
    return subprocess.run([str(Path(sys.executable).with_name("tempo")), *args], cwd=REPO, env=copy.env,
                          capture_output=True, text=True, timeout=timeout)


def tempo_instance_limit(copy: Copy):
    """The ``test_score`` pool's slot limit in the copy's instance, read as its own process would."""
    from dagster._core.instance.ref import InstanceRef

    with dg.DagsterInstance.from_ref(InstanceRef.from_dir(str(copy.home))) as instance:
        info = instance.event_log_storage.get_concurrency_info("test_score")
        return info.slot_count


def launch_test_scores(copy: Copy, n: int) -> list[subprocess.CompletedProcess]:
    dagster = str(Path(sys.executable).with_name("dagster"))
    command = [dagster, "asset", "materialize", "--select", "test_score", "--partition", copy.window,
               "-m", "tempo_assets.definitions"]
    procs = [subprocess.Popen(command, cwd=REPO, env=copy.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True) for _ in range(n)]
    done = []
    for proc in procs:
        out, _ = proc.communicate(timeout=600)
        done.append(subprocess.CompletedProcess(command, proc.returncode, out, ""))
    return done


def in_process(copy: Copy, selection=("test_score", "benchmark")):
    from tempo_assets.checks import CHECKS
    from tempo_assets.definitions import ASSETS

    return dg.materialize(ASSETS + CHECKS, selection=list(selection), partition_key=copy.window,
                          instance=copy.instance, resources=copy.resources, raise_on_error=False)


def audit_passes(copy: Copy) -> tuple[int, str]:
    done = tempo(copy, "audit-cutoffs", "--archive", str(copy.archive))
    return done.returncode, done.stdout + done.stderr


@pytest.mark.parametrize("pool", [False, True], ids=["claims only", "with the test_score pool"])
def test_three_concurrent_cli_launches_score_once(fresh, pool):
    if pool:  # the instance config `tempo init` writes: test_score's pool limited to 1
        from tempo_assets.cli.graph_cmd import DAGSTER_YAML
        from tempo_assets.definitions import defs

        assert defs.resolve_assets_def("test_score").op.pool == "test_score"
        (fresh.home / "dagster.yaml").write_text(DAGSTER_YAML)
        done = tempo(fresh, "init")  # creates the pool's limit row before any run claims a slot
        assert done.returncode == 0, done.stderr
        limits = tempo_instance_limit(fresh)
        assert limits == 1, limits
    before = {r.run_id for r in fresh.instance.get_runs()}
    launches = launch_test_scores(fresh, 3)
    assert [d.returncode for d in launches] == [0, 0, 0], [d.stdout[-3000:] for d in launches]
    # exactly one materialisation, one TEST read (event, claim, and process on the TEST file)
    [scored] = fresh.records()
    [read] = fresh.observations("tempo/test_read")
    claim = fresh.claims().get(fresh.window)
    assert read.run_id == scored.run_id == claim.run_id
    assert read.storage_id < scored.storage_id
    assert len(fresh.test_readers()) == 1, fresh.probe_log.read_text()
    # the two others were refused before reading TEST, said why, and succeeded
    refusals = fresh.observations("tempo/test_score_refused")
    assert len(refusals) == 2 and scored.run_id not in {r.run_id for r in refusals}
    for refusal in refusals:
        reason = refusal.asset_observation.metadata["tempo/test_score_refused"].value
        assert "already claimed by run " + claim.run_id in reason or "already scored" in reason, reason
        print("refused:", reason[:60])
    runs = {r.run_id: r for r in fresh.instance.get_runs() if r.run_id not in before}
    assert len(runs) == 3 and all(r.status == dg.DagsterRunStatus.SUCCESS for r in runs.values())
    assert {r.run_id for r in runs.values() if "tempo/test_score_refused" in r.tags} == {r.run_id for r in refusals}
    failures = [e for run_id in runs for e in fresh.instance.all_logs(run_id, of_type=dg.DagsterEventType.STEP_FAILURE)]
    assert failures == []
    assert fresh.ui_status() == ({fresh.window}, set())  # shown scored, not failed
    entries = fresh.claims().log()
    assert [e["run_id"] for e in entries if e["event"] == "claimed"] == [claim.run_id]
    if pool:  # serialised on one slot: the later two only reached the step after the score was stored
        assert tempo_instance_limit(fresh) == 1
        assert all("already scored" in r.asset_observation.metadata["tempo/test_score_refused"].value
                   for r in refusals)
    code, printed = audit_passes(fresh)
    assert code == 0, printed
    listing = tempo(fresh, "test-claim", "list")
    assert f"test_score[{fresh.window}] scored claimed by run {claim.run_id}" in listing.stdout, listing.stdout


def test_audit_fails_naming_the_window_when_test_was_read_twice(fresh):
    """What three concurrent reads left behind before claims: three materialisations, three reads."""
    in_process(fresh, ["test_score"])
    [scored] = fresh.records()
    for _ in range(2):  # two more runs that each read TEST and materialised it
        fresh.instance.report_runless_asset_event(dg.AssetMaterialization(
            asset_key="test_score", partition=fresh.window, metadata=scored.asset_materialization.metadata))
    code, printed = audit_passes(fresh)
    assert code == 1, printed
    assert f"VIOLATION [test_once] test_score[{fresh.window}] was materialised 3 times" in printed
    assert f"TEST of window {fresh.window} was read by 3 runs" in printed


def test_unwritable_claim_store_refuses_to_score(fresh):
    claims = fresh.artefacts / "_test_claims"
    claims.write_text("the claim store is down")  # a file where the folder should be (root ignores chmod)
    result = in_process(fresh)
    assert not result.success
    [failure] = [e for e in result.all_events if e.is_step_failure]
    assert failure.step_key == "test_score"
    error, causes = failure.step_failure_data.error, []
    while error is not None:
        causes.append(f"{error.cls_name}: {error.message}")
        error = error.cause
    assert any(c.startswith("ClaimUnavailable: ") and "refusing to score TEST unclaimed" in c for c in causes), causes
    assert fresh.records() == [] and fresh.observations("tempo/test_read") == []
    assert fresh.test_readers() == set() and not (fresh.artefacts / "test_score" / fresh.window).exists()
    assert fresh.ui_status() == (set(), {fresh.window})  # a fault, unscored: the UI says failed


def test_a_dead_claim_is_released_burned_and_never_rescored(fresh):
    from tempo_assets.cli.graph_cmd import run_steps

    fresh.claims().claim(fresh.window, "run-that-died")  # a run that claimed, read TEST and died
    result = in_process(fresh)
    assert result.success  # refused: no output, benchmark and the checks skipped, the run not failed
    skipped = {e.step_key for e in result.all_events if e.event_type_value == "STEP_SKIPPED"}
    assert "benchmark" in skipped and any(key.startswith("test_score_test_score__") for key in skipped), skipped
    assert result.get_asset_check_evaluations() == []  # the checks did not run on nothing
    assert fresh.records() == [] and not (fresh.artefacts / "benchmark" / fresh.window).exists()
    assert fresh.ui_status() == (set(), set())  # refused: neither scored nor failed
    [refused] = fresh.observations("tempo/test_score_refused")
    assert "already claimed by run run-that-died" in refused.asset_observation.metadata["tempo/test_score_refused"].value
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
    burned = fresh.observations("tempo/test_claim")
    assert [r.asset_observation.metadata["tempo/test_claim"].value for r in burned] == ["burned"]
    again = tempo(fresh, "test-claim", "release", fresh.window, "--reason", "twice")
    assert again.returncode == 2 and "is burned, not claimed" in again.stderr

    lines = []
    report = run_steps([("window_job", fresh.window)], fresh.instance, fresh.resources, echo=lines.append,
                       exclude=WAREHOUSE_ASSETS)
    assert [r[2] for r in report] == ["refused"]
    assert any("test_score not scored, TEST not read" in line and "is burned" in line for line in lines), lines
    assert fresh.records() == [] and fresh.test_readers() == set()
    events = [(e["event"], e.get("state")) for e in fresh.claims().log()]
    assert events == [("claimed", None), ("refused", "claimed"), ("released", "burned"), ("refused", "burned")]
    code, printed = audit_passes(fresh)
    assert code == 0, printed
