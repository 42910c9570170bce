"""The benchmark asset, the catalog and ``tempo report`` on the tiny archive (diamond runs for real)."""
import argparse
import re

import dagster as dg
import pandas as pd
import pytest

from tempo_assets.core.pipeline.window_benchmark import BASELINES
from tempo_assets.core.pipeline.workflow import OLDER
from tempo_assets.core.recipe.selection import recipe_profile
from tempo_assets.cli import report_cmd
from tempo_assets.definitions import ASSET_CHECKS, ASSETS, defs
from tempo_assets.core.inputs.releases import open_archive
from tempo_assets.graph_state import DefinedGraph, GraphState, build_catalog
from tempo_assets.partitions import parse_window_key
from tempo_assets_tests.conftest import tiny_copy
from tempo_assets_tests.toolkit import needs_chromium


DEFINED = DefinedGraph.of(defs.get_repository_def())


@pytest.fixture(scope="module")
def tiny(tiny_build, tmp_path_factory):
    """The tiny archive's one window materialised through test_score and benchmark (the session's tiny graph)."""
    graph = tiny_copy(tiny_build, tmp_path_factory.mktemp("tiny_benchmark") / "graph")
    assert [r[2] for r in graph.report] == ["ok"] * len(graph.report), graph.report
    yield {"root": graph.root, "artefacts": graph.artefacts, "archive": graph.archive, "instance": graph.instance,
           "plan": graph.plan, "resources": graph.resources, "window": graph.plan.windows[0], "store": graph.store()}
    graph.instance.dispose()


def test_benchmark_depends_on_test_score_and_reads_test_only_after_it():
    graph = defs.resolve_asset_graph()
    parents = {k.to_user_string() for k in graph.get(dg.AssetKey("benchmark")).parent_keys}
    assert "test_score" in parents and "frozen_recipe" in parents
    children = {k.to_user_string() for k in graph.get(dg.AssetKey("benchmark")).child_keys}
    assert children == {"benchmark_catalog"}


def test_every_method_scored_on_the_same_targets(tiny):
    store, window = tiny["store"], tiny["window"]
    meta = store.read_meta("benchmark", window)
    assert meta["window_role"] == "test" and meta["max_source_date"] <= meta["cutoff"]
    assert meta["cutoff"] == tiny["plan"].as_of[parse_window_key(window).t1].isoformat()
    # TEST growth is read once (test_growth) and shared: benchmark and test_score score the same cells
    assert f"test_growth[{window}]" in {s.get("artefact") for s in meta["sources"]}
    value = store.open("benchmark", window).value
    # test_score's conventions: the profile the recipe was selected under
    profile = recipe_profile(store.open("frozen_recipe", window).value["recipe"])
    summary = value["summary"][value["summary"]["profile"] == profile]
    scored = store.open("test_score", window).value.summary
    key = ["method", "mode", "aspect"]
    mine = summary[summary["method"] == "recipe"].set_index(key)[["truth_sha256", "fmax_oracle", "wfmax", "valid_tau", "f_at_valid_tau"]]
    theirs = scored[scored["method"] == "recipe"].set_index(key)[["truth_sha256", "fmax_oracle", "wfmax", "valid_tau", "f_at_valid_tau"]]
    pd.testing.assert_frame_equal(mine.sort_index(), theirs.sort_index())
    expected = {"recipe", *BASELINES} | {f"{m}{OLDER}" for m in ("recipe", *BASELINES)}
    assert set(summary["method"]) == expected
    per_cell = summary.groupby(["mode", "aspect"])[["n_targets", "truth_pairs"]].nunique()
    assert (per_cell == 1).all().all(), "methods scored on different targets"
    assert set(summary["mode"]) <= {"NK", "LK", "PK"} and summary["fmax_oracle_low"].notna().any()
    # BLAST ran (diamond, no mock) and found the family members the tiny archive plants
    assert summary[summary["method"] == "blast"]["fmax_oracle"].max() > 0
    assert summary[summary["method"] == "recipe"]["f_at_valid_tau"].notna().all()
    paired = value["paired"][value["paired"]["profile"] == profile]
    assert {("recipe", b) for b in BASELINES} <= set(zip(paired["a"], paired["b"]))
    assert set(value["decay"]["method"]) == {"recipe", *BASELINES}


def test_curves_are_images_in_the_ui_and_in_the_html_report(tiny):
    store, window = tiny["store"], tiny["window"]
    records = tiny["instance"].fetch_observations(
        dg.AssetRecordsFilter(asset_key=dg.AssetKey("benchmark"), asset_partitions=[window]), limit=1).records
    metadata = records[0].asset_observation.metadata
    images = [k for k in metadata if k.startswith("curves_")]
    assert images and all(metadata[k].value.count("data:image/png;base64,") >= 2 for k in images)
    # ... and not in the sidecar, which records the time binding
    assert (store.folder("benchmark", window) / "artefact.json").stat().st_size < 200_000
    html = (store.folder("benchmark", window) / "report.html").read_text(encoding="utf-8")
    assert html.count("<img") >= 2 and "data:image/png;base64," in html


def test_catalog_ready_then_stale_when_an_input_changes(tiny):
    store, window = tiny["store"], tiny["window"]
    built = build_catalog(store, str(tiny["archive"]), DEFINED, tiny["instance"])
    assert built["catalog"].set_index("window").loc[window, "status"] == "ready"
    result = dg.materialize(ASSETS, selection=["benchmark_catalog"], instance=tiny["instance"],
                            resources=tiny["resources"])
    metadata = result.asset_materializations_for_node("benchmark_catalog")[0].metadata
    assert "data:image/png;base64," in metadata["longitudinal"].value
    assert (store.folder("benchmark_catalog", None) / "report.html").exists()
    # an upstream artefact rewritten with other content: the benchmark no longer reflects it
    t0 = parse_window_key(window).t0
    meta = store.read_meta("ia_weights", t0)
    frame = store.open("ia_weights", t0).value
    store.write("ia_weights", t0, frame.assign(ia=frame["ia"] + 1.0), meta)
    catalog = build_catalog(store, str(tiny["archive"]), DEFINED, tiny["instance"])["catalog"].set_index("window")
    assert catalog.loc[window, "status"] == "stale" and f"ia_weights[{t0}]" in catalog.loc[window, "reasons"]
    store.write("ia_weights", t0, frame, meta)  # restored content: same sha256, ready again
    assert build_catalog(store, str(tiny["archive"]), DEFINED)["catalog"]["status"].tolist() == ["ready"]


def test_catalog_job_runs_only_when_the_catalog_would_change(tiny):
    """``tempo materialize --all`` skips ``catalog_job`` while the stored catalog holds what it would write,
    and runs it once a window's state changes, though no benchmark was rebuilt (the catalog's own inputs
    are unchanged: only what it says of them moved)."""
    store, window = tiny["store"], tiny["window"]

    def todo() -> list[str]:
        graph = GraphState(store, tiny["plan"], DEFINED, archive=open_archive(tiny["archive"]),
                           instance=tiny["instance"])
        return graph.step("catalog_job", None).todo

    assert store.exists("benchmark_catalog", None) and todo() == []
    t0 = parse_window_key(window).t0
    meta = store.read_meta("ia_weights", t0)
    frame = store.open("ia_weights", t0).value
    store.write("ia_weights", t0, frame.assign(ia=frame["ia"] + 1.0), meta)  # the benchmark is stale now
    try:
        assert todo() == ["benchmark_catalog"]
    finally:
        store.write("ia_weights", t0, frame, meta)
    assert todo() == []


def run_report(monkeypatch, tiny, *argv):
    monkeypatch.setenv("TEMPO_ARCHIVE", str(tiny["archive"]))
    monkeypatch.setenv("TEMPO_ARTEFACTS", str(tiny["artefacts"]))
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    parser = argparse.ArgumentParser()
    report_cmd.register(parser.add_subparsers())
    args = parser.parse_args(["report", *argv])
    return args.func(args)


def test_tempo_report_formats(tiny, monkeypatch, capsys, tmp_path):
    window = tiny["window"]
    summary = tiny["store"].open("benchmark", window).value["summary"]
    assert run_report(monkeypatch, tiny, "--format", "tsv") == 0
    lines = capsys.readouterr().out.strip().split("\n")
    header = lines[0].split("\t")
    assert header[:5] == ["window", "profile", "mode", "aspect", "method"] and "derived" in header
    assert len(lines) == len(summary) + 1
    tsv = pd.read_csv(__import__("io").StringIO("\n".join(lines)), sep="\t")
    # every method under both profiles, with the headline and its protein- and cluster-level CIs
    assert set(tsv["profile"]) == {"lafa", "cafaeval"}
    pairs = set(zip(tsv["profile"], tsv["method"]))
    assert pairs == {(p, m) for p in ("lafa", "cafaeval") for m in set(tsv["method"])}
    # (a cell without VALID targets has no VALID threshold, hence no headline)
    newest = tsv[~tsv["method"].str.endswith(OLDER) & tsv["valid_tau"].notna()]
    assert set(newest["profile"]) == {"lafa", "cafaeval"}
    for column in ("f_at_valid_tau", "f_at_valid_tau_low", "f_at_valid_tau_high", "f_at_valid_tau_cluster_low",
                   "f_at_valid_tau_cluster_high", "fmax_oracle_cluster_low", "f_micro_w_at_valid_tau"):
        assert newest[column].notna().all(), column
    assert run_report(monkeypatch, tiny, "--format", "tsv", "--by", "identity") == 0
    by = pd.read_csv(__import__("io").StringIO(capsys.readouterr().out), sep="\t", keep_default_na=False)
    strata = by[by["identity_stratum"] != "all"]
    assert set(strata["identity_stratum"]) <= {"<30", "30-60", "60-90", ">=90"} and len(strata)
    assert (by["identity_stratum"] == "all").sum() == len(summary)
    # per (profile, method, cell) the strata's targets add up to the cell's
    cells = strata.groupby(["profile", "method", "mode", "aspect"])["n_targets"].sum()
    whole = by[by["identity_stratum"] == "all"].set_index(["profile", "method", "mode", "aspect"])["n_targets"]
    assert (cells == whole.loc[cells.index].astype(int)).all()
    assert run_report(monkeypatch, tiny, "--window", window, "--format", "md") == 0
    text = capsys.readouterr().out
    assert "| recipe |" in text and "Paired bootstrap" in text
    # the gate's verdict heads the page, then the title
    assert text.startswith("> **Quality gate") and "\n# Tempo benchmark report: window" in text
    assert text.index("# Tempo benchmark report") < text.index("Profile `lafa`") < text.index("Profile `cafaeval`")
    nan = re.search(r"\bnan\b", text, flags=re.IGNORECASE)
    assert "**Legend**" in text and not nan, text[max(0, nan.start() - 300):nan.end() + 100]
    assert "p_value" in text and "| 0 |" not in text.split("## Decay")[1].split("##")[0]
    assert run_report(monkeypatch, tiny, "--format", "md") == 0
    assert "| ready " in capsys.readouterr().out
    out = tmp_path / "archive.html"
    assert run_report(monkeypatch, tiny, "--format", "html", "--out", str(out)) == 0
    assert out.read_text(encoding="utf-8").count("data:image/png;base64,") >= 1
    assert capsys.readouterr().out.strip() == f"wrote {out}"
    page = tmp_path / "window.html"
    assert run_report(monkeypatch, tiny, "--window", window, "--format", "html", "--out", str(page)) == 0
    assert page.read_text(encoding="utf-8").count("<img") >= 2 and OLDER not in capsys.readouterr().out
    assert run_report(monkeypatch, tiny, "--compare", window, window, "--format", "tsv") == 0
    compared = pd.read_csv(__import__("io").StringIO(capsys.readouterr().out), sep="\t")
    assert len(compared) == len(summary) and (compared["fmax_oracle_delta"] == 0).all()
    with pytest.raises(Exception, match="unknown window"):
        run_report(monkeypatch, tiny, "--window", "nope__a__b__c")


def test_derived_release_marks_every_number(tiny, monkeypatch, capsys):
    # the tiny archive has no derived release: mark t1 derived and the report says so
    import json

    t1 = parse_window_key(tiny["window"]).t1
    manifest = tiny["archive"] / "releases" / t1 / "release.json"
    original = manifest.read_text(encoding="utf-8")
    try:
        manifest.write_text(json.dumps({**json.loads(original), "derived": True}), encoding="utf-8")
        assert run_report(monkeypatch, tiny, "--format", "md") == 0
        text = capsys.readouterr().out
        rows = [line for line in text.splitlines() if re.match(rf"\| {tiny['window']} \| (NK|LK|PK) \|", line)]
        assert rows and all(line.rstrip().endswith("| yes |") for line in rows)
        # the caveat once, not in every cell
        assert text.count("Derived releases:") == 1
    finally:
        manifest.write_text(original, encoding="utf-8")


def test_both_profiles_side_by_side(tiny):
    """Every method under lafa and cafaeval; the recipe's lafa row is test_score's; clusters recorded."""
    value = tiny["store"].open("benchmark", tiny["window"]).value
    summary = value["summary"]
    assert value["profiles"] == ["lafa", "cafaeval"]
    for frame in ("summary", "paired", "decay", "valid_taus", "curves", "strata"):
        assert set(value[frame]["profile"]) == {"lafa", "cafaeval"}, frame
    methods = {"recipe", *BASELINES} | {f"{m}{OLDER}" for m in ("recipe", *BASELINES)}
    for profile in ("lafa", "cafaeval"):
        assert set(summary[summary["profile"] == profile]["method"]) == methods
    newest = summary[~summary["method"].str.endswith(OLDER) & summary["valid_tau"].notna()]
    assert set(newest["profile"]) == {"lafa", "cafaeval"}
    for column in ("f_at_valid_tau_low", "f_at_valid_tau_cluster_low", "fmax_oracle_cluster_high",
                   "f_micro_w_at_valid_tau"):
        assert newest[column].notna().all(), column
    assert (newest["f_at_valid_tau_cluster_low"] <= newest["f_at_valid_tau"] + 1e-12).all()
    # the recipe was selected under lafa: its lafa thresholds are the frozen ones; under cafaeval the
    # rule every method follows fixes them on VALID under cafaeval's conventions
    taus = value["valid_taus"]
    cafa_recipe = taus[(taus["profile"] == "cafaeval") & (taus["method"] == "recipe")]
    assert cafa_recipe["source"].str.startswith(f"valid_evaluation_set[{tiny['window']}]").all()
    assert cafa_recipe["source"].str.endswith("scored under cafaeval").all()
    lafa_recipe = taus[(taus["profile"] == "lafa") & (taus["method"] == "recipe")].dropna(subset=["valid_tau"])
    assert set(lafa_recipe["source"]) == {"frozen_recipe tau_by_mode (VALID selection)"}
    info = value["homology"]
    assert info["min_identity"] == 30.0 and info["n_clusters"] == value["clusters"]["cluster"].nunique()
    meta = tiny["store"].read_meta("benchmark", tiny["window"])
    assert meta["n_clusters"] == info["n_clusters"] and "profiles" in meta
    identity = value["identity"]
    assert set(identity["identity_stratum"]) <= {"<30", "30-60", "60-90", ">=90"}
    assert len(identity) == len(value["identity"].drop_duplicates(["protein", "aspect", "mode"]))


@needs_chromium
def test_window_report_renders_its_images_in_chromium(tiny, tmp_path):
    from tempo_assets_tests.test_report_browser import CHECK_SCRIPT, run_chromium

    html = (tiny["store"].folder("benchmark", tiny["window"]) / "report.html").read_text(encoding="utf-8")
    probe = tmp_path / "probe.html"
    probe.write_text(html.replace("</body>", CHECK_SCRIPT + "</body>")
                     .replace("default-src 'none';", "default-src 'none'; script-src 'unsafe-inline';"),
                     encoding="utf-8")
    dom = run_chromium(["--virtual-time-budget=5000", "--dump-dom", probe.as_uri()], tmp_path)
    states = re.search(r'id="tempo-img-check">([^<]*)<', dom).group(1).split()
    # curves 800x500; the identity-strata plots (one per profile) 1200x800
    assert len(states) == html.count("<img") and all(s.startswith(("ok:800x500", "ok:1200x800")) for s in states)
    assert sum(s.startswith("ok:1200x800") for s in states) == 2 == html.count("by identity stratum")
    shot = tmp_path / "shot.png"
    run_chromium(["--window-size=1200,2000", f"--screenshot={shot}", probe.as_uri()], tmp_path)
    assert shot.exists() and shot.stat().st_size > 10_000
