"""The state of every artefact of the graph, and which runs are ready: the store and the instance
read into ``core.storage.staleness``.

Used by ``tempo status``, ``tempo materialize`` and the archive sensor, so all three agree: an
artefact is rebuilt when it is missing or stale; a run is ready only when every upstream
partition it reads is stored, current (not stale) and passed its blocking checks in the
instance (asset check execution records); a failed check blocks the chain with its reason.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Iterable, Mapping

import dagster as dg
from dagster._core.event_api import PartitionKeyFilter

from tempo_assets.core.base.windows import is_window_key, parse_window_key, previous_release
from tempo_assets.core.inputs.releases import archive_release_dates, open_archive
from tempo_assets.core.methods.eligibility import window_method_keys
from tempo_assets.core.methods.registry import load_registry
from tempo_assets.core.pipeline.catalog import catalog_value, collect_catalog
from tempo_assets.core.storage import staleness
from tempo_assets.core.storage.artefacts import value_sha256
from tempo_assets.core.storage.claims import ClaimStore, WindowTest, window_test_state
from tempo_assets.core.storage.staleness import ArtefactState, needs_build, parse_ref, ref
from tempo_assets.fingerprints import code_versions
from tempo_assets.partitions import PartitionPlan, plan_partitions
from tempo_assets.runs import claim_ended

# each named job's selection (sensors.py builds the jobs from these); the SQL warehouse models
# run in the release, cutoff and window jobs like every other asset
RELEASE_ASSETS = ["ontology", "release_annotations", "sequences", "embeddings",
                  "stg_annotations", "experimental_annotations"]
CUTOFF_ASSETS = ["knn_corpus", "ia_weights", "reranker_labels", "annotation_growth"]
WINDOW_ASSETS = ["valid_evaluation_set", "valid_selection", "frozen_recipe", "test_growth", "test_score", "benchmark"]
JOB_ASSETS = {"release_job": RELEASE_ASSETS, "cutoff_job": CUTOFF_ASSETS, "window_job": WINDOW_ASSETS,
              "submission_job": ["submission"], "catalog_job": ["benchmark_catalog"]}
PARTITION_ASSETS = {"releases": RELEASE_ASSETS, "cutoffs": CUTOFF_ASSETS + ["submission"],
                    "windows": WINDOW_ASSETS}


def window_tests(store, windows: Iterable[str], instance=None) -> dict[str, WindowTest]:
    """window -> its place in the TEST lifecycle (``core.storage.claims.TEST_STATES``)."""
    claims = ClaimStore.of(store)
    out = {}
    for window in windows:
        stored = [a for a in ("test_growth", "test_score") if store.exists(a, window)]
        out[window] = window_test_state(window, claims.claims_of(window), claims.burn_of(window), stored,
                                        lambda claim: claim_ended(instance, claim))
    return out


def claim_reason(asset: str, test: WindowTest) -> str | None:
    """Why ``asset`` (test_growth or test_score) of the window cannot be built now because of TEST's claims."""
    if test.state == "burned":
        return test.describe()
    if test.state in ("reading", "scoring", "dead") and (asset == "test_score" or test.asset == "test_growth"):
        return test.describe()
    return None


def blocking_checks(checks: Iterable[dg.AssetChecksDefinition]) -> dict[str, list[dg.AssetCheckKey]]:
    """asset name -> the keys of its blocking checks among ``checks``."""
    out: dict[str, list[dg.AssetCheckKey]] = {}
    for check in checks:
        for spec in check.check_specs:
            if spec.blocking:
                out.setdefault(spec.asset_key.to_user_string(), []).append(spec.key)
    return out


def asset_deps(assets: Iterable[Any]) -> dict[str, set[str]]:
    """asset name -> the names of the assets it reads, for the asset definitions ``assets``."""
    out: dict[str, set[str]] = {}
    for definition in assets:
        for key, spec in definition.specs_by_key.items():
            out[key.to_user_string()] = {d.asset_key.to_user_string() for d in spec.deps}
    return out


@dataclass(frozen=True)
class DefinedGraph:
    """What an artefact's state depends on in the code location: each asset's declared code version, the
    assets it reads, and its blocking checks.

    Callers pass it in (the CLI from ``definitions.defs``, the sensor and the catalog asset from their
    context's repository), so this module never imports the definitions, which import it.
    """

    code_versions: Mapping[str, str]
    deps: Mapping[str, set[str]]
    blocking: Mapping[str, list[dg.AssetCheckKey]]

    @classmethod
    def of(cls, repository: dg.RepositoryDefinition) -> "DefinedGraph":
        """The graph of a repository (``defs.get_repository_def()``, ``context.repository_def``)."""
        assets = list({id(a): a for a in repository.assets_defs_by_key.values() if a.is_executable}.values())
        checks = list({id(c): c for c in repository.asset_checks_defs_by_key.values()}.values())
        return cls.of_lists(assets, checks)

    @classmethod
    def of_lists(cls, assets: Iterable[dg.AssetsDefinition], checks: Iterable[dg.AssetChecksDefinition]
                 ) -> "DefinedGraph":
        """The graph of asset and check definitions (``definitions.ASSETS``, ``definitions.ASSET_CHECKS``)."""
        assets = list(assets)
        return cls(code_versions(assets), asset_deps(assets), blocking_checks(checks))


def latest_recipe_window(plan: PartitionPlan, cutoff: str, store) -> str | None:
    """The window whose recipe a submission at ``cutoff`` applies (as ``assets/methods.py``'s ``submission`` picks
    it): of the plan's windows with t0 <= cutoff and a frozen recipe, the latest by (t0, t1)."""
    order = {r: i for i, r in enumerate(plan.releases)}
    usable = [w for w in map(parse_window_key, plan.windows)
              if order.get(w.t0, 1 << 30) <= order.get(cutoff, -1) and store.exists("frozen_recipe", w.key)]
    return max(usable, key=lambda w: (order[w.t0], order[w.t1])).key if usable else None


def latest_window_at(plan: PartitionPlan, cutoff: str) -> str | None:
    """The plan's latest window (by t0, t1) with t0 <= cutoff, frozen or not."""
    order = {r: i for i, r in enumerate(plan.releases)}
    usable = [w for w in map(parse_window_key, plan.windows) if order.get(w.t0, 1 << 30) <= order.get(cutoff, -1)]
    return max(usable, key=lambda w: (order[w.t0], order[w.t1])).key if usable else None


@dataclass
class Step:
    """One run ``tempo materialize`` or the sensor may launch: a job on one partition."""

    job: str
    key: str
    assets: list[str]
    upstream: list[tuple[str, str]]
    todo: list[str] = field(default_factory=list)
    waiting: list[str] = field(default_factory=list)
    blocked: list[str] = field(default_factory=list)
    # why it can never run: its window's TEST was released (burned), so test_growth/test_score stay unbuilt
    burned: list[str] = field(default_factory=list)
    # stored partitions it reads (or keeps) whose blocking checks never ran in this instance:
    # (asset, partition, check keys) -- run on their own before the step (``check_runs``)
    unchecked: list[tuple[str, str, list]] = field(default_factory=list)
    token: str = ""

    @property
    def ready(self) -> bool:
        return bool(self.todo) and not self.waiting and not self.blocked and not self.unchecked and not self.burned

    @property
    def run_key(self) -> str:
        return f"{self.job}:{self.key}:{self.token[:16]}"


class GraphState:
    """States of the artefacts of ``plan`` (and of stored ones the plan no longer has).

    ``instance`` (optional) supplies failed runs and blocking-check results; ``exclude`` names
    assets left out (e.g. the SQL warehouse models when they are not built).
    """

    def __init__(self, store, plan: PartitionPlan, defined: DefinedGraph, archive=None, instance=None,
                 exclude: Iterable[str] = ()):
        self.store, self.plan, self.instance = store, plan, instance
        self.exclude = set(exclude)
        self.archive = archive
        self.code, self.deps = defined.code_versions, defined.deps
        self.core_plan = staleness.Plan(plan.releases, plan.windows,
                                        {c: latest_recipe_window(plan, c, store) for c in plan.cutoffs},
                                        *registered_methods(archive, plan))
        self._states: dict[str, ArtefactState] = {}
        self._checks: dict[tuple[str, str], tuple[str, str]] = {}
        self._failed_runs: dict[tuple[str, str], tuple[float, str, str]] | None = None
        self.tests = window_tests(store, plan.windows, instance)
        self._blocking = defined.blocking
        self._file_sha = self._manifest_shas()

    # ----------------------------------------------------------------------------- inputs

    def _manifest_shas(self) -> dict[tuple[str, str], str]:
        if self.archive is None:
            return {}
        return {(m.id, f"releases/{m.id}/{f.path}"): f.sha256 for m in self.archive.releases() for f in m.files}

    def _meta(self, asset: str, partition: str | None):
        return self.store.read_meta(asset, partition) if self.store.exists(asset, partition) else None

    def _current_sha(self, upstream: str) -> str | None:
        meta = self._meta(*parse_ref(upstream))
        return None if meta is None else meta.get("sha256")

    def failed_runs(self) -> dict[tuple[str, str], tuple[float, str, str]]:
        """(asset, partition) -> (start time, reason, run id) of the latest failed run that selected it."""
        if self._failed_runs is None:
            self._failed_runs = {}
            if self.instance is not None:
                for record in self.instance.get_run_records(
                        filters=dg.RunsFilter(statuses=[dg.DagsterRunStatus.FAILURE]), limit=500):
                    run = record.dagster_run
                    key = run.tags.get("dagster/partition")
                    started = record.start_time or record.create_timestamp.timestamp()
                    when = datetime.fromtimestamp(record.end_time or started, tz=timezone.utc)
                    reason = f"run {run.run_id[:8]} ({run.job_name}) failed at {when.isoformat(timespec='seconds')}"
                    for asset_key in run.asset_selection or ():
                        name = (asset_key.to_user_string(), key)
                        if name not in self._failed_runs or self._failed_runs[name][0] < started:
                            self._failed_runs[name] = (started, reason, run.run_id)
        return self._failed_runs

    def _failed_steps(self, run_id: str) -> set[str]:
        """Step keys (asset names: each asset is one op) that failed in ``run_id``."""
        events = self.instance.all_logs(run_id, of_type=dg.DagsterEventType.STEP_FAILURE)
        return {e.step_key for e in events}

    def _check_verdicts(self, asset: str, partition: str) -> tuple[list[str], list[dg.AssetCheckKey]]:
        """Names of ``asset[partition]``'s blocking checks that failed, and keys of those with no
        evaluation on the stored artefact (none, only planned, or older than the artefact)."""
        keys = self._blocking.get(asset, [])
        if not keys or self.instance is None:
            return [], []
        meta = self._meta(asset, partition) or {}
        written = datetime.fromisoformat(meta["written_at"]).timestamp() if meta.get("written_at") else None
        records = self.instance.event_log_storage.get_latest_asset_check_execution_by_key(
            keys, partition_filter=PartitionKeyFilter(key=partition))
        failed, pending = [], []
        for key in keys:
            record = records.get(key)
            status = getattr(getattr(record, "status", None), "value", None)
            # the evaluation's own time (the record's creation time is when the run planned it)
            when = None if record is None else (record.event.timestamp if record.event else record.create_timestamp)
            if record is None or status == "PLANNED" or (written is not None and when < written):
                pending.append(key)
            elif status == "FAILED":
                failed.append(key.name)
        return failed, pending

    def check_result(self, asset: str, partition: str) -> tuple[str, str]:
        """``("passed"|"failed"|"pending", reason)`` of ``asset[partition]``'s blocking checks in the instance.

        A check counts only when it was evaluated on the stored artefact (after it was written).
        """
        cached = self._checks.get((asset, partition))
        if cached is not None:
            return cached
        failed, pending = self._check_verdicts(asset, partition)
        result = ("passed", "")
        if failed:
            result = ("failed", f"blocking check(s) {', '.join(failed)} failed on {ref(asset, partition)}")
        elif pending:
            result = ("pending", f"blocking check(s) {', '.join(k.name for k in pending)} never ran on the stored "
                                 f"{ref(asset, partition)} in this instance (tempo materialize runs them)")
        self._checks[(asset, partition)] = result
        return result

    def unchecked_keys(self, asset: str, partition: str) -> list[dg.AssetCheckKey]:
        """The blocking checks of the stored ``asset[partition]`` with no evaluation since it was written."""
        return self._check_verdicts(asset, partition)[1]

    # ----------------------------------------------------------------------------- states

    def state(self, asset: str, partition: str | None) -> ArtefactState:
        name = ref(asset, partition)
        if name in self._states:
            return self._states[name]
        self._states[name] = ArtefactState(asset, partition, "ok")  # a cycle guard; the graph has none
        meta = self._meta(asset, partition)
        failed = None
        frozen_and_stored = meta is not None and asset in staleness.FROZEN_ASSETS
        run = self.failed_runs().get((asset, partition))
        if run is not None and not frozen_and_stored:
            written = (meta or {}).get("written_at")
            started = datetime.fromtimestamp(run[0], tz=timezone.utc).isoformat(timespec="microseconds")
            # a stored artefact counts as failed only if its own step failed (not if it was skipped)
            if written is None or (written < started and asset in self._failed_steps(run[2])):
                failed = run[1]
        failed_check = None
        if meta is not None and failed is None and partition is not None:
            verdict, why = self.check_result(asset, partition)
            failed_check = why if verdict == "failed" else None
        test = self.tests.get(partition) if asset in ("test_growth", "test_score") else None
        claimed = claim_reason(asset, test) if test is not None else None
        result = staleness.artefact_state(
            asset, partition, meta, self.core_plan,
            staleness.CurrentInputs(self._current_sha, file_sha=self._file_sha, code_version=self.code.get(asset)),
            staleness.Verdicts(failed=failed, failed_check=failed_check, claimed=claimed))
        if result.state == "ok" and partition is not None:
            verdict, why = self.check_result(asset, partition)
            if verdict == "pending":  # stored, never checked here: a kill before its checks, another instance
                result = ArtefactState(asset, partition, "unchecked", why, stored=True)
        self._states[name] = result
        return result

    def assets_for(self, partitions_name: str) -> list[str]:
        return [a for a in PARTITION_ASSETS[partitions_name] if a not in self.exclude]

    def all_states(self) -> list[ArtefactState]:
        """Every artefact the plan implies, then every stored one it no longer implies."""
        out = []
        keys = {"releases": self.plan.releases, "cutoffs": self.plan.cutoffs, "windows": self.plan.windows}
        for name in ("releases", "cutoffs", "windows"):
            for asset in self.assets_for(name):
                if asset == "submission":
                    out += [self.state(asset, k) for k in keys[name] if self.store.exists(asset, k)
                            or k == keys[name][-1]]
                    continue
                out += [self.state(asset, k) for k in keys[name]]
                live = set(keys[name])
                for stored in self.stored_partitions(asset):
                    if stored not in live:
                        out.append(self.state(asset, stored))
        if "benchmark_catalog" not in self.exclude:
            out.append(self.state("benchmark_catalog", None))
        return out

    def stored_partitions(self, asset: str) -> list[str]:
        """Partition keys of ``asset`` with a stored artefact."""
        return stored_partitions(self.store, asset)

    def catalog(self) -> dict[str, Any]:
        """The catalog the ``benchmark_catalog`` asset would write now (``core.pipeline.catalog.collect_catalog``):
        each window's benchmark as status states it, and the windows the archive no longer has, as history."""
        states = {w: (self.state("benchmark", w).state, self.state("benchmark", w).reason) for w in self.plan.windows}
        return collect_catalog(self.store, self.archive, self.plan.windows, states,
                               superseded_windows(self.store, self.archive))

    def catalog_is_current(self) -> bool:
        """The stored catalog is ``ok`` and holds, byte for byte, what the catalog asset would write now (no
        window's state, result or registered method changed since), so rebuilding it would change nothing."""
        meta = self._meta("benchmark_catalog", None)
        if meta is None or self.archive is None or self.state("benchmark_catalog", None).state != "ok":
            return False
        return meta.get("sha256") == value_sha256(catalog_value(self.catalog()))

    # ----------------------------------------------------------------------------- runs

    def step(self, job: str, key: str) -> Step:
        """What ``job`` on ``key`` would build now, and whether its upstream lets it run."""
        assets = [a for a in JOB_ASSETS[job] if a not in self.exclude]
        step = Step(job, key, assets, self.upstream_of(job, key))
        if job == "catalog_job":  # the cross-window catalog reads whatever is stored: rebuilt when it would change
            step.todo = [] if assets and self.catalog_is_current() else list(assets)
            step.token = hashlib.sha256(json.dumps([job, self.code.get("benchmark_catalog", "")]).encode()).hexdigest()
            return step
        deps = self.deps
        step.todo = []
        for asset in assets:  # in dependency order: what reads an asset this run rebuilds is rebuilt too
            state = self.state(asset, key)
            rereads = any(d in step.todo for d in deps.get(asset, ())) and not (
                state.stored and asset in staleness.FROZEN_ASSETS)
            if needs_build(state) or (rereads and state.state in ("ok", "unchecked", "stale")):
                step.todo.append(asset)
        # assets of the run's own selection it keeps and the ones to build read: their blocking
        # checks gate the run too (within one run Dagster's blocking checks do it)
        kept = [(a, key) for a in assets if a not in step.todo and any(a in deps.get(t, ()) for t in step.todo)]
        for asset, partition in step.upstream + kept:
            state = self.state(asset, partition)
            if state.state in ("ok", "unchecked") or (state.state == "stale" and not needs_build(state)):
                verdict, why = self.check_result(asset, partition)  # frozen, kept: its checks still gate
                if verdict == "failed":
                    step.blocked.append(why)
                elif verdict == "pending":
                    step.unchecked.append((asset, partition, self.unchecked_keys(asset, partition)))
            elif state.state == "failed" and state.stored:
                step.blocked.append(f"{state.line()}")
            else:
                detail = f" ({state.reason})" if state.state == "claimed" else ""
                burned = (self.tests.get(partition) is not None and self.tests[partition].state == "burned"
                          and asset in ("test_growth", "test_score"))
                (step.burned if burned else step.waiting).append(f"{ref(asset, partition)} is {state.state}{detail}")
        # its own stored artefacts whose checks never ran here (nothing may read them, e.g. a submission)
        listed = {(a, p) for a, p, _ in step.unchecked}
        step.unchecked += [(a, key, self.unchecked_keys(a, key)) for a in assets
                           if a not in step.todo and (a, key) not in listed and self.state(a, key).state == "unchecked"]
        inputs = sorted((ref(a, p), self._current_sha(ref(a, p)) or "") for a, p in step.upstream)
        files = sorted(f"{k}={v}" for k, v in self._file_sha.items() if job == "release_job" and k[0] == key)
        # what a run would read and with what code: unchanged while a requested run is under way
        # or after it failed, new once its inputs are rebuilt (a release inserted) or its code changes
        code = sorted(f"{a}={self.code.get(a, '')}" for a in assets)
        step.token = hashlib.sha256(json.dumps([job, key, inputs, files, code]).encode()).hexdigest()
        return step

    def upstream_of(self, job: str, key: str) -> list[tuple[str, str]]:
        """The upstream partitions a job's run on ``key`` reads (outside its own selection)."""
        rel = [a for a in RELEASE_ASSETS if a not in self.exclude]
        cut = [a for a in CUTOFF_ASSETS if a not in self.exclude]
        if job == "release_job":
            return []
        if job == "cutoff_job":
            return [(a, r) for r in (previous_release(self.plan.releases, key), key) for a in rel]
        if job == "window_job":
            w = parse_window_key(key)
            return ([(a, c) for c in (w.t_minus_1, w.t0) for a in cut]
                    + [(a, r) for r in (w.t_minus_1, w.t0, w.t1) for a in rel])
        recipe = self.core_plan.recipe_for_cutoff.get(key)
        # no recipe frozen yet on a window with t0 <= key: wait for the latest such window's
        latest = recipe or latest_window_at(self.plan, key)
        return [(a, key) for a in cut] + [(a, key) for a in rel] + ([("frozen_recipe", latest)] if latest else [])


def registered_methods(archive, plan: PartitionPlan) -> tuple[list[str] | None, dict[str, list[str]] | None]:
    """The methods of ``ARCHIVE/methods.yaml`` and, per window of ``plan``, those its benchmark scores
    (``core.storage.staleness.Plan.methods`` / ``window_methods``); ``(None, None)`` without an archive."""
    if archive is None:
        return None, None
    specs = load_registry(archive.root).methods
    as_of = archive_release_dates(archive.root)[1]
    return [s.key for s in specs], {w: window_method_keys(specs, parse_window_key(w), as_of) for w in plan.windows}


def stored_partitions(store, asset: str) -> list[str]:
    """Partition keys of ``asset`` with a stored artefact (through the store's location)."""
    return [p for p in store.location.list(asset) if p != "__unpartitioned__" and store.exists(asset, p)]


def all_steps(plan: PartitionPlan) -> list[tuple[str, str]]:
    """Every run the archive implies, in dependency order: releases, cutoffs, windows, the latest submission."""
    return ([("release_job", r) for r in plan.releases] + [("cutoff_job", c) for c in plan.cutoffs]
            + [("window_job", w) for w in plan.windows] + [("submission_job", c) for c in plan.cutoffs[-1:]])


def superseded_windows(store, archive) -> dict[str, str]:
    """window -> reason, for every window with a stored TEST score or benchmark that the archive no longer has."""
    ids = [m.id for m in archive.releases()]
    live = set(plan_partitions(archive).windows)
    stored = set()
    for asset in ("test_growth", "test_score", "benchmark"):
        stored |= {p for p in stored_partitions(store, asset) if is_window_key(p)}
    return {w: staleness.superseded_reason(w, ids) for w in sorted(stored - live)}


def build_catalog(store, archive_root: str, defined: DefinedGraph, instance=None) -> dict[str, Any]:
    """Catalog of every window of the archive (``core.pipeline.catalog.collect_catalog``): each window's
    benchmark as ``tempo status`` states it, and windows the archive no longer has (a release inserted
    inside them) as history, with the reason; their results stay out of the tables."""
    archive = open_archive(archive_root)
    return GraphState(store, plan_partitions(archive), defined, archive=archive, instance=instance).catalog()
