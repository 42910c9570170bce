"""The frozen recipe stays what VALID froze: planted violations on copies of the session's tiny graph.

- Re-materialised with another grid (the UI or ``dagster asset materialize`` with other config), the
  new VALID selection chooses another recipe and the IO manager refuses to overwrite the frozen one
  ("is immutable"); its sidecar and files keep their bytes. ``tempo materialize`` never rebuilds it.
- Tampered in the store (content changed, recorded hash kept), ``frozen_recipe__hash_matches`` fails,
  ``tempo materialize`` stops before TEST, and a TEST run launched anyway refuses before it claims or
  reads anything.
- Its rerankers, fitted once on the window's TRAIN labels by ``valid_selection``, are frozen with it and
  read by ``test_score`` and ``benchmark`` (at t0 and t-1), never refitted there.
"""
from __future__ import annotations

import copy
import dataclasses
import json

import dagster as dg
import pytest

from tempo_assets.checks import CHECKS
from tempo_assets.cli.graph_cmd import run_steps
from tempo_assets.core.base.windows import parse_window_key
from tempo_assets.core.recipe import frozen_recipe as frozen_recipe_module
from tempo_assets.core.storage.artefact_types import FrozenRecipe
from tempo_assets.core.recipe.selection import recipe_hash
from tempo_assets.core.storage.claims import ClaimStore
from tempo_assets.definitions import ASSETS
from tempo_assets.resources import GridResource
from tempo_assets_tests.conftest import tiny_copy
from tempo_assets_tests.toolkit import step_failures

# another VALID grid than the build's (GridResource's default): KNN only, one K
OTHER_GRID = GridResource(bootstrap_samples=20, ks=[5], lgbm_params_json="[]", candidate_sets=["knn"],
                          prior_weights=[0.0])


def files_of(store, asset: str, key: str) -> dict[str, bytes]:
    """Every file of ``asset[key]`` in the store (sidecar and versions), path -> bytes."""
    folder = store.folder(asset, key)
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def materialize(graph, selection, resources=None):
    return dg.materialize(ASSETS + CHECKS, selection=selection, partition_key=graph.plan.windows[0],
                          instance=graph.instance, resources=resources or graph.resources, raise_on_error=False)


@pytest.fixture()
def scored(tiny_build, tmp_path):
    graph = tiny_copy(tiny_build, tmp_path / "graph", "scored")
    yield graph
    graph.instance.dispose()


@pytest.fixture()
def unscored(tiny_build, tmp_path):
    graph = tiny_copy(tiny_build, tmp_path / "graph", "unscored")
    yield graph
    graph.instance.dispose()


def test_a_frozen_recipe_rematerialised_with_another_grid_is_refused_and_kept(scored):
    window, store = scored.plan.windows[0], scored.store()
    before = files_of(store, "frozen_recipe", window)
    frozen = json.loads(before["artefact.json"])["recipe_hash"]
    other = {**scored.resources, "grid": OTHER_GRID}
    # the command a user runs never rebuilds a stored recipe, whatever the grid
    report = run_steps([("window_job", window)], scored.instance, other, echo=lambda *_: None)
    assert report[0][2] in ("skipped", "ok"), report
    assert files_of(store, "frozen_recipe", window) == before
    # a run launched on valid_selection and frozen_recipe with the other grid
    result = materialize(scored, ["valid_selection", "frozen_recipe"], other)
    assert not result.success
    chosen = recipe_hash(store.open("valid_selection", window).value["recipe"])
    assert chosen != frozen  # VALID chose another recipe: the refusal below is what keeps the frozen one
    failures = step_failures(scored.instance, result.run_id)
    assert list(failures) == ["frozen_recipe"], failures
    wanted = (f"frozen_recipe[{window}] is immutable: it was frozen with recipe_hash={frozen}, refusing to "
              f"overwrite it with {chosen}")
    assert any(c.startswith("TempoInputError: ") and wanted in c for c in failures["frozen_recipe"]), failures
    assert files_of(store, "frozen_recipe", window) == before  # sidecar and value, byte for byte
    assert recipe_hash(store.open("frozen_recipe", window).value["recipe"]) == frozen


def test_a_tampered_stored_recipe_fails_its_check_and_test_is_never_read(unscored):
    window, store = unscored.plan.windows[0], unscored.store()
    stored = store.open("frozen_recipe", window)
    frozen = stored.meta["recipe_hash"]
    recipe = copy.deepcopy(stored.value["recipe"])
    recipe["aspects"]["BP"]["tau"] = 0.5  # plant: a threshold nudged after freezing, the recorded hash kept
    keep = ("cutoff", "max_source_date", "sources", "window", "window_role", "recipe_hash", "code_version",
            "fingerprint")
    store.write("frozen_recipe", window, FrozenRecipe(recipe=recipe, recipe_hash=frozen, window=window),
                {k: stored.meta[k] for k in keep if k in stored.meta}, run_id=stored.meta.get("run_id"))
    tampered = recipe_hash(recipe)
    assert tampered != frozen

    # tempo materialize stops before TEST: the stored recipe is not the one its check passed, so
    # the check runs again on it, on its own, fails, and blocks the window
    lines = []
    report = run_steps([("window_job", window)], unscored.instance, unscored.resources, echo=lines.append)
    assert [r[2] for r in report] == ["blocked"], lines
    assert lines[0].endswith(f"running the checks that never ran on frozen_recipe[{window}] "
                             "(frozen_recipe__hash_matches)"), lines
    assert f"checks of frozen_recipe[{window}] did not pass" in lines[1], lines
    assert f"frozen_recipe__hash_matches failed on frozen_recipe[{window}]" in lines[2], lines
    assert not unscored.store().exists("test_growth", window)  # TEST never read
    # the check, run on the stored recipe (frozen_recipe re-materialised: same VALID choice, file kept), fails
    result = materialize(unscored, ["frozen_recipe"])
    [evaluation] = [e for e in result.get_asset_check_evaluations() if e.check_name == "frozen_recipe__hash_matches"]
    assert not evaluation.passed and evaluation.metadata["recipe_hash"].value == tampered
    assert recipe_hash(store.open("frozen_recipe", window).value["recipe"]) == tampered  # not repaired silently
    lines = []
    report = run_steps([("window_job", window)], unscored.instance, unscored.resources, echo=lines.append)
    assert [r[2] for r in report] == ["blocked"], lines
    assert f"frozen_recipe__hash_matches failed on frozen_recipe[{window}]" in lines[0], lines
    # a TEST run launched anyway refuses before claiming or reading TEST
    result = materialize(unscored, ["test_growth", "test_score"])
    assert not result.success
    failures = step_failures(unscored.instance, result.run_id)
    assert list(failures) == ["test_growth"], failures
    wanted = f"hashes to {tampered}, not the frozen {frozen}: refusing to score TEST"
    assert any(c.startswith("TempoInputError: ") and wanted in c for c in failures["test_growth"]), failures
    assert ClaimStore.beside(unscored.artefacts).claims_of(window) == {}
    assert not store.exists("test_growth", window) and not store.exists("test_score", window)


def test_test_score_and_benchmark_read_the_rerankers_frozen_with_the_recipe(unscored, monkeypatch):
    window, store = unscored.plan.windows[0], unscored.store()
    stored = store.open("frozen_recipe", window)
    reranked = sorted(a for a, c in stored.value.recipe["aspects"].items() if c["variant"] == "lgbm")
    assert reranked and sorted(stored.value.rerankers.models) == reranked  # fitted once, by valid_selection
    labels = parse_window_key(window).recipe_labels
    assert stored.meta["rerankers_fitted_on"] == f"reranker_labels[{labels}]"
    assert stored.meta["rerankers_cutoff"] == store.read_meta("reranker_labels", labels)["cutoff"]

    def refit(*args, **kwargs):
        raise AssertionError("a reranker frozen with the recipe was refitted")

    monkeypatch.setattr(frozen_recipe_module, "train_reranker", refit)
    result = materialize(unscored, ["test_growth", "test_score", "benchmark"])
    assert result.success, step_failures(unscored.instance, result.run_id)


def test_rerankers_of_another_window_or_past_train_fail_the_check_and_are_never_scored(unscored):
    window, store = unscored.plan.windows[0], unscored.store()
    stored = store.open("frozen_recipe", window)
    other = parse_window_key(window)
    other = "__".join([other.t_minus_1, other.t0, other.t1, "2099-01-01"])
    meta = {k: v for k, v in stored.meta.items() if k not in ("asset", "partition", "sha256", "file", "format",
                                                             "version", "written_at", "run_id")}
    # plant: the rerankers of another window, their recorded sha256 and the recipe's hash kept
    moved = dataclasses.replace(stored.value.rerankers, window=other)
    store.write("frozen_recipe", window, dataclasses.replace(stored.value, rerankers=moved), meta,
                run_id=stored.meta.get("run_id"))
    result = materialize(unscored, ["frozen_recipe"])
    [evaluation] = [e for e in result.get_asset_check_evaluations() if e.check_name == "frozen_recipe__hash_matches"]
    assert not evaluation.passed
    assert f"fitted for window {other}, not {window}" in evaluation.metadata["rerankers"].value
    # a TEST run launched anyway refuses before it claims or reads anything of TEST
    result = materialize(unscored, ["test_growth", "test_score"])
    failures = step_failures(unscored.instance, result.run_id)
    assert list(failures) == ["test_growth"], failures
    assert any(f"fitted for window {other}, not {window}" in c for c in failures["test_growth"]), failures
    assert ClaimStore.beside(unscored.artefacts).claims_of(window) == {}
    assert not store.exists("test_growth", window) and not store.exists("test_score", window)
