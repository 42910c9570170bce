"""Golden-rule audit with leave-one-out IA, and the cutoff guard's rules over records."""
from __future__ import annotations

import math
from datetime import date

import numpy as np
import pandas as pd
import pytest

from tempo_assets.core.labels.annotations import propagate_annotations
from tempo_assets.core.audits.leakage import (
    FeatureInputs, MaterialisationRecord, audit_cutoff_records, audit_golden_rule, sample_proteins,
)
from tempo_assets.core.base.errors import TempoInputError
from tempo_assets.core.recipe.features import candidate_features
from tempo_assets.core.labels.ia import ia_counts, information_accretion
from tempo_assets.core.inputs.ontology import parse_obo
from tempo_assets_tests.core.obo_fixtures import random_terms, write_obo



def ontology_world(tmp_path, seed: int, n_corpus: int = 40, n_query: int = 12, k_max: int = 8):
    """A random ontology, a propagated corpus, and neighbour lists; some queries are in the corpus."""
    rng = np.random.default_rng(seed)
    ontology = parse_obo(write_obo(tmp_path / f"w{seed}.obo", random_terms(rng, n_per_aspect=10)))
    live = sorted(t for t in ontology.terms if ontology.resolve(t) == t)
    corpus_ids = [f"C{i:02d}" for i in range(n_corpus)]
    query_ids = [f"Q{i:02d}" for i in range(n_query)]
    in_corpus = query_ids[: n_query // 2]
    seeds = pd.DataFrame([(p, str(t)) for p in corpus_ids + in_corpus
                          for t in rng.choice(live, size=int(rng.integers(1, 4)), replace=False)],
                         columns=["protein", "term"])
    corpus = propagate_annotations(seeds.assign(aspect=[ontology.aspect(t) for t in seeds["term"]]),
                                   ontology)
    pool = corpus_ids + in_corpus
    rows = []
    for query in query_ids:
        for pick in rng.choice(len(pool), size=k_max, replace=False):
            rows.append((query, pool[pick], float(np.round(rng.uniform(0.1, 1.0), 2))))
    neighbours = pd.DataFrame(rows, columns=["query", "neighbour", "similarity"])
    return ontology, corpus, neighbours, in_corpus


def reference_loo_ia(corpus: pd.DataFrame, ontology, protein: str, term: str) -> float:
    """IA of ``term`` from scratch on the corpus without ``protein`` (loops over python sets)."""
    by_protein: dict[str, set] = {}
    for p, t in zip(corpus["protein"], corpus["term"]):
        if p != protein:
            by_protein.setdefault(p, set()).add(t)
    parents = set(ontology.parents(term))
    if not parents:
        return 0.0
    with_parents = sum(1 for terms in by_protein.values() if parents <= terms)
    with_both = sum(1 for terms in by_protein.values() if parents | {term} <= terms)
    return 0.0 if with_both == 0 else -math.log2(with_both / with_parents)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_leave_one_out_ia_matches_a_from_scratch_reference(tmp_path, seed):
    ontology, corpus, neighbours, in_corpus = ontology_world(tmp_path, seed)
    counts = ia_counts(corpus, ontology)
    features = candidate_features(neighbours, corpus, ia=counts, k=6)
    assert len(features) > 20
    for row in features[["protein", "term", "ia"]].itertuples(index=False):
        assert row.ia == pytest.approx(reference_loo_ia(corpus, ontology, row.protein, row.term),
                                       abs=1e-12), (row.protein, row.term)
    # a protein outside the IA corpus gets the plain IA; an in-corpus one differs somewhere
    plain = information_accretion(corpus, ontology)
    outside = features[~features["protein"].isin(in_corpus)]
    np.testing.assert_allclose(outside["ia"], plain.reindex(outside["term"]).to_numpy(), atol=1e-12)
    inside = features[features["protein"].isin(in_corpus)]
    assert not np.allclose(inside["ia"], plain.reindex(inside["term"]).to_numpy())


def test_ia_counts_series_and_drop_agree_with_information_accretion(tmp_path):
    ontology, corpus, _, in_corpus = ontology_world(tmp_path, 3)
    counts = ia_counts(corpus, ontology)
    pd.testing.assert_series_equal(counts.series(), information_accretion(corpus, ontology))
    dropped = counts.drop_proteins(in_corpus[:2])
    rest = corpus[~corpus["protein"].isin(in_corpus[:2])]
    pd.testing.assert_series_equal(dropped.series(), information_accretion(rest, ontology))
    unknown = counts.leave_one_out(["C00", "nobody"], ["GO:9999999", counts.terms[3]])
    assert math.isnan(unknown[0]) and unknown[1] == counts.series().iloc[3]
    with pytest.raises(TempoInputError, match="2 proteins but 1 terms"):
        counts.leave_one_out(["A", "B"], ["GO:1"])


@pytest.mark.parametrize("seed", [3, 8])
def test_dropping_proteins_subtracts_exactly_what_a_recount_of_the_rest_gives(tmp_path, seed):
    """drop_proteins subtracts the dropped rows' own counts; every field equals ia_counts of the reduced corpus."""
    ontology, corpus, _, in_corpus = ontology_world(tmp_path, seed)
    counts = ia_counts(corpus, ontology)
    for dropped in ([in_corpus[0]], in_corpus[1:4], ["C05", "nobody"], [], sorted(corpus["protein"].unique())[:-1]):
        incremental = counts.drop_proteins(dropped)
        recount = ia_counts(corpus[~corpus["protein"].isin(dropped)], ontology)
        for name in ("terms", "proteins", "n_parents", "with_parents", "with_both"):
            np.testing.assert_array_equal(getattr(incremental, name), getattr(recount, name), err_msg=name)
        assert (incremental.annotation != recount.annotation).nnz == 0
        assert (incremental.parent_matrix != recount.parent_matrix).nnz == 0
        if dropped:  # the dropped proteins' contribution was not nothing
            assert (incremental.with_parents != counts.with_parents).any()


def world_inputs(tmp_path, seed, ia_kind="counts"):
    ontology, corpus, neighbours, in_corpus = ontology_world(tmp_path, seed)
    counts = ia_counts(corpus, ontology)
    depth = {t: float(ontology.depth(t)) for t in corpus["term"].unique()}
    ia = {"counts": counts, "series": counts.series(), "bare": counts.series()}[ia_kind]
    source = counts if ia_kind == "series" else None
    return FeatureInputs(neighbours, corpus, ia=ia, term_depth=depth, k=6, ia_source=source), in_corpus


def test_real_features_with_loo_ia_pass_the_audit(tmp_path):
    inputs, in_corpus = world_inputs(tmp_path, 4)
    proteins = sample_proteins(inputs, 20, seed=0)
    assert proteins == sorted(in_corpus)  # only labelled queries can show a leak
    report = audit_golden_rule(inputs, proteins)
    assert report.passed, report.to_dict()
    assert "ia" in report.features and report.not_audited == []
    assert report.to_dict()["status"] == "pass"


def test_a_fixed_ia_series_is_caught_as_a_leak(tmp_path):
    inputs, in_corpus = world_inputs(tmp_path, 4, ia_kind="series")
    report = audit_golden_rule(inputs, in_corpus)
    assert set(report.differing) == {"ia"}
    assert set(report.differing["ia"]) <= set(in_corpus)
    bare, _ = world_inputs(tmp_path, 4, ia_kind="bare")
    assert audit_golden_rule(bare, in_corpus).not_audited == ["ia"]


def own_label_count(features: pd.DataFrame, inputs: FeatureInputs) -> pd.DataFrame:
    """Leaky: how many terms the scored protein itself holds in the aspect."""
    own = inputs.corpus_annotations.groupby(["protein", "aspect"]).size().rename("own_count")
    out = features.join(own, on=["protein", "aspect"])
    return out.assign(own_count=out["own_count"].fillna(0.0))


def replicated_bucket(features: pd.DataFrame, inputs: FeatureInputs) -> pd.DataFrame:
    """Leaky: rows replicated once per own label, then the replication turned into a bucket id."""
    own = inputs.corpus_annotations[["protein", "aspect"]]
    joined = features.merge(own, on=["protein", "aspect"], how="left")
    bucket = joined.groupby(["protein", "aspect", "term"]).size().rename("bucket") % 4
    return features.join(bucket, on=["protein", "aspect", "term"])


def test_leaky_extra_features_are_caught_and_named(tmp_path):
    inputs, in_corpus = world_inputs(tmp_path, 5)
    for hook, name in ((own_label_count, "own_count"), (replicated_bucket, "bucket")):
        report = audit_golden_rule(inputs, in_corpus, extra_features=hook)
        assert not report.passed
        assert set(report.leaking_features()) == {name}
        assert 0 < report.leaking_features()[name] <= len(in_corpus)


def test_sample_is_seeded_and_bounded(tmp_path):
    inputs, in_corpus = world_inputs(tmp_path, 6)
    a, b = sample_proteins(inputs, 3, seed=1), sample_proteins(inputs, 3, seed=1)
    assert a == b and len(a) == 3 and set(a) <= set(in_corpus)
    with pytest.raises(TempoInputError, match="sample size"):
        sample_proteins(inputs, 0)


@pytest.mark.slow
def test_real_data_features_pass_the_golden_rule_with_ia(tmp_path_factory):
    """Human 2014-09-29 experimental annotations, GO 2014-10-27: LOO IA passes, a fixed series fails."""
    from tempo_assets.core.labels.annotations import clean_annotations, split_by_evidence
    from tempo_assets_tests.conftest import run_folder
    from tempo_assets_tests.core.real_archive import real_gaf, real_obo

    folder = run_folder(tmp_path_factory)  # the files parsed once per run (real_archive.py)
    ontology = real_obo(folder, "go_2014-10-27.obo.gz")
    experimental, _ = split_by_evidence(real_gaf(folder, "goa_human_2014-09-29.gaf.gz"))
    cleaned, _ = clean_annotations(experimental, ontology)
    corpus = propagate_annotations(cleaned, ontology)
    counts = ia_counts(corpus, ontology)
    # label-free neighbours: the next 10 accessions in sorted order (any label-free rule will do)
    ids = sorted(corpus["protein"].unique())
    rng = np.random.default_rng(0)
    queries = [ids[i] for i in rng.choice(len(ids) - 11, size=4, replace=False)]
    rows = [(q, ids[ids.index(q) + j], 1.0 - j / 20) for q in queries for j in range(1, 11)]
    neighbours = pd.DataFrame(rows, columns=["query", "neighbour", "similarity"])
    inputs = FeatureInputs(neighbours, corpus, ia=counts, k=10)
    report = audit_golden_rule(inputs, queries)
    assert report.passed, report.to_dict()
    fixed = audit_golden_rule(FeatureInputs(neighbours, corpus, ia=counts.series(), k=10,
                                            ia_source=counts), queries)
    assert set(fixed.differing) == {"ia"}


# --- cutoff guard rules --------------------------------------------------------------------

AS_OF = {"2015-01-15": date(2015, 1, 15), "2016-01-15": date(2016, 1, 15),
         "2017-01-15": date(2017, 1, 15), "2018-01-15": date(2018, 1, 15)}
WINDOW = "2015-01-15__2016-01-15__2017-01-15__2018-01-15"


def record(asset, partition, storage_id, **meta):
    base = {"cutoff": "2016-01-15", "max_source_date": "2016-01-15", "sources": []}
    base.update(meta)
    return MaterialisationRecord(asset, partition, base, storage_id)


def test_clean_records_pass_and_are_counted():
    records = [
        record("knn_corpus", "2016-01-15", 1, sources=[{"path": "a.gaf", "date": "2016-01-15"},
                                                       {"artefact": "release_annotations[2016-01-15]"}]),
        record("frozen_recipe", WINDOW, 2, cutoff="2017-01-15", window=WINDOW, window_role="valid",
               recipe_hash="abc", sources=[{"artefact": "valid_selection[" + WINDOW + "]"}]),
        record("test_score", WINDOW, 3, cutoff="2018-01-15", max_source_date="2018-01-15",
               window=WINDOW, window_role="test", recipe_hash="abc",
               sources=[{"artefact": "release_annotations[2018-01-15]"}]),
    ]
    report = audit_cutoff_records(records, AS_OF, assets=["knn_corpus", "submission"])
    assert report.passed, report.to_dict()
    table = report.table().set_index("asset")
    assert table.loc["knn_corpus", "materialisations"] == 1 and table.loc["submission", "partitions"] == 0


@pytest.mark.parametrize("bad,rule,text", [
    (record("knn_corpus", "2016-01-15", 1, max_source_date="2017-01-15"), "within_cutoff",
     "max_source_date 2017-01-15 is after its cutoff 2016-01-15"),
    (record("knn_corpus", "2016-01-15", 1, sources=[{"path": "late.gaf", "date": "2016-02-01"}]),
     "within_cutoff", "late.gaf dated 2016-02-01"),
    (record("knn_corpus", "2016-01-15", 1, cutoff="2017-01-15", max_source_date="2017-01-15"),
     "within_cutoff", "after release 2016-01-15's as-of date"),
    (record("knn_corpus", "2016-01-15", 1, sources=[{"artefact": "embeddings[2017-01-15]"}]),
     "within_cutoff", "embeddings[2017-01-15], a release after"),
    (record("knn_corpus", "2016-01-15", 1, cutoff=None), "binding", "no parseable cutoff"),
    (record("valid_selection", WINDOW, 1, cutoff="2017-01-15", window=WINDOW, window_role="valid",
            sources=[{"artefact": "release_annotations[2018-01-15]"}]),
     "stage_table", "release_annotations[2018-01-15] of release 2018-01-15 is after t0"),
    (record("valid_selection", WINDOW, 1, cutoff="2018-01-15", max_source_date="2018-01-15",
            window=WINDOW, window_role="valid"), "stage_table", "max_source_date 2018-01-15 is after t0"),
    (record("valid_selection", WINDOW, 1, cutoff="2017-01-15", window=WINDOW, window_role="test"),
     "stage_table", "window_role 'test', but valid_selection is bound to 'valid'"),
    (record("frozen_recipe", WINDOW, 1, cutoff="2017-01-15", window=WINDOW, window_role="valid",
            sources=[{"path": "t1.gaf", "date": "2017-06-01", "release": "2018-01-15"}]),
     "stage_table", "t1.gaf dated 2017-06-01 is after t0"),
    (record("something_new", WINDOW, 1, cutoff="2017-01-15"), "stage_table", "without a window_role"),
])
def test_each_cutoff_rule_fires(bad, rule, text):
    report = audit_cutoff_records([bad], AS_OF)
    assert not report.passed
    assert any(f.rule == rule and text in f.message for f in report.findings), report.to_dict()


def test_test_score_needs_an_earlier_frozen_recipe_of_the_same_hash():
    score = dict(cutoff="2018-01-15", max_source_date="2018-01-15", window=WINDOW, window_role="test")
    frozen = dict(cutoff="2017-01-15", window=WINDOW, window_role="valid")
    cases = {
        "no frozen_recipe": [record("test_score", WINDOW, 5, recipe_hash="abc", **score)],
        "before it": [record("test_score", WINDOW, 5, recipe_hash="abc", **score),
                      record("frozen_recipe", WINDOW, 9, recipe_hash="abc", **frozen)],
        "froze ['zzz']": [record("frozen_recipe", WINDOW, 1, recipe_hash="zzz", **frozen),
                          record("test_score", WINDOW, 5, recipe_hash="abc", **score)],
        "records no recipe_hash": [record("frozen_recipe", WINDOW, 1, recipe_hash="abc", **frozen),
                                   record("test_score", WINDOW, 5, **score)],
    }
    for text, records in cases.items():
        findings = audit_cutoff_records(records, AS_OF).findings
        assert [f.rule for f in findings] == ["frozen_recipe"], (text, findings)
        assert text in findings[0].message
    other_window = "2015-01-15__2016-01-15__2017-01-15__2018-02-01"
    ok = [record("frozen_recipe", WINDOW, 1, recipe_hash="abc", **frozen),
          record("frozen_recipe", other_window, 2, recipe_hash="zzz",
                 **{**frozen, "window": other_window}),
          record("test_score", WINDOW, 5, recipe_hash="abc", **score)]
    assert audit_cutoff_records(ok, {**AS_OF, "2018-02-01": date(2018, 2, 1)}).passed
