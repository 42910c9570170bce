"""The archive sensor and the weekly schedule, evaluated directly on a tmp archive and instance."""
import shutil
from datetime import datetime, timezone

import dagster as dg
import pytest
from dagster._core.instance.ref import InstanceRef

from tempo_assets.core.artefacts import ArtefactStore
from tempo_assets.partitions import parse_window_key, plan_partitions
from tempo_assets.resources import ArchiveResource, ArtefactStoreResource, open_archive
from tempo_assets.sensors import CUTOFF_ASSETS, RELEASE_ASSETS, archive_sensor, weekly_archive_check
from tempo_assets_tests.assets.tiny_archive import RELEASES, build_tiny_archive
from tempo_assets_tests.conftest import make_home


@pytest.fixture
def world(tmp_path):
    """A four-release archive, a fifth release kept aside, an empty instance and artefact store."""
    archive = build_tiny_archive(tmp_path / "four", n_releases=4)
    spare = build_tiny_archive(tmp_path / "five", n_releases=5) / "releases" / RELEASES[4]
    instance = dg.DagsterInstance.from_ref(InstanceRef.from_dir(str(make_home(tmp_path / "home"))))
    store = ArtefactStore(tmp_path / "artefacts")
    resources = {"archive": ArchiveResource(root=str(archive)),
                 "artefact_store": ArtefactStoreResource(root=str(store.root))}
    yield archive, spare, instance, store, resources
    instance.dispose()


def mark_done(store: ArtefactStore, assets, key: str) -> None:
    """Stand-in artefacts (real sidecars) so the store reports ``assets[key]`` as materialised."""
    for asset in assets:
        store.write(asset, key, {"stand_in": True},
                    {"cutoff": "2000-01-01", "max_source_date": "2000-01-01", "sources": []})


def evaluate(instance, resources, cursor):
    """One sensor tick; the partition requests are applied as the daemon would apply them."""
    result = archive_sensor(dg.build_sensor_context(instance=instance, cursor=cursor, resources=resources))
    for request in result.dynamic_partitions_requests or []:
        instance.add_dynamic_partitions(request.partitions_def_name, list(request.partition_keys))
    runs = [(r.job_name, r.partition_key) for r in result.run_requests or []]
    added = {r.partitions_def_name: list(r.partition_keys) for r in result.dynamic_partitions_requests or []}
    return runs, added, result.cursor or cursor


def test_sensor_registers_partitions_and_requests_each_ready_run_once(world):
    archive, spare, instance, store, resources = world
    ids = RELEASES[:4]
    window = "__".join(ids)

    runs, added, cursor = evaluate(instance, resources, None)
    assert added == {"releases": ids, "cutoffs": ids[1:], "windows": [window]}
    assert runs == [("release_job", r) for r in ids]
    assert evaluate(instance, resources, cursor)[:2] == ([], {})  # unchanged: nothing new

    for r in ids:
        mark_done(store, RELEASE_ASSETS, r)
    runs, added, cursor = evaluate(instance, resources, cursor)
    assert (runs, added) == ([("cutoff_job", c) for c in ids[1:]], {})
    for c in ids[1:]:
        mark_done(store, CUTOFF_ASSETS, c)
    runs, added, cursor = evaluate(instance, resources, cursor)
    assert (runs, added) == ([("window_job", window)], {})
    mark_done(store, ["frozen_recipe"], window)

    # a new release dropped into the archive: its partitions, a second rolling window, its runs
    shutil.copytree(spare, archive / "releases" / RELEASES[4])
    runs, added, cursor = evaluate(instance, resources, cursor)
    new_window = "__".join(RELEASES[1:5])
    assert added == {"releases": [RELEASES[4]], "cutoffs": [RELEASES[4]], "windows": [new_window]}
    assert runs == [("release_job", RELEASES[4])]
    assert instance.get_dynamic_partitions("windows") == [window, new_window]
    assert evaluate(instance, resources, cursor)[:2] == ([], {})

    # w2 = (t-2..t1) = releases 2..5 needs cutoffs 3, 4 (done) and release 5; cutoff 5 needs release 5
    mark_done(store, RELEASE_ASSETS, RELEASES[4])
    runs, _, cursor = evaluate(instance, resources, cursor)
    assert runs == [("cutoff_job", RELEASES[4]), ("window_job", new_window)]
    assert parse_window_key(new_window).t1 == RELEASES[4]
    mark_done(store, CUTOFF_ASSETS, RELEASES[4])
    runs, _, cursor = evaluate(instance, resources, cursor)
    assert runs == [("submission_job", RELEASES[4])]  # recipe of the first window (t0 <= cutoff) is frozen
    assert evaluate(instance, resources, cursor)[:2] == ([], {})
    # the cursor keeps the pending runs only, not every key ever requested
    import json

    assert set(json.loads(cursor)) == {f"windows:{new_window}", f"submission:{RELEASES[4]}"}
    mark_done(store, ["frozen_recipe"], new_window)
    mark_done(store, ["submission"], RELEASES[4])
    runs, _, cursor = evaluate(instance, resources, cursor)
    assert runs == [] and json.loads(cursor) == []

def test_schedule_registers_partitions_and_requests_ready_windows(world):
    archive, spare, instance, store, resources = world
    when = datetime(2026, 1, 5, 6, tzinfo=timezone.utc)
    context = dg.build_schedule_context(instance=instance, resources=resources, scheduled_execution_time=when)
    result = weekly_archive_check(context)
    plan = plan_partitions(open_archive(archive))
    assert isinstance(result, dg.SkipReason)  # nothing materialised: no window is ready
    assert instance.get_dynamic_partitions("windows") == plan.windows
    assert instance.get_dynamic_partitions("cutoffs") == plan.cutoffs

    for r in plan.releases:
        mark_done(store, RELEASE_ASSETS, r)
    for c in plan.cutoffs:
        mark_done(store, CUTOFF_ASSETS, c)
    context = dg.build_schedule_context(instance=instance, resources=resources, scheduled_execution_time=when)
    requests = list(weekly_archive_check(context))
    assert [(r.job_name, r.partition_key) for r in requests] == [("window_job", w) for w in plan.windows]
