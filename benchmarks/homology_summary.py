"""Sequence clusters and identity strata of one growth's targets (core.neighbours.homology), per mode/aspect.

    python benchmarks/homology_summary.py [--archive data] [--old 2014-09-29 --new 2016-01-15]

Reads the targets of the growth ``(old, new]`` (by default VALID growth of the first window of
``data/``: no TEST ground truth is read), clusters them by all-vs-all DIAMOND hits at the
default threshold (>= 30 % identity over >= 50 % of the query) and measures each target's
maximum identity to a corpus protein annotated in its aspect at ``old``. Prints per (mode,
aspect): targets, clusters, the largest cluster, the share of targets in a multi-protein
cluster (clusters are the window's, restricted to the cell), and the targets per identity
stratum; then the time the two DIAMOND runs took.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tempo_assets.core.labels.annotations import clean_annotations, propagate_annotations, split_by_evidence  # noqa: E402
from tempo_assets.core.labels.growth import align_terms, annotation_growth  # noqa: E402
from tempo_assets.core.neighbours.homology import IDENTITY_STRATA, cluster_codes, target_homology  # noqa: E402
from tempo_assets.core.inputs.cutoff_reader import CutoffReader
from tempo_assets.core.inputs.releases import open_archive  # noqa: E402


def release_state(archive, release):
    reader = CutoffReader(archive, archive.cutoff_of(release))
    ontology = reader.ontology(release)
    frame, _ = reader.gaf_frame(release)
    experimental, _ = split_by_evidence(frame)
    cleaned, _ = clean_annotations(experimental, ontology)
    return ontology, propagate_annotations(cleaned, ontology), reader.sequences(release)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--archive", default=str(Path(__file__).resolve().parents[1] / "data"))
    parser.add_argument("--old", default="2014-09-29")
    parser.add_argument("--new", default="2016-01-15")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args(argv)
    archive = open_archive(args.archive)
    _, old, old_seq = release_state(archive, args.old)
    new_ontology, new, new_seq = release_state(archive, args.new)
    aligned, _ = align_terms(old, new_ontology)
    growth = annotation_growth(aligned, new, sequences=old_seq, new_sequences=new_seq)
    targets = growth.targets
    corpus = {p: old_seq[p] for p in sorted(set(old["protein"]) & set(old_seq))}
    with tempfile.TemporaryDirectory(prefix="tempo_homology_") as work:
        start = time.perf_counter()
        clusters, strata = target_homology(targets, old_seq, corpus, old, work, threads=args.threads)
        seconds = time.perf_counter() - start
    rows = []
    for (mode, aspect), cell in strata.groupby(["mode", "aspect"], sort=True):
        codes = cluster_codes(cell["protein"], clusters)  # window clusters, as the scorer uses them
        sizes = pd.Series(codes).map(pd.Series(codes).value_counts())
        row = {"mode": mode, "aspect": aspect, "targets": len(cell), "clusters": int(codes.max()) + 1,
               "largest": int(sizes.max()), "in_multi": round(float((sizes > 1).mean()), 3)}
        counts = cell["identity_stratum"].value_counts()
        row.update({s: int(counts.get(s, 0)) for s in IDENTITY_STRATA})
        rows.append(row)
    print(f"growth ({args.old}, {args.new}] of {args.archive}: {len(clusters)} target protein(s), "
          f"{len(corpus)} corpus protein(s) at {args.old}; all targets together: "
          f"{clusters['cluster'].nunique()} cluster(s), largest {clusters['cluster_size'].max()}")
    print(pd.DataFrame(rows).to_string(index=False))
    print(f"target_homology (two diamond runs): {seconds:.1f} s, {args.threads} thread(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
