"""``tempo audit-cutoffs`` and the golden-rule check over the materialised tiny archive; planted violations
are each caught.

The tiny archive is materialised once per test run (``conftest.tiny_build``); this module works on a
copy of it, and each planting test on a copy of that copy's ``DAGSTER_HOME`` (or of the whole graph) so
the plants do not leak into one another.
"""
from __future__ import annotations

import dataclasses
import json
import shutil

import dagster as dg
import pandas as pd
import pytest

from tempo_assets.cli import main as cli_main
from tempo_assets.core.audits.leakage import audit_golden_rule, feature_inputs_from_labels, sample_proteins
from tempo_assets.core.labels.ia import ia_counts
from tempo_assets_tests.conftest import tiny_copy

MODULE = "tempo_assets.cli.audit_graph_cmd"


@pytest.fixture(autouse=True)
def registered(monkeypatch):
    if MODULE not in cli_main.COMMAND_MODULES:
        monkeypatch.setattr(cli_main, "COMMAND_MODULES", cli_main.COMMAND_MODULES + (MODULE,))


@pytest.fixture(scope="module")
def tiny_graph(tiny_build, tmp_path_factory):
    graph = tiny_copy(tiny_build, tmp_path_factory.mktemp("tiny_cutoffs") / "graph")
    assert [r[2] for r in graph.report] == ["ok"] * len(graph.report), graph.report
    yield graph
    graph.instance.dispose()


def audit(home, archive, out, monkeypatch, capsys):
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    code = cli_main.main(["audit-cutoffs", "--archive", str(archive), "--out", str(out)])
    return code, capsys.readouterr().out, json.loads(out.read_text())


def test_materialised_graph_passes(tiny_graph, tmp_path, monkeypatch, capsys):
    code, printed, report = audit(tiny_graph.home, tiny_graph.archive, tmp_path / "r.json", monkeypatch, capsys)
    assert code == 0, printed
    assert report["status"] == "pass" and report["violations"] == []
    rows = {r["asset"]: r for r in report["assets"]}
    cutoffs = {key for job, key, *_ in tiny_graph.report if job == "cutoff_job"}
    assert rows["test_score"]["materialisations"] == 1 and rows["frozen_recipe"]["partitions"] == 1
    assert rows["knn_corpus"]["partitions"] == len(cutoffs) > 0
    assert "PASS" in printed and "test_score" in printed


@pytest.fixture()
def planted(tiny_graph, tmp_path):
    """A copy of the materialised instance to plant fake materialisations into."""
    home = tmp_path / "home"
    shutil.copytree(tiny_graph.home, home)
    from dagster._core.instance.ref import InstanceRef

    instance = dg.DagsterInstance.from_ref(InstanceRef.from_dir(str(home)))
    yield home, instance
    instance.dispose()


def plant(instance, asset, partition, **metadata):
    instance.report_runless_asset_event(dg.AssetMaterialization(
        asset_key=asset, partition=partition,
        metadata={k: (dg.MetadataValue.json(v) if isinstance(v, (list, dict)) else v) for k, v in metadata.items()}))


def window_parts(graph):
    window = graph.plan.windows[0]
    t_2, t_1, t0, t1 = window.split("__")
    return window, {r: graph.plan.as_of[r].isoformat() for r in (t_2, t_1, t0, t1)}, (t_2, t_1, t0, t1)


def test_an_artefact_past_its_cutoff_is_caught(tiny_graph, planted, tmp_path, monkeypatch, capsys):
    home, instance = planted
    cutoff = tiny_graph.plan.cutoffs[0]
    day = tiny_graph.plan.as_of[cutoff].isoformat()
    plant(instance, "knn_corpus", cutoff, cutoff=day, max_source_date="2099-01-01",
          sources=[{"path": "future.gaf", "date": "2099-01-01"}])
    code, printed, report = audit(home, tiny_graph.archive, tmp_path / "r.json", monkeypatch, capsys)
    assert code == 1
    messages = [v["message"] for v in report["violations"]]
    assert all(v["asset"] == "knn_corpus" for v in report["violations"])
    assert any(f"max_source_date 2099-01-01 is after its cutoff {day}" in m for m in messages)
    assert any("future.gaf dated 2099-01-01" in m for m in messages)
    assert "FAIL" in printed


@pytest.mark.parametrize("how", ["no recipe", "other hash"])
def test_a_test_score_without_its_frozen_recipe_is_caught(tiny_graph, planted, tmp_path, monkeypatch, capsys, how):
    home, instance = planted
    window, day, _ = window_parts(tiny_graph)
    t1 = window.split("__")[3]
    if how == "no recipe":  # a window that never froze a recipe
        other = window.replace(window.split("__")[0], "2014-06-01")
        target, wanted = other, "no frozen_recipe[" + other + "] was materialised before it"
    else:
        target, wanted = window, "but the earlier frozen_recipe[" + window + "] materialisation(s) froze"
    plant(instance, "test_score", target, cutoff=day[t1], max_source_date=day[t1], window=target,
          window_role="test", recipe_hash="0" * 64, sources=[])
    code, printed, report = audit(home, tiny_graph.archive, tmp_path / "r.json", monkeypatch, capsys)
    assert code == 1
    found = [v for v in report["violations"] if v["rule"] == "frozen_recipe"]
    assert len(found) == 1 and wanted in found[0]["message"], report["violations"]


def test_a_window_artefact_reading_t1_is_caught(tiny_graph, planted, tmp_path, monkeypatch, capsys):
    home, instance = planted
    window, day, (_, _, t0, t1) = window_parts(tiny_graph)
    plant(instance, "valid_selection", window, cutoff=day[t0], max_source_date=day[t0], window=window,
          window_role="valid", sources=[{"artefact": f"release_annotations[{t1}]", "sha256": "x"}])
    code, printed, report = audit(home, tiny_graph.archive, tmp_path / "r.json", monkeypatch, capsys)
    assert code == 1
    [finding] = report["violations"]
    assert finding["rule"] == "stage_table" and finding["asset"] == "valid_selection"
    assert f"release_annotations[{t1}] of release {t1} is after t0 ({t0})" in finding["message"]


def test_stored_labels_pass_the_golden_rule_with_loo_ia(tiny_graph):
    """The stored reranker_labels inputs with IA as leave-one-out counts pass; a fixed series is caught."""
    store = tiny_graph.store()
    cutoff = tiny_graph.plan.cutoffs[-1]
    artefact = store.open("reranker_labels", cutoff)
    ontology = store.open("ontology", artefact.meta["candidate_release"]).value
    value = {f.name: getattr(artefact.value, f.name) for f in dataclasses.fields(artefact.value)}
    value["ia"] = ia_counts(value["corpus_annotations"], ontology)
    inputs = feature_inputs_from_labels(value, ontology)
    proteins = sample_proteins(inputs, 20, seed=0)
    assert proteins, "the tiny archive has targets holding labels in the candidate corpus"
    assert audit_golden_rule(inputs, proteins).passed
    value["ia"] = value["ia"].series()
    fixed = audit_golden_rule(feature_inputs_from_labels(value, ontology), proteins)
    # a fixed series estimated with the audited proteins' own labels moves without them: caught
    assert set(fixed.differing) == {"ia"} and fixed.differing["ia"], fixed.differing
    assert fixed.not_audited == []


@pytest.fixture()
def labels_graph(tiny_build, tmp_path):
    """A copy of the tiny graph to rematerialise reranker_labels in."""
    graph = tiny_copy(tiny_build, tmp_path / "graph")
    yield graph
    graph.instance.dispose()


def golden_rule_evaluation(graph, cutoff: str):
    """``reranker_labels[cutoff]`` materialised in Dagster with every check on it; the golden-rule evaluation."""
    from tempo_assets.audit_checks import AUDIT_CHECKS
    from tempo_assets.checks import CHECKS
    from tempo_assets.definitions import ASSETS

    result = dg.materialize(ASSETS + CHECKS + AUDIT_CHECKS, selection=["reranker_labels"], partition_key=cutoff,
                            instance=graph.instance, resources=graph.resources, raise_on_error=False)
    evaluations = [e for e in result.get_asset_check_evaluations() if e.check_name == "reranker_labels__golden_rule"]
    assert len(evaluations) == 1, result.get_asset_check_evaluations()
    return evaluations[0]


def test_golden_rule_check_runs_in_dagster_and_agrees_with_the_audit(labels_graph):
    from tempo_assets.audit_checks import golden_rule_report

    cutoff = labels_graph.plan.cutoffs[-1]
    # reranker_labels is rematerialised (same inputs, same value) with every check on it
    evaluation = golden_rule_evaluation(labels_graph, cutoff)
    expected = golden_rule_report(labels_graph.store(), cutoff)
    assert evaluation.passed and expected.passed and not expected.not_audited
    assert evaluation.metadata["proteins_audited"].value == len(expected.proteins) > 0
    assert evaluation.metadata["leaking_features"].value == expected.leaking_features() == {}


def test_a_leaky_feature_fails_the_golden_rule_check_in_dagster(labels_graph, monkeypatch):
    """Plant: the corpus prior counted with the scored protein's own labels (no leave-one-out)."""
    from tempo_assets.core.recipe import candidates
    honest = candidates._per_candidate

    def leaky(out, neighbours, corpus, weights, k, **codes):
        out = honest(out, neighbours, corpus, weights, k, **codes)
        term_n = corpus.groupby(["aspect", "term"]).size()
        aspect_n = corpus[["protein", "aspect"]].drop_duplicates().groupby("aspect").size()
        numer = term_n.reindex(pd.MultiIndex.from_frame(out[["aspect", "term"]])).fillna(0).to_numpy()
        out["corpus_prior"] = numer / out["aspect"].map(aspect_n).fillna(1).to_numpy()
        return out

    monkeypatch.setattr(candidates, "_per_candidate", leaky)
    evaluation = golden_rule_evaluation(labels_graph, labels_graph.plan.cutoffs[-1])
    assert not evaluation.passed
    leaking = evaluation.metadata["leaking_features"].value
    assert set(leaking) == {"corpus_prior"} and leaking["corpus_prior"] > 0, leaking


def test_a_leaky_stored_reranker_labels_fails_the_check_and_blocks_what_reads_it(labels_graph, monkeypatch):
    """Plant: reranker_labels stores its IA as one series estimated on the whole corpus (the targets' own
    labels included) instead of leave-one-out counts; the check reads the stored artefact."""
    from tempo_assets.assets import labels
    from tempo_assets.cli.graph_cmd import run_steps
    from tempo_assets.core.labels.ia import IaCounts

    honest = labels.labelled_candidates

    def leaky(*args, **kwargs):
        source = honest(*args, **kwargs)
        return dataclasses.replace(source, ia=source.ia.series())

    monkeypatch.setattr(labels, "labelled_candidates", leaky)
    window = labels_graph.plan.windows[0]
    cutoff = window.split("__")[1]  # t-1: the TRAIN labels VALID selection fits the rerankers on
    evaluation = golden_rule_evaluation(labels_graph, cutoff)
    stored = labels_graph.store().open("reranker_labels", cutoff).value
    assert not isinstance(stored.ia, IaCounts)  # the leak is in the stored artefact the check read
    assert not evaluation.passed
    leaking = evaluation.metadata["leaking_features"].value
    assert set(leaking) == {"ia"} and leaking["ia"] > 0, leaking
    # tempo materialize builds nothing on it: the window's VALID selection, stale now, is blocked
    monkeypatch.undo()
    lines = []
    report = run_steps([("window_job", window)], labels_graph.instance, labels_graph.resources, echo=lines.append)
    assert [r[2] for r in report] == ["blocked"], lines
    assert f"reranker_labels__golden_rule failed on reranker_labels[{cutoff}]" in lines[0], lines
