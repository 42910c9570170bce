"""What the UI tells a user who launches something that cannot be done (issue 20, Build item 6).

``test_score``'s description warns that TEST is scored once; a ``submission`` partition that can
never have a recipe (no window of the archive has t0 <= its cutoff) says so plainly, as a Failure
with that one line, instead of a stack trace advising "materialise frozen_recipe first".
"""
from __future__ import annotations

import contextlib
import gc

import dagster as dg
import pytest

from tempo_assets.assets.evaluation import test_growth as growth_asset, test_score as score_asset
from tempo_assets.core.base.errors import TempoInputError
from tempo_assets.core.base.windows import parse_window_key
from tempo_assets.core.pipeline.workflow import latest_recipe_key
from tempo_assets.definitions import ASSETS, build_resources
from tempo_assets.partitions import plan_partitions, register_partitions
from tempo_assets.resources import open_archive
from tempo_assets_tests.assets.tiny_archive import RELEASES, build_tiny_archive

IDS = ["2014-09-29", "2016-01-15", "2017-06-15", "2019-01-14", "2022-09-12"]
W1, W2 = (parse_window_key("__".join(IDS[i:i + 4])) for i in (0, 1))


def test_the_test_assets_say_test_is_read_and_scored_once():
    for asset in (score_asset, growth_asset):
        description = asset.descriptions_by_key[asset.key]
        assert "ONCE" in description and "refused" in description, description


def test_a_cutoff_no_window_reaches_says_no_submission_can_be_made_there():
    with pytest.raises(TempoInputError) as never:
        latest_recipe_key([W1, W2], IDS, IDS[1], windows=[W1, W2])
    assert "no window of the archive has t0 <= 2016-01-15" in str(never.value)
    assert "the first cutoff with one is 2017-06-15" in str(never.value)
    assert "frozen_recipe first" not in str(never.value)
    with pytest.raises(TempoInputError) as not_yet:  # a window reaches it but is not frozen yet
        latest_recipe_key([], IDS, IDS[3], windows=[W1, W2])
    assert f"tempo materialize --window {W2.key}" in str(not_yet.value)  # the latest with t0 <= 2019-01-14
    assert latest_recipe_key([W1, W2], IDS, IDS[4], windows=[W1, W2]) == W2.key


def test_an_archive_without_a_window_says_so():
    with pytest.raises(TempoInputError) as none:
        latest_recipe_key([], IDS[:2], IDS[1], windows=[])
    assert "no submission at cutoff 2016-01-15" in str(none.value) and "has no window yet" in str(none.value)


@contextlib.contextmanager
def no_cyclic_collection():
    """No automatic garbage-collection pass inside the block (one full pass first). Dagster keeps the current
    defs-state storage in a context variable that an instance's ``with`` sets and resets by token. An instance an
    earlier test of this worker entered in a generator that only a reference cycle keeps is left when a collection
    pass finalises it: its reset puts back the storage that was current when it was entered, whose instance may be
    gone, and the next definitions load fails with "Attempted to resolve undefined DagsterInstance weakref" (CI23,
    in this test's third ``materialize``; reproduced with two ``local_temp`` instances entered in generators)."""
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


@pytest.mark.parametrize("n_releases, why", [(4, "no window of the archive has t0"), (2, "has no window yet")])
def test_launching_such_a_submission_fails_with_that_line(tmp_path, n_releases, why):
    """The only window starts after the cutoff, or there is none (two releases: the submission reads an
    empty set of recipes, not a type-check error)."""
    archive = build_tiny_archive(tmp_path, n_releases=n_releases)
    plan = plan_partitions(open_archive(archive))
    resources = build_resources(str(archive), str(tmp_path / "artefacts"), "sqlite:///" + str(tmp_path / "wh.sqlite"),
                                str(tmp_path / "cache"))
    first = plan.cutoffs[0]  # before the only window's t0
    assert all(parse_window_key(w).t0 > first for w in plan.windows) and len(plan.windows) == (n_releases > 2)
    # entered: the definitions load against this instance's defs-state storage, not one an earlier
    # test of this worker left in Dagster's context variable
    with no_cyclic_collection(), dg.DagsterInstance.ephemeral() as instance:
        register_partitions(instance, plan)
        for release in RELEASES[:2]:
            assert dg.materialize(ASSETS, selection=["ontology", "release_annotations", "sequences", "embeddings"],
                                  partition_key=release, instance=instance, resources=resources).success
        assert dg.materialize(ASSETS, selection=["knn_corpus", "reranker_labels"], partition_key=first,
                              instance=instance, resources=resources).success
        result = dg.materialize(ASSETS, selection=["submission"], partition_key=first, instance=instance,
                                resources=resources, raise_on_error=False)
    assert not result.success
    (failure,) = [e for e in result.all_events if e.event_type == dg.DagsterEventType.STEP_FAILURE]
    data = failure.step_failure_data
    assert data.user_failure_data is not None, data.error  # a Failure with its description, not an error
    assert f"no submission at cutoff {first}" in data.user_failure_data.description
    assert why in data.user_failure_data.description
    assert "frozen_recipe first" not in data.user_failure_data.description
