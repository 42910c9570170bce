"""The tiny archive's window under dagster-celery: two workers that share only PostgreSQL and S3.

The module's cluster: the session's servers (``dev_services``: PostgreSQL, moto's S3 server,
redis), a fresh Dagster database and warehouse database on that PostgreSQL, a fresh prefix of the
bucket, and two celery workers started by ``scripts/dev_services.sh workers 2`` (each in its own
folder with its own ``DAGSTER_HOME``, tmp dir and cache; stopped by their pids at the end).

``tempo materialize --window`` with ``TEMPO_EXECUTOR=celery`` on a copy of the tiny archive
(conftest ``tiny_build``: four releases, one window) must build its releases, cutoffs and window
on both workers and give the window's artefacts from its evaluation sets to its benchmark byte
for byte as the in-process tiny build (same run config: ``tiny_benchmark_config``'s bootstrap
size), the evaluation sets scoring read written to the PostgreSQL warehouse for both roles and the
benchmark's HTML report a local file beside the S3 artefact (the checks of test_production_graph.py,
which built the same window on these storages with the in-process executor, before this test held
them); then a worker is killed (``kill -9``) in the middle of a step that blocks until it is
(``celery_fault_defs``), which fails the run visibly and leaves the stored artefact as it was.
The workers and the launcher draw no report figure (``unrendered.undrawn_launch_env``: the artefacts
are the same bytes; the figures are tested in ``core/test_report.py`` and on the tiny build).
"""
from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest
import yaml

from tempo_assets_tests.conftest import GRID_BOOTSTRAP_SAMPLES, tiny_benchmark_config
from tempo_assets_tests.services import SCRIPT, postgres_database
from tempo_assets_tests.toolkit import tempo
from tempo_assets_tests.unrendered import undrawn_launch_env

pytestmark = [pytest.mark.production, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[1]
DAGSTER_YAML = REPO / "docs" / "deploy" / "dagster.yaml"
# the window's artefacts from its evaluation sets to its benchmark
COMPARED = ("valid_evaluation_set", "valid_selection", "frozen_recipe", "test_growth", "test_score", "benchmark")


def tiny_run_config() -> dict:
    """The run config of the tiny build's resources (conftest ``materialise_archive``/``graph_from``):
    its grid's bootstrap resamples, the tiny benchmark's in ``benchmark_config``."""
    grid = {"bootstrap_samples": GRID_BOOTSTRAP_SAMPLES}
    benchmark = {"bootstrap_samples": tiny_benchmark_config().bootstrap_samples}
    return {"resources": {"grid": {"config": grid}, "benchmark_config": {"config": benchmark}}}


def _services(state: Path, env: dict, *words: str, timeout: float = 300) -> subprocess.CompletedProcess:
    done = subprocess.run(["bash", str(SCRIPT), *words], env={**env, "TEMPO_SERVICES_DIR": str(state),
                                                             "TEMPO_SERVICES_PYTHON": sys.executable},
                          capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, done.stderr
    return done


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, tiny_build, dev_services, services_state):
    """The environment of a launcher that shares PostgreSQL and S3 with two running workers."""
    from sqlalchemy.engine import make_url

    root = tmp_path_factory.mktemp("celery")
    archive = root / "archive"
    shutil.copytree(tiny_build / "scored" / "archive", archive)
    home = root / "launcher_home"
    home.mkdir()
    shutil.copy(DAGSTER_YAML, home / "dagster.yaml")
    run_config = root / "run_config.yaml"
    run_config.write_text(yaml.safe_dump(tiny_run_config()), encoding="utf-8")
    with contextlib.ExitStack() as stack:
        dagster_db = stack.enter_context(postgres_database(dev_services))
        warehouse = stack.enter_context(postgres_database(dev_services))
        env = {k: v for k, v in os.environ.items() if not k.startswith(("TEMPO_", "AWS_")) and k != "PYTHONPATH"}
        env.update(dev_services)
        env.update(DAGSTER_HOME=str(home), TEMPO_ARCHIVE=str(archive),
                   TEMPO_PG_DB=make_url(dagster_db).database, TEMPO_WAREHOUSE_URL=warehouse,
                   TEMPO_ARTEFACTS=f"{dev_services['TEMPO_ARTEFACTS']}/celery-{uuid.uuid4().hex[:12]}",
                   TEMPO_EXECUTOR="celery", TEMPO_RUN_CONFIG=str(run_config),
                   # a progress line from every loop of a step (the tiny window's are short), read by
                   # the launcher every 0.5 s, while later steps of the same run still keep it going
                   TEMPO_PROGRESS_SECONDS="0.05", TEMPO_PROGRESS_POLL="0.5")
        env = undrawn_launch_env(env, root / "undrawn")  # the repository on PYTHONPATH, after the stubs
        _services(services_state, env, "workers", "2")
        try:
            yield {"env": env, "root": root, "home": home, "state": services_state}
        finally:
            _services(services_state, env, "stop-workers")


def _tempo(env: dict, *args: str, timeout: float = 1800) -> subprocess.CompletedProcess:
    return tempo(*args, env=env, timeout=timeout)


def _instance(env: dict, monkeypatch):
    import dagster as dg
    from dagster._core.instance.ref import InstanceRef

    for name in ("TEMPO_PG_HOST", "TEMPO_PG_PORT", "TEMPO_PG_USER", "TEMPO_PG_PASSWORD", "TEMPO_PG_DB"):
        monkeypatch.setenv(name, env[name])
    return dg.DagsterInstance.from_ref(InstanceRef.from_dir(env["DAGSTER_HOME"]))


def _s3_store(env: dict, monkeypatch):
    from tempo_assets.core.storage.artefacts import ArtefactStore

    for name in ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_DEFAULT_REGION"):
        monkeypatch.setenv(name, env[name])
    return ArtefactStore(env["TEMPO_ARTEFACTS"])


def _steps_by_worker(instance, run_ids) -> dict[str, set[str]]:
    """``{celery worker name: step keys}`` from the engine event each worker logs per step."""
    import dagster as dg

    found: dict[str, set[str]] = {}
    for run_id in run_ids:
        for entry in instance.all_logs(run_id, of_type=dg.DagsterEventType.ENGINE_EVENT):
            metadata = entry.dagster_event.event_specific_data.metadata or {}
            if "Celery worker" in metadata:
                found.setdefault(str(metadata["Celery worker"].value), set()).add(entry.step_key)
    return found


def test_a_window_on_two_celery_workers_is_byte_identical_to_the_in_process_run(
        cluster, tiny_build, monkeypatch):
    import boto3
    from sqlalchemy import create_engine, text

    from tempo_assets.core.inputs.releases import open_archive
    from tempo_assets.core.storage.artefacts import ArtefactStore
    from tempo_assets.partitions import plan_partitions
    from tempo_assets_tests.test_production_instance import _stored_text_containing

    env = cluster["env"]
    [window] = plan_partitions(open_archive(Path(env["TEMPO_ARCHIVE"]))).windows
    started = time.perf_counter()
    done = _tempo(env, "materialize", "--window", window)
    seconds = time.perf_counter() - started
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    lines = done.stdout.splitlines()
    print(f"tempo materialize --window {window} on celery: {seconds:.0f} s")  # the measured time
    assert lines[0].startswith("celery: 2 worker(s) on the broker: tempo-w1@"), lines[0]
    # a running step's newest progress line: "[n/7] <job> <key>: <step>: progress <what>: d/t ..."
    progress = [line for line in lines if re.search(r"^\[\d+/\d+\] \w+ \S+: \w+: progress .+: \d+(/\d+)? .*elapsed \d+s", line)]
    print("\n".join(progress[:5]))
    print("\n".join(line for line in lines if ": ok in " in line))  # each run's time
    assert progress, "no progress line printed"
    runs = [line.rsplit("(run ", 1)[1].rstrip(")") for line in lines if ": ok in " in line]
    assert len(runs) == sum(": started on the celery workers" in line for line in lines) >= 3

    instance = _instance(env, monkeypatch)
    try:
        workers = _steps_by_worker(instance, runs)
        step_pids = {entry.dagster_event.pid for run_id in runs for entry in instance.all_logs(run_id)
                     if entry.dagster_event is not None and entry.dagster_event.event_type_value == "STEP_START"}
    finally:
        instance.dispose()
    # steps ran in both workers, in processes other than the launcher
    print({worker: len(steps) for worker, steps in workers.items()}, "steps per worker")
    assert sorted(workers) == [f"tempo-w1@{os.uname().nodename}", f"tempo-w2@{os.uname().nodename}"], workers
    assert all(workers.values()) and len(step_pids) >= 2 and os.getpid() not in step_pids

    # the events are rows of the Dagster database on PostgreSQL
    from sqlalchemy.engine import make_url

    url = make_url(env["TEMPO_WAREHOUSE_URL"]).set(database=env["TEMPO_PG_DB"])
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            rows = conn.execute(text("select count(*) from event_logs where run_id = any(:r)"),
                                {"r": runs}).scalar_one()
            statuses = set(conn.execute(text("select status from runs where run_id = any(:r)"),
                                        {"r": runs}).scalars())
        assert rows > 100 and statuses == {"SUCCESS"}, (rows, statuses)
        # no credential in any stored row
        for secret in (env["TEMPO_PG_PASSWORD"], env["AWS_SECRET_ACCESS_KEY"]):
            assert _stored_text_containing(engine, secret) == []
    finally:
        engine.dispose()

    # the artefacts are objects in the bucket, none in the launcher's folder
    store = _s3_store(env, monkeypatch)
    bucket, prefix = env["TEMPO_ARTEFACTS"][len("s3://"):].split("/", 1)
    client = boto3.client("s3", endpoint_url=env["AWS_ENDPOINT_URL"])
    keys = {o["Key"] for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
            for o in page.get("Contents", [])}
    for asset in COMPARED:
        assert f"{prefix}/{asset}/{window}/artefact.json" in keys, asset
    assert f"{prefix}/_test_claims/{window}.test_score.claim.json" in keys
    assert not (cluster["home"] / "artefacts").exists()
    # the benchmark's HTML report, an extra beside the S3 artefact, is a local file of the worker that built it
    reports = list(Path(cluster["state"], "workers").glob(f"w*/dagster_home/artefacts/benchmark/{window}/report.html"))
    assert len(reports) == 1, reports
    # the evaluation sets scoring read were written to the PostgreSQL warehouse, for both roles
    engine = create_engine(env["TEMPO_WAREHOUSE_URL"])
    try:
        with engine.connect() as conn:
            roles = dict(conn.execute(text("select window_role, count(*) from evaluation_sets "
                                           "group by window_role")).all())
    finally:
        engine.dispose()
    assert set(roles) == {"valid", "test"} and min(roles.values()) > 0, roles
    # byte-identical to the in-process run: the value files' sha256 (read back verified)
    local = ArtefactStore(tiny_build / "scored" / "artefacts")  # read only: the build is never written
    for asset in COMPARED:
        assert store.read_meta(asset, window)["sha256"] == local.read_meta(asset, window)["sha256"], asset
    assert store.open("test_score", window).value is not None

    audit = _tempo(env, "audit-cutoffs", timeout=900)
    assert audit.returncode == 0, audit.stdout[-3000:] + audit.stderr[-3000:]
    for output in (done.stdout + done.stderr, audit.stdout + audit.stderr,
                   *(p.read_text() for p in Path(cluster["state"], "workers").glob("w*/worker.log"))):
        assert env["TEMPO_PG_PASSWORD"] not in output and env["AWS_SECRET_ACCESS_KEY"] not in output


def _blocking_step_pid(instance, first_run_id: str, timeout: float = 180) -> int | None:
    """The pid of the worker process running the second ``fault_job`` run's step once the step has logged
    that it blocks (it is then inside the asset's body, mid-step); None when that never happens."""
    import dagster as dg

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        time.sleep(0.2)
        runs = instance.get_runs(filters=dg.RunsFilter(job_name="fault_job"), limit=1)
        if not runs or runs[0].run_id == first_run_id:
            continue
        logs = instance.all_logs(runs[0].run_id)
        starts = [e.dagster_event.pid for e in logs if e.dagster_event is not None
                  and e.dagster_event.event_type_value == "STEP_START"]
        if starts and any("blocking until the worker is killed" in (e.user_message or "") for e in logs):
            return starts[0]
    return None


def test_a_worker_killed_mid_step_fails_the_run_visibly_and_keeps_the_artefact(cluster, monkeypatch):
    import dagster as dg
    from dagster._core.definitions.reconstruct import ReconstructableRepository

    env = cluster["env"]
    for name in ("TEMPO_EXECUTOR", "TEMPO_BROKER_URL", "TEMPO_ARTEFACTS", "TEMPO_ARCHIVE"):
        monkeypatch.setenv(name, env[name])
    store = _s3_store(env, monkeypatch)
    instance = _instance(env, monkeypatch)
    job = ReconstructableRepository.for_module(
        "tempo_assets_tests.celery_fault_defs", "defs", working_directory=str(REPO)).get_reconstructable_job("fault_job")

    def run(label: str, block: bool):
        return dg.execute_job(job, instance, raise_on_error=False,
                              run_config={"ops": {"fault_value": {"config": {"label": label, "block": block}}}})

    try:
        first = run("first", False)
        assert first.success
        before = store.read_meta("fault_value", None)
        outcome = {}
        launcher = threading.Thread(target=lambda: outcome.setdefault("result", run("second", True)))
        launcher.start()
        pid = _blocking_step_pid(instance, first.run_id)
        assert pid is not None, "the blocking step never started"
        os.kill(pid, signal.SIGKILL)  # the worker process executing the step, inside fault_value's body
        launcher.join(180)
        assert not launcher.is_alive(), "the run did not end after its worker was killed"
        result = outcome["result"]
        assert not result.success
        record = instance.get_run_by_id(result.run_id)
        assert record.status == dg.DagsterRunStatus.FAILURE
        failures = [e for e in instance.all_logs(result.run_id)
                    if e.dagster_event is not None and e.dagster_event.is_failure]
        text = " ".join(str(e.dagster_event.event_specific_data) for e in failures)
        assert "WorkerLostError" in text or "SIGKILL" in text, text[:2000]
        # the pointer still names the first version, whose value reads back verified
        after = store.read_meta("fault_value", None)
        assert (after["version"], after["sha256"], after["run_id"]) == (
            before["version"], before["sha256"], first.run_id)
        assert list(store.open("fault_value", None).value["label"]) == ["first"] * 3
        # the worker replaced its pool process: the cluster still runs steps
        assert run("third", False).success
        assert list(store.open("fault_value", None).value["label"]) == ["third"] * 3
    finally:
        instance.dispose()
