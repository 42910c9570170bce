"""The Tempo code location: assets, checks, jobs, sensor, schedule and resources."""
from __future__ import annotations

import dagster as dg

from tempo_assets import audit_checks, checks, method_checks, warehouse_checks
from tempo_assets.assets import common, evaluation, inputs, labels, methods, neighbours, recipe
from tempo_assets.assets.evaluation import BenchmarkResource
from tempo_assets.assets.methods import METHOD_JOBS, MethodFenceResource
from tempo_assets.io_managers import ArtefactIOManager
from tempo_assets.resources import (
    ArchiveResource, ArtefactStoreResource, EmbedderResource, GridResource, WarehouseResource,
    default_archive_root, default_artefacts_root, default_cache_root, default_warehouse_url,
)
from tempo_assets.executors import tempo_executor
from tempo_assets.graph_state import DefinedGraph
from tempo_assets.postgres_pool import pool_connections
from tempo_assets.sensors import JOBS, archive_sensor, weekly_archive_check

# the code server's and the celery steps' Dagster instances: one PostgreSQL connection per process
pool_connections()

# one module per stage (tempo_assets/assets/), in the order of the stages; every asset and check
# defined in them is collected, none listed by hand
ASSET_MODULES = [common, inputs, labels, neighbours, recipe, evaluation, methods]
CHECK_MODULES = [checks, audit_checks, warehouse_checks, method_checks]
ASSETS = list(dg.load_assets_from_modules(ASSET_MODULES))
ASSET_CHECKS = list(dg.load_asset_checks_from_modules(CHECK_MODULES))


def build_resources(archive_root: str | None = None, artefacts_root: str | None = None,
                    warehouse_url: str | None = None, cache_root: str | None = None,
                    grid: GridResource | None = None, benchmark_config: BenchmarkResource | None = None,
                    method_fence: MethodFenceResource | None = None) -> dict:
    """Resources bound to an archive and an artefact folder (defaults from the environment)."""
    archive_root = archive_root or default_archive_root()
    artefacts_root = artefacts_root or default_artefacts_root()
    archive, store = ArchiveResource(root=archive_root), ArtefactStoreResource(root=artefacts_root)
    return {
        "io_manager": ArtefactIOManager(artefact_store=store, archive=archive),
        "archive": archive,
        "artefact_store": store,
        "embedder": EmbedderResource(cache_root=cache_root or default_cache_root()),
        "grid": grid or GridResource(),
        # empty: resolved from $TEMPO_WAREHOUSE_URL in the step, so a password in it never
        # lands in the job snapshot Dagster stores (and shows in the UI)
        "warehouse": WarehouseResource(url=warehouse_url or ""),
        "benchmark_config": benchmark_config or BenchmarkResource(),
        "method_fence": method_fence or MethodFenceResource(),
        # the code location's graph (code versions, dependencies, blocking checks) for the catalog's
        # states: an asset cannot import the definitions that collect it
        "defined_graph": DefinedGraph.of_lists(ASSETS, ASSET_CHECKS),
    }


defs = dg.Definitions(
    assets=ASSETS,
    asset_checks=ASSET_CHECKS,
    jobs=JOBS + METHOD_JOBS,
    sensors=[archive_sensor],
    schedules=[weekly_archive_check],
    resources=build_resources(),
    # $TEMPO_EXECUTOR=celery: every job's steps go to the celery workers (tempo_assets/executors.py);
    # unset, Dagster's default executor
    executor=tempo_executor(),
)
