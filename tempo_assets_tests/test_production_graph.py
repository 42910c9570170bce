"""The graph on the production path (PostgreSQL warehouse, S3 artefacts) gives the local numbers.

The warehouse assets run in the main job and the VALID/TEST evaluation sets scoring reads come
from the warehouse's ``evaluation_sets`` (``valid_evaluation_set``, ``test_growth``), so the
tiny archive's window, materialised on SQLite with a local artefact folder by the session's
``tiny_build``, is materialised again on PostgreSQL with artefacts on S3 (moto) with the same
settings, and every artefact of the window must be byte-identical. The benchmark report's figures are
drawn but not rendered to PNG (``unrendered.py``): the artefacts do not depend on the PNGs, and the
figures are tested in ``core/test_report.py``.
The PostgreSQL URL comes from ``$TEMPO_WAREHOUSE_URL`` in the step (the resource holds none), as
in production. The servers are the session's (``dev_services``).
"""
import shutil
import uuid

import dagster as dg
import pytest
from sqlalchemy import create_engine, text

from tempo_assets.cli.graph_cmd import plan_steps, run_steps
from tempo_assets.core.storage.artefacts import ArtefactStore, ObjectLocation
from tempo_assets.definitions import build_resources
from tempo_assets.partitions import plan_partitions, register_partitions
from tempo_assets.resources import GridResource, open_archive
from tempo_assets_tests.conftest import GRID_BOOTSTRAP_SAMPLES, tiny_benchmark_config
from tempo_assets_tests.services import postgres_database
from tempo_assets_tests.unrendered import unrendered_figures

pytestmark = [pytest.mark.production, pytest.mark.slow]

# the window's artefacts scoring depends on, from the warehouse's evaluation sets onwards
COMPARED = ("valid_evaluation_set", "valid_selection", "frozen_recipe", "test_growth", "test_score", "benchmark")


def _materialise(archive, root, artefacts: str):
    """The archive's window in an ephemeral instance, warehouse URL from ``$TEMPO_WAREHOUSE_URL``;
    the tiny build's settings (conftest ``materialise_archive``)."""
    instance = dg.DagsterInstance.ephemeral()
    plan = plan_partitions(open_archive(archive))
    register_partitions(instance, plan)
    resources = build_resources(str(archive), artefacts, None, str(root / "cache"),
                                grid=GridResource(bootstrap_samples=GRID_BOOTSTRAP_SAMPLES),
                                benchmark_config=tiny_benchmark_config())
    window = plan.windows[0]
    report = run_steps(plan_steps(plan, "window", window), instance, resources, echo=lambda *_: None)
    assert [r[2] for r in report] == ["ok"] * len(report), report
    return window, ArtefactStore(artefacts)


def test_postgres_warehouse_and_s3_artefacts_give_the_local_numbers(tmp_path, tiny_build, dev_services,
                                                                  monkeypatch):
    archive = shutil.copytree(tiny_build / "scored" / "archive", tmp_path / "archive")
    on_sqlite = ArtefactStore(tiny_build / "scored" / "artefacts")  # read only: the build is never written
    [window] = plan_partitions(open_archive(archive)).windows
    with postgres_database(dev_services) as url:
        for name in ("TEMPO_WAREHOUSE_URL", "AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY",
                     "AWS_DEFAULT_REGION"):
            monkeypatch.setenv(name, url if name == "TEMPO_WAREHOUSE_URL" else dev_services[name])
        monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))  # the S3 store's local extras
        s3_url = f"{dev_services['TEMPO_ARTEFACTS']}/graph-{uuid.uuid4().hex[:12]}"
        with unrendered_figures():
            pg_window, on_postgres = _materialise(archive, tmp_path / "postgres", s3_url)
        engine = create_engine(url)
        try:
            with engine.connect() as conn:
                roles = dict(conn.execute(text("select window_role, count(*) from evaluation_sets "
                                               "group by window_role")).all())
        finally:
            engine.dispose()
    assert pg_window == window and isinstance(on_postgres.location, ObjectLocation)
    # the benchmark's HTML report, an extra beside the artefact, is a local file
    assert (tmp_path / "home" / "artefacts" / "benchmark" / window / "report.html").is_file()
    # the evaluation sets scoring read were written to PostgreSQL, for both roles
    assert set(roles) == {"valid", "test"} and min(roles.values()) > 0, roles
    for asset in COMPARED:
        mine, theirs = on_postgres.read_meta(asset, window), on_sqlite.read_meta(asset, window)
        assert mine["sha256"] == theirs["sha256"], asset
