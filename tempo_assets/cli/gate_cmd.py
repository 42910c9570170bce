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

from tempo_assets.cli.errors import INPUT_ERROR_EXIT_CODE, exit_3_on_usage_error

DEFAULT_POLICY = "quality.yaml"


def resolve_policy(path: str | None):
    """The policy at ``path``; without one, ``./quality.yaml`` when present, else the built-in
    defaults (identical to the shipped ``quality.yaml``)."""
    from pathlib import Path

    from tempo_assets.core.audits.gate import POLICY_SCHEMA_VERSION, Policy, load_policy

    if path is not None:
        return load_policy(path)
    if Path(DEFAULT_POLICY).is_file():
        return load_policy(DEFAULT_POLICY)
    return Policy(schema_version=POLICY_SCHEMA_VERSION)


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
    parser.add_argument("--policy", default=None,
                        help=f"policy YAML (tempo-quality-policy/v1; default ./{DEFAULT_POLICY} when "
                             "present, else the built-in defaults, which are the shipped quality.yaml)")
    parser.add_argument("--out", metavar="GATE.json", help="also write the verdict as JSON (atomically)")
    parser.set_defaults(func=run_gate)

    exit_3_on_usage_error(parser, "gate")


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
    from tempo_assets.core.base.errors import TempoInputError
    from tempo_assets.core.audits.gate import gate_reports
    from tempo_assets.core.base.io import atomic_write

    try:
        result = gate_reports(args.reports, resolve_policy(args.policy))
    except TempoInputError as exc:
        print(f"tempo gate: input error (exit {INPUT_ERROR_EXIT_CODE}): {exc}", file=sys.stderr)
        return INPUT_ERROR_EXIT_CODE
    print(format_gate(result))
    if args.out:
        with atomic_write(args.out) as handle:
            handle.write(json.dumps(result.to_dict(), indent=1, sort_keys=True) + "\n")
        print(f"  verdict: {args.out}")
    return result.exit_code


# --- the gate in front of `tempo report` ---------------------------------------------------------


class ReportGate:
    """The gate's verdict as ``tempo report --format md|html`` shows it (or refuses on)."""

    def __init__(self, result, allow_failed: bool):
        self.result = result
        self.allow_failed = bool(allow_failed)

    @property
    def refuse(self) -> bool:
        """Publishing is refused: the gate failed and ``--allow-failed-gate`` was not given."""
        return self.result.verdict == "fail" and not self.allow_failed

    def headline(self) -> str:
        verdict = self.result.verdict
        if verdict == "fail":
            return ("FAILED QUALITY GATE: published with --allow-failed-gate; these numbers did not "
                    "pass the audits the policy requires")
        if verdict == "investigate":
            return "Quality gate: investigate (the audit evidence is missing or incomplete)"
        return f"Quality gate: pass ({len(self.result.evidence)} audit report(s))"

    def markdown(self) -> str:
        lines = [f"> **{self.headline()}**"] + [f"> - {reason}" for reason in self.result.reasons]
        return "\n".join(lines) + "\n\n"

    def html(self, page: str) -> str:
        """``page`` with the banner as the first element of its body."""
        from tempo_assets.core.evaluation.report import with_gate_banner

        return with_gate_banner(page, self.result.verdict, self.headline(), self.result.reasons)


def add_report_gate_arguments(parser) -> None:
    """``--gate REPORT.json...``, ``--policy`` and ``--allow-failed-gate`` for ``tempo report``."""
    parser.add_argument("--gate", nargs="+", default=[], metavar="REPORT.json",
                        help="audit reports (audit-cutoffs/-features/-design --out) the quality gate "
                             "reads before md/html are published; none: the gate says investigate")
    parser.add_argument("--policy", default=None, help="quality policy YAML (default as `tempo gate`)")
    parser.add_argument("--allow-failed-gate", action="store_true",
                        help="publish even when the gate fails, under a banner saying so")


def report_gate(args) -> ReportGate:
    """Run the gate for ``tempo report`` and print its verdict to stderr."""
    from tempo_assets.core.audits.gate import gate_reports

    gate = ReportGate(gate_reports(args.gate, resolve_policy(args.policy)), args.allow_failed_gate)
    if gate.result.verdict != "pass":
        print(f"tempo report: quality gate {gate.result.verdict}:", file=sys.stderr)
        for reason in gate.result.reasons:
            print(f"  - {reason}", file=sys.stderr)
    if gate.refuse:
        print("tempo report: not published: the quality gate failed (pass --allow-failed-gate to "
              "publish under a banner)", file=sys.stderr)
    return gate
