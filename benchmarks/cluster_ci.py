"""Protein-level vs cluster-level bootstrap CIs of F for the BLAST baseline on one growth.

    python benchmarks/cluster_ci.py [--archive data] [--old 2014-09-29 --new 2016-01-15] [--n-boot 1000]

Scores the BLAST baseline (DIAMOND hits against the corpus at ``old``) on the growth
``(old, new]`` (by default VALID growth of the first window of ``data/``: no TEST ground truth is
read) with cafaeval's defaults (no known-term handling), per mode and aspect, and prints F with
its 95 % percentile CI from resampling proteins and from resampling sequence clusters
(core.neighbours.homology), plus whether the protein-level interval through ``bootstrap_interval`` equals
``core.evaluation.bootstrap_ci`` exactly. This is how the one scorer calls the cluster bootstrap.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.homology_summary import release_state  # noqa: E402
from tempo_assets.core.evaluation import EvalOntology, bootstrap as ev  # noqa: E402
from tempo_assets.core.neighbours.blast import blast_term_scores, diamond_hits  # noqa: E402
from tempo_assets.core.labels.growth import align_terms, annotation_growth  # noqa: E402
from tempo_assets.core.neighbours.homology import bootstrap_interval, cluster_codes, target_homology  # noqa: E402
from tempo_assets.core.inputs.releases import open_archive  # noqa: E402


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--archive", default=str(Path(__file__).resolve().parents[1] / "data"))
    parser.add_argument("--old", default="2014-09-29")
    parser.add_argument("--new", default="2016-01-15")
    parser.add_argument("--n-boot", type=int, default=1000)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args(argv)
    archive = open_archive(args.archive)
    _, old, old_seq = release_state(archive, args.old)
    new_ontology, new, new_seq = release_state(archive, args.new)
    aligned, _ = align_terms(old, new_ontology)
    growth = annotation_growth(aligned, new, sequences=old_seq, new_sequences=new_seq)
    targets = growth.targets
    corpus = {p: old_seq[p] for p in sorted(set(old["protein"]) & set(old_seq))}
    query = {p: old_seq[p] for p in sorted(set(targets["protein"]))}
    with tempfile.TemporaryDirectory(prefix="tempo_cluster_ci_") as work:
        clusters, _ = target_homology(targets, old_seq, corpus, old, Path(work) / "homology",
                                      threads=args.threads)
        hits = diamond_hits(query, corpus, Path(work) / "blast", threads=args.threads)
    blast = blast_term_scores(hits, old)
    obo = next((Path(args.archive) / "releases" / args.new).glob("*.obo*"))
    ontology = EvalOntology.from_obo(obo)

    rows = []
    for (mode, aspect), cell in growth.targets.groupby(["mode", "aspect"], sort=True):
        truth = growth.ground_truth.merge(cell[["protein", "aspect", "mode"]])[["protein", "term"]]
        preds = blast[blast["protein"].isin(set(cell["protein"])) & (blast["aspect"] == aspect)]
        preds = preds[["protein", "term", "score"]]
        if preds.empty:
            continue
        reference = ev.bootstrap_ci(ontology, truth, preds, metric="f", n_boot=args.n_boot, seed=0)
        scored = ev._Scored(ev._setup_of(ontology, truth, ev.EvalOptions()), preds, ev.EvalOptions())
        for name, (contrib, prot_rows) in scored.contribs(weighted=False).items():
            if prot_rows.size == 0:
                continue
            proteins = [scored.setup.truths[name].proteins[i] for i in prot_rows]

            def statistic(counts, contrib=contrib):
                return ev._replicate_metric(contrib, counts, "f", "cafa")

            protein_ci = bootstrap_interval(statistic, None, args.n_boot, seed=0, n_units=len(proteins))
            cluster_ci = bootstrap_interval(statistic, cluster_codes(proteins, clusters), args.n_boot, seed=0)
            same = all(np.isclose(protein_ci[k], reference[name][k]) for k in ("estimate", "low", "high"))
            rows.append({"mode": mode, "aspect": aspect, "proteins": len(proteins),
                         "clusters": cluster_ci["n_clusters"], "f": round(protein_ci["estimate"], 4),
                         "protein_ci": f"[{protein_ci['low']:.3f}, {protein_ci['high']:.3f}]",
                         "cluster_ci": f"[{cluster_ci['low']:.3f}, {cluster_ci['high']:.3f}]",
                         "width_ratio": round((cluster_ci["high"] - cluster_ci["low"])
                                              / (protein_ci["high"] - protein_ci["low"]), 3),
                         "equals_bootstrap_ci": bool(same)})
    print(f"BLAST baseline, growth ({args.old}, {args.new}] of {args.archive}, F (cafaeval defaults), "
          f"{args.n_boot} replicates; clusters: >= 30 % identity over >= 50 % of the query")
    print(pd.DataFrame(rows).to_string(index=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
