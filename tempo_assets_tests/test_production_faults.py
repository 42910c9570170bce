"""Endpoints of the production path that are down, wrong or refuse the credentials fail
``tempo materialize`` at start.

The object store (S3) and, with ``TEMPO_EXECUTOR=celery``, the broker and its workers are checked
before any run starts: one ``tempo: error:`` line naming the endpoint, no traceback, no
credential, nothing written. (PostgreSQL's faults: ``test_production_instance.py``.)
"""
from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from tempo_assets_tests.toolkit import tempo

pytestmark = pytest.mark.production

REPO = Path(__file__).resolve().parents[1]
WINDOW = "2014-09-29__2016-01-15__2017-06-15__2019-01-14"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _env(tmp_path: Path, services: dict, postgres: bool = False, **extra: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TEMPO_", "AWS_"))}
    env.update({k: v for k, v in services.items() if k.startswith("AWS_")})
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    if postgres:
        env.update({k: v for k, v in services.items() if k.startswith("TEMPO_PG_")})
        shutil.copy(REPO / "docs" / "deploy" / "dagster.yaml", home / "dagster.yaml")
    env.update(DAGSTER_HOME=str(home), TEMPO_ARCHIVE=str(REPO / "data"), PYTHONPATH=str(REPO),
               TEMPO_WAREHOUSE_URL="sqlite:///" + str(tmp_path / "wh.sqlite"), **extra)
    return env


def _materialize(env: dict) -> subprocess.CompletedProcess:
    return tempo("materialize", "--window", WINDOW, env=env, timeout=300)


def _assert_failed_at_start(done: subprocess.CompletedProcess, env: dict, *expected: str) -> str:
    assert done.returncode == 2, done.stdout + done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("tempo: error: "), last
    for text in expected:
        assert text in last, last
    assert "Traceback" not in done.stderr and "started" not in done.stdout, done.stdout
    for secret in (env.get("AWS_SECRET_ACCESS_KEY"), env.get("TEMPO_PG_PASSWORD")):
        if secret:
            assert secret not in done.stdout + done.stderr
    return last


def test_an_object_store_that_is_down_fails_at_start_naming_its_endpoint(tmp_path, dev_services):
    endpoint = f"http://127.0.0.1:{_free_port()}"
    env = _env(tmp_path, dev_services, TEMPO_ARTEFACTS="s3://tempo/down", AWS_ENDPOINT_URL=endpoint,
               TEMPO_S3_CONNECT_TIMEOUT="2")
    _assert_failed_at_start(_materialize(env), env, "s3://tempo/down", f"endpoint {endpoint}")
    assert not (tmp_path / "home" / "artefacts").exists()


def test_an_unknown_bucket_fails_at_start_naming_it(tmp_path, dev_services):
    env = _env(tmp_path, dev_services, TEMPO_ARTEFACTS="s3://no-such-bucket-tempo/x")
    _assert_failed_at_start(_materialize(env), env, "s3://no-such-bucket-tempo/x",
                            f"endpoint {dev_services['AWS_ENDPOINT_URL']}")


def test_a_broker_that_is_down_or_without_workers_fails_at_start(tmp_path, dev_services):
    prefix = f"{dev_services['TEMPO_ARTEFACTS']}/faults"
    down = f"redis://:hunter2secret@127.0.0.1:{_free_port()}/0"
    env = _env(tmp_path, dev_services, postgres=True, TEMPO_ARTEFACTS=prefix, TEMPO_EXECUTOR="celery",
               TEMPO_BROKER_URL=down)
    last = _assert_failed_at_start(_materialize(env), env, "cannot reach the celery broker",
                                   down.replace("hunter2secret", "***"))
    assert "hunter2secret" not in last
    # the session's redis answers, but no worker listens on this database of it
    idle = dev_services["TEMPO_BROKER_URL"].rsplit("/", 1)[0] + "/7"
    env["TEMPO_BROKER_URL"] = idle
    _assert_failed_at_start(_materialize(env), env, "no celery worker listens on queue 'dagster'", idle)
    env["TEMPO_EXECUTOR"] = "spark"
    _assert_failed_at_start(_materialize(env), env,
                            "TEMPO_EXECUTOR='spark' is not one of in_process, multiprocess, celery")


@pytest.fixture()
def authenticating_s3(tmp_path):
    """A moto S3 server of its own that checks credentials (``INITIAL_NO_AUTH_ACTION_COUNT``): its
    first four requests make a bucket and an IAM user allowed S3, then every request must be signed
    with that user's key. Started on a free 127.0.0.1 port and stopped by its pid."""
    import time
    import urllib.request

    import boto3

    port = _free_port()
    endpoint = f"http://127.0.0.1:{port}"
    log = open(tmp_path / "moto.log", "w", encoding="utf-8")
    server = subprocess.Popen([str(Path(sys.executable).with_name("moto_server")), "-H", "127.0.0.1", "-p", str(port)],
                              env={**os.environ, "INITIAL_NO_AUTH_ACTION_COUNT": "4"}, stdout=log,
                              stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(f"{endpoint}/moto-api/", timeout=2)
                break
            except OSError:
                if time.monotonic() > deadline or server.poll() is not None:
                    raise RuntimeError(f"moto_server did not start: {(tmp_path / 'moto.log').read_text()}")
                time.sleep(0.2)
        anyone = {"endpoint_url": endpoint, "region_name": "us-east-1", "aws_access_key_id": "setup",
                  "aws_secret_access_key": "setup"}
        boto3.client("s3", **anyone).create_bucket(Bucket="locked")
        iam = boto3.client("iam", **anyone)
        iam.create_user(UserName="tempo")
        iam.put_user_policy(UserName="tempo", PolicyName="s3", PolicyDocument=(
            '{"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}]}'))
        key = iam.create_access_key(UserName="tempo")["AccessKey"]
        yield {"AWS_ENDPOINT_URL": endpoint, "AWS_ACCESS_KEY_ID": key["AccessKeyId"],
               "AWS_SECRET_ACCESS_KEY": key["SecretAccessKey"], "AWS_DEFAULT_REGION": "us-east-1"}
    finally:
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        log.close()


def test_an_object_store_that_refuses_the_credentials_fails_at_start_naming_its_endpoint(
        tmp_path, authenticating_s3, monkeypatch):
    from tempo_assets.core.storage.artefacts import ArtefactStore

    wrong = {**authenticating_s3, "AWS_SECRET_ACCESS_KEY": "not-the-secret-" + authenticating_s3["AWS_SECRET_ACCESS_KEY"][:4]}
    env = _env(tmp_path, wrong, TEMPO_ARTEFACTS="s3://locked/tempo")
    last = _assert_failed_at_start(_materialize(env), env, "s3://locked/tempo",
                                   f"endpoint {authenticating_s3['AWS_ENDPOINT_URL']}")
    assert "PermissionError: The request signature we calculated does not match" in last, last
    assert not (tmp_path / "home" / "artefacts").exists()
    # the same store with the right key is usable: the refusal was the credentials, not the server
    for name, value in authenticating_s3.items():
        monkeypatch.setenv(name, value)
    store = ArtefactStore("s3://locked/tempo")
    store.location.check()
    store.location.write_bytes("probe.txt", b"ok")
    assert store.location.read_bytes("probe.txt") == b"ok"
