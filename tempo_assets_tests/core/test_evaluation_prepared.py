"""The evaluator prepares once: setups keyed by content, predictions prepared once, draws and replicates shared.

Every cached call equals an uncached one (a fresh ontology starts with empty caches).
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from tempo_assets.core.evaluation import EvalOntology, bootstrap_ci, bootstrap_cis, evaluate_frames, paired_bootstraps
from tempo_assets.core.base.errors import TempoInputError
from tempo_assets.core.evaluation import bootstrap, cells, metrics, scoring
from tempo_assets.core.evaluation import predictions as predictions_module
from tempo_assets.core.evaluation.benchmark import paired_differences
from tempo_assets.core.evaluation.scoring import ScoringOptions, score_profile
from tempo_assets.core.neighbours.homology import cluster_resample_counts
from tempo_assets_tests.core.test_evaluation import NAMES, toy, toy_ia, toy_inputs  # noqa: F401 (toy is a fixture)


def _other_term(parents, term: str) -> str:
    """Another term of ``term``'s namespace."""
    terms = next(list(t) for t in parents.values() if term in t)
    return next(t for t in terms[1:] if t != term)


def test_a_ground_truth_changed_in_place_is_set_up_again(toy):
    path, parents, alts = toy
    gt, preds = toy_inputs(parents, alts, 0, n_proteins=10)
    gt = gt[gt["term"].isin({t for ts in parents.values() for t in ts})].reset_index(drop=True)
    eo = EvalOntology.from_obo(path)
    first = metrics._setup_of(eo, gt, metrics.EvalOptions())
    assert metrics._setup_of(eo, gt.copy(), metrics.EvalOptions()) is first  # equal content: one setup
    evaluate_frames(eo, gt, preds)
    gt.loc[0, "term"] = _other_term(parents, gt.loc[0, "term"])  # the same object, other content
    pd.testing.assert_frame_equal(evaluate_frames(eo, gt, preds), evaluate_frames(EvalOntology.from_obo(path), gt, preds))


def test_new_ia_weights_are_never_read_from_a_stale_cache(toy):
    path, parents, alts = toy
    gt, preds = toy_inputs(parents, alts, 1, n_proteins=10)
    eo = EvalOntology.from_obo(path, ia=toy_ia(parents, seed=5))
    evaluate_frames(eo, gt, preds)
    eo.set_ia(toy_ia(parents, seed=6))
    fresh = EvalOntology.from_obo(path, ia=toy_ia(parents, seed=6))
    pd.testing.assert_frame_equal(evaluate_frames(eo, gt, preds), evaluate_frames(fresh, gt, preds))


def test_each_method_is_prepared_once_for_its_curve_intervals_and_pairs(toy, monkeypatch):
    path, parents, alts = toy
    gt, preds = toy_inputs(parents, alts, 2, n_proteins=10)
    worse = preds.assign(score=np.random.default_rng(0).random(len(preds)))
    built = []
    real = metrics._build_predictions
    monkeypatch.setattr(metrics, "_build_predictions", lambda *a, **k: built.append(1) or real(*a, **k))
    eo = EvalOntology.from_obo(path)
    evaluate_frames(eo, gt, preds)
    bootstrap_cis(eo, gt.copy(), preds.copy(), [("f", None, None), ("s", 0.5, None)], n_boot=20)
    evaluate_frames(eo, gt, worse)
    paired_bootstraps(eo, gt, {"a": preds, "b": worse}, [("a", "b", 0.5, 0.3)], n_boot=20)
    assert len(built) == 2


def test_a_paired_bootstrap_reads_the_replicates_of_the_intervals(toy, monkeypatch):
    path, parents, alts = toy
    gt, preds = toy_inputs(parents, alts, 3, n_proteins=12)
    # one namespace, as a cell has (a later namespace of one interval reads on from the generator)
    gt = gt[gt["term"].isin(parents["biological_process"])]
    worse = preds.assign(score=np.random.default_rng(1).random(len(preds)))
    proteins = sorted(set(gt["protein"]))
    clusters = {p: i // 3 for i, p in enumerate(proteins)}
    options = {"n_boot": 50, "seed": 4, "clusters": clusters}
    expected = paired_bootstraps(EvalOntology.from_obo(path), gt, {"a": preds, "b": worse}, [("a", "b", 0.4, 0.6)],
                                 **options)
    eo = EvalOntology.from_obo(path)
    bootstrap_ci(eo, gt, preds, metric="f", tau=0.4, **options)
    bootstrap_ci(eo, gt, worse, metric="f", tau=0.6, **options)
    computed = []
    real = bootstrap._values
    monkeypatch.setattr(bootstrap, "_values", lambda *a: computed.append(1) or real(*a))
    assert paired_bootstraps(eo, gt, {"a": preds, "b": worse}, [("a", "b", 0.4, 0.6)], **options) == expected
    assert computed == []


@pytest.mark.parametrize("before", [(), (7,), (3, 11)])
def test_the_draws_are_the_cluster_bootstrap_draws(before):
    codes = np.array([0, 1, 1, 2, 3, 3, 3, 4, 0, 5])
    rng = np.random.default_rng(9)
    for earlier in before:  # an interval's generator runs on through the namespaces before this one
        list(cluster_resample_counts(np.arange(earlier), 250, rng))
    expected = np.concatenate(list(cluster_resample_counts(codes, 250, rng)))
    draws = bootstrap._Draws(codes, 250, 9, before, ("test", before))
    np.testing.assert_array_equal(np.concatenate(list(draws.counts())), expected)


def test_the_interval_at_a_fixed_threshold_is_its_resamples_reevaluated(toy):
    """The VALID-tau reading sums its own column only: its bounds equal re-evaluating each resample
    with the full evaluator within 1e-12 (the sums' order differs from an all-threshold product in
    the last bits; the draws are the same)."""
    path, parents, alts = toy
    gt, preds = toy_inputs(parents, alts, 4, n_proteins=8, grid_scores=True)  # scores at 0.5: tau 0.5 reads them
    eo, tau, n_boot, seed = EvalOntology.from_obo(path), 0.5, 20, 3
    result = bootstrap_ci(eo, gt, preds, metric="f", tau=tau, n_boot=n_boot, seed=seed)
    name = next(iter(result))
    proteins = list(dict.fromkeys(p for p, t in zip(gt["protein"], gt["term"])
                                  if t in parents[name] or alts.get(t) in parents[name]))
    counts = np.concatenate(list(cluster_resample_counts(np.arange(len(proteins)), n_boot, np.random.default_rng(seed))))
    values = []
    for replicate in counts:
        gt_rows, pred_rows = [], []
        for i, p in enumerate(proteins):
            for k in range(int(replicate[i])):
                gt_rows += [(f"{p}_{k}", t) for t in gt.loc[gt["protein"] == p, "term"]
                            if t in parents[name] or alts.get(t) in parents[name]]
                pred_rows += [(f"{p}_{k}", t, s) for t, s in preds.loc[preds["protein"] == p, ["term", "score"]]
                              .itertuples(index=False)]
        curve = evaluate_frames(EvalOntology.from_obo(path), pd.DataFrame(gt_rows, columns=["protein", "term"]),
                                pd.DataFrame(pred_rows, columns=["protein", "term", "score"])).loc[name].reset_index()
        at = curve[np.isclose(curve["tau"], tau, rtol=0, atol=1e-9)]
        values.append(float(at["f"].iloc[0]) if len(at) else 0.0)
    assert result[name]["low"] == pytest.approx(np.nanquantile(values, 0.025), abs=1e-12)
    assert result[name]["high"] == pytest.approx(np.nanquantile(values, 0.975), abs=1e-12)


def test_a_window_sets_up_each_cell_once_for_every_method_profile_pass_and_pair(toy, monkeypatch):
    path, parents, alts = toy
    gt, preds = toy_inputs(parents, alts, 5, n_proteins=12)
    aspect_of = {t: aspect for aspect, name in NAMES.items() for t in parents[name]}
    gt = gt[gt["term"].isin(aspect_of)].assign(aspect=lambda f: f["term"].map(aspect_of))
    preds = preds[preds["term"].isin(aspect_of)].assign(aspect=lambda f: f["term"].map(aspect_of))
    targets = gt[["protein", "aspect"]].drop_duplicates().assign(mode="NK")
    methods = {"a": preds, "b": preds.assign(score=np.random.default_rng(2).random(len(preds)))}
    taus = {(m, "NK", aspect): 0.5 for m in methods for aspect in NAMES}
    set_up = []
    real = metrics._setup
    monkeypatch.setattr(metrics, "_setup", lambda *a: set_up.append(1) or real(*a))
    eo, options = EvalOntology.from_obo(path), ScoringOptions(n_boot=10)
    score_profile(eo, targets, gt, None, methods, options=options, taus=taus)
    paired_differences(eo, (targets, gt, None), methods, [("a", "b")], options=options, taus=taus)
    assert len(set_up) == targets["aspect"].nunique()


def test_predictions_changed_in_place_are_prepared_again(toy):
    """Prepared predictions are keyed by the frame's content, never its identity."""
    path, parents, alts = toy
    gt, preds = toy_inputs(parents, alts, 6, n_proteins=10)
    eo = EvalOntology.from_obo(path)
    evaluate_frames(eo, gt, preds)
    preds.loc[preds.index[:5], "score"] = 0.999  # the same object, other content
    pd.testing.assert_frame_equal(evaluate_frames(eo, gt, preds), evaluate_frames(EvalOntology.from_obo(path), gt, preds))


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("options", [{}, {"prop": "fill"}, {"known": True, "toi": True}])
def test_a_cell_curve_is_its_namespaces_rows_of_the_evaluator_frame(toy, weighted, options):
    """``cell_curve`` builds one namespace's rows at once: the rows of ``evaluate_frames`` with that ``ns``
    (covered thresholds only), ``tau`` first and ``ns`` last, the same bits and dtypes."""
    path, parents, alts = toy
    gt, preds = toy_inputs(parents, alts, 9, n_proteins=12)
    if options.get("known"):
        options = {"known": gt.iloc[::3], "toi": [t for terms in parents.values() for t in list(terms)[::2]]}
    eo = EvalOntology.from_obo(path, ia=toy_ia(parents) if weighted else None)
    frame = evaluate_frames(EvalOntology.from_obo(path, ia=toy_ia(parents) if weighted else None), gt, preds,
                            **options).reset_index()
    lengths = []
    for aspect, name in NAMES.items():
        rows = frame[frame["ns"] == name]
        expected = rows[["tau"] + [c for c in rows.columns if c not in ("ns", "tau")]].reset_index(drop=True)
        curve = scoring.cell_curve(eo, aspect, gt, preds, **options)
        pd.testing.assert_frame_equal(curve, expected.assign(ns=name), check_exact=True)
        lengths.append(len(curve))
    assert all(lengths) and min(lengths) < 99  # thresholds without coverage are left out
    assert ("f_w" in frame.columns) == weighted


def test_a_numeric_column_is_keyed_by_its_dtype_and_values():
    frame = pd.DataFrame({"protein": ["P1", "P2", "P3"], "term": ["GO:1", "GO:2", "GO:1"], "score": [0.5, 0.25, 1.0]})
    columns = metrics.PREDICTION_KEY_COLUMNS
    assert metrics.content_key(frame.copy(), columns) == metrics.content_key(frame, columns)
    assert metrics.content_key(frame.assign(score=[0.5, 0.25, 0.75]), columns) != metrics.content_key(frame, columns)
    bits = frame.assign(score=frame["score"].to_numpy().view(np.int64))  # the same bytes, other values
    assert metrics.content_key(bits, columns) != metrics.content_key(frame, columns)


def test_the_sums_of_every_threshold_at_once_are_the_per_threshold_loop_bits():
    """cafaeval sums each threshold's row alone; one row-wise reduction gives the same bits."""
    rng = np.random.default_rng(3)
    for n_p in (0, 1, 9, 8191, 8193, 20000):  # numpy sums pairwise in blocks; rows beyond one buffer too
        n_pred = rng.random((101, n_p)) * 5 * (rng.random((101, n_p)) > 0.3)
        tp = n_pred * rng.random((101, n_p))
        n_gt = rng.random(n_p) * 4 * (rng.random(n_p) > 0.1)
        contrib = metrics._Contrib(n_pred, tp, n_pred - tp, n_gt[None, :] - tp, n_gt)
        expected = np.zeros((101, 6))
        for k in range(101):
            expected[k] = [(n_pred[k] > 0).sum(), tp[k].sum(), contrib.fp[k].sum(), contrib.fn[k].sum(),
                           np.divide(tp[k], n_pred[k], out=np.zeros(n_p), where=n_pred[k] > 0).sum(),
                           np.divide(tp[k], n_gt, out=np.zeros(n_p), where=n_gt > 0).sum()]
        assert metrics._sum_metrics(contrib).tobytes() == expected.tobytes()


@pytest.mark.parametrize("dtype", ["str", object, "string[python]"])
def test_a_string_column_factorises_as_its_python_strings(dtype):
    values = ["Q9", "P1", "Q9", "A0", "P1", "Z7"]
    column = pd.Series(values, dtype=dtype)
    codes, uniques = predictions_module._string_codes(column)
    expected_codes, expected_uniques = pd.factorize(np.asarray(values, dtype=object))
    np.testing.assert_array_equal(codes, expected_codes)
    assert codes.dtype == np.int64 and uniques.dtype == object and list(uniques) == list(expected_uniques)


def _window(toy, seed: int):
    path, parents, alts = toy
    gt, preds = toy_inputs(parents, alts, seed, n_proteins=14)
    aspect_of = {t: aspect for aspect, name in NAMES.items() for t in parents[name]}
    gt = gt[gt["term"].isin(aspect_of)].assign(aspect=lambda f: f["term"].map(aspect_of))
    preds = preds[preds["term"].isin(aspect_of)].assign(aspect=lambda f: f["term"].map(aspect_of))
    targets = gt[["protein", "aspect"]].drop_duplicates()
    targets = targets.assign(mode=np.where(np.arange(len(targets)) % 2, "NK", "LK"))
    methods = {"a": preds, "b": preds.assign(score=np.random.default_rng(seed).random(len(preds))),
               "a@t-1": preds.sample(frac=0.7, random_state=seed)}
    taus = {(m, mode, aspect): 0.3 + 0.1 * i for i, m in enumerate(methods) for mode in ("NK", "LK") for aspect in NAMES}
    clusters = {p: i // 2 for i, p in enumerate(sorted(set(targets["protein"])))}
    return path, (targets, gt, None), methods, taus, clusters


def test_a_profile_and_its_pairs_cut_each_cell_once_and_score_what_they_score_alone(toy, monkeypatch):
    """The summary's intervals and the pairs read shared frames, setups, draws and replicates, each frame
    cut and digested once: each number equals the one computed alone (a fresh ontology, nothing shared)."""
    path, growth, methods, taus, clusters = _window(toy, 7)
    options, pairs = ScoringOptions(n_boot=30, seed=2), [("a", "b"), ("a", "a@t-1")]
    request = {"taus": taus, "clusters": clusters}
    alone = score_profile(EvalOntology.from_obo(path), *growth, methods, options=options, **request)
    paired_alone = paired_differences(EvalOntology.from_obo(path), growth, methods, pairs, options=options, **request)
    cut, digested = [], []
    real, real_key = cells.cell_predictions, metrics.content_key
    monkeypatch.setattr(cells, "cell_predictions", lambda *a: cut.append(1) or real(*a))

    def counted(value, columns=("protein", "term")):
        digested.extend([1] if tuple(columns) == metrics.PREDICTION_KEY_COLUMNS else [])
        return real_key(value, columns)
    monkeypatch.setattr(metrics, "content_key", counted)
    monkeypatch.setattr(cells, "content_key", counted)
    eo, frames = EvalOntology.from_obo(path), cells.CellFrames(growth, methods)
    shared = score_profile(eo, *growth, methods, options=options, frames=frames, **request)
    paired = paired_differences(eo, growth, methods, pairs, options=options, frames=frames, **request)
    pd.testing.assert_frame_equal(shared.summary, alone.summary)
    pd.testing.assert_frame_equal(shared.curves, alone.curves)
    pd.testing.assert_frame_equal(paired, paired_alone)
    assert len(cut) == len(methods) * len(frames.cells)
    # each cut frame digested once for its curve, its intervals and its pairs
    assert len(digested) == len(methods) * len(frames.cells)
    for (mode, aspect), cell in frames.cells.items():  # each method's interval equals its own bootstrap alone
        row = shared.summary[(shared.summary["method"] == "b") & (shared.summary["mode"] == mode)
                             & (shared.summary["aspect"] == aspect)].iloc[0]
        own = bootstrap_ci(EvalOntology.from_obo(path), cell.truth, frames.of("b", (mode, aspect)), metric="f",
                           tau=taus[("b", mode, aspect)], n_boot=30, seed=2, clusters=clusters)
        ns = next(iter(own))
        assert (row["f_at_valid_tau_low"], row["f_at_valid_tau_cluster_high"]) == (own[ns]["low"], own[ns]["cluster_high"])


def test_frames_cut_from_other_predictions_are_refused(toy):
    path, growth, methods, taus, _ = _window(toy, 8)
    frames = cells.CellFrames(growth, methods)
    other = {**methods, "b": methods["b"].copy()}
    with pytest.raises(TempoInputError, match="frames: cut from other"):
        score_profile(EvalOntology.from_obo(path), *growth, other, options=ScoringOptions(n_boot=0), frames=frames)
    with pytest.raises(TempoInputError, match="frames: cut from other"):
        paired_differences(EvalOntology.from_obo(path), (growth[0].copy(), *growth[1:]), methods, [("a", "b")],
                           frames=frames, taus=taus)


def _targets(rng, proteins, ambiguous: bool) -> pd.DataFrame:
    targets = pd.DataFrame([(p, a, ["NK", "LK", "PK"][int(rng.integers(0, 3))]) for p in proteins[:30]
                            for a in ("BP", "MF") if rng.random() < 0.7], columns=["protein", "aspect", "mode"])
    if ambiguous:  # one protein a target of two modes of one aspect
        first = targets.iloc[0]
        other = next(m for m in ("NK", "LK", "PK") if m != first["mode"])
        targets = pd.concat([targets, pd.DataFrame([{**first.to_dict(), "mode": other}])], ignore_index=True)
    return targets


@pytest.mark.parametrize("others", [0, 4000])
@pytest.mark.parametrize("ambiguous", [False, True])
def test_cell_frames_cut_what_comparing_each_row_with_the_cells_targets_cuts(ambiguous, others):
    """A cell's predictions are its aspect's rows whose protein is one of its targets, in row order
    (found by codes; by string comparison when a protein is a target of two cells of one aspect); with
    ``others`` rows of proteins that are no target, the targets' rows are cut out first (CC is predicted
    for those only in method ``c``; MF not at all in method ``b``)."""
    rng = np.random.default_rng(11)
    proteins = [f"P{i}" for i in range(40)]
    targets = _targets(rng, proteins, ambiguous)
    truth = targets[["protein", "aspect"]].assign(term="GO:1")
    n = 500
    predictions = pd.DataFrame({"protein": rng.choice(proteins, n), "term": rng.choice(["GO:1", "GO:2", "GO:3"], n),
                                "aspect": rng.choice(["BP", "MF", "CC"], n), "score": rng.random(n).round(2)})
    outside = pd.DataFrame({"protein": rng.choice([f"X{i}" for i in range(300)], others),
                            "term": "GO:9", "aspect": rng.choice(["BP", "MF", "CC"], others), "score": 0.5})
    predictions = pd.concat([predictions, outside]).sample(frac=1.0, random_state=3)
    predictions.index = rng.permutation(len(predictions)) + 1000
    no_mf = predictions[predictions["aspect"] != "MF"]
    cc_outside = predictions[(predictions["aspect"] != "CC") | ~predictions["protein"].isin(targets["protein"])]
    frames = cells.CellFrames((targets, truth, None), {"a": predictions, "b": no_mf, "c": cc_outside})
    cells_with_cc = {**frames.cells, ("NK", "CC"): cells.Cell("NK", "CC", targets.assign(aspect="CC"), truth, None)}
    for name, frame in (("a", predictions), ("b", no_mf), ("c", cc_outside)):
        where = cells.method_rows(frame, cells_with_cc)
        assert (where.kept is not None) == (others > 0 and not ambiguous)
        for position, ((mode, aspect), cell) in enumerate(cells_with_cc.items()):
            got = cells.cell_predictions(frame, where, cell, position)
            if aspect not in set(frame["aspect"]):
                pd.testing.assert_frame_equal(got, pd.DataFrame(columns=["protein", "term", "score"]))
                continue
            by_aspect = frame[frame["aspect"] == aspect]
            want = by_aspect[["protein", "term", "score"]][by_aspect["protein"].isin(cell.proteins)]
            pd.testing.assert_frame_equal(got, want)
            if (mode, aspect) in frames.cells:
                pd.testing.assert_frame_equal(frames.of(name, (mode, aspect)), want)
    assert (cells.method_rows(predictions, frames.cells).cell is None) == ambiguous


@pytest.mark.parametrize("ambiguous", [False, True])
def test_a_cell_s_truth_and_known_terms_are_its_targets_rows_in_their_order(ambiguous):
    """Each cell's truth: the ground truth's rows of its targets in its aspect, in order, index from 0; its
    known terms (PK): the known rows of its targets in its aspect, their own index (a loop reference)."""
    rng = np.random.default_rng(5)
    proteins = [f"P{i}" for i in range(40)]
    targets = _targets(rng, proteins, ambiguous)

    def rows(n: int) -> pd.DataFrame:
        return pd.DataFrame({"protein": rng.choice(proteins, n), "term": [f"GO:{i}" for i in rng.integers(0, 9, n)],
                             "aspect": rng.choice(["BP", "MF", "CC"], n)}, index=rng.permutation(n) + 100)
    ground_truth, known = rows(600), rows(400)
    made = cells.evaluation_cells(targets, ground_truth, known)
    for (mode, aspect), cell in made.items():
        ours = set(targets.loc[(targets["mode"] == mode) & (targets["aspect"] == aspect), "protein"])

        def of_cell(frame: pd.DataFrame) -> list[int]:
            return [i for i, (p, a) in enumerate(zip(frame["protein"], frame["aspect"])) if p in ours and a == aspect]
        pd.testing.assert_frame_equal(cell.truth, ground_truth[["protein", "term"]].iloc[of_cell(ground_truth)]
                                      .reset_index(drop=True))
        if mode != "PK":
            assert cell.known is None
            continue
        pd.testing.assert_frame_equal(cell.known, known[["protein", "term"]].iloc[of_cell(known)])
