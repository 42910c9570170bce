"""Windows and their roles: the one place that knows window arithmetic (docs/PROTOCOL.md, Windows).

A window ``W = (t-2, t-1, t0, t1)`` is keyed ``t-2__t-1__t0__t1``. :data:`ROLE_BOUND` is the role
table: which window release bounds everything a role may read (TRAIN ``<= t-1``, VALID ``<= t0``,
the TEST refit at ``t0``, TEST ``<= t1``). The IO manager, the cutoff audit, the sensor, the CLI
planner and the report all read windows through this module; none splits a key itself.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

import yaml

from tempo_assets.core.base.errors import TempoInputError

WINDOW_SEPARATOR = "__"
POSITIONS: tuple[str, ...] = ("t-2", "t-1", "t0", "t1")
ROLES: tuple[str, ...] = ("train", "valid", "refit", "test")
# role -> the window release whose as-of date bounds everything read under that role
ROLE_BOUND: dict[str, str] = {"train": "t-1", "valid": "t0", "refit": "t0", "test": "t1"}
# window assets -> the window_role their artefact records (and is audited against)
ASSET_ROLE: dict[str, str] = {"valid_selection": "valid", "frozen_recipe": "valid", "test_growth": "test",
                              "test_score": "test", "benchmark": "test", "valid_evaluation_set": "valid"}


# Dagster joins a multi-partition key's dimensions with "|" in dimension-name order:
# method_predictions' cutoffs x methods keys read ``<cutoff>|<method>``
MULTI_SEPARATOR = "|"


def release_of_partition(key: str) -> str:
    """The release a release/cutoff partition key is bound by: itself, or a ``<cutoff>|<method>`` key's cutoff."""
    return str(key).split(MULTI_SEPARATOR, 1)[0]


def cutoff_method_key(cutoff: str, method: str) -> str:
    """The ``method_predictions`` partition of ``method`` at ``cutoff``."""
    return f"{cutoff}{MULTI_SEPARATOR}{method}"


def method_of_partition(key: str) -> str:
    """The method of a ``<cutoff>|<method>`` partition key (``cutoff_method_key``'s inverse)."""
    return str(key).split(MULTI_SEPARATOR, 1)[-1]


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

    def release_for(self, position: str) -> str:
        """The release id at ``position`` (one of ``t-2``, ``t-1``, ``t0``, ``t1``)."""
        try:
            return dict(zip(POSITIONS, self.releases))[position]
        except KeyError:
            raise TempoInputError(f"unknown window position {position!r} (expected one of {POSITIONS})") from None

    def bound_of(self, role: str) -> str:
        """The last release a ``role`` input of this window may read."""
        if role not in ROLE_BOUND:
            raise TempoInputError(f"unknown window role {role!r} (expected one of {ROLES})")
        return self.release_for(ROLE_BOUND[role])

    @property
    def recipe_labels(self) -> str:
        """The release whose reranker labels the window's recipe is trained on wherever it is read at its
        frozen thresholds: TRAIN, ``t-1`` (growth ``(t-2, t-1]``), in VALID selection, ``test_score`` and
        ``benchmark`` alike.

        VALID fixes each threshold for the rerankers trained on these labels (and early-stopped on
        VALID). A refit on the ``t0`` labels would train on another positive rate and move the score
        scale under the frozen threshold (on ``data/``'s second window the labelled candidates' CC
        positive rate is 0.160 at ``t-1`` and 0.095 at ``t0``), so TEST scores the rerankers VALID saw,
        fed by the corpus, IA and candidate sources of ``t0``. A CAFA submission, which has no
        threshold, refits on its own cutoff's labels.
        """
        return self.t_minus_1

    def growth_span(self, role: str) -> tuple[str, str]:
        """``(old, new)`` releases of the growth a role is evaluated on: VALID (t-1, t0], TEST (t0, t1]."""
        spans = {"valid": (self.t_minus_1, self.t0), "test": (self.t0, self.t1),
                 "train": (self.t_minus_2, self.t_minus_1)}
        if role not in spans:
            raise TempoInputError(f"role {role!r} has no growth span (train, valid, test)")
        return spans[role]


def split_window_key(key: str) -> tuple[str, ...] | None:
    """The four release ids of a key shaped ``a__b__c__d`` (order unchecked), else None."""
    parts = tuple(str(key).split(WINDOW_SEPARATOR))
    return parts if len(parts) == 4 and all(parts) else None


def parse_window_key(key: str) -> Window:
    """``'a__b__c__d' -> Window('a', 'b', 'c', 'd')``; raises on any other shape."""
    parts = split_window_key(key)
    if parts is None:
        raise TempoInputError(f"window key {key!r} is not four release ids joined by {WINDOW_SEPARATOR!r}")
    if list(parts) != sorted(parts) or len(set(parts)) != 4:
        raise TempoInputError(f"window key {key!r}: releases must be strictly increasing")
    return Window(*parts)


def try_parse_window_key(key: str | None) -> Window | None:
    """The window of ``key``, or None when ``key`` is not a well-formed window key."""
    try:
        return parse_window_key(key) if key is not None else None
    except TempoInputError:
        return None


def is_window_key(key: str | None) -> bool:
    return key is not None and WINDOW_SEPARATOR in str(key)


def window_key(positions: dict[str, str]) -> str:
    """The key of a ``{position: release}`` mapping (all four positions)."""
    missing = [p for p in POSITIONS if p not in positions]
    if missing:
        raise TempoInputError(f"window lacks position(s) {missing}")
    return parse_window_key(WINDOW_SEPARATOR.join(positions[p] for p in POSITIONS)).key


def inputs_of(window: Window | str) -> dict[str, tuple[str, ...]]:
    """role -> the window's releases (oldest first) a window asset may read under that role.

    These are the only release/cutoff partitions a window asset reads: TRAIN artefacts at t-2 and
    t-1, VALID growth up to t0, the TEST refit's TRAIN artefacts up to t0, TEST growth up to t1.
    """
    window = parse_window_key(window) if isinstance(window, str) else window
    index = {p: i for i, p in enumerate(POSITIONS)}
    return {role: window.releases[: index[bound] + 1] for role, bound in ROLE_BOUND.items()}


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
    """Windows declared in ``windows.yaml``: ``windows:`` a list of keys or of position mappings.

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
            positions = {str(k): str(v) for k, v in entry.items()}
            if "t-2" not in positions and positions.get("t-1") in known:
                positions["t-2"] = previous_release(known, positions["t-1"])
            missing = [p for p in POSITIONS if p not in positions]
            if missing:
                raise TempoInputError(f"{where} lacks role(s) {missing}", path=path)
            window = parse_window_key(window_key(positions))
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
    return sorted(windows.values(),
                  key=lambda w: (order[w.t0], order[w.t1], order[w.t_minus_1], order[w.t_minus_2]))


def unique(items: Iterable[str]) -> list[str]:
    seen: dict[str, None] = {}
    for item in items:
        seen.setdefault(item, None)
    return list(seen)
