"""``core.storage.claims``: one claim per window under concurrency, refusals, release -> burned."""
from __future__ import annotations

import json
import multiprocessing
import os

import pytest

from tempo_assets.core.base.errors import TempoInputError
from tempo_assets.core.storage.claims import CLAIMED_ASSETS, ClaimRefused, ClaimStore, ClaimUnavailable, create_if_absent

WINDOW = "2014-09-29__2016-01-15__2017-06-15__2019-01-14"


def never_scored(window: str) -> bool:
    return False


def _race(root: str, run_id: str, start, results) -> None:
    start.wait()
    try:
        ClaimStore(root).claim(WINDOW, run_id)
        results.put((run_id, "won"))
    except ClaimRefused as exc:
        results.put((run_id, exc.state))


def test_concurrent_claimants_exactly_one_wins(tmp_path):
    context = multiprocessing.get_context("fork")
    start, results = context.Event(), context.Queue()
    runs = [f"run-{i}" for i in range(8)]
    procs = [context.Process(target=_race, args=(str(tmp_path), r, start, results)) for r in runs]
    for proc in procs:
        proc.start()
    start.set()
    for proc in procs:
        proc.join(30)
    outcome = dict(results.get(timeout=5) for _ in runs)
    winners = [r for r, state in outcome.items() if state == "won"]
    assert len(winners) == 1 and set(outcome.values()) == {"won", "claimed"}
    store = ClaimStore(tmp_path)
    assert store.get(WINDOW).run_id == winners[0]
    events = [(e["event"], e["run_id"]) for e in store.log()]
    assert events.count(("claimed", winners[0])) == 1 and len(events) == len(runs)
    assert sum(1 for event, _ in events if event == "refused") == len(runs) - 1
    # no temporary file is left behind
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"{WINDOW}.test_growth.claim.json", "test_claims.log"]


def test_the_same_run_cannot_claim_twice(tmp_path):
    store = ClaimStore(tmp_path)
    claim = store.claim(WINDOW, "run-a")
    assert (claim.run_id, claim.pid) == ("run-a", os.getpid())
    with pytest.raises(ClaimRefused, match="already claimed by run run-a") as refused:
        store.claim(WINDOW, "run-a")
    assert refused.value.state == "claimed"
    assert json.loads(store.claim_path(WINDOW).read_text())["run_id"] == "run-a"


def test_unwritable_store_refuses_to_claim(tmp_path):
    blocker = tmp_path / "claims"
    blocker.write_text("not a folder")  # works as root too, unlike chmod
    with pytest.raises(ClaimUnavailable, match="refusing to read or score TEST unclaimed"):
        ClaimStore(blocker).claim(WINDOW, "run-a")
    inner = ClaimStore(blocker / "sub")
    with pytest.raises(ClaimUnavailable):
        inner.claim(WINDOW, "run-a")


def test_states_and_release_burns_the_window(tmp_path):
    store = ClaimStore(tmp_path)
    scored = set()
    assert store.claims(scored.__contains__) == []
    store.claim(WINDOW, "dead-run")
    [status] = store.claims(scored.__contains__)
    assert status.state == "claimed" and "dead-run" in status.reason
    assert status.line().startswith(f"test_score[{WINDOW}] claimed ")
    with pytest.raises(TempoInputError, match="needs a --reason"):
        store.release(WINDOW, "  ", scored.__contains__)
    burn = store.release(WINDOW, "run killed by OOM", scored.__contains__)
    assert burn.claim_run_id == "dead-run"
    [status] = store.claims(scored.__contains__)
    assert status.state == "burned" and "TEST read, not reported" in status.reason
    assert "run killed by OOM" in status.reason
    for asset in CLAIMED_ASSETS:  # a burned window refuses the TEST read and the scoring alike
        with pytest.raises(ClaimRefused, match=f"{asset}\\[{WINDOW}\\] is burned") as refused:
            store.claim(WINDOW, "new-run", asset=asset)
        assert refused.value.state == "burned"
    with pytest.raises(TempoInputError, match="is burned, not claimed"):
        store.release(WINDOW, "again", scored.__contains__)
    events = [e["event"] for e in store.log()]
    assert events == ["claimed", "released", "refused", "refused"]
    assert store.log()[1]["reason"] == "run killed by OOM"


def test_a_scored_or_unclaimed_window_cannot_be_released(tmp_path):
    store = ClaimStore(tmp_path)
    with pytest.raises(TempoInputError, match="never claimed"):
        store.release(WINDOW, "why", never_scored)
    store.claim(WINDOW, "run-a")
    assert store.status(WINDOW, lambda w: True).state == "scored"
    with pytest.raises(TempoInputError, match="is scored, not claimed"):
        store.release(WINDOW, "why", lambda w: True)
    assert store.burn_of(WINDOW) is None


def test_create_if_absent_keeps_the_first_document(tmp_path):
    path = tmp_path / "x.json"
    assert create_if_absent(path, {"n": 1})
    assert not create_if_absent(path, {"n": 2})
    assert json.loads(path.read_text()) == {"n": 1}


@pytest.mark.parametrize("key", ["../escape", "a/b", "", ".hidden"])
def test_keys_that_are_not_partition_keys_are_refused(tmp_path, key):
    with pytest.raises(TempoInputError, match="not a partition key"):
        ClaimStore(tmp_path).claim(key, "run")


def test_corrupt_claim_names_the_file(tmp_path):
    store = ClaimStore(tmp_path)
    store.claim_path(WINDOW).write_text("{not json")
    with pytest.raises(TempoInputError, match=f"{WINDOW}.test_growth.claim.json:1: corrupt claim file"):
        store.get(WINDOW)


def test_the_read_and_the_scoring_are_claimed_separately(tmp_path):
    """test_growth's claim (the TEST read) and test_score's (the scoring): one winner each, one window."""
    store = ClaimStore(tmp_path)
    store.claim(WINDOW, "run-read")
    store.claim(WINDOW, "run-score", asset="test_score")
    with pytest.raises(ClaimRefused, match=f"test_score\\[{WINDOW}\\] is already claimed by run run-score"):
        store.claim(WINDOW, "run-other", asset="test_score")
    with pytest.raises(TempoInputError, match="takes no TEST claim"):
        store.claim(WINDOW, "run-other", asset="benchmark")
    assert store.windows() == [WINDOW]
    [status] = store.claims(never_scored)
    assert {a: c.run_id for a, c in status.claims.items()} == {"test_growth": "run-read", "test_score": "run-score"}
    assert status.state == "claimed" and status.claim.run_id == "run-read"
    assert "run-read" in status.reason and "run-score" in status.reason
    burn = store.release(WINDOW, "scoring run died", never_scored)
    assert burn.claim_run_id == "run-read" and store.status(WINDOW, never_scored).state == "burned"


def test_a_read_window_is_not_released_but_left_to_be_scored(tmp_path):
    """TEST growth stored by a run that died before the scoring started: the window is ``read``
    (docs/PROTOCOL.md's TEST states), release refuses it and names the command that scores it."""
    store = ClaimStore(tmp_path)
    store.claim(WINDOW, "run-read")
    growth_stored = lambda w: True  # noqa: E731
    assert store.status(WINDOW, never_scored, growth_stored).state == "read"
    assert f"tempo materialize --window {WINDOW}" in store.status(WINDOW, never_scored, growth_stored).reason
    with pytest.raises(TempoInputError, match=f"`tempo materialize --window {WINDOW}` scores it once"):
        store.release(WINDOW, "why", never_scored, growth_stored)
    assert store.burn_of(WINDOW) is None
    # once test_score claimed it and its run died, the scoring may have read TEST: that claim is released
    store.claim(WINDOW, "run-score", asset="test_score")
    assert store.status(WINDOW, never_scored, growth_stored).state == "claimed"
    assert store.release(WINDOW, "scoring run died", never_scored, growth_stored).claim_run_id == "run-read"


def test_audit_test_once_counts_both_assets_and_every_read():
    from tempo_assets.core.audits.leakage import MaterialisationRecord, check_test_once

    def record(asset, storage_id, run_id, **metadata):
        return MaterialisationRecord(asset=asset, partition=WINDOW, metadata=metadata, storage_id=storage_id,
                                     timestamp=float(storage_id), run_id=run_id)

    once = [record("test_growth", 2, "a"), record("test_score", 3, "b")]
    assert check_test_once(once, [record("test_growth", 1, "a", **{"tempo/test_read": "a"})]) == []
    twice = once + [record("test_score", 5, "c"), record("test_growth", 4, "c")]
    found = check_test_once(twice, [record("test_growth", 1, "a", **{"tempo/test_read": "a"})])
    messages = sorted(f.message for f in found)
    assert [f.rule for f in found] == ["test_once"] * 3 and all(f.partition == WINDOW for f in found)
    assert any(m.startswith(f"test_growth[{WINDOW}] was materialised 2 times") for m in messages)
    assert any(m.startswith(f"test_score[{WINDOW}] was materialised 2 times") for m in messages)
    assert any(m.startswith(f"TEST of window {WINDOW} was read by 2 runs (a, c)") for m in messages)
    # a read recorded by a claim, without a materialisation, counts too
    found = check_test_once(once, [record("test_growth", 1, "z", **{"tempo/test_read": "z"})])
    assert [f.message.split(";")[0] for f in found] == [f"TEST of window {WINDOW} was read by 2 runs (a, z)"]


def _race_on(url: str, run_id: str, start, results) -> None:
    start.wait()
    try:
        ClaimStore(url).claim(WINDOW, run_id)
        results.put((run_id, "won"))
    except ClaimRefused as exc:
        results.put((run_id, exc.state))
    except Exception as exc:  # noqa: BLE001 - reported to the parent, which fails the test
        results.put((run_id, f"error {type(exc).__name__}: {exc}"))


@pytest.mark.production
def test_claims_on_the_object_store_one_of_many_processes_wins(dev_services, monkeypatch):
    """The claim on S3 (moto's server) is a conditional PUT: 8 processes race, exactly one wins,
    a burn there refuses both assets, and no local folder is involved."""
    import uuid

    from tempo_assets.core.storage.artefacts import ArtefactStore

    for name in ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_DEFAULT_REGION"):
        monkeypatch.setenv(name, dev_services[name])
    root = f"{dev_services['TEMPO_ARTEFACTS']}/claims-{uuid.uuid4().hex[:12]}"
    url = ClaimStore.of(ArtefactStore(root)).root
    assert url == f"{root}/_test_claims"
    context = multiprocessing.get_context("spawn")  # fresh clients: no shared connection pool
    start, results = context.Event(), context.Queue()
    runs = [f"run-{i}" for i in range(8)]
    procs = [context.Process(target=_race_on, args=(url, r, start, results)) for r in runs]
    for proc in procs:
        proc.start()
    start.set()
    outcome = dict(results.get(timeout=120) for _ in runs)
    for proc in procs:
        proc.join(30)
    winners = [r for r, state in outcome.items() if state == "won"]
    assert len(winners) == 1 and set(outcome.values()) == {"won", "claimed"}, outcome
    store = ClaimStore.beside(root)
    assert store.get(WINDOW).run_id == winners[0] and store.windows() == [WINDOW]
    events = [(e["event"], e["run_id"]) for e in store.log()]
    assert events.count(("claimed", winners[0])) == 1 and len(events) == len(runs)
    burn = store.release(WINDOW, "killed mid-run", never_scored)
    assert burn.claim_run_id == winners[0] and store.status(WINDOW, never_scored).state == "burned"
    for asset in CLAIMED_ASSETS:
        with pytest.raises(ClaimRefused, match="is burned"):
            store.claim(WINDOW, "later", asset=asset)
    assert [e["event"] for e in store.log()][-3:] == ["released", "refused", "refused"]
