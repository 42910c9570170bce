"""Removal log and manifests: each collector against a loop reference, files round-trip and verify."""
import gzip
import json
import re

import numpy as np
import pandas as pd
import pytest

from tempo_assets.core.labels.annotations import clean_annotations
from tempo_assets.core.base.errors import TempoInputError
from tempo_assets.core.labels.growth import annotation_growth
from tempo_assets.core.base.io import sha256_file
from tempo_assets.core.inputs.ontology import parse_obo
from tempo_assets.core.audits.removals import (
    MANIFEST_NAME, RemovalLog, audit_removal_manifests, gaf_rows_after_cutoff, log_evaluation, log_gaf_rows,
    log_growth, log_proteins, log_submission, log_term_cleaning, read_removal_manifest, submission_removals,
    verify_removal_manifest,
)
from tempo_assets.core.methods.submission import write_cafa_submission
from tempo_assets_tests.core.obo_fixtures import small_terms, write_obo


@pytest.fixture
def ontology(tmp_path):
    return parse_obo(write_obo(tmp_path / "small.obo", small_terms()))


def manifest_dict(log):
    return {(r.record_id, r.kind, r.reason): r.count for r in log.frame().itertuples()}


def test_log_collapses_duplicates_and_reports_declared_zeros():
    log = RemovalLog(reasons=["after_cutoff"])
    frame = pd.DataFrame({"protein": ["B", "A", "B"], "term": ["GO:1", "GO:2", "GO:1"]})
    assert log.add_frame(frame, ["protein", "term"], "pair", "obsolete_term") == 3
    log.add(["X"], "protein", "no_embedding", 4)
    assert manifest_dict(log) == {("A|GO:2", "pair", "obsolete_term"): 1, ("B|GO:1", "pair", "obsolete_term"): 2,
                                  ("X", "protein", "no_embedding"): 4}
    assert log.counts() == {"after_cutoff": 0, "obsolete_term": 3, "no_embedding": 4}
    meta = log.metadata(sha256="abc")
    assert meta["removed_after_cutoff"] == 0 and meta["removed_obsolete_term"] == 3 and meta["removed_total"] == 7
    assert meta["removals"] == {"pair": {"obsolete_term": 3}, "protein": {"no_embedding": 4}}
    assert meta["removals_sha256"] == "abc" and meta["removals_file"] == MANIFEST_NAME


@pytest.mark.parametrize("reason", ["Bad Reason", "1x", ""])
def test_reason_must_be_a_metadata_key(reason):
    with pytest.raises(TempoInputError, match="snake_case"):
        RemovalLog().add(["a"], "protein", reason)


def test_counts_must_be_positive_and_aligned():
    with pytest.raises(TempoInputError, match=">= 1"):
        RemovalLog().add(["a"], "protein", "x", 0)
    with pytest.raises(TempoInputError, match="2 ids"):
        RemovalLog().add(["a", "b"], "protein", ["x"])


def test_write_round_trips_and_is_byte_identical(tmp_path):
    log = RemovalLog()
    log.add(["P2|GO:1", "P1|GO:1"], "pair", "unknown_term", [1, 3])
    other = RemovalLog()
    other.add(["P1|GO:1"], "pair", "unknown_term", 3)  # same content, other insertion order
    other.add(["P2|GO:1"], "pair", "unknown_term", 1)
    sha = log.write(tmp_path / "a" / MANIFEST_NAME)
    assert other.write(tmp_path / "b" / MANIFEST_NAME) == sha == sha256_file(tmp_path / "a" / MANIFEST_NAME)
    back = read_removal_manifest(tmp_path / "a" / MANIFEST_NAME)
    pd.testing.assert_frame_equal(back, log.frame())
    with gzip.open(tmp_path / "a" / MANIFEST_NAME, "rt") as handle:
        assert handle.readline() == "record_id\tkind\treason\tcount\n"


def test_empty_log_writes_a_header_only_manifest(tmp_path):
    log = RemovalLog(reasons=["no_embedding"])
    log.write(tmp_path / MANIFEST_NAME)
    assert read_removal_manifest(tmp_path / MANIFEST_NAME).empty
    assert verify_removal_manifest(tmp_path, log.metadata()) == []


@pytest.mark.parametrize("separator", ["\t", "\n", "\r"])
def test_a_failed_write_leaves_the_previous_manifest(tmp_path, separator):
    good = RemovalLog()
    good.add(["P1"], "protein", "no_embedding")
    sha = good.write(tmp_path / MANIFEST_NAME)
    bad = RemovalLog()
    bad.add(["P0", f"P{separator}1", "P2"], "protein", "no_embedding")
    with pytest.raises(TempoInputError, match=f"record id {re.escape(repr('P' + separator + '1'))} contains a tab or newline"):
        bad.write(tmp_path / MANIFEST_NAME)
    assert sha256_file(tmp_path / MANIFEST_NAME) == sha


@pytest.mark.parametrize("body,line", [("id\tkind\n", 1), ("record_id\tkind\treason\tcount\na\tb\tc\tx\n", 2),
                                       ("record_id\tkind\treason\tcount\na\tb\tc\t1\na\tb\n", 3)])
def test_read_names_file_and_line(tmp_path, body, line):
    path = tmp_path / MANIFEST_NAME
    with gzip.open(path, "wt") as handle:
        handle.write(body)
    with pytest.raises(TempoInputError) as info:
        read_removal_manifest(path)
    assert info.value.line == line and MANIFEST_NAME in str(info.value)


def test_verify_catches_count_sha_and_missing_file(tmp_path):
    log = RemovalLog(reasons=["after_cutoff"])
    log.add(["P1|GO:1|IDA|20200101"], "gaf_row", "not_qualifier", 2)
    meta = log.metadata(sha256=log.write(tmp_path / MANIFEST_NAME))
    assert verify_removal_manifest(tmp_path, meta) == []
    wrong = {**meta, "removed_not_qualifier": 1}
    assert any("removed_not_qualifier=1" in p for p in verify_removal_manifest(tmp_path, wrong))
    assert any("removed_total" in p for p in verify_removal_manifest(tmp_path, {**meta, "removed_total": 5}))
    missing_key = {k: v for k, v in meta.items() if k != "removed_not_qualifier"}
    assert any("no removed_not_qualifier" in p for p in verify_removal_manifest(tmp_path, missing_key))
    other = RemovalLog()
    other.add(["P9"], "protein", "not_qualifier", 2)
    other.write(tmp_path / MANIFEST_NAME)  # same counts, other content
    assert any("sha256" in p for p in verify_removal_manifest(tmp_path, meta))
    (tmp_path / MANIFEST_NAME).unlink()
    assert any("missing" in p for p in verify_removal_manifest(tmp_path, meta))


def test_audit_walks_a_store_and_requires_manifests(tmp_path):
    for asset, partition, with_manifest in (("embeddings", "r1", True), ("embeddings", "r2", False),
                                            ("ontology", "r1", False)):
        folder = tmp_path / asset / partition
        folder.mkdir(parents=True)
        meta = {"asset": asset}
        if with_manifest:
            log = RemovalLog()
            log.add(["P1"], "protein", "not_in_precomputed_file")
            meta.update(log.metadata(sha256=log.write(folder / MANIFEST_NAME)))
        (folder / "artefact.json").write_text(json.dumps(meta))
    assert audit_removal_manifests(tmp_path) == []
    found = audit_removal_manifests(tmp_path, required_assets=["embeddings"])
    assert [(f["asset"], f["partition"]) for f in found] == [("embeddings", "r2")]


def gaf_frame(rows):
    return pd.DataFrame(rows, columns=["protein", "term", "evidence", "qualifier", "date"])


def test_gaf_rows_log_not_rows_like_a_loop():
    frame = gaf_frame([("P1", "GO:1", "IDA", "NOT|enables", 20150101), ("P1", "GO:1", "IDA", "enables", 20150101),
                       ("P2", "GO:2", "IEA", "NOT", 20150102), ("P2", "GO:2", "IEA", "NOT", 20150102),
                       ("P3", "GO:3", "IDA", "KNOTTED", 20150103)])
    late = gaf_frame([("P4", "GO:4", "IDA", "", 20990101)])
    log = RemovalLog()
    log_gaf_rows(log, late, frame)
    expected: dict = {}
    for row in frame.itertuples():
        if "NOT" in row.qualifier.split("|"):
            key = (f"{row.protein}|{row.term}|{row.evidence}|{row.date}", "gaf_row", "not_qualifier")
            expected[key] = expected.get(key, 0) + 1
    expected[("P4|GO:4|IDA|20990101", "gaf_row", "after_cutoff")] = 1
    assert manifest_dict(log) == expected


def test_term_cleaning_matches_the_report_and_a_loop(ontology):
    rows = pd.DataFrame({
        "protein": ["P1", "P1", "P2", "P2", "P3", "P3", "P4"],
        "term": ["GO:0000044", "GO:0000005", "GO:0000005", "GO:0000005", "GO:9999999", "GO:0000001", "GO:0000044"],
        "aspect": ["BP"] * 7})
    _, report = clean_annotations(rows, ontology)
    log = RemovalLog()
    log_term_cleaning(log, rows, report, ontology, kind="experimental_annotation")
    counts = log.counts()
    assert counts["obsolete_term"] == report["obsolete_dropped"]
    assert counts["unknown_term"] == report["unknown_dropped"]
    assert counts["alt_id_remapped"] == report["alt_mapped"]
    assert counts["no_namespace_term"] == 0
    expected: dict = {}
    for protein, term in zip(rows["protein"], rows["term"]):
        if term in ontology.terms and ontology.terms[term].is_obsolete:
            reason = "obsolete_term"
        elif term in ontology.alt_ids:
            reason = "alt_id_remapped"
        elif term not in ontology.terms:
            reason = "unknown_term"
        else:
            continue
        key = (f"{protein}|{term}", "experimental_annotation", reason)
        expected[key] = expected.get(key, 0) + 1
    assert manifest_dict(log) == expected


def test_growth_removed_targets_are_logged():
    old = pd.DataFrame({"protein": ["A", "B"], "term": ["GO:1", "GO:1"], "aspect": ["BP", "BP"]})
    new = pd.DataFrame({"protein": ["A", "B", "C", "A"], "term": ["GO:1", "GO:1", "GO:2", "GO:3"],
                        "aspect": ["BP", "BP", "MF", "BP"]})
    growth = annotation_growth(old, new, sequences={"A": "MK", "B": "MK"}, new_sequences={"A": "MKV"})
    log = RemovalLog()
    log_growth(log, growth)
    assert manifest_dict(log) == {("A|BP|PK", "target", "sequence_changed"): 1,
                                  ("C|MF|NK", "target", "no_sequence_at_a"): 1}


def reference_submission(predictions, max_terms):
    """Loop reference of the CAFA writer's rules (dedupe to the max, zero, per-aspect truncation)."""
    best: dict = {}
    dropped = []
    for protein, term, aspect, score in predictions.itertuples(index=False):
        cents = int(np.floor(round(score * 100, 9) + 0.5))
        key = (protein, term)
        if key in best:
            if cents > best[key][1]:
                dropped.append((protein, term, "duplicate_lower_score"))
                best[key] = (aspect, cents)
            else:
                dropped.append((protein, term, "duplicate_lower_score"))
        else:
            best[key] = (aspect, cents)
    groups: dict = {}
    for (protein, term), (aspect, cents) in best.items():
        if cents == 0:
            dropped.append((protein, term, "score_rounds_to_zero"))
        else:
            groups.setdefault((protein, aspect), []).append((-cents, term))
    for (protein, _), items in groups.items():
        for _, term in sorted(items)[max_terms:]:
            dropped.append((protein, term, "beyond_max_terms"))
    return sorted(dropped)


def random_predictions(seed, n=400):
    rng = np.random.default_rng(seed)
    scores = np.round(rng.random(n) * rng.choice([0.02, 1.0], n), 4)
    return pd.DataFrame({"protein": rng.choice(["T1", "T2", "T3"], n),
                         "term": [f"GO:{t:07d}" for t in rng.integers(0, 60, n)],
                         "aspect": rng.choice(["BP", "MF"], n), "score": scores})


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_submission_removals_match_a_loop_and_the_writer(tmp_path, seed):
    predictions = random_predictions(seed)
    predictions["aspect"] = predictions["term"].map(lambda t: "BP" if int(t[3:]) % 2 else "MF")
    got = submission_removals(predictions, max_terms_per_aspect=5)
    assert sorted(got.itertuples(index=False, name=None)) == reference_submission(predictions, 5)
    stats = write_cafa_submission(predictions, tmp_path / "s.tsv", max_terms_per_aspect=5)
    log = RemovalLog()
    log_submission(log, predictions, max_terms_per_aspect=5)
    counts = log.counts()
    assert counts["score_rounds_to_zero"] == stats["dropped_zero"] > 0
    assert counts["beyond_max_terms"] == stats["truncated"] > 0
    assert counts["duplicate_lower_score"] == stats["duplicates"]


def test_evaluation_removals_match_a_loop():
    old = pd.DataFrame({"protein": ["A", "A", "B"], "term": ["GO:1", "GO:2", "GO:5"], "aspect": ["BP", "BP", "MF"]})
    new = pd.DataFrame({"protein": ["A", "A", "A", "B", "C"], "term": ["GO:1", "GO:2", "GO:3", "GO:5", "GO:7"],
                        "aspect": ["BP", "BP", "BP", "MF", "CC"]})
    growth = annotation_growth(old, new)
    methods = {
        "knn": pd.DataFrame({"protein": ["A", "A", "A", "B", "B", "C", "D"],
                             "term": ["GO:1", "GO:3", "GO:9", "GO:5", "GO:6", "GO:7", "GO:1"],
                             "aspect": ["BP", "BP", "MF", "MF", "MF", "CC", "BP"], "score": 0.5}),
        "naive": pd.DataFrame({"protein": ["A"], "term": ["GO:2"], "aspect": ["BP"], "score": 0.1}),
    }
    log = RemovalLog()
    log_evaluation(log, growth, methods)
    targets = set(zip(growth.targets["protein"], growth.targets["aspect"]))
    known = set(zip(growth.known["protein"], growth.known["term"], growth.known["aspect"]))
    expected: dict = {}
    for method, frame in methods.items():
        for protein, term, aspect in zip(frame["protein"], frame["term"], frame["aspect"]):
            if (protein, aspect) not in targets:
                key = (f"{method}|{protein}|{aspect}", "prediction", "not_a_target")
                expected[key] = expected.get(key, 0) + 1
            if (protein, term, aspect) in known:
                expected[(f"{method}|{protein}|{term}", "prediction", "pk_known_term_predicted")] = 1
    for protein, term, aspect in zip(growth.ground_truth["protein"], growth.ground_truth["term"],
                                     growth.ground_truth["aspect"]):
        if (protein, term, aspect) in known:
            expected[(f"{protein}|{term}|{aspect}", "ground_truth", "pk_known_term_in_truth")] = 1
    assert manifest_dict(log) == expected
    assert expected[("knn|A|MF", "prediction", "not_a_target")] == 1  # planted: A is a BP target only
    assert ("knn|A|GO:1", "prediction", "pk_known_term_predicted") in expected


def test_log_proteins_is_sorted_and_distinct():
    log = RemovalLog()
    log_proteins(log, ["P2", "P1", "P2"], "no_embedding")
    assert list(log.frame()["record_id"]) == ["P1", "P2"]


def test_rows_after_the_cutoff_are_read_back_from_the_dropping_file(tmp_path):
    from tempo_assets.core.inputs.cutoff_reader import CutoffReader
    from tempo_assets_tests.assets.tiny_archive import RELEASES, build_tiny_archive

    archive = build_tiny_archive(tmp_path, n_releases=1, n_proteins=8)
    release = archive / "releases" / RELEASES[0]
    gaf = next(release.glob("*.gaf"))
    with open(gaf, "a", encoding="utf-8") as handle:
        handle.write("\t".join(["UniProtKB", "P00007", "P00007", "", "GO:0000003", "PMID:1", "IDA", "", "P", "",
                                "", "protein", "taxon:9606", "20150301", "UniProt", "", ""]) + "\n")
    manifest = json.loads((release / "release.json").read_text())
    for entry in manifest["files"]:
        if entry["kind"] == "gaf":
            entry["sha256"] = sha256_file(gaf)
    (release / "release.json").write_text(json.dumps(manifest))
    reader = CutoffReader(archive, RELEASES[0])
    frame, dropped = reader.gaf_frame(RELEASES[0])
    late = gaf_rows_after_cutoff(reader, RELEASES[0])
    assert dropped == 1 and list(zip(late["protein"], late["date"])) == [("P00007", 20150301)]
    assert gaf_rows_after_cutoff(CutoffReader(archive, RELEASES[0]), RELEASES[0]).empty  # nothing read yet
