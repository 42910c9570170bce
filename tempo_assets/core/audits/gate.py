"""The quality gate: pass, fail or investigate over the JSON reports of Tempo's audits.

``tempo gate REPORT.json... --policy quality.yaml`` reads the reports written by
``tempo audit-cutoffs --out``, ``tempo audit-features --out`` and ``tempo audit-design --out``,
gives each report a *status* (what the audit found) and maps it through the policy to an
*outcome* (what the gate makes of it):

===============  ==============================================================================
audit            statuses
===============  ==============================================================================
audit-cutoffs    ``pass``; ``fail`` (a violation); ``empty`` (no materialisation was checked)
audit-features   ``pass``; ``fail`` (a feature leaked); ``not_audited`` (a feature could not be
                 audited); ``empty`` (fewer proteins audited than ``min_proteins_audited``)
audit-design     the report's own ``pass``, ``fail``, ``investigate``, ``not_testable``
===============  ==============================================================================

The verdict is ``fail`` when any report's outcome is ``fail``; otherwise ``investigate`` when
any outcome is ``investigate``, when a required audit has no report, or when no report was
given at all (missing or incomplete evidence is never a pass); otherwise ``pass``. A policy
cannot map a ``fail`` status to ``pass``: a gate that lets a failed audit through is no gate.

The policy is YAML validated with pydantic; every error names the file and the key.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Literal, Mapping, Sequence

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from tempo_assets.core.base.errors import TempoInputError

__all__ = [
    "AUDITS",
    "AUDIT_STATUSES",
    "EXIT_CODES",
    "POLICY_SCHEMA_VERSION",
    "Evidence",
    "GateResult",
    "Policy",
    "gate_reports",
    "gate_verdict",
    "load_policy",
    "parse_policy",
    "read_audit_report",
]

POLICY_SCHEMA_VERSION = "tempo-quality-policy/v1"
DESIGN_REPORT_SCHEMA = "tempo-design-audit-report/v1"
AUDITS = ("audit-cutoffs", "audit-features", "audit-design")
AUDIT_STATUSES = {
    "audit-cutoffs": ("pass", "fail", "empty"),
    "audit-features": ("pass", "fail", "not_audited", "empty"),
    "audit-design": ("pass", "fail", "investigate", "not_testable"),
}
VERDICTS = ("pass", "fail", "investigate")
EXIT_CODES = {"pass": 0, "fail": 1, "investigate": 2}  # 3: a bad input file (CLI)

Outcome = Literal["pass", "fail", "investigate"]


class GateInputError(TempoInputError):
    """A report or policy file cannot be read as what it claims to be (exit 3)."""


# --------------------------------------------------------------------------------------------
# the policy


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True)


class _Outcomes(_Strict):
    @field_validator("fail", check_fields=False)
    @classmethod
    def _fail_cannot_pass(cls, value):
        if value == "pass":
            raise ValueError("a failed audit cannot pass the gate: map `fail` to fail or "
                             "investigate")
        return value


class CutoffsOutcomes(_Outcomes):
    pass_: Outcome = Field("pass", alias="pass")
    fail: Outcome = "fail"
    empty: Outcome = "investigate"


class FeaturesOutcomes(_Outcomes):
    pass_: Outcome = Field("pass", alias="pass")
    fail: Outcome = "fail"
    not_audited: Outcome = "investigate"
    empty: Outcome = "investigate"


class DesignOutcomes(_Outcomes):
    pass_: Outcome = Field("pass", alias="pass")
    fail: Outcome = "fail"
    investigate: Outcome = "investigate"
    not_testable: Outcome = "investigate"


class CutoffsRule(_Strict):
    required: bool = True
    outcomes: CutoffsOutcomes = CutoffsOutcomes()


class FeaturesRule(_Strict):
    required: bool = True
    min_proteins_audited: int = Field(5, ge=1)
    outcomes: FeaturesOutcomes = FeaturesOutcomes()


class DesignRule(_Strict):
    required: bool = True
    outcomes: DesignOutcomes = DesignOutcomes()


class Audits(_Strict):
    audit_cutoffs: CutoffsRule = Field(CutoffsRule(), alias="audit-cutoffs")
    audit_features: FeaturesRule = Field(FeaturesRule(), alias="audit-features")
    audit_design: DesignRule = Field(DesignRule(), alias="audit-design")


class Policy(_Strict):
    """A quality policy (``tempo-quality-policy/v1``); every field has the shipped default."""

    schema_version: Literal["tempo-quality-policy/v1"]
    audits: Audits = Audits()

    def rule(self, audit: str):
        return getattr(self.audits, audit.replace("-", "_"))

    def outcome(self, audit: str, status: str) -> str:
        return getattr(self.rule(audit).outcomes, "pass_" if status == "pass" else status)

    def required(self) -> list[str]:
        return [a for a in AUDITS if self.rule(a).required]


def parse_policy(mapping: Any, path: str | Path | None = None) -> Policy:
    """Validate a policy mapping; errors name ``path`` and the offending key."""
    try:
        return Policy.model_validate(mapping)
    except ValidationError as exc:
        first = exc.errors()[0]
        key = ".".join(str(part) for part in first["loc"]) or "(top level)"
        more = f" (and {exc.error_count() - 1} more error(s))" if exc.error_count() > 1 else ""
        message = first["msg"].removeprefix("Value error, ")
        raise GateInputError(f"policy key {key}: {message}{more}", path=path) from None


def load_policy(path: str | Path) -> Policy:
    """Read and validate a policy YAML file (see ``quality.yaml`` at the repository root)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise GateInputError(f"cannot read the policy: {exc.strerror or exc}", path=path) from None
    try:
        mapping = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise GateInputError(f"policy is not valid YAML: {getattr(exc, 'problem', exc)}", path=path,
                             line=mark.line + 1 if mark is not None else None) from None
    if not isinstance(mapping, Mapping):
        raise GateInputError("policy must be a YAML mapping with a schema_version key", path=path)
    return parse_policy(mapping, path)


# --------------------------------------------------------------------------------------------
# the reports


@dataclass(frozen=True)
class Evidence:
    """One audit report as the gate reads it."""

    path: str
    audit: str
    status: str
    findings: tuple[str, ...] = ()  # why the status is not pass, one line each


def _key(document: Mapping, key: str, kind: type | tuple, path: Path, audit: str):
    if key not in document:
        raise GateInputError(f"{audit} report lacks key {key!r}", path=path)
    value = document[key]
    if not isinstance(value, kind) or isinstance(value, bool) and kind is not bool:
        names = kind.__name__ if isinstance(kind, type) else "/".join(k.__name__ for k in kind)
        raise GateInputError(f"{audit} report key {key!r} must be {names}, got "
                             f"{type(value).__name__}", path=path)
    return value


def _audit_kind(document: Mapping, path: Path) -> str:
    schema = document.get("schema_version")
    if isinstance(schema, str) and schema.startswith("tempo-design-audit-report/"):
        if schema != DESIGN_REPORT_SCHEMA:
            raise GateInputError(f"key schema_version: unsupported design audit report {schema!r} "
                                 f"(this gate reads {DESIGN_REPORT_SCHEMA})", path=path)
        return "audit-design"
    declared = document.get("audit")
    if declared is not None:
        if declared not in ("audit-cutoffs", "audit-features"):
            raise GateInputError(f"key audit: unknown audit {declared!r} (expected audit-cutoffs "
                                 "or audit-features)", path=path)
        return declared
    # reports written before the `audit` key existed
    if "leaking_features" in document:
        return "audit-features"
    if "violations" in document and "assets" in document:
        return "audit-cutoffs"
    raise GateInputError("not a report of audit-cutoffs, audit-features or audit-design (no "
                         "schema_version or audit key)", path=path)


def _cutoffs(document: Mapping, path: Path, policy: Policy) -> tuple[str, tuple[str, ...]]:
    violations = _key(document, "violations", list, path, "audit-cutoffs")
    assets = _key(document, "assets", list, path, "audit-cutoffs")
    findings = []
    for i, violation in enumerate(violations):
        if not isinstance(violation, Mapping) or "rule" not in violation:
            raise GateInputError(f"audit-cutoffs report key violations[{i}] is not a finding with "
                                 "a rule", path=path)
        findings.append(f"[{violation['rule']}] {violation.get('message', '')}".strip())
    checked = 0
    for i, asset in enumerate(assets):
        count = asset.get("materialisations") if isinstance(asset, Mapping) else None
        if not isinstance(count, int) or isinstance(count, bool) or count < 0:
            raise GateInputError(f"audit-cutoffs report key assets[{i}].materialisations must be "
                                 "a count", path=path)
        checked += count
    if findings:
        return "fail", tuple(findings)
    if checked == 0:
        return "empty", ("no materialisation was recorded in the instance audited",)
    return "pass", ()


def _features(document: Mapping, path: Path, policy: Policy) -> tuple[str, tuple[str, ...]]:
    leaks = _key(document, "leaking_features", dict, path, "audit-features")
    not_audited = _key(document, "not_audited", list, path, "audit-features")
    audited = _key(document, "proteins_audited", int, path, "audit-features")
    status = _key(document, "status", str, path, "audit-features")
    if status not in ("pass", "fail"):
        raise GateInputError(f"audit-features report key 'status': expected pass or fail, got "
                             f"{status!r}", path=path)
    if leaks:
        return "fail", tuple(f"feature {name} leaks: differs for {count} of {audited} protein(s)"
                             for name, count in sorted(leaks.items()))
    if status == "fail" and not not_audited:
        raise GateInputError("audit-features report key 'status' is fail but it names no leaking "
                             "or unaudited feature", path=path)
    if not_audited:
        return "not_audited", tuple(f"feature {name} was not audited" for name in not_audited)
    wanted = policy.audits.audit_features.min_proteins_audited
    if audited < wanted:
        return "empty", (f"{audited} protein(s) audited, the policy asks for at least {wanted}",)
    return "pass", ()


def _design(document: Mapping, path: Path, policy: Policy) -> tuple[str, tuple[str, ...]]:
    status = _key(document, "status", str, path, "audit-design")
    if status not in AUDIT_STATUSES["audit-design"]:
        raise GateInputError(f"audit-design report key 'status': unknown status {status!r}",
                             path=path)
    checks = _key(document, "checks", list, path, "audit-design")
    findings = []
    for i, check in enumerate(checks):
        if not isinstance(check, Mapping) or not {"name", "status"} <= set(check):
            raise GateInputError(f"audit-design report key checks[{i}] lacks name or status",
                                 path=path)
        if check["status"] != "pass":
            findings.append(f"check {check['name']}: {check['status']}"
                            + (f" ({check['reason']})" if check.get("reason") else ""))
    return status, tuple(findings)


_READERS = {"audit-cutoffs": _cutoffs, "audit-features": _features, "audit-design": _design}


def read_audit_report(path: str | Path, policy: Policy) -> Evidence:
    """Read one audit report and give it a status; a bad file raises :class:`GateInputError`."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise GateInputError(f"cannot read the report: {exc.strerror or exc}", path=path) from None
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise GateInputError(f"not JSON: {exc.msg}", path=path, line=exc.lineno) from None
    if not isinstance(document, Mapping):
        raise GateInputError("an audit report must be a JSON object", path=path)
    audit = _audit_kind(document, path)
    status, findings = _READERS[audit](document, path, policy)
    return Evidence(str(path), audit, status, findings)


# --------------------------------------------------------------------------------------------
# the verdict


@dataclass
class GateResult:
    """The verdict, why, and what each report contributed."""

    verdict: str
    reasons: list[str]
    evidence: list[Evidence] = field(default_factory=list)
    outcomes: list[str] = field(default_factory=list)  # policy outcome of each evidence
    missing: list[str] = field(default_factory=list)  # required audits without a report

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.verdict]

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": "tempo-quality-gate/v1",
            "verdict": self.verdict,
            "exit_code": self.exit_code,
            "reasons": list(self.reasons),
            "missing": list(self.missing),
            "reports": [{"path": e.path, "audit": e.audit, "status": e.status, "outcome": o,
                         "findings": list(e.findings)} for e, o in zip(self.evidence, self.outcomes)],
        }


def gate_reports(report_paths: Iterable[str | Path], policy: Policy | str | Path) -> GateResult:
    """Read every report, apply the policy and decide.

    Parameters
    ----------
    report_paths : paths of JSON reports of audit-cutoffs / audit-features / audit-design (several
        of one audit are all read: e.g. one audit-features report per cutoff).
    policy : a :class:`Policy` or the path of a policy YAML file.

    Raises
    ------
    GateInputError : a report or the policy cannot be read (names the file and key).
    """
    if not isinstance(policy, Policy):
        policy = load_policy(policy)
    evidence = [read_audit_report(p, policy) for p in report_paths]
    outcomes = [policy.outcome(e.audit, e.status) for e in evidence]
    reasons = []
    for item, outcome in zip(evidence, outcomes):
        if outcome == "pass":
            continue
        details = "; ".join(item.findings) or "no details in the report"
        reasons.append(f"{item.path}: {item.audit} {item.status} -> {outcome}: {details}")
    seen = {e.audit for e in evidence}
    missing = [a for a in policy.required() if a not in seen]
    reasons += [f"{a}: required by the policy, but no report was given" for a in missing]
    if not evidence:
        reasons.append("no audit report was given: nothing to judge")
    if "fail" in outcomes:
        verdict = "fail"
    elif "investigate" in outcomes or missing or not evidence:
        verdict = "investigate"
    else:
        verdict = "pass"
    return GateResult(verdict, reasons, evidence, outcomes, missing)


def gate_verdict(report_paths: Sequence[str | Path],
                 policy: Policy | str | Path) -> tuple[str, list[str]]:
    """``(verdict, reasons)``: the gate as ``tempo report`` calls it before publishing.

    ``verdict`` is ``pass``, ``fail`` or ``investigate``; ``reasons`` says why it is not a pass
    (empty on a pass). Bad files raise :class:`GateInputError`.
    """
    result = gate_reports(report_paths, policy)
    return result.verdict, result.reasons
