"""``tempo gate``: verdicts and exit codes over reports written by the real audits."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tempo_assets.cli import main as cli_main
from tempo_assets.cli.audit_graph_cmd import write_report
from tempo_assets.core.audits.leakage import CutoffAuditReport, Finding, GoldenRuleReport
from tempo_assets.core.audits.gate import GateInputError, Policy, gate_reports, gate_verdict, load_policy
from tempo_assets_tests.cli.test_audit_design_cli import DESIGN, ROWS, _setup

REPO = Path(__file__).resolve().parents[2]
POLICY = REPO / "quality.yaml"
PROTEINS = [f"P{i:05d}" for i in range(8)]


def _invoke(capsys, *argv):
    try:
        code = cli_main.main([str(a) for a in argv])
    except SystemExit as exc:  # usage errors
        code = exc.code
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture
def reports(tmp_path, capsys):
    """Writers of real audit reports into ``tmp_path``: clean by default, failing when asked."""

    def cutoffs(name="cutoffs.json", violation=False, materialisations=3):
        findings = [Finding("knn_corpus", "2016-01-15", 7, "cutoff",
                            "knn_corpus[2016-01-15]: source dated 2017-06-15 is after the cutoff")
                    ] if violation else []
        report = CutoffAuditReport({"knn_corpus": {"partitions": 1, "materialisations": materialisations}},
                                   findings)
        path = tmp_path / name
        write_report(str(path), {"audit": "audit-cutoffs", **report.to_dict()})  # as the CLI writes it
        return path

    def features(name="features.json", leak=False, not_audited=(), proteins=PROTEINS):
        report = GoldenRuleReport(list(proteins), ["knn_score", "ia"],
                                  {"own_count": PROTEINS[:3]} if leak else {}, list(not_audited),
                                  queries=20, labelled_queries=12)
        passed = report.passed and not report.not_audited
        document = {"audit": "audit-features", **report.to_dict(), "status": "pass" if passed else "fail"}
        path = tmp_path / name
        write_report(str(path), document)
        return path

    def design(name="design", rows=ROWS):
        folder = tmp_path / name
        folder.mkdir()
        design_path, ref, out = _setup(folder, rows)
        code = cli_main.main(["audit-design", "--design", str(design_path), "--reference", str(ref),
                              "--reference-complete", "--out", str(out)])
        capsys.readouterr()
        assert code in (0, 1)
        return out

    return {"cutoffs": cutoffs, "features": features, "design": design}


def test_clean_reports_pass_with_exit_zero(reports, capsys, tmp_path):
    paths = [reports["cutoffs"](), reports["features"](), reports["design"]()]
    code, out, err = _invoke(capsys, "gate", *paths, "--policy", POLICY, "--out", tmp_path / "gate.json")
    assert code == 0, out + err
    assert "gate: pass" in out
    verdict = json.loads((tmp_path / "gate.json").read_text())
    assert verdict["verdict"] == "pass" and verdict["reasons"] == []
    assert [r["audit"] for r in verdict["reports"]] == ["audit-cutoffs", "audit-features", "audit-design"]
    assert gate_verdict(paths, POLICY) == ("pass", [])


@pytest.mark.parametrize("planted", ["cutoffs", "features", "design"])
def test_a_planted_failing_audit_fails_the_gate(reports, capsys, planted):
    paths = {"cutoffs": reports["cutoffs"](violation=planted == "cutoffs"),
             "features": reports["features"](leak=planted == "features"),
             "design": reports["design"](rows=ROWS + [("ZZSUBJ0001", "FAMBBB", "score", "maybe", "2020-12-31")]
                                         if planted == "design" else ROWS)}
    code, out, _ = _invoke(capsys, "gate", *paths.values(), "--policy", POLICY)
    assert code == 1, out
    assert "gate: fail" in out
    verdict, reasons = gate_verdict(list(paths.values()), POLICY)
    assert verdict == "fail" and len(reasons) == 1 and reasons[0].startswith(str(paths[planted]))
    needle = {"cutoffs": "[cutoff] knn_corpus[2016-01-15]", "features": "feature own_count leaks: differs for 3 of 8",
              "design": "check partition_overlap: fail"}[planted]
    assert needle in reasons[0]


def test_missing_or_incomplete_evidence_is_investigate(reports, capsys):
    cutoffs, features, design = reports["cutoffs"](), reports["features"](), reports["design"]()
    code, out, _ = _invoke(capsys, "gate", cutoffs, features, "--policy", POLICY)
    assert code == 2 and "audit-design: required by the policy, but no report was given" in out
    assert _invoke(capsys, "gate", "--policy", POLICY)[0] == 2  # nothing at all
    for incomplete in (reports["cutoffs"]("empty.json", materialisations=0),
                       reports["features"]("few.json", proteins=PROTEINS[:2]),
                       reports["features"]("unaudited.json", not_audited=["ia"])):
        verdict, reasons = gate_verdict([incomplete, features if "cutoffs" in str(incomplete) else cutoffs,
                                         design, features], POLICY)
        assert verdict == "investigate", (incomplete, reasons)
        assert len(reasons) == 1 and reasons[0].startswith(str(incomplete))
    # a failure anywhere outranks missing evidence
    assert gate_verdict([reports["features"]("leak.json", leak=True)], POLICY)[0] == "fail"


def test_the_policy_decides_outcomes_and_what_is_required(reports, tmp_path):
    cutoffs, features = reports["cutoffs"](), reports["features"]("unaudited.json", not_audited=["ia"])
    policy = yaml.safe_load(POLICY.read_text())
    policy["audits"]["audit-design"]["required"] = False
    policy["audits"]["audit-features"]["outcomes"]["not_audited"] = "fail"
    assert gate_verdict([cutoffs, features], Policy.model_validate(policy))[0] == "fail"
    policy["audits"]["audit-features"]["outcomes"]["not_audited"] = "pass"
    path = tmp_path / "lenient.yaml"
    path.write_text(yaml.safe_dump(policy))
    assert gate_verdict([cutoffs, features], path) == ("pass", [])


def test_the_shipped_policy_is_the_built_in_default():
    assert load_policy(POLICY) == Policy(schema_version="tempo-quality-policy/v1")


@pytest.mark.parametrize("edit, needle", [
    (lambda p: {**p, "schema_version": "v0"}, "policy key schema_version"),
    (lambda p: {**p, "audits": {"audit-feature": {}}}, "policy key audits.audit-feature: Extra inputs"),
    (lambda p: {**p, "audits": {"audit-design": {"outcomes": {"fail": "pass"}}}},
     "policy key audits.audit-design.outcomes.fail: a failed audit cannot pass"),
    (lambda p: {**p, "audits": {"audit-design": {"outcomes": {"not_testable": "maybe"}}}},
     "policy key audits.audit-design.outcomes.not_testable"),
    (lambda p: {**p, "audits": {"audit-features": {"min_proteins_audited": 0}}},
     "policy key audits.audit-features.min_proteins_audited"),
])
def test_a_bad_policy_exits_three_naming_the_key(reports, capsys, tmp_path, edit, needle):
    path = tmp_path / "policy.yaml"
    path.write_text(yaml.safe_dump(edit(yaml.safe_load(POLICY.read_text()))))
    code, out, err = _invoke(capsys, "gate", reports["cutoffs"](), "--policy", path)
    assert code == 3 and out == ""
    assert f"{path}: {needle}" in err


@pytest.mark.parametrize("content, needle", [
    ("{not json", "not JSON"),
    ("[1, 2]", "must be a JSON object"),
    ('{"status": "pass"}', "not a report of audit-cutoffs, audit-features or audit-design"),
    ('{"audit": "audit-cutoffs", "violations": []}', "audit-cutoffs report lacks key 'assets'"),
    ('{"audit": "audit-features", "leaking_features": {}, "not_audited": [], "proteins_audited": "8", '
     '"status": "pass"}', "key 'proteins_audited' must be int"),
    ('{"audit": "audit-features", "leaking_features": {}, "not_audited": [], "proteins_audited": 8, '
     '"status": "fail"}', "key 'status' is fail but it names no leaking"),
    ('{"schema_version": "tempo-design-audit-report/v9", "status": "pass", "checks": []}',
     "unsupported design audit report"),
    ('{"audit": "audit-split"}', "key audit: unknown audit 'audit-split'"),
])
def test_a_bad_report_exits_three_naming_file_and_key(reports, capsys, tmp_path, content, needle):
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    code, out, err = _invoke(capsys, "gate", reports["cutoffs"](), bad, "--policy", POLICY)
    assert code == 3 and out == ""
    assert f"{bad}" in err and needle in err
    missing = tmp_path / "absent.json"
    code, _, err = _invoke(capsys, "gate", missing, "--policy", POLICY)
    assert code == 3 and str(missing) in err
    assert _invoke(capsys, "gate", "--policy")[0] == 3  # usage errors are not "investigate"
    with pytest.raises(GateInputError):
        gate_reports([bad], POLICY)


def test_reports_written_before_the_audit_key_are_recognised(reports):
    cutoffs, features = reports["cutoffs"](), reports["features"]()
    for path in (cutoffs, features):
        document = json.loads(path.read_text())
        del document["audit"]
        path.write_text(json.dumps(document))
    result = gate_reports([cutoffs, features], POLICY)
    assert [e.audit for e in result.evidence] == ["audit-cutoffs", "audit-features"]
    assert [e.status for e in result.evidence] == ["pass", "pass"]


def test_end_to_end_a_leaky_feature_found_by_audit_features_fails_the_gate(reports, capsys, tmp_path):
    """The real `tempo audit-features --out` on a tiny archive, clean then with a leaky feature."""
    from tempo_assets_tests.assets.tiny_archive import RELEASES, build_tiny_archive
    from tempo_assets_tests.test_audit_features_cli import LEAKY_HOOK

    archive = build_tiny_archive(tmp_path / "archive", n_releases=2)
    clean, leaky = tmp_path / "features_clean.json", tmp_path / "features_leaky.json"
    base = ["audit-features", "--archive", archive, "--release", RELEASES[1], "--sample", 8, "--k", 5]
    assert _invoke(capsys, *base, "--out", clean)[0] == 0
    assert _invoke(capsys, *base, "--extra-features", LEAKY_HOOK, "--out", leaky)[0] == 1
    assert json.loads(clean.read_text())["audit"] == "audit-features"
    others = [reports["cutoffs"](), reports["design"]()]
    assert _invoke(capsys, "gate", clean, *others, "--policy", POLICY)[0] == 0
    code, out, _ = _invoke(capsys, "gate", clean, leaky, *others, "--policy", POLICY)
    assert code == 1 and "feature own_count leaks" in out
