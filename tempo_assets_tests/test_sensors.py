"""The archive sensor and the weekly schedule, evaluated directly on a tmp archive and instance."""
import json
import shutil
from datetime import datetime, timezone

import dagster as dg
import pytest
from dagster._core.instance.ref import InstanceRef

from tempo_assets.core.storage.artefacts import ArtefactStore
from tempo_assets.definitions import ASSET_CHECKS, defs
from tempo_assets.graph_state import WINDOW_ASSETS, blocking_checks
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


def mark_done(store: ArtefactStore, assets, key: str, instance=None, failing: str | None = None) -> None:
    """Stand-in artefacts (real sidecars) so the store reports ``assets[key]`` as materialised.

    With ``instance``, each asset's blocking checks are recorded there as evaluated on it: passed,
    except the check named ``failing``.
    """
    for asset in assets:
        store.write(asset, key, {"stand_in": True},
                    {"cutoff": "2000-01-01", "max_source_date": "2000-01-01", "sources": []})
        if instance is not None:
            for check in blocking_checks(ASSET_CHECKS).get(asset, []):
                instance.report_runless_asset_event(dg.AssetCheckEvaluation(
                    asset_key=check.asset_key, check_name=check.name, partition=key,
                    passed=check.name != failing))


def evaluate(instance, resources, cursor):
    """One sensor tick; the partition requests are applied as the daemon would apply them."""
    result = archive_sensor(dg.build_sensor_context(definitions=defs, instance=instance, cursor=cursor, resources=resources))
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
        mark_done(store, RELEASE_ASSETS, r, instance)
    runs, added, cursor = evaluate(instance, resources, cursor)
    assert (runs, added) == ([("cutoff_job", c) for c in ids[1:]], {})
    for c in ids[1:]:
        mark_done(store, CUTOFF_ASSETS, c, instance)
    runs, added, cursor = evaluate(instance, resources, cursor)
    assert (runs, added) == ([("window_job", window)], {})
    mark_done(store, ["frozen_recipe"], window, instance)

    # a new release dropped into the archive: its partitions, a second rolling window, its runs
    shutil.copytree(spare, archive / "releases" / RELEASES[4])
    runs, added, cursor = evaluate(instance, resources, cursor)
    new_window = "__".join(RELEASES[1:5])
    assert added == {"releases": [RELEASES[4]], "cutoffs": [RELEASES[4]], "windows": [new_window]}
    assert runs == [("release_job", RELEASES[4])]
    assert instance.get_dynamic_partitions("windows") == [window, new_window]
    assert evaluate(instance, resources, cursor)[:2] == ([], {})

    # w2 = (t-2..t1) = releases 2..5 needs cutoffs 3, 4 (done) and release 5; cutoff 5 needs release 5
    mark_done(store, RELEASE_ASSETS, RELEASES[4], instance)
    runs, _, cursor = evaluate(instance, resources, cursor)
    assert runs == [("cutoff_job", RELEASES[4]), ("window_job", new_window)]
    assert parse_window_key(new_window).t1 == RELEASES[4]
    mark_done(store, CUTOFF_ASSETS, RELEASES[4], instance)
    runs, _, cursor = evaluate(instance, resources, cursor)
    assert runs == [("submission_job", RELEASES[4])]  # recipe of the first window (t0 <= cutoff) is frozen
    assert evaluate(instance, resources, cursor)[:2] == ([], {})
    # the cursor keeps the pending runs only, not every key ever requested
    assert set(json.loads(cursor)) == {f"window_job:{window}", f"window_job:{new_window}",
                                       f"submission_job:{RELEASES[4]}"}
    mark_done(store, [a for a in WINDOW_ASSETS if a != "frozen_recipe"], window, instance)  # recipe done above
    mark_done(store, WINDOW_ASSETS, new_window, instance)
    mark_done(store, ["submission"], RELEASES[4], instance)
    runs, _, cursor = evaluate(instance, resources, cursor)
    assert runs == [] and json.loads(cursor) == {}

def test_a_failed_blocking_check_stops_the_chain_with_its_reason(world):
    """Upstream artefacts all stored, but one blocking check failed on one of them: no run reads it."""
    archive, spare, instance, store, resources = world
    ids = RELEASES[:4]
    window = "__".join(ids)
    t0 = parse_window_key(window).t0
    _, _, cursor = evaluate(instance, resources, None)  # registers the partitions
    for r in ids:
        mark_done(store, RELEASE_ASSETS, r, instance)
    for c in ids[1:]:
        mark_done(store, CUTOFF_ASSETS, c, instance, failing="knn_corpus__within_cutoff" if c == t0 else None)

    result = archive_sensor(dg.build_sensor_context(definitions=defs, instance=instance, cursor=cursor, resources=resources))
    assert not result.run_requests  # the window reads knn_corpus[t0]; the submission waits for its recipe
    assert f"window_job[{window}] blocked" in result.skip_reason.skip_message
    assert f"knn_corpus__within_cutoff failed on knn_corpus[{t0}]" in result.skip_reason.skip_message

    # the artefact rebuilt but its check not yet evaluated on it: nothing reads it; the sensor
    # requests that check alone (a run with no asset selected)
    mark_done(store, ["knn_corpus"], t0)
    result = archive_sensor(dg.build_sensor_context(definitions=defs, instance=instance, cursor=result.cursor, resources=resources))
    [request] = result.run_requests
    assert (request.job_name, request.partition_key, list(request.asset_selection)) == ("cutoff_job", t0, [])
    assert [k.name for k in request.asset_check_keys] == ["knn_corpus__within_cutoff"]


def test_requests_select_only_what_is_missing_and_the_cursor_stays_bounded(world):
    """A window whose TEST score is stored gets a run of only its missing assets, never test_score."""
    archive, spare, instance, store, resources = world
    ids = RELEASES[:4]
    window = "__".join(ids)
    _, _, cursor = evaluate(instance, resources, None)
    for r in ids:
        mark_done(store, RELEASE_ASSETS, r, instance)
    for c in ids[1:]:
        mark_done(store, CUTOFF_ASSETS, c, instance)
    mark_done(store, ["valid_evaluation_set", "valid_selection", "frozen_recipe", "test_growth", "test_score"],
              window, instance)
    result = archive_sensor(dg.build_sensor_context(definitions=defs, instance=instance, cursor=cursor, resources=resources))
    requests = {r.job_name: r for r in result.run_requests}
    assert requests["window_job"].asset_selection == [dg.AssetKey("benchmark")]
    assert requests["submission_job"].partition_key == ids[-1]
    for _ in range(3):  # ticks with nothing new neither request nor grow the cursor
        again = archive_sensor(dg.build_sensor_context(definitions=defs, instance=instance, cursor=result.cursor, resources=resources))
        assert not again.run_requests and again.cursor == result.cursor
    assert set(json.loads(result.cursor)) == {f"window_job:{window}", f"submission_job:{ids[-1]}"}
    mark_done(store, ["benchmark"], window, instance)
    mark_done(store, ["submission"], ids[-1], instance)
    done = archive_sensor(dg.build_sensor_context(definitions=defs, instance=instance, cursor=result.cursor, resources=resources))
    assert json.loads(done.cursor) == {}  # nothing left to build: nothing kept


def test_schedule_registers_partitions_and_requests_ready_windows(world):
    archive, spare, instance, store, resources = world
    when = datetime(2026, 1, 5, 6, tzinfo=timezone.utc)
    context = dg.build_schedule_context(instance=instance, resources=resources, scheduled_execution_time=when,
                                      repository_def=defs.get_repository_def())
    result = weekly_archive_check(context)
    plan = plan_partitions(open_archive(archive))
    assert isinstance(result, dg.SkipReason)  # nothing materialised: no window is ready
    assert instance.get_dynamic_partitions("windows") == plan.windows
    assert instance.get_dynamic_partitions("cutoffs") == plan.cutoffs

    for r in plan.releases:
        mark_done(store, RELEASE_ASSETS, r, instance)
    for c in plan.cutoffs:
        mark_done(store, CUTOFF_ASSETS, c, instance)
    context = dg.build_schedule_context(instance=instance, resources=resources, scheduled_execution_time=when,
                                      repository_def=defs.get_repository_def())
    requests = list(weekly_archive_check(context))
    assert [(r.job_name, r.partition_key) for r in requests] == [("window_job", w) for w in plan.windows]


def test_sensor_registers_a_newly_registered_method(world, tmp_path):
    from tempo_assets.core.methods.registry import MethodSpec, add_method

    archive, spare, instance, store, resources = world
    _, added, cursor = evaluate(instance, resources, None)
    assert "methods" not in added
    folder = tmp_path / "method"
    folder.mkdir()
    add_method(archive, MethodSpec(name="prior", version="2", kind="command", dir=str(folder), command="true"))
    _, added, cursor = evaluate(instance, resources, cursor)
    assert added == {"methods": ["prior@2"]}
    assert instance.get_dynamic_partitions("methods") == ["prior@2"]
