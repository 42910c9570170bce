"""Dynamic partitions (releases, cutoffs, windows, methods) and the window arithmetic behind them.

Partition keys come from the release archive: every release is a ``releases`` key; every release
with a predecessor is a ``cutoffs`` key (TRAIN artefacts need the previous release for reranker
labels); every run of four consecutive releases is a ``windows`` key ``t-2__t-1__t0__t1``, plus any
declared in ``ARCHIVE/windows.yaml``; every method registered in ``ARCHIVE/methods.yaml`` is a
``methods`` key (``NAME`` or ``NAME@VERSION``), and ``method_predictions`` is partitioned by
``cutoffs x methods``. Dagster's ``StaticPartitionMapping`` refuses dynamic
partitions, so window assets read release/cutoff artefacts through ``AllPartitionMapping`` and the
IO manager hands them a role-gated lazy set (``io_managers.ArtefactSet``): only the partitions the
window's role allows can be loaded.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Iterable, Sequence

import dagster as dg
import yaml

from tempo_assets.core.dates import parse_date
from tempo_assets.core.errors import TempoInputError
from tempo_assets.core.method_registry import load_registry

RELEASES = dg.DynamicPartitionsDefinition(name="releases")
CUTOFFS = dg.DynamicPartitionsDefinition(name="cutoffs")
WINDOWS = dg.DynamicPartitionsDefinition(name="windows")
METHODS = dg.DynamicPartitionsDefinition(name="methods")
CUTOFF_METHODS = dg.MultiPartitionsDefinition({"cutoff": CUTOFFS, "method": METHODS})

WINDOW_SEPARATOR = "__"
ROLES = ("t-2", "t-1", "t0", "t1")


@dataclass(frozen=True)
class Window:
    """Four releases ``t-2 < t-1 < t0 < t1``: TRAIN <= t-1, VALID (t-1, t0], TEST (t0, t1]."""

    t_minus_2: str
    t_minus_1: str
    t0: str
    t1: str

    @property
    def key(self) -> str:
        return WINDOW_SEPARATOR.join(self.releases)

    @property
    def releases(self) -> tuple[str, str, str, str]:
        return (self.t_minus_2, self.t_minus_1, self.t0, self.t1)

    def release_for(self, role: str) -> str:
        """The release id playing ``role`` (one of ``t-2``, ``t-1``, ``t0``, ``t1``)."""
        try:
            return dict(zip(ROLES, self.releases))[role]
        except KeyError:
            raise TempoInputError(f"unknown window role {role!r} (expected one of {ROLES})") from None


def parse_window_key(key: str) -> Window:
    """``'a__b__c__d' -> Window('a', 'b', 'c', 'd')``; raises on any other shape."""
    parts = str(key).split(WINDOW_SEPARATOR)
    if len(parts) != 4 or not all(parts):
        raise TempoInputError(
            f"window key {key!r} is not four release ids joined by {WINDOW_SEPARATOR!r}"
        )
    if list(parts) != sorted(parts) or len(set(parts)) != 4:
        raise TempoInputError(f"window key {key!r}: releases must be strictly increasing")
    return Window(*parts)


def is_window_key(key: str) -> bool:
    return WINDOW_SEPARATOR in str(key)


def cutoff_keys(release_ids: Sequence[str]) -> list[str]:
    """Releases at which TRAIN artefacts can be built: every release that has a previous one."""
    return list(release_ids[1:])


def previous_release(release_ids: Sequence[str], release_id: str) -> str:
    """The release just before ``release_id`` in archive order."""
    ids = list(release_ids)
    if release_id not in ids:
        raise TempoInputError(f"release {release_id!r} is not in the archive ({ids})")
    index = ids.index(release_id)
    if index == 0:
        raise TempoInputError(f"release {release_id!r} is the oldest; it has no previous release")
    return ids[index - 1]


def rolling_windows(release_ids: Sequence[str]) -> list[Window]:
    """Every run of four consecutive releases (rolling origin), oldest first."""
    ids = list(release_ids)
    return [Window(*ids[i : i + 4]) for i in range(len(ids) - 3)]


def declared_windows(path: str | Path, release_ids: Sequence[str]) -> list[Window]:
    """Windows declared in ``windows.yaml``: ``windows:`` a list of keys or of role mappings.

    A mapping may omit ``t-2``; it then defaults to the release before ``t-1``.
    """
    path = Path(path)
    if not path.exists():
        return []
    try:
        document = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as exc:
        raise TempoInputError(f"not valid YAML: {exc}", path=path) from exc
    entries = document.get("windows", []) if isinstance(document, dict) else None
    if not isinstance(entries, list):
        raise TempoInputError("expected a top-level 'windows:' list", path=path)
    known = list(release_ids)
    windows = []
    for number, entry in enumerate(entries, start=1):
        where = f"windows[{number}]"
        if isinstance(entry, str):
            window = parse_window_key(entry)
        elif isinstance(entry, dict):
            roles = {str(k): str(v) for k, v in entry.items()}
            if "t-2" not in roles and roles.get("t-1") in known:
                roles["t-2"] = previous_release(known, roles["t-1"])
            missing = [role for role in ROLES if role not in roles]
            if missing:
                raise TempoInputError(f"{where} lacks role(s) {missing}", path=path)
            window = parse_window_key(WINDOW_SEPARATOR.join(roles[r] for r in ROLES))
        else:
            raise TempoInputError(f"{where} must be a key string or a role mapping", path=path)
        unknown = [rid for rid in window.releases if rid not in known]
        if unknown:
            raise TempoInputError(f"{where} names release(s) not in the archive: {unknown}", path=path)
        windows.append(window)
    return windows


def archive_windows(release_ids: Sequence[str], windows_yaml: str | Path | None = None) -> list[Window]:
    """Rolling windows plus declared ones, deduplicated, ordered by (t0, t1, t-1, t-2)."""
    windows = {w.key: w for w in rolling_windows(release_ids)}
    if windows_yaml is not None:
        windows.update({w.key: w for w in declared_windows(windows_yaml, release_ids)})
    order = {rid: i for i, rid in enumerate(release_ids)}
    return sorted(
        windows.values(),
        key=lambda w: (order[w.t0], order[w.t1], order[w.t_minus_1], order[w.t_minus_2]),
    )


@dataclass(frozen=True)
class PartitionPlan:
    """The partition keys an archive implies, oldest first."""

    releases: list[str]
    cutoffs: list[str]
    windows: list[str]
    as_of: dict[str, date]
    methods: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, list[str]]:
        return {"releases": self.releases, "cutoffs": self.cutoffs, "windows": self.windows,
                "methods": self.methods}


def check_as_of_order(manifests) -> None:
    """Refuse an archive whose as-of dates do not strictly increase with the (sortable) release ids.

    A release whose as-of date is not before the next release's (a file in it newer than the
    next release, e.g. embeddings computed later) would put TRAIN data after VALID's end.
    """
    by_id = sorted(manifests, key=lambda m: m.id)
    for older, newer in zip(by_id, by_id[1:]):
        if parse_date(older.as_of) >= parse_date(newer.as_of):
            latest = max(older.files, key=lambda f: f.date)
            raise TempoInputError(
                f"release {older.id!r} is as of {parse_date(older.as_of).isoformat()} (its {latest.kind} file "
                f"{latest.path!r} is dated {latest.date.isoformat()}), not before the next release "
                f"{newer.id!r} (as of {parse_date(newer.as_of).isoformat()}): a file newer than its release",
                path=Path(older.folder) / "release.json")


def plan_partitions(archive) -> PartitionPlan:
    """Partition keys for an ``Archive`` (core/releases.py): releases oldest first."""
    manifests = archive.releases()
    ids = [m.id for m in manifests]
    for rid in ids:
        if WINDOW_SEPARATOR in rid:
            raise TempoInputError(f"release id {rid!r} must not contain {WINDOW_SEPARATOR!r}")
    as_of = {m.id: parse_date(m.as_of) for m in manifests}
    check_as_of_order(manifests)
    windows = archive_windows(ids, Path(archive.root) / "windows.yaml")
    methods = load_registry(archive.root).keys()
    return PartitionPlan(ids, cutoff_keys(ids), [w.key for w in windows], as_of, methods)


def register_partitions(instance: dg.DagsterInstance, plan: PartitionPlan) -> dict[str, list[str]]:
    """Add the plan's keys missing from the instance; return the newly added keys per partition."""
    added: dict[str, list[str]] = {}
    for definition, keys in ((RELEASES, plan.releases), (CUTOFFS, plan.cutoffs), (WINDOWS, plan.windows),
                            (METHODS, plan.methods)):
        existing = set(instance.get_dynamic_partitions(definition.name))
        new = [k for k in keys if k not in existing]
        if new:
            instance.add_dynamic_partitions(definition.name, new)
        added[definition.name] = new
    return added


def unique(items: Iterable[str]) -> list[str]:
    seen: dict[str, None] = {}
    for item in items:
        seen.setdefault(item, None)
    return list(seen)
