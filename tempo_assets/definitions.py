"""The Tempo code location: assets, checks, jobs, sensor, schedule and resources."""
from __future__ import annotations

import dagster as dg

from tempo_assets.assets.benchmark import BenchmarkResource, benchmark, benchmark_catalog
from tempo_assets.assets.corpus import knn_corpus
from tempo_assets.assets.embeddings import embeddings
from tempo_assets.assets.ia import ia_weights
from tempo_assets.assets.labels import reranker_labels
from tempo_assets.assets.methods import METHOD_ASSETS, METHOD_JOBS, MethodFenceResource
from tempo_assets.assets.recipe import frozen_recipe
from tempo_assets.assets.releases import ontology, release_annotations, sequences
from tempo_assets.assets.scoring import test_growth, test_score
from tempo_assets.assets.selection import valid_selection
from tempo_assets.assets.submission import submission
from tempo_assets.assets.warehouse import (
    annotation_growth, experimental_annotations, stg_annotations, valid_evaluation_set,
)
from tempo_assets.audit_checks import AUDIT_CHECKS
from tempo_assets.checks import CHECKS
from tempo_assets.warehouse_checks import WAREHOUSE_CHECKS
from tempo_assets.io_managers import ArtefactIOManager
from tempo_assets.method_checks import METHOD_CHECKS
from tempo_assets.resources import (
    ArchiveResource, ArtefactStoreResource, EmbedderResource, GridResource, WarehouseResource,
    default_archive_root, default_artefacts_root, default_cache_root, default_warehouse_url,
)
from tempo_assets.executors import tempo_executor
from tempo_assets.sensors import JOBS, archive_sensor, weekly_archive_check

ASSETS = [
    ontology, release_annotations, sequences, embeddings,
    stg_annotations, experimental_annotations, annotation_growth, valid_evaluation_set,
    knn_corpus, ia_weights, reranker_labels,
    valid_selection, frozen_recipe, test_growth, test_score, submission,
    benchmark, benchmark_catalog,
    *METHOD_ASSETS,
]


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
    }


defs = dg.Definitions(
    assets=ASSETS,
    asset_checks=CHECKS + AUDIT_CHECKS + WAREHOUSE_CHECKS + METHOD_CHECKS,
    jobs=JOBS + METHOD_JOBS,
    sensors=[archive_sensor],
    schedules=[weekly_archive_check],
    resources=build_resources(),
    # $TEMPO_EXECUTOR=celery: every job's steps go to the celery workers (tempo_assets/executors.py);
    # unset, Dagster's default executor
    executor=tempo_executor(),
)
