"""Artefact IO manager: atomic files with a JSON sidecar, re-verified on every read.

Layout: ``ROOT/<asset>/<partition>/value.<ext>`` beside the sidecar ``artefact.json``. The sidecar holds the
time binding (``cutoff``, ``max_source_date``, ``sources``, ``window``, ``window_role``), the
content sha256 and when it was written. ``handle_output`` refuses an output whose metadata lacks
the binding or whose ``max_source_date`` is after its ``cutoff``; ``load_input`` hands the asset a
lazy :class:`Artefact` (or, for window inputs read through ``AllPartitionMapping``, an
:class:`ArtefactSet`) that refuses any partition, or any artefact, dated after what the reading
asset's role allows. A violating artefact is therefore never what downstream reads, even when a
blocking check has already failed on it.
"""
from __future__ import annotations

import json
import pickle
from dataclasses import dataclass, field
from datetime import date, datetime, timezone
from pathlib import Path
from typing import Any, Callable, Mapping

import dagster as dg
import pandas as pd

from tempo_assets.core.dates import parse_date
from tempo_assets.core.errors import CutoffViolation, TempoInputError
from tempo_assets.core.io import atomic_write, sha256_file
from tempo_assets.partitions import is_window_key, parse_window_key

BINDING_KEYS = ("cutoff", "max_source_date", "sources")
# role of a window input -> the window role whose release bounds what may be read
ROLE_LIMIT = {"train": "t-1", "valid": "t0", "refit": "t0", "test": "t1"}


def unwrap_metadata(metadata: Mapping[str, Any]) -> dict[str, Any]:
    """Plain values from Dagster metadata (``MetadataValue`` objects carry ``.value``)."""
    return {k: getattr(v, "value", v) for k, v in (metadata or {}).items()}


def _json_default(obj: Any) -> Any:
    if isinstance(obj, date):
        return obj.isoformat()
    if hasattr(obj, "item") and getattr(obj, "ndim", None) == 0:
        return obj.item()
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")


def canonical_json(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, indent=1, default=_json_default) + "\n"


def _format_of(obj: Any) -> str:
    if isinstance(obj, pd.DataFrame):
        return "parquet"
    if isinstance(obj, str):
        return "txt"
    if isinstance(obj, (dict, list)):
        try:
            json.dumps(obj, default=_json_default)
            return "json"
        except (TypeError, ValueError):
            return "pkl"
    return "pkl"


def write_value(path: Path, obj: Any, fmt: str) -> None:
    """Write ``obj`` atomically in ``fmt`` (parquet, txt, json or pkl)."""
    if fmt == "parquet":
        with atomic_write(path, "wb") as handle:
            obj.to_parquet(handle, index=True)
    elif fmt == "txt":
        with atomic_write(path, "w") as handle:
            handle.write(obj)
    elif fmt == "json":
        with atomic_write(path, "w") as handle:
            handle.write(canonical_json(obj))
    else:
        with atomic_write(path, "wb") as handle:
            pickle.dump(obj, handle, protocol=5)


def read_value(path: Path, fmt: str) -> Any:
    if fmt == "parquet":
        return pd.read_parquet(path)
    if fmt == "txt":
        return path.read_text(encoding="utf-8")
    if fmt == "json":
        return json.loads(path.read_text(encoding="utf-8"))
    with open(path, "rb") as handle:
        return pickle.load(handle)


@dataclass
class Artefact:
    """One stored artefact: its sidecar now, its value on first ``.value`` access."""

    meta: dict[str, Any]
    loader: Callable[[], Any] | None = None
    _value: Any = field(default=None, repr=False)
    _loaded: bool = field(default=False, repr=False)

    @classmethod
    def in_memory(cls, value: Any, **meta: Any) -> "Artefact":
        """An artefact held in memory (asset-function tests)."""
        return cls(meta=dict(meta), _value=value, _loaded=True)

    @property
    def value(self) -> Any:
        if not self._loaded:
            self._value = self.loader()
            self._loaded = True
        return self._value

    @property
    def max_source_date(self) -> date:
        return parse_date(self.meta["max_source_date"])

    def reference(self) -> dict[str, Any]:
        """What a downstream artefact records about having read this one."""
        keys = ("asset", "partition", "sha256", "cutoff", "max_source_date", "window", "window_role")
        return {k: self.meta.get(k) for k in keys if self.meta.get(k) is not None}


def refuse_flagged(artefact: Artefact, sidecar: Path | str | None = None) -> Artefact:
    """``artefact``, unless its sidecar records violations (e.g. GAF rows dated after their file)."""
    count = artefact.meta.get("violations") or 0
    if count:
        name = f"{artefact.meta.get('asset')}[{artefact.meta.get('partition')}]"
        raise TempoInputError(
            f"{name} records {count} violation(s) of its time binding (see its blocking checks); "
            "refusing to read it: fix the archive and rematerialise", path=sidecar)
    return artefact


@dataclass
class ArtefactSet:
    """Partitions of one upstream asset a window may read, gated by the reading role.

    ``get(key)`` raises :class:`CutoffViolation` when ``key`` is a release after the role's limit
    release, or when the stored artefact's ``max_source_date`` is after the limit's cutoff.
    """

    asset: str
    role: str
    limit_release: str
    limit_date: date
    release_order: dict[str, int]
    fetch: Callable[[str], Artefact]
    as_of: dict[str, date] = field(default_factory=dict)
    read: list[str] = field(default_factory=list)

    def get(self, key: str) -> Artefact:
        if key not in self.release_order:
            raise TempoInputError(f"{self.asset}[{key}]: {key!r} is not a release of the archive")
        if self.release_order[key] > self.release_order[self.limit_release]:
            raise CutoffViolation(
                f"{self.asset}[{key}]", self.as_of.get(key, self.limit_date), self.limit_date,
                what=f"partition {key!r} (after {self.limit_release!r}, the last release a "
                f"{self.role!r} input may read)",
            )
        artefact = self.fetch(key)
        if artefact.max_source_date > self.limit_date:
            raise CutoffViolation(
                f"{self.asset}[{key}]", artefact.max_source_date, self.limit_date,
                what=f"artefact read as {self.role!r} data",
            )
        self.read.append(key)
        return artefact


class ArtefactStore:
    """Reads and writes artefacts under one root (used by the IO manager and by resources)."""

    def __init__(self, root: str | Path):
        self.root = Path(root)

    def folder(self, asset: str, partition: str | None) -> Path:
        return self.root / asset / (partition or "__unpartitioned__")

    def sidecar_path(self, asset: str, partition: str | None) -> Path:
        return self.folder(asset, partition) / "artefact.json"

    def exists(self, asset: str, partition: str | None) -> bool:
        return self.sidecar_path(asset, partition).exists()

    def read_meta(self, asset: str, partition: str | None) -> dict[str, Any]:
        path = self.sidecar_path(asset, partition)
        if not path.exists():
            raise TempoInputError(f"no artefact {asset}[{partition}] (materialise it first)", path=path)
        try:
            return json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise TempoInputError(f"corrupt sidecar: {exc}", path=path, line=exc.lineno) from exc

    def open(self, asset: str, partition: str | None) -> Artefact:
        """The artefact with its sidecar; the value is read (sha256-verified) on first access."""
        meta = self.read_meta(asset, partition)
        data_path = self.folder(asset, partition) / meta["file"]

        def load() -> Any:
            if not data_path.exists():
                raise TempoInputError(f"artefact file missing for {asset}[{partition}]", path=data_path)
            actual = sha256_file(data_path)
            if actual != meta["sha256"]:
                raise TempoInputError(
                    f"sha256 mismatch: sidecar says {meta['sha256']}, file has {actual}", path=data_path
                )
            return read_value(data_path, meta["format"])

        return Artefact(meta=meta, loader=load)

    def write(self, asset: str, partition: str | None, obj: Any, binding: Mapping[str, Any],
              run_id: str | None = None) -> dict[str, Any]:
        """Write ``obj`` and its sidecar atomically; return the sidecar."""
        missing = [k for k in BINDING_KEYS if binding.get(k) is None]
        if missing:
            raise TempoInputError(f"output of {asset}[{partition}] lacks metadata {missing}")
        cutoff, max_date = parse_date(binding["cutoff"]), parse_date(binding["max_source_date"])
        if max_date > cutoff:
            raise CutoffViolation(f"{asset}[{partition}]", max_date, cutoff, what="artefact about to be written")
        fmt = _format_of(obj)
        folder = self.folder(asset, partition)
        data_path = folder / f"value.{fmt}"
        write_value(data_path, obj, fmt)
        meta = dict(binding)
        meta.update(
            asset=asset, partition=partition, format=fmt, file=data_path.name,
            sha256=sha256_file(data_path), run_id=run_id,
            written_at=datetime.now(timezone.utc).isoformat(timespec="microseconds"),
        )
        with atomic_write(folder / "artefact.json") as handle:
            handle.write(canonical_json(meta))
        return meta


class ArtefactIOManager(dg.ConfigurableIOManager):
    """Stores every asset output as a file plus a JSON sidecar under ``root``."""

    root: str
    archive_root: str

    def _store(self) -> ArtefactStore:
        return ArtefactStore(self.root)

    def _archive_dates(self) -> tuple[list[str], dict[str, date]]:
        from tempo_assets.resources import archive_release_dates

        return archive_release_dates(self.archive_root)

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
                return
        meta = store.write(asset, partition, obj, binding, run_id=context.run_id)
        context.add_output_metadata({"sha256": meta["sha256"], "path": str(store.folder(asset, partition))})

    def load_input(self, context: dg.InputContext) -> Any:
        upstream = context.asset_key.to_user_string()
        store = self._store()
        role = unwrap_metadata(context.definition_metadata).get("tempo/role")
        downstream_key = context.partition_key if context.has_partition_key else None
        ids, as_of = self._archive_dates()
        order = {rid: i for i, rid in enumerate(ids)}
        if downstream_key is not None and is_window_key(downstream_key):
            window = parse_window_key(downstream_key)
            if role not in ROLE_LIMIT:
                raise TempoInputError(f"window input {upstream} needs metadata tempo/role in {list(ROLE_LIMIT)}")
            limit_release = window.release_for(ROLE_LIMIT[role])
        else:
            limit_release = downstream_key
        keys = list(context.asset_partition_keys) if context.has_asset_partitions else []
        if downstream_key is not None and is_window_key(downstream_key) and keys and all(map(is_window_key, keys)):
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
        )
