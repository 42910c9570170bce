"""The evaluator's entry points (``cafa_eval``, ``evaluate_frames``) and the tables they return.

Part of the evaluator package (see ``tempo_assets/core/evaluation/__init__.py``)."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import numpy as np
import pandas as pd

from tempo_assets.core.base.io import atomic_write
from tempo_assets.core.evaluation.ontology import (
    BEST_METRICS, EvalOntology, EvaluationInputError, FRAME_COLUMNS, NAMESPACE_ALIASES,
)
from tempo_assets.core.evaluation.predictions import (
    _build_predictions, _read_pairs, _read_prediction_file,
)
from tempo_assets.core.evaluation.metrics import (
    EvalOptions, _Prepared, _evaluate_setup, _setup, _setup_of, frame_key, namespace_columns, prepared_predictions,
)

logger = logging.getLogger(__name__)

def _best_tables(df: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """cafaeval's best rows: first ``idxmax`` (``idxmin`` for s) per (filename, ns)."""
    out = {}
    for metric, how in BEST_METRICS:
        if metric not in df.columns:
            continue
        grouped = df.groupby(level=["filename", "ns"])[metric]
        index_best = grouped.idxmax() if how == "max" else grouped.idxmin()
        best = df.loc[list(index_best)].copy()
        cov_col = "cov_w" if metric.endswith("_w") else "cov"
        cov_max = df.groupby(level=["filename", "ns"])[cov_col].max()
        best["cov_max"] = [cov_max.loc[(f, ns)] for f, ns, _ in best.index]
        out[metric] = best
    return out


def _finish(dfs: list[pd.DataFrame]) -> tuple[pd.DataFrame | None, dict[str, pd.DataFrame]]:
    if not dfs:
        logger.info("No predictions evaluated")
        return None, {}
    df = pd.concat(dfs)
    df = df[df["cov"] > 0].reset_index(drop=True)
    df = df.set_index(["filename", "ns", "tau"])
    return df, _best_tables(df)


# --------------------------------------------------------------------------------------------
# public API


def cafa_eval(obo_file, pred_dir, gt_file, ia=None, no_orphans=False, n_cpu=1, **options):
    """Evaluate every prediction file under ``pred_dir`` like cafaeval 1.3.0's ``cafa_eval``.

    ``options``: cafaeval's ``norm``, ``prop``, ``max_terms``, ``th_step``, ``toi``, ``known``
    (:class:`EvalOptions`).

    Returns
    -------
    df_all : DataFrame indexed (filename, ns, tau), or None when nothing was evaluated
    dfs_best : dict metric -> DataFrame of best rows (with ``cov_max``)
    """
    opts = EvalOptions.of(options)
    n_threads = max(1, int(n_cpu or 1))
    ontology = EvalOntology.from_obo(obo_file, ia=ia, orphans=not no_orphans)
    setup = _setup(ontology, _read_pairs(gt_file, "ground-truth"), opts.th_step, opts.toi, opts.known, opts.norm)
    pred_folder = os.path.normpath(str(pred_dir)) + "/"
    if not os.path.isdir(pred_folder):
        raise EvaluationInputError("prediction folder does not exist", pred_dir)
    files = [os.path.join(root, f) for root, _, names in os.walk(pred_folder) for f in names]
    dfs = []
    for file_name in files:
        raw = _read_prediction_file(file_name, n_threads)
        preds = _build_predictions(ontology, setup.truths, raw, setup.tau, opts.prop, opts.max_terms,
                                   n_threads)
        if not preds:
            logger.warning("Prediction: %s, not evaluated (no overlap with the ground truth)",
                           file_name)
            continue
        df = _evaluate_setup(setup, _Prepared(setup, preds))
        if df is None:
            continue
        df["filename"] = file_name.replace(pred_folder, "").replace("/", "_")
        dfs.append(df)
    return _finish(dfs)


def write_results(df_all, dfs_best, out_dir="results", th_step=0.01) -> None:
    """Write ``evaluation_all.tsv`` and ``evaluation_best_<metric>.tsv`` as cafaeval does."""
    if df_all is None:
        raise EvaluationInputError("no prediction was evaluated: nothing to write")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    decimals = int(np.ceil(-np.log10(th_step))) + 1
    fmt = f"%.{decimals}f"
    with atomic_write(out / "evaluation_all.tsv") as handle:
        df_all.to_csv(handle, float_format=fmt, sep="\t")
    for metric, frame in dfs_best.items():
        with atomic_write(out / f"evaluation_best_{metric}.tsv") as handle:
            frame.to_csv(handle, float_format=fmt, sep="\t")


def evaluate_frames(eval_ontology: EvalOntology, ground_truth: pd.DataFrame,
                    predictions: pd.DataFrame, **options) -> pd.DataFrame:
    """cafaeval's all-threshold frame for one method, index (ns, tau), rows with cov > 0.

    ``ground_truth``: DataFrame ``protein, term`` (row order = file order);
    ``predictions``: DataFrame ``protein, term, score``; ``options``: :class:`EvalOptions`
    (``known``: DataFrame ``protein, term`` or a file; ``toi``: an iterable of terms or a file;
    ``setups``: a :class:`SetupCache`, None for the ontology's own (keyed by content); ``norm``,
    ``prop``, ``max_terms``, ``th_step``).
    """
    df = evaluated_rows(eval_ontology, ground_truth, predictions, **options)
    if df is None:
        columns = FRAME_COLUMNS.copy()
        return pd.DataFrame(columns=columns).set_index(["ns", "tau"])
    return df.set_index(["ns", "tau"])


def evaluated_rows(eval_ontology: EvalOntology, ground_truth: pd.DataFrame, predictions: pd.DataFrame,
                   predictions_content: tuple | None = None, **options) -> pd.DataFrame | None:
    """:func:`evaluate_frames`' rows with ``ns`` and ``tau`` as columns (None: nothing evaluated);
    ``predictions_content``: the predictions' ``content_key`` when the caller has it (``frame_key``)."""
    opts = EvalOptions.of(options)
    setup = _setup_of(eval_ontology, ground_truth, opts)
    prepared = prepared_predictions(setup, predictions, opts, frame_key(predictions, opts, predictions_content))
    df = _evaluate_setup(setup, prepared) if prepared.preds else None
    return None if df is None else df[df["cov"] > 0].reset_index(drop=True)


def namespace_rows(eval_ontology: EvalOntology, ground_truth: pd.DataFrame, predictions: pd.DataFrame, ns: str,
                   predictions_content: tuple | None = None, **options) -> pd.DataFrame | None:
    """:func:`evaluated_rows` of the namespace ``ns`` alone, ``tau`` first and ``ns`` last, index from 0: the
    same values, built from the namespace's columns at once instead of through the other namespaces' frames
    (None: nothing evaluated there)."""
    opts = EvalOptions.of(options)
    setup = _setup_of(eval_ontology, ground_truth, opts)
    prepared = prepared_predictions(setup, predictions, opts, frame_key(predictions, opts, predictions_content))
    columns = namespace_columns(setup, prepared, ns) if ns in setup.truths else None
    if columns is None:
        return None
    keep = columns["cov"] > 0
    if not keep.any():
        return None
    return pd.DataFrame({"tau": columns["tau"][keep], **{c: v[keep] for c, v in columns.items() if c != "tau"},
                         "ns": ns})


def _ns_name(ns: str) -> str:
    return NAMESPACE_ALIASES.get(ns, ns)


def _ns_rows(df_all: pd.DataFrame, ns: str) -> pd.DataFrame:
    name = _ns_name(ns)
    frame = df_all.reset_index()
    if "filename" in frame.columns and frame["filename"].nunique() > 1:
        raise EvaluationInputError("df_all holds several prediction files: select one first")
    rows = frame[frame["ns"] == name]
    if rows.empty:
        raise EvaluationInputError(f"no evaluated rows for namespace {name!r}")
    return rows.reset_index(drop=True)


def best_rows(df_all: pd.DataFrame, metric: str = "f") -> pd.DataFrame:
    """The best row per namespace for ``metric`` (max, or min for ``s``/``s_w``), first tau."""
    frame = df_all.reset_index()
    if metric not in frame.columns:
        raise EvaluationInputError(f"unknown metric column {metric!r}")
    keys = ["filename", "ns"] if "filename" in frame.columns else ["ns"]
    grouped = frame.groupby(keys, sort=True)[metric]
    idx = grouped.idxmin() if metric in ("s", "s_w") else grouped.idxmax()
    return frame.loc[list(idx)].set_index(keys + ["tau"])


def fmax_score(df_all: pd.DataFrame, ns: str, weighted: bool = False) -> tuple[float, float]:
    """(Fmax, tau at the first maximum) for one namespace (``"BP"`` or the full name)."""
    rows = _ns_rows(df_all, ns)
    column = "f_w" if weighted else "f"
    i = rows[column].idxmax()
    return float(rows.loc[i, column]), float(rows.loc[i, "tau"])


def smin_loss(df_all: pd.DataFrame, ns: str, weighted: bool = False) -> tuple[float, float]:
    """(Smin, tau at the first minimum) for one namespace."""
    rows = _ns_rows(df_all, ns)
    column = "s_w" if weighted else "s"
    i = rows[column].idxmin()
    return float(rows.loc[i, column]), float(rows.loc[i, "tau"])


def threshold_curve(df_all: pd.DataFrame, ns: str, weighted: bool = False) -> pd.DataFrame:
    """Precision/recall/F at every evaluated threshold: columns ``tau, pr, rc, f``."""
    rows = _ns_rows(df_all, ns)
    sfx = "_w" if weighted else ""
    return pd.DataFrame({"tau": rows["tau"], "pr": rows["pr" + sfx], "rc": rows["rc" + sfx],
                         "f": rows["f" + sfx]})
