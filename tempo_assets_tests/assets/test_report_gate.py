"""``tempo report --format md|html`` runs the quality gate first: refuses on a failure, banners."""
from __future__ import annotations

import pytest

from tempo_assets.core.audits.leakage import GoldenRuleReport
from tempo_assets.cli.audit_graph_cmd import write_report
from tempo_assets_tests.assets.test_benchmark_assets import run_report, tiny  # noqa: F401 (fixture)
from tempo_assets_tests.cli.test_gate_cli import POLICY, PROTEINS


@pytest.fixture
def features_reports(tmp_path):
    def write(name, leak):
        report = GoldenRuleReport(list(PROTEINS), ["knn_score"], {"own_count": PROTEINS[:2]} if leak else {})
        path = tmp_path / name
        write_report(str(path), {"audit": "audit-features", **report.to_dict()})
        return str(path)

    return write("clean.json", False), write("leaky.json", True)


def test_a_failed_gate_refuses_to_publish_unless_allowed(tiny, monkeypatch, capsys, tmp_path,  # noqa: F811
                                                          features_reports):
    clean, leaky = features_reports
    out = tmp_path / "report.md"
    page = tmp_path / "report.html"
    for fmt, path in (("md", out), ("html", page)):
        code = run_report(monkeypatch, tiny, "--format", fmt, "--out", str(path), "--gate", clean, leaky,
                          "--policy", str(POLICY))
        captured = capsys.readouterr()
        assert code == 1 and not path.exists()
        assert "quality gate fail" in captured.err and "feature own_count leaks" in captured.err
        assert "not published" in captured.err

    assert run_report(monkeypatch, tiny, "--format", "md", "--out", str(out), "--gate", clean, leaky,
                      "--policy", str(POLICY), "--allow-failed-gate") == 0
    text = out.read_text(encoding="utf-8")
    assert text.startswith("> **FAILED QUALITY GATE") and "feature own_count leaks" in text
    assert "| ready " in text  # the report itself follows the banner
    assert run_report(monkeypatch, tiny, "--format", "html", "--out", str(page), "--gate", clean, leaky,
                      "--policy", str(POLICY), "--allow-failed-gate") == 0
    html = page.read_text(encoding="utf-8")
    assert html.index('id="quality-gate"') < html.index("<h1") and "FAILED QUALITY GATE" in html
    capsys.readouterr()

    # missing evidence (audit-cutoffs and audit-design required) publishes, headed "investigate"
    assert run_report(monkeypatch, tiny, "--format", "md", "--gate", clean, "--policy", str(POLICY)) == 0
    captured = capsys.readouterr()
    assert captured.out.startswith("> **Quality gate: investigate")
    assert "audit-design: required by the policy, but no report was given" in captured.out
    assert "quality gate investigate" in captured.err
    # tsv is data, not a publication: no gate
    assert run_report(monkeypatch, tiny, "--format", "tsv", "--gate", leaky) == 0
    assert capsys.readouterr().out.startswith("window\t")
