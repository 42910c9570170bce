"""Archive sensor and weekly schedule: new releases register partitions and request their runs.

A run is requested only when it has something to build (a missing or stale artefact) and every
upstream partition it reads is stored, current and passed its blocking checks in the instance
(``graph_state.GraphState.step``); a failed check stops the chain, and the tick says why. Each
request selects only the assets to (re)build, so a window whose TEST score is stored never
launches ``test_score`` again.
"""
import json

import dagster as dg

from tempo_assets.graph_state import (  # noqa: F401  (the asset lists are part of this module's interface)
    CUTOFF_ASSETS, JOB_ASSETS, RELEASE_ASSETS, WINDOW_ASSETS, DefinedGraph, GraphState, Step, all_steps,
)
from tempo_assets.core.inputs.releases import open_archive
from tempo_assets.partitions import plan_partitions, register_partitions
from tempo_assets.resources import ArchiveResource, ArtefactStoreResource
from tempo_assets.runs import fail_dead_runs

release_job = dg.define_asset_job("release_job", selection=RELEASE_ASSETS)
cutoff_job = dg.define_asset_job("cutoff_job", selection=CUTOFF_ASSETS)
window_job = dg.define_asset_job("window_job", selection=WINDOW_ASSETS)
submission_job = dg.define_asset_job("submission_job", selection=["submission"])
catalog_job = dg.define_asset_job("catalog_job", selection=["benchmark_catalog"])
JOBS = [release_job, cutoff_job, window_job, submission_job, catalog_job]


def run_request(step: Step) -> dg.RunRequest:
    """The request of a ready step: its job, partition and only the assets it must (re)build."""
    return dg.RunRequest(run_key=step.run_key, job_name=step.job, partition_key=step.key,
                         asset_selection=[dg.AssetKey(a) for a in step.todo])


def check_requests(steps: list[Step]) -> list[dg.RunRequest]:
    """Requests running, on their own, the blocking checks that never ran on a stored partition a step
    reads (``unchecked``: a kill between a write and its checks, another instance on the same store)."""
    seen, requests = set(), []
    for step in steps:
        for asset, partition, keys in step.unchecked:
            if (asset, partition) in seen or not keys:
                continue
            seen.add((asset, partition))
            job = next(j for j, assets in JOB_ASSETS.items() if asset in assets)
            names = ",".join(sorted(k.name for k in keys))
            requests.append(dg.RunRequest(run_key=f"checks:{asset}:{partition}:{names}", job_name=job,
                                          partition_key=partition, asset_selection=[], asset_check_keys=keys))
    return requests


def plan_steps_now(plan, store, defined: DefinedGraph, instance=None, archive=None) -> list[Step]:
    """Every step the archive implies, with what it would build and whether it may run now (``defined``:
    the code location's graph, from the evaluation context's repository)."""
    state = GraphState(store, plan, defined, archive=archive, instance=instance)
    return [state.step(job, key) for job, key in all_steps(plan)]


def ready_requests(plan, store, defined: DefinedGraph, instance=None, archive=None) -> list[dg.RunRequest]:
    """Requests of the steps that are ready now, in dependency order."""
    return [run_request(s) for s in plan_steps_now(plan, store, defined, instance, archive) if s.ready]


def plan_new_partitions(instance: dg.DagsterInstance, root: str) -> tuple[dict[str, list[str]], list]:
    """Partition keys of the archive not yet in ``instance``, and the requests adding them."""
    plan = plan_partitions(open_archive(root))
    requests = []
    added: dict[str, list[str]] = {}
    for name, keys in plan.as_dict().items():
        existing = set(instance.get_dynamic_partitions(name))
        added[name] = [k for k in keys if k not in existing]
        if added[name]:
            requests.append(dg.AddDynamicPartitionsRequest(partitions_def_name=name, partition_keys=added[name]))
    return added, requests


def read_cursor(cursor: str | None) -> dict[str, str]:
    """``"job:partition" -> token`` of the requests made and still pending (a JSON object)."""
    if not cursor:
        return {}
    value = json.loads(cursor)
    return value if isinstance(value, dict) else {}


@dg.sensor(minimum_interval_seconds=60, default_status=dg.DefaultSensorStatus.STOPPED, jobs=JOBS,
           description="Registers partitions of new releases in the archive and requests the runs they make possible")
def archive_sensor(context: dg.SensorEvaluationContext, archive: ArchiveResource,
                   artefact_store: ArtefactStoreResource) -> dg.SensorResult:
    """Each evaluation adds the archive's new partition keys and requests each ready run once.

    The cursor maps each step still to build to the token of its last request (what it had to
    build and the sha256 of what it reads), so a step is requested again only when that changes
    (e.g. its inputs were rebuilt after a release was inserted); steps with nothing to build
    leave the cursor, which therefore never outgrows the archive's partitions.
    """
    for line in fail_dead_runs(context.instance):
        context.log.warning(line)
    added, partition_requests = plan_new_partitions(context.instance, archive.root)
    opened = open_archive(archive.root)
    defined = DefinedGraph.of(context.repository_def)
    steps = plan_steps_now(plan_partitions(opened), artefact_store.store(), defined, context.instance, opened)
    previous = read_cursor(context.cursor)
    runs = check_requests(steps)
    runs += [run_request(s) for s in steps if s.ready and not s.unchecked
             and previous.get(f"{s.job}:{s.key}") != s.token]
    pending = {f"{s.job}:{s.key}": (s.token if s.ready else previous.get(f"{s.job}:{s.key}", ""))
               for s in steps if s.todo}
    cursor = json.dumps({k: v for k, v in sorted(pending.items()) if v})
    blocked = [f"{s.job}[{s.key}] blocked: {'; '.join(s.blocked)}" for s in steps if s.todo and s.blocked]
    for line in blocked:
        context.log.warning(line)
    waiting = [f"{s.job}[{s.key}] waits for {s.waiting[0]}" for s in steps if s.todo and s.waiting and not s.blocked]
    if not partition_requests and not runs:
        reason = "; ".join(blocked + waiting[:3]) or "archive unchanged and nothing new ready to run"
        return dg.SensorResult(skip_reason=reason, cursor=cursor)
    return dg.SensorResult(run_requests=runs, dynamic_partitions_requests=partition_requests, cursor=cursor)


@dg.schedule(cron_schedule="0 6 * * 1", job=window_job, default_status=dg.DefaultScheduleStatus.STOPPED,
             description="Weekly: register any release the sensor missed and request its runs")
def weekly_archive_check(context: dg.ScheduleEvaluationContext, archive: ArchiveResource,
                         artefact_store: ArtefactStoreResource):
    opened = open_archive(archive.root)
    plan = plan_partitions(opened)
    register_partitions(context.instance, plan)
    defined = DefinedGraph.of(context.repository_def)
    requests = [r for r in ready_requests(plan, artefact_store.store(), defined, context.instance, opened)
                if r.job_name == "window_job"]
    return requests or dg.SkipReason("no window ready to score")
