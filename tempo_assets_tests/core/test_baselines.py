"""Tests for tempo_assets.core.recipe.baselines."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from tempo_assets.core.recipe.baselines import goa_nonexperimental_scores, naive_term_scores
from tempo_assets.core.base.errors import TempoInputError


def corpus():
    return pd.DataFrame(
        [
            ("a", "GO:1", "BP"), ("a", "GO:2", "BP"), ("b", "GO:1", "BP"), ("c", "GO:3", "BP"),
            ("d", "GO:1", "BP"), ("a", "GO:1", "BP"),  # duplicate row counts once
            ("a", "GO:9", "MF"), ("e", "GO:8", "MF"),
        ],
        columns=["protein", "term", "aspect"],
    )


def reference_frequencies(ann):
    """Per aspect (sorted): its corpus rows, its annotated proteins' count and each term's frequency."""
    ann = ann.drop_duplicates()
    for aspect in sorted(set(ann["aspect"])):
        sub = ann[ann["aspect"] == aspect]
        n = sub["protein"].nunique()
        yield aspect, sub, n, {t: g["protein"].nunique() / n for t, g in sub.groupby("term")}


def reference_naive(ann, targets, min_frequency, max_terms):
    """Loop reference: per aspect, proteins with the term / proteins annotated in the aspect."""
    rows = []
    for aspect, _, _, freq in reference_frequencies(ann):
        ranked = sorted((t for t in freq if freq[t] >= min_frequency), key=lambda t: (-freq[t], t))
        if max_terms is not None:
            ranked = ranked[:max_terms]
        for protein in sorted(set(targets.loc[targets["aspect"] == aspect, "protein"])):
            rows += [(protein, t, aspect, freq[t]) for t in ranked]
    out = pd.DataFrame(rows, columns=["protein", "term", "aspect", "score"])
    return out.sort_values(["protein", "aspect", "score", "term"], ascending=[True, True, False, True])


@pytest.mark.parametrize("min_frequency,max_terms", [(0.0, None), (0.3, None), (0.0, 1), (0.26, 2)])
def test_naive_matches_reference(min_frequency, max_terms):
    targets = pd.DataFrame({"protein": ["x", "y", "x", "x"], "aspect": ["BP", "BP", "MF", "MF"]})
    got = naive_term_scores(corpus(), targets, min_frequency=min_frequency, max_terms=max_terms)
    expected = reference_naive(corpus(), targets, min_frequency, max_terms)
    assert got[["protein", "term", "aspect"]].values.tolist() == expected[["protein", "term", "aspect"]].values.tolist()
    np.testing.assert_allclose(got["score"], expected["score"])


def test_naive_hand_values_and_same_list_for_every_target():
    targets = pd.DataFrame({"protein": ["x", "y"], "aspect": ["BP", "BP"]})
    got = naive_term_scores(corpus(), targets, min_frequency=0.0)
    x = got[got["protein"] == "x"].set_index("term")["score"]
    assert x["GO:1"] == 0.75 and x["GO:2"] == 0.25 and x["GO:3"] == 0.25
    y = got[got["protein"] == "y"].set_index("term")["score"]
    pd.testing.assert_series_equal(x, y)
    assert set(got["aspect"]) == {"BP"}


def test_naive_rejects_bad_aspect():
    with pytest.raises(TempoInputError, match="unknown aspects"):
        naive_term_scores(corpus(), pd.DataFrame({"protein": ["x"], "aspect": ["P"]}))


def test_goa_nonexperimental_scores():
    nonexp = pd.DataFrame(
        [("x", "GO:1", "BP"), ("x", "GO:5", "MF"), ("z", "GO:1", "BP"), ("x", "GO:1", "BP")],
        columns=["protein", "term", "aspect"],
    )
    targets = pd.DataFrame({"protein": ["x", "y"], "aspect": ["BP", "BP"]})
    got = goa_nonexperimental_scores(nonexp, targets)
    assert got.values.tolist() == [["x", "GO:1", "BP", 1.0]]


def reference_naive_leave_one_out(ann, targets, min_frequency):
    """Loop reference of ``leave_one_out``: the naive terms kept (frequency on the whole corpus), each
    recounted for a target in the corpus without the target's own rows; a term left at 0 is dropped."""
    rows = []
    for aspect, sub, n, freq in reference_frequencies(ann):
        kept = [t for t in freq if freq[t] >= min_frequency]
        for protein in sorted(set(targets.loc[targets["aspect"] == aspect, "protein"])):
            own = set(sub.loc[sub["protein"] == protein, "term"])
            in_aspect = bool(own)
            for t in kept:
                if t in own or in_aspect:
                    denom = n - in_aspect
                    score = (sub.loc[sub["term"] == t, "protein"].nunique() - (t in own)) / denom if denom > 0 else 0.0
                else:
                    score = freq[t]
                if score > 0:
                    rows.append((protein, t, aspect, score))
    out = pd.DataFrame(rows, columns=["protein", "term", "aspect", "score"])
    return out.sort_values(["protein", "aspect", "score", "term"], ascending=[True, True, False, True], kind="mergesort")


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("min_frequency", [0.0, 0.2])
def test_naive_leave_one_out_matches_reference(seed, min_frequency):
    # targets in the corpus (in this aspect, in another aspect only) and outside it, shuffled rows,
    # duplicate corpus rows, a protein that is the only one annotated in its aspect
    rng = np.random.default_rng(seed)
    proteins, terms = [f"P{i}" for i in range(12)], [f"GO:{i}" for i in range(9)]
    ann = pd.DataFrame({"protein": rng.choice(proteins[:9], 60), "term": rng.choice(terms, 60),
                        "aspect": rng.choice(["BP", "MF"], 60)})
    ann = pd.concat([ann, ann.head(5), pd.DataFrame([("P11", "GO:0", "CC")], columns=ann.columns)])
    targets = pd.DataFrame({"protein": rng.choice(proteins, 30), "aspect": rng.choice(["BP", "MF", "CC"], 30)})
    got = naive_term_scores(ann, targets, min_frequency=min_frequency, leave_one_out=True)
    expected = reference_naive_leave_one_out(ann, targets, min_frequency)
    assert got[["protein", "term", "aspect"]].values.tolist() == expected[["protein", "term", "aspect"]].values.tolist()
    np.testing.assert_allclose(got["score"], expected["score"], rtol=0, atol=1e-15)


def joined_and_sorted(ann, targets, min_frequency, leave_one_out):
    """The naive scores as a join of the targets with the term frequencies, then a sort of every row (the
    frame ``naive_term_scores`` builds without sorting): the same values, dtypes and index."""
    from tempo_assets.core.recipe import baselines

    freq = baselines.term_frequencies(ann)
    freq = freq[freq["frequency"] >= min_frequency]
    tgt = targets[["protein", "aspect"]].drop_duplicates()
    out = tgt.merge(freq, on="aspect", how="inner").rename(columns={"frequency": "score"})
    if leave_one_out:  # the recount, row by row, on the joined rows
        out = out.reset_index(drop=True)
        for i, (protein, term, aspect) in enumerate(zip(out["protein"], out["term"], out["aspect"])):
            sub = ann[ann["aspect"] == aspect].drop_duplicates()
            own = set(sub.loc[sub["protein"] == protein, "term"])
            if own:
                denom = sub["protein"].nunique() - 1
                count = sub.loc[sub["term"] == term, "protein"].nunique() - (term in own)
                out.loc[i, "score"] = count / denom if denom > 0 else 0.0
        out = out[out["score"] > 0]
    out = out.sort_values(["protein", "aspect", "score", "term"], ascending=[True, True, False, True], kind="mergesort")
    return out[["protein", "term", "aspect", "score"]].reset_index(drop=True)


@pytest.mark.parametrize("leave_one_out", [False, True])
@pytest.mark.parametrize("as_object", [False, True])
@pytest.mark.parametrize("seed", [3, 4])
def test_naive_rows_come_in_the_order_a_full_sort_gives(seed, as_object, leave_one_out):
    """Terms of equal frequency (ordered by id), ids whose string order is not their code order, shuffled
    and duplicate targets, an aspect no corpus row has, targets in and outside the corpus: the frame equals,
    dtypes and index included, the one a join and a sort of every row give."""
    rng = np.random.default_rng(seed)
    proteins = [f"P{i}" for i in (10, 2, 33, 4, 5, 61, 7, 8, 9, 1)]
    terms = [f"GO:{i:07d}" for i in (90, 3, 12, 7, 45, 6, 21, 8)]
    ann = pd.DataFrame({"protein": rng.choice(proteins[:7], 50), "term": rng.choice(terms, 50),
                        "aspect": rng.choice(["BP", "MF"], 50)})
    targets = pd.DataFrame({"protein": rng.choice(proteins, 25), "aspect": rng.choice(["BP", "MF", "CC"], 25)})
    if as_object:
        ann, targets = ann.astype(object), targets.astype(object)
    got = naive_term_scores(ann, targets, min_frequency=0.0, leave_one_out=leave_one_out)
    pd.testing.assert_frame_equal(got, joined_and_sorted(ann, targets, 0.0, leave_one_out), check_exact=True)
