"""predictions.tsv validation: every bad row counted with its reason, a mostly invalid file rejected."""
import pytest

from tempo_assets.core.methods.output import RejectedPredictions, validate_predictions
from tempo_assets.core.inputs.ontology import parse_obo
from tempo_assets.core.audits.removals import RemovalLog
from tempo_assets_tests.core.obo_fixtures import small_terms, write_obo

TARGETS = {"P1", "P2", "P3"}


@pytest.fixture()
def ontology(tmp_path):
    return parse_obo(write_obo(tmp_path / "go.obo", small_terms()))


def write(tmp_path, text):
    path = tmp_path / "predictions.tsv"
    path.write_text(text, encoding="utf-8")
    return path


def test_each_bad_row_is_counted_with_its_reason(tmp_path, ontology):
    rows = ["AUTHOR me", "MODEL 1", "KEYWORDS naive.",
            "P1\tGO:0000001\t0.50", "P1\tGO:0000003\t0.40", "P1 GO:0000010 0.30", "P2\tGO:0000020\t1.00",
            "P2\tGO:0000021\t0.9", "P3\tGO:0000022\t0.8", "P3\tGO:0000002\t0.7", "P2\tGO:0000011\t0.6",
            "P1\tGO:0000002\tNaN", "P1\tGO:0000004\t1.7", "P1\tGO:0000004\t0", "P1\tGO:0000004\tabc",
            "Q9\tGO:0000004\t0.5", "P1\tGO:0000005\t0.5", "P1\tGO:9999999\t0.5",
            "P1\tGO:0000044\t0.6", "P1\tGO:0000004\t0.2",  # alt_id then its primary: one pair, max kept
            "P1\tGO:0000001", "END"]
    check = validate_predictions(write(tmp_path, "\n".join(rows) + "\n"), TARGETS, ontology)
    c = check.counts
    assert (c["score_nan"], c["score_out_of_range"], c["score_not_a_number"]) == (1, 2, 1)
    assert (c["unknown_target"], c["obsolete_term"], c["unknown_term"]) == (1, 1, 1)
    assert (c["alt_id_remapped"], c["duplicate_lower_score"], c["malformed_line"]) == (1, 1, 1)
    assert check.rows == 18 and check.dropped == 9
    kept = check.predictions.set_index(["protein", "term"])
    assert kept.loc[("P1", "GO:0000004"), "score"] == 0.6 and kept.loc[("P1", "GO:0000004"), "aspect"] == "BP"
    assert len(check.predictions) == 9 and check.predictions["score"].between(0, 1, inclusive="right").all()
    assert not kept.index.duplicated().any()
    log = RemovalLog()
    check.log_into(log)
    assert log.counts()["score_nan"] == 1 and log.counts()["unknown_target"] == 1
    assert set(log.frame()["record_id"]) >= {"P1|GO:0000002", "Q9|GO:0000004", "line 21"}


def test_mostly_invalid_file_is_rejected_with_counts(tmp_path, ontology):
    text = "P1\tGO:0000001\t1.7\nP1\tGO:0000002\tnan\nQ9\tGO:0000001\t0.5\nP1\tGO:0000003\t0.5\n"
    with pytest.raises(RejectedPredictions, match=r"3 of 4 rows invalid.*score_nan=1.*score_out_of_range=1"):
        validate_predictions(write(tmp_path, text), TARGETS, ontology)


@pytest.mark.parametrize("text", ["", "AUTHOR x\nMODEL 1\nEND\n", "\n\n"])
def test_empty_file_is_rejected(tmp_path, ontology, text):
    with pytest.raises(RejectedPredictions, match="no prediction rows"):
        validate_predictions(write(tmp_path, text), TARGETS, ontology)


def test_missing_file_is_rejected(tmp_path, ontology):
    with pytest.raises(RejectedPredictions, match="wrote no predictions.tsv"):
        validate_predictions(tmp_path / "predictions.tsv", TARGETS, ontology)
