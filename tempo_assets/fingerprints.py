"""Each output's fingerprint and code version, recorded in its sidecar, and its Dagster data version.

The code version of an asset is the one it declares (``code_version=`` on ``@dg.asset``): bumped
by hand when what the asset writes changes, never derived from its source text, so a pure refactor
(a function moved or renamed) makes nothing stale. ``tempo_assets_tests/test_numbers_unchanged.py``
says when a bump is due: an output that changed under an unchanged code version fails there.

The fingerprint (``core.storage.staleness.fingerprint``) hashes what the asset read: every upstream
artefact reference (``asset[partition]`` and sha256) and raw release file (its path inside the
archive and sha256) in its ``sources``, the recipe hash it applied, and its code version. Nothing
in it depends on where the archive, the store or the checkout live, on the host or on the clock.

The materialisation's Dagster data version is the artefact's content sha256 (set by the IO manager
once the value is stored), the same identity ``tempo status`` compares: an upstream rebuilt to the
same bytes makes nothing downstream "Unsynced", and one rebuilt to other bytes makes exactly its
readers so.
"""
from __future__ import annotations

from typing import Any, MutableMapping

import dagster as dg

from tempo_assets.core.storage.staleness import fingerprint

# an asset function called directly (tests) has no definition to read its code version from
UNVERSIONED = "unversioned"


def asset_code_version(assets_def: dg.AssetsDefinition, key: dg.AssetKey | None = None) -> str:
    """The code version ``assets_def`` declares for ``key`` (its only asset by default)."""
    key = key or assets_def.key
    version = assets_def.code_versions_by_key.get(key)
    if not version:
        raise ValueError(f"asset {key.to_user_string()} declares no code_version: add code_version= to its "
                         "@dg.asset (bumped whenever what it writes changes)")
    return version


def code_versions(assets) -> dict[str, str]:
    """``asset name -> declared code version`` for a list of asset definitions."""
    return {key.to_user_string(): asset_code_version(a, key) for a in assets if isinstance(a, dg.AssetsDefinition)
            for key in a.keys}


def current_context() -> dg.AssetExecutionContext | None:
    """The running asset's context, or None (an asset function or IO manager called directly)."""
    try:
        return dg.AssetExecutionContext.get()
    except dg.DagsterInvariantViolationError:
        return None


def record_fingerprint(metadata: MutableMapping[str, Any], sources: list) -> None:
    """Add ``code_version`` and ``fingerprint`` to an output's ``metadata``."""
    context = current_context()
    version = asset_code_version(context.assets_def, context.asset_key) if context is not None else UNVERSIONED
    extra = {"recipe_hash": metadata["recipe_hash"]} if metadata.get("recipe_hash") else None
    metadata["code_version"] = version
    metadata["fingerprint"] = fingerprint(sources, version, extra)


def set_data_version(asset_key: dg.AssetKey, sha256: str) -> None:
    """The stored artefact's content sha256 as the materialisation's Dagster data version."""
    context = current_context()
    if context is not None:
        context.set_data_version(asset_key, dg.DataVersion(sha256))
