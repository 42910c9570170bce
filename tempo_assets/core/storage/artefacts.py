"""The artefact store: typed values in open formats, a JSON sidecar, committed by one pointer switch.

Layout under a :class:`Location` (a local folder, or an object store through universal-pathlib)::

    <asset>/<partition>/artefact.json                  the sidecar: binding, sha256, file; the pointer
    <asset>/<partition>/versions/<version>/value.<ext> the value (parquet, txt, json, or a typed
                                                       manifest value.json naming its parts:
                                                       parquet, npy, sparse npz, txt)

A write puts the value in a new version folder (named by its content hash), then replaces the
sidecar atomically as its last step: a run killed between the two leaves the previous sidecar,
which still names the previous (intact) version. Nothing is pickled and nothing loaded can execute
code: a typed value is rebuilt only as one of the registered frozen dataclasses
(:func:`register_type`), from parquet, ``.npy`` (``allow_pickle=False``), JSON and text parts (a model
in its library's own text format, ``ModelText``).
"""
from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import os
import shutil
from dataclasses import dataclass, field
from datetime import date, datetime, timezone
from pathlib import Path
from typing import Any, Callable, Mapping, Protocol

import numpy as np
import pandas as pd

from tempo_assets.core.base.dates import parse_date
from tempo_assets.core.base.errors import CutoffViolation, MissingExtraError, TempoInputError
from tempo_assets.core.base.io import atomic_write, create_bytes_if_absent
from tempo_assets.core.base.windows import release_of_partition
from tempo_assets.core.storage import artefact_types  # noqa: F401  (registers the typed artefacts)
from tempo_assets.core.storage.type_registry import CODECS, TYPES, ModelText

BINDING_KEYS = ("cutoff", "max_source_date", "sources")
SIDECAR = "artefact.json"
VERSIONS = "versions"


# --------------------------------------------------------------------------------------------
# JSON


def _json_default(obj: Any) -> Any:
    if isinstance(obj, date):
        return obj.isoformat()
    if hasattr(obj, "item") and getattr(obj, "ndim", None) == 0:
        return obj.item()
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")


def canonical_json(obj: Any) -> str:
    """Sorted-key, indented JSON (dates as ISO strings, numpy scalars as Python numbers)."""
    return json.dumps(obj, sort_keys=True, indent=1, default=_json_default) + "\n"


def _is_json(obj: Any) -> bool:
    try:
        json.dumps(obj, default=_json_default, allow_nan=True)
    except (TypeError, ValueError):
        return False
    return True


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# --------------------------------------------------------------------------------------------
# where bytes live


class Location(Protocol):
    """The narrow storage interface the store is written against (keys are '/'-joined paths)."""

    def read_bytes(self, key: str) -> bytes: ...
    def write_bytes(self, key: str, data: bytes) -> None: ...  # atomic: all or nothing
    def exists(self, key: str) -> bool: ...
    def list(self, prefix: str) -> list[str]: ...  # immediate children names
    def delete_tree(self, prefix: str) -> None: ...
    def create(self, key: str, data: bytes) -> bool: ...  # only if absent, atomic; False if taken
    def check(self) -> None: ...  # raise TempoInputError naming the store when it cannot be used


class LocalLocation:
    """A local folder; ``write_bytes`` is a temp file in the same folder plus ``os.replace``."""

    def __init__(self, root: str | Path):
        self.root = Path(root)

    def path(self, key: str) -> Path:
        return self.root / key

    def read_bytes(self, key: str) -> bytes:
        return self.path(key).read_bytes()

    def write_bytes(self, key: str, data: bytes) -> None:
        with atomic_write(self.path(key), "wb") as handle:
            handle.write(data)

    def exists(self, key: str) -> bool:
        return self.path(key).exists()

    def list(self, prefix: str) -> list[str]:
        folder = self.path(prefix)
        return sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []

    def delete_tree(self, prefix: str) -> None:
        shutil.rmtree(self.path(prefix), ignore_errors=True)

    def create(self, key: str, data: bytes) -> bool:
        """``data`` at ``key`` only if nothing is there (a hard link of a fsynced temporary file)."""
        self.path(key).parent.mkdir(parents=True, exist_ok=True)
        return create_bytes_if_absent(self.path(key), data)

    def check(self) -> None:
        """A local folder needs no server: it is created on first write."""

    def __str__(self) -> str:
        return str(self.root)


class ObjectLocation:
    """An object-store URL (``s3://bucket/prefix``) through universal-pathlib / fsspec.

    One object is written by one PUT, which the store makes visible whole or not at all, so
    ``write_bytes`` is atomic as the interface asks. ``create`` is a conditional PUT
    (``If-None-Match: *``, fsspec's ``mode="create"``): the store answers 412 to every writer but
    the first. ``AWS_ENDPOINT_URL`` (a local S3 server such as moto's) is passed to the client;
    listings are not cached, so another process's writes are seen at once. Connection attempts are
    bounded (``TEMPO_S3_CONNECT_TIMEOUT``, default 5 s, and few retries), so a store that is down
    fails ``check`` within seconds rather than a step deep in a run.
    """

    def __init__(self, url: str):
        from upath import UPath

        self.url = url.rstrip("/")
        options: dict[str, Any] = {"use_listings_cache": False}
        if url.startswith("s3://"):
            timeout = float(os.environ.get("TEMPO_S3_CONNECT_TIMEOUT", "5"))
            options["config_kwargs"] = {"connect_timeout": timeout, "retries": {"max_attempts": 2}}
            if os.environ.get("AWS_ENDPOINT_URL"):
                options["client_kwargs"] = {"endpoint_url": os.environ["AWS_ENDPOINT_URL"]}
        try:
            self.root = UPath(self.url, **options)
        except (ValueError, ImportError) as exc:  # an unknown protocol, or its filesystem not installed
            raise TempoInputError(f"cannot open the artefact store: {exc}", path=self.url) from exc

    def path(self, key: str):
        return self.root / key

    def read_bytes(self, key: str) -> bytes:
        return self.path(key).read_bytes()

    def write_bytes(self, key: str, data: bytes) -> None:
        self.path(key).write_bytes(data)

    def exists(self, key: str) -> bool:
        return self.path(key).exists()

    def list(self, prefix: str) -> list[str]:
        folder = self.path(prefix)
        return sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []

    def delete_tree(self, prefix: str) -> None:
        folder = self.path(prefix)
        if folder.exists():
            folder.fs.rm(folder.path, recursive=True)

    def create(self, key: str, data: bytes) -> bool:
        target = self.path(key)
        try:
            target.fs.pipe_file(target.path, data, mode="create")
        except FileExistsError:
            return False
        return True

    def endpoint(self) -> str:
        """The server this store talks to (``AWS_ENDPOINT_URL``, else the protocol's default)."""
        return os.environ.get("AWS_ENDPOINT_URL") or f"the default {self.url.split('://')[0]} endpoint"

    def check(self) -> None:
        """Raise :class:`TempoInputError` naming the URL and endpoint when the store is unusable
        (down, unknown bucket, refused credentials); the credentials are never in the message."""
        try:
            fs = self.root.fs
            bucket = self.root.path.split("/", 1)[0]
            fs.ls(bucket, refresh=True)
        except ImportError as missing:  # fsspec imports the protocol's filesystem (s3fs) here
            raise MissingExtraError(f"TEMPO_ARTEFACTS={self.url}", missing) from None
        except Exception as exc:  # noqa: BLE001 - every client error means the same here
            reason = _without_secrets(f"{type(exc).__name__}: {exc}")
            raise TempoInputError(f"cannot reach the artefact store at endpoint {self.endpoint()}: {reason}; "
                                  "start it, or check TEMPO_ARTEFACTS, AWS_ENDPOINT_URL and the credentials",
                                  path=self.url) from None

    def __str__(self) -> str:
        return self.url


def _without_secrets(text: str) -> str:
    """``text`` with the values of the credential variables masked."""
    for name in ("AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        secret = os.environ.get(name)
        if secret:
            text = text.replace(secret, "***")
    return text


def open_location(root: str | os.PathLike) -> LocalLocation | ObjectLocation:
    """A folder is a ``LocalLocation``; a URL (``scheme://...``) an ``ObjectLocation``."""
    return ObjectLocation(root) if isinstance(root, str) and "://" in root else LocalLocation(root)


# --------------------------------------------------------------------------------------------
# open formats


def _parquet_bytes(frame: pd.DataFrame) -> bytes:
    buffer = io.BytesIO()
    frame.to_parquet(buffer, index=True)
    return buffer.getvalue()


def _npy_bytes(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=False)
    return buffer.getvalue()


def _encode(name: str, value: Any, parts: dict[str, bytes]) -> dict[str, Any]:
    """A JSON description of ``value``; binary parts go into ``parts`` (file name -> bytes)."""
    from scipy import sparse

    if isinstance(value, pd.DataFrame):
        parts[f"{name}.parquet"] = _parquet_bytes(value)
        return {"parquet": f"{name}.parquet"}
    if isinstance(value, pd.Series):
        column = "__value__" if value.name is None else str(value.name)
        parts[f"{name}.parquet"] = _parquet_bytes(value.to_frame(name=column))
        return {"series": f"{name}.parquet", "name": value.name}
    if isinstance(value, np.ndarray):
        as_object = value.dtype == object
        array = value.astype(str) if as_object else value
        parts[f"{name}.npy"] = _npy_bytes(array)
        return {"npy": f"{name}.npy", "object": as_object}
    if sparse.issparse(value):
        buffer = io.BytesIO()
        sparse.save_npz(buffer, value, compressed=False)
        parts[f"{name}.npz"] = buffer.getvalue()
        return {"sparse": f"{name}.npz", "kind": value.format}
    if isinstance(value, ModelText):
        parts[f"{name}.txt"] = value.encode("utf-8")
        return {"txt": f"{name}.txt"}
    kind = type(value).__name__
    if dataclasses.is_dataclass(value) and TYPES.get(kind) is type(value):
        fields = {f.name: _encode(f"{name}.{f.name}", getattr(value, f.name), parts)
                  for f in dataclasses.fields(value)}
        return {"typed": kind, "fields": fields}
    if kind in CODECS and isinstance(value, CODECS[kind][0]):
        fields = {k: _encode(f"{name}.{k}", v, parts) for k, v in CODECS[kind][1](value).items()}
        return {"codec": kind, "fields": fields}
    if isinstance(value, dict) and (not _is_json(value) or any(isinstance(v, ModelText) for v in value.values())):
        return {"dict": {str(k): _encode(f"{name}.{k}", v, parts) for k, v in value.items()}}
    if _is_json(value):
        return {"json": json.loads(json.dumps(value, default=_json_default))}
    raise TempoInputError(f"artefact field {name!r}: no open format for {kind} (the store never pickles)")


def _decode(spec: Mapping[str, Any], read: Callable[[str], bytes]) -> Any:
    if "json" in spec:
        return spec["json"]
    if "parquet" in spec:
        return pd.read_parquet(io.BytesIO(read(spec["parquet"])))
    if "series" in spec:
        frame = pd.read_parquet(io.BytesIO(read(spec["series"])))
        return frame.iloc[:, 0].rename(spec.get("name"))
    if "txt" in spec:
        return ModelText(read(spec["txt"]).decode("utf-8"))
    if "npy" in spec:
        array = np.load(io.BytesIO(read(spec["npy"])), allow_pickle=False)
        return array.astype(object) if spec.get("object") else array
    if "sparse" in spec:
        from scipy import sparse

        matrix = sparse.load_npz(io.BytesIO(read(spec["sparse"])))
        return matrix.asformat(spec.get("kind", matrix.format))
    if "dict" in spec:
        return {k: _decode(v, read) for k, v in spec["dict"].items()}
    if "typed" in spec:
        cls = TYPES.get(spec["typed"])
        if cls is None:
            raise TempoInputError(f"unknown artefact type {spec['typed']!r} (registered: {sorted(TYPES)})")
        return cls(**{k: _decode(v, read) for k, v in spec["fields"].items()})
    if "codec" in spec:
        if spec["codec"] not in CODECS:
            raise TempoInputError(f"unknown artefact codec {spec['codec']!r} (registered: {sorted(CODECS)})")
        return CODECS[spec["codec"]][2]({k: _decode(v, read) for k, v in spec["fields"].items()})
    raise TempoInputError(f"unreadable artefact part {sorted(spec)}")


def encode_value(obj: Any) -> tuple[str, str, dict[str, bytes]]:
    """``(format, main file name, {file name: bytes})`` of a value in an open format."""
    if isinstance(obj, pd.DataFrame):
        return "parquet", "value.parquet", {"value.parquet": _parquet_bytes(obj)}
    if isinstance(obj, str):
        return "txt", "value.txt", {"value.txt": obj.encode("utf-8")}
    parts: dict[str, bytes] = {}
    spec = _encode("value", obj, parts)
    if "json" in spec:
        return "json", "value.json", {"value.json": canonical_json(obj).encode("utf-8")}
    manifest = {"value": spec, "parts": {name: sha256_bytes(data) for name, data in sorted(parts.items())}}
    parts["value.json"] = canonical_json(manifest).encode("utf-8")
    return "typed", "value.json", parts


def value_sha256(obj: Any) -> str:
    """The sha256 an artefact of value ``obj`` is stored under (its data version), without writing it."""
    _, main, parts = encode_value(obj)
    return sha256_bytes(parts[main])


def decode_value(fmt: str, read: Callable[[str], bytes], where: str) -> Any:
    """The value stored in ``fmt``; ``read(name)`` returns a file of its version folder."""
    if fmt == "parquet":
        return pd.read_parquet(io.BytesIO(read("value.parquet")))
    if fmt == "txt":
        return read("value.txt").decode("utf-8")
    if fmt == "json":
        return json.loads(read("value.json"))
    if fmt != "typed":
        raise TempoInputError(f"artefact format {fmt!r} is not an open format this store reads", path=where)
    manifest = json.loads(read("value.json"))

    def verified(name: str) -> bytes:
        data = read(name)
        expected = manifest["parts"].get(name)
        if expected is None or sha256_bytes(data) != expected:
            raise TempoInputError(f"artefact part {name} does not match its manifest sha256", path=where)
        return data

    return _decode(manifest["value"], verified)


# --------------------------------------------------------------------------------------------
# artefacts as downstream assets see them


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
    stored: Callable[[str], bool] | None = None  # whether a key is materialised (None: not known)

    def exists(self, key: str) -> bool:
        """Whether partition ``key`` is stored (True when the set was built without a store check)."""
        return True if self.stored is None else bool(self.stored(key))

    def narrowed(self, role: str, limit_release: str) -> "ArtefactSet":
        """The same partitions under a stricter ``role`` bounded by ``limit_release`` (never a later one)."""
        if self.release_order[limit_release] > self.release_order[self.limit_release]:
            raise TempoInputError(f"{self.asset}: cannot widen a {self.role!r} set bounded by {self.limit_release!r} "
                                  f"to {limit_release!r}")
        return ArtefactSet(asset=self.asset, role=role, limit_release=limit_release,
                           limit_date=self.as_of.get(limit_release, self.limit_date), release_order=self.release_order,
                           fetch=self.fetch, as_of=self.as_of, read=self.read, stored=self.stored)

    def get(self, key: str) -> Artefact:
        # a cutoff x method key ``<cutoff>|<method>`` is bound by its cutoff release
        release = release_of_partition(key)
        if release not in self.release_order:
            raise TempoInputError(f"{self.asset}[{key}]: {release!r} is not a release of the archive")
        if self.release_order[release] > self.release_order[self.limit_release]:
            raise CutoffViolation(
                f"{self.asset}[{key}]", self.as_of.get(release, self.limit_date), self.limit_date,
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


# --------------------------------------------------------------------------------------------
# the store


def check_binding(asset: str, partition: str | None, binding: Mapping[str, Any]) -> None:
    """Refuse an output without its time binding, or one that read past its cutoff."""
    missing = [k for k in BINDING_KEYS if binding.get(k) is None]
    if missing:
        raise TempoInputError(f"output of {asset}[{partition}] lacks metadata {missing}")
    cutoff, max_date = parse_date(binding["cutoff"]), parse_date(binding["max_source_date"])
    if max_date > cutoff:
        raise CutoffViolation(f"{asset}[{partition}]", max_date, cutoff, what="artefact about to be written")


class ArtefactStore:
    """Reads and writes artefacts under one root (used by the IO manager and by resources)."""

    def __init__(self, root: str | Path | Location, local_root: str | Path | None = None):
        """``root``: a folder, an object-store URL or a ``Location``. ``local_root``: where the
        local extras beside artefacts go (HTML reports, images, manifests); the root itself when
        that is a folder."""
        self.location: Location = open_location(root) if isinstance(root, (str, os.PathLike)) else root
        self.local = isinstance(self.location, LocalLocation)
        self.root = Path(str(self.location)) if self.local else None
        self.local_root = Path(local_root) if local_root is not None else self.root

    def where(self, key: str) -> str:
        """A key as a path or URL, for messages."""
        return f"{self.location}/{key}"

    @staticmethod
    def prefix(asset: str, partition: str | None) -> str:
        return f"{asset}/{partition or '__unpartitioned__'}"

    def folder(self, asset: str, partition: str | None) -> Path:
        """The local folder of an artefact's extras (removal manifest, HTML report)."""
        if self.local_root is None:
            raise TempoInputError("the artefact store is an object store and no local folder was given for "
                                  "the extras beside its artefacts (HTML reports, manifests)",
                                  path=str(self.location))
        return self.local_root / self.prefix(asset, partition)

    def sidecar_path(self, asset: str, partition: str | None) -> str | Path:
        key = f"{self.prefix(asset, partition)}/{SIDECAR}"
        return self.root / key if self.local else self.where(key)

    def exists(self, asset: str, partition: str | None) -> bool:
        return self.location.exists(f"{self.prefix(asset, partition)}/{SIDECAR}")

    def read_meta(self, asset: str, partition: str | None) -> dict[str, Any]:
        key = f"{self.prefix(asset, partition)}/{SIDECAR}"
        if not self.location.exists(key):
            raise TempoInputError(f"no artefact {asset}[{partition}] (materialise it first)",
                                  path=self.sidecar_path(asset, partition))
        try:
            return json.loads(self.location.read_bytes(key))
        except json.JSONDecodeError as exc:
            raise TempoInputError(f"corrupt sidecar: {exc}", path=self.sidecar_path(asset, partition),
                                  line=exc.lineno) from exc

    def open(self, asset: str, partition: str | None) -> Artefact:
        """The artefact with its sidecar; the value is read (sha256-verified) on first access."""
        meta = self.read_meta(asset, partition)
        prefix = self.prefix(asset, partition)
        main = f"{prefix}/{meta['file']}"
        version = main.rsplit("/", 1)[0]
        where = self.where(main)

        def read(name: str) -> bytes:
            key = f"{version}/{name}"
            if not self.location.exists(key):
                raise TempoInputError(f"artefact file missing for {asset}[{partition}]", path=self.where(key))
            return self.location.read_bytes(key)

        def load() -> Any:
            data = read(meta["file"].rsplit("/", 1)[-1])
            if sha256_bytes(data) != meta["sha256"]:
                raise TempoInputError(f"sha256 mismatch: sidecar says {meta['sha256']}, file has "
                                      f"{sha256_bytes(data)}", path=where)
            return decode_value(meta["format"], read, where)

        return Artefact(meta=meta, loader=load)

    def write(self, asset: str, partition: str | None, obj: Any, binding: Mapping[str, Any],
              run_id: str | None = None) -> dict[str, Any]:
        """Write ``obj`` to a new version, then switch the sidecar to it (the last, atomic step)."""
        check_binding(asset, partition, binding)
        fmt, main, parts = encode_value(obj)
        digest = sha256_bytes(parts[main])
        prefix = self.prefix(asset, partition)
        version = digest[:20]
        for name, data in parts.items():
            if name != main:
                self.location.write_bytes(f"{prefix}/{VERSIONS}/{version}/{name}", data)
        self.location.write_bytes(f"{prefix}/{VERSIONS}/{version}/{main}", parts[main])
        previous = self.read_meta(asset, partition).get("version") if self.exists(asset, partition) else None
        meta = dict(binding)
        meta.update(
            asset=asset, partition=partition, format=fmt, file=f"{VERSIONS}/{version}/{main}", version=version,
            sha256=digest, run_id=run_id,
            written_at=datetime.now(timezone.utc).isoformat(timespec="microseconds"),
        )
        self.location.write_bytes(f"{prefix}/{SIDECAR}", canonical_json(meta).encode("utf-8"))
        self._collect(prefix, keep={version, previous})
        return meta

    def _collect(self, prefix: str, keep: set[str | None]) -> None:
        """Drop versions other than the current and the previous one (readers hold at most those)."""
        for name in self.location.list(f"{prefix}/{VERSIONS}"):
            if name not in keep:
                self.location.delete_tree(f"{prefix}/{VERSIONS}/{name}")


@dataclass
class WindowArtefactSet:
    """Window partitions of one upstream asset a cutoff asset may read (e.g. the recipes a submission applies).

    Only windows whose ``t0`` is at or before the cutoff release are offered (``available``), and
    ``get`` refuses any other key and any artefact whose ``max_source_date`` is after the cutoff.
    """

    asset: str
    limit_release: str
    limit_date: date
    windows: list[str]
    fetch: Callable[[str], Artefact]
    exists: Callable[[str], bool]
    read: list[str] = field(default_factory=list)

    def available(self) -> list[str]:
        """The admissible windows whose artefact is stored."""
        return [w for w in self.windows if self.exists(w)]

    def get(self, key: str) -> Artefact:
        if key not in self.windows:
            raise TempoInputError(f"{self.asset}[{key}]: not a window whose t0 is at or before the cutoff "
                                  f"{self.limit_release!r}; refusing to read it")
        artefact = self.fetch(key)
        if artefact.max_source_date > self.limit_date:
            raise CutoffViolation(f"{self.asset}[{key}]", artefact.max_source_date, self.limit_date,
                                  what=f"artefact read at cutoff {self.limit_release!r}")
        self.read.append(key)
        return artefact
