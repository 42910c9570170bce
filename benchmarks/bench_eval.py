"""CAFA-sized evaluation benchmark: ``tempo-eval`` against cafaeval 1.3.0 and cafaeval-protea.

Ground truth: experimental, non-NOT annotations of the human and mouse 2019-01-14 GOA files,
at least 8,000 BP / 5,000 MF / 5,000 CC proteins, on the 2019-01-27 GO release. Predictions: a
seeded noisy copy of the truth plus random terms, at least 2 million rows, in one file.

Each tool runs as a subprocess under ``/usr/bin/time -v`` with the same ``-threads``; the script
prints wall times, ratios against tempo-eval measured in the same run, peak RSS, and whether
each tool's output tables are identical (as printed) to tempo-eval's.

    .venv/bin/python benchmarks/bench_eval.py [--rows 2000000] [--threads 1] [--repeat 5]
        [--skip-cafaeval] [--skip-protea]

The case is built once and reused while ``case.txt`` in the work folder matches the options.
tempo-eval runs ``--repeat`` times and its medians are reported (CPU time, user + sys, is the
comparison least moved by other jobs on the machine); the peers run once.

Interpreters: ``$TEMPO_CAFAEVAL_PYTHON`` (default ``.venv-cafaeval/bin/python``) and
``$TEMPO_PROTEA_PYTHON`` (default ``/work/protea-venv/bin/python``).
"""
from __future__ import annotations

import argparse
import gzip
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parents[1]
ARCHIVE = REPO / ".." / "shared" / "data" / "goa_archive"
EXPERIMENTAL = {"EXP", "IDA", "IPI", "IMP", "IGI", "IEP", "TAS", "IC",
                "HTP", "HDA", "HMP", "HGI", "HEP"}
ASPECT_TARGETS = {"P": 8000, "F": 5000, "C": 5000}


def read_experimental(path: Path) -> pd.DataFrame:
    frame = pd.read_csv(path, sep="\t", comment="!", header=None, usecols=[1, 3, 4, 6, 8],
                        names=["protein", "qualifier", "term", "evidence", "aspect"], dtype=str,
                        keep_default_na=False)
    keep = frame["evidence"].isin(EXPERIMENTAL) & ~frame["qualifier"].str.contains("NOT")
    return frame.loc[keep, ["protein", "term", "aspect"]].drop_duplicates()


def live_terms(obo: Path) -> list[str]:
    terms, current, obsolete = [], None, False
    with open(obo) as handle:
        for line in handle:
            if line.startswith("[") or not line.strip():
                if current and not obsolete:
                    terms.append(current)
                current, obsolete = None, False
            elif line.startswith("id: GO:"):
                current = line[4:].strip()
            elif line.startswith("is_obsolete: true"):
                obsolete = True
    return terms


def build_case(work: Path, rows: int, seed: int) -> dict[str, Path]:
    rng = np.random.default_rng(seed)
    work.mkdir(parents=True, exist_ok=True)
    obo = work / "go_2019-01-27.obo"
    stamp = work / "case.txt"
    case = {"obo": obo, "gt": work / "gt.tsv", "preds": work / "preds"}
    key = f"rows={rows} seed={seed}"
    if stamp.exists() and stamp.read_text() == key and all(p.exists() for p in case.values()):
        print(f"case cached in {work} ({key})")
        return case
    if not obo.exists():
        with gzip.open(ARCHIVE / "go" / "go_2019-01-27.obo.gz", "rb") as src, open(obo, "wb") as dst:
            shutil.copyfileobj(src, dst)
    annotations = pd.concat([read_experimental(ARCHIVE / "goa" / f"goa_{org}_2019-01-14.gaf.gz")
                             for org in ("human", "mouse")], ignore_index=True)
    parts = []
    for aspect, target in ASPECT_TARGETS.items():
        sub = annotations[annotations["aspect"] == aspect]
        proteins = sub["protein"].unique()
        if len(proteins) < target:
            raise SystemExit(f"only {len(proteins)} proteins with aspect {aspect}")
        chosen = rng.choice(proteins, size=target, replace=False)
        parts.append(sub[sub["protein"].isin(chosen)])
    truth = pd.concat(parts).sort_values(["protein", "term"])
    gt = work / "gt.tsv"
    truth[["protein", "term"]].to_csv(gt, sep="\t", header=False, index=False)
    proteins = truth["protein"].unique()
    terms = np.array(live_terms(obo), dtype=object)
    keep = rng.random(len(truth)) < 0.7
    noisy = truth.loc[keep, ["protein", "term"]].copy()
    noisy["score"] = np.clip(rng.normal(0.6, 0.2, len(noisy)), 0.01, 1.0).round(2)
    n_random = max(0, rows - len(noisy))
    random = pd.DataFrame({"protein": rng.choice(proteins, size=n_random),
                           "term": rng.choice(terms, size=n_random),
                           "score": rng.random(n_random).round(3)})
    preds = pd.concat([noisy, random]).sample(frac=1.0, random_state=seed)
    pred_dir = work / "preds"
    pred_dir.mkdir(exist_ok=True)
    preds.to_csv(pred_dir / "method.tsv", sep="\t", header=False, index=False)
    counts = truth.groupby("aspect")["protein"].nunique().to_dict()
    print(f"ground truth: {len(truth):,} rows, proteins per aspect {counts}; "
          f"predictions: {len(preds):,} rows")
    stamp.write_text(key)
    return case


def timed(command: list[str], log: Path) -> tuple[float, float, float, int]:
    """(wall s, CPU s = user + sys, peak RSS MiB, return code) of one child (/usr/bin/time -v)."""
    start = time.perf_counter()
    with open(log, "w") as handle:
        done = subprocess.run(["/usr/bin/time", "-v", *command], stdout=handle,
                              stderr=subprocess.STDOUT)
    wall = time.perf_counter() - start
    text = log.read_text()

    def number(label: str) -> float:
        match = re.search(label + r": ([0-9.]+)", text)
        return float(match.group(1)) if match else float("nan")

    cpu = number(r"User time \(seconds\)") + number(r"System time \(seconds\)")
    rss = number(r"Maximum resident set size \(kbytes\)") / 1024
    return wall, cpu, rss, done.returncode


def differing_cells(a: Path, b: Path) -> tuple[int, int]:
    """(differing cells, total cells) between two printed TSV tables."""
    if not a.exists() or not b.exists():
        return -1, 0
    left = [line.split("\t") for line in a.read_text().splitlines()]
    right = [line.split("\t") for line in b.read_text().splitlines()]
    if len(left) != len(right):
        return -1, 0
    total = sum(len(row) for row in left)
    diff = sum(x != y for l, r in zip(left, right) for x, y in zip(l, r)) + sum(
        abs(len(l) - len(r)) for l, r in zip(left, right))
    return diff, total


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--work", type=Path, default=REPO / "bench_out" / "eval")
    parser.add_argument("--skip-cafaeval", action="store_true")
    parser.add_argument("--skip-protea", action="store_true")
    parser.add_argument("--repeat", type=int, default=5,
                        help="tempo-eval runs (the median is reported; the peers run once)")
    args = parser.parse_args(argv)

    case = build_case(args.work, args.rows, args.seed)
    inputs = [str(case["obo"]), str(case["preds"]), str(case["gt"])]
    tools = {"tempo-eval": [str(Path(sys.executable).parent / "tempo-eval")]}
    if not args.skip_cafaeval:
        tools["cafaeval 1.3.0"] = [os.environ.get("TEMPO_CAFAEVAL_PYTHON",
                                                  str(REPO / ".venv-cafaeval" / "bin" / "python")),
                                   "-m", "cafaeval"]
    if not args.skip_protea:
        tools["cafaeval-protea 0.1.0"] = [os.environ.get("TEMPO_PROTEA_PYTHON",
                                                         "/work/protea-venv/bin/python"),
                                          "-m", "cafaeval"]
    results = {}
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())} "
          f"({os.cpu_count()} CPUs); -threads {args.threads}")
    for name, command in tools.items():
        out = args.work / ("out_" + re.sub(r"[^a-z0-9]+", "_", name.lower()))
        full = [*command, *inputs, "-out_dir", str(out), "-threads", str(args.threads),
                "-log_level", "warning"]
        runs = []
        for _ in range(args.repeat if name == "tempo-eval" else 1):
            shutil.rmtree(out, ignore_errors=True)
            runs.append(timed(full, args.work / f"{out.name}.log"))
        # medians: the load of other jobs on a shared machine moves single runs
        wall, cpu = (float(np.median([r[i] for r in runs])) for i in (0, 1))
        rss, rc = max(r[2] for r in runs), max(r[3] for r in runs)
        results[name] = (wall, cpu, rss, rc, out)
        spread = (f" (median of {len(runs)}: wall {min(r[0] for r in runs):.2f}-"
                  f"{max(r[0] for r in runs):.2f}, CPU {min(r[1] for r in runs):.2f}-"
                  f"{max(r[1] for r in runs):.2f})" if len(runs) > 1 else "")
        print(f"{name:24s} wall {wall:9.2f} s   CPU {cpu:9.2f} s   peak RSS {rss:9.0f} MiB"
              f"   rc {rc}{spread}", flush=True)
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")

    base_wall, base_cpu, base_rss, _, base_out = results["tempo-eval"]
    print("\nratios (same run, same -threads):")
    for name, (wall, cpu, rss, rc, out) in results.items():
        if name == "tempo-eval":
            continue
        cells = []
        for table in ("evaluation_all.tsv", "evaluation_best_f.tsv", "evaluation_best_s.tsv",
                      "evaluation_best_f_micro.tsv"):
            diff, total = differing_cells(base_out / table, out / table)
            cells.append(f"{table}: {'MISSING/SHAPE' if diff < 0 else f'{diff}/{total} cells differ'}")
        print(f"  {name}: {wall / base_wall:.1f}x the wall time, {cpu / base_cpu:.1f}x the CPU "
              f"time of tempo-eval; "
              f"peak RSS {rss / base_rss:.2f}x tempo-eval's; rc {rc}")
        for line in cells:
            print(f"      {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
