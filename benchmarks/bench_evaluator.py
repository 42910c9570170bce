"""The benchmark step's scoring on a synthetic window: this checkout against another (main), one run.

A window of realistic size is built from ``data/``'s newest release: the experimental GOA rows of
its human subset are the TEST ground truth (about 2,900 proteins per aspect), split into NK/LK/PK
targets (PK proteins get half their terms as known terms), on the release's pruned GO with random
IA weights. ``--methods`` methods predict every target (the truth's terms with noise plus random
terms, two-decimal scores, ``--terms`` terms per protein and aspect), each with an ``@t-1`` twin and
a VALID threshold per cell; targets fall into sequence clusters of 1 to 4 proteins.

Each side runs in its own child process and does what a ``benchmark`` step's profile does
(``core.pipeline.workflow.score_one_profile``): ``score_profile`` with CIs, cluster intervals and
taus, then ``paired_differences`` against the reference and each method against its ``@t-1`` twin;
then ``--selection`` VALID-selection-like passes of ``cell_curve`` over the same cells (fresh frames
each time, as the grid does). The script prints each side's CPU seconds, the ratio before / after,
peak memory (the process's ``ru_maxrss``, and the peak resident memory above the loaded window while
scoring: Linux ``VmHWM`` after ``clear_refs``), and the largest difference between the two sides'
tables (0 when every number is the same).

    .venv/bin/python benchmarks/bench_evaluator.py [--before main] [--methods 6] [--terms 40]
        [--n-boot 100] [--selection 20] [--repeat 1]

``--before`` is a git revision of this repository, exported with ``git archive`` to a temporary
folder (nothing is checked out here), or a folder holding a ``tempo_assets`` package.
"""
from __future__ import annotations

import argparse
import json
import pickle
import resource
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parents[1]
RELEASE = REPO / "data" / "releases" / "2022-09-12"
EXPERIMENTAL = {"EXP", "IDA", "IPI", "IMP", "IGI", "IEP", "TAS", "IC", "HTP", "HDA", "HMP", "HGI", "HEP"}


def synthetic_window(n_methods: int, n_terms: int, seed: int = 0) -> dict:
    """Ground truth, targets, known terms, predictions, taus and clusters of one window (plain frames)."""
    rng = np.random.default_rng(seed)
    gaf = pd.read_csv(next(RELEASE.glob("goa_*.gaf.gz")), sep="\t", comment="!", header=None, dtype=str,
                      usecols=[1, 3, 4, 6, 8], names=["protein", "qualifier", "term", "evidence", "aspect"],
                      keep_default_na=False)
    gaf = gaf[gaf["evidence"].isin(EXPERIMENTAL) & ~gaf["qualifier"].str.contains("NOT")]
    truth = gaf.assign(aspect=gaf["aspect"].map({"P": "BP", "F": "MF", "C": "CC"}))[["protein", "term", "aspect"]]
    truth = truth.drop_duplicates().reset_index(drop=True)
    targets = truth[["protein", "aspect"]].drop_duplicates().reset_index(drop=True)
    targets["mode"] = rng.choice(["NK", "LK", "PK"], size=len(targets), p=[0.3, 0.2, 0.5])
    pk = truth.merge(targets[targets["mode"] == "PK"], on=["protein", "aspect"])
    known = pk[rng.random(len(pk)) < 0.5][["protein", "term", "aspect"]].reset_index(drop=True)
    terms_by_aspect = {a: rows["term"].unique() for a, rows in truth.groupby("aspect")}
    methods = {}
    for m in range(n_methods):
        for suffix in ("", "@t-1"):
            parts = []
            for aspect, rows in targets.groupby("aspect"):
                proteins = rows["protein"].to_numpy()
                kept = truth[(truth["aspect"] == aspect) & (rng.random(len(truth)) < 0.6)]
                noise = pd.DataFrame({"protein": np.repeat(proteins, n_terms),
                                      "term": rng.choice(terms_by_aspect[aspect], size=len(proteins) * n_terms)})
                both = pd.concat([kept[["protein", "term"]], noise], ignore_index=True).assign(aspect=aspect)
                parts.append(both.assign(score=np.round(rng.uniform(0.01, 1.0, len(both)), 2)))
            methods[f"m{m}{suffix}"] = pd.concat(parts, ignore_index=True)
    grid = np.arange(0.01, 1, 0.01)
    taus = {(name, mode, aspect): float(grid[rng.integers(5, 80)]) for name in methods
            for mode in ("NK", "LK", "PK") for aspect in ("BP", "MF", "CC")}
    proteins = targets["protein"].unique()
    clusters = pd.DataFrame({"protein": proteins, "cluster": np.arange(len(proteins)) // rng.integers(1, 5)})
    all_terms = sorted(set(truth["term"]))
    ia = dict(zip(all_terms, rng.uniform(0.0, 3.0, len(all_terms))))
    return {"truth": truth, "targets": targets, "known": known, "methods": methods, "taus": taus,
            "clusters": clusters, "ia": ia}


def run_side(root: str, window_path: str, n_boot: int, selection: int) -> dict:
    """In a child: import ``tempo_assets`` from ``root``, score the window, return times and tables."""
    sys.path.insert(0, root)
    from tempo_assets.core.evaluation import EvalOntology
    from tempo_assets.core.evaluation.benchmark import paired_differences
    from tempo_assets.core.evaluation.cells import evaluation_cells
    from tempo_assets.core.evaluation.scoring import ScoringOptions, cell_curve, score_profile

    with open(window_path, "rb") as handle:
        w = pickle.load(handle)
    ontology = EvalOntology.from_obo(next(RELEASE.glob("go_*.obo.gz")), ia=w["ia"])
    options = ScoringOptions(n_boot=n_boot)
    resident = reset_peak_rss()
    newest = [m for m in w["methods"] if not m.endswith("@t-1")]
    started = time.process_time()
    result = score_profile(ontology, w["targets"], w["truth"], w["known"], w["methods"], options=options,
                           ci_methods=newest, taus=w["taus"], clusters=w["clusters"])
    pairs = [(newest[0], b) for b in newest[1:]] + [(m, f"{m}@t-1") for m in newest]
    paired = paired_differences(ontology, (w["targets"], w["truth"], w["known"]), w["methods"], pairs,
                                options=options, taus=w["taus"], clusters=w["clusters"])
    benchmark_s = time.process_time() - started
    started = time.process_time()
    cells = evaluation_cells(w["targets"], w["truth"], w["known"])
    method = w["methods"][newest[0]]
    for _ in range(selection):
        for cell in cells.values():
            preds = method[method["protein"].isin(cell.proteins) & (method["aspect"] == cell.aspect)]
            cell_curve(ontology, cell.aspect, cell.truth.reset_index(drop=True),
                       preds[["protein", "term", "score"]].reset_index(drop=True),
                       known=None if cell.known is None else cell.known.reset_index(drop=True))
    selection_s = time.process_time() - started
    return {"benchmark_s": benchmark_s, "selection_s": selection_s,
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "scoring_peak_mb": peak_rss_mb() - resident,
            "summary": result.summary, "paired": paired}


def peak_rss_mb() -> float:
    """This process's peak resident memory (Linux ``VmHWM``), MB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def reset_peak_rss() -> float:
    """Start a new peak-RSS window (Linux ``clear_refs`` 5) once the window is loaded; the RSS now, MB."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        pass
    return peak_rss_mb()


def export_revision(revision: str, into: Path) -> Path:
    """``revision``'s tree (``git archive``) unpacked under ``into``."""
    archive = into / "before.tar"
    subprocess.run(["git", "-C", str(REPO), "archive", "-o", str(archive), revision, "tempo_assets"], check=True)
    with tarfile.open(archive) as tar:
        tar.extractall(into / "before", filter="data")
    return into / "before"


def largest_difference(a: pd.DataFrame, b: pd.DataFrame) -> float:
    """Max |a - b| over the numeric cells of two tables with the same rows (inf if their shapes differ)."""
    if a.shape != b.shape or list(a.columns) != list(b.columns):
        return float("inf")
    numeric = [c for c in a.columns if a[c].dtype.kind == "f"]
    x, y = a[numeric].to_numpy(dtype=float), b[numeric].to_numpy(dtype=float)
    same_nan = np.isnan(x) == np.isnan(y)
    if not same_nan.all():
        return float("inf")
    diff = np.abs(np.nan_to_num(x) - np.nan_to_num(y))
    other = [c for c in a.columns if c not in numeric]
    return float(diff.max(initial=0.0)) if a[other].astype(str).equals(b[other].astype(str)) else float("inf")


def child(side: str, root: str, window: Path, args) -> dict:
    out = window.with_name(f"{side}.pkl")
    code = ("import pickle, sys; sys.path.insert(0, %r); import bench_evaluator as b; "
            "pickle.dump(b.run_side(%r, %r, %d, %d), open(%r, 'wb'))"
            % (str(Path(__file__).parent), root, str(window), args.n_boot, args.selection, str(out)))
    subprocess.run([sys.executable, "-c", code], check=True, cwd=tempfile.gettempdir())
    with open(out, "rb") as handle:
        return pickle.load(handle)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", default="main", help="git revision or folder with tempo_assets/")
    parser.add_argument("--methods", type=int, default=6)
    parser.add_argument("--terms", type=int, default=40)
    parser.add_argument("--n-boot", type=int, default=100)
    parser.add_argument("--selection", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench_evaluator_") as work:
        work = Path(work)
        before = Path(args.before) if Path(args.before).is_dir() else export_revision(args.before, work)
        window = work / "window.pkl"
        with open(window, "wb") as handle:
            pickle.dump(synthetic_window(args.methods, args.terms), handle)
        runs = {"before": [], "after": []}
        for _ in range(args.repeat):  # alternate the sides so machine load hits both alike
            runs["before"].append(child("before", str(before), window, args))
            runs["after"].append(child("after", str(REPO), window, args))
    report(runs, args)


def report(runs: dict, args) -> None:
    rows = {}
    for side, results in runs.items():
        rows[side] = {key: float(np.median([r[key] for r in results]))
                      for key in ("benchmark_s", "selection_s", "peak_rss_mb", "scoring_peak_mb")}
    before, after = runs["before"][0], runs["after"][0]
    print(json.dumps({"options": vars(args), **rows}, indent=1))
    for key in ("benchmark_s", "selection_s"):
        print(f"{key[:-2]:>10}: before {rows['before'][key]:8.2f} CPU-s  after {rows['after'][key]:8.2f} CPU-s  "
              f"ratio before/after {rows['before'][key] / max(rows['after'][key], 1e-9):5.2f}")
    print(f"peak RSS MB: before {rows['before']['peak_rss_mb']:.0f}  after {rows['after']['peak_rss_mb']:.0f}; "
          f"above the loaded window while scoring: before {rows['before']['scoring_peak_mb']:.0f}  "
          f"after {rows['after']['scoring_peak_mb']:.0f}")
    for table in ("summary", "paired"):
        print(f"largest |before - after| in {table}: {largest_difference(before[table], after[table]):.3g}")


if __name__ == "__main__":
    main()
