"""The training-date rule: who a window may score, and why not."""
from datetime import date

import pandas as pd
import pytest

from tempo_assets.core.methods.eligibility import (
    EXCLUDED, UNDECLARED, method_catalog, method_eligibility, method_prediction_frames,
)
from tempo_assets.core.methods.registry import MethodSpec
from tempo_assets.partitions import Window

DATES = {"2016-01-15": date(2016, 1, 15), "2017-06-15": date(2017, 6, 15), "2019-01-14": date(2019, 1, 27),
         "2014-09-29": date(2014, 9, 29)}
WINDOW = Window("2014-09-29", "2016-01-15", "2017-06-15", "2019-01-14")


class Stored:
    def __init__(self, status, reason="", predictions=None):
        self.meta = {"status": status, "reason": reason}
        self.value = {"predictions": predictions}


def spec(name, version=None, trained_until=None, kind="command", produced_at=None):
    if kind == "precomputed":
        return MethodSpec(name=name, version=version, kind=kind, predictions="/x", produced_at=produced_at)
    return MethodSpec(name=name, version=version, kind=kind, dir="/m", command="true", trained_until=trained_until)


def frame(score):
    return pd.DataFrame({"protein": ["P1"], "term": ["GO:1"], "aspect": ["BP"], "score": [score]})


def records(key, t0=("ok", ""), tm1=("ok", "")):
    out = {}
    if t0:
        out[("2017-06-15", key)] = Stored(*t0, predictions=frame(0.5))
    if tm1:
        out[("2016-01-15", key)] = Stored(*tm1, predictions=frame(0.25))
    return out


@pytest.mark.parametrize("trained_until, status, reason, valid", [
    (date(2017, 7, 1), "excluded", EXCLUDED, False),     # after t0: saw TEST
    (date(2017, 6, 15), "eligible", "", False),          # t0 >= D, but trained after t-1: no VALID tau
    (date(2016, 1, 15), "eligible", "", True),
    (None, "eligible", UNDECLARED, True),
])
def test_training_date_rule(trained_until, status, reason, valid):
    m = spec("a", trained_until=trained_until)
    row = method_eligibility([m], records(m.key), WINDOW, DATES).iloc[0]
    assert (row["status"], row["reason"], bool(row["valid_tau_available"])) == (status, reason, valid)
    assert bool(row["eligible"]) == (status == "eligible")


def test_failed_and_pending_are_listed_with_reasons():
    failed, pending = spec("f"), spec("p")
    stored = {**records("f", t0=("failed", "timed out after 5 s")), **records("p", t0=None)}
    table = method_eligibility([failed, pending], stored, WINDOW, DATES).set_index("method")
    assert table.loc["f", "status"] == "failed" and table.loc["f", "reason"] == "failed: timed out after 5 s"
    assert table.loc["p", "status"] == "pending" and "2017-06-15|p" in table.loc["p", "reason"]
    assert method_prediction_frames(table.reset_index(), stored) == {}


def test_failed_run_at_t_minus_1_leaves_the_method_scored_without_valid_tau():
    m = spec("a", trained_until=date(2015, 1, 1))
    stored = records("a", tm1=("failed", "exited with status 1"))
    table = method_eligibility([m], stored, WINDOW, DATES)
    assert table.iloc[0]["eligible"] and not table.iloc[0]["valid_tau_available"]
    assert "exited with status 1" in table.iloc[0]["valid_tau_note"]
    frames = method_prediction_frames(table, stored)
    assert frames["a"]["t-1"] is None and frames["a"]["t0"]["score"].tolist() == [0.5]


def test_two_versions_are_judged_separately_and_both_returned():
    old, new = spec("tf", "1", trained_until=date(2015, 6, 1)), spec("tf", "2", trained_until=date(2018, 1, 1))
    stored = {**records(old.key), **records(new.key)}
    table = method_eligibility([old, new], stored, WINDOW, DATES).set_index("method")
    assert table.loc["tf@1", "status"] == "eligible" and table.loc["tf@2", "reason"] == EXCLUDED
    later = Window("2016-01-15", "2017-06-15", "2019-01-14", "2022-09-12")
    dates = {**DATES, "2022-09-12": date(2022, 9, 12)}
    stored = {(c, k): Stored("ok", predictions=frame(s)) for c in ("2017-06-15", "2019-01-14")
              for k, s in (("tf@1", 0.3), ("tf@2", 0.6))}
    frames = method_prediction_frames(method_eligibility([old, new], stored, later, dates), stored)
    assert sorted(frames) == ["tf@1", "tf@2"]
    assert frames["tf@1"]["t0"]["score"].tolist() == [0.3] and frames["tf@2"]["t0"]["score"].tolist() == [0.6]
    assert frames["tf@2"]["t-1"] is None and frames["tf@1"]["t-1"] is not None  # tf@2 trained after t-1


def test_precomputed_produced_at_bounds_training():
    m = spec("late", kind="precomputed", produced_at=date(2018, 1, 1))
    row = method_eligibility([m], records(m.key), WINDOW, DATES).iloc[0]
    assert row["reason"] == EXCLUDED and row["trained_until"] == "2018-01-01"


def test_catalog_lists_every_method_on_every_window():
    m = spec("tf", "2", trained_until=date(2018, 1, 1))
    later = Window("2016-01-15", "2017-06-15", "2019-01-14", "2022-09-12")
    dates = {**DATES, "2022-09-12": date(2022, 9, 12)}
    stored = {(c, m.key): Stored("ok", predictions=frame(0.5)) for c in ("2016-01-15", "2017-06-15", "2019-01-14")}
    table = method_catalog([m], stored, [WINDOW, later], dates)
    assert table[["window", "status"]].values.tolist() == [[WINDOW.key, "excluded"], [later.key, "eligible"]]
    assert method_catalog([m], stored, [], dates).empty


def test_benchmark_frames_named_and_marked():
    from tempo_assets.core.methods.eligibility import NO_T_MINUS_1, benchmark_methods

    full, late = spec("a", "1"), spec("a", "2", trained_until=date(2017, 6, 15))
    stored = {**records(full.key), **records(late.key)}
    at_t0, older, notes = benchmark_methods(method_eligibility([full, late], stored, WINDOW, DATES), stored)
    assert sorted(at_t0) == ["method:a@1", "method:a@2"] and sorted(older) == ["method:a@1"]
    assert older["method:a@1"]["score"].tolist() == [0.25] and at_t0["method:a@1"]["score"].tolist() == [0.5]
    assert notes == {"method:a@1": UNDECLARED, "method:a@2": NO_T_MINUS_1}


def test_method_predictions_read_through_the_role_gate():
    from tempo_assets.core.storage.artefacts import ArtefactSet
    from tempo_assets.core.base.errors import CutoffViolation, TempoInputError
    from tempo_assets.core.methods.eligibility import collect_records

    order = {r: i for i, r in enumerate(sorted(DATES))}
    fetched = []

    class Bound(Stored):
        max_source_date = date(2016, 1, 15)

    refit = ArtefactSet(asset="method_predictions", role="refit", limit_release=WINDOW.t0,
                        limit_date=DATES[WINDOW.t0], release_order=order, as_of=DATES,
                        fetch=lambda key: fetched.append(key) or Bound("ok"), stored=lambda key: True)
    with pytest.raises(CutoffViolation):
        refit.get(f"{WINDOW.t1}|a")  # a run after t0
    train = refit.narrowed("train", WINDOW.t_minus_1)
    with pytest.raises(CutoffViolation):
        train.get(f"{WINDOW.t0}|a")  # the VALID frame may not come from t0
    with pytest.raises(TempoInputError):
        train.narrowed("test", WINDOW.t1)  # never widened
    got = collect_records({WINDOW.t0: refit, WINDOW.t_minus_1: train}, ["a"])
    assert sorted(got) == [(WINDOW.t_minus_1, "a"), (WINDOW.t0, "a")]
    assert fetched == [f"{WINDOW.t0}|a", f"{WINDOW.t_minus_1}|a"]
