"""Fingerprints of what each artefact read, and its state against the archive as it is now.

Every artefact's sidecar records ``sources``: the raw release files it read (release, path,
sha256) and a reference ``{"artefact": "asset[partition]", "sha256"}`` to each upstream artefact.
:func:`fingerprint` hashes exactly that, with the code version that computed it (and any extra
identity such as a recipe hash): two artefacts with the same fingerprint read the same bytes
with the same code. The asset layer records it in the sidecar and hands it to Dagster as the
materialisation's data version.

:func:`artefact_state` says what one stored (or expected) artefact is now:

- ``ok``: every input it read is unchanged and is still what its partition reads;
- ``stale``: an input it read changed, is gone, or is no longer the one its partition reads (a
  cutoff whose previous release changed because a release was inserted; a submission for which a
  newer frozen recipe applies; a benchmark missing a method registered since, or holding one no
  longer registered), or its declared code version changed. Only its own inputs count, as in
  Dagster's "Unsynced": an upstream that is stale but not rebuilt yet changes nothing it read
  (``tempo materialize`` rebuilds in dependency order, and within a run what reads a rebuilt asset);
- ``superseded``: its window is no longer a window of the archive (a release was inserted
  inside it); kept as history, never rebuilt and never re-scored;
- ``missing``: its partition is in the plan and nothing is stored;
- ``failed``: the latest run that built it failed after it was written, or a blocking check on it
  failed;
- ``claimed``: TEST was claimed for the window and no score was written: in flight, or its run
  died (``core.storage.claims.TEST_STATES`` says which, and the one command to run);
- ``unchecked``: stored and current, but its blocking checks never ran on it in this instance
  (a kill between the write and the checks, a second instance, a restored store):
  ``tempo materialize`` and the sensor run exactly those checks before anything reads it.

No dagster import here: the callers pass what the instance and the store hold.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping, Sequence

from tempo_assets.core.evaluation.benchmark import stale_inputs
from tempo_assets.core.base.windows import is_window_key, method_of_partition, split_window_key

STATES = ("ok", "stale", "superseded", "missing", "failed", "claimed", "unchecked")
# artefacts never rebuilt once written: the recipe is frozen, TEST is read once (test_growth, the
# only reader of raw TEST data) and scored once (docs/PROTOCOL.md); their staleness is reported but
# does not make what reads them stale again and again
FROZEN_ASSETS = frozenset({"frozen_recipe", "test_growth", "test_score"})


def fingerprint(sources: Iterable[Mapping[str, Any]], code_version: str,
                extra: Mapping[str, Any] | None = None) -> str:
    """sha256 of the inputs an artefact read (their sha256 and partition keys) and its code version.

    ``sources`` is a sidecar's ``sources`` list; the order of entries does not matter.
    """
    entries = sorted(json.dumps(dict(s), sort_keys=True, default=str) for s in sources)
    document = {"code_version": str(code_version), "sources": entries,
                "extra": {str(k): str(v) for k, v in sorted((extra or {}).items())}}
    return hashlib.sha256(json.dumps(document, sort_keys=True).encode("utf-8")).hexdigest()


def parse_ref(ref: str) -> tuple[str, str | None]:
    """``"asset[partition]" -> (asset, partition)``; ``None`` for an unpartitioned asset."""
    asset, _, rest = str(ref).partition("[")
    partition = rest[:-1] if rest.endswith("]") else rest
    return asset, (None if partition in ("", "None") else partition)


def ref(asset: str, partition: str | None) -> str:
    return f"{asset}[{partition}]"


def read_refs(sources: Iterable[Mapping[str, Any]]) -> dict[str, str | None]:
    """``"asset[partition]" -> sha256`` of every upstream artefact a sidecar says it read."""
    return {str(s["artefact"]): s.get("sha256") for s in sources if "artefact" in s}


def window_releases(key: str) -> list[str]:
    """The release ids of a window key (a superseded one's may no longer be in the archive)."""
    return list(split_window_key(key) or ())


def superseded_reason(window: str, releases: Sequence[str]) -> str:
    """Why ``window`` is no longer a window of an archive with ``releases`` (oldest first)."""
    members = window_releases(window)
    gone = [r for r in members if r not in releases]
    if gone:
        return f"release(s) {', '.join(gone)} no longer in the archive"
    inside = [r for r in releases if members[0] < r < members[-1] and r not in members]
    if inside:
        return (f"release(s) {', '.join(inside)} now lie inside it: its TRAIN/VALID/TEST spans changed; "
                "kept as history with its scores, never re-scored")
    return "no longer a window of the archive (rolling or declared in windows.yaml)"


@dataclass(frozen=True)
class ArtefactState:
    """One line of ``tempo status``."""

    asset: str
    partition: str | None
    state: str
    reason: str = ""
    stored: bool = False
    check_failed: bool = False

    def line(self) -> str:
        return f"{ref(self.asset, self.partition)} {self.state} {self.reason or '-'}".rstrip()

    def as_dict(self) -> dict[str, Any]:
        return {"asset": self.asset, "partition": self.partition, "state": self.state, "reason": self.reason,
                "stored": self.stored}


@dataclass(frozen=True)
class Plan:
    """What the archive implies now: release ids oldest first, window keys, per cutoff the window
    whose frozen recipe a submission there applies (the latest frozen one with t0 <= the cutoff;
    None when none is frozen yet) and per window the registered methods its benchmark scores."""

    releases: Sequence[str]
    windows: Sequence[str]
    recipe_for_cutoff: Mapping[str, str | None]
    # the methods registered in ARCHIVE/methods.yaml and, per window, those its benchmark scores
    # (training date permitting: trained until t0 at the latest, or undeclared); None: not known
    methods: Sequence[str] | None = None
    window_methods: Mapping[str, Sequence[str]] | None = None

    def previous(self, release: str) -> str | None:
        ids = list(self.releases)
        if release not in ids or ids.index(release) == 0:
            return None
        return ids[ids.index(release) - 1]


def plan_reasons(asset: str, partition: str | None, refs: Mapping[str, str | None], plan: Plan) -> list[str]:
    """Inputs ``asset[partition]`` read that are no longer the ones its partition reads under ``plan``.

    A cutoff-partitioned artefact reads its own release and the previous one: any other release
    partition it read means the previous release changed (a release was inserted). A submission
    reads the frozen recipe of the latest window with ``t0 <=`` its cutoff.
    """
    reasons = []
    if partition is None or is_window_key(partition) or partition not in plan.releases:
        return reasons
    prev = plan.previous(partition)
    for upstream in sorted(refs):
        up_asset, up_key = parse_ref(upstream)
        if up_key is None:
            continue
        if is_window_key(up_key):
            if up_asset == "frozen_recipe" and asset == "submission":
                wanted = plan.recipe_for_cutoff.get(partition)
                if wanted is not None and wanted != up_key:
                    reasons.append(f"applies the recipe of {up_key}; the frozen recipe of {wanted} applies now")
                elif up_key not in plan.windows:
                    reasons.append(f"applies the recipe of {up_key}, a window superseded since")
            continue
        if up_key != partition and up_key != prev:
            reasons.append(f"read {upstream} but the release before {partition} is now {prev}")
    return reasons


def method_reasons(asset: str, partition: str | None, refs: Mapping[str, str | None], plan: Plan) -> list[str]:
    """A benchmark is stale when a method registered since is eligible for its window and was not
    read, or when it read the predictions of a method no longer registered (``ARCHIVE/methods.yaml``
    is one of its inputs)."""
    if asset != "benchmark" or plan.methods is None or plan.window_methods is None:
        return []
    read = {method_of_partition(parse_ref(r)[1]) for r in refs if parse_ref(r)[0] == "method_predictions"}
    wanted, registered = set(plan.window_methods.get(partition, ())), set(plan.methods)
    reasons = [f"method {key} registered since it was built, not scored yet (scored from the stored test_growth; "
               "TEST is not read again)" for key in sorted(wanted - read)]
    reasons += [f"scored method {key}, no longer registered" for key in sorted(read - registered)]
    return reasons


@dataclass(frozen=True)
class CurrentInputs:
    """What an artefact is compared with now: ``current_sha(ref)``, the sha256 stored now for an upstream
    ``"asset[partition]"`` (None if gone); ``file_sha``, the release manifests' ``(release, path) ->
    sha256``; ``code_version``, the asset's code version now."""

    current_sha: Callable[[str], str | None]
    file_sha: Mapping[tuple[str, str], str | None] | None = None
    code_version: str | None = None


@dataclass(frozen=True)
class Verdicts:
    """What the instance says about an artefact: ``failed``, the reason of a failed run after it was
    written; ``failed_check``, that of a blocking check that failed on it; ``claimed``, the reason of a
    TEST claim with no score."""

    failed: str | None = None
    failed_check: str | None = None
    claimed: str | None = None


def artefact_state(asset: str, partition: str | None, meta: Mapping[str, Any] | None, plan: Plan,
                   now: CurrentInputs, verdicts: Verdicts = Verdicts()) -> ArtefactState:
    """The state of ``asset[partition]`` given its sidecar ``meta`` (None when nothing is stored), what it
    is compared with ``now`` and the instance's ``verdicts`` on it."""
    live = partition is None or partition in plan.releases or partition in plan.windows
    if not live:
        if meta is None:
            raise ValueError(f"{ref(asset, partition)}: nothing stored and not in the plan")
        reason = (superseded_reason(partition, plan.releases) if is_window_key(partition)
                  else f"release {partition} no longer in the archive")
        return ArtefactState(asset, partition, "superseded", reason, stored=True)
    failed, failed_check, claimed = verdicts.failed, verdicts.failed_check, verdicts.claimed
    if claimed and meta is None:  # a TEST claim outranks the failed run that took it: the claim says what to do
        return ArtefactState(asset, partition, "claimed", claimed)
    if failed:
        return ArtefactState(asset, partition, "failed", failed, stored=meta is not None)
    if failed_check and meta is not None:
        return ArtefactState(asset, partition, "failed", failed_check, stored=True, check_failed=True)
    if meta is None:
        return ArtefactState(asset, partition, "missing", "not materialised")
    sources = list(meta.get("sources", []))
    refs = read_refs(sources)
    reasons = []
    recorded_code = meta.get("code_version")
    if now.code_version and recorded_code and recorded_code != now.code_version:
        reasons.append(f"code changed ({recorded_code} -> {now.code_version})")
    artefact_sha = {r: now.current_sha(r) for r in refs}
    reasons += stale_inputs(sources, artefact_sha, now.file_sha or {})
    reasons += plan_reasons(asset, partition, refs, plan)
    reasons += method_reasons(asset, partition, refs, plan)
    if reasons:
        if asset in FROZEN_ASSETS:
            reasons.append("kept: frozen artefacts are not rebuilt (docs/PROTOCOL.md)")
        return ArtefactState(asset, partition, "stale", "; ".join(sorted(set(reasons), key=reasons.index)),
                             stored=True)
    return ArtefactState(asset, partition, "ok", f"fingerprint {str(meta.get('fingerprint') or '?')[:12]}",
                         stored=True)


def needs_build(state: ArtefactState) -> bool:
    """Whether ``tempo materialize`` and the sensor (re)build this artefact.

    Missing ones are built; stale ones and those of a failed run rebuilt, except a frozen recipe
    or a TEST score already stored (never re-frozen, never re-scored); superseded and claimed
    ones never, nor one whose blocking check failed (its input must be fixed first, which makes
    it stale).
    """
    if state.state == "missing":
        return True
    if state.check_failed:
        return False
    if state.state in ("stale", "failed"):
        return not (state.stored and state.asset in FROZEN_ASSETS)
    return False
