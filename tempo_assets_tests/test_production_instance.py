"""The production instance: docs/deploy/dagster.yaml on a real PostgreSQL server.

A run's events become rows of Postgres tables; the queued run coordinator and the
``test_score`` pool come from the file and from ``scripts/dev_services.sh``; a storage
endpoint that is down or refuses the credentials fails ``tempo`` at start with a message naming
the endpoint, never the password. The servers are the session's (``dev_services``).
"""

import os
import shutil
import socket
from pathlib import Path

import dagster as dg
import pytest

from tempo_assets.definitions import build_resources
from tempo_assets.resources import WarehouseResource
from tempo_assets_tests.toolkit import tempo

pytestmark = pytest.mark.production

REPO = Path(__file__).resolve().parents[1]
DAGSTER_YAML = REPO / "docs" / "deploy" / "dagster.yaml"
PG_VARIABLES = ("TEMPO_PG_HOST", "TEMPO_PG_PORT", "TEMPO_PG_USER", "TEMPO_PG_PASSWORD",
                "TEMPO_PG_DB")


def _home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    shutil.copy(DAGSTER_YAML, home / "dagster.yaml")
    return home


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture
def pg_env(dev_services, monkeypatch):
    for name in (*PG_VARIABLES, "TEMPO_WAREHOUSE_URL"):
        monkeypatch.setenv(name, dev_services[name])
    return {name: dev_services[name] for name in PG_VARIABLES}


def test_run_events_are_rows_in_postgres(tmp_path, pg_env, dev_services):
    from dagster._core.instance.ref import InstanceRef
    from dagster_postgres import (
        PostgresEventLogStorage,
        PostgresRunStorage,
        PostgresScheduleStorage,
    )
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url

    @dg.asset(pool="test_score")
    def tiny_score(context: dg.AssetExecutionContext, warehouse: WarehouseResource) -> int:
        with warehouse.warehouse() as opened:
            context.add_output_metadata({"warehouse": opened.safe_url,
                                         "relations": len(opened.models())})
        return 7

    instance = dg.DagsterInstance.from_ref(InstanceRef.from_dir(str(_home(tmp_path))))
    try:
        assert isinstance(instance.run_storage, PostgresRunStorage)
        assert isinstance(instance.event_log_storage, PostgresEventLogStorage)
        assert isinstance(instance.schedule_storage, PostgresScheduleStorage)
        assert type(instance.run_coordinator).__name__ == "QueuedRunCoordinator"
        concurrency = instance.get_concurrency_config()
        assert concurrency.run_queue_config.max_concurrent_runs == 2
        assert concurrency.pool_config.default_pool_limit == 1
        # the pool limit dev_services.sh set lives in the instance's Postgres storage
        assert instance.event_log_storage.get_concurrency_info("test_score").slot_count == 1
        result = dg.materialize([tiny_score], instance=instance,
                                resources={"warehouse": build_resources()["warehouse"]})
        assert result.success
        run_id = result.run_id
    finally:
        instance.dispose()

    url = make_url(dev_services["TEMPO_WAREHOUSE_URL"]).set(database=pg_env["TEMPO_PG_DB"])
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            status = conn.execute(text("select status from runs where run_id = :r"),
                                  {"r": run_id}).scalar_one()
            kinds = set(conn.execute(text("select distinct dagster_event_type from event_logs "
                                          "where run_id = :r"), {"r": run_id}).scalars())
            stored = conn.execute(text("select count(*) from event_logs where run_id = :r "
                                       "and asset_key like :key"),
                                  {"r": run_id, "key": "%tiny_score%"}).scalar_one()
    finally:
        engine.dispose()
    assert status == "SUCCESS"
    # run-level events keep Dagster's legacy names in this column
    assert {"PIPELINE_START", "STEP_START", "STEP_SUCCESS", "ASSET_MATERIALIZATION",
            "PIPELINE_SUCCESS"} <= kinds, kinds
    assert stored >= 1
    # the warehouse came from $TEMPO_WAREHOUSE_URL in the step: its password is in no stored
    # row (run config, job snapshot, event metadata), only the masked URL
    password = pg_env["TEMPO_PG_PASSWORD"]
    try:
        assert _stored_text_containing(engine, password) == []
        assert _stored_text_containing(engine, "tempo:***@127.0.0.1")
    finally:
        engine.dispose()


def _stored_text_containing(engine, needle: str) -> list[str]:
    """``table`` for every row of Dagster's storage whose text or zlib body contains ``needle``."""
    import zlib

    from sqlalchemy import text

    found = []
    with engine.connect() as conn:
        tables = conn.execute(text("select tablename from pg_tables "
                                   "where schemaname = 'public'")).scalars().all()
        for table in tables:
            for row in conn.execute(text(f'select * from "{table}"')):
                for value in row:
                    if isinstance(value, (bytes, memoryview)):
                        value = bytes(value)
                        try:
                            value = zlib.decompress(value)
                        except zlib.error:
                            pass
                        value = value.decode("utf-8", "replace")
                    if needle in str(value):
                        found.append(table)
                        break
    return found


@pytest.mark.parametrize("fault", ["down", "wrong_password"])
def test_tempo_fails_at_start_naming_the_endpoint_not_the_password(tmp_path, pg_env, fault):
    env = {**os.environ, **pg_env, "DAGSTER_HOME": str(_home(tmp_path)),
           "TEMPO_ARCHIVE": str(REPO / "data"), "TEMPO_ARTEFACTS": str(tmp_path / "artefacts"),
           "PYTHONPATH": str(REPO)}
    port = pg_env["TEMPO_PG_PORT"]
    if fault == "down":
        port = env["TEMPO_PG_PORT"] = str(_free_port())
        reason = "Connection refused"
    else:
        env["TEMPO_PG_PASSWORD"] = "wrong-" + pg_env["TEMPO_PG_PASSWORD"][:6]
        reason = 'password authentication failed for user "tempo"'
    done = tempo("init", env=env, timeout=300)
    assert done.returncode == 2, done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("tempo: error: cannot reach Dagster's instance storage"), last
    assert f'"127.0.0.1", port {port}' in last and reason in last
    assert "Traceback" not in done.stderr
    for secret in (pg_env["TEMPO_PG_PASSWORD"], env["TEMPO_PG_PASSWORD"]):
        assert secret not in done.stdout + done.stderr
    # nothing was written before the failure
    assert not (tmp_path / "artefacts").exists()
