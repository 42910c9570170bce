"""LAFA mode computed by cafaeval 1.3.0 itself, on inputs filtered the LAFA way: the test suite's reference.

Run with the cafaeval 1.3.0 interpreter (``.venv-cafaeval/bin/python``), never imported by the suite:

    python cafaeval_lafa.py OBO PRED_DIR GT -known KNOWN -toi TOI [-ia IA] [-prop fill] [-no_orphans]
                            [-norm cafa] [-th_step 0.01] -out_dir OUT

cafaeval 1.3.0 parses the ontology, the ground truth, the predictions and the IA file, propagates
them (``-prop``), and computes every metric at every threshold (``compute_metrics``, ``normalize``,
``write_results``). This script adds only what LAFA's conventions say (docs/PROTOCOL.md, "Evaluation"),
by choosing which cells and proteins cafaeval sees, never by computing a metric:

- known terms (PK): the ``KNOWN`` pairs, parsed and propagated by cafaeval like a ground truth,
  are removed from that protein's ground truth and predictions (their cells are cleared);
- terms of interest: only the ``TOI`` terms (alt ids mapped to their primary ids) that cafaeval
  evaluates (its terms with parents under ``-no_orphans``; with ``-ia``, for the weighted metrics,
  its terms with an IA above 0) are scored;
- the coverage fix: a protein whose remaining ground truth in those terms is empty is not counted
  at all (not in ``ne``, ``n``, precision or misinformation).

Output: ``OUT/evaluation_all.tsv`` as cafaeval writes it.
"""
from __future__ import annotations

import argparse
import os

import numpy as np
import pandas as pd
from cafaeval.evaluation import compute_metrics, normalize, write_results
from cafaeval.graph import GroundTruth, Prediction
from cafaeval.parser import gt_parser, obo_parser, pred_parser


def terms_of_interest(path: str, ontology) -> np.ndarray:
    """Indexes (in ``ontology``) of the TOI file's terms, alt ids mapped to their primary ids."""
    wanted = set()
    with open(path) as handle:
        for line in handle:
            for term in line.split()[:1]:
                primaries = [term] if term in ontology.terms_dict else sorted(ontology.terms_dict_alt.get(term, ()))
                wanted.update(ontology.terms_dict[t]["index"] for t in primaries)
    return np.array(sorted(wanted), dtype=int)


def known_cells(known, gt) -> np.ndarray:
    """A boolean matrix shaped like ``gt.matrix``: the propagated known terms of each ground-truth protein."""
    cells = np.zeros(gt.matrix.shape, dtype=bool)
    if known is not None:
        for protein, row in gt.ids.items():
            if protein in known.ids:
                cells[row] = known.matrix[known.ids[protein]]
    return cells


def lafa_metrics(ns, ontology, gt, prediction, known, toi, tau_arr, norm, weighted):
    """cafaeval's metrics of one namespace over the LAFA cells and proteins (one variant)."""
    evaluated = ontology.toi_ia if weighted else ontology.toi
    terms = np.intersect1d(evaluated, toi)
    kept_truth = gt.matrix & ~known
    kept_pred = np.where(known, 0.0, prediction.matrix)
    rows = np.flatnonzero(kept_truth[:, terms].any(axis=1))  # the coverage fix
    by_row = sorted(gt.ids, key=gt.ids.get)
    ids = {by_row[row]: i for i, row in enumerate(rows)}
    sub_gt = GroundTruth(ids, kept_truth[rows], ns)
    sub_pred = Prediction(ids, kept_pred[rows], ns)
    metrics = compute_metrics(sub_pred, sub_gt, tau_arr, terms, ontology.ia if weighted else None, n_cpu=1)
    return normalize(metrics, ns, tau_arr, np.full(len(tau_arr), len(rows)), norm)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("obo_file")
    parser.add_argument("pred_dir")
    parser.add_argument("gt_file")
    parser.add_argument("-out_dir", required=True)
    parser.add_argument("-ia", default=None)
    parser.add_argument("-known", default=None)
    parser.add_argument("-toi", required=True)
    parser.add_argument("-prop", default="max", choices=("max", "fill"))
    parser.add_argument("-no_orphans", action="store_true")
    parser.add_argument("-norm", default="cafa", choices=("cafa", "pred", "gt"))
    parser.add_argument("-th_step", type=float, default=0.01)
    args = parser.parse_args()

    tau_arr = np.arange(args.th_step, 1, args.th_step)
    ontologies = obo_parser(args.obo_file, ("is_a", "part_of"), args.ia, not args.no_orphans)
    gts = gt_parser(args.gt_file, ontologies)
    knowns = gt_parser(args.known, ontologies) if args.known else {}
    frames = []
    folder = os.path.normpath(args.pred_dir) + "/"
    files = sorted(os.path.join(root, name) for root, _, names in os.walk(folder) for name in names)
    for path in files:
        predictions = pred_parser(path, ontologies, gts, args.prop)
        for ns, prediction in predictions.items():
            ontology, gt = ontologies[ns], gts[ns]
            known = known_cells(knowns.get(ns), gt)
            toi = terms_of_interest(args.toi, ontology)
            frame = lafa_metrics(ns, ontology, gt, prediction, known, toi, tau_arr, args.norm, False)
            if ontology.ia is not None:
                weighted = lafa_metrics(ns, ontology, gt, prediction, known, toi, tau_arr, args.norm, True)
                frame = pd.merge(frame, weighted, on=["ns", "tau"], suffixes=("", "_w"))
            frame["filename"] = path.replace(folder, "").replace("/", "_")
            frames.append(frame)
    table = pd.concat(frames)
    table = table[table["cov"] > 0].reset_index(drop=True).set_index(["filename", "ns", "tau"])
    write_results(table, {}, args.out_dir, args.th_step)


if __name__ == "__main__":
    main()
