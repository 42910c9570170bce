"""A launch, ``tempo status`` and ``tempo report`` load the definitions against their own instance.

An entered ``DagsterInstance`` puts its defs-state storage in a context variable of Dagster's and
restores the previous one when it exits; exits out of order (a half-consumed run generator closed
later by the garbage collector) can leave there the storage of an instance that is gone. Every
definitions load in that process then failed ("Attempted to resolve undefined DagsterInstance
weakref"): seen in the suite, in whichever test ran ``run_steps`` next in that worker.
"""
from __future__ import annotations

import gc

import dagster as dg
import pytest
from dagster._core.instance.ref import InstanceRef
from dagster._core.storage.defs_state.base import _current_storage

from tempo_assets.cli.graph_cmd import StepRunner, graph_states, run_steps
from tempo_assets.definitions import build_resources
from tempo_assets.partitions import plan_partitions, register_partitions
from tempo_assets.resources import open_archive
from tempo_assets_tests.assets.tiny_archive import RELEASES, build_tiny_archive
from tempo_assets_tests.conftest import make_home


@pytest.fixture
def dead_storage(tmp_path):
    """A defs-state storage whose instance is gone, left in Dagster's context variable."""
    gone = dg.DagsterInstance.from_ref(InstanceRef.from_dir(str(make_home(tmp_path / "gone"))))
    token = _current_storage.set(gone.defs_state_storage)
    del gone
    gc.collect()
    storage = _current_storage.get()
    assert storage is not None and storage._instance_weakref() is None  # the state the suite met
    yield storage
    _current_storage.reset(token)


def test_a_launch_and_status_load_the_definitions_against_their_own_instance(tmp_path, monkeypatch, dead_storage):
    archive = build_tiny_archive(tmp_path, n_releases=2)
    home = make_home(tmp_path / "home")
    warehouse = "sqlite:///" + str(tmp_path / "wh.sqlite")
    for name, value in {"DAGSTER_HOME": home, "TEMPO_ARCHIVE": archive, "TEMPO_ARTEFACTS": tmp_path / "art",
                        "TEMPO_WAREHOUSE_URL": warehouse, "TEMPO_CACHE": tmp_path / "cache"}.items():
        monkeypatch.setenv(name, str(value))
    resources = build_resources(str(archive), str(tmp_path / "art"), warehouse, str(tmp_path / "cache"))
    with dg.DagsterInstance.from_ref(InstanceRef.from_dir(str(home))) as instance:
        register_partitions(instance, plan_partitions(open_archive(archive)))
        _current_storage.set(dead_storage)  # entering the instance set its own; put the dead one back
        assert StepRunner(instance, resources).defined is not None
        report = run_steps([("release_job", RELEASES[0])], instance, resources, echo=lambda *_: None)
        assert [row[2] for row in report] == ["ok"]
        states = graph_states(instance)
        assert any(s.asset == "release_annotations" and s.partition == RELEASES[0] for s in states)
        assert _current_storage.get() is dead_storage  # left as found: only the loads ran under their own
