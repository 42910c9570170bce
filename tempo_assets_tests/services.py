"""The production path's servers for tests: ``scripts/dev_services.sh`` in a tmp state folder.

``dev_services`` (session-scoped, registered in conftest.py) starts PostgreSQL, moto's S3 server
and redis on free 127.0.0.1 ports once per pytest run (the first xdist worker that needs them, under
a file lock; the others read the ``export`` lines it kept), hands the ``export`` lines of ``start``
as a dict, and when the run ends (:func:`stop_run_services`: the xdist controller, or the one
process) runs ``clean``, which stops exactly the recorded pids and deletes the state
folder. ``postgres_database`` makes a fresh, empty database on that server for one test.
"""
from __future__ import annotations

import os
import shlex
import subprocess
import sys
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import pytest

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "scripts" / "dev_services.sh"
_PORT_VARIABLES = ("TEMPO_PG_PORT", "TEMPO_S3_PORT", "TEMPO_REDIS_PORT")


def parse_exports(stdout: str) -> dict[str, str]:
    """``export NAME=value`` lines (shell-quoted) as a dict; any other line is an error."""
    exported = {}
    for number, line in enumerate(stdout.splitlines(), start=1):
        words = shlex.split(line)
        if len(words) != 2 or words[0] != "export" or "=" not in words[1]:
            raise ValueError(f"dev_services.sh start, stdout line {number}: {line!r} is not an "
                             "export line")
        name, value = words[1].split("=", 1)
        exported[name] = value
    return exported


def services_call(state: Path, command: str, timeout: float = 300,
                  **extra: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in _PORT_VARIABLES}
    env.update(TEMPO_SERVICES_DIR=str(state), TEMPO_SERVICES_PYTHON=sys.executable, **extra)
    return subprocess.run(["bash", str(SCRIPT), command], env=env, capture_output=True,
                          text=True, timeout=timeout)


def run_services_state(run: Path) -> Path:
    """The state folder of the servers of the pytest run whose folder is ``run``."""
    return run / "services"


@pytest.fixture(scope="session")
def services_state(tmp_path_factory) -> Path:
    """The state folder of the run's servers (``TEMPO_SERVICES_DIR`` of ``dev_services``)."""
    from tempo_assets_tests.conftest import run_folder

    return run_services_state(run_folder(tmp_path_factory))


@pytest.fixture(scope="session")
def dev_services(services_state) -> dict[str, str]:
    """PostgreSQL, S3 (moto) and redis on 127.0.0.1 for the run: the exported variables. One set of
    servers for every xdist worker (each started its own before: an initdb, a moto and a redis start
    per worker, about 5.6 CPU s and 18 s each); tests make their own databases and bucket prefixes."""
    from filelock import FileLock

    state = services_state
    exports = state.with_name(state.name + ".exports")
    with FileLock(str(state.with_name(state.name + ".lock"))):
        if not exports.exists():
            started = services_call(state, "start")
            if started.returncode != 0:
                services_call(state, "clean")
                pytest.fail(f"scripts/dev_services.sh start failed ({started.returncode}):\n"
                            f"{started.stderr}")
            partial = exports.with_name(f"{exports.name}.{os.getpid()}")
            partial.write_text(started.stdout, encoding="utf-8")
            os.replace(partial, exports)
    return parse_exports(exports.read_text(encoding="utf-8"))


def stop_run_services(run: Path) -> None:
    """At the end of a pytest run: the servers ``dev_services`` started in it stopped (``clean``)."""
    state = run_services_state(run)
    if state.exists():
        cleaned = services_call(state, "clean")
        assert cleaned.returncode == 0, cleaned.stderr


@contextmanager
def postgres_database(services: dict[str, str]) -> Iterator[str]:
    """A new database on the session's server; yields its SQLAlchemy URL, drops it after."""
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url

    base = make_url(services["TEMPO_WAREHOUSE_URL"])
    name = f"t_{uuid.uuid4().hex[:16]}"
    admin = create_engine(base.set(database="postgres"), isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.execute(text(f'create database "{name}"'))
        yield base.set(database=name).render_as_string(hide_password=False)
        with admin.connect() as conn:
            conn.execute(text(f'drop database "{name}" with (force)'))
    finally:
        admin.dispose()
