"""``tempo-eval``: same options and output files as ``python -m cafaeval``."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tempo_assets.cli.eval import main
from tempo_assets_tests.core.test_evaluation import make_toy, toy_ia, toy_inputs
from tempo_assets_tests.toolkit import cafaeval_python, needs_cafaeval



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


def test_cli_lafa_options_and_console_script(toy_files, tmp_path):
    args = [str(toy_files["obo"]), str(toy_files["preds"]), str(toy_files["gt"]),
            "-known", str(toy_files["known"]), "-toi", str(toy_files["toi"]),
            "-ia", str(toy_files["ia"]), "-log_level", "error"]
    assert main([*args, "-out_dir", str(tmp_path / "a")]) == 0
    script = Path(sys.executable).parent / "tempo-eval"
    if not script.exists():
        pytest.skip("tempo-eval console script not installed in this environment")
    done = subprocess.run([str(script), *args, "-out_dir", str(tmp_path / "b")],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    for name in ("evaluation_all.tsv", "evaluation_best_f_w.tsv"):
        assert (tmp_path / "a" / name).read_text() == (tmp_path / "b" / name).read_text()
    # no row has coverage above 1: fully known proteins are not counted
    lines = (tmp_path / "a" / "evaluation_all.tsv").read_text().splitlines()
    header = lines[0].split("\t")
    cov = header.index("cov")
    assert all(float(line.split("\t")[cov]) <= 1 for line in lines[1:])


def test_cli_bad_input_exit_code(tmp_path, capsys):
    obo = tmp_path / "x.obo"
    obo.write_text("")
    (tmp_path / "p").mkdir()
    gt = tmp_path / "gt.tsv"
    gt.write_text("P1 GO:1\n")
    assert main([str(obo), str(tmp_path / "p"), str(gt), "-out_dir", str(tmp_path / "o")]) == 2
    assert "empty OBO file" in capsys.readouterr().err
