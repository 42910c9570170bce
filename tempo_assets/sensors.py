"""Archive sensor and weekly schedule: new releases register partitions and request their runs."""

import dagster as dg

from tempo_assets.core.artefacts import ArtefactStore
from tempo_assets.partitions import (
    PartitionPlan, parse_window_key, plan_partitions, previous_release, register_partitions,
)
from tempo_assets.resources import ArchiveResource, ArtefactStoreResource, open_archive

RELEASE_ASSETS = ["ontology", "release_annotations", "sequences", "embeddings",
                  "stg_annotations", "experimental_annotations"]
CUTOFF_ASSETS = ["knn_corpus", "ia_weights", "reranker_labels", "annotation_growth"]
WINDOW_ASSETS = ["valid_evaluation_set", "valid_selection", "frozen_recipe", "test_growth", "test_score", "benchmark"]

release_job = dg.define_asset_job("release_job", selection=RELEASE_ASSETS)
cutoff_job = dg.define_asset_job("cutoff_job", selection=CUTOFF_ASSETS)
window_job = dg.define_asset_job("window_job", selection=WINDOW_ASSETS)
submission_job = dg.define_asset_job("submission_job", selection=["submission"])
catalog_job = dg.define_asset_job("catalog_job", selection=["benchmark_catalog"])
JOBS = [release_job, cutoff_job, window_job, submission_job, catalog_job]


def _done(store: ArtefactStore, assets: list[str], key: str) -> bool:
    return all(store.exists(asset, key) for asset in assets)


def ready_requests(plan: PartitionPlan, store: ArtefactStore) -> list[dg.RunRequest]:
    """Runs whose inputs are all materialised and whose outputs are not, in dependency order.

    Run keys make each request once: a release's runs, then its cutoff's once the release and
    its predecessor are done, then each window once its TRAIN/VALID cutoffs and t1 are done, then
    the submission at the latest cutoff once a recipe usable there is frozen.
    """
    requests = []
    for key in plan.releases:
        if not _done(store, RELEASE_ASSETS, key):
            requests.append(dg.RunRequest(run_key=f"releases:{key}", job_name="release_job", partition_key=key))
    for key in plan.cutoffs:
        prev = previous_release(plan.releases, key)
        if _done(store, RELEASE_ASSETS, key) and _done(store, RELEASE_ASSETS, prev) and not _done(store, CUTOFF_ASSETS, key):
            requests.append(dg.RunRequest(run_key=f"cutoffs:{key}", job_name="cutoff_job", partition_key=key))
    for key in plan.windows:
        w = parse_window_key(key)
        ready = _done(store, CUTOFF_ASSETS, w.t_minus_1) and _done(store, CUTOFF_ASSETS, w.t0)
        if ready and _done(store, RELEASE_ASSETS, w.t1) and not store.exists("frozen_recipe", key):
            requests.append(dg.RunRequest(run_key=f"windows:{key}", job_name="window_job", partition_key=key))
    # a submission at the latest cutoff, once some recipe frozen on a window with t0 <= that cutoff exists
    for key in plan.cutoffs[-1:]:
        order = {r: i for i, r in enumerate(plan.releases)}
        frozen = [w for w in map(parse_window_key, plan.windows)
                  if order[w.t0] <= order[key] and store.exists("frozen_recipe", w.key)]
        if frozen and _done(store, CUTOFF_ASSETS, key) and not store.exists("submission", key):
            requests.append(dg.RunRequest(run_key=f"submission:{key}", job_name="submission_job", partition_key=key))
    return requests


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


def _requested(cursor: str | None) -> set[str]:
    """Run keys already requested, from the sensor cursor (a JSON list)."""
    import json

    return set(json.loads(cursor)) if cursor else set()


def next_cursor(requested: set[str], ready: list[dg.RunRequest]) -> tuple[list[dg.RunRequest], str]:
    """The runs to request now and the cursor to keep.

    The cursor holds only the keys of runs still pending (requested, outputs not yet stored): once
    a run's artefacts exist ``ready_requests`` no longer yields it, so its key is dropped and the
    cursor stays bounded by the archive's pending work, not by every key ever requested.
    """
    import json

    pending = {r.run_key for r in ready}
    runs = [r for r in ready if r.run_key not in requested]
    return runs, json.dumps(sorted(pending))


@dg.sensor(minimum_interval_seconds=60, default_status=dg.DefaultSensorStatus.STOPPED, jobs=JOBS,
           description="Registers partitions of new releases in the archive and requests the runs they make possible")
def archive_sensor(context: dg.SensorEvaluationContext, archive: ArchiveResource,
                   artefact_store: ArtefactStoreResource) -> dg.SensorResult:
    """Each evaluation adds the archive's new partition keys and requests each ready run once.

    The cursor holds the keys of requested runs still pending (see ``next_cursor``), so an
    unchanged archive requests nothing and the cursor does not grow with history.
    """
    added, partition_requests = plan_new_partitions(context.instance, archive.root)
    ready = ready_requests(plan_partitions(open_archive(archive.root)), artefact_store.store())
    runs, cursor = next_cursor(_requested(context.cursor), ready)
    if not partition_requests and not runs:
        return dg.SensorResult(skip_reason="archive unchanged and nothing new ready to run", cursor=cursor)
    return dg.SensorResult(run_requests=runs, dynamic_partitions_requests=partition_requests, cursor=cursor)


@dg.schedule(cron_schedule="0 6 * * 1", job=window_job, default_status=dg.DefaultScheduleStatus.STOPPED,
             description="Weekly: register any release the sensor missed and request its runs")
def weekly_archive_check(context: dg.ScheduleEvaluationContext, archive: ArchiveResource,
                         artefact_store: ArtefactStoreResource):
    plan = plan_partitions(open_archive(archive.root))
    register_partitions(context.instance, plan)
    requests = [r for r in ready_requests(plan, artefact_store.store()) if r.job_name == "window_job"]
    return requests or dg.SkipReason("no window ready to score")
