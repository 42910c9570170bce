"""LightGBM reranker: it learns a planted signal, is deterministic, and round-trips."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from tempo_assets.core.base.errors import TempoInputError
from tempo_assets.core.recipe.features import FEATURE_COLUMNS
from tempo_assets.core.recipe.reranker import Reranker, label_candidates, train_reranker

PARAMS = {"num_leaves": 7, "learning_rate": 0.1, "min_data_in_leaf": 10, "n_estimators": 60}


def planted(seed: int, n: int = 1500) -> pd.DataFrame:
    """Random features; the label depends on vote_share only (plus label noise)."""
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame({c: rng.random(n) for c in FEATURE_COLUMNS})
    frame["aspect_code"] = rng.integers(0, 3, n)
    noise = rng.random(n) < 0.05
    frame["label"] = ((frame["vote_share"] > 0.6) ^ noise).astype(int)
    frame.insert(0, "protein", [f"P{i // 10}" for i in range(n)])
    frame.insert(1, "term", [f"GO:{i % 10}" for i in range(n)])
    frame.insert(2, "aspect", "BP")
    return frame


def auc_score(labels: np.ndarray, scores: np.ndarray) -> float:
    """Pairwise-count AUC (slow reference; ties count one half)."""
    pos, neg = scores[labels == 1], scores[labels == 0]
    wins = (pos[:, None] > neg[None, :]).sum() + 0.5 * (pos[:, None] == neg[None, :]).sum()
    return float(wins / (len(pos) * len(neg)))


def test_learns_that_vote_share_matters():
    model = train_reranker(planted(0), PARAMS, seed=0)
    test = planted(1)
    prob = model.predict(test)
    assert prob.shape == (len(test),)
    assert np.all((prob > 0) & (prob <= 1))
    assert auc_score(test["label"].to_numpy(), prob) > 0.9
    gain = dict(zip(model.booster.feature_name(),
                    model.booster.feature_importance(importance_type="gain")))
    assert max(gain, key=gain.get) == "vote_share"
    assert model.best_iteration == 60


def test_training_is_deterministic_and_round_trips():
    a = train_reranker(planted(2), PARAMS, seed=3)
    b = train_reranker(planted(2), PARAMS, seed=3)
    assert a.to_bytes() == b.to_bytes()
    back = Reranker.from_bytes(a.to_bytes())
    test = planted(4)
    np.testing.assert_array_equal(back.predict(test), a.predict(test))
    assert back.params == a.params and back.best_iteration == a.best_iteration


def test_early_stopping_on_valid_records_best_iteration():
    params = {**PARAMS, "n_estimators": 400, "learning_rate": 0.3}
    model = train_reranker(planted(5), params, valid=planted(6), early_stopping_rounds=5)
    assert 1 <= model.best_iteration < 400
    assert model.params["n_estimators"] == 400
    # The stored model predicts with best_iteration trees, exactly like the booster cut there.
    direct = model.booster.predict(planted(7)[list(FEATURE_COLUMNS)].to_numpy(),
                                   num_iteration=model.best_iteration)
    np.testing.assert_allclose(model.predict(planted(7)), direct, rtol=0, atol=0)


def test_bad_training_input_raises():
    frame = planted(8)
    with pytest.raises(TempoInputError, match="label"):
        train_reranker(frame.drop(columns="label"), PARAMS)
    with pytest.raises(TempoInputError, match="single class"):
        train_reranker(frame.assign(label=0), PARAMS)
    bad = frame.copy()
    bad.loc[5, "label"] = 2
    with pytest.raises(TempoInputError, match="train:5"):
        train_reranker(bad, PARAMS)
    with pytest.raises(TempoInputError, match="reranker bytes"):
        Reranker.from_bytes(b"not json")


def test_label_candidates_against_a_loop():
    features = pd.DataFrame({
        "protein": ["A", "A", "A", "B", "B", "C", "A"],
        "term": ["t1", "t2", "t3", "t1", "t4", "t1", "m1"],
        "aspect": ["BP", "BP", "BP", "BP", "BP", "BP", "MF"],
        "sim_max": np.arange(7.0),
    })
    truth = pd.DataFrame({"protein": ["A", "A", "A", "B"], "term": ["t1", "t2", "t9", "t4"],
                          "aspect": ["BP"] * 4, "mode": ["PK", "PK", "PK", "NK"]})
    known = pd.DataFrame({"protein": ["A"], "term": ["t1"], "aspect": ["BP"]})
    out = label_candidates(features, truth, known)
    gt = set(map(tuple, truth[["protein", "term", "aspect"]].to_numpy()))
    kn = set(map(tuple, known.to_numpy()))
    targets = set(map(tuple, truth[["protein", "aspect"]].to_numpy()))
    expected = [(p, t, a, int((p, t, a) in gt))
                for p, t, a in features[["protein", "term", "aspect"]].itertuples(index=False)
                if (p, t, a) not in kn and (p, a) in targets]
    got = list(out[["protein", "term", "aspect", "label"]].itertuples(index=False, name=None))
    assert got == expected
    everything = label_candidates(features, truth, None, restrict_to_targets=False)
    assert len(everything) == len(features)
