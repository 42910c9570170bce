"""``tempo audit-features``: rebuilt from an archive or read from the artefact store; leaks named."""
from __future__ import annotations

import json

import pytest

from tempo_assets.cli import main as cli_main
from tempo_assets.core.labels.ia import ia_counts
from tempo_assets.io_managers import ArtefactStore
from tempo_assets_tests.assets.tiny_archive import RELEASES, build_tiny_archive
from tempo_assets_tests.core.test_audits import ontology_world

LEAKY_HOOK = "tempo_assets_tests.core.test_audits:own_label_count"
MODULE = "tempo_assets.cli.audit_graph_cmd"


@pytest.fixture(autouse=True)
def registered(monkeypatch):
    """The dispatcher with this module registered (whether or not main.py lists it yet)."""
    if MODULE not in cli_main.COMMAND_MODULES:
        monkeypatch.setattr(cli_main, "COMMAND_MODULES", cli_main.COMMAND_MODULES + (MODULE,))


def main(argv):
    return cli_main.main(argv)


@pytest.fixture(scope="module")
def tiny_archive(tmp_path_factory):
    return build_tiny_archive(tmp_path_factory.mktemp("tiny_features"), n_releases=2)


def test_archive_mode_passes_and_writes_a_report(tiny_archive, tmp_path, capsys):
    out = tmp_path / "report.json"
    code = main(["audit-features", "--archive", str(tiny_archive), "--release", RELEASES[1],
                 "--sample", "8", "--seed", "3", "--k", "5", "--out", str(out)])
    printed = capsys.readouterr().out
    assert code == 0, printed
    report = json.loads(out.read_text())
    assert report["status"] == "pass" and report["proteins_audited"] == 8
    assert report["candidate_release"] == RELEASES[0]
    assert "ia" in report["features"] and report["leaking_features"] == {}


def test_archive_mode_catches_a_leaky_hooked_feature(tiny_archive, tmp_path, capsys):
    out = tmp_path / "report.json"
    code = main(["audit-features", "--archive", str(tiny_archive), "--release", RELEASES[1],
                 "--sample", "8", "--k", "5", "--extra-features", LEAKY_HOOK, "--out", str(out)])
    printed = capsys.readouterr().out
    report = json.loads(out.read_text())
    assert code == 1 and report["status"] == "fail"
    assert set(report["leaking_features"]) == {"own_count"}
    count = report["leaking_features"]["own_count"]
    assert 0 < count <= 8
    assert f"LEAK own_count: differs for {count} of 8 protein(s)" in printed


def store_labels(tmp_path, ia_kind: str):
    """A reranker_labels artefact (and the ontology it was built with) in a fresh store."""
    ontology, corpus, neighbours, in_corpus = ontology_world(tmp_path, 11)
    counts = ia_counts(corpus, ontology)
    ia = counts if ia_kind == "counts" else counts.series()
    store = ArtefactStore(tmp_path / "artefacts")
    binding = {"cutoff": "2016-01-15", "max_source_date": "2016-01-15", "sources": [],
               "candidate_release": "2015-01-15"}
    store.write("reranker_labels", "2016-01-15",
                {"neighbours": neighbours, "corpus_annotations": corpus, "ground_truth": None,
                 "known": None, "ia": ia, "term_depth": None}, binding)
    if ia_kind == "series":  # its provenance can be re-established from the stored ontology
        store.write("ontology", "2015-01-15", ontology, {**binding, "cutoff": "2015-01-15",
                                                         "max_source_date": "2015-01-15"})
    return store, in_corpus


@pytest.mark.parametrize("ia_kind,code,line", [
    ("counts", 0, "PASS"),
    ("series", 1, "LEAK ia: differs for"),
    ("bare", 1, "NOT AUDITED ia"),
])
def test_store_mode_audits_the_stored_ia(tmp_path, capsys, ia_kind, code, line):
    store, in_corpus = store_labels(tmp_path, ia_kind)
    got = main(["audit-features", "--cutoff", "2016-01-15", "--artefacts", str(store.root),
                "--sample", "20"])
    printed = capsys.readouterr().out
    assert got == code, printed
    assert line in printed
    assert f"{len(in_corpus)} target(s) audited" in printed


def test_bad_invocations_exit_2(tmp_path, capsys):
    assert main(["audit-features", "--release", RELEASES[1]]) == 2
    assert main(["audit-features", "--cutoff", "2016-01-15", "--artefacts", str(tmp_path)]) == 2
    assert main(["audit-features", "--cutoff", "x", "--extra-features", "no_colon"]) == 2
    assert "--release needs --archive" in capsys.readouterr().err
