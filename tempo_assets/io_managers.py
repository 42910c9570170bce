"""Artefact IO manager: Dagster's side of the artefact store (``core/storage/artefacts.py``).

``handle_output`` refuses an output whose metadata lacks the time binding or whose
``max_source_date`` is after its ``cutoff`` (the store checks it) and writes it through the store,
which commits value and sidecar together. ``load_input`` hands the asset a lazy
:class:`~tempo_assets.core.storage.artefacts.Artefact` (or, for window inputs read through
``AllPartitionMapping``, an :class:`~tempo_assets.core.storage.artefacts.ArtefactSet`) that refuses any
partition, or any artefact, dated after what the reading asset's role allows (the role table is
``core/base/windows.py``'s). A violating artefact is therefore never what downstream reads, even when a
blocking check has already failed on it.
"""
from __future__ import annotations

from typing import Any, Mapping

import dagster as dg

# the store moved to core/storage/artefacts.py; these names stay importable from here
from tempo_assets.core.storage.artefacts import (  # noqa: F401
    Artefact, ArtefactSet, ArtefactStore, WindowArtefactSet, canonical_json, refuse_flagged,
)
from tempo_assets.core.base.errors import CutoffViolation, StorageWriteError, TempoInputError
from tempo_assets.core.base.faults import fault_point
from tempo_assets.core.base.windows import ROLE_BOUND, is_window_key, parse_window_key
from tempo_assets.fingerprints import set_data_version
from tempo_assets.partitions import WINDOWS
from tempo_assets.resources import ArchiveResource, ArtefactStoreResource
from tempo_assets.step_memory import forget_captured_output, release_before_step


def unwrap_metadata(metadata: Mapping[str, Any]) -> dict[str, Any]:
    """Plain values from Dagster metadata (``MetadataValue`` objects carry ``.value``)."""
    return {k: getattr(v, "value", v) for k, v in (metadata or {}).items()}


class ArtefactIOManager(dg.ConfigurableIOManager):
    """Stores every asset output through the ``artefact_store`` resource, gated by ``archive``'s dates."""

    artefact_store: ArtefactStoreResource
    archive: ArchiveResource

    def _store(self) -> ArtefactStore:
        return self.artefact_store.store()

    def _archive_dates(self):
        from tempo_assets.core.inputs.releases import archive_release_dates

        return archive_release_dates(self.archive.root)

    def handle_output(self, context: dg.OutputContext, obj: Any) -> None:
        asset = context.asset_key.to_user_string()
        partition = context.partition_key if context.has_partition_key else None
        binding = unwrap_metadata(context.output_metadata)
        store = self._store()
        immutable_key = unwrap_metadata(context.definition_metadata).get("tempo/immutable_key")
        if immutable_key and store.exists(asset, partition):
            previous = store.read_meta(asset, partition).get(immutable_key)
            if previous is not None and previous != binding.get(immutable_key):
                raise TempoInputError(
                    f"{asset}[{partition}] is immutable: it was frozen with {immutable_key}="
                    f"{previous}, refusing to overwrite it with {binding.get(immutable_key)}",
                    path=store.sidecar_path(asset, partition),
                )
            if previous is not None:
                # same content hash: keep the original file and its freezing time
                context.add_output_metadata({"unchanged": True})
                set_data_version(context.asset_key, store.read_meta(asset, partition)["sha256"])
                forget_captured_output(context)
                return
        try:
            meta = store.write(asset, partition, obj, binding, run_id=context.run_id)
        except StorageWriteError as exc:
            # the store refused the bytes (full disk, no permission): one line naming the path,
            # not a stack trace through the store
            raise dg.Failure(description=str(exc), allow_retries=False) from None
        context.add_output_metadata({"sha256": meta["sha256"], "path": str(store.folder(asset, partition))})
        set_data_version(context.asset_key, meta["sha256"])
        forget_captured_output(context)  # stored: what reads it reads the store
        fault_point(asset, "written")

    def load_input(self, context: dg.InputContext) -> Any:
        release_before_step(context)
        upstream = context.asset_key.to_user_string()
        role = unwrap_metadata(context.definition_metadata).get("tempo/role")
        downstream_key = context.partition_key if context.has_partition_key else None
        keys = list(context.asset_partition_keys) if context.has_asset_partitions else []
        return self.bind(upstream, role, downstream_key, keys, upstream_windows=_by_window(context))

    def bind(self, upstream: str, role: str | None, downstream_key: str | None, keys: list[str],
             upstream_windows: bool = False) -> Any:
        """What ``downstream_key`` may read of ``upstream`` under ``role``: one artefact (``keys`` one
        partition) or a role-gated set (``keys`` several, or none: every partition of the archive);
        ``upstream_windows``: ``upstream`` is partitioned by window (a cutoff asset reads the admissible ones)."""
        store = self._store()
        ids, as_of = self._archive_dates()
        order = {rid: i for i, rid in enumerate(ids)}
        if downstream_key is not None and is_window_key(downstream_key):
            window = parse_window_key(downstream_key)
            if role not in ROLE_BOUND:
                raise TempoInputError(f"window input {upstream} needs metadata tempo/role in {list(ROLE_BOUND)}")
            limit_release = window.bound_of(role)
        else:
            limit_release = downstream_key
        by_window = upstream_windows or (bool(keys) and all(map(is_window_key, keys)))
        if downstream_key is not None and not is_window_key(downstream_key) and by_window:
            return self._windows_at(upstream, store, keys, downstream_key, order, as_of)
        if downstream_key is not None and is_window_key(downstream_key) and by_window:
            # a window asset reads only its own window of another window asset (identity); Dagster
            # may report every registered key of a dynamic definition here, so bind it explicitly
            if downstream_key not in keys:
                raise TempoInputError(f"{upstream}[{downstream_key}] is not a registered window partition")
            keys = [downstream_key]
        if len(keys) == 1 and not (
            downstream_key and is_window_key(downstream_key) and not is_window_key(keys[0])
        ):
            key = keys[0]
            artefact = refuse_flagged(store.open(upstream, key), store.sidecar_path(upstream, key))
            if limit_release is not None and limit_release in as_of:
                limit = as_of[limit_release]
                if artefact.max_source_date > limit:
                    raise CutoffViolation(
                        store.sidecar_path(upstream, key), artefact.max_source_date, limit,
                        what=f"upstream artefact {upstream}[{key}] read by {downstream_key}",
                    )
            return artefact
        if limit_release is None or limit_release not in order:
            raise TempoInputError(f"cannot bind input {upstream} for partition {downstream_key!r}")
        return ArtefactSet(
            asset=upstream, role=role or "cutoff", limit_release=limit_release,
            limit_date=as_of[limit_release], release_order=order, as_of=as_of,
            fetch=lambda key: refuse_flagged(store.open(upstream, key), store.sidecar_path(upstream, key)),
            stored=lambda key: store.exists(upstream, key),
        )

    @staticmethod
    def _windows_at(upstream, store: ArtefactStore, keys, cutoff: str, order, as_of) -> WindowArtefactSet:
        """Windows of ``upstream`` a cutoff asset may read: those whose t0 is at or before ``cutoff``."""
        if cutoff not in order:
            raise TempoInputError(f"cannot bind input {upstream} for partition {cutoff!r}: not a release")
        windows = [k for k in keys if order.get(parse_window_key(k).t0, len(order)) <= order[cutoff]]
        return WindowArtefactSet(
            asset=upstream, limit_release=cutoff, limit_date=as_of[cutoff], windows=windows,
            fetch=lambda key: refuse_flagged(store.open(upstream, key), store.sidecar_path(upstream, key)),
            exists=lambda key: store.exists(upstream, key))


def _by_window(context: dg.InputContext) -> bool:
    """Whether the input's upstream asset is partitioned by window, though no window may be registered
    yet (an archive of two releases: the submission's admissible recipes are none, not a release set)."""
    try:
        return getattr(context.asset_partitions_def, "name", None) == WINDOWS.name
    except dg.DagsterInvariantViolationError:  # an unpartitioned upstream
        return False


def deferred_in(role: str, mapping: dg.PartitionMapping | None = None) -> dg.AssetIn:
    """An input under ``role`` that Dagster does not load (a dependency only): the asset reads it
    with :func:`read_deferred` when it decides to (TEST inputs, after the window's TEST claim)."""
    mapping = dg.AllPartitionMapping() if mapping is None else mapping
    return dg.AssetIn(partition_mapping=mapping, metadata={"tempo/role": role}, dagster_type=dg.Nothing)


def read_deferred(context: dg.AssetExecutionContext, artefact_store: ArtefactStoreResource,
                  archive: ArchiveResource, name: str) -> Any:
    """The running asset's :func:`deferred_in` input ``name``, bound and role-gated as ``load_input``
    binds a loaded one (an :class:`Artefact` for an identity input, else an :class:`ArtefactSet`)."""
    assets_def, key = context.assets_def, dg.AssetKey(name)
    role = unwrap_metadata(assets_def.node_def.input_def_named(name).metadata).get("tempo/role")
    identity = isinstance(assets_def.get_partition_mapping(key), dg.IdentityPartitionMapping)
    keys = [context.partition_key] if identity else []
    return ArtefactIOManager(artefact_store=artefact_store, archive=archive).bind(name, role, context.partition_key, keys)
