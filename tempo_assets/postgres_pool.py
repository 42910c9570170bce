"""One pooled connection per process to the Dagster instance's PostgreSQL, instead of one per query.

dagster-postgres gives each of its storages (runs, event log, schedules) an engine with
SQLAlchemy's ``NullPool``: every read and every stored event opens a new connection (a server
process forked, a SCRAM handshake) and closes it. A ``tempo materialize --window`` of the tiny
archive on two celery workers opened 4,847 of them (about 50 per step; docs/performance.md).
``pool_connections()`` makes the storages created after it share one engine per (URL, process)
that keeps up to ``POOL_SIZE`` connections open (two: a stored event's write and the index read
it makes meanwhile; up to ``MAX_OVERFLOW`` more while threads of the process need them at once,
closed again after use), checked with a ping before each use so a restarted server costs a
reconnect, not an error. Keyed by the process id, so a forked child never
uses its parent's connection. Storages with a token provider (cloud IAM auth, whose tokens expire)
keep Dagster's engine. ``TEMPO_PG_POOL=0`` keeps Dagster's behaviour everywhere.
Only an instance whose ``dagster.yaml`` names PostgreSQL is patched: dagster-postgres is not even
imported for the embedded SQLite default (importing its storages costs each process about 0.6 s).

It is applied by ``tempo`` before a command opens the instance (``cli/graph_cmd.ensure_dagster_home``,
``cli/report_cmd``), by the code location (``definitions.py``: the
code server, a celery worker's step) and by the celery workers' master before it forks its pool
(``scripts/dev_services.sh``'s ``dagster_celery_config``), so the first step of a worker is pooled
too. The webserver's own ``optimize_for_webserver`` engines are left as they are.
"""
from __future__ import annotations

import os
import threading
from pathlib import Path

POOL_SIZE = 2
MAX_OVERFLOW = 20
RECYCLE_SECONDS = 1800
# the dagster_postgres modules that create their storage's engine with ``create_pg_engine``
STORAGE_MODULES = ("dagster_postgres.run_storage.run_storage", "dagster_postgres.event_log.event_log",
                   "dagster_postgres.schedule_storage.schedule_storage")

_engines: dict[tuple[str, int], object] = {}
_lock = threading.Lock()


def enabled() -> bool:
    return os.environ.get("TEMPO_PG_POOL", "1").strip() not in ("0", "false", "no")


def shared_engine(postgres_url: str):
    """This process's pooled engine for ``postgres_url`` (created on first use)."""
    import sqlalchemy

    key = (postgres_url, os.getpid())
    with _lock:
        engine = _engines.get(key)
        if engine is None:
            engine = _engines[key] = sqlalchemy.create_engine(
                postgres_url, isolation_level="AUTOCOMMIT", pool_size=POOL_SIZE, max_overflow=MAX_OVERFLOW,
                pool_pre_ping=True, pool_recycle=RECYCLE_SECONDS)
        return engine


def names_postgres(home: str | os.PathLike | None = None) -> bool:
    """Whether the instance's ``dagster.yaml`` (in ``home``, default ``$DAGSTER_HOME``) names
    PostgreSQL storage (``storage: postgres``, or a ``dagster_postgres`` storage class)."""
    home = home or os.environ.get("DAGSTER_HOME")
    if not home:
        return False
    try:
        text = Path(home, "dagster.yaml").read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return False
    return "postgres" in text


def pool_connections(home: str | os.PathLike | None = None) -> bool:
    """Make dagster-postgres storages created from now on in this process share ``shared_engine``
    when the instance in ``home`` (default ``$DAGSTER_HOME``) names PostgreSQL (:func:`names_postgres`);
    ``False`` (nothing changed) otherwise, without dagster-postgres or with ``TEMPO_PG_POOL=0``. Idempotent."""
    import importlib

    if not enabled() or not names_postgres(home):
        return False
    try:
        modules = [importlib.import_module(name) for name in STORAGE_MODULES]
    except ImportError:
        return False
    from sqlalchemy.pool import NullPool

    for module in modules:
        original = getattr(module.create_pg_engine, "dagster_original", module.create_pg_engine)

        def create_pg_engine(postgres_url, token_provider=None, *, _original=original, **engine_kwargs):
            # the storages' own per-query engine (NullPool, autocommit); anything else, as Dagster does
            if (enabled() and token_provider is None and engine_kwargs.get("poolclass") is NullPool
                    and set(engine_kwargs) == {"poolclass", "isolation_level"}
                    and engine_kwargs["isolation_level"] == "AUTOCOMMIT"):
                return shared_engine(postgres_url)
            return _original(postgres_url, token_provider, **engine_kwargs)

        create_pg_engine.dagster_original = original
        module.create_pg_engine = create_pg_engine
    return True
