"""Candidate features: a loop reference, invariances, and the golden-rule audit."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from tempo_assets.core.base.errors import TempoInputError
from tempo_assets.core.recipe.features import (
    ASPECT_CODES,
    FEATURE_COLUMNS,
    candidate_features,
    compare_protein_features,
    golden_rule_violations,
    prepare_neighbours,
)


def random_world(seed: int, n_corpus: int = 30, n_query: int = 12, n_terms: int = 15,
                 k_max: int = 8):
    """Random corpus + neighbour lists; a third of the queries are themselves in the corpus."""
    rng = np.random.default_rng(seed)
    corpus_ids = [f"C{i}" for i in range(n_corpus)]
    query_ids = [f"Q{i}" for i in range(n_query)]
    in_corpus = query_ids[: n_query // 3]
    rows = []
    for protein in corpus_ids + in_corpus:
        for aspect in rng.choice(list(ASPECT_CODES), size=rng.integers(1, 3), replace=False):
            for term in rng.choice(n_terms, size=rng.integers(1, 5), replace=False):
                rows.append((protein, f"GO:{aspect}{term}", str(aspect)))
    corpus = pd.DataFrame(rows, columns=["protein", "term", "aspect"])
    pool = corpus_ids + in_corpus
    nb_rows = []
    for query in query_ids:
        picks = rng.choice(len(pool), size=k_max, replace=False)
        sims = np.round(rng.uniform(0.1, 1.0, size=k_max), 2)  # rounding makes ties
        for pick, sim in zip(picks, sims):
            nb_rows.append((query, pool[pick], float(sim)))
        if query in in_corpus:
            nb_rows.append((query, query, 1.0))  # self-hit, as a search without exclusion returns
    neighbours = pd.DataFrame(nb_rows, columns=["query", "neighbour", "similarity"])
    neighbours["rank"] = 0  # ignored by the feature builder
    ia = pd.Series({t: float(len(t)) / 3.0 for t in corpus["term"].unique()})
    depth = {t: int(t[-1]) % 4 for t in corpus["term"].unique()}
    return neighbours, corpus, ia, depth, in_corpus


def reference_features(neighbours, corpus, ia, depth, k):
    """Slow dict-and-loop version of candidate_features (the spec, written out)."""
    labels: dict[str, set] = {}
    for p, t, a in corpus[["protein", "term", "aspect"]].itertuples(index=False):
        labels.setdefault(p, set()).add((t, a))
    out = []
    for query in sorted(set(neighbours["query"])):
        best: dict[str, float] = {}
        for q, n, s in neighbours[["query", "neighbour", "similarity"]].itertuples(index=False):
            if q == query and n != query:
                best[n] = max(best.get(n, -math.inf), s)
        ranked = sorted(best.items(), key=lambda item: (-item[1], item[0]))
        if k is not None:
            ranked = ranked[:k]
        n_nb = len(ranked)
        total = sum(s for _, s in ranked)
        top = max(s for _, s in ranked)
        carriers: dict[tuple, list] = {}
        for rank, (n, s) in enumerate(ranked, start=1):
            for t, a in labels.get(n, ()):
                carriers.setdefault((a, t), []).append((s, rank))
        per_aspect: dict[str, int] = {}
        for a, _ in carriers:
            per_aspect[a] = per_aspect.get(a, 0) + 1
        others = {p: terms for p, terms in labels.items() if p != query}
        for (a, t), hits in carriers.items():
            sims = [s for s, _ in hits]
            in_aspect = sum(1 for n, _ in ranked if any(x[1] == a for x in labels.get(n, ())))
            aspect_proteins = [p for p, terms in others.items() if any(x[1] == a for x in terms)]
            carrying = [p for p in aspect_proteins if (t, a) in others[p]]
            out.append({
                "protein": query, "term": t, "aspect": a,
                "sim_max": max(sims), "sim_mean": sum(sims) / len(sims), "sim_sum": sum(sims),
                "vote_share": len(hits) / n_nb,
                "weighted_vote_share": sum(sims) / total,
                "best_rank": min(r for _, r in hits), "top_similarity": top,
                "aspect_neighbour_share": in_aspect / n_nb,
                "corpus_prior": len(carrying) / len(aspect_proteins) if aspect_proteins else 0.0,
                "ia": ia.get(t, np.nan), "depth": depth.get(t, np.nan),
                "n_candidates": per_aspect[a], "aspect_code": ASPECT_CODES[a],
            })
    frame = pd.DataFrame(out)
    return frame.sort_values(["protein", "aspect", "term"]).reset_index(drop=True)


def keyed(frame):
    return frame.sort_values(["protein", "aspect", "term"]).reset_index(drop=True)


@pytest.mark.parametrize("seed,k", [(0, None), (1, 3), (2, 5), (3, 1)])
def test_matches_loop_reference(seed, k):
    neighbours, corpus, ia, depth, _ = random_world(seed)
    fast = keyed(candidate_features(neighbours, corpus, ia=ia, term_depth=depth, k=k))
    slow = reference_features(neighbours, corpus, ia, depth, k)
    assert list(fast.columns) == ["protein", "term", "aspect", *FEATURE_COLUMNS]
    pd.testing.assert_frame_equal(fast[["protein", "term", "aspect"]].astype(object),
                                  slow[["protein", "term", "aspect"]].astype(object))
    for col in FEATURE_COLUMNS:
        np.testing.assert_allclose(fast[col].to_numpy(dtype=float),
                                   slow[col].to_numpy(dtype=float), rtol=0, atol=1e-12,
                                   err_msg=col)


def test_row_order_and_replication_do_not_matter():
    neighbours, corpus, ia, depth, _ = random_world(4)
    base = candidate_features(neighbours, corpus, ia=ia, term_depth=depth, k=5)
    shuffled_nb = pd.concat([neighbours, neighbours.iloc[::3]]).sample(frac=1.0, random_state=7)
    shuffled_corpus = pd.concat([corpus, corpus, corpus.iloc[::2]]).sample(frac=1.0,
                                                                           random_state=8)
    again = candidate_features(shuffled_nb, shuffled_corpus, ia=ia, term_depth=depth, k=5)
    pd.testing.assert_frame_equal(base, again)


def test_self_is_never_a_neighbour():
    neighbours, corpus, ia, depth, in_corpus = random_world(5)
    prepared = prepare_neighbours(neighbours, k=4)
    assert not (prepared["query"] == prepared["neighbour"]).any()
    assert prepared.groupby("query")["rank"].max().max() == 4
    without_self = neighbours[neighbours["query"] != neighbours["neighbour"]]
    pd.testing.assert_frame_equal(candidate_features(neighbours, corpus, k=4),
                                  candidate_features(without_self, corpus, k=4))


def test_real_features_pass_the_golden_rule_audit():
    neighbours, corpus, ia, depth, in_corpus = random_world(6)
    proteins = sorted(set(neighbours["query"]))
    violations = golden_rule_violations(
        proteins, lambda c: candidate_features(neighbours, c, ia=ia, term_depth=depth, k=6),
        corpus)
    assert violations == []
    assert in_corpus, "the audit must cover proteins whose own labels sit in the corpus"


def test_audit_catches_a_planted_leaky_prior():
    """A corpus prior without leave-one-out counts the protein's own label: it leaks."""
    neighbours, corpus, ia, depth, in_corpus = random_world(7)

    def leaky(c):
        features = candidate_features(neighbours, c, k=6)
        counts = c.drop_duplicates().groupby(["aspect", "term"]).size().rename("n_term")
        sizes = c.drop_duplicates(["protein", "aspect"]).groupby("aspect").size().rename("n_asp")
        joined = features.join(counts, on=["aspect", "term"]).join(sizes, on="aspect")
        return features.assign(naive_prior=(joined["n_term"] / joined["n_asp"]).fillna(0.0))

    violations = golden_rule_violations(sorted(set(neighbours["query"])), leaky, corpus)
    leaked = {p for p, f in violations if f == "naive_prior"}
    assert leaked and leaked <= set(in_corpus)
    assert {f for _, f in violations} == {"naive_prior"}


def test_compared_rows_are_matched_on_aspect_and_term_not_on_their_position():
    before = pd.DataFrame({"protein": ["P", "P", "P", "Q"], "term": ["GO:2", "GO:1", "GO:3", "GO:1"],
                           "aspect": ["MF", "MF", "BP", "MF"], "x": [1.0, 2.0, 3.0, 9.0], "y": [0.0, 0.0, np.nan, 1.0]})
    after = before.iloc[[3, 2, 0, 1]]  # the same rows in another order
    assert compare_protein_features(before, after, "P", ["x", "y"]) == []
    assert compare_protein_features(before, after.assign(x=[9.0, 3.0, 1.0, 2.5]), "P", ["x", "y"]) == ["x"]
    fewer = after[after["term"] != "GO:3"].drop(columns="y")
    assert compare_protein_features(before, fewer, "P", ["x", "y"]) == ["candidates", "y"]


def test_audit_catches_an_own_label_count_and_a_changed_candidate_set():
    neighbours, corpus, ia, depth, in_corpus = random_world(8)
    target = in_corpus[0]

    def own_count(c):
        features = candidate_features(neighbours, c, k=6)
        per = c.drop_duplicates().groupby(["protein", "aspect"]).size().rename("own_known")
        return features.join(per, on=["protein", "aspect"]).fillna({"own_known": 0})

    assert (target, "own_known") in golden_rule_violations([target], own_count, corpus)

    def own_terms_as_candidates(c):
        # A builder that proposes the protein's own corpus terms changes its candidate set.
        features = candidate_features(neighbours, c, k=6)
        own = c[c["protein"].isin(set(features["protein"]))].drop_duplicates()
        merged = own.merge(features[["protein", "term", "aspect"]], how="left", indicator=True)
        extra = merged[merged["_merge"] == "left_only"][["protein", "term", "aspect"]]
        padded = extra.assign(**{col: 0.0 for col in FEATURE_COLUMNS})
        return pd.concat([features, padded], ignore_index=True)

    # A term only the target carries, so no neighbour proposes it.
    corpus = pd.concat([corpus, pd.DataFrame({"protein": [target], "term": ["GO:OWN"],
                                              "aspect": ["BP"]})], ignore_index=True)
    assert golden_rule_violations([target], lambda c: candidate_features(neighbours, c, k=6),
                                  corpus) == []
    assert (target, "candidates") in golden_rule_violations([target], own_terms_as_candidates,
                                                            corpus)


def test_bad_inputs_raise_clear_errors():
    neighbours, corpus, *_ = random_world(9)
    with pytest.raises(TempoInputError, match="neighbours.*similarity"):
        candidate_features(neighbours.drop(columns="similarity"), corpus)
    bad = neighbours.copy()
    bad.loc[3, "similarity"] = np.nan
    with pytest.raises(TempoInputError, match="neighbours:3"):
        candidate_features(bad, corpus)
    wrong = corpus.copy()
    wrong.loc[2, "aspect"] = "P"
    with pytest.raises(TempoInputError, match="corpus_annotations:2.*'P'"):
        candidate_features(neighbours, wrong)
    with pytest.raises(TempoInputError, match="k must be"):
        candidate_features(neighbours, corpus, k=0)


def test_empty_inputs_give_an_empty_frame_with_the_columns():
    neighbours, corpus, *_ = random_world(10)
    empty = candidate_features(neighbours.iloc[:0], corpus)
    assert list(empty.columns) == ["protein", "term", "aspect", *FEATURE_COLUMNS]
    assert len(empty) == 0


def test_missing_ids_are_refused():
    neighbours, corpus, *_ = random_world(11)
    holes = corpus.astype({"term": object})
    holes.loc[4, "term"] = None
    with pytest.raises(TempoInputError, match="corpus_annotations:4: missing"):
        candidate_features(neighbours, holes)
    gap = neighbours.astype({"neighbour": object})
    gap.loc[2, "neighbour"] = None
    with pytest.raises(TempoInputError, match="neighbours:2: missing"):
        prepare_neighbours(gap)


def test_loo_ia_passes_golden_rule_violations_when_ia_is_rebuilt_from_the_reduced_corpus(tmp_path):
    """IA counts recomputed from scratch on every reduced corpus: LOO passes, a fixed series fails."""
    from tempo_assets.core.labels.ia import ia_counts
    from tempo_assets_tests.core.test_audits import ontology_world

    ontology, corpus, neighbours, in_corpus = ontology_world(tmp_path, 21)
    loo = golden_rule_violations(
        in_corpus, lambda c: candidate_features(neighbours, c, ia=ia_counts(c, ontology), k=6), corpus)
    assert loo == []
    fixed = golden_rule_violations(
        in_corpus, lambda c: candidate_features(neighbours, c, ia=ia_counts(c, ontology).series(), k=6),
        corpus)
    assert fixed and {f for _, f in fixed} == {"ia"}
