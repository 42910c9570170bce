"""The recipe's rerankers, fitted once per window: stored as LightGBM's model text, read back to the same
predictions, never read in another window, tampered, or for other labels (``test_frozen_recipe.py`` checks
that test_score and benchmark read them instead of refitting)."""
from __future__ import annotations

import lightgbm as lgb
import numpy as np
import pytest

from tempo_assets.core.base.errors import TempoInputError
from tempo_assets.core.base.windows import parse_window_key
from tempo_assets.core.pipeline.frozen_rerankers import kept_rerankers, rerankers_sha256, stored_rerankers
from tempo_assets.core.recipe.reranker import train_reranker
from tempo_assets.core.storage.artefact_types import FittedRerankers, FrozenRecipe, ModelText
from tempo_assets.core.storage.artefacts import ArtefactStore, LocalLocation
from tempo_assets_tests.core.test_reranker import PARAMS, planted

WINDOW = parse_window_key("2014-09-29__2016-01-15__2017-06-15__2019-01-14")
OTHER = parse_window_key("2016-01-15__2017-06-15__2019-01-14__2022-09-12")
BINDING = {"cutoff": "2017-06-15", "max_source_date": "2017-06-15", "sources": []}
RECIPE = {"aspects": {"BP": {"variant": "lgbm", "params": PARAMS}, "CC": {"variant": "none"}}}


@pytest.fixture(scope="module")
def fitted():
    return {"BP": train_reranker(planted(0), PARAMS, seed=0)}


def test_stored_rerankers_are_model_text_files_that_predict_what_was_fitted(fitted, tmp_path):
    kept = kept_rerankers(fitted, WINDOW)
    store = ArtefactStore(LocalLocation(tmp_path))
    frozen = FrozenRecipe(recipe=RECIPE, recipe_hash="h", window=WINDOW.key, rerankers=kept)
    store.write("frozen_recipe", WINDOW.key, frozen, BINDING)
    [text_file] = list(tmp_path.rglob("*.txt"))  # LightGBM's own format, readable without Tempo
    booster = lgb.Booster(model_file=str(text_file))
    back = store.open("frozen_recipe", WINDOW.key).value.rerankers
    assert isinstance(back.models["BP"], ModelText) and back.labels_release == WINDOW.recipe_labels
    read = stored_rerankers(RECIPE, back, WINDOW, rerankers_sha256(kept), WINDOW.recipe_labels)
    rows = planted(1)
    np.testing.assert_array_equal(read["BP"].predict(rows), fitted["BP"].predict(rows))
    assert booster.num_trees() == fitted["BP"].best_iteration


def test_rerankers_are_refused_in_another_window_and_when_tampered(fitted):
    kept = kept_rerankers(fitted, WINDOW)
    sha = rerankers_sha256(kept)
    with pytest.raises(TempoInputError, match=f"fitted for window {WINDOW.key}, not {OTHER.key}"):
        stored_rerankers(RECIPE, kept, OTHER, sha, OTHER.recipe_labels)
    tampered = FittedRerankers({"BP": ModelText(kept.models["BP"].replace("leaf_value=", "leaf_value=1", 1))},
                               kept.window, kept.labels_release)
    with pytest.raises(TempoInputError, match="not the frozen"):
        stored_rerankers(RECIPE, tampered, WINDOW, sha, WINDOW.recipe_labels)
    with pytest.raises(TempoInputError, match=r"no reranker for aspect\(s\) \['MF'\]"):
        recipe = {"aspects": {**RECIPE["aspects"], "MF": {"variant": "lgbm"}}}
        stored_rerankers(recipe, kept, WINDOW, sha, WINDOW.recipe_labels)
    # other labels than the ones they were fitted on, or none kept: the reader refits
    assert stored_rerankers(RECIPE, kept, WINDOW, sha, WINDOW.t0) is None
    assert stored_rerankers(RECIPE, None, WINDOW, sha, WINDOW.recipe_labels) is None

