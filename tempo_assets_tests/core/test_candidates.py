"""The recipe's candidate union (KNN, DIAMOND, non-experimental GOA, prior) and its golden rule."""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

import tempo_assets.core.recipe.candidates as candidates
from tempo_assets.core.audits.leakage import audit_golden_rule, sample_proteins
from tempo_assets.core.recipe.candidates import (
    ALL_FEATURE_COLUMNS, SOURCES, CandidateSource, nonexp_groups, parse_sources, prepare_hits, recipe_features,
)
from tempo_assets.core.base.errors import TempoInputError
from tempo_assets.core.base.vocabulary import EVIDENCE_GROUPS, evidence_group
from tempo_assets_tests.core.test_audits import world_inputs

CORPUS = pd.DataFrame([("A", "GO:1", "MF"), ("A", "GO:2", "MF"), ("B", "GO:1", "MF"), ("B", "GO:3", "MF"),
                       ("C", "GO:4", "MF"), ("Q", "GO:9", "MF"), ("D", "GO:1", "MF")],
                      columns=["protein", "term", "aspect"])
NEIGHBOURS = pd.DataFrame({"query": ["Q", "Q"], "neighbour": ["A", "C"], "similarity": [0.9, 0.5]})
HITS = pd.DataFrame({"query": ["Q", "Q", "Q", "Q"], "subject": ["Q", "B", "D", "B"],
                     "pident": [100.0, 60.0, 40.0, 50.0], "bitscore": [900.0, 300.0, 100.0, 200.0],
                     "qcov": [100.0, 90.0, 50.0, 80.0], "scov": [100.0, 95.0, 40.0, 70.0]})
NONEXP = pd.DataFrame({"protein": ["Q", "Q", "Q"], "term": ["GO:5", "GO:5", "GO:1"], "aspect": ["MF"] * 3,
                       "group": ["iea", "similarity", "iea"]})


def test_union_flags_every_source_and_computes_homology_features():
    feats = recipe_features(CandidateSource(NEIGHBOURS, CORPUS, hits=HITS, nonexp=NONEXP), prior_top=1).set_index("term")
    assert list(recipe_features(CandidateSource(NEIGHBOURS, CORPUS, hits=HITS, nonexp=NONEXP)).columns[3:]) == list(ALL_FEATURE_COLUMNS)
    # knn: A (GO:1, GO:2), C (GO:4); diamond: B (GO:1, GO:3), D (GO:1), never Q itself (GO:9);
    # goa: GO:5, GO:1; prior: GO:1 (3 of the 4 other proteins; Q's own GO:9 is left out)
    assert set(feats.index) == {"GO:1", "GO:2", "GO:3", "GO:4", "GO:5"}
    assert feats.loc["GO:1", ["src_knn", "src_diamond", "src_goa", "src_prior"]].tolist() == [1, 1, 1, 1]
    assert feats.loc["GO:3", ["src_knn", "src_diamond", "src_goa", "src_prior"]].tolist() == [0, 1, 0, 0]
    assert feats.loc["GO:5", ["src_knn", "src_diamond", "src_goa", "src_prior"]].tolist() == [0, 0, 1, 0]
    # B's best HSP (bitscore 300) is kept, the self hit is dropped: hits B (rank 1), D (rank 2)
    go1, go3 = feats.loc["GO:1"], feats.loc["GO:3"]
    assert (go1["dmd_pident_max"], go1["dmd_bitscore_max"], go1["dmd_best_rank"]) == (60.0, 300.0, 1.0)
    assert go1["dmd_vote"] == pytest.approx(1.0) and go1["dmd_hit_share"] == pytest.approx(1.0)
    assert go3["dmd_vote"] == pytest.approx(300 / 400) and go3["dmd_qcov_max"] == 90.0
    assert (go1["dmd_n_hits"], go1["dmd_top_pident"]) == (2.0, 60.0)
    assert np.isnan(feats.loc["GO:5", "dmd_best_rank"]) and feats.loc["GO:5", "dmd_pident_max"] == 0.0
    # non-experimental groups per term; KNN features of a term no neighbour carried are empty
    assert feats.loc["GO:5", ["goa_iea", "goa_similarity", "goa_groups"]].tolist() == [1, 1, 2]
    assert feats.loc["GO:3", "goa_groups"] == 0 and (feats["goa_aspect"] == 1).all()
    assert feats.loc["GO:3", "sim_max"] == 0.0 and np.isnan(feats.loc["GO:3", "best_rank"])
    assert feats.loc["GO:1", "sim_max"] == 0.9 and (feats["top_similarity"] == 0.9).all()
    # leave-one-out prior: Q's own GO:9 never counts for Q (4 other MF proteins, 3 with GO:1)
    assert feats.loc["GO:1", "corpus_prior"] == pytest.approx(3 / 4)
    assert (feats["n_candidates"] == 5).all()


def test_knn_only_candidates_keep_the_knn_features():
    from tempo_assets.core.recipe.features import FEATURE_COLUMNS, candidate_features

    old = candidate_features(NEIGHBOURS, CORPUS)
    new = recipe_features(CandidateSource(NEIGHBOURS, CORPUS, hits=HITS, nonexp=NONEXP), sources="knn")
    pd.testing.assert_frame_equal(new[["protein", "term", "aspect", *FEATURE_COLUMNS]].astype({"best_rank": float}),
                                  old.astype({c: float for c in FEATURE_COLUMNS}), check_dtype=False)


def test_prior_candidates_leave_the_protein_out():
    # MF counts: GO:1 x3 (A, B, D), GO:2, GO:3, GO:4, GO:9 x1. With its own GO:1 and GO:2 removed, A's top 2
    # are GO:1 (2 others) and then the first of the singletons by id other than its own GO:2: GO:3.
    feats = recipe_features(CandidateSource(NEIGHBOURS.assign(query="A", neighbour=["B", "C"]), CORPUS),
                            sources="knn+prior", prior_top=2)
    prior = feats[feats["src_prior"] == 1]
    assert prior["term"].tolist() == ["GO:1", "GO:3"]


@pytest.mark.parametrize("seed", [0, 1])
def test_every_new_feature_passes_the_golden_rule_audit(tmp_path, seed):
    inputs, in_corpus = world_inputs(tmp_path, seed)
    rng = np.random.default_rng(seed)
    queries = sorted(inputs.neighbours["query"].unique())
    subjects = sorted(inputs.corpus_annotations["protein"].unique())
    rows = [(q, s, float(rng.uniform(20, 100)), float(rng.uniform(30, 500)), 80.0, 70.0)
            for q in queries for s in rng.choice(subjects, size=5, replace=False)]
    rows += [(q, q, 100.0, 9999.0, 100.0, 100.0) for q in in_corpus]  # DIAMOND's self hits, as it reports them
    hits = pd.DataFrame(rows, columns=list(candidates.HIT_COLUMNS))
    terms = inputs.corpus_annotations[["term", "aspect"]].drop_duplicates().to_numpy()
    nonexp = pd.DataFrame([(q, *terms[i], g) for q in queries for i in rng.choice(len(terms), 3, replace=False)
                           for g in rng.choice(list(EVIDENCE_GROUPS), 1)], columns=["protein", "term", "aspect", "group"])
    inputs = replace(inputs, hits=hits, nonexp=nonexp, sources=SOURCES)
    proteins = sample_proteins(inputs, 20, seed=0)
    assert proteins == sorted(in_corpus)
    report = audit_golden_rule(inputs, proteins)
    assert report.passed, report.to_dict()
    assert set(ALL_FEATURE_COLUMNS) <= set(report.features)


def test_a_kept_self_hit_is_caught_by_the_audit(tmp_path, monkeypatch):
    """Planted leak: the DIAMOND features keep the protein's own hit; the audit must name them."""
    inputs, in_corpus = world_inputs(tmp_path, 0)
    hits = pd.DataFrame([(q, q, 100.0, 9999.0, 100.0, 100.0) for q in in_corpus] +
                        [(q, "C00", 50.0, 100.0, 80.0, 80.0) for q in inputs.neighbours["query"].unique()],
                        columns=list(candidates.HIT_COLUMNS))
    inputs = replace(inputs, hits=hits, nonexp=None, sources=SOURCES)
    assert audit_golden_rule(inputs, sorted(in_corpus)).passed
    monkeypatch.setattr(candidates, "_drop_self_hits", lambda frame: frame)
    report = audit_golden_rule(inputs, sorted(in_corpus))
    assert not report.passed
    leaking = report.leaking_features()
    assert {"dmd_pident_max", "dmd_bitscore_max", "dmd_vote", "src_diamond"} <= set(leaking)
    assert leaking["dmd_pident_max"] == len(in_corpus)


def test_hits_are_ranked_by_ids_and_scores_only():
    shuffled = HITS.sample(frac=1.0, random_state=3)
    pd.testing.assert_frame_equal(prepare_hits(HITS), prepare_hits(shuffled))
    ranked = prepare_hits(HITS, top=1)
    assert ranked[["subject", "rank", "bitscore"]].values.tolist() == [["B", 1, 300.0]]
    with pytest.raises(TempoInputError, match="non-numeric pident"):
        prepare_hits(HITS.assign(pident=["x", 1, 2, 3]))


def test_sources_and_evidence_groups():
    assert parse_sources("goa+knn") == ("knn", "goa")
    with pytest.raises(TempoInputError, match="must include knn"):
        parse_sources("diamond+goa")
    with pytest.raises(TempoInputError, match="unknown"):
        parse_sources("knn+psiblast")
    assert [evidence_group(c) for c in ("IEA", "ISO", "IBA", "NAS", "XYZ")] == [
        "iea", "similarity", "computational", "author", "computational"]


def test_nonexp_groups_propagate_each_group(tmp_path):
    from tempo_assets.core.inputs.ontology import parse_obo

    obo = tmp_path / "go.obo"
    obo.write_text("format-version: 1.2\n\n[Term]\nid: GO:0003674\nname: mf\nnamespace: molecular_function\n\n"
                   "[Term]\nid: GO:0000001\nname: a\nnamespace: molecular_function\nis_a: GO:0003674\n\n"
                   "[Term]\nid: GO:0000002\nname: b\nnamespace: molecular_function\nis_a: GO:0000001\n")
    cleaned = pd.DataFrame({"protein": ["P", "P", "R"], "term": ["GO:0000002", "GO:0000001", "GO:0000002"],
                            "evidence": ["IEA", "ISS", "IBA"], "aspect": ["MF"] * 3})
    rows = nonexp_groups(cleaned, parse_obo(obo), proteins=["P"])
    got = set(map(tuple, rows[["term", "group"]].to_numpy()))
    assert got == {("GO:0000002", "iea"), ("GO:0000001", "iea"), ("GO:0003674", "iea"),
                   ("GO:0000001", "similarity"), ("GO:0003674", "similarity")}
    assert set(rows["protein"]) == {"P"}


def world_source(tmp_path, n_proteins: int, seed: int, per_query: tuple[int, int]) -> CandidateSource:
    """The audit world's candidate inputs with seeded DIAMOND hits and non-experimental annotations:
    ``per_query`` (hits, annotations) for each query."""
    inputs, _ = world_inputs(tmp_path, n_proteins)
    rng = np.random.default_rng(seed)
    queries = sorted(inputs.neighbours["query"].unique())
    subjects = sorted(inputs.corpus_annotations["protein"].unique())
    hits = pd.DataFrame([(q, s, float(rng.uniform(20, 100)), float(rng.uniform(30, 500)), 80.0, 70.0)
                         for q in queries for s in rng.choice(subjects, size=per_query[0], replace=False)],
                        columns=list(candidates.HIT_COLUMNS))
    terms = inputs.corpus_annotations[["term", "aspect"]].drop_duplicates().to_numpy()
    nonexp = pd.DataFrame([(q, *terms[i], "iea") for q in queries
                           for i in rng.choice(len(terms), per_query[1], replace=False)],
                          columns=["protein", "term", "aspect", "group"])
    return CandidateSource(inputs.neighbours, inputs.corpus_annotations, ia=inputs.ia, term_depth=inputs.term_depth,
                           hits=hits, nonexp=nonexp)


@pytest.mark.parametrize("sources", ["knn", "knn+diamond", "knn+goa+prior", "knn+prior"])
def test_a_candidate_set_cut_from_the_union_equals_the_set_built_alone(tmp_path, sources):
    from tempo_assets.core.recipe.candidates import restrict_sources

    source = world_source(tmp_path, n_proteins=1, seed=5, per_query=(4, 3))
    union = recipe_features(source, k=4, sources=SOURCES, prior_top=3)
    alone = recipe_features(source, k=4, sources=sources, prior_top=3)
    assert 0 < len(alone) < len(union)
    pd.testing.assert_frame_equal(restrict_sources(union, sources), alone)
