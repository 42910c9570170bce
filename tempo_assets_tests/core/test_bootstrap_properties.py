"""Bootstrap CIs on simulated data: coverage of a known quantity, seeded determinism, paired zero.

The simulation makes Fmax a known function of a per-protein mean: every protein's truth is one
leaf (propagated: leaf + root); every protein is predicted the root, and the leaf with
probability ``q``, all at score 0.5. Precision is 1 at every threshold <= 0.5 and nothing is
predicted above, so ``Fmax = 2 r / (1 + r)`` with ``r`` the mean per-protein recall, whose
population value is ``0.5 + 0.5 q``.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from tempo_assets.core.evaluation.benchmark import BenchmarkOptions, paired_differences
from tempo_assets.core.evaluation import EvalOntology, bootstrap_ci, evaluate_frames, fmax_score
from tempo_assets_tests.core.obo_fixtures import ROOTS, write_obo

LEAF = "GO:0000001"
Q = 0.6


@pytest.fixture(scope="module")
def ontology(tmp_path_factory):
    terms = [{"id": ROOTS["BP"], "aspect": "BP"}, {"id": LEAF, "aspect": "BP", "is_a": [ROOTS["BP"]]},
             {"id": "GO:0000002", "aspect": "BP", "is_a": [ROOTS["BP"]]}]
    return EvalOntology.from_obo(write_obo(tmp_path_factory.mktemp("obo") / "go.obo", terms))


def simulate(rng: np.random.Generator, n: int, q: float = Q) -> tuple[pd.DataFrame, pd.DataFrame]:
    proteins = [f"P{i:04d}" for i in range(n)]
    truth = pd.DataFrame({"protein": proteins, "term": LEAF})
    hit = rng.random(n) < q
    rows = [(p, ROOTS["BP"], 0.5) for p in proteins] + [(p, LEAF, 0.5) for p, h in zip(proteins, hit) if h]
    return truth, pd.DataFrame(rows, columns=["protein", "term", "score"])


def population_fmax(q: float) -> float:
    recall = 0.5 + 0.5 * q
    return 2 * recall / (1 + recall)


def test_simulated_fmax_is_the_known_function_of_the_sample_mean(ontology):
    # the construction, checked against the evaluator on one sample (loop over proteins)
    truth, preds = simulate(np.random.default_rng(1), 50)
    hits = preds[preds["term"] == LEAF]["protein"].nunique()
    recall = sum(1.0 if p in set(preds[preds["term"] == LEAF]["protein"]) else 0.5 for p in truth["protein"]) / 50
    assert recall == pytest.approx(0.5 + 0.5 * hits / 50)
    fmax, _ = fmax_score(evaluate_frames(ontology, truth, preds), "BP")
    assert fmax == pytest.approx(2 * recall / (1 + recall))


def test_95_percent_intervals_cover_the_population_fmax(ontology):
    rng = np.random.default_rng(20261130)
    target, n_sim = population_fmax(Q), 200
    covered = 0
    for sim in range(n_sim):
        truth, preds = simulate(rng, 60)
        ci = bootstrap_ci(ontology, truth, preds, metric="f", n_boot=100, seed=sim)["biological_process"]
        covered += ci["low"] <= target <= ci["high"]
    # percentile intervals of a smooth mean: nominal 95%, binomial noise of 200 draws ~ +-3%
    assert 0.88 <= covered / n_sim <= 0.985, covered


def test_bootstrap_is_deterministic_with_a_seed(ontology):
    truth, preds = simulate(np.random.default_rng(5), 80)
    first = bootstrap_ci(ontology, truth, preds, n_boot=300, seed=11)
    assert bootstrap_ci(ontology, truth, preds, n_boot=300, seed=11) == first
    other = bootstrap_ci(ontology, truth, preds, n_boot=300, seed=12)["biological_process"]
    assert (other["low"], other["high"]) != (first["biological_process"]["low"], first["biological_process"]["high"])
    # the estimate itself does not depend on the resampling
    assert other["estimate"] == first["biological_process"]["estimate"]


def test_paired_difference_of_identical_methods_contains_zero(ontology):
    truth, preds = simulate(np.random.default_rng(7), 80)
    targets = truth.assign(aspect="BP", mode="NK")[["protein", "aspect", "mode"]]
    gt = truth.assign(aspect="BP")
    methods = {"a": preds.assign(aspect="BP"), "b": preds.assign(aspect="BP")}
    paired = paired_differences(ontology, (targets, gt, None), methods, [("a", "b")],
                                BenchmarkOptions(n_boot=200, seed=3), metric="fmax_oracle")
    row = paired.iloc[0]
    assert row["delta"] == 0 and row["low"] <= 0 <= row["high"]
    # a strictly worse method (leaf dropped everywhere) gives an interval above 0
    methods["b"] = methods["b"][methods["b"]["term"] != LEAF]
    worse = paired_differences(ontology, (targets, gt, None), methods, [("a", "b")],
                               BenchmarkOptions(n_boot=200, seed=3), metric="fmax_oracle").iloc[0]
    assert worse["delta"] > 0 and worse["low"] > 0


def test_paired_headline_reads_each_method_at_its_own_valid_tau(ontology):
    """The default paired metric is F at each method's VALID threshold, same resampled proteins."""
    from tempo_assets.core.evaluation.scoring import cell_curve, scores_at_tau

    truth, preds = simulate(np.random.default_rng(7), 80)
    targets = truth.assign(aspect="BP", mode="NK")[["protein", "aspect", "mode"]]
    gt = truth.assign(aspect="BP")
    methods = {"a": preds.assign(aspect="BP"), "b": preds.assign(aspect="BP")}
    # one predictor read at two thresholds: the delta is F(0.2) - F(0.6), not 0
    taus = {("a", "NK", "BP"): 0.2, ("b", "NK", "BP"): 0.6}
    row = paired_differences(ontology, (targets, gt, None), methods, [("a", "b")],
                             BenchmarkOptions(n_boot=200, seed=3), taus=taus).iloc[0]
    curve = cell_curve(ontology, "BP", gt[["protein", "term"]], methods["a"][["protein", "term", "score"]])
    want = scores_at_tau(curve, 0.2)["f_at_valid_tau"] - scores_at_tau(curve, 0.6)["f_at_valid_tau"]
    assert row["metric"] == "f_at_valid_tau" and want != 0
    assert row["delta"] == pytest.approx(want, abs=1e-12) and row["low"] <= row["delta"] <= row["high"]
    # a method without a VALID threshold gets no delta and says why
    missing = paired_differences(ontology, (targets, gt, None), methods, [("a", "b")],
                                 BenchmarkOptions(n_boot=20, seed=3), taus={("a", "NK", "BP"): 0.2}).iloc[0]
    assert pd.isna(missing["delta"]) and "no VALID threshold for b" in missing["note"]


def simulate_families(rng: np.random.Generator, n_families: int = 30, easy: float = 0.9, hard: float = 0.1):
    """:func:`simulate` with homologous families: a family is easy (leaf hit with prob ``easy``) or
    hard (``hard``) with probability 1/2, so hits are correlated within a family and the population
    q is ``(easy + hard) / 2``. Returns (truth, predictions, protein -> family)."""
    sizes = 1 + rng.poisson(6, size=n_families)
    family = np.repeat(np.arange(n_families), sizes)
    q = np.where(rng.random(n_families) < 0.5, easy, hard)[family]
    proteins = [f"P{i:04d}" for i in range(family.size)]
    hit = rng.random(family.size) < q
    truth = pd.DataFrame({"protein": proteins, "term": LEAF})
    rows = [(p, ROOTS["BP"], 0.5) for p in proteins] + [(p, LEAF, 0.5) for p, h in zip(proteins, hit) if h]
    return truth, pd.DataFrame(rows, columns=["protein", "term", "score"]), dict(zip(proteins, family))


@pytest.mark.slow  # ~15-30 s: 120 datasets x 2 levels x 200 replicates through the evaluator
def test_scorer_cluster_intervals_cover_where_protein_intervals_do_not(ontology):
    """The scorer's own path (bootstrap_ci at a fixed tau, clusters=...): on correlated families the
    protein bootstrap under-covers the population F, the cluster bootstrap covers it (issue 11.3)."""
    rng = np.random.default_rng(11)
    target, n_sim = population_fmax(0.5), 120
    covered = {"protein": 0, "cluster": 0}
    widths = {"protein": [], "cluster": []}
    for sim in range(n_sim):
        truth, preds, family = simulate_families(rng)
        ci = bootstrap_ci(ontology, truth, preds, metric="f", n_boot=200, seed=sim, tau=0.5,
                          clusters=family)["biological_process"]
        covered["protein"] += ci["low"] <= target <= ci["high"]
        covered["cluster"] += ci["cluster_low"] <= target <= ci["cluster_high"]
        widths["protein"].append(ci["high"] - ci["low"])
        widths["cluster"].append(ci["cluster_high"] - ci["cluster_low"])
        assert ci["n_clusters"] == len(set(family.values()))
    assert covered["protein"] / n_sim < 0.8, covered
    assert covered["cluster"] / n_sim >= 0.88, covered
    assert np.mean(widths["cluster"]) > 1.8 * np.mean(widths["protein"]), widths


def test_one_bootstrap_code_path_singleton_clusters_are_the_protein_bootstrap(ontology):
    truth, preds, _ = simulate_families(np.random.default_rng(3))
    singletons = {p: i for i, p in enumerate(truth["protein"])}
    ci = bootstrap_ci(ontology, truth, preds, n_boot=150, seed=4, clusters=singletons)["biological_process"]
    plain = bootstrap_ci(ontology, truth, preds, n_boot=150, seed=4)["biological_process"]
    assert (ci["cluster_low"], ci["cluster_high"]) == (ci["low"], ci["high"]) == (plain["low"], plain["high"])
    assert "cluster_low" not in plain
    # the paired bootstrap likewise, and its p-value
    from tempo_assets.core.evaluation import paired_bootstrap

    worse = preds[(preds["term"] != LEAF) | (preds.index % 2 == 0)]
    both = paired_bootstrap(ontology, truth, preds, worse, n_boot=150, seed=4, clusters=singletons)["biological_process"]
    assert (both["cluster_low"], both["cluster_high"], both["cluster_p_value"]) == (
        both["low"], both["high"], both["p_value"])


def test_subset_estimates_equal_scoring_the_subset_alone(ontology):
    """F of a stratum (subsets=...) is the evaluator's F on that stratum's proteins alone."""
    truth, preds, family = simulate_families(np.random.default_rng(8))
    labels = {p: ("a" if f % 3 else "b") for p, f in family.items()}
    out = bootstrap_ci(ontology, truth, preds, n_boot=0, tau=0.5, subsets=labels)["biological_process"]
    assert "low" not in out
    for label in ("a", "b"):
        keep = [p for p, x in labels.items() if x == label]
        alone = bootstrap_ci(ontology, truth[truth["protein"].isin(keep)], preds[preds["protein"].isin(keep)],
                             n_boot=0, tau=0.5)["biological_process"]
        assert out["subsets"][label]["estimate"] == pytest.approx(alone["estimate"], abs=1e-12)
        assert out["subsets"][label]["n_proteins"] == len(keep)
