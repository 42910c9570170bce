"""Blocking asset checks ``<asset>__<rule>``: they make the time bindings visible in the UI.

Assets already refuse to produce a violating artefact and the IO manager refuses to read one;
these checks re-verify the stored sidecars so a failure shows, and stops downstream, in the run.
"""

import warnings

import dagster as dg

from tempo_assets.assets.evaluation import test_score
from tempo_assets.assets.inputs import embeddings, release_annotations
from tempo_assets.assets.labels import ia_weights, reranker_labels
from tempo_assets.assets.methods import submission
from tempo_assets.assets.neighbours import knn_corpus
from tempo_assets.assets.recipe import frozen_recipe, valid_selection
from tempo_assets.core.base.dates import parse_date
from tempo_assets.core.pipeline.frozen_rerankers import rerankers_problems
from tempo_assets.core.storage.artefacts import ArtefactStore
from tempo_assets.partitions import CUTOFFS, RELEASES, WINDOWS, parse_window_key
from tempo_assets.resources import ArchiveResource, ArtefactStoreResource

# Checks are partitioned like the assets they guard (one evaluation per partition). Dagster marks
# partitioned checks as a preview feature; we rely on it knowingly, so keep the CLI output clean.
warnings.filterwarnings("ignore", message=".*partitions_def on an AssetCheckSpec.*", category=dg.PreviewWarning)


def within_cutoff(store: ArtefactStore, archive: ArchiveResource, asset: str, partition: str) -> dg.AssetCheckResult:
    meta = store.read_meta(asset, partition)
    limit = archive.cutoff_of(partition)
    latest = parse_date(meta["max_source_date"])
    late = [s for s in meta.get("sources", []) if "date" in s and parse_date(s["date"]) > limit]
    return dg.AssetCheckResult(
        passed=latest <= limit and parse_date(meta["cutoff"]) == limit and not late,
        metadata={"cutoff": limit.isoformat(), "max_source_date": latest.isoformat(), "late_sources": len(late)})


def _within_cutoff_check(asset_def, partitions_def):
    name = asset_def.key.to_user_string()

    @dg.asset_check(asset=asset_def, name=f"{name}__within_cutoff", blocking=True, partitions_def=partitions_def,
                    description=f"{name}: nothing it read is dated after its partition's cutoff")
    def _check(context: dg.AssetCheckExecutionContext, archive: ArchiveResource,
               artefact_store: ArtefactStoreResource) -> dg.AssetCheckResult:
        return within_cutoff(artefact_store.store(), archive, name, context.partition_key)

    return _check


@dg.asset_check(asset=release_annotations, name="release_annotations__gaf_rows_within_file_date", blocking=True,
                partitions_def=RELEASES,
                description="no GAF row is dated after its file's declared date (a mislabelled file blocks downstream)")
def release_annotations__gaf_rows_within_file_date(context, artefact_store: ArtefactStoreResource):
    meta = artefact_store.store().read_meta("release_annotations", context.partition_key)
    late = int(meta.get("gaf_rows_after_file_date", 0))
    return dg.AssetCheckResult(passed=late == 0, metadata={
        "gaf_rows_after_file_date": late, "rows_after_cutoff_dropped": int(meta.get("rows_after_cutoff_dropped", 0))})


def window_lineage(meta: dict, archive: ArchiveResource, window_key: str, role: str) -> list[str]:
    """Sources of a window artefact read after the release ``role`` allows (empty = pass)."""
    window = parse_window_key(window_key)
    limit = archive.cutoff_of(window.bound_of(role))
    bad = [s.get("path") or s.get("artefact") for s in meta.get("sources", [])
           if "date" in s and parse_date(s["date"]) > limit]
    ids = archive.release_ids()
    bound = ids.index(window.bound_of(role))
    for source in meta.get("sources", []):
        ref = source.get("artefact", "")
        if "[" in ref:
            key = ref.split("[", 1)[1].rstrip("]")
            if key in ids and ids.index(key) > bound:
                bad.append(ref)
    if parse_date(meta["max_source_date"]) > limit:
        bad.append(f"max_source_date {meta['max_source_date']}")
    return bad


@dg.asset_check(asset=valid_selection, name="valid_selection__no_test_lineage", blocking=True, partitions_def=WINDOWS,
                description="valid_selection read nothing after t0 (no TEST growth) and is tagged valid")
def valid_selection__no_test_lineage(context, archive: ArchiveResource, artefact_store: ArtefactStoreResource):
    meta = artefact_store.store().read_meta("valid_selection", context.partition_key)
    bad = window_lineage(meta, archive, context.partition_key, "valid")
    return dg.AssetCheckResult(passed=not bad and meta.get("window_role") == "valid",
                               metadata={"violations": dg.MetadataValue.json(bad), "window_role": str(meta.get("window_role"))})


@dg.asset_check(asset=frozen_recipe, name="frozen_recipe__hash_matches", blocking=True, partitions_def=WINDOWS,
                description="the stored recipe still hashes to the frozen recipe_hash; its rerankers (if kept) "
                            "still hash to rerankers_sha256, were fitted for this window on its TRAIN labels, "
                            "and their cutoff is within TRAIN (t-1)")
def frozen_recipe__hash_matches(context, archive: ArchiveResource, artefact_store: ArtefactStoreResource):
    from tempo_assets.core.recipe.selection import recipe_hash

    artefact = artefact_store.store().open("frozen_recipe", context.partition_key)
    actual = recipe_hash(artefact.value["recipe"])
    window, fitted, meta = parse_window_key(context.partition_key), artefact.value.get("rerankers"), artefact.meta
    problems = [] if fitted is None else rerankers_problems(fitted, window, meta.get("rerankers_sha256"))
    train_cutoff, fitted_cutoff = archive.cutoff_of(window.bound_of("train")), meta.get("rerankers_cutoff")
    if fitted is not None and not (fitted_cutoff and parse_date(fitted_cutoff) <= train_cutoff):
        problems.append(f"rerankers_cutoff {fitted_cutoff} is not within the TRAIN cutoff {train_cutoff}")
    said = "; ".join(problems) or ("none kept (refitted where read)" if fitted is None else "ok")
    return dg.AssetCheckResult(passed=actual == meta.get("recipe_hash") and not problems,
                               metadata={"recipe_hash": actual, "rerankers": said})


@dg.asset_check(asset=test_score, name="test_score__recipe_frozen_before_test", blocking=True, partitions_def=WINDOWS,
                description="the recipe test_score applied was frozen before TEST was read, and is unchanged")
def test_score__recipe_frozen_before_test(context, artefact_store: ArtefactStoreResource):
    store = artefact_store.store()
    meta = store.read_meta("test_score", context.partition_key)
    recipe = store.read_meta("frozen_recipe", context.partition_key)
    same = meta.get("recipe_hash") == recipe.get("recipe_hash")
    before = recipe["written_at"] < meta["test_read_at"] and meta.get("recipe_frozen_at") == recipe["written_at"]
    return dg.AssetCheckResult(passed=bool(same and before), metadata={
        "recipe_hash": str(recipe.get("recipe_hash")), "frozen_at": recipe["written_at"], "test_read_at": meta["test_read_at"]})


@dg.asset_check(asset=test_score, name="test_score__scored_once", blocking=True, partitions_def=WINDOWS,
                description="TEST of this window was materialised exactly once")
def test_score__scored_once(context):
    records = context.instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=test_score.key, asset_partitions=[context.partition_key]), limit=5).records
    return dg.AssetCheckResult(passed=len(records) <= 1, metadata={"materialisations": len(records)})


@dg.asset_check(asset=test_score, name="test_score__no_lineage_past_t1", blocking=True, partitions_def=WINDOWS,
                description="test_score read nothing after t1")
def test_score__no_lineage_past_t1(context, archive: ArchiveResource, artefact_store: ArtefactStoreResource):
    meta = artefact_store.store().read_meta("test_score", context.partition_key)
    bad = window_lineage(meta, archive, context.partition_key, "test")
    return dg.AssetCheckResult(passed=not bad, metadata={"violations": dg.MetadataValue.json(bad)})


CHECKS = [
    _within_cutoff_check(release_annotations, RELEASES),
    release_annotations__gaf_rows_within_file_date,
    _within_cutoff_check(embeddings, RELEASES),
    _within_cutoff_check(knn_corpus, CUTOFFS),
    _within_cutoff_check(ia_weights, CUTOFFS),
    _within_cutoff_check(reranker_labels, CUTOFFS),
    _within_cutoff_check(submission, CUTOFFS),
    valid_selection__no_test_lineage,
    frozen_recipe__hash_matches,
    test_score__recipe_frozen_before_test,
    test_score__scored_once,
    test_score__no_lineage_past_t1,
]
