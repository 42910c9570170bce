"""scripts/dev_services.sh: real servers on 127.0.0.1, only export lines on stdout, an idempotent
start, a clear error for a taken port, and a stop that ends exactly the recorded pids."""
import os
import socket
import time
from pathlib import Path

import pytest

from tempo_assets_tests.services import parse_exports, services_call

pytestmark = pytest.mark.production

SERVICES = ("postgres", "s3", "redis")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}").exists() and "State:\tZ" not in Path(
        f"/proc/{pid}/status").read_text()


def _redis(port: int, *words: str) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as conn:
        conn.sendall(("*%d\r\n" % len(words) + "".join(
            f"${len(w)}\r\n{w}\r\n" for w in words)).encode())
        time.sleep(0.2)
        return conn.recv(4096)


def test_start_status_stop_by_recorded_pid(tmp_path):
    state = tmp_path / "services"
    try:
        first = services_call(state, "start")
        assert first.returncode == 0, first.stderr
        exported = parse_exports(first.stdout)  # raises on any line that is not an export
        assert {"DAGSTER_HOME", "TEMPO_WAREHOUSE_URL", "TEMPO_ARTEFACTS", "AWS_ENDPOINT_URL",
                "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_DEFAULT_REGION",
                "TEMPO_BROKER_URL"} <= set(exported)
        assert exported["TEMPO_WAREHOUSE_URL"].startswith("postgresql+psycopg://tempo:")
        assert exported["TEMPO_ARTEFACTS"] == "s3://tempo/artefacts"
        assert (Path(exported["DAGSTER_HOME"]) / "dagster.yaml").is_file()
        pids = {s: int((state / f"{s}.pid").read_text()) for s in SERVICES}
        ports = {s: int((state / f"{s}.port").read_text()) for s in SERVICES}
        assert all(_alive(pid) for pid in pids.values())

        # every server listens on 127.0.0.1 only
        from sqlalchemy import create_engine, text

        engine = create_engine(exported["TEMPO_WAREHOUSE_URL"])
        with engine.connect() as conn:
            assert conn.execute(text("show listen_addresses")).scalar_one() == "127.0.0.1"
            assert conn.execute(text("show lc_collate")).scalar_one() == "C"
        engine.dispose()
        assert b"127.0.0.1" in _redis(ports["redis"], "CONFIG", "GET", "bind")
        moto_cmdline = Path(f"/proc/{pids['s3']}/cmdline").read_bytes().split(b"\0")
        assert moto_cmdline[moto_cmdline.index(b"-H") + 1] == b"127.0.0.1"

        # a second start starts nothing and prints the same exports
        again = services_call(state, "start")
        assert again.returncode == 0, again.stderr
        assert parse_exports(again.stdout) == exported
        assert {s: int((state / f"{s}.pid").read_text()) for s in SERVICES} == pids
        status = services_call(state, "status")
        assert status.returncode == 0
        for service in SERVICES:
            assert f"{service}: running (pid {pids[service]}, 127.0.0.1:{ports[service]})" \
                in status.stdout

        stopped = services_call(state, "stop")
        assert stopped.returncode == 0, stopped.stderr
        assert not any(_alive(pid) for pid in pids.values())
        assert services_call(state, "status").returncode == 3

        # a taken port is refused by name, before anything starts
        with socket.socket() as holder:
            holder.bind(("127.0.0.1", 0))
            holder.listen()
            taken = holder.getsockname()[1]
            refused = services_call(state, "start", TEMPO_PG_PORT=str(taken))
        assert refused.returncode == 1
        assert refused.stdout == ""
        assert f"port {taken} on 127.0.0.1 (TEMPO_PG_PORT, for postgres) is already taken" \
            in refused.stderr
        assert not (state / "postgres.pid").exists()
    finally:
        cleaned = services_call(state, "clean")
        assert cleaned.returncode == 0, cleaned.stderr
    assert not state.exists()
