"""Each output's fingerprint and code version, recorded in its sidecar and given to Dagster.

The fingerprint (``core.staleness.fingerprint``) hashes what the asset read: every upstream
artefact reference (``asset[partition]`` and sha256) and raw release file in its ``sources``,
the recipe hash it applied, and its code version (the package version plus a hash of the asset
function's source). It becomes the materialisation's Dagster data version, so the UI's
"Unsynced" flag follows the inputs: rebuilding an upstream artefact from the same inputs and
code changes nothing downstream.
"""
from __future__ import annotations

import functools
import inspect
from importlib import metadata as importlib_metadata
from typing import Any, MutableMapping

import dagster as dg

from tempo_assets.core.staleness import code_version, fingerprint


@functools.lru_cache(maxsize=1)
def package_version() -> str:
    try:
        return importlib_metadata.version("tempo-assets")
    except importlib_metadata.PackageNotFoundError:
        return "0+unknown"


def asset_code_version(assets_def: dg.AssetsDefinition) -> str:
    """The code version of an asset: package version + sha256 prefix of its function's source."""
    fn = getattr(assets_def.op.compute_fn, "decorated_fn", assets_def.op.compute_fn)
    try:
        source = inspect.getsource(fn)
    except (OSError, TypeError):
        source = f"{fn.__module__}.{fn.__qualname__}"
    return code_version(package_version(), source)


def code_versions(assets) -> dict[str, str]:
    """``asset name -> code version`` for a list of asset definitions."""
    return {a.key.to_user_string(): asset_code_version(a) for a in assets if isinstance(a, dg.AssetsDefinition)}


def _current_context() -> dg.AssetExecutionContext | None:
    try:
        return dg.AssetExecutionContext.get()
    except dg.DagsterInvariantViolationError:
        return None  # an asset function called directly (tests): nothing to tell Dagster


def record_fingerprint(metadata: MutableMapping[str, Any], sources: list) -> None:
    """Add ``code_version`` and ``fingerprint`` to an output's ``metadata`` and set its data version."""
    context = _current_context()
    version = asset_code_version(context.assets_def) if context is not None else package_version()
    extra = {"recipe_hash": metadata["recipe_hash"]} if metadata.get("recipe_hash") else None
    digest = fingerprint(sources, version, extra)
    metadata["code_version"] = version
    metadata["fingerprint"] = digest
    if context is not None:
        context.set_data_version(context.asset_key, dg.DataVersion(digest))
