"""Sequence clusters, the cluster bootstrap and identity strata (core.neighbours.homology)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tempo_assets.core.base.errors import TempoInputError
from tempo_assets.core.inputs.fasta import read_fasta
from tempo_assets_tests.toolkit import needs_diamond
from tempo_assets.core.neighbours.homology import (
    IDENTITY_STRATA,
    bootstrap_interval,
    cluster_codes,
    cluster_resample_counts,
    cluster_resample_indices,
    diamond_alignments,
    homology_clusters,
    identity_stratum,
    max_train_identity,
    paired_bootstrap_interval,
    target_homology,
)

FASTA = (Path(__file__).resolve().parents[2] / "data" / "releases" / "2014-09-29"
         / "uniprot_sprot_2014-01-31_human.subset.fasta.gz")
AMINO = "ACDEFGHIKLMNPQRSTVWY"


def _mutate(rng: np.random.Generator, seq: str, fraction: float) -> str:
    chars = list(seq)
    for pos in rng.choice(np.arange(1, len(seq)), size=int(round(fraction * (len(seq) - 1))),
                          replace=False):
        chars[pos] = next(a for a in rng.permutation(list(AMINO)) if a != chars[pos])
    return "".join(chars)


# --------------------------------------------------------------------------------------------
# resampling


def test_singleton_clusters_reproduce_the_protein_bootstrap_draws():
    """groups = arange(n) consumes the generator as core.evaluation's protein bootstrap does."""
    n_p, n_boot = 37, 250
    ours = np.concatenate(list(cluster_resample_counts(np.arange(n_p), n_boot, np.random.default_rng(7))))
    rng = np.random.default_rng(7)
    reference = []
    for start in range(0, n_boot, 100):  # the loop of evaluation.bootstrap_ci
        size = min(100, n_boot - start)
        draws = rng.integers(0, n_p, size=(size, n_p))
        counts = np.zeros((size, n_p))
        np.add.at(counts, (np.repeat(np.arange(size), n_p), draws.ravel()), 1)
        reference.append(counts)
    np.testing.assert_array_equal(ours, np.concatenate(reference))


@pytest.mark.parametrize("seed", [0, 1])
def test_cluster_counts_take_whole_clusters(seed):
    rng = np.random.default_rng(seed)
    groups = rng.permutation(np.repeat(np.arange(9), rng.integers(1, 6, size=9)))
    sizes = np.bincount(groups)
    for counts in cluster_resample_counts(groups, 60, np.random.default_rng(seed), chunk=25):
        assert counts.shape[1] == groups.size
        for c in range(9):  # every member of a cluster carries the cluster's multiplicity
            assert np.all(counts[:, groups == c] == counts[:, groups == c][:, :1])
        per_cluster = np.stack([counts[:, groups == c][:, 0] for c in range(9)], axis=1)
        assert np.all(per_cluster.sum(axis=1) == 9)  # n_clusters draws per replicate
        np.testing.assert_array_equal(counts.sum(axis=1), per_cluster @ sizes)
    indices = cluster_resample_indices(groups, 60, seed=seed)
    counts = np.concatenate(list(cluster_resample_counts(groups, 60, np.random.default_rng(seed))))
    assert len(indices) == 60
    for row, idx in zip(counts, indices):
        np.testing.assert_array_equal(np.bincount(idx, minlength=groups.size), row)


def test_cluster_codes_keep_order_and_give_unknown_proteins_their_own_cluster():
    clusters = pd.DataFrame({"protein": ["A", "B", "C", "D"], "cluster": [5, 5, 2, 9]})
    codes = cluster_codes(["C", "A", "X", "B", "D", "Y"], clusters)
    np.testing.assert_array_equal(codes, [0, 1, 2, 1, 3, 4])
    np.testing.assert_array_equal(cluster_codes(["A", "B"], None), [0, 1])
    assert list(cluster_codes(["A", "B"], {"A": 1, "B": 1})) == [0, 0]
    with pytest.raises(TempoInputError, match="clusters lacks"):
        cluster_codes(["A"], pd.DataFrame({"protein": ["A"]}))


def test_bootstrap_interval_callback_equals_array_mean_and_validates():
    rng = np.random.default_rng(3)
    x = rng.normal(size=50)
    groups = rng.integers(0, 12, size=50)
    by_array = bootstrap_interval(x, groups, n_boot=300, seed=4)
    by_callback = bootstrap_interval(lambda counts: (counts @ x) / counts.sum(axis=1), groups,
                                     n_boot=300, seed=4, n_units=50)
    assert by_array == pytest.approx(by_callback)
    assert by_array["estimate"] == pytest.approx(x.mean())
    assert by_array["n_clusters"] == np.unique(groups).size and by_array["n_units"] == 50
    assert by_array["low"] < x.mean() < by_array["high"]
    with pytest.raises(TempoInputError, match="entries for"):
        bootstrap_interval(x, groups[:-1])
    with pytest.raises(TempoInputError, match="returned"):
        bootstrap_interval(lambda counts: np.zeros(3), None, n_units=5)
    with pytest.raises(TempoInputError, match="alpha"):
        bootstrap_interval(x, None, alpha=1.5)


def test_paired_interval_of_a_method_against_itself_is_zero():
    x = np.random.default_rng(5).normal(size=40)
    out = paired_bootstrap_interval(x, x, np.arange(40) // 4, n_boot=200)
    assert out["delta"] == 0 and out["low"] == 0 and out["high"] == 0 and out["p_value"] == 1
    shifted = paired_bootstrap_interval(x + 1, x, np.arange(40) // 4, n_boot=200)
    assert shifted["delta"] == pytest.approx(1) and shifted["p_value"] == 0
    with pytest.raises(TempoInputError, match="score 40 and 39 units"):
        paired_bootstrap_interval(x, x[:-1])


def _simulated_coverage(n_datasets=200, n_clusters=40, icc=0.6, n_boot=400, seed=0):
    """Coverage of nominal 95 % intervals over datasets of correlated clusters.

    Each dataset: ``n_clusters`` families of 1 + Poisson(7) proteins; a protein's per-protein
    score (its metric contribution) is its family's latent score plus noise, with intra-class
    correlation ``icc``; the metric is the mean score, whose true value is 0. Method B shares half of
    A's family effect, so the paired difference A - B is still clustered; its true value is 0.
    """
    rng = np.random.default_rng(seed)
    hits = {"protein": 0, "cluster": 0, "paired_protein": 0, "paired_cluster": 0}
    widths = {"protein": [], "cluster": []}
    estimates = []
    for d in range(n_datasets):
        groups = np.repeat(np.arange(n_clusters), 1 + rng.poisson(7, size=n_clusters))
        latent = rng.normal(0, np.sqrt(icc), n_clusters)[groups]
        a = latent + rng.normal(0, np.sqrt(1 - icc), groups.size)
        b = 0.5 * latent + rng.normal(0, np.sqrt(1 - icc), groups.size)
        estimates.append(a.mean())
        for name, g in (("protein", None), ("cluster", groups)):
            ci = bootstrap_interval(a, g, n_boot=n_boot, seed=d)
            hits[name] += ci["low"] <= 0 <= ci["high"]
            widths[name].append(ci["high"] - ci["low"])
            paired = paired_bootstrap_interval(lambda c: c @ a / c.sum(axis=1),
                                               lambda c: c @ b / c.sum(axis=1), g,
                                               n_boot=n_boot, seed=d, n_units=groups.size)
            hits[f"paired_{name}"] += paired["low"] <= 0 <= paired["high"]
    coverage = {k: v / n_datasets for k, v in hits.items()}
    true_width = 2 * 1.959964 * np.std(estimates)  # width the sampling distribution calls for
    ratio = {k: float(np.mean(v) / true_width) for k, v in widths.items()}
    return coverage, ratio


def test_simulation_protein_resampling_under_covers_cluster_resampling_covers():
    coverage, width_ratio = _simulated_coverage()
    assert coverage["protein"] < 0.8, coverage
    assert coverage["paired_protein"] < 0.9, coverage
    assert coverage["cluster"] >= 0.89, coverage
    assert coverage["paired_cluster"] >= 0.89, coverage
    # the protein bootstrap's intervals are far narrower than the metric's sampling spread;
    # the cluster bootstrap's match it
    assert width_ratio["protein"] < 0.6, width_ratio
    assert 0.85 < width_ratio["cluster"] < 1.15, width_ratio


# --------------------------------------------------------------------------------------------
# clusters from alignments


def _alignments(rows):
    return pd.DataFrame(rows, columns=["query", "subject", "pident", "qcov"])


def test_clusters_are_components_of_qualifying_edges_and_order_free():
    hits = _alignments([
        ("A", "B", 95.0, 90.0),   # edge
        ("C", "B", 31.0, 60.0),   # edge (one direction suffices)
        ("D", "E", 29.9, 99.0),   # identity below 30: no edge
        ("E", "F", 80.0, 49.0),   # coverage below 50: no edge
        ("F", "E", 80.0, 50.0),   # ...but the other direction qualifies
        ("G", "Z", 99.0, 99.0),   # Z is not a protein to cluster: ignored
        ("G", "G", 100.0, 100.0),  # self pair: ignored
    ])
    proteins = ["G", "F", "E", "D", "C", "B", "A"]
    out = homology_clusters(proteins, hits)
    assert list(out["protein"]) == sorted(proteins)
    cluster = dict(zip(out["protein"], out["cluster"]))
    assert cluster["A"] == cluster["B"] == cluster["C"] == 0
    assert cluster["E"] == cluster["F"] != cluster["D"]
    assert len({cluster["D"], cluster["E"], cluster["G"]}) == 3
    assert dict(zip(out["protein"], out["cluster_size"]))["A"] == 3
    shuffled = homology_clusters(list(reversed(proteins)), hits.sample(frac=1, random_state=1))
    pd.testing.assert_frame_equal(out, shuffled)
    strict = homology_clusters(proteins, hits, min_identity=90)
    assert strict["cluster"].nunique() == 6  # only A-B left (95 % identity)
    with pytest.raises(TempoInputError, match="pident"):
        homology_clusters(["A"], _alignments([("A", "B", 130.0, 50.0)]))
    with pytest.raises(TempoInputError, match="lacks column"):
        homology_clusters(["A"], hits.drop(columns="qcov"))


# --------------------------------------------------------------------------------------------
# identity strata


def test_identity_stratum_bins_are_left_closed_and_no_hit_is_below_30():
    labels = identity_stratum([np.nan, 0, 29.99, 30, 59.9, 60, 89.99, 90, 100])
    assert list(labels) == ["<30", "<30", "<30", "30-60", "30-60", "60-90", "60-90", ">=90", ">=90"]
    assert set(labels) == set(IDENTITY_STRATA)
    with pytest.raises(TempoInputError):
        identity_stratum([101])


def reference_max_identity(targets, hits, annotations):
    """Loop version: max pident to a non-self subject annotated in the target's aspect."""
    aspects_of: dict = {}
    for protein, aspect in annotations[["protein", "aspect"]].itertuples(index=False):
        aspects_of.setdefault(protein, set()).add(aspect)
    out = []
    for protein, aspect in targets[["protein", "aspect"]].itertuples(index=False):
        best = np.nan
        for q, s, p in hits[["query", "subject", "pident"]].itertuples(index=False):
            if q == protein and s != q and aspect in aspects_of.get(s, ()):
                best = p if np.isnan(best) else max(best, p)
        out.append(best)
    return np.array(out)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_max_train_identity_matches_loop_reference(seed):
    rng = np.random.default_rng(seed)
    proteins = [f"P{i:02d}" for i in range(15)]
    hits = pd.DataFrame({"query": rng.choice(proteins, 80), "subject": rng.choice(proteins, 80),
                         "pident": np.round(rng.uniform(10, 100, 80), 1)})
    annotations = pd.DataFrame({"protein": rng.choice(proteins, 30),
                                "aspect": rng.choice(["BP", "MF", "CC"], 30)})
    targets = pd.DataFrame({"protein": rng.choice(proteins, 20), "aspect": rng.choice(["BP", "MF"], 20),
                            "mode": "NK"})
    out = max_train_identity(targets, hits, annotations)
    np.testing.assert_allclose(out["max_identity"].to_numpy(), reference_max_identity(targets, hits, annotations))
    assert list(out["mode"]) == ["NK"] * 20 and list(out.index) == list(targets.index)
    assert list(out["identity_stratum"]) == list(identity_stratum(out["max_identity"]))
    assert out.loc[out["max_identity"].isna(), "nearest_train"].isna().all()


# --------------------------------------------------------------------------------------------
# real DIAMOND runs on real sequences


@pytest.fixture(scope="module")
def real_sequences():
    sequences = read_fasta(FASTA)
    ids = sorted(p for p, s in sequences.items() if 250 <= len(s) <= 450)
    return {p: sequences[p] for p in ids[:200]}


@needs_diamond
def test_real_sequences_strata_and_clusters(real_sequences, tmp_path):
    rng = np.random.default_rng(11)
    base = list(real_sequences)
    # the TRAIN corpus: 200 real human proteins, annotated in MF (and the first 100 also in BP)
    train = real_sequences
    annotations = pd.DataFrame({"protein": base + base[:100], "aspect": ["MF"] * 200 + ["BP"] * 100})
    # TEST targets: mutated copies of real proteins at known identity, plus a shuffled sequence
    picks = {"T95": (base[150], 0.04), "T75": (base[151], 0.25), "T45": (base[152], 0.55)}
    targets = {name: _mutate(rng, train[src], frac) for name, (src, frac) in picks.items()}
    targets["TSHUF"] = "M" + "".join(rng.permutation(list(train[base[153]][1:])))
    targets[base[10]] = train[base[10]]  # a target also in the corpus: its self hit must not count

    hits = diamond_alignments(targets, train, tmp_path / "vs_train")
    assert not (hits["query"] == hits["subject"]).any()
    frame = pd.DataFrame({"protein": list(targets), "aspect": "MF"})
    out = max_train_identity(frame, hits, annotations).set_index("protein")
    assert out.loc["T95", "identity_stratum"] == ">=90" and out.loc["T95", "nearest_train"] == base[150]
    assert out.loc["T75", "identity_stratum"] == "60-90" and out.loc["T75", "nearest_train"] == base[151]
    assert out.loc["T45", "nearest_train"] == base[152]
    assert 30 <= out.loc["T45", "max_identity"] < 60
    assert out.loc["TSHUF", "identity_stratum"] == "<30"
    assert out.loc[base[10], "nearest_train"] != base[10]
    # BP: the sources of the mutants are not annotated in BP, so the copies find nothing close
    bp = max_train_identity(frame.assign(aspect="BP"), hits, annotations).set_index("protein")
    assert bp.loc["T95", "nearest_train"] != base[150]
    assert (bp["max_identity"].fillna(0) < 60).all()

    # clusters of TEST targets: three families of mutated copies, and unrelated real proteins
    family = {}
    for f, src in enumerate(base[:3]):
        for m in range(4):
            family[f"F{f}_{m}"] = _mutate(rng, train[src], 0.15 + 0.05 * m)
    loners = {p: train[p] for p in base[3:8]}
    test_set = {**family, **loners}
    self_hits = diamond_alignments(test_set, test_set, tmp_path / "all_vs_all")
    clusters = homology_clusters(list(test_set), self_hits)
    cluster = dict(zip(clusters["protein"], clusters["cluster"]))
    for f in range(3):
        assert len({cluster[f"F{f}_{m}"] for m in range(4)}) == 1
    assert len({cluster[f"F{f}_0"] for f in range(3)}) == 3
    # the first real human proteins alphabetically are not homologous to each other or to the families
    assert clusters["cluster"].nunique() == 3 + len(loners)
    codes = cluster_codes(list(test_set), clusters)
    assert bootstrap_interval(np.ones(len(test_set)), codes, n_boot=20)["n_clusters"] == 8


@needs_diamond
def test_target_homology_is_both_runs_at_once(real_sequences, tmp_path):
    rng = np.random.default_rng(5)
    base = list(real_sequences)
    corpus = {p: real_sequences[p] for p in base[:60]}
    annotations = pd.DataFrame({"protein": base[:60], "aspect": "CC"})
    sequences = {"A1": _mutate(rng, corpus[base[0]], 0.05), "A2": _mutate(rng, corpus[base[0]], 0.1),
                 "B1": _mutate(rng, corpus[base[1]], 0.3), base[70]: real_sequences[base[70]]}
    targets = pd.DataFrame({"protein": ["A1", "A2", "B1", base[70], "A1"],
                            "aspect": ["CC", "CC", "CC", "CC", "MF"], "mode": ["NK"] * 4 + ["LK"]})
    clusters, identity = target_homology(targets, sequences, corpus, annotations, tmp_path)
    by_protein = dict(zip(clusters["protein"], clusters["cluster"]))
    assert len(clusters) == 4 and by_protein["A1"] == by_protein["A2"] != by_protein["B1"]
    assert list(identity["identity_stratum"][:2]) == [">=90", ">=90"]
    assert identity["identity_stratum"].iloc[4] == "<30"  # no corpus protein annotated in MF
    pd.testing.assert_frame_equal(
        identity, max_train_identity(targets, diamond_alignments(sequences, corpus, tmp_path / "again"),
                                     annotations))
    with pytest.raises(TempoInputError, match="have no sequence"):
        target_homology(targets, {"A1": sequences["A1"]}, corpus, annotations, tmp_path / "x")
