"""``tempo-eval``: cafaeval 1.3.0's command line, on Tempo's sparse evaluator.

Same positional arguments, options and output files as ``python -m cafaeval``; adds LAFA's
``-toi FILE`` (terms of interest) and ``-known FILE`` (``protein term`` pairs known before the
window, removed from ground truth and predictions).
"""
from __future__ import annotations

import argparse
import logging
import sys


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tempo-eval",
        description="CAFA evaluation (cafaeval 1.3.0 compatible): precision-recall curves, "
                    "Fmax, Smin, weighted and micro-averaged variants.")
    parser.add_argument("obo_file", help="ontology file, OBO format (plain or gzipped)")
    parser.add_argument("pred_dir", help="predictions folder, walked recursively")
    parser.add_argument("gt_file", help="ground truth file: 'protein term' lines")
    parser.add_argument("-out_dir", default="results", help="output folder (default results/)")
    parser.add_argument("-ia", help="information accretion file: 'term ia' lines")
    parser.add_argument("-no_orphans", action="store_true", default=False,
                        help="exclude terms without parents (the roots) from the evaluation")
    parser.add_argument("-norm", choices=["cafa", "pred", "gt"], default="cafa",
                        help="normalisation: cafa (precision by predicted targets, the rest by "
                             "ground-truth targets), pred, or gt")
    parser.add_argument("-prop", choices=["max", "fill"], default="max",
                        help="propagation of prediction scores to ancestors")
    parser.add_argument("-th_step", type=float, default=0.01, help="threshold step in (0, 1)")
    parser.add_argument("-max_terms", type=int, default=None,
                        help="terms per protein and namespace to read (cafaeval's counting)")
    parser.add_argument("-threads", type=int, default=4,
                        help="threads for parsing the prediction file and propagating "
                             "namespaces (default 4)")
    parser.add_argument("-log_level", choices=["debug", "info", "warning", "error", "critical"],
                        default="info", help="log level")
    parser.add_argument("-toi", default=None, help="terms-of-interest file (LAFA mode)")
    parser.add_argument("-known", default=None,
                        help="known 'protein term' pairs removed before scoring (LAFA mode)")
    return parser


def _keep_freed_memory() -> None:
    """Ask glibc's malloc to keep freed memory for reuse instead of returning it to the OS.

    The evaluator allocates and frees many numpy temporaries of tens of MiB; by default each
    comes from a fresh ``mmap`` whose pages fault in again (about a fifth of the run's CPU
    time as system time). A short-lived command can keep them. No-op off glibc.
    """
    try:
        import ctypes

        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return
    m_trim_threshold, m_top_pad, m_mmap_threshold = -1, -2, -3
    libc.mallopt(m_mmap_threshold, 32 << 20)  # glibc's ceiling on 64-bit
    libc.mallopt(m_trim_threshold, 1 << 30)
    libc.mallopt(m_top_pad, 64 << 20)


def main(argv: list[str] | None = None) -> int:
    """Evaluate; an error (a missing or bad file) is one line on stderr and exit 2 (``cli/errors.py``)."""
    from tempo_assets.cli.errors import run_command

    args = build_parser().parse_args(argv)
    _keep_freed_memory()
    logging.basicConfig(level=getattr(logging, args.log_level.upper()),
                        format="%(asctime)s [%(levelname)-5.5s] %(message)s")
    return run_command("tempo-eval", lambda: evaluate(args))


def evaluate(args: argparse.Namespace) -> int:
    from tempo_assets.core.evaluation import cafa_eval, write_results

    df_all, dfs_best = cafa_eval(
        args.obo_file, args.pred_dir, args.gt_file, ia=args.ia, no_orphans=args.no_orphans,
        norm=args.norm, prop=args.prop, max_terms=args.max_terms, th_step=args.th_step,
        n_cpu=args.threads, toi=args.toi, known=args.known)
    write_results(df_all, dfs_best, out_dir=args.out_dir, th_step=args.th_step)
    return 0


if __name__ == "__main__":
    sys.exit(main())
