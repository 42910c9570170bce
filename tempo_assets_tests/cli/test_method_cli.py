"""``tempo method add | list | remove``: methods.yaml validated, versions kept side by side."""
import dagster as dg
import pytest
import yaml
from dagster._core.instance.ref import InstanceRef

from tempo_assets.cli.main import main
from tempo_assets.core.base.errors import TempoInputError
from tempo_assets.core.methods.registry import load_registry
from tempo_assets.partitions import METHODS


@pytest.fixture()
def env(tmp_path, monkeypatch):
    archive = tmp_path / "archive"
    (archive / "releases").mkdir(parents=True)
    home = tmp_path / "home"
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    monkeypatch.setenv("TEMPO_ARCHIVE", str(archive))
    method = tmp_path / "tf"
    method.mkdir()
    (method / "predict.py").write_text("print('hi')\n")
    return archive, home, method


def test_two_versions_registered_side_by_side_listed_and_removed_one_by_one(env, capsys):
    archive, home, method = env
    assert main(["method", "add", "tf", "--dir", str(method), "--command", "python3 predict.py", "--version", "1",
                 "--trained-until", "2015-06-01", "--timeout", "120", "--memory-gb", "2"]) == 0
    assert main(["method", "add", "tf", "--dir", str(method), "--command", "python3 predict.py", "--version", "2",
                 "--trained-until", "2018-01-01", "--archive", str(archive)]) == 0
    registry = load_registry(archive)
    assert registry.keys() == ["tf@1", "tf@2"]
    assert registry.get("tf@1").timeout_s == 120 and registry.get("tf@1").memory_gb == 2.0
    assert str(registry.get("tf@2").trained_until) == "2018-01-01"
    instance = dg.DagsterInstance.from_ref(InstanceRef.from_dir(str(home)))
    assert instance.get_dynamic_partitions(METHODS.name) == ["tf@1", "tf@2"]
    capsys.readouterr()
    assert main(["method", "list"]) == 0
    listed = capsys.readouterr().out
    assert "tf@1\tcommand\t2015-06-01" in listed and "tf@2\tcommand\t2018-01-01" in listed
    # the same key twice is refused; a bare name matching several versions asks for one
    assert main(["method", "add", "tf", "--dir", str(method), "--command", "x", "--version", "1"]) == 2
    assert "already registered" in capsys.readouterr().err
    assert main(["method", "remove", "tf"]) == 2
    assert "name the version: tf@1, tf@2" in capsys.readouterr().err
    assert main(["method", "remove", "tf@1"]) == 0
    assert load_registry(archive).keys() == ["tf@2"]


def test_precomputed_needs_its_produced_at_date(env, capsys, tmp_path):
    archive, _, _ = env
    preds = tmp_path / "preds"
    preds.mkdir()
    assert main(["method", "add", "late", "--predictions", str(preds)]) == 2
    assert "--produced-at" in capsys.readouterr().err
    assert main(["method", "add", "late", "--predictions", str(preds), "--produced-at", "2019-01-20"]) == 0
    spec = load_registry(archive).get("late")
    assert spec.kind == "precomputed" and str(spec.training_bound) == "2019-01-20"


def test_bad_registry_errors_name_the_key(env):
    archive, _, method = env
    (archive / "methods.yaml").write_text(yaml.safe_dump({"methods": [
        {"name": "ok", "kind": "command", "dir": str(method), "command": "true"},
        {"name": "bad", "kind": "command", "dir": str(method), "command": "true", "timeout_s": -5, "colour": "red"},
    ]}))
    with pytest.raises(TempoInputError) as caught:
        load_registry(archive)
    message = str(caught.value)
    assert "methods.yaml" in message and "methods[2].timeout_s" in message and "methods[2].colour" in message
    (archive / "methods.yaml").write_text("methods:\n  - name: a|b\n    kind: command\n    dir: /x\n    command: y\n")
    with pytest.raises(TempoInputError, match=r"methods\[1\]\.name"):
        load_registry(archive)
    (archive / "methods.yaml").write_text("methods:\n  - name: a__b\n    kind: command\n    dir: /x\n    command: y\n")
    with pytest.raises(TempoInputError, match=r"methods\[1\]\.name.*'__'"):
        load_registry(archive)


def test_a_method_folder_holding_the_archive_is_refused(env, capsys):
    archive, _, _ = env
    assert main(["method", "add", "greedy", "--dir", str(archive.parent), "--command", "true"]) == 2
    assert "contains the archive" in capsys.readouterr().err
    assert not (archive / "methods.yaml").exists()


def test_a_method_folder_holding_dagster_home_is_refused(env, capsys, tmp_path, monkeypatch):
    outer = tmp_path / "outer"
    (outer / "home").mkdir(parents=True)
    monkeypatch.setenv("DAGSTER_HOME", str(outer / "home"))
    assert main(["method", "add", "greedy", "--dir", str(outer), "--command", "true"]) == 2
    assert "contains the DAGSTER_HOME" in capsys.readouterr().err
