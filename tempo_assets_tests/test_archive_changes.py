"""A release inserted between two existing ones: what goes stale, what is superseded, what is rebuilt.

A copy of the session's tiny build (four releases, its window scored) gets a fifth release dated
between its third and fourth (:func:`inserted_release`), dropped into the archive between its
neighbours. ``tempo status`` must name exactly the artefacts whose inputs changed (``stale``) and
the windows that no longer exist (``superseded``); a second materialisation
rebuilds only those, through the named jobs, and leaves every superseded TEST score as it was,
byte for byte. The slow variant inserts a release into a copy of ``data/`` with ``tempo release
derive`` (real-format files) and builds what reads it up to the cutoffs, not the new windows. What is
rebuilt does not depend on the reports' figures: none is drawn (``unrendered.undrawn_figures``: every stored
value the same bytes; the figures are tested in ``core/test_report.py``).
"""
from __future__ import annotations

import json
import shutil
import subprocess
from dataclasses import replace
from pathlib import Path

import dagster as dg
import pytest

from tempo_assets.core.base.errors import TempoInputError
from tempo_assets.cli.graph_cmd import plan_steps, run_steps
from tempo_assets.partitions import parse_window_key, plan_partitions, register_partitions
from tempo_assets.core.inputs.releases import open_archive
from tempo_assets.core.inputs.new_releases import ReleaseRequest, add_release
from tempo_assets_tests.assets.tiny_archive import RELEASES, write_gaf, write_obo
from tempo_assets_tests.cli_here import tempo_here
from tempo_assets_tests.conftest import graph_from, subprocess_env, tiny_copy
from tempo_assets_tests.unrendered import undrawn_figures

# every test materialises a graph: the tiny archive's (module fixture), or a copy of data/'s
pytestmark = pytest.mark.slow

NAMED_JOBS = {"release_job", "cutoff_job", "window_job", "submission_job", "catalog_job"}


def tempo(graph, *args) -> subprocess.CompletedProcess:
    """``tempo ARGS`` on ``graph``, in this process (``cli_here``): what is checked is what the command says
    and writes, not how it is started (a console script costs a new interpreter and the definitions loaded
    again, about 3 CPU s a command)."""
    return tempo_here(*args, env=subprocess_env(graph))


def status(graph) -> dict[str, tuple[str, str]]:
    run = tempo(graph, "status", "--json")
    assert run.returncode == 0, run.stderr
    return {f"{s['asset']}[{s['partition']}]": (s["state"], s["reason"]) for s in json.loads(run.stdout)}


def stored_bytes(graph, asset: str, partition: str) -> dict[str, bytes]:
    folder = graph.store().folder(asset, partition)
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def rematerialise(graph, keep=lambda step: True) -> tuple[list, list[str]]:
    """``materialize --all`` in-process on ``graph``'s archive as it now is, the steps ``keep`` keeps."""
    plan = plan_partitions(open_archive(graph.archive))
    register_partitions(graph.instance, plan)
    lines: list[str] = []
    steps = [step for step in plan_steps(plan, "all") if keep(step)]
    report = run_steps(steps, graph.instance, graph.resources, echo=lines.append)
    return report, lines


def insertion_status(graph, inserted: str, old_windows: list[str]) -> dict:
    """``tempo status`` right after ``inserted`` was dropped into ``graph``'s archive: exactly what read
    the old previous release (and the submission) is ``stale``, the windows that spanned it are
    ``superseded``, the new release and windows are ``missing``. Returns what it observed, with every
    old window's TEST growth and score bytes (to compare after a rebuild)."""
    before_plan = graph.plan
    after_plan = plan_partitions(open_archive(graph.archive))
    nxt = after_plan.releases[after_plan.releases.index(inserted) + 1]
    superseded = [w for w in old_windows if w not in after_plan.windows]
    kept = [w for w in old_windows if w in after_plan.windows]
    new_windows = [w for w in after_plan.windows if w not in old_windows]
    assert superseded and new_windows
    stored = {w: (stored_bytes(graph, "test_score", w), stored_bytes(graph, "test_growth", w)) for w in old_windows}

    states = status(graph)
    for asset in ("reranker_labels", "annotation_growth"):  # read the previous release: it changed
        assert states[f"{asset}[{nxt}]"][0] == "stale", states[f"{asset}[{nxt}]"]
        assert f"the release before {nxt} is now {inserted}" in states[f"{asset}[{nxt}]"][1]
    for asset in ("knn_corpus", "ia_weights"):  # read only their own release: unchanged
        assert states[f"{asset}[{nxt}]"][0] == "ok", states[f"{asset}[{nxt}]"]
    for asset in ("ontology", "release_annotations", "sequences", "embeddings", "stg_annotations",
                  "experimental_annotations"):
        assert states[f"{asset}[{inserted}]"][0] == "missing"
        assert all(states[f"{asset}[{r}]"][0] == "ok" for r in before_plan.releases)
    for window in superseded:
        for asset in ("valid_evaluation_set", "valid_selection", "frozen_recipe", "test_growth", "test_score",
                      "benchmark"):
            state, reason = states[f"{asset}[{window}]"]
            assert state == "superseded" and f"{inserted} now lie inside it" in reason
    for window in kept:
        for asset in ("test_growth", "test_score"):
            assert states[f"{asset}[{window}]"][0] == "ok"
    for window in new_windows:
        assert states[f"valid_selection[{window}]"][0] == "missing"
    latest = after_plan.cutoffs[-1]
    assert states[f"submission[{latest}]"][0] == "stale"
    stale = sorted(k for k, (s, _) in states.items() if s == "stale")
    # exactly what read the old previous release, and the submission (its recipe's window is gone)
    assert stale == sorted([f"reranker_labels[{nxt}]", f"annotation_growth[{nxt}]", f"submission[{latest}]"])
    return {"plan": after_plan, "next": nxt, "latest": latest, "superseded": superseded,
            "new_windows": new_windows, "stored": stored}


def cutoff_steps(seen: dict, inserted: str) -> list[tuple[str, str | None]]:
    """The runs that read the inserted release: its own release and cutoff runs, the next cutoff's
    (its previous release changed) and the registered methods at the new cutoff."""
    methods = list(seen["plan"].methods)  # registered methods (data/ registers two) run at the new cutoff too
    return ([("release_job", inserted), ("cutoff_job", inserted), ("cutoff_job", seen["next"])]
            + [("method_bundle_job", inserted)] * bool(methods) + [("method_job", f"{inserted}|{m}") for m in methods])


def check_rebuilt(graph, seen: dict, report: list, lines: list[str], expected: list) -> None:
    """The rebuild ran exactly ``expected``, each under its named job; no old window's TEST growth or
    score changed, byte for byte."""
    assert all(status_ in ("ok", "skipped") for _, _, status_, _ in report), lines
    ran = [(job, key) for job, key, status_, _ in report if status_ == "ok"]
    assert sorted(ran, key=str) == sorted(expected, key=str), lines
    assert any(line.endswith("(reranker_labels, annotation_growth)")
               and f"cutoff_job {seen['next']}: started run" in line for line in lines), lines
    assert sum(": started run " in line for line in lines) == len(expected)
    for window, (score, growth) in seen["stored"].items():  # superseded (and kept) TEST untouched
        assert stored_bytes(graph, "test_score", window) == score
        assert stored_bytes(graph, "test_growth", window) == growth


def check_insertion(graph, inserted: str, old_windows: list[str]) -> dict:
    """Status before and after a second ``materialize --all``; returns what it observed."""
    seen = insertion_status(graph, inserted, old_windows)
    after_plan, latest = seen["plan"], seen["latest"]
    report, lines = rematerialise(graph)
    expected = (cutoff_steps(seen, inserted) + [("window_job", w) for w in seen["new_windows"]]
                + [("submission_job", latest), ("catalog_job", None)])
    check_rebuilt(graph, seen, report, lines, expected)
    after = status(graph)
    assert {s for s, _ in after.values()} <= {"ok", "superseded"}, [k for k, v in after.items() if v[0] != "ok"]
    submission = graph.store().read_meta("submission", latest)
    assert submission["recipe_window"] == max(
        (w for w in after_plan.windows), key=lambda w: [after_plan.releases.index(r) for r in
                                                      (parse_window_key(w).t0, parse_window_key(w).t1)])
    return seen


INSERTED = "2017-07-15"  # between the tiny build's RELEASES[2] and RELEASES[3]


def gaf_rows(path: Path) -> list[tuple]:
    """``(protein, term, aspect, evidence, day)`` of each row of a tiny archive's GAF (``write_gaf``'s rows)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    return [(c[1], c[4], c[8], c[6], c[13]) for c in (line.split("\t") for line in lines if not line.startswith("!"))]


def inserted_release(build_archive: Path, root: Path) -> Path:
    """The release folder of :data:`INSERTED`: the annotations of ``RELEASES[3]`` of ``build_archive`` dated on or
    before ``RELEASES[2]``, and every other row it added, dated :data:`INSERTED` (so each pair it holds is in the
    next release too, and each of the two years still grows); its GO and FASTA as the tiny archive writes them."""
    nxt = build_archive / "releases" / RELEASES[3]
    previous = int(RELEASES[2].replace("-", ""))
    rows = gaf_rows(next(nxt.glob("*.gaf")))
    old = [row for row in rows if int(row[4]) <= previous]
    added = [row for row in rows if int(row[4]) > previous]
    src = root / "src"
    src.mkdir(parents=True)
    gaf, obo = src / f"goa_{INSERTED}.gaf", src / f"go_{INSERTED}.obo"
    write_gaf(gaf, INSERTED, old + [(*row[:4], INSERTED.replace("-", "")) for row in added[::2]])
    write_obo(obo, INSERTED)
    archive = root / "archive"
    add_release(archive, ReleaseRequest(INSERTED, [gaf], obo, fasta=next(nxt.glob("*.fasta")), fasta_date=RELEASES[0]))
    return archive / "releases" / INSERTED


@pytest.fixture(scope="module")
def tiny_inserted(tiny_build, tmp_path_factory):
    """A copy of the tiny build (materialised, its window scored) with :data:`INSERTED` dropped into its archive."""
    root = tmp_path_factory.mktemp("tiny_insert")
    graph = tiny_copy(tiny_build, root / "graph")
    assert all(s in ("ok", "skipped") for _, _, s, _ in graph.report), graph.report
    old_windows = list(graph.plan.windows)
    shutil.copytree(inserted_release(graph.archive, root / "insert"), graph.archive / "releases" / INSERTED)
    with undrawn_figures():  # the rebuild's reports: what is rebuilt does not depend on their figures
        yield graph, old_windows
    graph.instance.dispose()


def test_inserting_a_release_rebuilds_only_what_changed(tiny_inserted):
    graph, old_windows = tiny_inserted
    seen = check_insertion(graph, INSERTED, old_windows)
    assert seen["superseded"] == old_windows  # the only window spanned the inserted release


def test_materialize_runs_show_under_the_named_jobs(tiny_inserted):
    """Every run ``tempo materialize`` launched is a run of a named job, none of Dagster's ephemeral job."""
    graph, _ = tiny_inserted
    runs = graph.instance.get_runs()
    assert runs and {r.job_name for r in runs} == NAMED_JOBS
    partitions = {(r.job_name, r.tags.get("dagster/partition")) for r in runs}
    plan = graph.plan  # what the first materialisation ran (the insertion's rebuild adds to it)
    expected = {("release_job", r) for r in plan.releases} | {("cutoff_job", c) for c in plan.cutoffs}
    expected |= {("window_job", w) for w in plan.windows} | {("submission_job", plan.cutoffs[-1])}
    expected |= {("catalog_job", None)}
    assert expected <= partitions


def test_data_versions_are_the_content_sha256(tiny_inserted):
    """Dagster's staleness (the UI's Unsynced) agrees: rebuilding to the same bytes changes nothing."""
    from dagster._core.definitions.data_version import StaleStatus
    from dagster._utils.test.data_versions import get_stale_status_resolver

    from tempo_assets.definitions import ASSETS

    graph, _ = tiny_inserted
    plan = plan_partitions(open_archive(graph.archive))
    window = plan.windows[0]
    t0 = parse_window_key(window).t0
    resolver = get_stale_status_resolver(graph.instance, ASSETS)
    assert resolver.get_status(dg.AssetKey("frozen_recipe"), window) == StaleStatus.FRESH
    meta = graph.store().read_meta("knn_corpus", t0)
    record = graph.instance.get_latest_materialization_event(dg.AssetKey("knn_corpus"))
    assert record is not None
    # knn_corpus[t0] rebuilt from the same inputs: the same bytes, so nothing downstream is unsynced
    result = dg.materialize(ASSETS, selection=["knn_corpus"], partition_key=t0, instance=graph.instance,
                            resources=graph.resources)
    assert result.success
    rebuilt = graph.store().read_meta("knn_corpus", t0)
    assert (rebuilt["sha256"], rebuilt["fingerprint"]) == (meta["sha256"], meta["fingerprint"])
    resolver = get_stale_status_resolver(graph.instance, ASSETS)
    for asset in ("test_score", "frozen_recipe", "valid_selection"):
        assert resolver.get_status(dg.AssetKey(asset), window) == StaleStatus.FRESH, asset
    materialisation = graph.instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=dg.AssetKey("knn_corpus"), asset_partitions=[t0]), limit=1).records[0]
    tags = materialisation.event_log_entry.asset_materialization.tags
    assert tags["dagster/data_version"] == meta["sha256"]


def test_a_window_with_no_test_growth_scores_zero_targets(tiny_inserted, tmp_path):
    """TEST growth with no target (nothing grew in (t0, t1]): zero rows with every column, no KeyError."""
    from tempo_assets.assets.common import eval_ontology
    from tempo_assets.core.labels.growth import Growth
    from tempo_assets.core.evaluation.scoring import SUMMARY_COLUMNS
    from tempo_assets.core.pipeline.workflow import CandidateRelease, TestScoring, score_test
    from tempo_assets.resources import ArchiveResource

    graph, old_windows = tiny_inserted
    store, window = graph.store(), parse_window_key(old_windows[0])
    growth = store.open("test_growth", window.key).value.growth
    assert len(growth.targets)  # the stored window did grow: emptied here
    empty = Growth(growth.targets.iloc[0:0], growth.ground_truth.iloc[0:0], growth.known.iloc[0:0])
    t0 = window.t0
    ia = store.open("ia_weights", t0).value
    recipe = store.open("frozen_recipe", window.key).value["recipe"]
    release = CandidateRelease(store.open("knn_corpus", t0).value, store.open("ontology", t0).value,
                               store.open("sequences", t0).value, store.open("release_annotations", t0).value)
    args = (recipe, empty, release, store.open("reranker_labels", window.recipe_labels).value,
            store.open("embeddings", t0).value, [3])
    scoring = TestScoring(eval_ontology(ArchiveResource(root=str(graph.archive)), window.t1, ia, orphans=False), 5, 0)
    # a recipe selected under lafa is scored under lafa: its terms of interest need the t1 ontology
    assert recipe["profile"] == "lafa"
    with pytest.raises(TempoInputError, match="ontology_t1"):
        score_test(*args, scoring)
    scores, methods = score_test(*args, replace(scoring, ontology_t1=store.open("ontology", window.t1).value))
    assert len(scores.summary) == 0
    assert list(scores.summary.columns)[:len(SUMMARY_COLUMNS)] == list(SUMMARY_COLUMNS)
    assert int(scores.counts["targets"].sum()) == 0
    assert set(methods) == {"recipe", "knn", "naive"}
    # what test_score puts in its metadata works on it (this raised KeyError 'truth_sha256')
    assert scores.summary.drop(columns=["truth_sha256"]).round(4).to_markdown(index=False)
    # and it is stored in its open format and read back as written
    from tempo_assets.core.storage.artefacts import ArtefactStore

    scratch = ArtefactStore(tmp_path / "art")
    scratch.write("test_score", window.key, scores, {"cutoff": "2000-01-01", "max_source_date": "2000-01-01",
                                                     "sources": []})
    back = scratch.open("test_score", window.key).value
    assert len(back.summary) == 0 and list(back.summary.columns) == list(scores.summary.columns)


@pytest.fixture
def undrawn():
    with undrawn_figures():  # the catalog's plots: what is rebuilt does not depend on them
        yield


CUTOFF_JOBS = {"release_job", "cutoff_job", "method_bundle_job", "method_job", "catalog_job"}


def test_deriving_a_release_into_a_copy_of_data(demo_build, tmp_path, undrawn):
    """``tempo release derive`` of a date between two releases of data/, after ``materialize --all``
    (a copy of the run's materialised ``data/``, as ``materialize --all`` left it): the graph accepts
    the derived release of real-format files and builds it, the cutoff runs that read it and the
    catalog; the windows it splits are ``superseded`` in status and in the report.

    What an insertion rebuilds in the new windows (their VALID selection, recipe, TEST) is tested on
    the tiny archive above: here no window run is started, and the new windows stay ``missing``.
    """
    graph = graph_from(demo_build, tmp_path / "graph")
    archive = graph.archive
    try:
        assert all(s == "ok" for _, _, s, _ in graph.report), graph.report
        old_windows = list(graph.plan.windows)
        source = archive / "releases" / "2019-01-14"
        older = archive / "releases" / "2017-06-15"
        derive = tempo(graph, "release", "derive", str(archive), "--from", "2019-01-14", "--cutoff", "2018-03-15",
                       "--id", "2018-03-15", "--obo", str(next(older.glob("*.obo.gz"))),
                       "--fasta", str(next(source.glob("*.fasta.gz"))), "--fasta-date", "2014-01-31")
        assert derive.returncode == 0, derive.stderr
        seen = insertion_status(graph, "2018-03-15", old_windows)
        assert len(seen["new_windows"]) == 3
        report, lines = rematerialise(graph, keep=lambda step: step[0] in CUTOFF_JOBS)
        check_rebuilt(graph, seen, report, lines, cutoff_steps(seen, "2018-03-15") + [("catalog_job", None)])
        after = status(graph)
        waiting = {k for k in after if any(k.endswith(f"[{w}]") for w in seen["new_windows"])}
        assert waiting and all(after[k][0] == "missing" for k in waiting), {k: after[k] for k in waiting}
        assert after[f"submission[{seen['latest']}]"][0] == "stale"  # its recipe window is not built yet
        assert {s for k, (s, _) in after.items() if k not in waiting} <= {"ok", "superseded", "stale"}
        assert [k for k, (s, _) in after.items() if s == "stale"] == [f"submission[{seen['latest']}]"]
        # the superseded windows stay in the catalog as history, out of the current results
        report_md = tempo(graph, "report", "--format", "md")
        assert report_md.returncode == 0, report_md.stderr
        for window in seen["superseded"]:
            assert f"| {window} | superseded" in report_md.stdout
    finally:
        graph.instance.dispose()
