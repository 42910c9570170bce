"""Fingerprints and artefact states (core/storage/staleness.py), on hand-made sidecars."""
import pytest

from tempo_assets.core.storage.staleness import (
    ArtefactState, CurrentInputs, Plan, Verdicts, artefact_state, fingerprint, needs_build, parse_ref,
    superseded_reason,
)

R = ["2015-01-15", "2016-01-15", "2017-01-15", "2018-01-15", "2019-01-15"]
W_OLD = "__".join(R[1:])  # no longer a window once 2018-07-15 is inserted
INSERTED = R[:4] + ["2018-07-15"] + R[4:]


def sidecar(*refs, files=(), **extra):
    sources = [dict(f) for f in files] + [{"artefact": a, "sha256": s} for a, s in refs]
    return {"sources": sources, "sha256": "x", **extra}


def plan(releases=R, windows=("__".join(R[:4]), W_OLD), recipe=None):
    return Plan(list(releases), list(windows), {c: recipe for c in releases})


SHA = {"embeddings[2018-01-15]": "e4", "embeddings[2019-01-15]": "e5", "ontology[2019-01-15]": "o5",
       "embeddings[2018-07-15]": "eX", "frozen_recipe[" + W_OLD + "]": "r"}


def state(asset, partition, meta, p, code_version=None, **verdicts):
    return artefact_state(asset, partition, meta, p, CurrentInputs(SHA.get, code_version=code_version),
                          Verdicts(**verdicts))


def test_fingerprint_depends_on_inputs_partitions_and_code_not_on_order():
    a = [{"artefact": "x[1]", "sha256": "s"}, {"release": "1", "path": "f", "sha256": "t"}]
    assert fingerprint(a, "v1") == fingerprint(list(reversed(a)), "v1")
    assert fingerprint(a, "v1") != fingerprint(a, "v2")
    assert fingerprint(a, "v1") != fingerprint([{"artefact": "x[2]", "sha256": "s"}, a[1]], "v1")
    assert fingerprint(a, "v1") != fingerprint([{"artefact": "x[1]", "sha256": "u"}, a[1]], "v1")
    assert fingerprint(a, "v1", {"recipe_hash": "h1"}) != fingerprint(a, "v1", {"recipe_hash": "h2"})


def test_refs_parse():
    assert parse_ref("knn_corpus[2016-01-15]") == ("knn_corpus", "2016-01-15")
    assert parse_ref("benchmark_catalog[None]") == ("benchmark_catalog", None)


def test_unchanged_inputs_are_ok_and_a_changed_one_is_stale():
    meta = sidecar(("embeddings[2018-01-15]", "e4"), ("embeddings[2019-01-15]", "e5"), code_version="v")
    assert state("reranker_labels", R[4], meta, plan(), code_version="v").state == "ok"
    changed = sidecar(("embeddings[2018-01-15]", "old"), ("embeddings[2019-01-15]", "e5"))
    result = state("reranker_labels", R[4], changed, plan())
    assert result.state == "stale" and "embeddings[2018-01-15] changed" in result.reason
    assert needs_build(result)
    code = state("reranker_labels", R[4], meta, plan(), code_version="w")
    assert code.state == "stale" and "code changed (v -> w)" in code.reason


def test_an_inserted_release_makes_the_next_cutoff_stale_and_the_spanning_window_superseded():
    p = plan(INSERTED, ["__".join(R[:4]), "__".join(INSERTED[1:5]), "__".join(INSERTED[2:6])])
    labels = sidecar(("embeddings[2018-01-15]", "e4"), ("embeddings[2019-01-15]", "e5"))
    result = state("reranker_labels", R[4], labels, p)
    assert result.state == "stale"
    assert "read embeddings[2018-01-15] but the release before 2019-01-15 is now 2018-07-15" in result.reason
    # the same artefact rebuilt against the new previous release is current again
    rebuilt = sidecar(("embeddings[2018-07-15]", "eX"), ("embeddings[2019-01-15]", "e5"))
    assert state("reranker_labels", R[4], rebuilt, p).state == "ok"
    gone = state("test_score", W_OLD, sidecar(), p)
    assert gone.state == "superseded" and "2018-07-15 now lie inside it" in gone.reason
    assert not needs_build(gone)
    assert state("valid_selection", "__".join(INSERTED[1:5]), None, p).state == "missing"
    with pytest.raises(ValueError):
        state("test_score", W_OLD, None, p)


def test_the_submission_is_stale_when_a_newer_frozen_recipe_applies():
    new = "__".join(INSERTED[2:6])
    p = plan(INSERTED, [new], recipe=new)
    meta = sidecar(("frozen_recipe[" + W_OLD + "]", "r"), ("ontology[2019-01-15]", "o5"))
    result = state("submission", R[4], meta, p)
    assert result.state == "stale" and f"the frozen recipe of {new} applies now" in result.reason
    no_recipe_yet = state("submission", R[4], meta, plan(INSERTED, [new], recipe=None))
    assert no_recipe_yet.state == "stale" and "superseded since" in no_recipe_yet.reason


def test_only_an_artefacts_own_inputs_make_it_stale_as_dagster_counts_unsynced():
    """An upstream that is stale but not rebuilt changed nothing this artefact read: it stays ok (the
    UI's "Unsynced" counts the same way); once the upstream is rebuilt to other bytes it is stale."""
    meta = sidecar(("embeddings[2019-01-15]", "e5"), ("frozen_recipe[" + W_OLD + "]", "r"))
    assert state("benchmark", W_OLD, meta, plan()).state == "ok"
    rebuilt = dict(SHA, **{"embeddings[2019-01-15]": "e5-rebuilt"})
    result = artefact_state("benchmark", W_OLD, meta, plan(), CurrentInputs(rebuilt.get))
    assert result.state == "stale" and "embeddings[2019-01-15] changed" in result.reason


def methods_plan(registered, eligible):
    windows = ["__".join(R[:4]), W_OLD]
    return Plan(R, windows, {c: None for c in R}, methods=registered, window_methods={w: eligible for w in windows})


def test_a_method_registered_after_the_benchmark_makes_it_stale():
    read = sidecar(("method_predictions[2017-01-15|a]", "p1"), ("method_predictions[2018-01-15|a]", "p2"))
    shas = dict(SHA, **{"method_predictions[2017-01-15|a]": "p1", "method_predictions[2018-01-15|a]": "p2"})
    now = lambda p: artefact_state("benchmark", W_OLD, read, p, CurrentInputs(shas.get))  # noqa: E731
    assert now(methods_plan(["a"], ["a"])).state == "ok"
    late = now(methods_plan(["a", "late"], ["a", "late"]))
    assert late.state == "stale" and "method late registered since it was built" in late.reason and needs_build(late)
    # registered, but trained after this window's t0: the benchmark does not score it, nothing to rebuild
    assert now(methods_plan(["a", "late"], ["a"])).state == "ok"
    removed = now(methods_plan([], []))
    assert removed.state == "stale" and "scored method a, no longer registered" in removed.reason
    # a plan that does not know the registry says nothing about methods
    assert artefact_state("benchmark", W_OLD, read, plan(), CurrentInputs(shas.get)).state == "ok"


def test_frozen_artefacts_are_reported_stale_but_never_rebuilt():
    meta = sidecar(("frozen_recipe[" + W_OLD + "]", "changed"))
    result = state("test_score", W_OLD, meta, plan())
    assert result.state == "stale" and "not rebuilt" in result.reason and not needs_build(result)
    assert needs_build(state("test_score", W_OLD, None, plan()))  # never scored: scored once


def test_failed_and_claimed():
    meta = sidecar(("embeddings[2019-01-15]", "e5"))
    run = state("knn_corpus", R[4], meta, plan(), failed="run abc failed")
    assert (run.state, run.reason, needs_build(run)) == ("failed", "run abc failed", True)
    check = state("knn_corpus", R[4], meta, plan(), failed_check="knn_corpus__within_cutoff failed")
    assert check.state == "failed" and not needs_build(check)  # the input must be fixed first
    claimed = state("test_score", "__".join(R[:4]), None, plan(), claimed="claimed by run r1, no score")
    assert claimed.state == "claimed" and not needs_build(claimed)


def test_status_line_format():
    line = ArtefactState("test_score", W_OLD, "superseded", "why").line()
    assert line == f"test_score[{W_OLD}] superseded why"
    assert superseded_reason(W_OLD, R[:3]) == "release(s) 2018-01-15, 2019-01-15 no longer in the archive"
