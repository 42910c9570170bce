"""``tempo-eval``: same options and output files as ``python -m cafaeval``."""
from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tempo_assets.cli.eval import main
from tempo_assets_tests.core.test_evaluation import make_toy, toy_ia, toy_inputs
from tempo_assets_tests.toolkit import REPO, cafaeval_python, needs_cafaeval, require

LAFA_REFERENCE = REPO / "tempo_assets_tests" / "cafaeval_lafa.py"



@pytest.fixture()
def toy_files(tmp_path):
    text, parents, alts = make_toy(seed=2, per_ns=25)
    obo = tmp_path / "toy.obo"
    obo.write_text(text)
    gt, preds = toy_inputs(parents, alts, seed=7, n_proteins=30, grid_scores=False)
    gt_file = tmp_path / "gt.tsv"
    gt.to_csv(gt_file, sep="\t", header=False, index=False)
    pred_dir = tmp_path / "preds"
    (pred_dir / "team").mkdir(parents=True)
    preds.to_csv(pred_dir / "m1.tsv", sep="\t", header=False, index=False)
    _, grid = toy_inputs(parents, alts, seed=8, n_proteins=30, grid_scores=True)
    grid.to_csv(pred_dir / "team" / "m2.tsv", sep="\t", header=False, index=False)
    ia = tmp_path / "ia.tsv"
    ia.write_text("".join(f"{t}\t{v!r}\n" for t, v in toy_ia(parents, seed=9).items()))
    known = tmp_path / "known.tsv"
    gt.sample(frac=0.4, random_state=1).to_csv(known, sep="\t", header=False, index=False)
    toi = tmp_path / "toi.tsv"
    terms = [t for ts in parents.values() for t in ts]
    toi.write_text("\n".join(np.random.default_rng(0).choice(terms, size=40, replace=False)) + "\n")
    return {"obo": obo, "gt": gt_file, "preds": pred_dir, "ia": ia, "known": known, "toi": toi}


@needs_cafaeval
@pytest.mark.parametrize("options", [
    [],
    ["-prop", "fill", "-no_orphans", "-max_terms", "3"],
    ["-ia", "IA", "-norm", "pred"],
    ["-ia", "IA", "-th_step", "0.02", "-norm", "gt"],
])
def test_cli_matches_cafaeval(toy_files, tmp_path, options):
    python = cafaeval_python()
    options = [str(toy_files["ia"]) if o == "IA" else o for o in options]
    args = [str(toy_files["obo"]), str(toy_files["preds"]), str(toy_files["gt"])]
    ref = tmp_path / "ref"
    done = subprocess.run([str(python), "-m", "cafaeval", *args, "-out_dir", str(ref),
                           "-log_level", "warning", *options], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    ours = tmp_path / "ours"
    assert main([*args, "-out_dir", str(ours), "-log_level", "warning", "-threads", "2",
                 *options]) == 0
    names = sorted(p.name for p in ref.iterdir())
    assert names == sorted(p.name for p in ours.iterdir())
    assert len(names) == (6 if "-ia" in options else 4)
    for name in names:
        assert (ours / name).read_text() == (ref / name).read_text(), name


def read_table(path: Path) -> pd.DataFrame:
    """An ``evaluation_all.tsv`` as printed (every cell a string), rows in a canonical order."""
    frame = pd.read_csv(path, sep="\t", dtype=str, keep_default_na=False)
    return frame.sort_values(["filename", "ns", "tau"]).reset_index(drop=True)


# LAFA's profile (-prop fill -no_orphans, terms of interest, known terms, IA), and the terms of
# interest and known terms alone under cafaeval's defaults
@needs_cafaeval
@pytest.mark.parametrize("options", [["-prop", "fill", "-no_orphans"], []], ids=["lafa", "toi-known-only"])
def test_lafa_mode_equals_cafaeval_on_inputs_filtered_the_lafa_way(toy_files, tmp_path, options):
    """``tempo-eval -known -toi`` against a reference outside the project: cafaeval 1.3.0 computes every
    number, on the cells and proteins LAFA's conventions leave (``tempo_assets_tests/cafaeval_lafa.py``)."""
    args = [str(toy_files["obo"]), str(toy_files["preds"]), str(toy_files["gt"]),
            "-known", str(toy_files["known"]), "-toi", str(toy_files["toi"]), "-ia", str(toy_files["ia"]), *options]
    done = subprocess.run([str(cafaeval_python()), str(LAFA_REFERENCE), *args, "-out_dir", str(tmp_path / "ref")],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    done = subprocess.run([require("tempo-eval"), *args, "-out_dir", str(tmp_path / "ours"), "-log_level", "error"],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    reference, ours = read_table(tmp_path / "ref" / "evaluation_all.tsv"), read_table(tmp_path / "ours" /
                                                                                        "evaluation_all.tsv")
    assert list(ours.columns) == list(reference.columns)
    assert len(ours) == len(reference) > 0
    for column in reference.columns:
        assert ours[column].tolist() == reference[column].tolist(), column
    # the toy case exercises every convention: fully known proteins dropped, known cells removed
    known = pd.read_csv(toy_files["known"], sep="\t", header=None, names=["protein", "term"])
    assert 0 < len(known) and set(reference["filename"]) == {"m1.tsv", "team_m2.tsv"}
    assert all(float(c) <= 1 for c in reference["cov"])


def test_cli_bad_input_exit_code(tmp_path, capsys):
    obo = tmp_path / "x.obo"
    obo.write_text("")
    (tmp_path / "p").mkdir()
    gt = tmp_path / "gt.tsv"
    gt.write_text("P1 GO:1\n")
    assert main([str(obo), str(tmp_path / "p"), str(gt), "-out_dir", str(tmp_path / "o")]) == 2
    assert "empty OBO file" in capsys.readouterr().err
