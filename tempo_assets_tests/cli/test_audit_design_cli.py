"""``tempo audit-design``: exit codes, the JSON report, and a printout free of identifiers."""
from __future__ import annotations

import json

import pandas as pd
import pytest
import yaml

from tempo_assets.cli import main as cli_main

MODULE = "tempo_assets.cli.audit_cmd"

DESIGN = {
    "schema_version": "tempo-evaluation-design/v1",
    "table": "evaluation.tsv",
    "split_column": "fold",
    "partitions": {"train": ["fit"], "validation": ["tune"], "test": ["score"]},
    "entity_columns": ["subject"],
    "group_columns": ["family"],
    "label_column": "outcome",
    "chronology": {"column": "seen", "cutoff": "2021-01-01"},
}
ROWS = [
    ("ZZSUBJ0001", "FAMAAA", "fit", "yes", "2020-03-01"),
    ("ZZSUBJ0002", "FAMBBB", "fit", "no", "2020-04-01"),
    ("ZZSUBJ0003", "FAMCCC", "tune", "yes", "2021-02-01"),
    ("ZZSUBJ0004", "FAMDDD", "score", "no", "2021-03-01"),
]


@pytest.fixture
def run(monkeypatch, capsys):
    if MODULE not in cli_main.COMMAND_MODULES:
        monkeypatch.setattr(cli_main, "COMMAND_MODULES", cli_main.COMMAND_MODULES + (MODULE,))

    def invoke(*argv):
        try:
            code = cli_main.main(["audit-design", *map(str, argv)])
        except SystemExit as exc:  # argparse usage errors
            code = exc.code
        out = capsys.readouterr()
        return code, out.out, out.err

    return invoke


def _setup(tmp_path, rows=ROWS, design=DESIGN, reference=("ZZSUBJ0001", "ZZSUBJ0002")):
    pd.DataFrame(rows, columns=["subject", "family", "fold", "outcome", "seen"]).to_csv(
        tmp_path / "evaluation.tsv", sep="\t", index=False)
    (tmp_path / "design.yaml").write_text(yaml.safe_dump(design))
    (tmp_path / "train_ids.txt").write_text("\n".join(reference) + "\n")
    return tmp_path / "design.yaml", tmp_path / "train_ids.txt", tmp_path / "out" / "report.json"


def test_clean_design_exits_zero(tmp_path, run):
    design, ref, out = _setup(tmp_path)
    code, stdout, _ = run("--design", design, "--reference", ref, "--reference-complete", "--out", out)
    assert code == 0, stdout
    report = json.loads(out.read_text())
    assert report["status"] == "pass" and report["exit_code"] == 0
    assert "design audit: pass" in stdout


def test_planted_violation_exits_one_and_prints_no_identifiers(tmp_path, run):
    rows = ROWS + [("ZZSUBJ0001", "FAMBBB", "score", "maybe", "2020-12-31")]
    design, ref, out = _setup(tmp_path, rows)
    code, stdout, stderr = run("--design", design, "--reference", ref, "--reference-complete",
                               "--out", out)
    assert code == 1
    report = json.loads(out.read_text())
    statuses = {c["name"]: c["status"] for c in report["checks"]}
    assert statuses == {"repeated_entities": "pass", "partition_overlap": "fail",
                        "shared_groups:family": "fail", "conflicting_labels": "fail",
                        "chronology": "fail", "reference_overlap": "fail"}
    # the JSON keeps bounded examples; the printout keeps counts only
    assert ["ZZSUBJ0001"] in report["checks"][1]["examples"]["train|test"]
    for token in ("ZZSUBJ", "FAM", "maybe", "2020-12-31"):
        assert token not in stdout and token not in stderr


def test_max_examples_zero_keeps_no_identifiers(tmp_path, run):
    rows = ROWS + [("ZZSUBJ0001", "FAMBBB", "score", "no", "2021-05-01")]
    design, ref, out = _setup(tmp_path, rows)
    code, _, _ = run("--design", design, "--out", out, "--max-examples", 0)
    assert code == 1
    assert "ZZSUBJ" not in json.dumps(json.loads(out.read_text())["checks"])


def test_missing_reference_exits_two(tmp_path, run):
    design, _, out = _setup(tmp_path)
    code, stdout, _ = run("--design", design, "--out", out)
    assert code == 2
    assert "reference_overlap" in stdout and "not_testable" in stdout
    incomplete_code, _, _ = run("--design", design, "--reference", tmp_path / "train_ids.txt", "--out", out)
    assert incomplete_code == 2


def test_warn_policy_exits_two(tmp_path, run):
    rows = ROWS + [("ZZSUBJ0004", "FAMDDD", "score", "yes", "2021-03-02")]
    design, ref, out = _setup(tmp_path, rows, {**DESIGN, "conflicting_labels": "warn"})
    code, _, _ = run("--design", design, "--reference", ref, "--reference-complete", "--out", out)
    assert code == 2
    assert json.loads(out.read_text())["status"] == "investigate"


@pytest.mark.parametrize("mutate, needle", [
    (lambda d: {k: v for k, v in d.items() if k != "split_column"}, "'split_column': required key"),
    (lambda d: {**d, "label_column": "grade"}, "'label_column': column 'grade'"),
    (lambda d: {**d, "partitions": {"train": ["fit"], "test": ["score"]}}, "unknown split value 'tune'"),
    (lambda d: {**d, "chronology": {"column": "seen", "cutoff": "01/01/2021"}}, "chronology.cutoff"),
])
def test_input_errors_exit_three_and_keep_old_report(tmp_path, run, mutate, needle):
    design, ref, out = _setup(tmp_path)
    assert run("--design", design, "--out", out)[0] == 2
    before = out.read_text()
    design.write_text(yaml.safe_dump(mutate(DESIGN)))
    code, stdout, stderr = run("--design", design, "--out", out)
    assert code == 3
    assert needle in stderr
    assert "design.yaml" in stderr or "evaluation.tsv" in stderr
    assert out.read_text() == before


def test_usage_errors_exit_three(tmp_path, run):
    design, _, out = _setup(tmp_path)
    assert run("--design", design)[0] == 3  # --out missing
    code, _, stderr = run("--design", design, "--reference-complete", "--out", out)
    assert code == 3 and "no reference" in stderr


def test_shipped_example_passes(tmp_path, run):
    from pathlib import Path

    example = Path(__file__).resolve().parents[2] / "examples" / "design_audit"
    out = tmp_path / "example.json"
    code, stdout, _ = run("--design", example / "evaluation_design.yaml",
                          "--reference", example / "training_reference.csv", "--reference-complete",
                          "--out", out)
    assert code == 0, stdout
    assert "P0000" not in stdout and "GO:" not in stdout
