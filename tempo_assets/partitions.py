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

import dagster as dg
import sqlalchemy.exc

from tempo_assets.core.base.dates import parse_date
from tempo_assets.core.base.errors import TempoInputError
from tempo_assets.core.methods.registry import load_registry
# window arithmetic lives in core/base/windows.py; re-exported here for the wiring layer
from tempo_assets.core.base.windows import (  # noqa: F401
    WINDOW_SEPARATOR, Window, archive_windows, cutoff_keys, declared_windows, is_window_key, parse_window_key,
    previous_release, rolling_windows, unique,
)

RELEASES = dg.DynamicPartitionsDefinition(name="releases")
CUTOFFS = dg.DynamicPartitionsDefinition(name="cutoffs")
WINDOWS = dg.DynamicPartitionsDefinition(name="windows")
METHODS = dg.DynamicPartitionsDefinition(name="methods")
CUTOFF_METHODS = dg.MultiPartitionsDefinition({"cutoff": CUTOFFS, "method": METHODS})


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
    """Partition keys for an ``Archive`` (core/inputs/releases.py): releases oldest first."""
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
    """Add the plan's keys missing from the instance; return the keys this call added per partition.

    Safe under concurrency: when another process adds some of the same keys first (the storage's
    unique constraint refuses the second insert), the keys still missing are added again.
    """
    return {definition.name: _add_missing_keys(instance, definition.name, keys)
            for definition, keys in ((RELEASES, plan.releases), (CUTOFFS, plan.cutoffs), (WINDOWS, plan.windows),
                                     (METHODS, plan.methods))}


def _add_missing_keys(instance: dg.DagsterInstance, name: str, keys: list[str], attempts: int = 5) -> list[str]:
    for attempt in range(attempts):
        existing = set(instance.get_dynamic_partitions(name))
        new = [k for k in keys if k not in existing]
        if not new:
            return []
        try:
            instance.add_dynamic_partitions(name, new)
            return new
        except sqlalchemy.exc.IntegrityError:  # a concurrent launch added some of them: re-read, retry
            if attempt == attempts - 1:
                raise
    return []
