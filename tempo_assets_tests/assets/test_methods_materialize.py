"""Registered methods materialised at every cutoff of a tiny archive, through Dagster and the fence.

The graph is a copy of the session's tiny build (its window scored, its latest submission made) with
nine methods registered (a ``methods.yaml`` changes the plan) and then only what they add built: the
method bundles and runs at every cutoff, and, for ``scored``, the window's benchmark and the catalog
(TEST growth and score are the build's: registering a method does not change them).
"""
import json
import socket
from pathlib import Path

import dagster as dg
import pandas as pd
import pytest

import argparse

from tempo_assets.assets.evaluation import BenchmarkResource
from tempo_assets.assets.methods import MethodFenceResource, method_records
from tempo_assets.cli import report_cmd
from tempo_assets.cli.graph_cmd import plan_steps, run_steps
from tempo_assets.core.methods.bundle import ANNOTATION_COLUMNS, FILES, verify_bundle
from tempo_assets.core.methods.eligibility import (
    EXCLUDED, NO_T_MINUS_1, UNDECLARED, method_eligibility, method_prediction_frames,
)
from tempo_assets.core.methods.registry import MethodSpec, add_method, load_registry
from tempo_assets.core.audits.removals import verify_removal_manifest
from tempo_assets.core.pipeline.workflow import OLDER
from tempo_assets.definitions import build_resources
from tempo_assets.io_managers import ArtefactStore
from tempo_assets.partitions import METHODS, parse_window_key, plan_partitions, register_partitions
from tempo_assets.resources import GridResource, open_archive
from tempo_assets_tests.conftest import GRID_BOOTSTRAP_SAMPLES, tiny_copy
from tempo_assets_tests.toolkit import SHARED, SHARED_DATA, Listener, needs_bwrap, shared
from tempo_assets_tests.unrendered import undrawn_figures

pytestmark = [pytest.mark.slow, needs_bwrap]
EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "methods"

BAD = """
import os
targets = [l[1:].split()[0] for l in open(os.environ["TEMPO_INPUT"] + "/targets.fasta") if l.startswith(">")]
with open(os.environ["TEMPO_OUTPUT"] + "/predictions.tsv", "w") as out:
    for t in targets:
        out.write(f"{t}\\tGO:0000001\\t0.5\\n{t}\\tGO:0000011\\t0.25\\n{t}\\tGO:0000021\\t0.75\\n")
    out.write(f"{targets[0]}\\tGO:0000002\\tNaN\\n{targets[0]}\\tGO:0000003\\t1.7\\nNOPE1\\tGO:0000001\\t0.5\\n")
"""
# probes from inside the fence: files it must not see (a later release's GAF, the artefact store,
# ../shared, the archive) and a real listener on the host's 127.0.0.1 it must not reach
LEAKER = """
import json, os, socket
seen = {}
for name, path in __PATHS__.items():
    seen[name + "_visible"] = os.path.exists(path)
    try:
        open(path, "rb").read(1) if os.path.isfile(path) else os.listdir(path)
        seen[name + "_read"] = True
    except OSError as exc:
        seen[name + "_read"] = type(exc).__name__
try:
    socket.create_connection(("127.0.0.1", __PORT__), timeout=2).sendall(b"leak")
    seen["tcp"] = "connected"
except OSError as exc:
    seen["tcp"] = type(exc).__name__
print("REPORT " + json.dumps(seen, sort_keys=True))
"""


def probed_paths(archive: Path, artefacts: Path) -> dict[str, str]:
    """What the leaker looks for from inside the fence; each exists on the host when it runs."""
    first = sorted(p.name for p in (archive / "releases").iterdir())[0]
    return {"later_gaf": str(sorted((archive / "releases").glob("*/goa_*"))[-1]),
            "artefact_store": str(artefacts),
            "artefact": str(artefacts / "release_annotations" / first / "artefact.json"),
            "shared": str(SHARED), "archive": str(archive)}


# what the methods add to a graph: the steps run on the tiny build's copy (its releases and cutoffs are built)
METHOD_JOBS = ("method_bundle_job", "method_job")


@pytest.fixture(scope="module")
def graph(tiny_build, tmp_path_factory):
    root = tmp_path_factory.mktemp("methods")
    copy = tiny_copy(tiny_build, root / "graph")
    archive, artefacts = copy.archive, copy.artefacts
    listener = Listener()
    paths = probed_paths(archive, artefacts)
    leaker = LEAKER.replace("__PATHS__", repr(paths)).replace("__PORT__", str(listener.port))
    methods = root / "m"
    for name, script in (("bad", BAD), ("leaker", leaker)):
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
        MethodSpec(name="freqprior", version="3", kind="command", dir=str(EXAMPLES / "freqprior"),
                   command="python3 predict.py 20", timeout_s=120, trained_until=ids[2]),
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
    instance = copy.instance
    plan = plan_partitions(open_archive(archive))
    register_partitions(instance, plan)
    # the session builds' grid, the 20 benchmark resamples this module has always used, a 1 MB output limit (flood)
    resources = build_resources(str(archive), str(artefacts), copy.env["TEMPO_WAREHOUSE_URL"],
                                copy.env["TEMPO_CACHE"], method_fence=MethodFenceResource(output_limit_mb=1),
                                grid=GridResource(bootstrap_samples=GRID_BOOTSTRAP_SAMPLES),
                                benchmark_config=BenchmarkResource(bootstrap_samples=20))
    steps = [s for s in plan_steps(plan, "all") if s[0] in METHOD_JOBS]
    with listener, socket.create_connection(("127.0.0.1", listener.port), timeout=2) as control:
        control.sendall(b"control")  # the listener is reachable from outside the fence
        control.close()
        report = run_steps(steps, instance, resources, echo=lambda *_: None)
        connections = listener.drain(at_least=1)  # the methods have exited: their connections are queued
    yield {"root": root, "archive": archive, "instance": instance, "plan": plan, "report": report,
           "store": ArtefactStore(artefacts), "steps": steps, "resources": resources,
           "connections": connections, "probed": paths, "artefacts": artefacts}
    instance.dispose()


def test_every_method_runs_at_every_cutoff(graph):
    plan, store = graph["plan"], graph["store"]
    assert [r[2] for r in graph["report"]] == ["ok"] * len(graph["report"])
    assert graph["instance"].get_dynamic_partitions(METHODS.name) == plan.methods
    assert len(plan.methods) == 9
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
    for sidecar in sorted(graph["artefacts"].glob("*/*/artefact.json")):
        meta = json.loads(sidecar.read_text())
        store.open(meta["asset"], meta["partition"]).value


def test_method_stdout_reaches_the_run_log_and_the_fence_held(graph):
    instance = graph["instance"]
    messages = [e.user_message for r in instance.get_runs() for e in instance.all_logs(r.run_id)
                if "[leaker stdout]" in (e.user_message or "")]
    reports = [json.loads(m.split("REPORT ", 1)[1]) for m in messages if "REPORT " in m]
    assert len(reports) == len(graph["plan"].cutoffs), messages  # the leaker ran at every cutoff
    for name, path in graph["probed"].items():
        assert Path(path).exists() or name == "shared"  # on the host, while the methods ran
    for report in reports:
        for name in graph["probed"]:
            assert report[f"{name}_visible"] is False and report[f"{name}_read"] == "FileNotFoundError", report
        assert report["tcp"] in ("ConnectionRefusedError", "OSError", "TimeoutError"), report
    # the listener on the host's 127.0.0.1 saw the control connection and nothing from inside the fence
    assert graph["connections"] == (1, b"control"), graph["connections"]
    shared(SHARED_DATA)  # the ../shared probe above meant something only if ../shared exists on the host


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


@pytest.fixture(scope="module")
def scored(graph):
    """The tiny archive's window benchmarked with the registered methods (its benchmark rebuilt from the build's
    stored TEST growth and score), and the catalog. What is checked is the methods' rows and statuses in
    their tables and pages, not the figures: none is drawn (``unrendered.undrawn_figures``; the figures are
    tested in ``core/test_report.py``, and with the baselines on the tiny build in test_benchmark_assets.py)."""
    plan = graph["plan"]
    with undrawn_figures():
        for window in plan.windows:
            report = run_steps(plan_steps(plan, "window", window), graph["instance"], graph["resources"],
                               echo=lambda *_: None)
            assert {r[2] for r in report} <= {"ok", "skipped"} and report[-1][2] == "ok", report
        report = run_steps([("catalog_job", None)], graph["instance"], graph["resources"], echo=lambda *_: None)
    assert report[-1][2] == "ok"
    return graph


def test_benchmark_scores_eligible_methods_beside_the_baselines(scored):
    plan, store = scored["plan"], scored["store"]
    first = plan.windows[0]
    t0 = parse_window_key(first).t0
    assert plan.as_of[t0].isoformat() < "2017-06-01"
    value = store.open("benchmark", first).value
    status = value["methods"].set_index("method")
    summary = value["summary"]
    names = set(summary["method"])
    # trained after t0: excluded with the reason, no row
    assert status.loc["freqprior@2", "status"] == "excluded" and status.loc["freqprior@2", "reason"] == EXCLUDED
    assert "method:freqprior@2" not in names and f"method:freqprior@2{OLDER}" not in names
    # failed at t0: listed with the reason, not scored
    assert status.loc["flood", "status"] == "failed" and "output exceeded" in status.loc["flood", "reason"]
    assert "method:flood" not in names
    # eligible: on exactly the recipe's and the baselines' targets, with its t-1 run beside the older baselines
    assert {"recipe", "naive", "method:freqprior@1", "method:blast", f"method:freqprior@1{OLDER}"} <= names
    targets = summary.set_index(["profile", "method", "mode", "aspect"])["n_targets"]
    for profile in ("lafa", "cafaeval"):  # both profiles score every method
        for (mode, aspect), n in targets.loc[(profile, "recipe")].items():
            assert targets.loc[(profile, "method:freqprior@1", mode, aspect)] == n \
                == targets.loc[(profile, "naive", mode, aspect)]
    rows = summary[summary["method"] == "method:freqprior@1"]
    assert set(rows["note"]) == {UNDECLARED} and rows["fmax_oracle_low"].notna().any()
    paired = value["paired"]
    assert len(paired[(paired["a"] == "recipe") & (paired["b"] == "method:freqprior@1")]) == len(rows)
    assert len(paired[(paired["a"] == "method:freqprior@1") & (paired["b"] == f"method:freqprior@1{OLDER}")])
    # trained until t0 (version 3) and produced at t0 (late, precomputed): scored, but no run at t-1
    # may fix a VALID threshold, so the headline is missing and the rows say why
    for name in ("method:freqprior@3", "method:late"):
        marked = summary[summary["method"] == name]
        assert len(marked) == len(rows) and marked["note"].str.contains(NO_T_MINUS_1).all()
        assert marked["valid_tau"].isna().all() and marked["f_at_valid_tau"].isna().all()
        assert f"{name}{OLDER}" not in names
    assert status.loc["freqprior@3", "reason"] == "" and status.loc["late", "status"] == "eligible"
    # the catalog: every method's status on every window
    catalog = store.open("benchmark_catalog", None).value["methods"].set_index(["window", "method"])
    assert catalog.loc[(first, "freqprior@2"), "status"] == "excluded"
    assert catalog.loc[(first, "freqprior@2"), "reason"] == EXCLUDED
    assert catalog.loc[(first, "freqprior@1"), "reason"] == UNDECLARED
    assert catalog.loc[(first, "flood"), "status"] == "failed"
    assert len(catalog) == len(plan.windows) * len(plan.methods)
    html = (store.folder("benchmark_catalog", None) / "report.html").read_text(encoding="utf-8")
    assert "registered methods" in html and "method:freqprior@3" in html and EXCLUDED in html


def test_report_tsv_shows_methods_and_versions_side_by_side_with_cis(scored, monkeypatch, capsys):
    import io

    monkeypatch.setenv("TEMPO_ARCHIVE", str(scored["archive"]))
    monkeypatch.setenv("TEMPO_ARTEFACTS", str(scored["artefacts"]))
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    parser = argparse.ArgumentParser()
    report_cmd.register(parser.add_subparsers())
    args = parser.parse_args(["report", "--format", "tsv"])
    assert args.func(args) == 0
    table = pd.read_csv(io.StringIO(capsys.readouterr().out), sep="\t", keep_default_na=True)
    first = scored["plan"].windows[0]
    cell = table[(table["window"] == first) & (table["mode"] == "NK") & (table["aspect"] == "BP")]
    order = list(cell["method"])
    # versions side by side (each trained-at-t0 row followed only by its own t-1 row)
    assert order.index("method:freqprior@1{0}".format(OLDER)) == order.index("method:freqprior@1") + 1
    assert order.index("method:freqprior@3") == order.index("method:freqprior@1") + 2
    assert {"naive", "blast", "recipe"} <= set(order)
    methods = table[table["method"].str.startswith("method:") & ~table["method"].str.endswith(OLDER)]
    assert {"method:freqprior@1", "method:freqprior@3", "method:blast"} <= set(methods["method"])
    # every cell a method predicted in has its bootstrap interval (a cell it left empty has none)
    predicted = methods[methods["predicted_pairs"] > 0]
    assert len(predicted) and predicted["fmax_oracle_low"].notna().all(), \
        methods.loc[methods["fmax_oracle_low"].isna(), ["method", "mode", "aspect", "predicted_pairs"]]
    assert predicted["fmax_oracle_high"].notna().all()
    assert (predicted["fmax_oracle_low"] <= predicted["fmax_oracle_high"]).all()
    args = parser.parse_args(["report", "--format", "md"])
    assert args.func(args) == 0
    text = capsys.readouterr().out
    assert "Registered methods" in text and EXCLUDED in text and "method:freqprior@1" in text
