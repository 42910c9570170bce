"""Fast evaluator == a slow loop-based reference of cafaeval 1.3.0's rules; properties; LAFA."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from tempo_assets.core.evaluation import (
    EvalOntology,
    EvaluationInputError,
    best_rows,
    bootstrap_ci,
    cafa_eval,
    evaluate_frames,
    fmax_score,
    paired_bootstrap,
    smin_loss,
    threshold_curve,
    threshold_grid,
    write_results,
)

NAMES = {"BP": "biological_process", "MF": "molecular_function", "CC": "cellular_component"}


# ------------------------------------------------------------------------------------------
# a random toy ontology, written as OBO


def make_toy(seed: int = 0, per_ns: int = 14):
    """Random DAGs (term k has parents among terms < k), alt ids, an obsolete term."""
    rng = np.random.default_rng(seed)
    parents: dict[str, dict[str, list[str]]] = {}
    lines = ["format-version: 1.2", ""]
    alts = {}
    number = 1
    for aspect, name in NAMES.items():
        ids = []
        parents[name] = {}
        for k in range(per_ns):
            term = f"GO:{number:07d}"
            number += 1
            chosen = [] if k == 0 else sorted(set(rng.choice(ids, size=min(len(ids), int(rng.integers(1, 3))), replace=False)))
            parents[name][term] = list(chosen)
            ids.append(term)
            lines += ["[Term]", f"id: {term}", f"name: t{term}", f"namespace: {name}"]
            if k in (3, 7):
                alt = f"GO:{9000000 + number:07d}"
                alts[alt] = term
                lines.append(f"alt_id: {alt}")
            for i, parent in enumerate(chosen):
                lines.append(f"is_a: {parent} ! p" if i % 2 == 0 else f"relationship: part_of {parent} ! p")
            lines.append("")
    lines += ["[Term]", "id: GO:0099999", "name: gone", "namespace: biological_process",
              "is_obsolete: true", "", "[Typedef]", "id: part_of", "name: part of", ""]
    return "\n".join(lines), parents, alts


def toy_inputs(parents, alts, seed: int, n_proteins: int = 6, grid_scores: bool = False):
    rng = np.random.default_rng(seed)
    truth, preds = [], []
    proteins = [f"P{i:02d}" for i in range(n_proteins)]
    all_terms = {name: list(terms) for name, terms in parents.items()}
    for p in proteins:
        for name, terms in all_terms.items():
            if rng.random() < 0.85:
                for t in rng.choice(terms[1:], size=int(rng.integers(1, 3)), replace=False):
                    truth.append((p, t))
            for t in rng.choice(terms, size=int(rng.integers(0, 7)), replace=False):
                score = float(rng.choice([0.57, 0.29, 0.01, 1.0, 0.0, 0.5])) if grid_scores \
                    else round(float(rng.random()), 3)
                preds.append((p, t, score))
    alt_list = sorted(alts)
    preds += [(proteins[0], alt_list[0], 0.77), (proteins[1], alt_list[1], 0.33),
              (proteins[0], preds[0][1], 0.95), (proteins[2], "GO:0099999", 0.9),
              (proteins[3], "GO:1234567", 0.4), ("NOT_IN_GT", preds[0][1], 0.9),
              (proteins[4], preds[1][1], float("nan")), (proteins[5], preds[2][1], -0.5)]
    gt = pd.DataFrame(truth, columns=["protein", "term"])
    pr = pd.DataFrame(preds, columns=["protein", "term", "score"])
    return gt, pr


# ------------------------------------------------------------------------------------------
# slow reference: cafaeval's rules, one protein and one threshold at a time


def reference_eval(parents, alts, gt, preds, tau_arr, prop="max", ia=None, orphans=True,
                   norm="cafa", max_terms=None, known=None, toi=None):
    names = list(parents)
    ns_of = {t: n for n in names for t in parents[n]}
    alt_ns = {a: ns_of[p] for a, p in alts.items()}
    children = {n: {t: [] for t in parents[n]} for n in names}
    for n in names:
        for t, ps in parents[n].items():
            for p in ps:
                children[n][p].append(t)

    def ancestors(n, t):
        out, stack = set(), [t]
        while stack:
            x = stack.pop()
            if x not in out:
                out.add(x)
                stack.extend(parents[n][x])
        return out

    def closure(n, terms):
        out = set()
        for t in terms:
            out |= ancestors(n, t)
        return out

    gt_terms: dict[str, dict[str, set]] = {}
    for p, t in zip(gt["protein"], gt["term"]):
        t = alts.get(t, t)
        if t in ns_of:
            gt_terms.setdefault(ns_of[t], {}).setdefault(p, set()).add(t)
    known_terms: dict[str, dict[str, set]] = {}
    if known is not None:
        for p, t in zip(known["protein"], known["term"]):
            t = alts.get(t, t)
            if t in ns_of:
                known_terms.setdefault(ns_of[t], {}).setdefault(p, set()).add(t)
    lafa = known is not None or toi is not None
    frames = []
    for n in names:
        if n not in gt_terms:
            continue
        proteins = list(gt_terms[n])
        raw = {p: {} for p in proteins}
        inserted = False
        for p, t, s in zip(preds["protein"], preds["term"], preds["score"]):
            ns = alt_ns.get(t, ns_of.get(t))
            if ns != n or p not in raw:
                continue
            t = alts.get(t, t)
            if max_terms is not None and sum(1 for v in raw[p].values() if v != 0) > max_terms:
                continue
            inserted = True
            old = raw[p].get(t, 0.0)
            raw[p][t] = old if (math.isnan(s) or not s > old) else s
        if not inserted:
            continue

        def final(p, t, memo):
            if t in memo:
                return memo[t]
            own = raw[p].get(t, 0.0)
            kids = [final(p, c, memo) for c in children[n][t]]
            if prop == "max":
                value = max([own] + kids)
            else:
                value = own if own != 0 else max(kids, default=0.0)
            memo[t] = value
            return value

        scores = {}
        for p in proteins:
            memo = {}
            scores[p] = {t: final(p, t, memo) for t in parents[n]}
        truth = {p: closure(n, gt_terms[n][p]) for p in proteins}
        excl = {p: closure(n, known_terms.get(n, {}).get(p, set())) for p in proteins}

        def variant(weights):
            if weights is None:
                allowed = {t for t in parents[n] if orphans or parents[n][t]}
            else:
                allowed = {t for t in parents[n] if weights.get(t, 0) > 0}
            if toi is not None:
                allowed &= {alts.get(t, t) for t in toi}
            w = (lambda t: 1) if weights is None else (lambda t: weights[t])
            rows = [p for p in proteins
                    if not lafa or (truth[p] & allowed) - excl[p]]
            ne = len(rows)
            out = []
            for tau in tau_arr:
                n_cnt = tp_s = fp_s = fn_s = pr_s = rc_s = 0
                for p in rows:
                    terms = allowed - excl[p]
                    g = truth[p] & terms
                    pred = {t for t in terms if scores[p][t] >= tau}
                    ngt = sum(w(t) for t in sorted(g))
                    npred = sum(w(t) for t in sorted(pred))
                    tp = sum(w(t) for t in sorted(pred & g))
                    n_cnt += 1 if npred > 0 else 0
                    tp_s += tp
                    fp_s += sum(w(t) for t in sorted(pred - g))
                    fn_s += sum(w(t) for t in sorted(g - pred))
                    pr_s += tp / npred if npred > 0 else 0.0
                    rc_s += tp / ngt if ngt > 0 else 0.0
                den = {c: (n_cnt if (norm == "pred" or (norm == "cafa" and c == "pr")) else ne)
                       for c in ("tp", "fp", "fn", "pr", "rc")}
                vals = {"tp": tp_s, "fp": fp_s, "fn": fn_s, "pr": pr_s, "rc": rc_s}
                v = {c: (vals[c] / den[c] if den[c] > 0 else 0.0) for c in vals}
                f = 2 * v["pr"] * v["rc"] / (v["pr"] + v["rc"]) if v["pr"] + v["rc"] else 0.0
                prm = v["tp"] / (v["tp"] + v["fp"]) if v["tp"] + v["fp"] > 0 else 0.0
                rcm = v["tp"] / (v["tp"] + v["fn"]) if v["tp"] + v["fn"] > 0 else 0.0
                out.append({"n": n_cnt, "tp": v["tp"], "fp": v["fp"], "fn": v["fn"],
                            "pr": v["pr"], "rc": v["rc"], "ns": n, "tau": tau,
                            "cov": n_cnt / ne if ne else 0.0, "mi": v["fp"], "ru": v["fn"],
                            "f": f, "s": math.sqrt(v["fn"] ** 2 + v["fp"] ** 2),
                            "pr_micro": prm, "rc_micro": rcm,
                            "f_micro": 2 * prm * rcm / (prm + rcm) if prm + rcm else 0.0})
            return pd.DataFrame(out)

        frame = variant(None)
        if ia is not None:
            weighted = variant(ia).drop(columns=["ns", "tau"]).add_suffix("_w")
            frame = pd.concat([frame, weighted], axis=1)
        frames.append(frame)
    df = pd.concat(frames, ignore_index=True)
    return df[df["cov"] > 0].set_index(["ns", "tau"])


@pytest.fixture()
def toy(tmp_path):
    text, parents, alts = make_toy(seed=1)
    path = tmp_path / "toy.obo"
    path.write_text(text)
    return path, parents, alts


def toy_ia(parents, seed=5):
    rng = np.random.default_rng(seed)
    ia = {}
    for terms in parents.values():
        for t in terms:
            ia[t] = float(rng.choice([0.0, round(float(rng.random() * 4), 4), 1.5]))
    return ia


def assert_frames_match(got: pd.DataFrame, expected: pd.DataFrame, weighted_rtol=1e-12):
    assert list(got.index) == list(expected.index)
    assert list(got.columns) == list(expected.columns)
    for column in got.columns:
        a, b = got[column].to_numpy(float), expected[column].to_numpy(float)
        if column.endswith("_w"):
            np.testing.assert_allclose(a, b, rtol=weighted_rtol, atol=1e-14, err_msg=column)
        else:
            np.testing.assert_array_equal(a, b, err_msg=column)


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("options", [
    {},
    {"prop": "fill"},
    {"orphans": False},
    {"norm": "pred"},
    {"norm": "gt", "prop": "fill"},
    {"max_terms": 2},
    {"th_step": 0.05},
])
def test_fast_equals_loop_reference(toy, seed, options):
    path, parents, alts = toy
    gt, preds = toy_inputs(parents, alts, seed, grid_scores=seed == 2)
    options = dict(options)
    orphans = options.pop("orphans", True)
    th_step = options.pop("th_step", 0.01)
    eo = EvalOntology.from_obo(path, orphans=orphans)
    got = evaluate_frames(eo, gt, preds, th_step=th_step, **options)
    expected = reference_eval(parents, alts, gt, preds, threshold_grid(th_step),
                              orphans=orphans, **options)
    assert_frames_match(got, expected)


@pytest.mark.parametrize("seed", [0, 3])
def test_weighted_equals_loop_reference(toy, seed):
    path, parents, alts = toy
    gt, preds = toy_inputs(parents, alts, seed)
    ia = toy_ia(parents, seed)
    eo = EvalOntology.from_obo(path, ia=ia)
    got = evaluate_frames(eo, gt, preds)
    expected = reference_eval(parents, alts, gt, preds, threshold_grid(0.01), ia=ia)
    assert_frames_match(got, expected)


@pytest.mark.parametrize("seed", [0, 4])
def test_lafa_known_and_toi_equal_reference(toy, seed):
    path, parents, alts = toy
    gt, preds = toy_inputs(parents, alts, seed)
    rng = np.random.default_rng(seed)
    known = gt.sample(frac=0.5, random_state=seed)
    # one protein whose whole ground truth is known: it must not be counted at all
    first = gt["protein"].iloc[0]
    known = pd.concat([known, gt[gt["protein"] == first]]).drop_duplicates()
    all_terms = [t for terms in parents.values() for t in terms]
    toi = set(rng.choice(all_terms, size=len(all_terms) // 2, replace=False)) | {sorted(alts)[0]}
    ia = toy_ia(parents, seed)
    eo = EvalOntology.from_obo(path, ia=ia)
    for kwargs in ({"known": known}, {"toi": toi}, {"known": known, "toi": toi}):
        got = evaluate_frames(eo, gt, preds, **kwargs)
        expected = reference_eval(parents, alts, gt, preds, threshold_grid(0.01), ia=ia, **kwargs)
        assert_frames_match(got, expected)
        assert (got["cov"] <= 1).all()


def test_known_coverage_fix_excludes_fully_known_protein(toy):
    path, parents, alts = toy
    gt, preds = toy_inputs(parents, alts, 0)
    eo = EvalOntology.from_obo(path)
    first = gt["protein"].iloc[0]
    plain = evaluate_frames(eo, gt[gt["protein"] != first], preds[preds["protein"] != first])
    known = gt[gt["protein"] == first]
    lafa = evaluate_frames(eo, gt, preds, known=known)
    # the fully-known protein vanishes: same numbers as if it had never been a target
    pd.testing.assert_frame_equal(lafa, plain)


def test_threshold_grid_float_error(toy):
    """A score of exactly 0.57 is not counted at the grid value printed as 0.57."""
    tau = threshold_grid(0.01)
    assert tau[56] > 0.57 and f"{tau[56]:.3f}" == "0.570"
    path, parents, alts = toy
    name = "biological_process"
    leaf = list(parents[name])[-1]
    gt = pd.DataFrame({"protein": ["A"], "term": [leaf]})
    preds = pd.DataFrame({"protein": ["A"], "term": [leaf], "score": [0.57]})
    df = evaluate_frames(EvalOntology.from_obo(path), gt, preds)
    taus = df.loc[name].index.to_numpy()
    assert taus.max() == tau[55]  # 0.56 is the last threshold at which it is predicted


@pytest.mark.parametrize("seed", [0, 1])
def test_invariant_to_row_order_and_duplicates(toy, seed):
    path, parents, alts = toy
    gt, preds = toy_inputs(parents, alts, seed)
    eo = EvalOntology.from_obo(path)
    base = evaluate_frames(eo, gt, preds)
    shuffled = preds.sample(frac=1.0, random_state=seed)
    lower = preds.assign(score=preds["score"] * 0.5)
    duplicated = pd.concat([lower, shuffled]).reset_index(drop=True)
    for variant in (shuffled, duplicated):
        pd.testing.assert_frame_equal(evaluate_frames(eo, gt, variant), base)
    # protein order of the ground truth changes only the float summation order
    reordered = evaluate_frames(eo, gt.sample(frac=1.0, random_state=seed), preds)
    pd.testing.assert_index_equal(reordered.index, base.index)
    np.testing.assert_allclose(reordered.drop(columns="ns", errors="ignore").to_numpy(float),
                               base.to_numpy(float), rtol=1e-12)


def test_summaries_and_best_rows(toy):
    path, parents, alts = toy
    gt, preds = toy_inputs(parents, alts, 0)
    df = evaluate_frames(EvalOntology.from_obo(path), gt, preds)
    for aspect, name in NAMES.items():
        rows = df.loc[name]
        f, tau = fmax_score(df, aspect)
        assert f == rows["f"].max() and tau == rows["f"].idxmax()
        s, tau_s = smin_loss(df, name)
        assert s == rows["s"].min() and tau_s == rows["s"].idxmin()
        curve = threshold_curve(df, aspect)
        assert list(curve.columns) == ["tau", "pr", "rc", "f"] and len(curve) == len(rows)
    best = best_rows(df, "f")
    assert len(best) == 3


def test_bootstrap_replicate_equals_reevaluating_resample(toy):
    path, parents, alts = toy
    gt, preds = toy_inputs(parents, alts, 2, n_proteins=6)
    eo = EvalOntology.from_obo(path)
    seed = 11
    result = bootstrap_ci(eo, gt, preds, metric="f", n_boot=1, seed=seed)
    df = evaluate_frames(eo, gt, preds)
    for name, stats in result.items():
        assert stats["estimate"] == pytest.approx(df.loc[name]["f"].max(), rel=1e-12)
    # replicate 0 of the first namespace, recomputed by renaming the drawn proteins
    name = next(iter(result))
    proteins = list(dict.fromkeys(p for p, t in zip(gt["protein"], gt["term"])
                                  if t in parents[name] or alts.get(t) in parents[name]))
    draws = np.random.default_rng(seed).integers(0, len(proteins), size=(1, len(proteins)))[0]
    gt_rows, pred_rows = [], []
    for k, i in enumerate(draws):
        p = proteins[i]
        for t in gt.loc[gt["protein"] == p, "term"]:
            if t in parents[name] or alts.get(t) in parents[name]:
                gt_rows.append((f"{p}_{k}", t))
        for t, s in preds.loc[preds["protein"] == p, ["term", "score"]].itertuples(index=False):
            pred_rows.append((f"{p}_{k}", t, s))
    re = evaluate_frames(eo, pd.DataFrame(gt_rows, columns=["protein", "term"]),
                         pd.DataFrame(pred_rows, columns=["protein", "term", "score"]))
    assert result[name]["low"] == pytest.approx(re.loc[name]["f"].max(), rel=1e-12)


def test_bootstrap_ci_and_paired(toy):
    path, parents, alts = toy
    gt, preds = toy_inputs(parents, alts, 0, n_proteins=12)
    eo = EvalOntology.from_obo(path, ia=toy_ia(parents))
    ci = bootstrap_ci(eo, gt, preds, metric="s", n_boot=200, seed=3)
    again = bootstrap_ci(eo, gt, preds, metric="s", n_boot=200, seed=3)
    assert ci == again
    for stats in ci.values():
        assert stats["low"] <= stats["high"]
    same = paired_bootstrap(eo, gt, preds, preds, metric="f_w", n_boot=100, seed=1)
    for stats in same.values():
        assert stats["delta"] == 0 and stats["low"] == 0 == stats["high"]
        assert stats["p_value"] == 1.0
    worse = preds.assign(score=np.random.default_rng(0).random(len(preds)))
    diff = paired_bootstrap(eo, gt, preds, worse, metric="f", n_boot=100, seed=1)
    for name, stats in diff.items():
        fa = evaluate_frames(eo, gt, preds).loc[name]["f"].max()
        fb = evaluate_frames(eo, gt, worse).loc[name]["f"].max()
        assert stats["delta"] == pytest.approx(fa - fb, abs=1e-12)
        assert 0 <= stats["p_value"] <= 1
    with pytest.raises(EvaluationInputError):
        bootstrap_ci(EvalOntology.from_obo(path), gt, preds, metric="f_w")


# ------------------------------------------------------------------------------------------
# files and bad input


def test_cafa_eval_files_roundtrip(toy, tmp_path):
    path, parents, alts = toy
    gt, preds = toy_inputs(parents, alts, 0)
    gt_file = tmp_path / "gt.tsv"
    gt.to_csv(gt_file, sep="\t", header=False, index=False)
    pred_dir = tmp_path / "preds"
    (pred_dir / "team").mkdir(parents=True)
    preds.to_csv(pred_dir / "team" / "m1.txt", sep="\t", header=False, index=False)
    df_all, best = cafa_eval(path, pred_dir, gt_file)
    assert set(df_all.index.get_level_values("filename")) == {"team_m1.txt"}
    frame = evaluate_frames(EvalOntology.from_obo(path), gt, preds)
    np.testing.assert_array_equal(df_all.droplevel("filename")["f"].to_numpy(), frame["f"].to_numpy())
    write_results(df_all, best, tmp_path / "out")
    text = (tmp_path / "out" / "evaluation_best_f.tsv").read_text().splitlines()
    assert text[0].split("\t")[:4] == ["filename", "ns", "tau", "n"]
    assert text[0].endswith("cov_max") and len(text) == 4


@pytest.mark.parametrize("content, message", [
    ("", "empty"),
    ("P1\n", "line needs"),
])
def test_bad_ground_truth(toy, tmp_path, content, message):
    path, *_ = toy
    gt_file = tmp_path / "gt.tsv"
    gt_file.write_text(content)
    (tmp_path / "p").mkdir()
    with pytest.raises(EvaluationInputError, match=message) as info:
        cafa_eval(path, tmp_path / "p", gt_file)
    assert str(gt_file) in str(info.value)


def test_bad_score_names_line(toy, tmp_path):
    path, parents, alts = toy
    term = list(parents["molecular_function"])[2]
    gt_file = tmp_path / "gt.tsv"
    gt_file.write_text(f"P1\t{term}\n")
    (tmp_path / "p").mkdir()
    (tmp_path / "p" / "m.tsv").write_text(f"P1\t{term}\t0.5\nP2\t{term}\tbad\nP1\t{term}\thigh\n")
    with pytest.raises(EvaluationInputError, match=r"m.tsv:3: score is not a number"):
        cafa_eval(path, tmp_path / "p", gt_file)


def test_bad_ia_and_empty_obo(toy, tmp_path):
    path, *_ = toy
    ia = tmp_path / "ia.tsv"
    ia.write_text("GO:0000001 1.0\nGO:0000002\n")
    with pytest.raises(EvaluationInputError, match=r"ia.tsv:2"):
        EvalOntology.from_obo(path, ia=ia)
    empty = tmp_path / "empty.obo"
    empty.write_text("")
    with pytest.raises(EvaluationInputError, match="empty OBO"):
        EvalOntology.from_obo(empty)


def test_no_overlap_gives_no_rows(toy, tmp_path):
    path, parents, alts = toy
    gt, _ = toy_inputs(parents, alts, 0)
    eo = EvalOntology.from_obo(path)
    other = pd.DataFrame({"protein": ["ZZ"], "term": [gt["term"].iloc[0]], "score": [0.9]})
    assert evaluate_frames(eo, gt, other).empty
    zeros = pd.DataFrame({"protein": [gt["protein"].iloc[0]], "term": [gt["term"].iloc[0]],
                          "score": [0.0]})
    assert evaluate_frames(eo, gt, zeros).empty  # cafaeval itself crashes on this input
    with pytest.raises(EvaluationInputError, match="no ground-truth term"):
        evaluate_frames(eo, pd.DataFrame({"protein": ["A"], "term": ["GO:7777777"]}), other)


def test_threshold_grid_rejects_bad_step():
    with pytest.raises(EvaluationInputError):
        threshold_grid(0)
    assert np.array_equal(threshold_grid(0.01), np.arange(0.01, 1, 0.01))


# ------------------------------------------------------------------------------------------
# fast readers == cafaeval's line rules


def cafaeval_prediction_rows(path) -> list[tuple[str, str, str]]:
    """cafaeval's ``pred_parser`` reading: text-mode lines, whitespace split, > 2 fields."""
    rows = []
    with open(path, encoding="utf-8", errors="replace") as handle:
        for line in handle:
            parts = line.strip().split()
            if len(parts) > 2:
                rows.append(tuple(parts[:3]))
    return rows


@pytest.mark.parametrize("content", [
    "P1\tGO:1\t0.5\nP2\tGO:2\t0.25\n",
    "P1 GO:1 0.5\nP2\tGO:2 0.25",  # spaces, no final newline
    "P1\tGO:1\t0.5\n\nP2\tGO:2\t0.25\n\n",  # blank lines
    "P1\t\tGO:1\t0.5\n",  # a run of separators
    "\tP1\tGO:1\t0.5\nP2\tGO:2\t0.1\t\n",  # leading / trailing separators
    "P1\tGO:1\t0.5\textra\tfields\nP2\tGO:2\n",  # more and fewer than three fields
    "P1\tGO:1\t0.5\r\nP2\tGO:2\t0.25\r\n",  # CRLF
    "P1\tGO:1\t0.5\nP\u00e9\tGO:2\t0.25\n",  # non-ASCII
    "P1\tGO:1\t0.5\x0bx\nP2\tGO:2\t0.25\x0c\n",  # other whitespace
    "   \n\t\n",  # nothing but whitespace
])
def test_prediction_reader_equals_cafaeval_lines(tmp_path, content):
    from tempo_assets.core.evaluation.predictions import _read_prediction_file

    path = tmp_path / "m.tsv"
    path.write_bytes(content.encode("utf-8"))
    for threads in (1, 2):
        raw = _read_prediction_file(path, threads)
        got = list(zip(raw.proteins[raw.protein_codes], raw.terms[raw.term_codes],
                       raw.score_text[raw.score_codes]))
        assert got == cafaeval_prediction_rows(path)


def test_prediction_reader_takes_arrow_path_on_plain_files(tmp_path):
    from tempo_assets.core.evaluation.predictions import _read_prediction_file

    path = tmp_path / "m.tsv"
    path.write_text("P1\tGO:1\t0.5\nP2 GO:2 0.25\n")
    assert _read_prediction_file(path).lines is None  # Arrow path: no line numbers kept
    path.write_text("P1\tGO:1\t0.5\nP2\tGO:2\n")
    assert _read_prediction_file(path).lines is not None  # line loop


def cafaeval_obo_terms(path) -> dict[str, dict[str, dict]]:
    """cafaeval 1.3.0's ``obo_parser`` loop (ids, namespaces, alt ids, is_a/part_of)."""
    out: dict[str, dict[str, dict]] = {}
    term_id, namespace, alt_id, rel, obsolete = None, None, [], [], True
    with open(path, encoding="utf-8", errors="replace") as handle:
        for line in handle:
            line = line.strip().split(": ")
            if len(line) > 1:
                k, v = line[0], ": ".join(line[1:])
                if k == "id":
                    if term_id is not None and obsolete is False and namespace is not None:
                        out.setdefault(namespace, {})[term_id] = {"alt_id": alt_id, "rel": rel}
                    term_id, alt_id, rel, obsolete, namespace = v, [], [], False, None
                elif k == "alt_id":
                    alt_id.append(v)
                elif k == "namespace" and v != "external":
                    namespace = v
                elif k == "is_obsolete":
                    obsolete = True
                elif k == "is_a":
                    rel.append(v.split("!")[0].strip())
                elif k == "relationship" and v.startswith("part_of"):
                    rel.append(v.split()[1].strip())
    if obsolete is False and namespace is not None:
        out.setdefault(namespace, {})[term_id] = {"alt_id": alt_id, "rel": rel}
    return out


def test_obo_scanner_equals_cafaeval_loop(toy, tmp_path):
    from tempo_assets.core.evaluation.ontology import _read_obo_cafaeval

    path, *_ = toy
    text = open(path).read()
    tricky = text + (
        "\n[Term]\n  id: GO:0088881  \nnamespace: molecular_function\t\n"
        "\tis_a: GO:0000015 ! indented\nrelationship: regulates GO:0000016\n"
        "alt_id: \nalt_id: GO:0088882 \n"
        "[Term]\r\nid: GO:0088883\r\nnamespace: external\r\nnamespace: cellular_component\r\n"
        "relationship: part_of GO:0000029 ! x\r\n"
        "[Term]\nid: GO:0088884\nnamespace: external\nis_a: GO:0000029\n"
        "[Term]\nid: GO:0088885\nnamespace: cellular_component\nis_obsolete: false\n")
    for content in (text, tricky):
        target = tmp_path / "t.obo"
        target.write_bytes(content.encode("utf-8"))
        assert _read_obo_cafaeval(target) == cafaeval_obo_terms(target)


def test_obo_parsed_once_per_content(toy, tmp_path):
    # a window builds several evaluator ontologies from one file: the same bytes (any path, plain
    # or gzipped) are parsed once; other bytes at the same path are parsed again (a bytes-keyed cache)
    import gzip

    from tempo_assets.core.evaluation.ontology import EvalOntology, _read_obo_cafaeval

    path, *_ = toy
    text = open(path, "rb").read()
    copy, zipped, other = tmp_path / "copy.obo", tmp_path / "copy.obo.gz", tmp_path / "other.obo"
    copy.write_bytes(text)
    zipped.write_bytes(gzip.compress(text))
    first = _read_obo_cafaeval(path)
    assert _read_obo_cafaeval(copy) is first and _read_obo_cafaeval(zipped) is first
    other.write_bytes(text + b"\n[Term]\nid: GO:0088885\nnamespace: cellular_component\n")
    assert "GO:0088885" in _read_obo_cafaeval(other)["cellular_component"]
    assert "GO:0088885" not in first.get("cellular_component", {})
    # each evaluator ontology still has namespaces of its own (IA is set per instance)
    a, b = EvalOntology.from_obo(path, orphans=True), EvalOntology.from_obo(path, orphans=False)
    assert a.namespaces is not b.namespaces


def test_threads_give_identical_tables(toy, tmp_path):
    path, parents, alts = toy
    gt, preds = toy_inputs(parents, alts, 3)
    gt_file = tmp_path / "gt.tsv"
    gt.to_csv(gt_file, sep="\t", header=False, index=False)
    (tmp_path / "p").mkdir()
    preds.to_csv(tmp_path / "p" / "m.tsv", sep="\t", header=False, index=False)
    one, _ = cafa_eval(path, tmp_path / "p", gt_file, n_cpu=1)
    two, _ = cafa_eval(path, tmp_path / "p", gt_file, n_cpu=2)
    pd.testing.assert_frame_equal(one, two)
