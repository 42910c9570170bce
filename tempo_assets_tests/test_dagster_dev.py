"""``dagster dev`` serves the code location: every asset, the registered partitions, the checks.

The server runs in its own process group against a tmp ``DAGSTER_HOME`` (telemetry off) whose
instance holds the partitions of a tiny archive, and is stopped by its process group id.
"""
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import dagster as dg
import pytest
from dagster._core.instance.ref import InstanceRef

from tempo_assets.checks import CHECKS
from tempo_assets.definitions import ASSETS, defs
from tempo_assets.partitions import plan_partitions, register_partitions
from tempo_assets.resources import open_archive
from tempo_assets_tests.assets.tiny_archive import build_tiny_archive
from tempo_assets_tests.conftest import REPO, make_home

pytestmark = pytest.mark.slow

QUERY = """{ assetNodes { assetKey { path } partitionKeys
  assetChecksOrError { __typename ... on AssetChecks { checks { name blocking } } } } }"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def get(url: str, payload: dict | None = None, timeout: float = 10) -> bytes:
    data = None if payload is None else json.dumps(payload).encode()
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return response.read()


def wait_for(url: str, process: subprocess.Popen, seconds: float) -> dict:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert process.poll() is None, "dagster dev exited early"
        try:
            return json.loads(get(url, timeout=2))
        except OSError:
            time.sleep(1)
    raise AssertionError(f"{url} did not answer within {seconds} s")


def test_dagster_dev_serves_assets_partitions_and_checks(tmp_path):
    from tempo_assets.core.methods.registry import MethodSpec, add_method

    archive = build_tiny_archive(tmp_path)
    add_method(archive, MethodSpec(name="freqprior", version="1", kind="command",
                                   dir=str(REPO / "examples" / "methods" / "freqprior"), command="python3 predict.py"))
    home = make_home(tmp_path / "home")
    with dg.DagsterInstance.from_ref(InstanceRef.from_dir(str(home))) as instance:
        plan = plan_partitions(open_archive(archive))
        register_partitions(instance, plan)
    port = free_port()
    env = dict(os.environ, DAGSTER_HOME=str(home), TEMPO_ARCHIVE=str(archive),
               TEMPO_ARTEFACTS=str(tmp_path / "artefacts"), TEMPO_CACHE=str(tmp_path / "cache"),
               TEMPO_WAREHOUSE_URL="sqlite:///" + str(tmp_path / "wh.sqlite"))
    command = [str(Path(sys.executable).with_name("dagster")), "dev", "-w", "workspace.yaml",
               "-h", "127.0.0.1", "-p", str(port)]
    log = open(tmp_path / "dagster_dev.log", "wb")
    process = subprocess.Popen(command, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT,
                               start_new_session=True)
    pgid = os.getpgid(process.pid)
    try:
        info = wait_for(f"http://127.0.0.1:{port}/server_info", process, 240)
        assert "dagster_webserver_version" in info
        deadline, nodes = time.monotonic() + 120, []
        while time.monotonic() < deadline and not nodes:  # the code location may still be loading
            nodes = json.loads(get(f"http://127.0.0.1:{port}/graphql", {"query": QUERY}, 60))["data"]["assetNodes"]
            time.sleep(0 if nodes else 1)
        by_key = {"/".join(n["assetKey"]["path"]): n for n in nodes}
        assert set(by_key) == {a.key.to_user_string() for a in ASSETS}
        assert by_key["test_score"]["partitionKeys"] == plan.windows
        assert by_key["knn_corpus"]["partitionKeys"] == plan.cutoffs
        assert by_key["ontology"]["partitionKeys"] == plan.releases
        assert sorted(by_key["method_predictions"]["partitionKeys"]) == [f"{c}|freqprior@1" for c in plan.cutoffs]
        served = {c["name"]: c["blocking"] for n in nodes if n["assetChecksOrError"]["__typename"] == "AssetChecks"
                  for c in n["assetChecksOrError"]["checks"]}
        assert set(served) == {key.name for key in defs.resolve_asset_graph().asset_check_keys}
        assert all(served[key.name] for c in CHECKS for key in c.check_keys)  # the time bindings block
    finally:
        os.killpg(pgid, signal.SIGTERM)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(pgid, signal.SIGKILL)
            process.wait(timeout=30)
        log.close()
    assert process.returncode is not None
    deadline = time.monotonic() + 30
    while group_alive(pgid) and time.monotonic() < deadline:
        time.sleep(0.5)
    if group_alive(pgid):  # a loaded machine can keep the code server busy past SIGTERM's grace
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGKILL)
        deadline = time.monotonic() + 15
        while group_alive(pgid) and time.monotonic() < deadline:
            time.sleep(0.2)
    # no process of the group survives (webserver, daemon, code server)
    assert not group_alive(pgid), subprocess.run(["ps", "-o", "pid,stat,cmd", "-g", str(pgid)],
                                                 capture_output=True, text=True).stdout


def group_alive(pgid: int) -> bool:
    """Whether a live (non-zombie) process is left in process group ``pgid``."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    listing = subprocess.run(["ps", "-o", "stat=", "-g", str(pgid)], capture_output=True, text=True).stdout
    return any(not state.startswith("Z") for state in listing.split())
