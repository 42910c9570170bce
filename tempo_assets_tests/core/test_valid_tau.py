"""Every method's VALID threshold comes from VALID growth only (issue 9, build point 2)."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from tempo_assets.core.evaluation.benchmark import BenchmarkOptions
from tempo_assets.core.evaluation import EvalOntology
from tempo_assets.core.pipeline.workflow import OLDER, WindowPredictions, benchmark_window
from tempo_assets.core.pipeline.benchmark_inputs import TestTargets as Cells
from tempo_assets_tests.core.obo_fixtures import ROOTS, write_obo

RIGHT, WRONG = "GO:0000001", "GO:0000002"


@pytest.fixture(scope="module")
def ontology(tmp_path_factory):
    terms = [{"id": ROOTS["BP"], "aspect": "BP"}, {"id": RIGHT, "aspect": "BP", "is_a": [ROOTS["BP"]]},
             {"id": WRONG, "aspect": "BP", "is_a": [ROOTS["BP"]]}]
    return EvalOntology.from_obo(write_obo(tmp_path_factory.mktemp("obo") / "go.obo", terms))


def cells(ontology, prefix: str, n: int, truth_term=lambda i: RIGHT) -> Cells:
    proteins = [f"{prefix}{i:03d}" for i in range(n)]
    targets = pd.DataFrame({"protein": proteins, "aspect": "BP", "mode": "NK"})
    truth = pd.DataFrame({"protein": proteins, "term": [truth_term(i) for i in range(n)], "aspect": "BP"})
    return Cells(targets, truth, pd.DataFrame(columns=["protein", "term", "aspect"]), pd.DataFrame(), ontology)


def predictions(proteins) -> pd.DataFrame:
    """RIGHT at 0.8 for two thirds of the proteins, WRONG at 0.3 for every one."""
    rows = [(p, RIGHT, 0.8, "BP") for i, p in enumerate(proteins) if i % 3] + [(p, WRONG, 0.3, "BP") for p in proteins]
    return pd.DataFrame(rows, columns=["protein", "term", "score", "aspect"])


def run(valid: Cells, test: Cells):
    proteins = list(valid.targets["protein"]) + list(test.targets["protein"])
    newer = {"m": predictions(test.targets["protein"]), "n": predictions(test.targets["protein"])}
    older = {"m": predictions(proteins)}  # "n" has no predictions at t-1
    return benchmark_window([(test, valid)], WindowPredictions(newer, older, {}),
                            BenchmarkOptions(n_boot=20, reference="m"), [], True, "VALID cells of the test")


def nk_bp(frame: pd.DataFrame) -> pd.DataFrame:
    return frame[(frame["mode"] == "NK") & (frame["aspect"] == "BP")].set_index("method")


def tau_of(value, method: str = "m") -> float:
    return float(nk_bp(value.valid_taus).loc[method, "valid_tau"])


def test_baseline_valid_tau_comes_from_valid_data_only(ontology):
    valid, test = cells(ontology, "V", 30), cells(ontology, "T", 30)
    base = run(valid, test)
    tau = tau_of(base)
    # on VALID the right term at 0.8 is worth keeping, the wrong one at 0.3 is not: tau in (0.3, 0.8]
    assert 0.3 < tau <= 0.8
    row = base.summary.set_index("method").loc["m"]
    assert row["valid_tau"] == tau and row["f_at_valid_tau"] > 0
    # cells without VALID targets have no threshold, and say so
    other = base.valid_taus[(base.valid_taus["method"] == "m") & (base.valid_taus["mode"] == "LK")]
    assert other["valid_tau"].isna().all() and set(other["note"]) == {"no VALID targets in this cell"}
    # the older variant is read at the same threshold on TEST
    assert base.summary.set_index("method").loc[f"m{OLDER}", "valid_tau"] == tau
    assert nk_bp(base.valid_taus).loc["m", "source"] == "VALID cells of the test, scored under cafaeval"

    # planting a change in TEST (its truth flips to the wrong term) moves TEST numbers, not the threshold
    planted = run(valid, cells(ontology, "T", 30, truth_term=lambda i: WRONG))
    pd.testing.assert_frame_equal(planted.valid_taus, base.valid_taus)
    assert planted.summary.set_index("method").loc["m", "f_at_valid_tau"] != row["f_at_valid_tau"]
    # ...while the same change in VALID moves it (the wrong term at 0.3 now carries the F)
    moved = run(cells(ontology, "V", 30, truth_term=lambda i: WRONG), test)
    assert tau_of(moved) <= 0.3


def test_a_method_without_older_predictions_has_no_valid_tau_and_a_note(ontology):
    value = run(cells(ontology, "V", 30), cells(ontology, "T", 30))
    n = nk_bp(value.valid_taus).loc["n"]
    assert np.isnan(n["valid_tau"]) and n["note"] == "no predictions at t-1 on VALID"
    assert np.isnan(value.summary.set_index("method").loc["n", "f_at_valid_tau"])
    paired = value.paired.set_index(["a", "b"]).loc[("m", "n")]
    assert np.isnan(paired["delta"]) and "no VALID threshold for n" in paired["note"]
