"""CAFA evaluation, number for number with cafaeval 1.3.0, on sparse data.

Reproduces ``cafaeval`` 1.3.0 (Piovesan et al., CAFA-evaluator) as printed: every cell of
``evaluation_all.tsv`` and ``evaluation_best_{f,f_w,s,f_micro,f_micro_w}.tsv``. cafaeval builds
dense ``proteins x terms`` float matrices and thresholds them 99 times; here every raw score is
turned once into a threshold-bin code (``searchsorted`` on the exact
``numpy.arange(th_step, 1, th_step)`` grid: max and fill propagation commute with that
monotone map), codes are propagated by term height over a CSR parent graph in one-byte blocks,
and per-protein counts per bin become per-threshold counts by reverse cumulative sums.

Reproduced cafaeval rules (see ``parser.py``, ``graph.py``, ``evaluation.py`` of cafaeval):

* OBO: a line is ``tag: value`` split on the first ``": "``; only ``is_a`` and
  ``relationship: part_of``; obsolete terms, namespace-less terms and ``namespace: external``
  are dropped; parents outside the namespace (or obsolete) are dropped; ``alt_id`` maps to the
  set of primaries claiming it; term index = file order inside the namespace; namespaces in
  order of their first kept term. ``orphans=False`` evaluates only terms with a parent.
* Ground truth: whitespace-split lines, first namespace whose primaries (then alt ids) know the
  term, unknown terms dropped, rows in order of first appearance, boolean ``max`` propagation.
* Predictions: lines with more than two fields; only proteins of that namespace's ground truth;
  an id that is an alt_id in its namespace is replaced by all its primaries; duplicate pairs
  keep the max, starting from 0 (so NaN and negative scores never count, scores above 1 and
  ``inf`` count at every threshold); ``max_terms``: an insertion happens only while the raw
  row holds ``<= max_terms`` non-zero terms (so up to ``max_terms + 1`` survive, file order).
* Propagation ``max`` (a term takes the max of its descendants) or ``fill`` (only a term whose
  own score is 0 takes the max of its children).
* Metrics at ``tau`` in the grid with ``score >= tau``; IA weights (missing or 0 -> 0, NaN/inf
  -> 0, only ``ia > 0`` terms weighted); ``norm`` cafa/pred/gt; micro averages; ``s``; rows with
  ``cov == 0`` removed; best rows by first ``idxmax``/``idxmin`` with ``cov_max``.

Float exactness: unweighted per-protein quantities are integers and the per-threshold sums over
proteins use the same 1-D ``numpy`` sums on the same arrays in the same protein order, so they
are bit-identical. Weighted per-protein sums are sequential sums in a canonical order (cafaeval
uses numpy's pairwise sum over the dense row): they can differ in the last ulp, but equal term
sets give equal sums, so ratios that are exactly 1 stay exactly 1. A printed digit could only
differ if a weighted value sat within ~1e-15 of a rounding boundary.

Deliberate differences (documented, all on inputs where cafaeval crashes or has no rule):

* A namespace whose inserted predictions are all zero/NaN: cafaeval raises ``IndexError`` in
  ``propagate``; here it yields no rows (every ``cov`` is 0).
* Malformed ground-truth, IA or score fields raise :class:`EvaluationInputError` naming the
  file and line (cafaeval raises a bare ``ValueError``); a non-numeric score on a line that
  cafaeval never converts (protein or term outside the ground truth) is skipped and counted.
* An alt_id claimed by several primaries is expanded in sorted order (cafaeval iterates a
  ``set``, so with ``max_terms`` its own result depends on the hash seed).
* OBO/GT/prediction files may be gzipped.
* ``n_cpu`` (``-threads``) is not a process pool over thresholds: with ``n_cpu > 1`` the
  prediction file is parsed by Arrow's threads and namespaces are propagated in threads.

LAFA mode (``toi`` and/or ``known``, following cafaeval-protea 0.1.0's ``-toi``/``-known``):
``toi`` terms (alt ids mapped) are intersected with the evaluated terms and with the IA terms;
``known`` pairs are mapped and propagated like ground truth and removed from that protein's
ground truth and predictions. Coverage fix (docs/PROTOCOL.md): a protein whose remaining ground truth
inside the evaluated terms is empty is not counted at all. cafaeval-protea drops such a protein
from the denominator ``ne`` but still counts its predictions in ``n``, precision and
misinformation (so its coverage can exceed 1); we drop it everywhere.

The package, by what each module computes:

- ``ontology``: OBO reading (cafaeval's rules), namespaces, IA, the threshold grid;
- ``predictions``: ground truth and predictions read and routed to sparse cells;
- ``propagation``: max/fill propagation of threshold codes by term height;
- ``metrics``: per-protein, per-threshold counts, F/S/weighted/micro metrics, the prepared setup;
- ``tables``: ``cafa_eval``/``evaluate_frames`` and the tables they return (best rows, curves);
- ``bootstrap``: bootstrap confidence intervals and paired tests;
- ``scoring``: Tempo's profiles and per-cell scoring; ``benchmark``: a window's benchmark;
- ``results``: the tidy results table and its Markdown/TSV; ``plots``: the figures;
  ``report``: the self-contained HTML reports.
"""

from tempo_assets.core.evaluation.ontology import EvalOntology, EvaluationInputError, read_ia, threshold_grid
from tempo_assets.core.evaluation.metrics import SetupCache
from tempo_assets.core.evaluation.tables import (
    best_rows, cafa_eval, evaluate_frames, fmax_score, smin_loss, threshold_curve, write_results,
)
from tempo_assets.core.evaluation.bootstrap import (
    bootstrap_ci, bootstrap_cis, paired_bootstrap, paired_bootstraps,
)

__all__ = [
    "EvalOntology",
    "EvaluationInputError",
    "SetupCache",
    "best_rows",
    "bootstrap_ci",
    "bootstrap_cis",
    "cafa_eval",
    "evaluate_frames",
    "fmax_score",
    "paired_bootstrap",
    "paired_bootstraps",
    "read_ia",
    "smin_loss",
    "threshold_curve",
    "threshold_grid",
    "write_results",
]
