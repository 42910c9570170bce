"""Blocking checks on the method assets: the bundle and each method's predictions within their cutoff."""

import dagster as dg

from tempo_assets.assets.methods import method_bundle, method_predictions
from tempo_assets.checks import _within_cutoff_check
from tempo_assets.core.base.dates import parse_date
from tempo_assets.partitions import CUTOFF_METHODS, CUTOFFS
from tempo_assets.resources import ArchiveResource, ArtefactStoreResource


@dg.asset_check(asset=method_predictions, name="method_predictions__within_cutoff", blocking=True,
                partitions_def=CUTOFF_METHODS,
                description="method_predictions: read only its own cutoff's bundle, nothing dated after the cutoff")
def method_predictions__within_cutoff(context: dg.AssetCheckExecutionContext, archive: ArchiveResource,
                                      artefact_store: ArtefactStoreResource) -> dg.AssetCheckResult:
    cutoff = context.partition_key.keys_by_dimension["cutoff"]
    meta = artefact_store.store().read_meta("method_predictions", context.partition_key)
    limit = archive.cutoff_of(cutoff)
    late = [s for s in meta.get("sources", []) if "date" in s and parse_date(s["date"]) > limit]
    bundles = [s["artefact"] for s in meta.get("sources", []) if s.get("artefact", "").startswith("method_bundle[")]
    own = bundles == [f"method_bundle[{cutoff}]"]
    return dg.AssetCheckResult(
        passed=parse_date(meta["max_source_date"]) <= limit and parse_date(meta["cutoff"]) == limit and not late and own,
        metadata={"cutoff": limit.isoformat(), "max_source_date": meta["max_source_date"], "late_sources": len(late),
                  "bundles_read": ", ".join(bundles) or "none", "status": meta.get("status", "unknown")})


METHOD_CHECKS = [_within_cutoff_check(method_bundle, CUTOFFS), method_predictions__within_cutoff]
