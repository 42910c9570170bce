"""The registry of third-party methods: ``ARCHIVE/methods.yaml``, validated, written atomically.

A method is either a *command* (its own folder, mounted read-only in the fence and used as the
working directory, and a shell command run there at each cutoff) or *precomputed* (a folder of
CAFA files ``<cutoff>.tsv`` with the date they were produced). Each registration has a key,
``NAME`` or ``NAME@VERSION``: a new version is a new registration, and both are kept so the two
can be compared on the same window. The key is the ``methods`` partition key.

File layout::

    methods:
      - name: freqprior
        version: "1"
        kind: command
        dir: /abs/path/examples/methods/freqprior
        command: python3 predict.py
        trained_until: null        # undeclared: scored, but marked "training date undeclared"
        timeout_s: 600
        memory_gb: 2.0
      - name: lafa-late
        kind: precomputed
        predictions: /abs/path/to/dir
        produced_at: 2019-01-20
"""
from __future__ import annotations

import re
from datetime import date
from pathlib import Path
from typing import Literal, Optional

import pydantic
import yaml

from tempo_assets.core.base.errors import TempoInputError
from tempo_assets.core.base.io import REPO_ROOT, atomic_write

REGISTRY_NAME = "methods.yaml"
NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
VERSION_SEPARATOR = "@"
DEFAULT_TIMEOUT_S = 3600
DEFAULT_MEMORY_GB = 4.0

__all__ = ["MethodSpec", "Registry", "REGISTRY_NAME", "add_method", "load_registry", "method_key",
           "refuse_exposing", "registry_path", "remove_method", "save_registry"]


def method_key(name: str, version: str | None) -> str:
    """``NAME`` or ``NAME@VERSION``: the registration's key and ``methods`` partition key."""
    return f"{name}{VERSION_SEPARATOR}{version}" if version else name


class MethodSpec(pydantic.BaseModel):
    """One registration (a method at one version)."""

    model_config = pydantic.ConfigDict(extra="forbid", frozen=True)

    name: str
    version: Optional[str] = None
    kind: Literal["command", "precomputed"]
    dir: Optional[str] = None
    command: Optional[str] = None
    trained_until: Optional[date] = None
    timeout_s: int = pydantic.Field(DEFAULT_TIMEOUT_S, gt=0)
    memory_gb: float = pydantic.Field(DEFAULT_MEMORY_GB, gt=0)
    predictions: Optional[str] = None
    produced_at: Optional[date] = None

    @pydantic.field_validator("name", "version")
    @classmethod
    def _safe_name(cls, value: str | None) -> str | None:
        # names become partition keys and folder names: no '|' (multi-partition separator), no '/'
        if value is not None and not NAME_PATTERN.match(value):
            raise ValueError(f"{value!r} must match {NAME_PATTERN.pattern}")
        if value is not None and "__" in value:  # '__' joins the releases of a window key
            raise ValueError(f"{value!r} must not contain '__'")
        return value

    @pydantic.model_validator(mode="after")
    def _kind_fields(self) -> "MethodSpec":
        if self.kind == "command":
            missing = [f for f in ("dir", "command") if not getattr(self, f)]
            extra = [f for f in ("predictions", "produced_at") if getattr(self, f) is not None]
        else:
            missing = [f for f in ("predictions", "produced_at") if getattr(self, f) is None]
            extra = [f for f in ("dir", "command") if getattr(self, f) is not None]
        if missing:
            raise ValueError(f"a {self.kind} method needs {missing}")
        if extra:
            raise ValueError(f"a {self.kind} method takes no {extra}")
        return self

    @property
    def key(self) -> str:
        return method_key(self.name, self.version)

    @property
    def training_bound(self) -> date | None:
        """The date after which the method saw nothing: ``trained_until``, or ``produced_at``."""
        return self.trained_until if self.trained_until is not None else self.produced_at


class Registry(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid")

    methods: list[MethodSpec] = []

    def get(self, key: str) -> MethodSpec:
        for spec in self.methods:
            if spec.key == key:
                return spec
        raise TempoInputError(f"no method {key!r} is registered (registered: {self.keys() or 'none'})")

    def keys(self) -> list[str]:
        return [spec.key for spec in self.methods]


def registry_path(archive_root: str | Path) -> Path:
    return Path(archive_root) / REGISTRY_NAME


def _where(loc: tuple) -> str:
    out = ""
    for part in loc:
        out += f"[{part + 1}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def resolve_folder(archive_root: str | Path, folder: str) -> str:
    """A registered folder as an absolute path: a relative one is read against the archive root,
    else (when no such folder is there) against the repository root (``examples/methods/...``)."""
    path = Path(folder)
    if path.is_absolute():
        return str(path)
    in_archive = Path(archive_root) / path
    return str((in_archive if in_archive.exists() else REPO_ROOT / path).resolve())


def load_registry(archive_root: str | Path, resolve: bool = True) -> Registry:
    """The archive's registry (empty when there is no ``methods.yaml``); errors name the key.

    ``resolve``: relative ``dir`` / ``predictions`` made absolute (:func:`resolve_folder`); the
    CLI's add/remove keep them as written when they rewrite the file.
    """
    path = registry_path(archive_root)
    if not path.exists():
        return Registry()
    try:
        document = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as exc:
        line = getattr(getattr(exc, "problem_mark", None), "line", None)
        raise TempoInputError(f"not valid YAML: {exc}", path=path, line=None if line is None else line + 1) from exc
    if not isinstance(document, dict):
        raise TempoInputError("expected a mapping with a top-level 'methods:' list", path=path)
    try:
        registry = Registry.model_validate(document)
    except pydantic.ValidationError as exc:
        problems = "; ".join(f"{_where(e['loc']) or 'methods'}: {e['msg']}" for e in exc.errors())
        raise TempoInputError(f"invalid method registry: {problems}", path=path) from None
    keys = registry.keys()
    duplicated = sorted({k for k in keys if keys.count(k) > 1})
    if duplicated:
        raise TempoInputError(f"methods registered twice: {duplicated}", path=path)
    if resolve:
        registry.methods = [spec.model_copy(update={f: resolve_folder(archive_root, getattr(spec, f))
                                                    for f in ("dir", "predictions") if getattr(spec, f)})
                            for spec in registry.methods]
    return registry


def save_registry(archive_root: str | Path, registry: Registry) -> Path:
    path = registry_path(archive_root)
    document = {"methods": [spec.model_dump(mode="json", exclude_none=True) for spec in registry.methods]}
    with atomic_write(path) as handle:
        handle.write(yaml.safe_dump(document, sort_keys=False))
    return path


def refuse_exposing(folder: str | Path, protected: dict[str, Path]) -> None:
    """A method folder may not contain what the fence hides (it is mounted whole)."""
    folder = Path(folder).resolve()
    for what, path in protected.items():
        path = Path(path).resolve()
        if path == folder or folder in path.parents:
            raise TempoInputError(f"method folder contains the {what} ({path}); the fence would expose it",
                                  path=folder)


def add_method(archive_root: str | Path, spec: MethodSpec, protected: dict[str, Path] | None = None) -> MethodSpec:
    """Register ``spec`` (paths made absolute); refuses a key already registered."""
    registry = load_registry(archive_root, resolve=False)
    if spec.key in registry.keys():
        raise TempoInputError(f"method {spec.key!r} is already registered; register a new --version "
                              f"or `tempo method remove {spec.key}` first", path=registry_path(archive_root))
    updates = {}
    if spec.kind == "command":
        folder = Path(spec.dir).resolve()
        if not folder.is_dir():
            raise TempoInputError("method folder does not exist", path=folder)
        refuse_exposing(folder, {"archive": Path(archive_root), **(protected or {})})
        updates["dir"] = str(folder)
    else:
        folder = Path(spec.predictions).resolve()
        if not folder.is_dir():
            raise TempoInputError("predictions folder does not exist", path=folder)
        updates["predictions"] = str(folder)
    spec = spec.model_copy(update=updates)
    registry.methods.append(spec)
    save_registry(archive_root, registry)
    return spec


def remove_method(archive_root: str | Path, key: str) -> MethodSpec:
    """Unregister ``key`` (``NAME`` or ``NAME@V``); stored predictions stay as history."""
    registry = load_registry(archive_root, resolve=False)
    matches = [s for s in registry.methods if s.key == key]
    if not matches:
        versions = [s.key for s in registry.methods if s.name == key]
        hint = f"; name the version: {', '.join(versions)}" if versions else ""
        raise TempoInputError(f"no method {key!r} is registered{hint}", path=registry_path(archive_root))
    registry.methods = [s for s in registry.methods if s.key != key]
    save_registry(archive_root, registry)
    return matches[0]
