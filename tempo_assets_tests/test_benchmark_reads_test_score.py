"""Issue 22: the frozen recipe's predictions at t0 on the TEST targets are made once, by ``test_score``, and
``benchmark`` reads them instead of applying the recipe again (on copies of the session's tiny graph).

- ``test_score`` keeps them (``Scores.recipe_predictions``, every TEST growth target); re-run, ``benchmark``
  makes the recipe's predictions only at t-1 and stores the same bytes as the build's benchmark.
- Altered in the store, they move the recipe's rows at t0 and nothing else: the rows come from them.
- A score stored before they were kept (or from other inputs) has the recipe applied again, as before.
"""
from __future__ import annotations

import dataclasses

import dagster as dg
import pandas as pd
import pytest

from tempo_assets.core.pipeline import workflow
from tempo_assets.core.pipeline.window_benchmark import WindowArtefacts, stored_recipe_predictions
from tempo_assets.core.pipeline.workflow import OLDER
from tempo_assets.core.storage.artefact_types import Scores
from tempo_assets.core.storage.artefacts import Artefact
from tempo_assets.definitions import ASSETS
from tempo_assets_tests.conftest import tiny_copy
from tempo_assets_tests.toolkit import step_failures
from tempo_assets_tests.unrendered import undrawn_figures

WRITTEN = ("asset", "partition", "sha256", "file", "format", "version", "written_at", "run_id")


@pytest.fixture()
def scored(tiny_build, tmp_path):
    graph = tiny_copy(tiny_build, tmp_path / "graph", "scored")
    yield graph
    graph.instance.dispose()


def rerun_benchmark(graph, monkeypatch) -> int:
    """``benchmark`` of the tiny window materialised again; how many times it made the recipe's predictions.
    Its report's figures are not drawn (``unrendered.undrawn_figures``): what is compared is the stored value."""
    made = []
    original = workflow.method_predictions

    def counted(*args, **kwargs):
        made.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(workflow, "method_predictions", counted)
    with undrawn_figures():
        result = dg.materialize(ASSETS, selection=["benchmark"], partition_key=graph.plan.windows[0],
                                instance=graph.instance, resources=graph.resources, raise_on_error=False)
    assert result.success, step_failures(graph.instance, result.run_id)
    return len(made)


def restore_score(store, window: str, **changes) -> None:
    """Write test_score[window] again with ``changes`` to its value, its metadata (what it read) kept."""
    stored = store.open("test_score", window)
    meta = {k: v for k, v in stored.meta.items() if k not in WRITTEN}
    store.write("test_score", window, dataclasses.replace(stored.value, **changes), meta, run_id=stored.meta["run_id"])


def in_memory(asset: str, partition: str, sha256: str, value=None) -> Artefact:
    return Artefact.in_memory(value, asset=asset, partition=partition, sha256=sha256)


def test_the_stored_predictions_are_read_only_from_a_score_of_the_same_inputs():
    frame, empty = pd.DataFrame({"protein": ["P1"], "term": ["GO:1"], "aspect": ["MF"], "score": [0.5]}), pd.DataFrame()
    recipe, growth = in_memory("frozen_recipe", "W", "r1"), in_memory("test_growth", "W", "g1")
    corpus = in_memory("knn_corpus", "T0", "c1")

    def benchmark_of(predictions, read: dict[str, str]):
        sources = [{"artefact": name, "sha256": sha} for name, sha in read.items()]
        score = Artefact.in_memory(Scores(empty, empty, empty, recipe_predictions=predictions), sources=sources)
        return WindowArtefacts(growth, score, recipe, *([None] * 9))

    same = {"frozen_recipe[W]": "r1", "test_growth[W]": "g1", "knn_corpus[T0]": "c1"}
    stored, said = stored_recipe_predictions(benchmark_of(frame, same), [corpus], "W")
    assert stored is frame and said == "test_score[W]: the recipe's predictions at t0 it stored"
    for name in same:  # test_score read another version of one of them: applied again
        stored, said = stored_recipe_predictions(benchmark_of(frame, {**same, name: "other"}), [corpus], "W")
        assert stored is None and said == f"applied here at t0: test_score[W] read other versions of {name}"
    stored, said = stored_recipe_predictions(benchmark_of(None, same), [corpus], "W")
    assert stored is None and "stored before it kept the recipe's predictions" in said


def test_test_score_keeps_the_recipe_predictions_of_every_test_target(scored):
    store, window = scored.store(), scored.plan.windows[0]
    predictions = store.open("test_score", window).value.recipe_predictions
    targets = store.open("test_growth", window).value.growth.targets
    assert len(predictions) and set(predictions["protein"]) <= set(targets["protein"])
    assert list(predictions.columns) == ["protein", "term", "aspect", "score"]
    assert store.read_meta("benchmark", window)["recipe_at_t0"] == (
        f"test_score[{window}]: the recipe's predictions at t0 it stored")


def test_benchmark_reads_them_and_stores_the_same_value(scored, monkeypatch):
    store, window = scored.store(), scored.plan.windows[0]
    before = store.read_meta("benchmark", window)["sha256"]
    assert rerun_benchmark(scored, monkeypatch) == 1  # at t-1 only: the recipe at t0 is test_score's
    assert store.read_meta("benchmark", window)["sha256"] == before


def test_altered_stored_predictions_move_the_recipe_rows_at_t0_only(scored, monkeypatch):
    store, window = scored.store(), scored.plan.windows[0]
    before = store.open("benchmark", window).value.summary
    predictions = store.open("test_score", window).value.recipe_predictions
    half = sorted(set(predictions["protein"]))[::2]  # every other protein's predictions dropped
    restore_score(store, window, recipe_predictions=predictions[predictions["protein"].isin(half)])
    rerun_benchmark(scored, monkeypatch)
    after = store.open("benchmark", window).value.summary
    key = ["profile", "method", "mode", "aspect"]
    recipe = (before["method"] == "recipe").to_numpy()
    assert recipe.any() and (after["method"] == before["method"]).all()
    moved = after[recipe].set_index(key)["f_at_valid_tau"] - before[recipe].set_index(key)["f_at_valid_tau"]
    assert (moved.abs() > 1e-6).any(), "the recipe's rows at t0 do not come from test_score's predictions"
    others = ~recipe
    assert set(before[others]["method"]) >= {f"recipe{OLDER}", "knn", "naive"}
    pd.testing.assert_frame_equal(after[others].reset_index(drop=True), before[others].reset_index(drop=True))


def test_a_score_stored_before_they_were_kept_has_the_recipe_applied_again(scored, monkeypatch):
    store, window = scored.store(), scored.plan.windows[0]
    before = store.read_meta("benchmark", window)["sha256"]
    restore_score(store, window, recipe_predictions=None)
    assert rerun_benchmark(scored, monkeypatch) == 2  # at t0 and t-1
    meta = store.read_meta("benchmark", window)
    assert meta["sha256"] == before and meta["recipe_at_t0"].startswith("applied here at t0")
