"""The deployment files under docs/deploy/, checked by Dagster's own config schemas.

docs/deploy/dagster.yaml (Postgres storage, queued runs) and dagster-k8s.yaml (the same plus
dagster-k8s's run launcher) go through Dagster's instance schema, the launcher's block through
``K8sRunLauncher``'s schema, and the step-per-pod run config through ``k8s_job_executor``'s. The
Helm values have no schema in any Python package: they are checked against dagster.yaml.
"""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml
from dagster._config import process_config
from dagster._core.instance.config import dagster_instance_config

DEPLOY = Path(__file__).resolve().parents[1] / "docs" / "deploy"
PG_ENV = {"TEMPO_PG_HOST": "db.internal", "TEMPO_PG_PORT": "5432", "TEMPO_PG_USER": "tempo",
          "TEMPO_PG_PASSWORD": "unused", "TEMPO_PG_DB": "dagster"}


def _load(name: str) -> dict:
    return yaml.safe_load((DEPLOY / name).read_text(encoding="utf-8"))


def _instance_config(tmp_path: Path, name: str, monkeypatch) -> dict:
    for key, value in PG_ENV.items():
        monkeypatch.setenv(key, value)
    home = tmp_path / name.replace(".", "_")
    home.mkdir()
    shutil.copy(DEPLOY / name, home / "dagster.yaml")
    config, _ = dagster_instance_config(str(home))
    return config


@pytest.mark.parametrize("name", ["dagster.yaml", "dagster-k8s.yaml"])
def test_instance_files_pass_dagsters_instance_schema(tmp_path, monkeypatch, name):
    config = _instance_config(tmp_path, name, monkeypatch)
    assert set(config["storage"]) == {"postgres"}
    assert config["run_coordinator"]["class"] == "QueuedRunCoordinator"
    assert config["concurrency"]["runs"]["max_concurrent_runs"] >= 1
    assert config["concurrency"]["pools"] == {"default_limit": 1, "granularity": "op"}
    assert config["telemetry"] == {"enabled": False}
    # the daemon marks failed a run whose process died (kill -9, OOM): nothing waits on it for good
    assert config["run_monitoring"]["enabled"] is True
    assert config["run_monitoring"]["start_timeout_seconds"] > 0


def test_instance_schema_rejects_a_misspelt_key(tmp_path, monkeypatch):
    from dagster._core.errors import DagsterInvalidConfigError

    broken = (DEPLOY / "dagster.yaml").read_text().replace("max_concurrent_runs",
                                                           "max_concurent_runs")
    (tmp_path / "dagster.yaml").write_text(broken)
    for key, value in PG_ENV.items():
        monkeypatch.setenv(key, value)
    with pytest.raises(DagsterInvalidConfigError, match="max_concurent_runs"):
        dagster_instance_config(str(tmp_path))


def test_k8s_instance_keeps_the_server_storage_and_its_launcher_config_is_valid():
    from dagster_k8s import K8sRunLauncher

    server, k8s = _load("dagster.yaml"), _load("dagster-k8s.yaml")
    for key in ("storage", "run_coordinator", "concurrency", "telemetry"):
        assert k8s[key] == server[key], key
    launcher = k8s["run_launcher"]
    assert (launcher["module"], launcher["class"]) == ("dagster_k8s", "K8sRunLauncher")
    processed = process_config(K8sRunLauncher.config_type(), launcher["config"])
    assert processed.success, processed.errors
    assert processed.value["job_namespace"] == "tempo"
    wrong = process_config(K8sRunLauncher.config_type(), {**launcher["config"], "job_namspace": "x"})
    assert not wrong.success


def test_step_per_pod_run_config_is_valid_for_k8s_job_executor():
    from dagster_k8s import k8s_job_executor

    execution = _load("k8s_executor.yaml")["execution"]["config"]
    schema = k8s_job_executor.config_schema.config_type
    processed = process_config(schema, execution)
    assert processed.success, processed.errors
    assert processed.value["max_concurrent"] == 4
    assert not process_config(schema, {**execution, "max_concurrent": "four"}).success


def test_helm_values_describe_the_same_instance():
    values, server = _load("helm-values.yaml"), _load("dagster.yaml")
    assert values["postgresql"]["enabled"] is False
    assert values["generatePostgresqlPasswordSecret"] is False
    assert values["runLauncher"]["type"] == "K8sRunLauncher"
    coordinator = values["dagsterDaemon"]["runCoordinator"]
    assert coordinator["type"] == server["run_coordinator"]["class"]
    assert (coordinator["config"]["queuedRunCoordinator"]["maxConcurrentRuns"]
            == server["concurrency"]["runs"]["max_concurrent_runs"])
    assert values["telemetry"] == server["telemetry"]
    monitoring = values["dagsterDaemon"]["runMonitoring"]
    assert monitoring["enabled"] is server["run_monitoring"]["enabled"] is True
    assert monitoring["startTimeoutSeconds"] == server["run_monitoring"]["start_timeout_seconds"]
    assert monitoring["pollIntervalSeconds"] == server["run_monitoring"]["poll_interval_seconds"]
    deployment = values["dagster-user-deployments"]["deployments"][0]
    assert deployment["dagsterApiGrpcArgs"] == ["-m", "tempo_assets.definitions"]
