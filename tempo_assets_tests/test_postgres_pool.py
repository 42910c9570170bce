"""``postgres_pool``: a run on the PostgreSQL instance of docs/deploy/dagster.yaml opens a few
connections, where dagster-postgres's own per-query engines open one per stored event and read.

The same three-asset run is materialised twice on a fresh database of the session's server
(``dev_services``), once with ``TEMPO_PG_POOL=0`` (Dagster's engines) and once pooled; every new
DBAPI connection to that database is counted in this process (SQLAlchemy's ``connect`` event).
"""
import shutil
from pathlib import Path

import dagster as dg
import pytest

from tempo_assets.postgres_pool import pool_connections
from tempo_assets_tests.services import postgres_database

pytestmark = pytest.mark.production

DAGSTER_YAML = Path(__file__).resolve().parents[1] / "docs" / "deploy" / "dagster.yaml"


@dg.asset
def first() -> int:
    return 1


@dg.asset
def second(first: int) -> int:
    return first + 1


@dg.asset
def third(second: int) -> int:
    return second + 1


def _connections_of_a_run(home: Path, database: str) -> tuple[bool, int]:
    """(success, new connections to ``database``) of one run of the three assets, instance included."""
    from dagster._core.instance.ref import InstanceRef
    from sqlalchemy import event
    from sqlalchemy.engine import Engine

    opened = []

    def count(dbapi_connection, _record):
        opened.append(dbapi_connection.info.dbname)

    event.listen(Engine, "connect", count)
    try:
        instance = dg.DagsterInstance.from_ref(InstanceRef.from_dir(str(home)))
        try:
            success = dg.materialize([first, second, third], instance=instance).success
        finally:
            instance.dispose()
    finally:
        event.remove(Engine, "connect", count)
    return success, opened.count(database)


def test_a_run_on_the_postgres_instance_opens_a_few_connections_not_one_per_query(
        tmp_path, dev_services, monkeypatch):
    from sqlalchemy.engine import make_url

    home = tmp_path / "home"
    home.mkdir()
    shutil.copy(DAGSTER_YAML, home / "dagster.yaml")
    assert pool_connections(home)
    with postgres_database(dev_services) as url:
        database = make_url(url).database
        for name in ("TEMPO_PG_HOST", "TEMPO_PG_PORT", "TEMPO_PG_USER", "TEMPO_PG_PASSWORD"):
            monkeypatch.setenv(name, dev_services[name])
        monkeypatch.setenv("TEMPO_PG_DB", database)
        monkeypatch.setenv("TEMPO_PG_POOL", "0")
        unpooled_ok, unpooled = _connections_of_a_run(home, database)
        monkeypatch.delenv("TEMPO_PG_POOL")
        pooled_ok, pooled = _connections_of_a_run(home, database)
    assert unpooled_ok and pooled_ok
    # Dagster's own engines: a connection per stored event and per read (about 50 for 3 steps)
    assert unpooled >= 30, unpooled
    # pooled: the two kept open (a write and the read it makes meanwhile), one more if threads overlap
    assert pooled <= 3, (pooled, unpooled)


def test_an_embedded_sqlite_instance_neither_imports_nor_patches_dagster_postgres(tmp_path):
    """The default instance (SQLite, tempo's own dagster.yaml) pays nothing for the pool."""
    import subprocess
    import sys

    home = tmp_path / "home"
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n", encoding="utf-8")
    code = ("import sys; from tempo_assets.postgres_pool import pool_connections; "
            "print(pool_connections(), any(m.startswith('dagster_postgres') for m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env={**__import__("os").environ, "DAGSTER_HOME": str(home)})
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "False"]
