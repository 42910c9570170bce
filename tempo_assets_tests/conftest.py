"""Session fixtures: the demo archive ``data/`` materialised once, in a tmp Dagster instance.

The demo graph takes minutes on two cores, so every test that needs a materialised graph shares
this one session: a copy of ``data/``, a persistent ``DAGSTER_HOME`` (telemetry off) whose
instance holds the registered partitions and the run history, and tmp artefact, cache and
warehouse paths. ``demo_graph.env`` points a subprocess (``dagster``, ``tempo``) at the same
instance and folders.
"""
from __future__ import annotations

import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

# the SQL warehouse models: the evaluation sets scoring reads come from them, so they run too
from tempo_assets.cli.graph_cmd import WAREHOUSE_ASSETS  # noqa: F401 (re-exported for tests)
# the production path's servers (PostgreSQL, S3, redis) for the tests marked `production`
from tempo_assets_tests.services import dev_services, services_state  # noqa: F401

REPO = Path(__file__).resolve().parents[1]
DEMO_ARCHIVE = REPO / "data"
DAGSTER_YAML = "telemetry:\n  enabled: false\n"


@dataclass
class MaterialisedGraph:
    """An archive materialised through every window's ``test_score`` and the latest submission."""

    root: Path
    archive: Path
    home: Path
    artefacts: Path
    instance: object
    plan: object
    resources: dict
    report: list
    seconds: float
    env: dict = field(default_factory=dict)

    def store(self):
        from tempo_assets.core.artefacts import ArtefactStore

        return ArtefactStore(self.artefacts)


def make_home(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    (path / "dagster.yaml").write_text(DAGSTER_YAML, encoding="utf-8")
    return path


def materialise_archive(root: Path, archive: Path, exclude=(), target: str = "all",
                        key: str | None = None) -> MaterialisedGraph:
    """Register ``archive``'s partitions in a fresh instance under ``root`` and run ``target``."""
    import dagster as dg
    from dagster._core.instance.ref import InstanceRef

    from tempo_assets.cli.graph_cmd import plan_steps, run_steps
    from tempo_assets.definitions import build_resources
    from tempo_assets.partitions import plan_partitions, register_partitions
    from tempo_assets.resources import GridResource, open_archive

    home = make_home(root / "home")
    artefacts = root / "artefacts"
    warehouse = "sqlite:///" + str(root / "warehouse.sqlite")
    cache = root / "cache"
    instance = dg.DagsterInstance.from_ref(InstanceRef.from_dir(str(home)))
    plan = plan_partitions(open_archive(archive))
    register_partitions(instance, plan)
    # fewer bootstrap resamples than the default keeps test_score quick; nothing else changes
    resources = build_resources(str(archive), str(artefacts), warehouse, str(cache),
                                grid=GridResource(bootstrap_samples=20))
    started = time.perf_counter()
    report = run_steps(plan_steps(plan, target, key), instance, resources, echo=lambda *_: None, exclude=exclude)
    env = {"DAGSTER_HOME": str(home), "TEMPO_ARCHIVE": str(archive), "TEMPO_ARTEFACTS": str(artefacts),
           "TEMPO_WAREHOUSE_URL": warehouse, "TEMPO_CACHE": str(cache)}
    return MaterialisedGraph(root, archive, home, artefacts, instance, plan, resources, report,
                             time.perf_counter() - started, env)


@pytest.fixture(scope="session")
def demo_graph(tmp_path_factory) -> MaterialisedGraph:
    """``data/`` copied to tmp and materialised: every window through test_score, the latest submission."""
    root = tmp_path_factory.mktemp("demo_graph")
    archive = root / "archive"
    shutil.copytree(DEMO_ARCHIVE, archive)
    graph = materialise_archive(root, archive)
    yield graph
    graph.instance.dispose()


def subprocess_env(graph: MaterialisedGraph) -> dict:
    """The current environment pointed at ``graph``'s instance and folders."""
    env = dict(os.environ)
    env.update(graph.env)
    return env
