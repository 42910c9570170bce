"""The headline on data/: F at every method's VALID threshold (issue 9, build point 2)."""
from __future__ import annotations

import io

import numpy as np
import pandas as pd
import pytest

from tempo_assets.core.pipeline.window_benchmark import BASELINES
from tempo_assets.core.recipe.selection import recipe_profile
from tempo_assets_tests.cli_here import tempo_here
from tempo_assets_tests.conftest import subprocess_env

pytestmark = pytest.mark.slow
HEADLINE = ["f_at_valid_tau", "valid_tau", "f_at_valid_tau_low", "f_at_valid_tau_high", "f_at_valid_tau_cluster_low",
            "f_at_valid_tau_cluster_high", "wf_at_valid_tau", "s_at_valid_tau", "f_micro_w_at_valid_tau"]
KEYS = ["method", "mode", "aspect"]


def test_test_score_and_benchmark_report_the_same_recipe_headline(demo_graph):
    store = demo_graph.store()
    for window in demo_graph.plan.windows:
        score = store.open("test_score", window).value.summary
        bench = store.open("benchmark", window).value.summary
        # test_score scores under the profile the recipe was selected under (lafa by default)
        profile = recipe_profile(store.open("frozen_recipe", window).value["recipe"])
        assert profile == "lafa"
        bench = bench[bench["profile"] == profile]
        a = score[score["method"] == "recipe"].set_index(KEYS)[["valid_tau", "f_at_valid_tau"]]
        b = bench[bench["method"] == "recipe"].set_index(KEYS)[["valid_tau", "f_at_valid_tau"]]
        assert len(a) and a.notna().all().all()
        pd.testing.assert_frame_equal(a.sort_index(), b.loc[a.index].sort_index())


def test_test_score_reads_the_rerankers_valid_fixed_the_thresholds_for(demo_graph):
    # Window.recipe_labels: selection and TEST train the recipe's rerankers on the TRAIN labels (t-1)
    from tempo_assets.partitions import parse_window_key

    store = demo_graph.store()
    for key in demo_graph.plan.windows:
        window = parse_window_key(key)
        for asset in ("valid_selection", "test_score", "benchmark"):
            read = {s["artefact"] for s in store.read_meta(asset, key)["sources"] if "artefact" in s}
            labels = {r for r in read if r.startswith("reranker_labels[")}
            # the benchmark also reads t-1's for the methods trained at t-1: the same partition
            assert labels == {f"reranker_labels[{window.t_minus_1}]"}, (asset, key, labels)


def test_every_baseline_has_a_valid_tau_from_the_valid_evaluation_set(demo_graph):
    store = demo_graph.store()
    for window in demo_graph.plan.windows:
        value = store.open("benchmark", window).value
        taus = value.valid_taus
        assert {"recipe", *BASELINES} <= set(taus["method"])
        for method in BASELINES:
            rows = taus[(taus["method"] == method) & taus["valid_tau"].notna()]
            assert len(rows), f"{window} {method}: no VALID threshold"
            assert set(zip(rows["profile"], rows["source"])) == {
                (profile, f"valid_evaluation_set[{window}]: VALID growth ({window.split('__')[1]}, "
                          f"{window.split('__')[2]}], every method trained at {window.split('__')[1]}, "
                          f"scored under {profile}") for profile in ("lafa", "cafaeval")}
        # the recipe: its frozen VALID thresholds under lafa (the profile it was selected under), the
        # same rule as every method's on VALID under cafaeval
        recipe = taus[(taus["method"] == "recipe") & taus["valid_tau"].notna()]
        assert set(recipe[recipe["profile"] == "lafa"]["source"]) == {"frozen_recipe tau_by_mode (VALID selection)"}
        assert recipe[recipe["profile"] == "cafaeval"]["source"].str.startswith(f"valid_evaluation_set[{window}]").all()
        # the TEST summary reads each method at the threshold the table holds, per profile
        keys = ["profile"] + KEYS
        merged = value.summary.merge(taus[keys + ["valid_tau"]], on=keys, suffixes=("", "_table"))
        main = merged[merged["method"].isin(BASELINES)]
        np.testing.assert_array_equal(main["valid_tau"].to_numpy(float), main["valid_tau_table"].to_numpy(float))
        # the paired bootstrap is on the headline
        assert set(value.paired["metric"]) == {"f_at_valid_tau"}


def report(graph, *args: str) -> str:
    """``tempo report ARGS`` on ``graph``, in this process (``cli_here``: the table the command prints is what
    is checked, not how it is started): its stdout (the command must succeed)."""
    done = tempo_here("report", *args, env=subprocess_env(graph))
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_report_tsv_has_the_headline_columns_for_every_method(demo_graph):
    out = report(demo_graph, "--format", "tsv")
    table = pd.read_csv(io.StringIO(out), sep="\t")
    assert list(table.columns[:5]) == ["window", "profile", "mode", "aspect", "method"]
    assert list(table.columns[5:5 + len(HEADLINE)]) == HEADLINE
    assert set(table["profile"]) == {"lafa", "cafaeval"}
    for profile in ("lafa", "cafaeval"):
        for method in ("recipe", *BASELINES):
            rows = table[(table["method"] == method) & (table["profile"] == profile)]
            assert len(rows) and rows["valid_tau"].notna().any(), (profile, method)
            scored = rows[rows["valid_tau"].notna()]
            # the headline with its protein- and cluster-level intervals wherever a VALID tau exists
            for column in ("f_at_valid_tau", "f_at_valid_tau_low", "f_at_valid_tau_cluster_low",
                           "f_at_valid_tau_cluster_high", "fmax_oracle_cluster_low"):
                assert scored[column].notna().all(), (profile, method, column)
            assert (scored["f_at_valid_tau_cluster_low"] <= scored["f_at_valid_tau"] + 1e-9).all()
    # the same cells under both profiles, except LAFA's dropped protein-binding-only MF targets
    cafa, lafa = (table[table["profile"] == p].set_index(["window", "mode", "aspect", "method"]) for p in
                  ("cafaeval", "lafa"))
    assert (lafa["n_targets"] <= cafa.loc[lafa.index, "n_targets"]).all()
    by = report(demo_graph, "--format", "tsv", "--by", "identity")
    strata = pd.read_csv(io.StringIO(by), sep="\t", keep_default_na=False)
    strata = strata[strata["identity_stratum"] != "all"]
    assert set(strata["identity_stratum"]) <= {"<30", "30-60", "60-90", ">=90"} and len(strata)
    assert {(p, m) for p in ("lafa", "cafaeval") for m in ("recipe", *BASELINES)} <= set(
        zip(strata["profile"], strata["method"]))
    md = report(demo_graph, "--format", "md")
    assert "best threshold on TEST — not a protocol number" in md
