"""``tempo gate REPORT.json... --policy quality.yaml``: the quality gate over audit reports.

Exit codes: 0 pass, 1 fail, 2 investigate (missing or incomplete evidence), 3 a bad input file
(a report or policy that cannot be read as one; the message names the file and key). Like
``tempo audit-design``, this command catches its own input errors, because the dispatcher's
generic exit 2 would read as "investigate".
"""
from __future__ import annotations

import argparse
import json
import sys

INPUT_ERROR_EXIT_CODE = 3
DEFAULT_POLICY = "quality.yaml"


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "gate",
        help="quality gate: pass/fail/investigate over audit-cutoffs/-features/-design reports",
        description=(
            "Read the JSON reports of `tempo audit-cutoffs --out`, `tempo audit-features --out` and "
            "`tempo audit-design --out`, apply the policy (which audits are required, which statuses "
            "fail or call for investigation) and print the verdict with its reasons. Exit 0 pass, "
            "1 fail, 2 investigate (a required report missing, or incomplete evidence), 3 a bad "
            "input file."),
    )
    parser.add_argument("reports", nargs="*", metavar="REPORT.json", help="audit reports (JSON)")
    parser.add_argument("--policy", default=DEFAULT_POLICY,
                        help=f"policy YAML (tempo-quality-policy/v1; default ./{DEFAULT_POLICY}, the "
                             "repository's shipped policy)")
    parser.add_argument("--out", metavar="GATE.json", help="also write the verdict as JSON (atomically)")
    parser.set_defaults(func=run_gate)

    def usage_error(message: str) -> None:
        parser.print_usage(sys.stderr)
        print(f"tempo gate: usage error: {message}", file=sys.stderr)
        sys.exit(INPUT_ERROR_EXIT_CODE)

    parser.error = usage_error  # argparse would exit 2, which means "investigate" here


def format_gate(result) -> str:
    """Plain-text verdict: one line per report, then the verdict and its reasons."""
    lines = []
    for evidence, outcome in zip(result.evidence, result.outcomes):
        lines.append(f"  {evidence.audit:<15} {evidence.status:<12} -> {outcome:<11} {evidence.path}")
    for audit in result.missing:
        lines.append(f"  {audit:<15} {'missing':<12} -> investigate (required, no report given)")
    lines.append(f"gate: {result.verdict}")
    lines += [f"  - {reason}" for reason in result.reasons]
    return "\n".join(lines)


def run_gate(args: argparse.Namespace) -> int:
    from tempo_assets.core.errors import TempoInputError
    from tempo_assets.core.gate import gate_reports
    from tempo_assets.core.io import atomic_write

    try:
        result = gate_reports(args.reports, args.policy)
    except TempoInputError as exc:
        print(f"tempo gate: input error (exit {INPUT_ERROR_EXIT_CODE}): {exc}", file=sys.stderr)
        return INPUT_ERROR_EXIT_CODE
    print(format_gate(result))
    if args.out:
        with atomic_write(args.out) as handle:
            handle.write(json.dumps(result.to_dict(), indent=1, sort_keys=True) + "\n")
        print(f"  verdict: {args.out}")
    return result.exit_code
