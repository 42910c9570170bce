"""``tempo audit-design``: audit a declared evaluation split design.

Exit codes: 0 pass, 1 fail, 2 investigate or not_testable, 3 a usage or input error (a design
that cannot be read as declared). The dispatcher's generic exit 2 for input errors would collide
with "investigate", so this command catches its own input errors.
"""
from __future__ import annotations

import argparse
import sys

from tempo_assets.cli.errors import INPUT_ERROR_EXIT_CODE, exit_3_on_usage_error


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "audit-design",
        help="audit a declared evaluation split design (tempo-evaluation-design/v1)",
        description=(
            "Check an evaluation table against its declared split design: repeated and shared "
            "identities across forbidden partition pairs, shared groups, conflicting labels, "
            "chronology and overlap with a training reference. Prints statuses and counts only; "
            "the JSON report may hold a bounded number of example identities. "
            "Exit 0 pass, 1 fail, 2 investigate/not_testable, 3 usage or input error."
        ),
    )
    parser.add_argument("--design", required=True, help="design YAML (tempo-evaluation-design/v1)")
    parser.add_argument("--reference", default=None,
                        help="training reference: ids the model was trained on (CSV/TSV/parquet with "
                             "the entity columns, or a .txt id list for a one-column identity)")
    parser.add_argument("--reference-complete", action="store_true",
                        help="declare that --reference lists everything the model was trained on")
    parser.add_argument("--out", required=True, help="where to write the JSON report (atomically)")
    parser.add_argument("--max-examples", type=int, default=5,
                        help="example identities kept per finding in the JSON report (default 5; "
                             "never printed)")
    parser.set_defaults(func=run_audit_design)

    exit_3_on_usage_error(parser, "audit-design")


def run_audit_design(args: argparse.Namespace) -> int:
    from tempo_assets.core.audits import design as design_audit
    from tempo_assets.core.audits import design_spec
    from tempo_assets.core.base.errors import TempoInputError

    try:
        if args.max_examples < 0:
            raise design_spec.DesignError("--max-examples must be >= 0")
        report = design_audit.audit_design_files(
            args.design,
            reference_path=args.reference,
            reference_complete=args.reference_complete,
            max_examples=args.max_examples,
        )
        design_audit.write_audit_report(report, args.out)
    except TempoInputError as exc:
        print(f"tempo audit-design: input error (exit {INPUT_ERROR_EXIT_CODE}): {exc}", file=sys.stderr)
        return INPUT_ERROR_EXIT_CODE
    print(design_audit.format_audit_summary(report))
    print(f"  report: {args.out}")
    return int(report["exit_code"])
