"""VALID selection: the whole grid is returned, selective deploy, determinism, no TEST input."""
from __future__ import annotations

import inspect
import json

import numpy as np
import pandas as pd
import pytest

from tempo_assets.core.base.errors import TempoInputError
from tempo_assets.core.recipe.selection import CandidateSource, recipe_hash, select_recipe
from tempo_assets.core.recipe.valid_grid import GRID_COLUMNS, SelectionGrid, cafa_scorer
from tempo_assets.core.recipe.frozen_recipe import BuiltForRecipe, apply_recipe

FAMILIES = 6
MODES = ("NK", "LK", "PK")


def flat_fmax_scorer(predictions, ground_truth, known, aspect):
    """Exact Fmax curve without propagation (terms are flat in the synthetic world).

    Precision averages over proteins with a prediction at ``tau``; recall over all ground-truth
    proteins; known terms leave both sides; thresholds are ``arange(0.01, 1, 0.01)``.
    """
    known_pairs = set() if known is None else set(map(tuple, known[["protein", "term"]].to_numpy()))
    truth: dict[str, set] = {}
    for p, t in ground_truth[["protein", "term"]].itertuples(index=False):
        if (p, t) not in known_pairs:
            truth.setdefault(p, set()).add(t)
    truth = {p: ts for p, ts in truth.items() if ts}
    index = {p: i for i, p in enumerate(truth)}
    best: dict[tuple, float] = {}
    for p, t, s in predictions[["protein", "term", "score"]].itertuples(index=False):
        if p in truth and (p, t) not in known_pairs:
            best[(p, t)] = max(best.get((p, t), 0.0), s)
    rows = np.array([index[p] for p, _ in best], dtype=int)
    hits = np.array([t in truth[p] for p, t in best], dtype=bool)
    scores = np.array(list(best.values()), dtype=float)
    sizes = np.array([len(ts) for ts in truth.values()], dtype=float)
    curve = []
    for tau in np.arange(0.01, 1, 0.01):
        on = scores >= tau
        n_pred = np.bincount(rows[on], minlength=len(truth))
        n_hit = np.bincount(rows[on & hits], minlength=len(truth))
        covered = n_pred > 0
        pr = float(np.mean(n_hit[covered] / n_pred[covered])) if covered.any() else 0.0
        rc = float(np.mean(n_hit / sizes)) if len(truth) else 0.0
        f = 2 * pr * rc / (pr + rc) if pr + rc > 0 else 0.0
        curve.append((tau, f, covered.sum() / max(len(truth), 1)))
    return pd.DataFrame(curve, columns=["tau", "f", "cov"])


def make_source(seed: int, n_queries: int = 48, decoy_strength: float = 0.95,
                family_neighbours: int = 5) -> CandidateSource:
    """A window where BP needs the vote share (a high-similarity decoy) and MF does not.

    Each query belongs to a family: five family members (moderate similarity) carry the
    family's BP and MF terms; one decoy (highest similarity) carries another family's BP terms
    only; four strangers (low similarity) carry other families' terms. PK queries sit in the
    corpus with one known BP term and a self-hit in their neighbour list. A poor embedder
    (``family_neighbours=1``) finds one family member among strangers of similar similarity.
    """
    rng = np.random.default_rng(seed)
    corpus_rows, nb_rows, gt_rows, known_rows = [], [], [], []
    members = {f: [f"S{seed}F{f}M{i}" for i in range(8)] for f in range(FAMILIES)}
    decoys = {f: f"S{seed}F{f}D" for f in range(FAMILIES)}
    for f in range(FAMILIES):
        for m in members[f]:
            corpus_rows += [(m, f"GO:B{f}{j}", "BP") for j in range(3)]
            corpus_rows += [(m, f"GO:M{f}{j}", "MF") for j in range(2)]
        corpus_rows += [(decoys[f], f"GO:B{(f + 1) % FAMILIES}{j}", "BP") for j in range(3)]
    for q in range(n_queries):
        query, f, mode = f"S{seed}Q{q}", q % FAMILIES, MODES[q % 3]
        nb_rows.append((query, decoys[f], decoy_strength + rng.uniform(-0.02, 0.02)))
        for m in rng.choice(members[f], size=family_neighbours, replace=False):
            nb_rows.append((query, str(m), rng.uniform(0.6, 0.8)))
        strangers = rng.choice([m for g in range(FAMILIES) if g != f for m in members[g]],
                               size=9 - family_neighbours, replace=False)
        top = 0.45 if family_neighbours > 1 else 0.8
        for m in strangers:
            nb_rows.append((query, str(m), rng.uniform(0.2, top)))
        aspects = ("BP",) if q % 4 == 3 else ("BP", "MF")
        for aspect in aspects:
            terms = [f"GO:B{f}{j}" for j in range(3)] if aspect == "BP" else [
                f"GO:M{f}{j}" for j in range(2)]
            gt_rows += [(query, t, aspect, mode) for t in terms]
        if mode == "PK":
            corpus_rows.append((query, f"GO:B{f}0", "BP"))
            known_rows.append((query, f"GO:B{f}0", "BP"))
            nb_rows.append((query, query, 1.0))
    neighbours = pd.DataFrame(nb_rows, columns=["query", "neighbour", "similarity"])
    neighbours["rank"] = neighbours.groupby("query")["similarity"].rank(ascending=False,
                                                                        method="first")
    return CandidateSource(
        neighbours=neighbours,
        corpus_annotations=pd.DataFrame(corpus_rows, columns=["protein", "term", "aspect"]),
        ground_truth=pd.DataFrame(gt_rows, columns=["protein", "term", "aspect", "mode"]),
        known=pd.DataFrame(known_rows, columns=["protein", "term", "aspect"]),
    )


GRID = SelectionGrid(
    ks=(3, 10),
    lgbm_params=({"num_leaves": 4, "learning_rate": 0.2, "min_data_in_leaf": 5,
                  "n_estimators": 40},
                 {"num_leaves": 8, "learning_rate": 0.1, "min_data_in_leaf": 10,
                  "n_estimators": 40}),
    early_stopping_rounds=5,
)


@pytest.fixture(scope="module")
def selection():
    # "shuffled" is a poor embedder: its neighbour lists are mostly strangers.
    train = {"kmer": make_source(1), "shuffled": make_source(2, family_neighbours=1)}
    valid = {"kmer": make_source(3), "shuffled": make_source(4, family_neighbours=1)}
    grid_frame, recipe = select_recipe(GRID, train_sets=train, valid_sets=valid,
                                       scorer=flat_fmax_scorer, window="w1")
    return train, valid, grid_frame, recipe


def test_grid_frame_holds_every_cell(selection):
    _, _, frame, recipe = selection
    assert list(frame.columns) == list(GRID_COLUMNS)
    n_variants = 1 + len(GRID.lgbm_params) * len(GRID.candidate_sets) * len(GRID.feature_sets)
    unblended = frame[frame["prior_weight"] == 0.0]
    assert len(unblended) == 2 * len(GRID.ks) * n_variants * 3 * 3
    # the chosen embedder's cell of each aspect with VALID targets (BP, MF), blended at every other weight
    blends = frame[frame["prior_weight"] > 0]
    assert len(blends) == (len(GRID.prior_weights) - 1) * 2 * 3
    assert set(blends["embedder"]) == {recipe["embedder"]} and set(blends["aspect"]) == {"BP", "MF"}
    keys = frame[["embedder", "k", "variant", "candidates", "features", "params_id", "prior_weight", "aspect",
                  "mode"]]
    assert not keys.duplicated().any()
    # these sources have no DIAMOND hits nor non-experimental annotations: the wide set is recorded, not run
    wide = frame[frame["candidates"] == "knn+diamond+goa+prior"]
    assert len(wide) and set(wide["status"]) == {"missing_hits_nonexp"}
    cc = frame[frame["aspect"] == "CC"]
    assert set(cc["status"]) <= {"no_targets", "untrainable", "missing_hits_nonexp"}
    ok = frame[frame["status"] == "ok"]
    assert ok["fmax"].between(0, 1).all() and (ok["n_targets"] > 0).all()
    assert frame["selected"].sum() == 3 * 3  # one cell per aspect, all its modes
    # The recipe is what the grid says: its VALID Fmax per mode is the selected rows' Fmax.
    for aspect in ("BP", "MF"):
        chosen = frame[frame["selected"] & (frame["aspect"] == aspect)].set_index("mode")
        for mode, value in recipe["aspects"][aspect]["valid_fmax_by_mode"].items():
            assert chosen.loc[mode, "fmax"] == value


def test_selective_deploy_uses_the_reranker_only_where_it_helps(selection):
    _, _, frame, recipe = selection
    assert recipe["embedder"] == "kmer"
    assert recipe["embedder_objective"] == pytest.approx(1.0)
    poor = frame[(frame["embedder"] == "shuffled") & (frame["status"] == "ok")]
    assert poor.groupby("aspect")["objective"].max().max() < 0.95
    bp, mf = recipe["aspects"]["BP"], recipe["aspects"]["MF"]
    # BP: a high-similarity decoy fools max-similarity KNN; the reranker learns the vote share.
    assert bp["variant"] == "lgbm"
    assert bp["valid_objective"] > bp["plain_objective"] + 0.1
    assert bp["n_estimators"] >= 1 and bp["params"] and "n_estimators" not in bp["params"]
    # MF: plain KNN is already perfect, so no reranker is deployed.
    assert mf["variant"] == "none" and mf["n_estimators"] is None
    assert mf["valid_objective"] == pytest.approx(1.0)
    assert mf["tau"] is not None and set(mf["tau_by_mode"]) == set(MODES)
    assert recipe["aspects"]["CC"]["valid_objective"] is None
    assert recipe["window"] == "w1"
    json.dumps(recipe, allow_nan=False)


def test_selection_is_deterministic(selection):
    train, valid, frame, recipe = selection
    frame2, recipe2 = select_recipe(GRID, train_sets=train, valid_sets=valid,
                                    scorer=flat_fmax_scorer, window="w1")
    assert recipe_hash(recipe2) == recipe_hash(recipe)
    pd.testing.assert_frame_equal(frame, frame2)
    assert recipe_hash(json.loads(json.dumps(recipe))) == recipe_hash(recipe)
    assert recipe_hash({**recipe, "window": "w2"}) != recipe_hash(recipe)


def test_selection_signature_has_no_test_input():
    names = set(inspect.signature(select_recipe).parameters)
    assert not any("test" in name.lower() for name in names)
    assert {"train_sets", "valid_sets", "scorer"} <= names


def test_apply_recipe_refits_and_scores_a_new_window(selection):
    _, valid, _, recipe = selection
    scored = make_source(5)  # the window to score, e.g. TEST growth (t0, t1]
    predictions = apply_recipe(recipe, CandidateSource(scored.neighbours, scored.corpus_annotations),
                               valid["kmer"], embedder="kmer")
    assert list(predictions.columns) == ["protein", "term", "aspect", "score"]
    assert predictions["score"].between(0, 1, inclusive="right").all()
    assert set(predictions["aspect"]) == {"BP", "MF"}
    truth = scored.ground_truth
    for aspect in ("BP", "MF"):
        for mode in MODES:
            gt = truth[(truth["aspect"] == aspect) & (truth["mode"] == mode)]
            kn = scored.known[scored.known["aspect"] == aspect] if mode == "PK" else None
            curve = flat_fmax_scorer(predictions[predictions["aspect"] == aspect], gt, kn, aspect)
            assert curve["f"].max() > 0.95, (aspect, mode)
    again = apply_recipe(json.loads(json.dumps(recipe)),
                         CandidateSource(scored.neighbours, scored.corpus_annotations), valid["kmer"])
    pd.testing.assert_frame_equal(predictions, again)
    with pytest.raises(TempoInputError, match="embedder"):
        apply_recipe(recipe, CandidateSource(scored.neighbours, scored.corpus_annotations), valid["kmer"],
                     embedder="other")


def test_bad_selection_inputs_raise():
    source = make_source(6, n_queries=6)
    with pytest.raises(TempoInputError, match="embedder 'b'"):
        select_recipe({"ks": (3,), "lgbm_params": (), "embedders": ("b",)},
                      train_sets={"a": source}, valid_sets={"a": source},
                      scorer=flat_fmax_scorer)
    with pytest.raises(TempoInputError, match="unknown grid key"):
        select_recipe({"K": (3,)}, train_sets={"a": source}, valid_sets={"a": source},
                      scorer=flat_fmax_scorer)
    with pytest.raises(TempoInputError, match="pass a scorer"):
        select_recipe(GRID, train_sets={"a": source}, valid_sets={"a": source})
    with pytest.raises(TempoInputError, match="not canonical JSON"):
        recipe_hash({"tau": float("nan")})


def test_default_scorer_runs_the_cafa_evaluator(tmp_path):
    """End to end with the cafaeval-exact evaluator on a two-level ontology."""
    from tempo_assets.core.evaluation import EvalOntology

    stanzas = ["format-version: 1.2\n",
               "[Term]\nid: GO:0008150\nname: bp\nnamespace: biological_process\n",
               "[Term]\nid: GO:0003674\nname: mf\nnamespace: molecular_function\n"]
    for f in range(FAMILIES):
        for j in range(3):
            stanzas.append(f"[Term]\nid: GO:B{f}{j}\nname: b\nnamespace: biological_process\n"
                           "is_a: GO:0008150 ! bp\n")
        for j in range(2):
            stanzas.append(f"[Term]\nid: GO:M{f}{j}\nname: m\nnamespace: molecular_function\n"
                           "is_a: GO:0003674 ! mf\n")
    obo = tmp_path / "go.obo"
    obo.write_text("\n".join(stanzas))
    grid = {"ks": (10,), "lgbm_params": GRID.lgbm_params[:1], "early_stopping_rounds": 5, "candidate_sets": ("knn",)}
    frame, recipe = select_recipe(grid, train_sets={"kmer": make_source(1)},
                                  valid_sets={"kmer": make_source(3)},
                                  scorer=cafa_scorer(EvalOntology.from_obo(obo)),
                                  aspects=("BP", "MF"))
    assert len(frame[frame["prior_weight"] == 0.0]) == 2 * 2 * 3
    assert recipe["aspects"]["BP"]["variant"] == "lgbm"
    assert recipe["aspects"]["MF"]["variant"] == "none"
    assert recipe["aspects"]["MF"]["valid_objective"] == pytest.approx(1.0)
    assert 0 < recipe["aspects"]["BP"]["plain_objective"] < recipe["aspects"]["BP"][
        "valid_objective"]


def with_homology(source: CandidateSource, seed: int) -> CandidateSource:
    """The source with DIAMOND hits that find five members of each query's family (and weak strangers)."""
    from dataclasses import replace as _replace

    from tempo_assets.core.recipe.candidates import NONEXP_COLUMNS

    rng = np.random.default_rng(100 + seed)
    corpus = source.corpus_annotations
    members = sorted(p for p in corpus["protein"].unique() if "M" in p.split("F")[-1])
    rows = []
    for query in sorted(source.neighbours["query"].unique()):
        family = int(query.split("Q")[1]) % FAMILIES
        own = [m for m in members if m.split("F")[1].startswith(f"{family}M")]
        others = [m for m in members if m not in own]
        for m in rng.choice(own, size=5, replace=False):
            rows.append((query, str(m), rng.uniform(60, 90), rng.uniform(300, 600), 95.0, 95.0))
        for m in rng.choice(others, size=2, replace=False):
            rows.append((query, str(m), rng.uniform(20, 30), rng.uniform(30, 50), 40.0, 40.0))
    hits = pd.DataFrame(rows, columns=["query", "subject", "pident", "bitscore", "qcov", "scov"])
    return _replace(source, hits=hits, nonexp=pd.DataFrame({c: pd.Series([], dtype=object) for c in NONEXP_COLUMNS}))


def test_valid_selects_the_homology_candidates_when_they_carry_the_signal():
    # an embedder that finds no family member (strangers and the decoy only), but DIAMOND finds the family
    train = {"kmer": with_homology(make_source(1, family_neighbours=0), 1)}
    valid = {"kmer": with_homology(make_source(3, family_neighbours=0), 3)}
    grid = {"ks": (10,), "lgbm_params": GRID.lgbm_params[:1], "early_stopping_rounds": 5,
            "candidate_sets": ("knn", "knn+diamond+goa+prior")}
    frame, recipe = select_recipe(grid, train_sets=train, valid_sets=valid, scorer=flat_fmax_scorer, window="w")
    ok = frame[frame["status"] == "ok"]
    wide = ok["candidates"] == "knn+diamond+goa+prior"
    for aspect in ("BP", "MF"):
        mine = ok["aspect"] == aspect
        # better than plain KNN and than the reranker over KNN candidates (untrainable here: none is right)
        assert ok[mine & wide]["objective"].max() > ok[mine & ~wide]["objective"].max() + 0.1
        assert recipe["aspects"][aspect]["candidates"] == "knn+diamond+goa+prior"
        assert recipe["aspects"][aspect]["features"] == "all"
    scored = with_homology(make_source(5, family_neighbours=0), 5)
    predictions = apply_recipe(recipe, CandidateSource(scored.neighbours, scored.corpus_annotations, hits=scored.hits,
                                                     nonexp=scored.nonexp), valid["kmer"])
    bp = predictions[predictions["aspect"] == "BP"]
    truth = scored.ground_truth[(scored.ground_truth["aspect"] == "BP") & (scored.ground_truth["mode"] == "NK")]
    assert flat_fmax_scorer(bp, truth, None, "BP")["f"].max() > 0.9
    # a recipe that needs homology refuses to score proteins without it rather than degrade silently
    with pytest.raises(TempoInputError, match="hits"):
        apply_recipe(recipe, CandidateSource(scored.neighbours, scored.corpus_annotations, nonexp=scored.nonexp),
                     valid["kmer"])


def test_the_train_labels_rebuild_the_rerankers_valid_scored():
    # TEST reads the recipe at the thresholds VALID fixed, with the TRAIN labels (Window.recipe_labels):
    # apply_recipe on the VALID proteins with them must give back the very scores VALID selected on
    from tempo_assets.core.recipe.selection import _CellScorer

    train = {"kmer": with_homology(make_source(1, family_neighbours=0), 1)}
    valid = {"kmer": with_homology(make_source(3, family_neighbours=0), 3)}
    grid = {"ks": (10,), "lgbm_params": GRID.lgbm_params, "early_stopping_rounds": 5,
            "candidate_sets": ("knn", "knn+diamond+goa+prior")}
    _, recipe = select_recipe(grid, train_sets=train, valid_sets=valid, scorer=flat_fmax_scorer, window="w")
    v = valid["kmer"]
    again = apply_recipe(recipe, CandidateSource(v.neighbours, v.corpus_annotations, hits=v.hits, nonexp=v.nonexp),
                         train["kmer"], proteins=v.ground_truth["protein"].unique())
    cells = _CellScorer(flat_fmax_scorer, v, ("BP", "MF"), MODES)
    for aspect in ("BP", "MF"):
        choice = recipe["aspects"][aspect]
        assert choice["variant"] == "lgbm" and choice["candidates"] == "knn+diamond+goa+prior"
        rows = cells.score(("again",), aspect, again[again["aspect"] == aspect])
        assert {r["mode"]: r["fmax"] for r in rows} == pytest.approx(choice["valid_fmax_by_mode"], abs=1e-12)


def test_chunks_of_proteins_give_the_predictions_of_all_at_once():
    # a CAFA submission scores its proteins a chunk at a time (core.pipeline.workflow.recipe_chunks)
    from tempo_assets.core.pipeline.workflow import recipe_chunks

    train = {"kmer": with_homology(make_source(1, family_neighbours=0), 1)}
    valid = {"kmer": with_homology(make_source(3, family_neighbours=0), 3)}
    grid = {"ks": (3, 10), "lgbm_params": GRID.lgbm_params[:1], "early_stopping_rounds": 5,
            "candidate_sets": ("knn", "knn+diamond+goa+prior"), "prior_weights": (0.0, 0.5)}
    _, recipe = select_recipe(grid, train_sets=train, valid_sets=valid, scorer=flat_fmax_scorer, window="w")
    recipe["aspects"]["MF"]["prior_weight"] = 0.5  # exercise the blend too, whatever VALID chose
    scored = with_homology(make_source(5, family_neighbours=0), 5)
    proteins = sorted(set(scored.neighbours["query"]))
    once = apply_recipe(recipe, CandidateSource(scored.neighbours, scored.corpus_annotations, hits=scored.hits,
                                                   nonexp=scored.nonexp), valid["kmer"], proteins=proteins)
    chunks = list(recipe_chunks(recipe, scored, valid["kmer"], proteins, chunk=7))
    assert len(chunks) == -(-len(proteins) // 7)
    assert all(set(c["protein"]) <= set(proteins[i * 7:(i + 1) * 7]) for i, c in enumerate(chunks))
    pd.testing.assert_frame_equal(pd.concat(chunks, ignore_index=True), once)


def test_method_predictions_apply_the_recipe_a_chunk_of_proteins_at_a_time(monkeypatch):
    """test_score's and benchmark's recipe predictions (``method_predictions``) are made a chunk of proteins
    at a time, so the candidates' features follow the chunk: the same frame as all at once."""
    from tempo_assets.core.pipeline import recipe_predictions

    train = {"kmer": with_homology(make_source(1, family_neighbours=0), 1)}
    valid = {"kmer": with_homology(make_source(3, family_neighbours=0), 3)}
    grid = {"ks": (3, 10), "lgbm_params": GRID.lgbm_params[:1], "early_stopping_rounds": 5,
            "candidate_sets": ("knn", "knn+diamond+goa+prior"), "prior_weights": (0.0, 0.5)}
    _, recipe = select_recipe(grid, train_sets=train, valid_sets=valid, scorer=flat_fmax_scorer, window="w")
    scored = with_homology(make_source(5, family_neighbours=0), 5)
    targets = pd.DataFrame({"protein": sorted(set(scored.neighbours["query"])), "aspect": "MF"})
    once = apply_recipe(recipe, scored, valid["kmer"], proteins=targets["protein"].unique())
    applied = []

    def counted(*args, **kwargs):
        applied.append(len(kwargs["proteins"]))
        return apply_recipe(*args, **kwargs)

    monkeypatch.setattr(recipe_predictions, "RECIPE_CHUNK_PROTEINS", 4)
    monkeypatch.setattr(recipe_predictions, "apply_recipe", counted)
    made = recipe_predictions.method_predictions(recipe, scored, valid["kmer"], targets, k_plain=3)["recipe"]
    assert len(applied) == -(-len(targets) // 4) > 1 and max(applied) <= 4
    pd.testing.assert_frame_equal(made, once)


def prior_world(seed: int) -> CandidateSource:
    """A window the KNN gets wrong and the prior gets right: every VALID target gains GO:T1, which
    15 of the 20 corpus proteins carry, but its five neighbours are the five that carry only GO:T2."""
    corpus = [(f"S{seed}C{i}", "GO:T1" if i < 15 else "GO:T2", "BP") for i in range(20)]
    queries = [f"S{seed}Q{q}" for q in range(6)]
    neighbours = pd.DataFrame([(q, f"S{seed}C{15 + j}", 0.9 - 0.1 * j, j + 1) for q in queries for j in range(5)],
                              columns=["query", "neighbour", "similarity", "rank"])
    truth = pd.DataFrame([(q, "GO:T1", "BP", "NK") for q in queries], columns=["protein", "term", "aspect", "mode"])
    return CandidateSource(neighbours=neighbours,
                           corpus_annotations=pd.DataFrame(corpus, columns=["protein", "term", "aspect"]),
                           ground_truth=truth, known=truth.iloc[:0][["protein", "term", "aspect"]])


def test_valid_blends_the_prior_in_where_it_beats_the_chosen_cell():
    from tempo_assets.core.recipe.valid_grid import blend_with_prior, prior_scores

    train, valid = prior_world(1), prior_world(2)
    frame, recipe = select_recipe({"ks": (5,), "lgbm_params": ()}, train_sets={"kmer": train},
                                  valid_sets={"kmer": valid}, scorer=flat_fmax_scorer, window="w", aspects=("BP",))
    bp = recipe["aspects"]["BP"]
    # plain KNN proposes GO:T2 only (score 0.9, its best similarity: F 0); at w = 0.75 GO:T1 (0.5625)
    # outranks GO:T2 (0.4125): F 1,
    # as at w = 1 (the prior alone); the tie goes to the smaller weight
    assert bp["variant"] == "none" and bp["unblended_objective"] == pytest.approx(0.0)
    assert bp["prior_weight"] == 0.75 and bp["valid_objective"] == pytest.approx(1.0)
    assert recipe["grid"]["prior_weights"] == [0.0, 0.25, 0.5, 0.75, 1.0]
    chosen = frame[frame["selected"]]
    assert set(chosen["prior_weight"]) == {0.75}
    assert chosen[chosen["mode"] == "NK"]["fmax"].tolist() == [pytest.approx(1.0)]
    assert sorted(frame[frame["mode"] == "NK"]["prior_weight"]) == [0.0, 0.25, 0.5, 0.75, 1.0]
    # applied at a new cutoff: the blend of the plain KNN scores and the prior of the scored proteins
    scored = prior_world(3)
    predictions = apply_recipe(recipe, CandidateSource(scored.neighbours, scored.corpus_annotations), valid)
    q = predictions[predictions["protein"] == "S3Q0"].set_index("term")["score"]
    assert q.to_dict() == {"GO:T1": pytest.approx(0.75 * 0.75), "GO:T2": pytest.approx(0.25 * 0.9 + 0.75 * 0.25)}
    # w = 1 is the naive baseline itself for a protein without labels; w = 0 the scores unblended
    prior = prior_scores(scored.corpus_annotations, ["S3Q0"])
    knn = pd.DataFrame({"protein": ["S3Q0"], "term": ["GO:T2"], "aspect": ["BP"], "score": [1.0]})
    pure = blend_with_prior(knn, prior, 1.0).set_index("term")["score"].to_dict()
    assert pure == {"GO:T1": pytest.approx(0.75), "GO:T2": pytest.approx(0.25)}
    assert blend_with_prior(knn, prior, 0.0).equals(knn)


def test_the_blended_prior_leaves_the_scored_proteins_own_labels_out():
    from tempo_assets.core.recipe.baselines import naive_term_scores

    corpus = pd.DataFrame([("A", "GO:1", "BP"), ("A", "GO:2", "BP"), ("B", "GO:1", "BP"), ("C", "GO:3", "BP"),
                           ("D", "GO:1", "BP")], columns=["protein", "term", "aspect"])
    targets = pd.DataFrame({"protein": ["A", "Z"], "aspect": ["BP", "BP"]})
    plain = naive_term_scores(corpus, targets).set_index(["protein", "term"])["score"]
    loo = naive_term_scores(corpus, targets, leave_one_out=True).set_index(["protein", "term"])["score"]
    # Z (no labels) gets the naive scores exactly; A is counted in a corpus of B, C, D
    assert loo.loc["Z"].to_dict() == plain.loc["Z"].to_dict() == {"GO:1": 0.75, "GO:2": 0.25, "GO:3": 0.25}
    assert loo.loc["A"].to_dict() == {"GO:1": pytest.approx(2 / 3), "GO:3": pytest.approx(1 / 3)}  # GO:2 was A's alone


def test_the_left_out_prior_recounts_each_aspect_on_its_own_proteins():
    """Per (target, term): ``(n(t) - [own]) / (N(aspect) - [target in aspect])`` with each aspect's own N."""
    from tempo_assets.core.recipe.baselines import naive_term_scores

    corpus = pd.DataFrame([("A", "GO:1", "BP"), ("A", "GO:2", "BP"), ("B", "GO:1", "BP"), ("C", "GO:3", "BP"),
                           ("D", "GO:1", "BP"), ("A", "GO:7", "MF"), ("E", "GO:7", "MF"), ("E", "GO:8", "MF")],
                          columns=["protein", "term", "aspect"])
    targets = pd.DataFrame({"protein": ["A", "A", "E", "Z"], "aspect": ["BP", "MF", "BP", "MF"]})
    plain = naive_term_scores(corpus, targets)
    loo = naive_term_scores(corpus, targets, leave_one_out=True)
    n_terms = corpus.groupby(["term", "aspect"]).size().to_dict()
    n_aspect = corpus.groupby("aspect")["protein"].nunique().to_dict()
    own, member = set(map(tuple, corpus.to_numpy())), set(map(tuple, corpus[["protein", "aspect"]].to_numpy()))
    want = {}
    for p, t, a, score in plain.itertuples(index=False):
        mine, inside = int((p, t, a) in own), int((p, a) in member)
        if mine or inside:
            score = (n_terms[(t, a)] - mine) / (n_aspect[a] - inside) if n_aspect[a] - inside > 0 else 0.0
        if score > 0:
            want[(p, t)] = score
    assert {(p, t): s for p, t, _, s in loo.itertuples(index=False)} == want


def test_recipe_profile_defaults_to_cafaeval_and_refuses_another():
    """A recipe records the profile it was selected under; one frozen before that was cafaeval's."""
    from tempo_assets.core.recipe.selection import recipe_profile
    from tempo_assets.core.recipe.valid_grid import SelectionInputError

    assert recipe_profile({"format": "tempo-recipe-1"}) == "cafaeval"
    assert recipe_profile({"profile": "lafa"}) == "lafa"
    with pytest.raises(SelectionInputError, match="recipe.profile"):
        recipe_profile({"profile": "cafa"})


def three_ks_two_candidate_sets():
    """TRAIN and VALID sources of one embedder and a grid of 3 K x 2 candidate sets (6 sets) of one LightGBM setting."""
    train = {"kmer": with_homology(make_source(1, family_neighbours=0), 1)}
    valid = {"kmer": with_homology(make_source(3, family_neighbours=0), 3)}
    grid = {"ks": (5, 10, 25), "lgbm_params": GRID.lgbm_params[:1], "early_stopping_rounds": 5,
            "candidate_sets": ("knn", "knn+diamond+goa+prior")}
    return train, valid, grid


def test_the_candidates_the_grid_hands_on_are_those_the_recipe_would_build():
    # select_on_valid fits the recipe's rerankers and scores VALID on the candidates the grid built for the
    # recipe's cells: they must be the very frames fit_rerankers and apply_recipe build themselves
    from dataclasses import replace as _replace

    from tempo_assets.core.recipe.candidates import recipe_features
    from tempo_assets.core.recipe.features import prepare_neighbours
    from tempo_assets.core.recipe.frozen_recipe import fit_rerankers
    from tempo_assets.core.recipe.selection import select_recipe_candidates
    from tempo_assets.core.recipe.valid_grid import _labelled

    train, valid, grid = three_ks_two_candidate_sets()
    _, recipe, built = select_recipe_candidates(grid, train_sets=train, valid_sets=valid,
                                                scorer=flat_fmax_scorer, window="w")
    assert recipe == select_recipe(grid, train_sets=train, valid_sets=valid, scorer=flat_fmax_scorer, window="w")[1]
    served = {}  # (K, candidate set) -> the aspects whose LightGBM cell the recipe takes from it
    for aspect, c in recipe["aspects"].items():
        if c["variant"] == "lgbm":
            served.setdefault((int(c["k"]), c["candidates"]), []).append(aspect)
    assert served and set(built.labelled) == set(built.features) == set(served)
    t, v = train["kmer"], valid["kmer"]
    for (k, cand), aspects in served.items():  # each aspect's rows as built alone, in their order
        for held, alone in ((built.labelled[(k, cand)], _labelled(t, recipe_features(t, k, cand))),
                            (built.features[(k, cand)], recipe_features(
                                _replace(v, neighbours=prepare_neighbours(v.neighbours, k)), k, cand))):
            assert set(held["aspect"]) == set(aspects)
            for aspect in aspects:
                pd.testing.assert_frame_equal(held[held["aspect"] == aspect], alone[alone["aspect"] == aspect])
    fitted = fit_rerankers(recipe, t, v, labelled=built.labelled)
    again = fit_rerankers(recipe, t, v)
    assert {a: m.model_text() for a, m in fitted.items()} == {a: m.model_text() for a, m in again.items()}
    scored = CandidateSource(v.neighbours, v.corpus_annotations, hits=v.hits, nonexp=v.nonexp)
    pd.testing.assert_frame_equal(apply_recipe(recipe, scored, t, built=BuiltForRecipe(fitted, built.features)),
                                  apply_recipe(recipe, scored, t, built=BuiltForRecipe(rerankers=again)))


def test_the_grid_holds_at_most_one_candidate_set_per_aspect_while_it_runs(monkeypatch):
    # the grid's candidate sets are let go of once no aspect's best LightGBM cell is in them: holding every
    # set until the recipe was chosen made valid_selection's peak on data/'s W2 1.41-1.44 -> 1.64-1.68 GB
    from tempo_assets.core.recipe import selection
    from tempo_assets.core.recipe.selection import select_recipe_candidates

    held, hold = [], selection._hold_if_best

    def counted(scores, *args):
        hold(scores, *args)
        held.append(len(scores.candidate_sets))

    monkeypatch.setattr(selection, "_hold_if_best", counted)
    train, valid, grid = three_ks_two_candidate_sets()
    _, recipe, built = select_recipe_candidates(grid, train_sets=train, valid_sets=valid,
                                                scorer=flat_fmax_scorer, window="w")
    assert len(held) == 6 and max(held) <= len(recipe["aspects"]) < 6, held
    chosen = {(int(c["k"]), c["candidates"]) for c in recipe["aspects"].values() if c["variant"] == "lgbm"}
    assert chosen and set(built.features) == chosen


def test_the_grid_keeps_the_predictions_of_each_aspect_s_best_cells_only(monkeypatch):
    # a cell's VALID predictions are let go of once a better cell of its embedder, aspect and variant is scored
    # (only the cells _choose picks are blended): holding every cell's until the recipe was chosen was part of
    # valid_selection's peak on the human archive; the grid and the recipe are those of keeping every cell's
    from tempo_assets.core.recipe import selection
    from tempo_assets.core.recipe.selection import select_recipe_candidates

    kept_after_grid, score_grid = [], selection._score_grid

    def recorded(*args):
        scores = score_grid(*args)
        kept_after_grid.append(set(scores.kept))
        return scores

    monkeypatch.setattr(selection, "_score_grid", recorded)
    train = {"kmer": make_source(1), "shuffled": make_source(2, family_neighbours=1)}
    valid = {"kmer": make_source(3), "shuffled": make_source(4, family_neighbours=1)}
    frame, recipe, _ = select_recipe_candidates(GRID, train_sets=train, valid_sets=valid,
                                                scorer=flat_fmax_scorer, window="w")
    cells = frame[frame["prior_weight"] == 0.0].drop_duplicates(["embedder", "k", "variant", "candidates",
                                                                  "features", "params_id", "aspect"])
    best = set()  # each embedder's, aspect's and variant's best cell by _choose's rule
    for (name, aspect, variant), mine in cells.groupby(["embedder", "aspect", "variant"]):
        pick = selection._best_cell(mine, GRID if variant == "lgbm" else None)
        if pick is not None:
            best.add(selection._Pick.of_row(pick, pick).kept(name, aspect))
    assert len(best) > 6 and kept_after_grid == [best]

    def every(scores, kept, predictions, rows):
        scores.kept[kept] = predictions

    monkeypatch.setattr(selection, "_keep_if_best", every)
    frame_every, recipe_every, _ = select_recipe_candidates(GRID, train_sets=train, valid_sets=valid,
                                                            scorer=flat_fmax_scorer, window="w")
    assert recipe == recipe_every
    pd.testing.assert_frame_equal(frame, frame_every)
