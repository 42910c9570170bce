"""Each SQL check ``dbt_like_sql/checks/<relation>__<rule>.sql`` as a blocking Dagster asset check.

A check's SQL returns the violating rows; the check passes when there are none and carries them
(the first rows, and their count) in its metadata. It guards the asset that materialises its
relation for the partition being checked: the staging checks ``stg_annotations``, the growth
checks ``annotation_growth``, and the evaluation-set checks both window sets.
"""

import warnings
from pathlib import Path

import dagster as dg

from tempo_assets.assets.evaluation import test_growth
from tempo_assets.assets.labels import annotation_growth, stg_annotations, valid_evaluation_set
from tempo_assets.core.storage.warehouse import default_sql_dir
from tempo_assets.partitions import CUTOFFS, RELEASES, WINDOWS, previous_release
from tempo_assets.resources import ArchiveResource, WarehouseResource

warnings.filterwarnings("ignore", message=".*partitions_def on an AssetCheckSpec.*", category=dg.PreviewWarning)

SHOWN_ROWS = 50


def _release_params(archive: ArchiveResource, partition: str) -> dict:
    return {"release_id": partition}


def _growth_params(archive: ArchiveResource, partition: str) -> dict:
    return {"old_release": previous_release(archive.release_ids(), partition), "new_release": partition}


def _no_params(archive: ArchiveResource, partition: str) -> dict:
    return {}


# relation -> the assets that materialise it, their partitions, and the check's parameters
GUARDED = {
    "stg_annotations": ((stg_annotations,), RELEASES, _release_params),
    "stg_term_closure": ((stg_annotations,), RELEASES, _release_params),
    "annotation_growth": ((annotation_growth,), CUTOFFS, _growth_params),
    "evaluation_sets": ((valid_evaluation_set, test_growth), WINDOWS, _no_params),
}


def _sql_check(name: str, asset_def, partitions_def, params, description: str):
    @dg.asset_check(asset=asset_def, name=name, blocking=True, partitions_def=partitions_def,
                    description=description)
    def _check(context: dg.AssetCheckExecutionContext, archive: ArchiveResource,
               warehouse: WarehouseResource) -> dg.AssetCheckResult:
        rows = warehouse.warehouse().run_check(name, **params(archive, context.partition_key))
        shown = rows.head(SHOWN_ROWS)
        return dg.AssetCheckResult(passed=rows.empty, metadata={
            "violations": len(rows),
            "violating_rows": dg.MetadataValue.md(shown.to_markdown(index=False) if len(shown) else "none"),
            "violating_rows_json": dg.MetadataValue.json(shown.astype(str).to_dict("records"))})

    return _check


def sql_checks(sql_dir: Path | None = None) -> list:
    """One asset check per SQL check file, on every asset that materialises the check's relation."""
    checks = []
    for path in sorted(Path(sql_dir or default_sql_dir()).joinpath("checks").glob("*.sql")):
        relation = path.stem.partition("__")[0]
        if relation not in GUARDED:
            raise ValueError(f"{path}: no asset materialises relation {relation!r} (see GUARDED)")
        assets, partitions_def, params = GUARDED[relation]
        grain = path.read_text(encoding="utf-8").splitlines()[0].lstrip("- ").strip()
        checks += [_sql_check(path.stem, asset_def, partitions_def, params, f"SQL check, {grain}")
                   for asset_def in assets]
    return checks


WAREHOUSE_CHECKS = sql_checks()
