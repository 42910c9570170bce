"""Registered methods materialised at every cutoff of a tiny archive, through Dagster and the fence."""
import json
from pathlib import Path

import dagster as dg
import pandas as pd
import pytest

from tempo_assets.assets.methods import MethodFenceResource, method_records
from tempo_assets.cli.graph_cmd import plan_steps, run_steps
from tempo_assets.core.method_bundle import ANNOTATION_COLUMNS, FILES, verify_bundle
from tempo_assets.core.method_eligibility import EXCLUDED, UNDECLARED, method_eligibility, method_prediction_frames
from tempo_assets.core.method_registry import MethodSpec, add_method, load_registry
from tempo_assets.core.removals import verify_removal_manifest
from tempo_assets.definitions import build_resources
from tempo_assets.io_managers import ArtefactStore
from tempo_assets.partitions import METHODS, parse_window_key, plan_partitions, register_partitions
from tempo_assets.resources import open_archive
from tempo_assets_tests.assets.tiny_archive import build_tiny_archive

pytestmark = pytest.mark.slow
EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "methods"

BAD = """
import os
targets = [l[1:].split()[0] for l in open(os.environ["TEMPO_INPUT"] + "/targets.fasta") if l.startswith(">")]
with open(os.environ["TEMPO_OUTPUT"] + "/predictions.tsv", "w") as out:
    for t in targets:
        out.write(f"{t}\\tGO:0000001\\t0.5\\n{t}\\tGO:0000011\\t0.25\\n{t}\\tGO:0000021\\t0.75\\n")
    out.write(f"{targets[0]}\\tGO:0000002\\tNaN\\n{targets[0]}\\tGO:0000003\\t1.7\\nNOPE1\\tGO:0000001\\t0.5\\n")
"""
LEAKER = """
import os, socket
print("REPORT gaf_visible=%s" % os.path.exists(__GAF__))
try:
    socket.create_connection(("127.0.0.1", 9), timeout=2)
    print("REPORT tcp=connected")
except OSError as exc:
    print("REPORT tcp=" + type(exc).__name__)
"""


@pytest.fixture(scope="module")
def graph(tmp_path_factory):
    root = tmp_path_factory.mktemp("methods")
    archive = build_tiny_archive(root)
    later_gaf = sorted((archive / "releases").glob("*/goa_*"))[-1]
    methods = root / "m"
    for name, script in (("bad", BAD), ("leaker", LEAKER.replace("__GAF__", repr(str(later_gaf))))):
        (methods / name).mkdir(parents=True)
        (methods / name / "run.py").write_text(script, encoding="utf-8")
    preds = root / "preds"
    preds.mkdir()
    ids = [m.id for m in open_archive(archive).releases()]
    for cutoff in ids[1:]:
        (preds / f"{cutoff}.tsv").write_text("P00001\tGO:0000001\t0.9\nP00002\tGO:0000011\t0.8\n")
    specs = [
        MethodSpec(name="freqprior", version="1", kind="command", dir=str(EXAMPLES / "freqprior"),
                   command="python3 predict.py 5", timeout_s=120),
        MethodSpec(name="freqprior", version="2", kind="command", dir=str(EXAMPLES / "freqprior"),
                   command="python3 predict.py 10", timeout_s=120, trained_until="2017-06-01"),
        MethodSpec(name="blast", kind="command", dir=str(EXAMPLES / "blast_transfer"), command="python3 predict.py",
                   timeout_s=300),
        MethodSpec(name="bad", kind="command", dir=str(methods / "bad"), command="python3 run.py", timeout_s=60),
        MethodSpec(name="leaker", kind="command", dir=str(methods / "leaker"), command="python3 run.py", timeout_s=60),
        MethodSpec(name="flood", kind="command", dir=str(methods / "bad"),
                   command="head -c 20000000 /dev/zero > $TEMPO_OUTPUT/predictions.tsv", timeout_s=60),
        MethodSpec(name="empty", kind="command", dir=str(methods / "bad"),
                   command="printf 'AUTHOR x\\nEND\\n' > $TEMPO_OUTPUT/predictions.tsv", timeout_s=60),
        MethodSpec(name="late", kind="precomputed", predictions=str(preds), produced_at=ids[2]),
    ]
    for spec in specs:
        add_method(archive, spec)
    instance = dg.DagsterInstance.ephemeral()
    plan = plan_partitions(open_archive(archive))
    register_partitions(instance, plan)
    resources = build_resources(str(archive), str(root / "art"), "sqlite:///" + str(root / "wh.sqlite"),
                                str(root / "cache"), method_fence=MethodFenceResource(output_limit_mb=1))
    steps = [s for s in plan_steps(plan, "all") if s[0] in ("release_job", "cutoff_job", "method_bundle_job",
                                                           "method_job")]
    report = run_steps(steps, instance, resources, echo=lambda *_: None)
    return {"root": root, "archive": archive, "instance": instance, "plan": plan, "report": report,
            "store": ArtefactStore(root / "art"), "steps": steps}


def test_every_method_runs_at_every_cutoff(graph):
    plan, store = graph["plan"], graph["store"]
    assert [r[2] for r in graph["report"]] == ["ok"] * len(graph["report"])
    assert graph["instance"].get_dynamic_partitions(METHODS.name) == plan.methods
    assert len(plan.methods) == 8
    method_steps = [k for j, k in graph["steps"] if j == "method_job"]
    assert sorted(method_steps) == sorted(f"{c}|{m}" for c in plan.cutoffs for m in plan.methods)
    for key in method_steps:
        meta = store.read_meta("method_predictions", key)
        assert meta["max_source_date"] <= meta["cutoff"] == plan.as_of[key.split("|")[0]].isoformat()
        assert meta["status"] in ("ok", "failed") and any("method_bundle[" in s.get("artefact", "")
                                                          for s in meta["sources"])
        assert verify_removal_manifest(store.folder("method_predictions", key), meta) == []


def test_blocking_checks_passed_on_every_method_partition(graph):
    found = {}
    for record in graph["instance"].get_run_records():
        for entry in graph["instance"].all_logs(record.dagster_run.run_id,
                                                of_type=dg.DagsterEventType.ASSET_CHECK_EVALUATION):
            data = entry.dagster_event.event_specific_data
            found[(data.check_name, str(data.partition))] = data.passed
    plan = graph["plan"]
    for cutoff in plan.cutoffs:
        assert found[("method_bundle__within_cutoff", cutoff)] is True
        for method in plan.methods:
            assert found[("method_predictions__within_cutoff", f"{cutoff}|{method}")] is True


def test_the_bundle_holds_the_documented_files_as_of_its_cutoff(graph):
    plan, store = graph["plan"], graph["store"]
    for cutoff in plan.cutoffs:
        bundle = store.open("method_bundle", cutoff)
        folder = verify_bundle(store.folder("method_bundle", cutoff) / bundle.value["folder"], bundle.value)
        assert sorted(p.name for p in folder.iterdir()) == sorted(FILES + ("manifest.json",))
        assert (folder / "cutoff.txt").read_text() == plan.as_of[cutoff].isoformat() + "\n"
        assert bundle.meta["max_source_date"] <= bundle.meta["cutoff"]
        annotations = pd.read_csv(folder / "annotations.tsv", sep="\t")
        assert list(annotations.columns) == ANNOTATION_COLUMNS and len(annotations)
        assert set(annotations["evidence"]) <= {"IDA"}
        assert pd.read_csv(folder / "nonexp_annotations.tsv", sep="\t")["evidence"].eq("IEA").all()
        stored = store.open("release_annotations", cutoff).value["experimental_cleaned"]
        assert len(annotations) == len(stored[ANNOTATION_COLUMNS].drop_duplicates())
        assert bundle.meta["targets"] == 60


def test_examples_succeed_and_bad_rows_are_counted(graph):
    store, cutoff = graph["store"], graph["plan"].cutoffs[-1]
    for method in ("freqprior@1", "freqprior@2", "blast"):
        value = store.open("method_predictions", f"{cutoff}|{method}").value
        assert value["status"] == "ok", value["reason"]
        assert len(value["predictions"]) and value["predictions"]["score"].between(0, 1, inclusive="right").all()
    assert store.open("method_predictions", f"{cutoff}|freqprior@1").value["predictions"].groupby(
        ["protein", "aspect"]).size().max() <= 5
    bad = store.read_meta("method_predictions", f"{cutoff}|bad")
    assert bad["status"] == "ok"
    assert (bad["removed_score_nan"], bad["removed_score_out_of_range"], bad["removed_unknown_target"]) == (1, 1, 1)
    assert bad["predictions"] == 3 * 60


def test_failures_are_recorded_with_their_reason(graph):
    store, plan = graph["store"], graph["plan"]
    for cutoff in plan.cutoffs:
        flood = store.read_meta("method_predictions", f"{cutoff}|flood")
        assert flood["status"] == "failed" and "output exceeded" in flood["reason"]
        empty = store.read_meta("method_predictions", f"{cutoff}|empty")
        assert empty["status"] == "failed" and "no prediction rows" in empty["reason"]
        leak = store.read_meta("method_predictions", f"{cutoff}|leaker")
        assert leak["status"] == "failed" and "no predictions.tsv" in leak["reason"]
    late = {c: store.read_meta("method_predictions", f"{c}|late") for c in plan.cutoffs}
    assert late[plan.cutoffs[0]]["status"] == "failed" and late[plan.cutoffs[0]]["reason"].startswith("refused")
    assert [late[c]["status"] for c in plan.cutoffs[1:]] == ["ok", "ok"]
    # nothing a failed method did corrupted any stored artefact
    for sidecar in sorted(graph["root"].joinpath("art").glob("*/*/artefact.json")):
        meta = json.loads(sidecar.read_text())
        store.open(meta["asset"], meta["partition"]).value


def test_method_stdout_reaches_the_run_log_and_the_fence_held(graph):
    instance = graph["instance"]
    messages = [e.user_message for r in instance.get_runs() for e in instance.all_logs(r.run_id)
                if "[leaker stdout]" in (e.user_message or "")]
    assert any("REPORT gaf_visible=False" in m for m in messages)
    assert any("REPORT tcp=ConnectionRefusedError" in m for m in messages)
    assert not any("gaf_visible=True" in m or "tcp=connected" in m for m in messages)


def test_eligibility_over_stored_records(graph):
    plan, store = graph["plan"], graph["store"]
    window = parse_window_key(plan.windows[0])
    records = method_records(store, [window.t_minus_1, window.t0], plan.methods)
    assert len(records) == 2 * len(plan.methods)
    registry = load_registry(graph["archive"])
    table = method_eligibility(registry.methods, records, window, plan.as_of).set_index("method")
    assert table.loc["freqprior@1", "reason"] == UNDECLARED and table.loc["freqprior@1", "valid_tau_available"]
    assert plan.as_of[window.t0].isoformat() < "2017-06-01"
    assert table.loc["freqprior@2", "status"] == "excluded" and table.loc["freqprior@2", "reason"] == EXCLUDED
    assert table.loc["flood", "status"] == "failed" and "output exceeded" in table.loc["flood", "reason"]
    frames = method_prediction_frames(table.reset_index(), records)
    assert "flood" not in frames and "freqprior@2" not in frames and list(frames["blast"]["t0"].columns) == ["protein", "term", "aspect", "score"]
    assert frames["freqprior@1"]["t-1"] is not None
