"""Evaluation stage, per window: TEST growth (t0, t1] read once after the recipe is verified, the recipe
scored once on it, the benchmark (the recipe beside the baselines and registered methods on TEST), and
the catalog of every window.

TEST is read under a claim (``core.storage.claims``): the first run takes the window's claim before
anything of TEST is read; every later launch is refused, logged and tagged, and reads nothing.
"""

from datetime import datetime, timezone
from typing import Iterator

import dagster as dg
from dagster._core.event_api import PartitionKeyFilter
from dagster._core.storage.asset_check_execution_record import AssetCheckExecutionRecordStatus

from tempo_assets.assets.common import (
    binding_metadata, frozen_rerankers, growth_removals, removal_metadata, role_in, scalar_metadata, verify_recipe,
)
from tempo_assets.assets.labels import warehouse_evaluation_set
from tempo_assets.core.base.faults import fault_point
from tempo_assets.core.evaluation.benchmark import BenchmarkOptions
from tempo_assets.core.evaluation.scoring import ORACLE_LABEL
from tempo_assets.core.evaluation.window_markdown import homology_provenance, summary_markdown, valid_tau_markdown
from tempo_assets.core.pipeline.catalog import catalog_pages, catalog_value, latest_catalog_release
from tempo_assets.core.pipeline.recipe_scoring import RecipeAtT0, ScoreSettings, score_recipe_on_test
from tempo_assets.core.pipeline.window_benchmark import (
    BenchmarkJob, BenchmarkSettings, WindowArtefacts, run_benchmark,
)
from tempo_assets.core.pipeline.workflow import BaselineConfig, release_growth
from tempo_assets.core.recipe.selection import recipe_profile
from tempo_assets.core.storage.artefacts import Artefact, ArtefactSet
from tempo_assets.core.storage.claims import ClaimRefused, ClaimStore
from tempo_assets.graph_state import DefinedGraph, build_catalog
from tempo_assets.io_managers import deferred_in, read_deferred
from tempo_assets.partitions import WINDOWS, parse_window_key
from tempo_assets.resources import ArchiveResource, ArtefactStoreResource, GridResource, WarehouseResource

TEST_POOL = "test_score"
REFUSED_TAG = "tempo/test_refused"  # run tag: the window whose TEST read or score the run refused
READ_KEY, SCORE_KEY = "tempo/test_read", "tempo/test_score_claim"  # observations of a claim taken


def already_materialised(context: dg.AssetExecutionContext, store: ArtefactStoreResource, window: str) -> str | None:
    """Why ``window`` of this asset must not be materialised again: a stored artefact or a recorded one."""
    asset = context.asset_key.to_user_string()
    previous = context.instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=context.asset_key, asset_partitions=[window]), limit=1).records
    if store.store().exists(asset, window) or previous:
        return (f"{asset}[{window}] was already materialised: TEST is read and scored exactly once with the "
                "frozen recipe (docs/PROTOCOL.md). Nothing was read or written. Report the stored score instead.")
    return None


def claim_or_refuse(context: dg.AssetExecutionContext, store: ArtefactStoreResource, window: str,
                    observed: str) -> bool:
    """Take this asset's claim on ``window`` (``core.storage.claims``); ``False`` (logged, tagged) if refused.

    The claim is recorded as an observation ``observed`` (the claiming run id) before anything of
    TEST is read. A claim store that cannot be written raises ``ClaimUnavailable``: the run fails.
    """
    asset = context.asset_key.to_user_string()
    reason = already_materialised(context, store, window)
    if reason is None:
        try:
            claim = ClaimStore.of(store.store()).claim(window, context.run.run_id, asset=asset)
        except ClaimRefused as exc:
            reason = str(exc)
        else:
            context.log_event(dg.AssetObservation(asset_key=context.asset_key, partition=window, metadata={
                observed: claim.run_id, "claimed_at": claim.claimed_at, "host": claim.host, "pid": claim.pid}))
            fault_point(asset, "claimed")
            return True
    # no output: the stored artefact stays the only one, downstream steps are skipped; the checks
    # this run planned on it are restated as they stand on the stored artefact (not "skipped")
    context.log.warning(f"{asset}[{window}] not materialised, TEST not read: {reason}")
    context.log_event(dg.AssetObservation(asset_key=context.asset_key, partition=window,
                                          metadata={REFUSED_TAG: reason}))
    context.instance.add_run_tags(context.run.run_id, {REFUSED_TAG: window})
    for evaluation in stored_check_evaluations(context, window):
        context.log_event(evaluation)
    return False


def stored_check_evaluations(context: dg.AssetExecutionContext, partition: str) -> list[dg.AssetCheckEvaluation]:
    """The checks this run planned on ``partition`` of this asset and of what its refusal skips (the
    assets downstream of it), each with its latest evaluation on the stored artefact (from an earlier
    run), restated for this run, which leaves the artefacts as they are.

    A check already evaluated in this run, or never evaluated on the stored artefact, is left out
    (the latter shows skipped: nothing says it passed).
    """
    graph, storage, run_id = context.job_def.asset_layer.asset_graph, context.instance.event_log_storage, context.run.run_id
    skipped, todo = set(), [context.asset_key]
    while todo:  # this asset and everything downstream of it
        key = todo.pop()
        if key not in skipped:
            skipped.add(key)
            todo += sorted(graph.get(key).child_keys)
    done = {AssetCheckExecutionRecordStatus.SUCCEEDED, AssetCheckExecutionRecordStatus.FAILED}
    out = []
    for key in sorted(graph.asset_check_keys, key=str):
        if key.asset_key not in skipped:
            continue
        history = storage.get_asset_check_execution_history(key, limit=20, partition_filter=PartitionKeyFilter(key=partition))
        mine = [r for r in history if r.run_id == run_id]
        if not mine or mine[0].status in done:
            continue  # not planned by this run, or already evaluated in it
        previous = next((r for r in history if r.run_id != run_id and r.status in done and r.event), None)
        if previous is None:
            continue
        stored = previous.event.dagster_event.event_specific_data
        out.append(dg.AssetCheckEvaluation(
            asset_key=key.asset_key, check_name=key.name, passed=stored.passed, partition=partition,
            metadata={**stored.metadata, "restated_from_run": dg.MetadataValue.text(previous.run_id),
                      "restated": dg.MetadataValue.text(
                          f"this run refused to read TEST again ({context.asset_key.to_user_string()}): the stored "
                          "artefact is unchanged, so its check result stands")},
            target_materialization_data=stored.target_materialization_data, severity=stored.severity,
            description=stored.description, blocking=stored.blocking))
    return out


def test_refusal(instance: dg.DagsterInstance, run_id: str) -> str | None:
    """Why run ``run_id`` skipped ``test_growth`` or ``test_score`` (``None`` when it did not)."""
    run = instance.get_run_by_id(run_id)
    if run is None or REFUSED_TAG not in run.tags:
        return None
    for entry in instance.all_logs(run_id, of_type=dg.DagsterEventType.ASSET_OBSERVATION):
        metadata = entry.dagster_event.event_specific_data.asset_observation.metadata
        if REFUSED_TAG in metadata:
            return str(metadata[REFUSED_TAG].value)
    return f"TEST of window {run.tags[REFUSED_TAG]} refused"


@dg.asset(
    code_version="1",
    partitions_def=WINDOWS, group_name="scoring", pool=TEST_POOL, output_required=False,
    # the inputs read under the test role are dependencies Dagster does not load: they are read
    # through the store after the window's TEST claim, so a refused run loads nothing of TEST
    ins={"frozen_recipe": role_in("valid", dg.IdentityPartitionMapping()), "embeddings": role_in("refit"),
         "experimental_annotations": deferred_in("test"), "release_annotations": deferred_in("test"),
         "ontology": deferred_in("test"), "sequences": deferred_in("test")},
    description=("One row per TEST target (protein, aspect, mode) of growth (t0, t1]. TEST is read ONCE: "
                 "the first run takes the window's TEST claim; every later launch is refused (nothing read, "
                 "nothing written, the stored growth and its checks kept)."),
)
def test_growth(
    context: dg.AssetExecutionContext, archive: ArchiveResource, warehouse: WarehouseResource,
    artefact_store: ArtefactStoreResource, frozen_recipe: Artefact, embeddings: ArtefactSet,
) -> Iterator[dg.Output]:
    """One row per TEST target (protein, aspect, mode) of growth (t0, t1]: evaluation_sets, window_role 'test'.

    Built once, after the recipe froze; ``test_score`` and ``benchmark`` both read it. The window's
    TEST claim is taken before any TEST data is read (its test-role inputs are read after it); a
    refused claim (read, claimed or burned) yields no output, so the run succeeds, its test_score
    and benchmark are skipped, and the stored growth's checks are restated as they stand.
    """
    window = parse_window_key(context.partition_key)
    verify_recipe(frozen_recipe)
    if not claim_or_refuse(context, artefact_store, window.key, READ_KEY):
        return
    experimental_annotations, release_annotations, ontology, sequences = (
        read_deferred(context, artefact_store, archive, name)
        for name in ("experimental_annotations", "release_annotations", "ontology", "sequences"))
    t0, t1 = window.growth_span("test")
    emb, ann_t0, seq_t0 = embeddings.get(t0), release_annotations.get(t0), sequences.get(t0)
    test_read_at = datetime.now(timezone.utc).isoformat(timespec="microseconds")
    # TEST ground truth is read only from here on, after the recipe was verified
    ann_t1, onto_t1, seq_t1 = release_annotations.get(t1), ontology.get(t1), sequences.get(t1)
    python = release_growth(ann_t0.value, ann_t1.value, onto_t1.value, seq_t0.value, seq_t1.value, emb.value["ids"])
    value, rows = warehouse_evaluation_set(warehouse, window, "test", python)
    read = [frozen_recipe, emb, ann_t0, seq_t0, ann_t1, onto_t1, seq_t1, experimental_annotations.get(t0),
            experimental_annotations.get(t1)]
    yield dg.Output(value, metadata=binding_metadata(
        archive.cutoff_of(t1), artefacts=read, window=window.key, window_role="test", warehouse_rows=rows,
        recipe_hash=frozen_recipe.meta["recipe_hash"], recipe_frozen_at=frozen_recipe.meta["written_at"],
        test_read_at=test_read_at, targets=len(value.growth.targets),
        excluded_by_sequence=len(value.growth.removed),
        **removal_metadata(context, artefact_store, growth_removals(value.growth))))


@dg.asset(
    code_version="2",  # 2: the recipe's predictions at t0 on every TEST growth target kept (benchmark reads them)
    partitions_def=WINDOWS, group_name="scoring", pool=TEST_POOL, output_required=False,
    # test_growth and the ontology (t1) are read through the store after the claim (deferred_in)
    ins={"frozen_recipe": role_in("valid", dg.IdentityPartitionMapping()),
         "test_growth": deferred_in("test", dg.IdentityPartitionMapping()), "knn_corpus": role_in("refit"),
         "reranker_labels": role_in("refit"), "ia_weights": role_in("refit"), "embeddings": role_in("refit"),
         # t0 (the candidates') and, for a recipe selected under lafa, t1 (terms of interest, binding filter)
         "ontology": deferred_in("test"), "sequences": role_in("refit"), "release_annotations": role_in("refit")},
    description=("One row per (method, mode, aspect) on TEST (t0, t1]: the frozen recipe scored ONCE. "
                 "Materialising it again is refused (TEST is not read, nothing is written, the stored score "
                 "and its passed checks stay); the headline is f_at_valid_tau."),
)
def test_score(
    context: dg.AssetExecutionContext, archive: ArchiveResource, grid: GridResource,
    artefact_store: ArtefactStoreResource, frozen_recipe: Artefact, knn_corpus: ArtefactSet,
    reranker_labels: ArtefactSet, ia_weights: ArtefactSet, embeddings: ArtefactSet,
    sequences: ArtefactSet, release_annotations: ArtefactSet,
) -> Iterator[dg.Output]:
    """One row per (method, mode, aspect) on TEST (t0, t1]: the frozen recipe at t0, scored once; its
    predictions on every TEST growth target are kept with the score, and ``benchmark`` reads them.

    The recipe reads the corpus, IA and candidate sources of t0; its rerankers are the ones VALID
    fixed its thresholds for, trained on the TRAIN labels (``Window.recipe_labels``).

    Its own claim on the window is taken after the recipe check, before test_growth (and the
    ontology, read under the test role) are read; a refused one (scored, claimed or burned) yields
    no output, the run succeeds and the stored score's checks are restated as they stand.
    """
    window = parse_window_key(context.partition_key)
    recipe, (t0, t1) = verify_recipe(frozen_recipe), window.growth_span("test")
    if not claim_or_refuse(context, artefact_store, window.key, SCORE_KEY):
        return
    test_growth, ontology = (read_deferred(context, artefact_store, archive, n) for n in ("test_growth", "ontology"))
    at_t0 = (s.get(t0) for s in (knn_corpus, ia_weights, embeddings, ontology, sequences, release_annotations))
    lafa = recipe_profile(recipe) == "lafa"  # LAFA's terms of interest and protein-binding filter read t1
    inputs = RecipeAtT0(test_growth, *at_t0, labels=reranker_labels.get(window.recipe_labels),
                        ontology_t1=ontology.get(t1) if lafa else None, rerankers=frozen_rerankers(frozen_recipe, window))
    settings = ScoreSettings(archive.reader(t1).obo_path(t1), grid.ks, grid.bootstrap_samples, grid.seed)
    scored = score_recipe_on_test(recipe, inputs, settings)
    if not scored.targets:  # nothing grew in (t0, t1]: scored with zero targets, said so, not a crash
        context.log.warning(f"test_score[{window.key}]: TEST (t0, t1] has no growth target: zero rows scored")
    yield dg.Output(scored.scores, metadata=binding_metadata(
        archive.cutoff_of(t1), artefacts=[frozen_recipe, *inputs.read()], window=window.key, window_role="test",
        profile=recipe_profile(recipe), recipe_hash=frozen_recipe.meta["recipe_hash"],
        recipe_frozen_at=frozen_recipe.meta["written_at"], test_read_at=test_growth.meta["test_read_at"],
        targets=scored.targets, summary=dg.MetadataValue.md(scored.summary_markdown()),
        recipe_predictions=len(scored.scores.recipe_predictions),
        headline="f_at_valid_tau: F at the recipe's VALID threshold (valid_tau, per mode and aspect)",
        fmax_oracle_label=ORACLE_LABEL, **scalar_metadata(scored.headline),
        **removal_metadata(context, artefact_store, scored.removals)))


class BenchmarkResource(dg.ConfigurableResource):
    """How ``benchmark`` scores: bootstrap size, BLAST and decay settings.

    Both profiles are always scored (``core.evaluation.scoring.PROFILES``: ``lafa``, LAFA's conventions, and
    ``cafaeval``, its defaults); ``decay`` also scores every method trained at ``t-1`` on the same
    TEST targets; ``blast_sensitivity`` is a DIAMOND mode flag (``""`` = DIAMOND's default).
    """

    bootstrap_samples: int = 100
    seed: int = 0
    # any of fmax, wfmax, smin, f_micro_w: each costs one bootstrap per (method, mode, aspect)
    ci_metrics: list[str] = ["fmax", "wfmax", "smin"]
    decay: bool = True
    blast_threads: int = 2
    blast_sensitivity: str = ""

    def options(self) -> BenchmarkOptions:
        return BenchmarkOptions(n_boot=self.bootstrap_samples, seed=self.seed, ci_metrics=tuple(self.ci_metrics))

    def settings(self, ks) -> BenchmarkSettings:
        """These settings with the grid's ``ks``, as ``core.pipeline.window_benchmark`` takes them."""
        baseline = BaselineConfig(blast_threads=self.blast_threads, blast_sensitivity=self.blast_sensitivity)
        return BenchmarkSettings(self.options(), ks, self.decay, baseline)


def window_derived(archive: ArchiveResource, window) -> list[str]:
    """The window's releases that are derived (reconstructed): numbers on them say so."""
    return [r for r in window.releases if getattr(archive.manifest(r), "derived", False)]


@dg.asset(
    code_version="1",
    partitions_def=WINDOWS, group_name="benchmark",
    ins={"test_growth": role_in("test", dg.IdentityPartitionMapping()),
         "test_score": role_in("test", dg.IdentityPartitionMapping()),
         "frozen_recipe": role_in("valid", dg.IdentityPartitionMapping()),
         "valid_evaluation_set": role_in("valid", dg.IdentityPartitionMapping()),
         "knn_corpus": role_in("refit"), "reranker_labels": role_in("refit"), "ia_weights": role_in("refit"),
         "embeddings": role_in("refit"), "release_annotations": role_in("refit"), "ontology": role_in("test"),
         "sequences": role_in("refit"),
         # every cutoff x method partition, read through the role gate: t0 (refit) for the TEST
         # scoring frame, narrowed to TRAIN (t-1) for the frame that fixes a method's VALID threshold
         "method_predictions": role_in("refit")},
)
def benchmark(
    context: dg.AssetExecutionContext, archive: ArchiveResource, grid: GridResource,
    artefact_store: ArtefactStoreResource, benchmark_config: BenchmarkResource, test_growth: Artefact,
    test_score: Artefact, frozen_recipe: Artefact, valid_evaluation_set: Artefact, knn_corpus: ArtefactSet,
    reranker_labels: ArtefactSet, ia_weights: ArtefactSet, embeddings: ArtefactSet,
    release_annotations: ArtefactSet, ontology: ArtefactSet, sequences: ArtefactSet,
    method_predictions: ArtefactSet,
) -> dg.Output:
    """One row per (profile, method, mode, aspect) on TEST (t0, t1], each method at its VALID threshold."""
    fault_point("benchmark", "started")
    window = parse_window_key(context.partition_key)
    recipe, (t0, t1) = verify_recipe(frozen_recipe), window.growth_span("test")
    derived = window_derived(archive, window)
    artefacts = WindowArtefacts(test_growth, test_score, frozen_recipe, valid_evaluation_set, knn_corpus,
                                reranker_labels, ia_weights, embeddings, release_annotations, ontology, sequences,
                                method_predictions)
    run = run_benchmark(BenchmarkJob(
        window, recipe, artefacts, benchmark_config.settings(grid.ks), archive.root,
        {r: archive.reader(r).obo_path(r) for r in (t0, t1)}, derived,
        artefact_store.store().folder("benchmark", window.key)))
    value = run.value
    # the curve images (MBs of PNG) go in an observation of this partition, shown in the UI's event
    # list, so the sidecar that records the time binding stays small
    context.log_event(dg.AssetObservation(asset_key=context.asset_key, partition=window.key,
                                          metadata={k: dg.MetadataValue.md(v) for k, v in run.images.items()}))
    return dg.Output(value, metadata=binding_metadata(
        archive.cutoff_of(t1), artefacts=run.read, window=window.key, window_role="test",
        recipe_hash=frozen_recipe.meta["recipe_hash"], derived=bool(derived), profiles=", ".join(value.profiles),
        bootstrap_samples=int(benchmark_config.bootstrap_samples), **homology_provenance(value.homology),
        report=dg.MetadataValue.path(str(run.report)), table=dg.MetadataValue.md(summary_markdown(value.summary)),
        valid_taus=dg.MetadataValue.md(valid_tau_markdown(value.valid_taus)), valid_tau_source=run.source,
        recipe_at_t0=run.recipe_source,
        curves=f"images in this partition's observation: {', '.join(sorted(run.images))}"))


@dg.asset(code_version="1", group_name="benchmark", deps=[benchmark])
def benchmark_catalog(context: dg.AssetExecutionContext, archive: ArchiveResource,
                      artefact_store: ArtefactStoreResource,
                      defined_graph: dg.ResourceParam[DefinedGraph]) -> dg.Output:
    """One row per window (ready / stale / failed / pending) and the longitudinal plot across windows."""
    store = artefact_store.store()
    built = build_catalog(store, archive.root, defined_graph, context.instance)
    catalog = built["catalog"]
    read = [store.open("benchmark", w) for w, m in built["metas"].items() if m]
    pages = catalog_pages(built, store.folder("benchmark_catalog", None))
    extra = {k: dg.MetadataValue.path(v) if k == "report" else dg.MetadataValue.md(v) for k, v in pages.items()}
    counts = catalog["status"].value_counts().to_dict()
    value = catalog_value(built)
    return dg.Output(value, metadata=binding_metadata(
        archive.cutoff_of(latest_catalog_release(built["metas"], archive.release_ids())), artefacts=read,
        **{f"windows_{k}": int(v) for k, v in counts.items()}, **extra))
