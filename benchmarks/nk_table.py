"""The NK tables of docs/results/ (demo.md, full_archives.md): per window, aspect and profile, F at
each method's VALID threshold on TEST
and the recipe's paired difference with naive (intervals resampling proteins, then clusters); then,
per cell, the recipe against every baseline: where its paired intervals lie above 0 and where not.

Reads the ``benchmark`` artefacts of a materialised store (every window it holds, in key order,
numbered W1, W2, ...) and prints markdown rows, ``lafa`` first:

    .venv/bin/python benchmarks/nk_table.py --artefacts .dagster_home/artefacts
    .venv/bin/python benchmarks/nk_table.py --artefacts /tmp/tempo_mouse/artefacts --profile lafa
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd

BASELINES = ("blast", "goa_nonexp", "knn")
HEADER = ("| window | aspect | profile | n | recipe | naive | recipe - naive | BLAST | non-exp GOA | KNN |\n"
          "|---|---|---|---:|---:|---:|---|---:|---:|---:|")


def nk_rows(summary: pd.DataFrame, paired: pd.DataFrame, label: str, profile: str) -> list[str]:
    """One markdown row per aspect of one window's ``benchmark`` tables under ``profile``."""
    rows = []
    for aspect in ("BP", "MF", "CC"):
        cell = summary[(summary["profile"] == profile) & (summary["mode"] == "NK") & (summary["aspect"] == aspect)]
        f = cell.set_index("method")["f_at_valid_tau"]
        if "recipe" not in f.index or "naive" not in f.index:
            continue
        diff = paired[(paired["profile"] == profile) & (paired["mode"] == "NK") & (paired["aspect"] == aspect)
                      & (paired["a"] == "recipe") & (paired["b"] == "naive") & (paired["metric"] == "f_at_valid_tau")]
        text = "n/a"
        if len(diff):
            d = diff.iloc[0]
            text = (f"{d['delta']:+.3f} [{d['low']:.3f}, {d['high']:.3f}] "
                    f"c[{d['cluster_low']:.3f}, {d['cluster_high']:.3f}]")
        n = int(cell.set_index("method").loc["recipe", "n_targets"])
        others = " | ".join(f"{f[m]:.3f}" if m in f.index else "n/a" for m in BASELINES)
        rows.append(f"| {label} | {aspect} | `{profile}` | {n} | {f['recipe']:.3f} | {f['naive']:.3f} | {text} | "
                    f"{others} |")
    return rows


VERDICT_HEADER = ("| window | aspect | profile | vs naive | vs BLAST | vs non-exp GOA | vs KNN |\n"
                  "|---|---|---|---|---|---|---|")
VERSUS = ("naive",) + BASELINES


def verdict(delta: float, low: float, high: float, cluster_low: float, cluster_high: float) -> str:
    """``above`` / ``below`` where the protein and the cluster intervals both exclude 0 on that side,
    ``holds 0`` where both contain it, and which one excludes it otherwise."""
    protein = "above" if low > 0 else "below" if high < 0 else "holds 0"
    cluster = "above" if cluster_low > 0 else "below" if cluster_high < 0 else "holds 0"
    text = protein if protein == cluster else f"{protein} (proteins), {cluster} (clusters)"
    return f"{delta:+.3f} {text}"


def verdict_rows(paired: pd.DataFrame, label: str, profile: str) -> list[str]:
    """Per NK aspect, the recipe against each baseline: the paired difference of F at each one's VALID
    threshold and whether its intervals (proteins, clusters) lie above or below 0."""
    rows = []
    for aspect in ("BP", "MF", "CC"):
        cell = paired[(paired["profile"] == profile) & (paired["mode"] == "NK") & (paired["aspect"] == aspect)
                      & (paired["a"] == "recipe") & (paired["metric"] == "f_at_valid_tau")].set_index("b")
        if not len(cell):
            continue
        texts = [verdict(*(float(cell.loc[b, c]) for c in ("delta", "low", "high", "cluster_low", "cluster_high")))
                 if b in cell.index else "n/a" for b in VERSUS]
        rows.append(f"| {label} | {aspect} | `{profile}` | " + " | ".join(texts) + " |")
    return rows


def main(argv: list[str] | None = None) -> int:
    from tempo_assets.core.storage.artefacts import ArtefactStore

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--artefacts", type=Path, required=True, help="a materialised store (TEMPO_ARTEFACTS)")
    parser.add_argument("--profile", choices=("lafa", "cafaeval"), action="append",
                        help="profiles to print (default both, lafa first)")
    args = parser.parse_args(argv)
    folder = args.artefacts / "benchmark"
    if not folder.is_dir():
        print(f"error: {folder}: no benchmark artefacts (materialise the windows first)", file=sys.stderr)
        return 2
    store = ArtefactStore(args.artefacts)
    windows = sorted(p.name for p in folder.iterdir() if (p / "artefact.json").exists())
    values = [store.open("benchmark", window).value for window in windows]
    profiles = args.profile or ("lafa", "cafaeval")
    print(HEADER)
    for profile in profiles:
        for i, value in enumerate(values, start=1):
            for row in nk_rows(value.summary, value.paired, f"W{i}", profile):
                print(row)
    print()
    print(VERDICT_HEADER)
    for profile in profiles:
        for i, value in enumerate(values, start=1):
            for row in verdict_rows(value.paired, f"W{i}", profile):
                print(row)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
