from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from tempo_assets.core.labels.annotations import (
    EXPERIMENTAL_CODES,
    clean_annotations,
    experimental_annotations,
    non_experimental_annotations,
    propagate_annotations,
    split_by_evidence,
)
from tempo_assets.core.base.errors import TempoInputError
from tempo_assets.core.inputs.ontology import parse_obo
from tempo_assets_tests.core.obo_fixtures import random_terms, small_terms, write_obo

PROTOCOL_CODES = "EXP IDA IPI IMP IGI IEP TAS IC HTP HDA HMP HGI HEP".split()


@pytest.fixture
def ontology(tmp_path):
    return parse_obo(write_obo(tmp_path / "small.obo", small_terms()))


def gaf_rows(rows):
    columns = ["protein", "qualifier", "term", "evidence", "aspect"]
    return pd.DataFrame(rows, columns=columns)


def reference_propagation(frame, ontology):
    """Loop-based closure: every seed's ``ancestors`` in its own namespace."""
    out = set()
    for protein, term in zip(frame["protein"], frame["term"]):
        for ancestor in ontology.ancestors(term):
            out.add((protein, ancestor, ontology.aspect(ancestor)))
    return out


def test_experimental_codes_are_the_protocol_list():
    assert EXPERIMENTAL_CODES == frozenset(PROTOCOL_CODES)


@pytest.mark.parametrize("code", PROTOCOL_CODES)
def test_each_experimental_code_is_kept_as_experimental(code):
    exp, non = split_by_evidence(gaf_rows([("P1", "", "GO:0000001", code, "BP")]))
    assert len(exp) == 1 and len(non) == 0


@pytest.mark.parametrize("code", ["IEA", "ISS", "IBA", "ND", "NAS", "RCA"])
def test_other_codes_are_non_experimental(code):
    exp, non = split_by_evidence(gaf_rows([("P1", "", "GO:0000001", code, "BP")]))
    assert len(exp) == 0 and len(non) == 1


def test_not_rows_are_excluded_from_both_and_counted():
    frame = gaf_rows([
        ("P1", "NOT", "GO:0000001", "IDA", "BP"),
        ("P1", "NOT|enables", "GO:0000010", "IEA", "MF"),
        ("P2", "contributes_to", "GO:0000010", "IMP", "MF"),
        ("P3", None, "GO:0000020", "IEA", "CC"),
        ("P4", "colocalizes_with", "GO:0000020", "IDA", "CC"),
    ])
    exp, non = split_by_evidence(frame)
    assert sorted(exp["protein"]) == ["P2", "P4"]
    assert list(non["protein"]) == ["P3"]
    assert exp.attrs["evidence_split"] == {
        "rows_in": 5, "not_dropped": 2, "experimental": 2, "non_experimental": 1}


def test_split_names_the_missing_column():
    with pytest.raises(TempoInputError, match="evidence"):
        split_by_evidence(pd.DataFrame({"protein": ["P1"], "term": ["GO:0000001"]}))


def test_clean_maps_alt_ids_drops_obsolete_and_unknown(ontology):
    frame = gaf_rows([
        ("P1", "", "GO:0000044", "IDA", "BP"),   # alt_id of GO:0000004
        ("P1", "", "GO:0000005", "IDA", "BP"),   # obsolete
        ("P2", "", "GO:0000005", "IDA", "BP"),   # obsolete
        ("P2", "", "GO:9999999", "IDA", "BP"),   # unknown
        ("P3", "", "GO:0000011", "IDA", "BP"),   # MF term, GAF says BP
        ("P3", "", "GO:0000020", "IDA", "CC"),
    ])
    cleaned, report = clean_annotations(frame, ontology)
    assert list(zip(cleaned["protein"], cleaned["term"], cleaned["aspect"])) == [
        ("P1", "GO:0000004", "BP"), ("P3", "GO:0000011", "MF"), ("P3", "GO:0000020", "CC")]
    assert "evidence" in cleaned.columns
    counts = {k: v for k, v in report.items() if k != "dropped"}
    assert counts == {"rows_in": 6, "alt_mapped": 1, "obsolete_dropped": 2, "unknown_dropped": 1,
                      "no_namespace_dropped": 0, "aspect_mismatch": 1, "rows_out": 3}
    assert list(report["dropped"].itertuples(index=False, name=None)) == [
        ("P1", "GO:0000005", "obsolete"), ("P2", "GO:0000005", "obsolete"),
        ("P2", "GO:9999999", "unknown")]


def test_propagation_matches_loop_reference(tmp_path):
    rng = np.random.default_rng(7)
    ontology = parse_obo(write_obo(tmp_path / "random.obo", random_terms(rng)))
    live = sorted(t for t in ontology.terms if ontology.resolve(t) == t)
    frame = pd.DataFrame({"protein": [f"P{i}" for i in rng.integers(0, 15, 60)],
                          "term": rng.choice(live, 60)})
    propagated = propagate_annotations(frame, ontology)
    assert list(propagated.columns) == ["protein", "term", "aspect"]
    assert not propagated.duplicated().any()
    assert set(propagated.itertuples(index=False, name=None)) == reference_propagation(
        frame, ontology)
    shuffled = propagate_annotations(frame.sample(frac=1.0, random_state=1), ontology)
    pd.testing.assert_frame_equal(shuffled, propagated)


def test_propagation_stays_inside_the_namespace(ontology):
    # GO:0000012 (MF) has a part_of edge to a BP term: it must not reach BP
    out = propagate_annotations(pd.DataFrame({"protein": ["P1"], "term": ["GO:0000012"]}),
                                ontology)
    assert set(out["term"]) == {"GO:0000012", "GO:0000010", "GO:0003674"}
    assert set(out["aspect"]) == {"MF"}


def test_experimental_and_non_experimental_sets(ontology):
    frame = gaf_rows([
        ("P1", "", "GO:0000044", "IDA", "BP"),
        ("P1", "NOT", "GO:0000011", "IDA", "MF"),
        ("P2", "", "GO:0000022", "IEA", "CC"),
        ("P2", "", "GO:0000005", "ISS", "BP"),
    ])
    exp, report = experimental_annotations(frame, ontology)
    assert set(zip(exp["protein"], exp["term"])) == {
        ("P1", t) for t in ["GO:0000004", "GO:0000003", "GO:0000001", "GO:0000002",
                            "GO:0008150"]}
    assert report["not_dropped"] == 1 and report["alt_mapped"] == 1
    assert report["proteins"] == 1 and report["proteins_BP"] == 1 and report["proteins_MF"] == 0
    non, non_report = non_experimental_annotations(frame, ontology)
    assert set(non["protein"]) == {"P2"}
    assert set(non["aspect"]) == {"CC"}
    assert non_report["obsolete_dropped"] == 1
