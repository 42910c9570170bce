"""The declared split-design audit: one planted violation per check, clean designs pass."""
from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from tempo_assets.core.audits import design as da
from tempo_assets.core.audits import design_checks, design_spec
from tempo_assets.core.base.errors import TempoInputError

CLEAN_ROWS = [
    # id, assay, site, split, y, when
    ("P1", "A", "s1", "train", 1.0, "2020-01-01"),
    ("P2", "A", "s1", "train", 2.0, "2020-01-05"),
    ("P3", "A", "s2", "valid", 3.0, "2020-07-01"),
    ("P4", "A", "s3", "test", 4.0, "2020-08-01"),
    ("P5", "B", "s4", "test", 5.0, "2020-09-01"),
]
BASE_DESIGN = {
    "schema_version": design_spec.SCHEMA_VERSION,
    "table": "table.csv",
    "split_column": "split",
    "partitions": {"train": ["train"], "validation": ["valid"], "test": ["test"]},
    "entity_columns": ["id", "assay"],
    "group_columns": ["site"],
    "label_column": "y",
    "label_tolerance": 0.25,
    "conflicting_labels": "fail",
    "repeated_entities": "fail",
    "chronology": {"column": "when", "cutoff": "2020-06-01", "strictly_before": True, "timezone": "UTC"},
}


def _write(tmp_path: Path, rows=CLEAN_ROWS, design=None, reference=None) -> tuple[Path, Path | None]:
    frame = pd.DataFrame(rows, columns=["id", "assay", "site", "split", "y", "when"])
    frame.to_csv(tmp_path / "table.csv", index=False)
    design_path = tmp_path / "design.yaml"
    design_path.write_text(yaml.safe_dump(design if design is not None else BASE_DESIGN))
    ref_path = None
    if reference is not None:
        ref_path = tmp_path / "reference.csv"
        pd.DataFrame(reference, columns=["id", "assay"]).to_csv(ref_path, index=False)
    return design_path, ref_path


def _audit(tmp_path, rows=CLEAN_ROWS, design=None, reference=(("P1", "A"), ("P2", "A")), complete=True):
    design_path, ref_path = _write(tmp_path, rows, design, reference)
    return da.audit_design_files(design_path, ref_path, reference_complete=complete and ref_path is not None)


def _check(report, name):
    return next(c for c in report["checks"] if c["name"] == name)


def _with(**changes):
    design = json.loads(json.dumps(BASE_DESIGN))
    for key, value in changes.items():
        if value is None:
            design.pop(key, None)
        else:
            design[key] = value
    return design


def test_clean_design_passes(tmp_path):
    report = _audit(tmp_path)
    assert {c["name"]: c["status"] for c in report["checks"]} == {
        "repeated_entities": "pass", "partition_overlap": "pass", "shared_groups:site": "pass",
        "conflicting_labels": "pass", "chronology": "pass", "reference_overlap": "pass",
    }
    assert report["status"] == "pass" and report["exit_code"] == 0
    assert report["table"]["partition_rows"] == {"train": 2, "validation": 1, "test": 2}
    assert report["algorithm"] == design_spec.ALGORITHM
    digests = {i["role"]: i["sha256"] for i in report["inputs"]}
    assert digests["table"] == da.sha256_file(tmp_path / "table.csv")
    assert set(digests) == {"design", "table", "reference"}
    assert report["reference"] == {"supplied": True, "path": str(tmp_path / "reference.csv"),
                                   "declared_complete": True, "records": 2}
    assert "no leakage" not in report["scope"].lower()
    assert "only these records" in report["scope"]


def test_overlap_across_forbidden_pair_fails(tmp_path):
    rows = CLEAN_ROWS + [("P1", "A", "s9", "test", 1.0, "2020-10-01")]
    report = _audit(tmp_path, rows)
    check = _check(report, "partition_overlap")
    assert check["status"] == "fail" and report["exit_code"] == 1
    assert check["counts"]["by_pair"]["train|test"]["shared_entities"] == 1
    assert check["counts"]["by_pair"]["train|validation"]["shared_entities"] == 0
    assert check["examples"]["train|test"] == [["P1", "A"]]


def test_composite_identity_separates_assays(tmp_path):
    # same id, different assay: a different entity under entity_columns [id, assay]
    rows = CLEAN_ROWS + [("P1", "B", "s9", "test", 1.0, "2020-10-01")]
    assert _check(_audit(tmp_path, rows), "partition_overlap")["status"] == "pass"
    only_id = _with(entity_columns=["id"])
    assert _check(_audit(tmp_path, rows, only_id), "partition_overlap")["status"] == "fail"


def test_allowed_pair_is_not_checked(tmp_path):
    rows = CLEAN_ROWS + [("P1", "A", "s9", "test", 1.0, "2020-10-01")]
    design = _with(forbidden_pairs=[["train", "validation"], ["validation", "test"]], group_columns=[])
    report = _audit(tmp_path, rows, design, reference=None)
    assert _check(report, "partition_overlap")["status"] == "pass"


def test_shared_group_fails(tmp_path):
    rows = list(CLEAN_ROWS)
    rows[3] = ("P4", "A", "s1", "test", 4.0, "2020-08-01")  # site s1 is a train site
    report = _audit(tmp_path, rows)
    check = _check(report, "shared_groups:site")
    assert check["status"] == "fail"
    assert check["counts"]["by_pair"]["train|test"] == {"shared_groups": 1, "rows_in_train": 2, "rows_in_test": 1}
    assert _check(report, "partition_overlap")["status"] == "pass"


@pytest.mark.parametrize("second, policy, expected", [
    (1.2, "fail", "pass"),        # within tolerance 0.25
    (1.25, "fail", "pass"),       # exactly the tolerance is not "more than"
    (1.3, "fail", "fail"),
    (1.3, "warn", "investigate"),
])
def test_conflicting_numeric_labels(tmp_path, second, policy, expected):
    rows = CLEAN_ROWS + [("P1", "A", "s1", "train", second, "2020-01-02")]
    design = _with(conflicting_labels=policy, repeated_entities="allow")
    check = _check(_audit(tmp_path, rows, design), "conflicting_labels")
    assert check["status"] == expected
    assert check["counts"]["conflicting_entities"] == (0 if expected == "pass" else 1)


def test_conflicting_categorical_labels_and_missing(tmp_path):
    rows = [r[:4] + (lab,) + r[5:] for r, lab in zip(CLEAN_ROWS, ["x", "y", "x", "y", "x"])]
    conflict = rows + [("P2", "A", "s1", "train", "z", "2020-01-06")]
    design = _with(repeated_entities="allow")
    check = _check(_audit(tmp_path, conflict, design), "conflicting_labels")
    assert check["status"] == "fail" and check["counts"]["label_kind"] == "categorical"
    assert check["counts"]["conflicts_within_one_partition"] == 1
    unlabelled = rows + [("P2", "A", "s1", "train", None, "2020-01-06")]
    check = _check(_audit(tmp_path, unlabelled, design), "conflicting_labels")
    assert check["status"] == "not_testable"
    assert check["counts"]["repeated_entities_with_missing_label"] == 1


def test_repeated_entities_policy(tmp_path):
    rows = CLEAN_ROWS + [("P4", "A", "s3", "test", 4.0, "2020-08-02")]
    allow = _check(_audit(tmp_path, rows, _with(repeated_entities="allow")), "repeated_entities")
    assert allow["status"] == "pass"
    assert allow["counts"]["by_partition"]["test"] == {"repeated_entities": 1, "rows_in_repeats": 2}
    assert _check(_audit(tmp_path, rows), "repeated_entities")["status"] == "fail"


@pytest.mark.parametrize("row, counter", [
    (("P6", "A", "s5", "train", 6.0, "2020-06-02"), "train_at_or_after_cutoff"),
    (("P6", "A", "s5", "test", 6.0, "2020-05-30"), "evaluated_before_cutoff"),
    # tz: 00:30 in Paris on the cutoff day is 22:30 UTC the day before
    (("P6", "A", "s5", "test", 6.0, "2020-06-01T00:30:00+02:00"), "evaluated_before_cutoff"),
])
def test_chronology_violations_fail(tmp_path, row, counter):
    check = _check(_audit(tmp_path, CLEAN_ROWS + [row]), "chronology")
    assert check["status"] == "fail" and check["counts"][counter] == 1


def test_chronology_ties_and_timezone(tmp_path):
    no_cutoff = {"column": "when", "strictly_before": True, "timezone": "UTC"}
    tie = CLEAN_ROWS + [("P6", "A", "s5", "test", 6.0, "2020-01-05")]
    strict = _check(_audit(tmp_path, tie, _with(chronology=no_cutoff)), "chronology")
    assert strict["status"] == "fail" and strict["counts"]["evaluated_not_after_train"] == 1
    assert strict["counts"]["train_not_before_evaluated"] == 1
    loose = _check(_audit(tmp_path, tie, _with(chronology={**no_cutoff, "strictly_before": False})),
                   "chronology")
    assert loose["status"] == "pass"
    # naive timestamps read in the declared zone: 01:00 Tokyo on 2020-06-01 is 16:00 UTC the day before
    tokyo = {"column": "when", "cutoff": "2020-06-01T00:00:00Z", "timezone": "Asia/Tokyo"}
    early = CLEAN_ROWS + [("P6", "A", "s5", "test", 6.0, "2020-06-01T01:00:00")]
    check = _check(_audit(tmp_path, early, _with(chronology=tokyo)), "chronology")
    assert check["status"] == "fail" and check["counts"]["evaluated_before_cutoff"] == 1


def test_chronology_missing_dates_not_testable(tmp_path):
    rows = CLEAN_ROWS + [("P6", "A", "s5", "test", 6.0, None), ("P7", "A", "s6", "test", 7.0, "soon")]
    report = _audit(tmp_path, rows)
    check = _check(report, "chronology")
    assert check["status"] == "not_testable" and check["counts"]["undated_rows"] == 2
    assert report["status"] == "not_testable" and report["exit_code"] == 2


def test_compact_gaf_dates_are_read(tmp_path):
    rows = [r[:5] + (r[5].replace("-", ""),) for r in CLEAN_ROWS]
    assert _check(_audit(tmp_path, rows), "chronology")["status"] == "pass"


@pytest.mark.parametrize("reference, complete, status, reason", [
    (None, False, "not_testable", "no training reference"),
    ((), True, "not_testable", "empty"),
    ((("P1", "A"),), False, "not_testable", "not declared complete"),
    ((("P4", "A"),), False, "fail", "appear in the training reference"),
    ((("P4", "A"),), True, "fail", "appear in the training reference"),
])
def test_reference_check(tmp_path, reference, complete, status, reason):
    report = _audit(tmp_path, reference=reference, complete=complete)
    check = _check(report, "reference_overlap")
    assert check["status"] == status and reason in check["reason"]
    assert report["status"] == status
    assert report["exit_code"] == {"fail": 1, "not_testable": 2}[status]


def test_reference_with_split_column_uses_train_rows(tmp_path):
    design_path, _ = _write(tmp_path)
    ref = tmp_path / "mixed.csv"
    pd.DataFrame({"id": ["P4", "P1"], "assay": ["A", "A"], "split": ["test", "train"]}).to_csv(ref, index=False)
    report = da.audit_design_files(design_path, ref, reference_complete=True)
    assert _check(report, "reference_overlap")["status"] == "pass"
    assert report["reference"]["records"] == 1


def test_reference_id_list_for_single_column_identity(tmp_path):
    design_path, _ = _write(tmp_path, design=_with(entity_columns=["id"]))
    ids = tmp_path / "ids.txt"
    ids.write_text("P1\nP5\n")
    report = da.audit_design_files(design_path, ids, reference_complete=True)
    assert _check(report, "reference_overlap")["counts"]["by_partition"]["test"]["shared_entities"] == 1
    composite, _ = _write(tmp_path)
    with pytest.raises(TempoInputError, match="ids.txt"):
        da.audit_design_files(composite, ids, reference_complete=True)


def test_rollup_order():
    assert max(["pass", "not_testable"], key=design_spec.STATUS_RANK.__getitem__) == "not_testable"
    assert max(["not_testable", "investigate"], key=design_spec.STATUS_RANK.__getitem__) == "investigate"
    assert max(["investigate", "fail", "pass"], key=design_spec.STATUS_RANK.__getitem__) == "fail"


def test_rules_digest_tracks_rules_only(tmp_path):
    base = design_spec.parse_design(BASE_DESIGN, tmp_path / "d.yaml").rules_digest()
    reordered = dict(reversed(list(BASE_DESIGN.items())))
    assert design_spec.parse_design(reordered, tmp_path / "d.yaml").rules_digest() == base
    assert design_spec.parse_design({**BASE_DESIGN, "description": "x", "table": "other.csv"}).rules_digest() == base
    for change in ({"label_tolerance": 0.5}, {"repeated_entities": "allow"}, {"group_columns": []},
                   {"forbidden_pairs": [["train", "test"]]},
                   {"chronology": {**BASE_DESIGN["chronology"], "strictly_before": False}}):
        assert design_spec.parse_design({**BASE_DESIGN, **change}).rules_digest() != base, change
    # the digest in the report is the design's and changes with a rule
    first = _audit(tmp_path)["rules_sha256"]
    second = _audit(tmp_path, design=_with(label_tolerance=0.5))["rules_sha256"]
    assert first == base and second != first


def test_default_partitions_and_pairs():
    design = design_spec.parse_design({k: v for k, v in BASE_DESIGN.items() if k != "partitions"})
    assert design.partitions == {"train": ("train",), "validation": ("validation",), "test": ("test",)}
    assert design.forbidden_pairs == (("train", "validation"), ("train", "test"), ("validation", "test"))


@pytest.mark.parametrize("change, needle", [
    ({"entity_columns": None}, "'entity_columns': required key is missing"),
    ({"schema_version": "v0"}, "'schema_version'"),
    ({"forbiden_pairs": []}, "'forbiden_pairs': unknown key"),
    ({"forbidden_pairs": [["train", "holdout"]]}, "forbidden_pairs[0]"),
    ({"partitions": {"train": ["train"], "heldout": ["x"]}}, "partitions.heldout"),
    ({"partitions": {"train": ["a"], "test": ["a"]}}, "is also declared under"),
    ({"chronology": {"column": "when", "cutoff": "2020-13-45"}}, "chronology.cutoff"),
    ({"chronology": {"column": "when", "timezone": "Mars/Olympus"}}, "chronology.timezone"),
    ({"label_tolerance": -1}, "label_tolerance"),
    ({"conflicting_labels": "ignore"}, "conflicting_labels"),
])
def test_bad_designs_name_file_and_key(tmp_path, change, needle):
    design_path, _ = _write(tmp_path, design=_with(**change) if "forbiden_pairs" not in change
                            else {**BASE_DESIGN, **change})
    with pytest.raises(TempoInputError) as info:
        da.audit_design_files(design_path)
    assert needle in str(info.value) and str(design_path) in str(info.value)


def test_unknown_column_and_split_value_are_errors(tmp_path):
    design_path, _ = _write(tmp_path, design=_with(group_columns=["donor"]))
    with pytest.raises(TempoInputError, match=r"table\.csv: key 'group_columns': column 'donor'"):
        da.audit_design_files(design_path)
    rows = CLEAN_ROWS + [("P6", "A", "s5", "holdout", 6.0, "2020-10-01")] * 2
    design_path, _ = _write(tmp_path, rows)
    with pytest.raises(TempoInputError, match=r"unknown split value 'holdout' .* on 2 row\(s\)"):
        da.audit_design_files(design_path)


def test_duplicate_yaml_key_is_an_error(tmp_path):
    path = tmp_path / "design.yaml"
    path.write_text(yaml.safe_dump(BASE_DESIGN) + "repeated_entities: allow\n")
    with pytest.raises(TempoInputError, match="duplicate key 'repeated_entities'"):
        design_spec.load_design(path)


def test_custom_aliases(tmp_path):
    rows = [r[:3] + ({"train": "t-1", "valid": "dev", "test": "holdout"}[r[3]],) + r[4:] for r in CLEAN_ROWS]
    design = _with(partitions={"train": ["t-1", "train"], "validation": ["dev"], "test": ["holdout"]})
    report = _audit(tmp_path, rows, design)
    assert report["status"] == "pass"
    assert report["table"]["partition_rows"] == {"train": 2, "validation": 1, "test": 2}


def test_report_is_written_atomically(tmp_path):
    report = _audit(tmp_path)
    out = tmp_path / "out" / "report.json"
    da.write_audit_report(report, out)
    assert json.loads(out.read_text())["rules_sha256"] == report["rules_sha256"]
    with pytest.raises(TypeError):
        da.write_audit_report({"bad": object()}, out)
    assert json.loads(out.read_text())["status"] == "pass"
    assert [p.name for p in out.parent.iterdir()] == ["report.json"]


def test_summary_holds_counts_not_identifiers(tmp_path):
    rows = CLEAN_ROWS + [("P1", "A", "s2", "test", 9.0, "2020-01-01")]
    report = _audit(tmp_path, rows, reference=(("P3", "A"),), complete=False)
    text = da.format_audit_summary(report)
    assert report["status"] == "fail"
    for identifier in ("P1", "P3", "s1", "s2", "2020-01-01"):
        assert identifier not in text
    assert "shared_entities=1" in text


# --- a slow, loop-based reference for the vectorised counts ---------------------------------

def _loop_reference(rows, pairs, tol):
    """Plain-Python overlap, repeat and conflict counts for rows (key, role, label)."""
    by_role = {}
    for key, role, _ in rows:
        by_role.setdefault(role, []).append(key)
    repeats = {role: sum(1 for k in set(keys) if keys.count(k) > 1) for role, keys in by_role.items()}
    shared = {f"{a}|{b}": len(set(by_role.get(a, [])) & set(by_role.get(b, []))) for a, b in pairs}
    labels = {}
    for key, _, label in rows:
        labels.setdefault(key, []).append(label)
    conflicts = 0
    for values in labels.values():
        if len(values) > 1 and any(abs(x - y) > tol + 1e-12 for x, y in itertools.combinations(values, 2)):
            conflicts += 1
    return repeats, shared, conflicts


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_vectorised_counts_equal_loop_reference(tmp_path, seed):
    rng = np.random.default_rng(seed)
    n = 300
    roles = rng.choice(["train", "validation", "test"], size=n)
    ids = rng.integers(0, 60, size=n).astype(str)
    assays = rng.choice(["A", "B"], size=n)
    labels = rng.integers(0, 4, size=n) * 0.5
    table = pd.DataFrame({"id": ids, "assay": assays, "split": roles, "y": labels})
    design = design_spec.parse_design({"schema_version": design_spec.SCHEMA_VERSION, "table": None, "split_column": "split",
                              "entity_columns": ["id", "assay"], "label_column": "y",
                              "label_tolerance": 0.5})
    report = design_checks.audit_design(design, table)
    rows = list(zip(zip(ids, assays), roles, labels))
    repeats, shared, conflicts = _loop_reference(rows, design.forbidden_pairs, 0.5)
    got = _check(report, "repeated_entities")["counts"]["by_partition"]
    assert {r: got[r]["repeated_entities"] for r in got} == {r: repeats.get(r, 0) for r in got}
    got = _check(report, "partition_overlap")["counts"]["by_pair"]
    assert {p: got[p]["shared_entities"] for p in got} == shared
    assert _check(report, "conflicting_labels")["counts"]["conflicting_entities"] == conflicts
    assert sum(shared.values()) > 0 and conflicts > 0  # the random table exercises both paths


# --- Tempo windows as a design -------------------------------------------------------------

WINDOW = "2012-01-01__2014-09-29__2016-06-01__2019-01-14"


def _window_rows(extra=()):
    rows = [
        ("Q1", "GO:1", "MF", "train", None, 20130101),
        ("Q1", "GO:2", "MF", "train", None, 20140101),
        ("Q2", "GO:3", "BP", "train", None, 20140929),
        ("Q1", "GO:4", "MF", "valid", "PK", 20150101),  # train protein, new term: legitimate
        ("Q3", "GO:1", "MF", "valid", "NK", 20151231),
        ("Q2", "GO:5", "MF", "test", "LK", 20170101),
        ("Q3", "GO:6", "MF", "test", "PK", 20180101),
    ] + list(extra)
    return pd.DataFrame(rows, columns=["protein", "term", "aspect", "window_role", "mode", "date"])


def _audit_window(tmp_path, rows):
    paths = da.write_window_design(tmp_path, WINDOW, rows)
    return da.audit_design_files(paths["design"], paths["reference"], reference_complete=True)


def test_window_design_pk_target_is_legitimate(tmp_path):
    table, design = da.export_window_design(WINDOW, _window_rows())
    assert design["entity_columns"] == ["protein", "term"]
    assert design["chronology"]["cutoff"] == "2014-09-30"
    assert design["chronology"]["test_cutoff"] == "2016-06-02"
    assert set(table["date"]) >= {"2014-09-29", "2017-01-01"}
    report = _audit_window(tmp_path, _window_rows())
    assert report["status"] == "pass", [(c["name"], c["status"]) for c in report["checks"]]


@pytest.mark.parametrize("extra, check", [
    (("Q1", "GO:2", "MF", "test", "PK", 20170101), "partition_overlap"),   # a training label scored
    (("Q4", "GO:7", "MF", "valid", "NK", 20140901), "chronology"),         # dated before t-1 ends
    (("Q4", "GO:8", "MF", "test", "NK", 20160601), "chronology"),          # test dated on t0
    (("Q4", "GO:9", "MF", "valid", "NK", 20160602), "chronology"),         # validation after t0
])
def test_window_design_catches_planted_violations(tmp_path, extra, check):
    report = _audit_window(tmp_path, _window_rows([extra]))
    assert _check(report, check)["status"] == "fail"
    assert report["exit_code"] == 1


def test_window_design_rejects_bad_input():
    with pytest.raises(TempoInputError, match="window key"):
        da.export_window_design("2014-09-29__2019-01-14", _window_rows())
    bad = _window_rows()
    bad.loc[0, "window_role"] = "holdout"
    with pytest.raises(TempoInputError, match="unknown window_role 'holdout'"):
        da.export_window_design(WINDOW, bad)


def test_validation_precedes_test_without_cutoffs(tmp_path):
    order = {"column": "when", "validation_precedes_test": True}
    late_valid = CLEAN_ROWS + [("P6", "A", "s5", "valid", 6.0, "2020-12-01")]
    check = _check(_audit(tmp_path, late_valid, _with(chronology=order)), "chronology")
    assert check["status"] == "fail" and check["counts"]["test_not_after_validation"] == 2
    relaxed = {"column": "when", "validation_precedes_test": False}
    assert _check(_audit(tmp_path, late_valid, _with(chronology=relaxed)), "chronology")["status"] == "pass"


@pytest.mark.parametrize("change, needle", [
    ({"bogus": 1}, "key 'bogus': unknown key"),
    ({"label_tolerance": True}, "key 'label_tolerance': must be a finite number >= 0, got True"),
    ({"label_tolerance": float("inf")}, "key 'label_tolerance': must be a finite number"),
    ({"conflicting_labels": "maybe"}, "key 'conflicting_labels': expected 'fail' or 'warn', got 'maybe'"),
    ({"chronology": {"column": "d", "strictly_before": "yes"}}, "key 'chronology.strictly_before': must be true"),
    ({"chronology": {"column": "d", "x": 1}}, "key 'chronology.x': unknown key"),
    ({"schema_version": "v0"}, "key 'schema_version': expected 'tempo-evaluation-design/v1'"),
])
def test_declaration_shape_errors_name_the_key(change, needle):
    """The key-level shape (pydantic) reports the offending key, as the structured parsers do."""
    with pytest.raises(TempoInputError) as raised:
        design_spec.parse_design({**BASE_DESIGN, **change})
    assert needle in str(raised.value)
