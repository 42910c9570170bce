"""Parity with the real cafaeval 1.3.0: every cell of every output table, as printed.

cafaeval runs as a subprocess in its own venv: ``$TEMPO_CAFAEVAL_PYTHON`` or
``<repo>/.venv-cafaeval/bin/python``. Without it, or without ``../shared``, these tests skip locally
and fail under CI (``tempo_assets_tests/toolkit.py``).
The ground truth is real: experimental, non-NOT human annotations of proteins that gained terms
between the 2014-09-29 and 2019-01-14 GOA files (a seeded subsample of a few hundred).

cafaeval's outputs are kept in ``fixtures/cafaeval_reference/<case>/`` with the sha256 of everything
that run read (the cafaeval version, its options, the OBO, ground truth, IA and prediction files, as
bytes): when this run's inputs have that digest, the kept outputs are cafaeval's answer to them and
cafaeval is not run again (it took ~100 s per case). Any other digest (a changed generator, OBO or
GAF, another cafaeval) runs cafaeval here, compares, and warns that the kept outputs are stale;
``TEMPO_WRITE_FIXTURES=1`` rewrites them from a live run.
"""
from __future__ import annotations

import gzip
import hashlib
import math
import shutil
import os
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tempo_assets.core.evaluation import cafa_eval, write_results
from tempo_assets_tests.toolkit import (
    GOA_ARCHIVE, REPO, cafaeval_python, needs_cafaeval, needs_shared, rewrite_fixtures, shared,
)

EXPERIMENTAL = {"EXP", "IDA", "IPI", "IMP", "IGI", "IEP", "TAS", "IC",
                "HTP", "HDA", "HMP", "HGI", "HEP"}
OUTPUTS = ["evaluation_all.tsv", "evaluation_best_f.tsv", "evaluation_best_s.tsv",
           "evaluation_best_f_micro.tsv", "evaluation_best_f_w.tsv",
           "evaluation_best_f_micro_w.tsv"]

pytestmark = [pytest.mark.slow, needs_cafaeval, needs_shared]


def run_cafaeval(python: Path, obo: Path, pred_dir: Path, gt: Path, out_dir: Path,
                 *options: str) -> None:
    command = [str(python), "-m", "cafaeval", str(obo), str(pred_dir), str(gt),
               "-out_dir", str(out_dir), "-threads", "1", "-log_level", "warning", *options]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]


REFERENCE_OUTPUTS = REPO / "tempo_assets_tests" / "fixtures" / "cafaeval_reference"
DIGEST_FILE = "inputs.sha256"


def cafaeval_version(python: Path) -> str:
    done = subprocess.run([str(python), "-c", "from importlib.metadata import version; print(version('cafaeval'))"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.strip()


def inputs_digest(version: str, obo: Path, pred_dir: Path, gt: Path, options: list[str]) -> str:
    """sha256 of what a cafaeval run reads: its version, options (a file named by its bytes), OBO, ground
    truth and every prediction file (by its path under ``pred_dir`` and its bytes)."""
    digest = hashlib.sha256()

    def add(label: str, data: bytes) -> None:
        digest.update(f"{label}\0{len(data)}\0".encode())
        digest.update(data)

    add("cafaeval", version.encode())
    add("obo", obo.read_bytes())
    add("gt", gt.read_bytes())
    for option in options:
        add("option", Path(option).read_bytes() if Path(option).is_absolute() else option.encode())
    for path in sorted(p for p in pred_dir.rglob("*") if p.is_file()):
        add(f"prediction {path.relative_to(pred_dir).as_posix()}", path.read_bytes())
    return digest.hexdigest()


def reference_outputs(case: str, python: Path, obo: Path, pred_dir: Path, gt: Path, out_dir: Path,
                      options: list[str]) -> None:
    """cafaeval's outputs for these inputs into ``out_dir``: the kept ones when their digest matches,
    else from a live run (and a warning that the kept ones are stale)."""
    kept = REFERENCE_OUTPUTS / case
    digest = inputs_digest(cafaeval_version(python), obo, pred_dir, gt, options)
    rewrite = os.environ.get("TEMPO_WRITE_FIXTURES", "").strip() not in ("", "0")
    if not rewrite and (kept / DIGEST_FILE).is_file() and (kept / DIGEST_FILE).read_text().strip() == digest:
        shutil.copytree(kept, out_dir, ignore=shutil.ignore_patterns(DIGEST_FILE))
        return
    run_cafaeval(python, obo, pred_dir, gt, out_dir, *options)
    if not rewrite:
        warnings.warn(f"{kept.relative_to(REPO)}: the kept cafaeval outputs are for other inputs, so cafaeval "
                      "ran here (slow); TEMPO_WRITE_FIXTURES=1 rewrites them")
        return

    def write() -> None:
        shutil.rmtree(kept, ignore_errors=True)
        kept.mkdir(parents=True)
        for name in OUTPUTS:
            if (out_dir / name).exists():
                shutil.copy(out_dir / name, kept / name)
        (kept / DIGEST_FILE).write_text(digest + "\n")

    rewrite_fixtures("TEMPO_WRITE_FIXTURES", write, f"cafaeval's outputs for {case}")


def read_experimental(path: Path) -> pd.DataFrame:
    """protein, term of experimental non-NOT rows of a GAF (our own small reader)."""
    frame = pd.read_csv(path, sep="\t", comment="!", header=None, usecols=[1, 3, 4, 6],
                        names=["protein", "qualifier", "term", "evidence"], dtype=str,
                        keep_default_na=False)
    keep = frame["evidence"].isin(EXPERIMENTAL) & ~frame["qualifier"].str.contains("NOT")
    return frame.loc[keep, ["protein", "term"]].drop_duplicates()


def write_pairs(path: Path, rows) -> Path:
    with open(path, "w") as handle:
        for row in rows:
            handle.write("\t".join(str(v) for v in row) + "\n")
    return path


def obo_terms(path: Path) -> tuple[list[str], list[str], list[str]]:
    """(live primary ids, alt ids, obsolete ids) of a plain OBO, by a tiny independent reader."""
    live, alts, obsolete = [], [], []
    current, is_obsolete, current_alts = None, False, []
    with open(path) as handle:
        for line in list(handle) + ["[Term]\n"]:
            line = line.strip()
            if line.startswith("["):
                if current:
                    (obsolete if is_obsolete else live).append(current)
                    alts.extend(current_alts)
                current, is_obsolete, current_alts = None, False, []
            elif line.startswith("id: GO:"):
                current = line[4:]
            elif line.startswith("alt_id: "):
                current_alts.append(line[8:])
            elif line.startswith("is_obsolete: true"):
                is_obsolete = True
    return live, alts, obsolete


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """Plain OBOs, a real ground truth, four prediction sets and an IA file."""
    root = tmp_path_factory.mktemp("parity")
    obos = {}
    for day in ("2019-01-27", "2014-10-27"):
        obos[day] = root / f"go_{day}.obo"
        with gzip.open(shared(GOA_ARCHIVE / "go" / f"go_{day}.obo.gz"), "rb") as src, open(obos[day], "wb") as dst:
            shutil.copyfileobj(src, dst)
    old = read_experimental(shared(GOA_ARCHIVE / "goa" / "goa_human_2014-09-29.gaf.gz"))
    new = read_experimental(shared(GOA_ARCHIVE / "goa" / "goa_human_2019-01-14.gaf.gz"))
    old_pairs = set(zip(old["protein"], old["term"]))
    gained = sorted({p for p, t in zip(new["protein"], new["term"]) if (p, t) not in old_pairs})
    rng = np.random.default_rng(20190114)
    chosen = set(rng.choice(gained, size=150, replace=False))
    truth = new[new["protein"].isin(chosen)].sort_values(["protein", "term"])
    gt = write_pairs(root / "gt.tsv", zip(truth["protein"], truth["term"]))
    known = old[old["protein"].isin(chosen)]
    known_file = write_pairs(root / "known.tsv", zip(known["protein"], known["term"]))

    live, alts, obsolete = obo_terms(obos["2019-01-27"])
    proteins = sorted(chosen)
    preds = root / "preds"
    preds.mkdir()
    # naive: 2014 term frequency, same list for every protein
    freq = old["term"].value_counts()
    top = freq.head(150)
    naive_scores = (top / top.iloc[0]).round(3)
    write_pairs(preds / "naive.tsv", [(p, t, s) for p in proteins
                                       for t, s in naive_scores.items()])
    # random: 40 random live terms per protein, full-precision scores
    write_pairs(preds / "random.tsv", [(p, t, repr(float(rng.random())))
                                        for p in proteins
                                        for t in rng.choice(live, size=40, replace=False)])
    # noisy truth: 80% of the true terms with noisy scores plus a few false terms
    rows = []
    for p, t in zip(truth["protein"], truth["term"]):
        if rng.random() < 0.8:
            rows.append((p, t, f"{min(1.0, max(0.0, 0.6 + 0.3 * rng.standard_normal())):.2f}"))
    for p in proteins:
        for t in rng.choice(live, size=5, replace=False):
            rows.append((p, t, f"{rng.random() * 0.5:.2f}"))
    write_pairs(preds / "noisy.tsv", rows)
    # adversarial
    grid = ["0.57", "0.29", "0.01", "1.0", "1.00", "0", "0.0", "0.99", "0.5", "0.07", "0.58"]
    lines = ["AUTHOR tempo", "MODEL 1", "KEYWORDS sequence alignment."]
    for i, p in enumerate(proteins):
        true_terms = truth.loc[truth["protein"] == p, "term"].tolist()
        picks = list(rng.choice(true_terms, size=min(4, len(true_terms)), replace=False))
        picks += list(rng.choice(alts, size=3)) + list(rng.choice(obsolete, size=2))
        picks += ["GO:9999999", "GO:0008150", "GO:0003674", "GO:0005575"]
        for t in picks:
            lines.append(f"{p}\t{t}\t{grid[int(rng.integers(len(grid)))]}")
        lines.append(f"{p} {picks[0]} 0.2 extra columns")   # spaces, extra fields
        lines.append(f"{p}\t{picks[0]}\t0.8")                  # duplicate, higher
        lines.append(f"{p}\t{picks[0]}\t0.1")                  # duplicate, lower
        lines.append(f"{p}\t{picks[1]}")                       # two fields: skipped
        if i % 7 == 0:
            lines.append(f"{p}\t{picks[1]}\tnan")
            lines.append(f"{p}\t{picks[2]}\t-0.3")
            lines.append(f"{p}\t{picks[3]}\t1.5")
            lines.append(f"{p}\t{picks[3]}\t1e-2")
        lines.append(f"NOT_A_TARGET_{i}\t{picks[0]}\t0.9")
        lines.append(f"NOT_A_TARGET_{i}\t{picks[0]}\tscore")  # never converted by cafaeval
    lines.append("END")
    (preds / "sub").mkdir()
    (preds / "sub" / "adversarial.tsv").write_text("\n".join(lines) + "\n")
    # IA: -log2 of propagated-free frequencies, with zero, nan, inf, negative and alt entries
    counts = old["term"].value_counts()
    ia_rows = [(t, repr(float(-math.log2(c / (counts.iloc[0] + 1))))) for t, c in counts.items()]
    ia_rows += [(t, "0") for t in live[:50]] + [(live[60], "nan"), (live[61], "inf"),
                                                (live[62], "-1.5"), (alts[0], "2.0")]
    ia = write_pairs(root / "ia.tsv", ia_rows)
    return {"root": root, "obos": obos, "gt": gt, "preds": preds, "ia": ia, "known": known_file}


def compare_outputs(ours: Path, theirs: Path) -> int:
    compared = 0
    for name in OUTPUTS:
        reference = theirs / name
        mine = ours / name
        assert reference.exists() == mine.exists(), name
        if not reference.exists():
            continue
        expected = reference.read_text().splitlines()
        got = mine.read_text().splitlines()
        assert len(got) == len(expected), (name, len(got), len(expected))
        for lineno, (a, b) in enumerate(zip(got, expected), start=1):
            assert a == b, f"{name}:{lineno}\n ours: {a}\n ref:  {b}"
        compared += 1
    return compared


ALL_SETS = ("naive.tsv", "random.tsv", "noisy.tsv", "sub/adversarial.tsv")
# cafaeval's dense propagation costs ~10 s of CPU per prediction file on a real GO release, so
# the options are grouped into two runs (the unweighted columns are computed the same way with
# or without -ia; th_step and -norm pred are also checked against cafaeval on a toy ontology in
# tempo_assets_tests/cli/test_eval_cli.py)
CASES = {
    "ia-2019": ("2019-01-27", ["-ia", "IA"], {"ia": "IA"}, ALL_SETS),
    "fill-noorphans-maxterms-normgt-ia-2014": (
        "2014-10-27",
        ["-prop", "fill", "-no_orphans", "-max_terms", "7", "-norm", "gt", "-ia", "IA"],
        {"prop": "fill", "no_orphans": True, "max_terms": 7, "norm": "gt", "ia": "IA"},
        ("noisy.tsv", "sub/adversarial.tsv")),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_outputs_identical_to_cafaeval(data, tmp_path, case):
    python = cafaeval_python()
    day, cli_options, kwargs, sets = CASES[case]
    cli_options = [str(data["ia"]) if o == "IA" else o for o in cli_options]
    kwargs = {k: (data["ia"] if v == "IA" else v) for k, v in kwargs.items()}
    preds = tmp_path / "preds"
    for name in sets:
        (preds / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(data["preds"] / name, preds / name)
    reference = tmp_path / "reference"
    reference_outputs(case, python, data["obos"][day], preds, data["gt"], reference, cli_options)
    df_all, dfs_best = cafa_eval(data["obos"][day], preds, data["gt"], **kwargs)
    write_results(df_all, dfs_best, tmp_path / "ours", th_step=kwargs.get("th_step", 0.01))
    compared = compare_outputs(tmp_path / "ours", reference)
    assert compared == (6 if "ia" in kwargs else 4)
    assert set(df_all.index.get_level_values("filename")) == {s.replace("/", "_") for s in sets}


if __name__ == "__main__":  # pragma: no cover - manual run
    sys.exit(pytest.main([__file__, "-q"]))
