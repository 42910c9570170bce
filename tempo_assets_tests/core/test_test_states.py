"""core.storage.claims.TEST_STATES: every state of a window's TEST lifecycle is reached, and says its way forward."""
from __future__ import annotations

import pytest

from tempo_assets.core.storage.claims import TEST_STATES, Burn, TestClaim, window_test_state

W = "2015-01-15__2016-01-15__2017-01-15__2018-01-15"
GROWTH = TestClaim(W, "run-g", "2026-01-01T00:00:00+00:00", "host", 11, "test_growth")
SCORE = TestClaim(W, "run-s", "2026-01-01T00:01:00+00:00", "host", 12, "test_score")
BURN = Burn(W, "killed", "2026-01-02T00:00:00+00:00", "me", "run-g")


@pytest.mark.parametrize("claims, burn, stored, ended, state, run", [
    ({}, None, [], False, "unread", ""),
    ({"test_growth": GROWTH}, None, [], False, "reading", "run-g"),
    ({"test_growth": GROWTH}, None, [], True, "dead", "run-g"),
    ({"test_growth": GROWTH}, None, ["test_growth"], True, "read", ""),  # killed after its write: score it
    ({"test_growth": GROWTH, "test_score": SCORE}, None, ["test_growth"], False, "scoring", "run-s"),
    ({"test_growth": GROWTH, "test_score": SCORE}, None, ["test_growth"], True, "dead", "run-s"),
    ({"test_growth": GROWTH, "test_score": SCORE}, None, ["test_growth", "test_score"], True, "scored", ""),
    ({"test_growth": GROWTH}, BURN, [], True, "burned", "run-g"),
    ({"test_growth": GROWTH}, None, [], None, "reading", "run-g"),  # another host: not taken for dead
])
def test_each_state_is_reached(claims, burn, stored, ended, state, run):
    test = window_test_state(W, claims, burn, stored, lambda claim: ended)
    assert (test.state, test.run) == (state, run)
    assert "; next: " in test.describe()


def test_every_state_but_the_final_ones_names_a_command():
    for name, state in TEST_STATES.items():
        if name == "burned":
            assert state.next_step.startswith("none")
        else:
            assert state.next_step.startswith(("tempo ", "wait for run"))


def test_a_dead_claim_names_the_release_command_with_the_window():
    test = window_test_state(W, {"test_score": SCORE}, None, ["test_growth"], lambda claim: True)
    assert f"tempo test-claim release {W} --reason TEXT" in test.describe()
    assert "run-s" in test.describe() and "test_score" in test.describe()
