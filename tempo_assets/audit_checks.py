"""Blocking asset checks of the leakage audits (``core/audits/leakage.py``).

``reranker_labels__golden_rule`` re-runs the golden feature rule on a seeded sample of each
materialised ``reranker_labels`` partition: every candidate feature of a sampled target is rebuilt
with the target's own labels removed from the corpus and from the IA counts, and must not move.
"""

import warnings

import dagster as dg

from tempo_assets.assets.labels import reranker_labels
from tempo_assets.partitions import CUTOFFS
from tempo_assets.resources import ArtefactStoreResource

# Checks are partitioned like the assets they guard (one evaluation per partition). Dagster marks
# partitioned checks as a preview feature; we rely on it knowingly, so keep the CLI output clean.
warnings.filterwarnings("ignore", message=".*partitions_def on an AssetCheckSpec.*", category=dg.PreviewWarning)

GOLDEN_RULE_SAMPLE = 20
GOLDEN_RULE_SEED = 0


def golden_rule_report(store, partition: str, sample: int = GOLDEN_RULE_SAMPLE, seed: int = GOLDEN_RULE_SEED,
                       extra_features=None):
    """The golden-rule audit of ``reranker_labels[partition]`` read from an ``ArtefactStore``."""
    from tempo_assets.core.audits.leakage import audit_golden_rule, feature_inputs_from_labels, sample_proteins

    artefact = store.open("reranker_labels", partition)
    prev = artefact.meta.get("candidate_release")
    inputs = feature_inputs_from_labels(artefact.value, load_ontology=lambda: (
        store.open("ontology", prev).value if prev and store.exists("ontology", prev) else None))
    # an empty sample means no target holds a label, so none can leak through its own labels
    return audit_golden_rule(inputs, sample_proteins(inputs, sample, seed), extra_features=extra_features)


@dg.asset_check(asset=reranker_labels, name="reranker_labels__golden_rule", blocking=True,
                partitions_def=CUTOFFS,
                description="no candidate feature of a sampled target moves when its own labels are removed "
                            "(corpus and IA counts); seeded sample of 20 targets")
def reranker_labels__golden_rule(context: dg.AssetCheckExecutionContext,
                                 artefact_store: ArtefactStoreResource) -> dg.AssetCheckResult:
    report = golden_rule_report(artefact_store.store(), context.partition_key)
    return dg.AssetCheckResult(
        passed=report.passed and not report.not_audited,
        metadata={"proteins_audited": len(report.proteins), "labelled_queries": report.labelled_queries,
                  "features": len(report.features),
                  "leaking_features": dg.MetadataValue.json(report.leaking_features()),
                  "not_audited": dg.MetadataValue.json(report.not_audited)})


AUDIT_CHECKS = [reranker_labels__golden_rule]
