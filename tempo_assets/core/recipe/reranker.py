"""LightGBM reranker over golden-rule candidate features, and candidate labelling.

Training rows are candidates generated at ``t-2`` (KNN over the ``t-2`` corpus) for the growth
targets of ``(t-2, t-1]``; a row is positive when its term is in the protein's ground truth at
``t-1`` and not among its known terms (``label_candidates``). The model is a binary LightGBM
classifier trained deterministically (``deterministic=True``, one thread, fixed seeds), so the
same rows and parameters give the same model bytes.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Mapping, Sequence

import numpy as np
import pandas as pd

from tempo_assets.core.base.arrays import rows_in
from tempo_assets.core.base.errors import TempoInputError
from tempo_assets.core.recipe.features import FEATURE_COLUMNS

if TYPE_CHECKING:
    import lightgbm as lgb

_FORMAT = "tempo-reranker-1"

# Settings that make training reproducible; they override anything in ``params``.
_FIXED_PARAMS: dict[str, Any] = {
    "objective": "binary",
    "metric": "binary_logloss",
    "deterministic": True,
    "force_row_wise": True,
    "num_threads": 1,
    "verbosity": -1,
}

_ROUND_ALIASES = ("num_boost_round", "num_iterations", "num_rounds", "num_trees")

DEFAULT_PARAMS: dict[str, Any] = {
    "num_leaves": 15,
    "learning_rate": 0.05,
    "min_data_in_leaf": 20,
    "n_estimators": 300,
}


class RerankerInputError(TempoInputError):
    """A training or scoring frame, or a serialised model, is unusable."""


def _feature_matrix(frame: pd.DataFrame, columns: Sequence[str], what: str) -> np.ndarray:
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise RerankerInputError(f"missing feature column(s) {missing}", path=what)
    return frame[list(columns)].to_numpy(dtype=np.float64)


def _labels(frame: pd.DataFrame, what: str) -> np.ndarray:
    if "label" not in frame.columns:
        raise RerankerInputError("no 'label' column (use label_candidates)", path=what)
    labels = pd.to_numeric(frame["label"], errors="coerce").to_numpy(dtype=np.float64)
    bad = ~np.isin(labels, (0.0, 1.0))
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        raise RerankerInputError(f"label {frame['label'].iloc[row]!r} is not 0 or 1", path=what,
                                 line=row)
    return labels


def _split_params(params: Mapping[str, Any] | None, seed: int) -> tuple[dict[str, Any], int]:
    merged = dict(DEFAULT_PARAMS if params is None else params)
    rounds = merged.pop("n_estimators", None)
    for alias in _ROUND_ALIASES:
        value = merged.pop(alias, None)
        rounds = value if value is not None else rounds
    if rounds is None or int(rounds) < 1:
        raise RerankerInputError(f"n_estimators must be >= 1, got {rounds!r}", path="params")
    lgb_params = {**merged, **_FIXED_PARAMS, "seed": int(seed)}
    return lgb_params, int(rounds)


@dataclass
class Reranker:
    """A trained reranker: the booster, the parameters it was trained with, and its length.

    ``params`` holds the caller's hyperparameters (with ``n_estimators`` = the rounds asked
    for); ``best_iteration`` is the number of trees used for prediction (the early-stopping
    optimum on VALID, or all rounds without a validation frame).
    """

    booster: lgb.Booster
    params: dict[str, Any]
    best_iteration: int
    feature_columns: tuple[str, ...] = field(default=FEATURE_COLUMNS)

    def predict(self, frame: pd.DataFrame) -> np.ndarray:
        """Probabilities of a gained term.

        Parameters
        ----------
        frame : DataFrame, shape (n_rows, >= len(feature_columns))

        Returns
        -------
        ndarray, shape (n_rows,), float64 in (0, 1]
        """
        if len(frame) == 0:
            return np.zeros(0, dtype=np.float64)
        x = _feature_matrix(frame, self.feature_columns, "predict frame")
        prob = np.asarray(self.booster.predict(x, num_iteration=self.best_iteration),
                          dtype=np.float64)
        # A sigmoid can underflow to exactly 0 for extreme margins; scores live in (0, 1].
        return np.clip(prob, np.finfo(np.float64).tiny, 1.0)

    def to_bytes(self) -> bytes:
        """The model string plus parameters, as UTF-8 JSON (stable for identical models)."""
        payload = {
            "format": _FORMAT,
            "params": self.params,
            "best_iteration": int(self.best_iteration),
            "feature_columns": list(self.feature_columns),
            "model": self.booster.model_to_string(num_iteration=self.best_iteration),
        }
        return json.dumps(payload, sort_keys=True).encode("utf-8")

    def model_text(self) -> str:
        """LightGBM's own model text of the trees used for prediction (``lgb.Booster(model_str=...)``
        reads it back; ``booster.save_model`` writes the same format)."""
        return self.booster.model_to_string(num_iteration=self.best_iteration)

    @classmethod
    def from_model_text(cls, text: str, params: Mapping[str, Any] | None = None) -> "Reranker":
        """Inverse of :meth:`model_text`: every tree of the text predicts, its feature names are the columns
        (``params``, the caller's hyperparameters, are carried as given); ``RerankerInputError`` on bad text."""
        import lightgbm as lgb

        try:
            booster = lgb.Booster(model_str=text)
        except (TypeError, ValueError, lgb.basic.LightGBMError) as exc:
            raise RerankerInputError(f"not a LightGBM model text: {exc}", path="reranker model text")
        return cls(booster=booster, params=_jsonable(dict(params or {})),
                   best_iteration=int(booster.current_iteration()), feature_columns=tuple(booster.feature_name()))

    @classmethod
    def from_bytes(cls, data: bytes) -> "Reranker":
        """Inverse of :meth:`to_bytes`; raises ``RerankerInputError`` on foreign bytes."""
        import lightgbm as lgb

        try:
            payload = json.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise RerankerInputError(f"not a serialised reranker: {exc}", path="reranker bytes")
        if not isinstance(payload, dict) or payload.get("format") != _FORMAT:
            raise RerankerInputError(f"format is not {_FORMAT!r}", path="reranker bytes")
        try:
            booster = lgb.Booster(model_str=payload["model"])
            return cls(booster=booster, params=dict(payload["params"]),
                       best_iteration=int(payload["best_iteration"]),
                       feature_columns=tuple(payload["feature_columns"]))
        except (KeyError, TypeError, ValueError, lgb.basic.LightGBMError) as exc:
            raise RerankerInputError(f"corrupt reranker payload: {exc}", path="reranker bytes")


def train_reranker(
    train: pd.DataFrame,
    params: Mapping[str, Any] | None = None,
    valid: pd.DataFrame | None = None,
    early_stopping_rounds: int = 20,
    seed: int = 0,
    feature_columns: Sequence[str] = FEATURE_COLUMNS,
) -> Reranker:
    """Fit a binary LightGBM classifier on labelled candidates.

    Parameters
    ----------
    train : DataFrame, shape (n_train, >= len(feature_columns) + 1)
        Feature columns and a 0/1 ``label`` column; both classes must occur.
    params : mapping, optional
        LightGBM hyperparameters; ``n_estimators`` is the number of boosting rounds (the
        maximum when ``valid`` is given). Missing keys fall back to ``DEFAULT_PARAMS``.
        Determinism settings (one thread, ``deterministic``, ``seed``) always win.
    valid : DataFrame, optional
        Labelled VALID candidates for early stopping on binary log-loss.
    early_stopping_rounds : int
        Rounds without improvement on ``valid`` before stopping.
    seed : int
        LightGBM seed (also fixes bagging and feature-fraction seeds).

    Returns
    -------
    Reranker
        With ``best_iteration`` = the early-stopping optimum, or all rounds without ``valid``.
    """
    import lightgbm as lgb

    columns = tuple(feature_columns)
    lgb_params, rounds = _split_params(params, seed)
    x = _feature_matrix(train, columns, "train")
    y = _labels(train, "train")
    if len(np.unique(y)) < 2:
        raise RerankerInputError(
            f"labels of {len(y)} training rows hold a single class; a classifier needs both",
            path="train",
        )
    dataset = lgb.Dataset(x, label=y, feature_name=list(columns), free_raw_data=True)
    valid_sets, callbacks = [], []
    if valid is not None and len(valid) > 0:
        xv = _feature_matrix(valid, columns, "valid")
        yv = _labels(valid, "valid")
        valid_sets = [lgb.Dataset(xv, label=yv, reference=dataset)]
        callbacks = [lgb.early_stopping(int(early_stopping_rounds), first_metric_only=True,
                                        verbose=False)]
    booster = lgb.train(lgb_params, dataset, num_boost_round=rounds, valid_sets=valid_sets,
                        valid_names=["valid"] * len(valid_sets), callbacks=callbacks)
    best = int(booster.best_iteration) if valid_sets else 0
    if best <= 0:
        best = int(booster.current_iteration())
    kept = {k: v for k, v in dict(DEFAULT_PARAMS if params is None else params).items()
            if k not in _ROUND_ALIASES}
    kept["n_estimators"] = rounds
    return Reranker(booster=booster, params=_jsonable(kept), best_iteration=best,
                    feature_columns=columns)


def label_candidates(
    features: pd.DataFrame,
    ground_truth: pd.DataFrame,
    known: pd.DataFrame | None = None,
    restrict_to_targets: bool = True,
) -> pd.DataFrame:
    """Attach a 0/1 ``label``: the candidate term is a gained term of the protein.

    Parameters
    ----------
    features : DataFrame ``protein, term, aspect, ...`` (from ``candidate_features``)
    ground_truth : DataFrame ``protein, term, aspect[, mode]``
        Propagated terms at the later release for the growth targets.
    known : DataFrame ``protein, term, aspect``, optional
        Terms the protein already had (PK targets); those candidates are removed.
    restrict_to_targets : bool
        Keep only candidates whose ``(protein, aspect)`` is a ground-truth target: other
        pairs gained nothing and are not evidence either way.

    Returns
    -------
    DataFrame
        ``features``' columns plus ``label`` (int8), in ``features``' row order.
    """
    for what, frame in (("features", features), ("ground_truth", ground_truth)):
        missing = [c for c in ("protein", "term", "aspect") if c not in frame.columns]
        if missing:
            raise RerankerInputError(f"missing column(s) {missing}", path=what)
    out = features.reset_index(drop=True)
    keys = ["protein", "term", "aspect"]
    # membership on integer codes (``rows_in``), the kept rows taken once: string-key merges of the
    # whole candidate frame made temporaries of its size (valid_selection's peak on large archives)
    keep = np.ones(len(out), dtype=bool)
    if known is not None and len(known) > 0:
        keep &= ~rows_in(out, known, keys)
    if restrict_to_targets:
        keep &= rows_in(out, ground_truth, ["protein", "aspect"])
    if not keep.all():
        out = out[keep].reset_index(drop=True)
    return out.assign(label=rows_in(out, ground_truth, keys).astype(np.int8))


def _jsonable(value: Any) -> Any:
    """Plain Python types (for JSON recipes): numpy scalars become int/float/bool."""
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    return value
