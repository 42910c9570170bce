"""core.evaluation.benchmark: per-cell scoring against a loop reference, LAFA filters, catalog, compare, decay."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from tempo_assets.core.evaluation.benchmark import (
    PROTEIN_BINDING, BenchmarkOptions, catalog_frame, compare_windows, decay_table,
    lafa_terms_of_interest, protein_binding_only_targets, results_frame, score_benchmark, stale_inputs,
)
from tempo_assets.core.base.errors import TempoInputError
from tempo_assets.core.evaluation import EvalOntology, evaluate_frames, fmax_score
from tempo_assets.core.inputs.ontology import parse_obo
from tempo_assets_tests.core.obo_fixtures import ROOTS, small_terms, write_obo

BINDING, CHILD, OTHER = "GO:0005488", "GO:0000100", "GO:0000200"


def mf_terms(extra=()) -> list[dict]:
    return [{"id": ROOTS["MF"], "aspect": "MF"}, {"id": BINDING, "aspect": "MF", "is_a": [ROOTS["MF"]]},
            {"id": PROTEIN_BINDING, "aspect": "MF", "is_a": [BINDING]},
            {"id": CHILD, "aspect": "MF", "is_a": [PROTEIN_BINDING]},
            {"id": OTHER, "aspect": "MF", "is_a": [ROOTS["MF"]]}, *extra]


def closure(onto, protein, terms, aspect="MF"):
    full = set().union(*(onto.ancestors(t) for t in terms))
    return [(protein, t, aspect) for t in sorted(full)]


def test_protein_binding_only_targets(tmp_path):
    onto = parse_obo(write_obo(tmp_path / "go.obo", mf_terms()))
    rows = (closure(onto, "A", [PROTEIN_BINDING]) + closure(onto, "B", [CHILD])
            + closure(onto, "C", [PROTEIN_BINDING, OTHER]) + closure(onto, "D", [BINDING])
            + closure(onto, "E", [PROTEIN_BINDING, OTHER]))
    truth = pd.DataFrame(rows, columns=["protein", "term", "aspect"])
    # E already knew OTHER at the older release: its only new terms are protein binding
    known = pd.DataFrame(closure(onto, "E", [OTHER]), columns=["protein", "term", "aspect"])
    assert protein_binding_only_targets(truth, known, onto) == {"A", "B", "E"}
    assert protein_binding_only_targets(truth, None, onto) == {"A", "B"}


def test_lafa_terms_of_interest_need_both_ontologies(tmp_path):
    old = parse_obo(write_obo(tmp_path / "old.obo", mf_terms([{"id": "GO:0000300", "aspect": "MF",
                                                              "is_a": [ROOTS["MF"]]}])))
    new = parse_obo(write_obo(tmp_path / "new.obo", mf_terms([{"id": "GO:0000300", "aspect": "MF", "obsolete": True},
                                                              {"id": "GO:0000400", "aspect": "MF",
                                                               "is_a": [ROOTS["MF"]]}])))
    toi = lafa_terms_of_interest(old, new)
    assert "GO:0000300" not in toi and "GO:0000400" not in toi and {PROTEIN_BINDING, OTHER} <= toi


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    path = write_obo(tmp_path_factory.mktemp("obo") / "go.obo", small_terms())
    onto = parse_obo(path)
    rng = np.random.default_rng(0)
    leaves = {"BP": ["GO:0000001", "GO:0000002", "GO:0000004"], "MF": ["GO:0000011", "GO:0000012"]}
    truth, targets, preds = [], [], []
    for i in range(24):
        protein, aspect = f"P{i:02d}", "BP" if i % 3 else "MF"
        mode = ("NK", "LK", "PK")[i % 3]
        leaf = leaves[aspect][i % len(leaves[aspect])]
        truth += closure(onto, protein, [leaf], aspect)
        targets.append((protein, aspect, mode))
        if i % 5:  # every fifth target gets no prediction at all: it must still count (as 0)
            for term in leaves[aspect]:
                preds.append((protein, term, aspect, float(np.round(rng.uniform(0.05, 1), 2))))
    known = pd.DataFrame([t for t in truth if t[0] in {p for p, _, m in targets if m == "PK"}
                          and t[1] in (ROOTS["BP"], ROOTS["MF"])], columns=["protein", "term", "aspect"])
    ia = {t: 1.0 + (hash(t) % 3) for t in onto.terms}
    return (EvalOntology.from_obo(path, ia=ia), pd.DataFrame(targets, columns=["protein", "aspect", "mode"]),
            pd.DataFrame(truth, columns=["protein", "term", "aspect"]), known,
            pd.DataFrame(preds, columns=["protein", "term", "aspect", "score"]))


def test_score_benchmark_equals_a_per_cell_loop(toy):
    eo, targets, truth, known, preds = toy
    methods = {"m": preds, "half": preds.assign(score=preds["score"] / 2)}
    summary, curves = score_benchmark(eo, targets, truth, known, methods, BenchmarkOptions(n_boot=0))
    for row in summary.itertuples():
        # slow reference: select the cell's targets one protein at a time, then evaluate
        cell = [p for p, a, m in targets.itertuples(index=False) if a == row.aspect and m == row.mode]
        gt = truth[truth["protein"].isin(cell) & (truth["aspect"] == row.aspect)][["protein", "term"]]
        pr = methods[row.method]
        pr = pr[pr["protein"].isin(cell) & (pr["aspect"] == row.aspect)][["protein", "term", "score"]]
        kn = known[known["protein"].isin(cell) & (known["aspect"] == row.aspect)][["protein", "term"]] \
            if row.mode == "PK" else None
        expected, tau = fmax_score(evaluate_frames(eo, gt, pr, known=kn), row.aspect)
        assert row.fmax_oracle == pytest.approx(expected) and row.tau_oracle == pytest.approx(tau)
        assert row.n_targets == len(cell)
    assert set(curves["method"]) == {"m", "half"} and set(summary["mode"]) == {"NK", "LK", "PK"}


def test_unpredicted_target_lowers_fmax_and_order_is_irrelevant(toy):
    eo, targets, truth, known, preds = toy
    base, _ = score_benchmark(eo, targets, truth, known, {"m": preds}, BenchmarkOptions(n_boot=0))
    shuffled = preds.sample(frac=1, random_state=3)
    again, _ = score_benchmark(eo, targets.sample(frac=1, random_state=4), truth, known, {"m": shuffled},
                               BenchmarkOptions(n_boot=0))
    key = ["mode", "aspect"]
    pd.testing.assert_series_equal(base.sort_values(key)["fmax_oracle"].reset_index(drop=True),
                                   again.sort_values(key)["fmax_oracle"].reset_index(drop=True))
    dropped = preds[preds["protein"] != "P01"]  # P01 is a BP LK target
    less, _ = score_benchmark(eo, targets, truth, known, {"m": dropped}, BenchmarkOptions(n_boot=0))
    cell = lambda f: f[(f["mode"] == "LK") & (f["aspect"] == "BP")].iloc[0]  # noqa: E731
    assert cell(less)["n_targets"] == cell(base)["n_targets"] and cell(less)["fmax_oracle"] < cell(base)["fmax_oracle"]


def test_cis_bracket_the_estimate_and_valid_tau_is_looked_up(toy):
    eo, targets, truth, known, preds = toy
    options = BenchmarkOptions(n_boot=50, seed=1, ci_metrics=("fmax", "smin"))
    plain, _ = score_benchmark(eo, targets, truth, known, {"recipe": preds}, options)
    row = plain.iloc[0]
    summary, curves = score_benchmark(eo, targets, truth, known, {"recipe": preds}, options,
                                      taus={("recipe", row["mode"], row["aspect"]): 0.5})
    ok = summary.dropna(subset=["fmax_oracle_low"])
    assert len(ok) and (ok["fmax_oracle_low"] <= ok["fmax_oracle"] + 1e-12).all()
    assert (ok["fmax_oracle"] <= ok["fmax_oracle_high"] + 1e-12).all()
    assert "wfmax_low" not in summary
    cell = curves[(curves["mode"] == row["mode"]) & (curves["aspect"] == row["aspect"])]
    at = cell[np.isclose(cell["tau"], 0.5)]
    first = summary.iloc[0]
    assert first["f_at_valid_tau"] == pytest.approx(float(at["f"].iloc[0]) if len(at) else 0.0)
    # F at a fixed threshold is never above the best over thresholds, in every replicate's interval too
    assert first["f_at_valid_tau"] <= first["fmax_oracle"] + 1e-12
    assert first["f_at_valid_tau_low"] <= first["f_at_valid_tau"] + 1e-12 <= first["f_at_valid_tau_high"] + 2e-12
    assert summary["valid_tau"].iloc[1:].isna().all() and summary["f_at_valid_tau"].iloc[1:].isna().all()
    # the tau-less columns are those of the run without taus: one scorer, same numbers
    pd.testing.assert_series_equal(summary["fmax_oracle"], plain["fmax_oracle"])


def test_options_validate():
    with pytest.raises(TempoInputError):
        BenchmarkOptions(ci_metrics=("auc",))
    assert BenchmarkOptions(lafa=True).prop == "fill" and not BenchmarkOptions(lafa=True).orphans


def test_stale_inputs_and_catalog_status():
    sources = [{"artefact": "ia_weights[2019]", "sha256": "aaa"}, {"artefact": "test_score[w]", "sha256": "bbb"},
               {"release": "2019", "path": "releases/2019/go.obo", "sha256": "ccc"}]
    same = {"ia_weights[2019]": "aaa", "test_score[w]": "bbb"}
    files = {("2019", "releases/2019/go.obo"): "ccc"}
    assert stale_inputs(sources, same, files) == []
    assert len(stale_inputs(sources, {**same, "ia_weights[2019]": "zzz"}, files)) == 1
    assert len(stale_inputs(sources, {"test_score[w]": "bbb"}, files)) == 1  # gone
    assert len(stale_inputs(sources, same, {("2019", "releases/2019/go.obo"): "ddd"})) == 1
    states = {"w1": ("ok", "fingerprint abc"), "w2": ("stale", "test_score[w] changed"),
              "w3": ("failed", "run r1 failed"), "w5": ("superseded", "release x now lies inside it")}
    catalog = catalog_frame(["w1", "w2", "w3", "w4", "w5"], states, {"w1": True})
    assert catalog["status"].tolist() == ["ready", "stale", "failed", "pending", "superseded"]
    assert catalog["reasons"].tolist() == ["", "test_score[w] changed", "run r1 failed", "",
                                           "release x now lies inside it"]
    assert catalog["derived"].tolist() == [True, False, False, False, False]
    assert "written_at" not in catalog.columns  # no wall-clock time inside an artefact's value


def test_compare_windows_and_decay():
    rows = []
    for window, shift in (("w1", 0.0), ("w2", 0.1)):
        for method in ("recipe", "recipe@t-1", "naive"):
            rows.append({"method": method, "mode": "NK", "aspect": "MF",
                         "fmax_oracle": 0.3 + shift + 0.01 * len(method), "wfmax": 0.2, "smin": 1.0,
                         "f_at_valid_tau": 0.2 + shift + 0.02 * len(method)})
    results = pd.concat([results_frame(pd.DataFrame(rows[i:i + 3]), w, w == "w1")
                         for i, w in ((0, "w1"), (3, "w2"))], ignore_index=True)
    compared = compare_windows(results, "w1", "w2")
    for row in compared.itertuples():
        a = results[(results["window"] == "w1") & (results["method"] == row.method)]["fmax_oracle"].iloc[0]
        b = results[(results["window"] == "w2") & (results["method"] == row.method)]["fmax_oracle"].iloc[0]
        assert row.fmax_oracle_delta == pytest.approx(b - a)
    with pytest.raises(TempoInputError):
        compare_windows(results, "w1", "w9")
    summary = pd.DataFrame(rows[:3])
    paired = pd.DataFrame([{"a": "recipe", "b": "recipe@t-1", "mode": "NK", "aspect": "MF", "delta": 0.0,
                            "low": -0.1, "high": 0.2, "p_value": 0.5}])
    decay = decay_table(summary, paired)
    assert decay["method"].tolist() == ["recipe"]
    # the decay is read on the headline (F at the VALID threshold), as the paired bootstrap is
    assert decay["delta"].iloc[0] == pytest.approx(summary["f_at_valid_tau"].iloc[0]
                                                   - summary["f_at_valid_tau"].iloc[1])
    assert "f_at_valid_tau_newer" in decay and "fmax_oracle_newer" not in decay
    assert decay["delta_low"].iloc[0] == -0.1


def test_lafa_growth_is_the_one_filter_selection_test_score_and_benchmark_share(tmp_path):
    """``window_growth.lafa_growth``: the protein-binding-only MF targets leave targets and ground truth,
    other aspects and other MF targets stay; benchmark_targets keeps the same targets."""
    from tempo_assets.core.storage.artefact_types import EvaluationSet
    from tempo_assets.core.labels.growth import Growth
    from tempo_assets.core.pipeline.workflow import benchmark_targets
    from tempo_assets.core.pipeline.window_growth import lafa_growth

    onto = parse_obo(write_obo(tmp_path / "go.obo", mf_terms()))
    truth = pd.DataFrame(closure(onto, "A", [PROTEIN_BINDING]) + closure(onto, "C", [PROTEIN_BINDING, OTHER])
                         + [("A", "GO:0008150", "BP")], columns=["protein", "term", "aspect"])
    targets = pd.DataFrame({"protein": ["A", "C", "A"], "aspect": ["MF", "MF", "BP"], "mode": ["NK", "NK", "NK"]})
    known = truth.iloc[0:0]
    growth = Growth(targets, truth, known)
    kept, toi, dropped = lafa_growth(growth, onto, onto)
    assert dropped == ["A"]
    assert set(map(tuple, kept.targets[["protein", "aspect"]].to_numpy())) == {("C", "MF"), ("A", "BP")}
    assert not ((kept.ground_truth["protein"] == "A") & (kept.ground_truth["aspect"] == "MF")).any()
    assert {PROTEIN_BINDING, OTHER} <= toi
    test = benchmark_targets(EvaluationSet(growth=growth, counts=pd.DataFrame(), window_role="test"), onto, onto,
                             None, lafa=True)
    pd.testing.assert_frame_equal(test.targets, kept.targets)
    assert test.dropped == ["A"] and test.lafa
