"""A window's evaluation set (``assets.labels.warehouse_evaluation_set``) reads the growth partition the
cutoff job built when it is current, and rebuilds it when it is missing or stale: the set is the one
a rebuild gives either way (SQLite, and PostgreSQL under ``production``, as ``core/test_warehouse.py``)."""
from __future__ import annotations

import pandas as pd
import pytest

from tempo_assets.assets.labels import warehouse_evaluation_set
from tempo_assets.core.base.windows import parse_window_key
from tempo_assets.core.pipeline.window_growth import warehouse_growth
from tempo_assets.core.storage.warehouse import Warehouse
from tempo_assets.resources import WarehouseResource
from tempo_assets_tests.core import test_warehouse as warehouse_tests
from tempo_assets_tests.core.test_warehouse import NEW, OLD, WINDOW

wh, built = warehouse_tests.wh, warehouse_tests.built  # the warehouse tests' fixtures: SQLite, PostgreSQL

GROWTH_MODELS = ["aligned_annotations", "annotation_growth"]


@pytest.fixture
def models_run(monkeypatch):
    """The names of the models every ``Warehouse.run_model`` call builds, in order."""
    names: list[str] = []
    run_model = Warehouse.run_model

    def recorded(self, name, **params):
        names.append(name)
        return run_model(self, name, **params)

    monkeypatch.setattr(Warehouse, "run_model", recorded)
    return names


def _python_growth(warehouse: Warehouse):
    """The growth (OLD, NEW] as a fresh build gives it: the reference the set must equal."""
    return warehouse_growth(warehouse.read_growth(OLD, NEW), pd.DataFrame(columns=["protein", "aspect", "reason"]))


def _valid_set(warehouse: Warehouse, python):
    window = parse_window_key(WINDOW)
    assert window.growth_span("valid") == (OLD, NEW)
    value, rows = warehouse_evaluation_set(WarehouseResource(url=warehouse.url), window, "valid", python)
    return value.growth, rows


def _assert_same(growth, python) -> None:
    for name in ("targets", "ground_truth", "known"):
        pd.testing.assert_frame_equal(getattr(growth, name), getattr(python, name), check_exact=True)


def test_a_current_growth_partition_is_read_not_rebuilt(built, models_run):
    python = _python_growth(built)
    growth, rows = _valid_set(built, python)
    assert models_run == ["evaluation_sets"]
    _assert_same(growth, python)
    assert rows == len(built.read_table("annotation_growth", old_release=OLD, new_release=NEW))


def test_a_stale_growth_partition_is_rebuilt(built, models_run):
    python = _python_growth(built)
    # the partition as it stood before a release changed: a row the current inputs do not give
    with built.engine.begin() as conn:
        conn.exec_driver_sql("delete from annotation_growth where protein = 'P1'")
    growth, _ = _valid_set(built, python)
    assert models_run == ["evaluation_sets", *GROWTH_MODELS, "evaluation_sets"]
    _assert_same(growth, python)


def test_a_missing_growth_partition_is_built(built, models_run):
    python = _python_growth(built)
    with built.engine.begin() as conn:
        conn.exec_driver_sql("delete from annotation_growth")
    growth, _ = _valid_set(built, python)
    assert models_run == ["evaluation_sets", *GROWTH_MODELS, "evaluation_sets"]  # the first refused: no row
    _assert_same(growth, python)
