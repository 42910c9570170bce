"""The candidate features computed on integer codes (``candidates._per_candidate``, ``restrict_sources``,
the row order, ``ia._lookup``) equal a row-by-row reading of their definitions on string ids."""
from __future__ import annotations

import numpy as np
import pandas as pd

from tempo_assets.core.labels.ia import _lookup
from tempo_assets.core.recipe.candidates import SOURCES, CandidateSource, recipe_features, restrict_sources
from tempo_assets.core.recipe.features import ASPECT_CODES, prepare_neighbours
from tempo_assets_tests.core.test_candidates import world_source


def world_features(tmp_path, k: int = 4) -> tuple[pd.DataFrame, CandidateSource]:
    """Every source's candidates of the audit world, with hits and non-experimental annotations in every aspect."""
    source = world_source(tmp_path, n_proteins=3, seed=11, per_query=(3, 4))
    return recipe_features(source, k=k, sources=SOURCES, prior_top=3), source


def test_per_candidate_columns_follow_their_definitions_row_by_row(tmp_path):
    feats, source = world_features(tmp_path)
    corpus = source.corpus_annotations[["protein", "term", "aspect"]].astype(str).drop_duplicates()
    assert corpus["aspect"].nunique() > 1 and feats["aspect"].nunique() > 1  # keys must tell aspects apart
    held = set(map(tuple, corpus.to_numpy()))
    in_aspect = set(map(tuple, corpus[["protein", "aspect"]].to_numpy()))
    term_n = corpus.groupby(["term", "aspect"]).size().to_dict()
    aspect_n = corpus[["protein", "aspect"]].drop_duplicates().groupby("aspect").size().to_dict()
    nb = prepare_neighbours(source.neighbours, 4)
    top = nb[nb["rank"] == 1].set_index("query")["similarity"].to_dict()
    annotated = {(q, a) for q, n in zip(nb["query"], nb["neighbour"]) for (p, a) in in_aspect if p == n}
    share = {(q, a): sum(1 for n in nb[nb["query"] == q]["neighbour"] if (n, a) in in_aspect) / (nb["query"] == q).sum()
             for (q, a) in annotated}
    sizes = feats.groupby(["protein", "aspect"]).size().to_dict()
    ia = source.ia.leave_one_out(feats["protein"].to_numpy(dtype=object), feats["term"].to_numpy(dtype=object))
    for row, loo_ia in zip(feats.itertuples(index=False), ia):
        own_term, own_aspect = (row.protein, row.term, row.aspect) in held, (row.protein, row.aspect) in in_aspect
        denom = aspect_n.get(row.aspect, 0) - own_aspect
        prior = (term_n.get((row.term, row.aspect), 0) - own_term) / denom if denom > 0 else 0.0
        assert row.corpus_prior == prior, row
        assert row.n_candidates == sizes[(row.protein, row.aspect)]
        assert row.aspect_code == ASPECT_CODES[row.aspect]
        assert row.top_similarity == top.get(row.protein, 0.0)
        assert row.aspect_neighbour_share == share.get((row.protein, row.aspect), 0.0)
        assert row.depth == source.term_depth[row.term]
        assert row.ia == loo_ia or (np.isnan(row.ia) and np.isnan(loo_ia))


def test_candidates_are_ordered_by_protein_then_aspect_code_then_term(tmp_path):
    feats, _ = world_features(tmp_path)
    expected = sorted(zip(feats["protein"], feats["aspect"].map(ASPECT_CODES), feats["term"]))
    assert list(zip(feats["protein"], feats["aspect"].map(ASPECT_CODES), feats["term"])) == expected
    assert feats["aspect"].map(ASPECT_CODES).tolist() != sorted(feats["aspect"].map(ASPECT_CODES).tolist())


def test_a_restricted_set_recounts_candidates_per_protein_and_aspect(tmp_path):
    feats, _ = world_features(tmp_path)
    cut = restrict_sources(feats, "knn+goa")
    assert 0 < len(cut) < len(feats)
    counts = cut.groupby(["protein", "aspect"])["term"].transform("size").astype(np.float64)
    assert cut["n_candidates"].tolist() == counts.tolist()
    assert (cut[["src_diamond", "src_prior"]] == 0).all().all()


def test_lookup_finds_each_repeated_id_and_no_id_for_a_missing_value():
    ids = np.array(["a", "b", "c"], dtype=object)
    values = np.array(["c", None, "a", "c", "z", np.nan, "b"], dtype=object)
    assert _lookup(ids, values).tolist() == [2, -1, 0, 2, -1, -1, 1]
    assert _lookup(ids, np.array([], dtype=object)).tolist() == []


def test_prior_joined_once_blends_every_weight_by_the_rule():
    from tempo_assets.core.recipe.valid_grid import PriorAligned, blend_with_prior

    scores = pd.DataFrame({"protein": ["P", "P", "Q"], "term": ["GO:1", "GO:2", "GO:1"], "aspect": ["MF"] * 3,
                           "score": [0.8, 0.4, 0.0]})
    prior = pd.DataFrame({"protein": ["P", "Q", "Q"], "term": ["GO:1", "GO:1", "GO:3"], "aspect": ["MF"] * 3,
                          "score": [0.5, 0.0, 0.6]})
    aligned = PriorAligned.of(scores, prior)
    pairs = {("P", "GO:1"): (0.8, 0.5), ("P", "GO:2"): (0.4, 0.0), ("Q", "GO:1"): (0.0, 0.0), ("Q", "GO:3"): (0.0, 0.6)}
    for weight in (0.25, 0.5, 1.0):
        got = aligned.blend(weight)
        want = {key: (1 - weight) * s + weight * p for key, (s, p) in pairs.items() if (1 - weight) * s + weight * p > 0}
        assert dict(zip(zip(got["protein"], got["term"]), got["score"])) == want
        pd.testing.assert_frame_equal(got, blend_with_prior(scores, prior, weight))


def test_the_corpus_deduplicated_on_codes_equals_drop_duplicates_with_codes_of_its_ids():
    from tempo_assets.core.recipe.candidates import _corpus, _first_of_each

    rng = np.random.default_rng(5)
    raw = pd.DataFrame({"protein": rng.choice(["P3", "P1", "P2"], 60), "term": rng.choice(["GO:9", "GO:1", "GO:5"], 60),
                        "aspect": rng.choice(["MF", "BP", "CC"], 60), "extra": np.arange(60)})
    frame, codes = _corpus(raw)
    expected = raw[["protein", "term", "aspect"]].astype(str).drop_duplicates().reset_index(drop=True)
    pd.testing.assert_frame_equal(frame, expected)
    for column, code, ids in zip(("protein", "aspect", "term"), (codes.p, codes.a, codes.t), codes.uniques):
        assert ids[code].tolist() == frame[column].tolist()
    keys = rng.integers(0, 7, 50)
    _, first = _first_of_each(keys)
    assert first.tolist() == (~pd.Series(keys).duplicated()).tolist()
