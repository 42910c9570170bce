"""The headline on data/: F at every method's VALID threshold (issue 9, build point 2)."""
from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tempo_assets.assets.benchmark import BASELINES
from tempo_assets_tests.conftest import subprocess_env

pytestmark = pytest.mark.slow
HEADLINE = ["f_at_valid_tau", "valid_tau", "f_at_valid_tau_low", "f_at_valid_tau_high", "wf_at_valid_tau",
            "s_at_valid_tau"]
KEYS = ["method", "mode", "aspect"]
TEMPO = str(Path(sys.executable).parent / "tempo")


def test_test_score_and_benchmark_report_the_same_recipe_headline(demo_graph):
    store = demo_graph.store()
    for window in demo_graph.plan.windows:
        score = store.open("test_score", window).value.summary
        bench = store.open("benchmark", window).value.summary
        a = score[score["method"] == "recipe"].set_index(KEYS)[["valid_tau", "f_at_valid_tau"]]
        b = bench[bench["method"] == "recipe"].set_index(KEYS)[["valid_tau", "f_at_valid_tau"]]
        assert len(a) and a.notna().all().all()
        pd.testing.assert_frame_equal(a.sort_index(), b.loc[a.index].sort_index())


def test_every_baseline_has_a_valid_tau_from_the_valid_evaluation_set(demo_graph):
    store = demo_graph.store()
    for window in demo_graph.plan.windows:
        value = store.open("benchmark", window).value
        taus = value.valid_taus
        assert {"recipe", *BASELINES} <= set(taus["method"])
        for method in BASELINES:
            rows = taus[(taus["method"] == method) & taus["valid_tau"].notna()]
            assert len(rows), f"{window} {method}: no VALID threshold"
            assert set(rows["source"]) == {f"valid_evaluation_set[{window}]: VALID growth "
                                           f"({window.split('__')[1]}, {window.split('__')[2]}], every method "
                                           f"trained at {window.split('__')[1]}"}
        # the TEST summary reads each method at the threshold the table holds
        merged = value.summary.merge(taus[KEYS + ["valid_tau"]], on=KEYS, suffixes=("", "_table"))
        main = merged[merged["method"].isin(BASELINES)]
        np.testing.assert_array_equal(main["valid_tau"].to_numpy(float), main["valid_tau_table"].to_numpy(float))
        # the paired bootstrap is on the headline
        assert set(value.paired["metric"]) == {"f_at_valid_tau"}


def test_report_tsv_has_the_headline_columns_for_every_method(demo_graph):
    out = subprocess.run([TEMPO, "report", "--format", "tsv"],
                         env=subprocess_env(demo_graph), capture_output=True, text=True, check=True).stdout
    table = pd.read_csv(io.StringIO(out), sep="\t")
    assert list(table.columns[4:10]) == HEADLINE
    for method in ("recipe", *BASELINES):
        rows = table[table["method"] == method]
        assert len(rows) and rows["f_at_valid_tau"].notna().any() and rows["valid_tau"].notna().any(), method
    md = subprocess.run([TEMPO, "report", "--format", "md"],
                        env=subprocess_env(demo_graph), capture_output=True, text=True, check=True).stdout
    assert "best threshold on TEST — not a protocol number" in md
