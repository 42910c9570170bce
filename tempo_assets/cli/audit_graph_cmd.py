"""``tempo audit-features`` and ``tempo audit-cutoffs``: leakage audits of the asset graph.

``audit-features`` runs the golden feature rule (docs/PROTOCOL.md) on sampled targets of one cutoff,
from the stored ``reranker_labels`` artefact or rebuilt from a release archive. ``audit-cutoffs``
reads every materialisation recorded in the Dagster instance (``$DAGSTER_HOME``) and checks the
time bindings it recorded. Both exit 0 on pass, 1 on fail; input errors exit 2.
"""
from __future__ import annotations

import argparse
import importlib
import json
import sys
from typing import Any, Callable


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "audit-features",
        help="golden-rule audit: rebuild sampled targets' features without their own labels",
        description=(
            "For sampled targets, recompute every candidate feature with the target's own labels removed "
            "from every input (corpus annotations and IA counts) and compare. Reads the stored "
            "reranker_labels artefact of --cutoff, or rebuilds candidates from --archive at the release "
            "before --release. Exit 0 pass, 1 fail (each leaking feature is named with the number of "
            "proteins it differs for)."),
    )
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--cutoff", metavar="KEY", help="cutoff partition of the stored reranker_labels")
    source.add_argument("--release", metavar="ID",
                        help="with --archive: rebuild the candidates reranker_labels[ID] would use")
    parser.add_argument("--archive", metavar="DIR", help="release archive (with --release)")
    parser.add_argument("--artefacts", metavar="DIR", help="artefact store root (default $TEMPO_ARTEFACTS)")
    parser.add_argument("--sample", type=int, default=20, metavar="N", help="targets audited (default 20)")
    parser.add_argument("--seed", type=int, default=0, metavar="S", help="sampling seed (default 0)")
    parser.add_argument("--k", type=int, default=None,
                        help="neighbours per target (default: all stored; 25 when rebuilding)")
    parser.add_argument("--extra-features", metavar="MODULE:FUNC",
                        help="also audit FUNC(features, inputs) -> features with extra columns")
    parser.add_argument("--out", metavar="REPORT.json", help="write the JSON report here (atomically)")
    parser.set_defaults(func=run_audit_features)

    parser = subparsers.add_parser(
        "audit-cutoffs",
        help="check every recorded materialisation's time binding in the Dagster instance",
        description=(
            "Reads every materialisation of every asset in the instance at $DAGSTER_HOME and fails if "
            "an artefact's sources postdate its cutoff, a window artefact read past what its role "
            "allows (train <= t-1, valid <= t0, test <= t1), a test_score has no earlier "
            "frozen_recipe of its window with the same recipe hash, or a window's TEST was read by more "
            "than one run or its test_growth or test_score materialised more than once. Exit 0 clean, 1 violations."),
    )
    parser.add_argument("--archive", metavar="DIR", help="release archive (default $TEMPO_ARCHIVE)")
    parser.add_argument("--out", metavar="REPORT.json", help="write the JSON report here (atomically)")
    parser.set_defaults(func=run_audit_cutoffs)


# --- audit-features ----------------------------------------------------------------------------


def load_hook(spec: str | None) -> Callable | None:
    """``module:function`` -> the function (the ``extra_features`` hook)."""
    from tempo_assets.core.base.errors import TempoInputError

    if not spec:
        return None
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise TempoInputError(f"--extra-features {spec!r} is not MODULE:FUNC")
    try:
        hook = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise TempoInputError(f"--extra-features {spec!r}: {exc}") from exc
    if not callable(hook):
        raise TempoInputError(f"--extra-features {spec!r} is not callable")
    return hook


def archive_feature_inputs(archive_root: str, release: str, sample: int, seed: int, k: int | None):
    """``(FeatureInputs, proteins)`` rebuilt at the release before ``release``, read at its cutoff.

    The corpus is every protein with a sequence and an experimental term at that release
    (k-mer embeddings); ``sample`` of them, seeded, are the queries; IA counts come from the
    same corpus; the queries' DIAMOND hits in the corpus sequences and their non-experimental
    annotations per evidence group are the recipe's other candidate sources. Nothing of
    ``release`` itself is read.
    """
    from tempo_assets.core.base.liveness import owned_temporary_folder
    from tempo_assets.core.neighbours.blast import homology_hits
    from tempo_assets.core.recipe.candidates import HIT_TOP, nonexp_groups
    import numpy as np

    from tempo_assets.core.labels.annotations import clean_annotations, propagate_annotations, split_by_evidence
    from tempo_assets.core.audits.leakage import FeatureInputs
    from tempo_assets.core.inputs.embedders import KmerEmbedder
    from tempo_assets.core.base.errors import TempoInputError
    from tempo_assets.core.labels.ia import ia_counts
    from tempo_assets.core.neighbours.knn import KnnIndex
    from tempo_assets.core.inputs.cutoff_reader import CutoffReader
    from tempo_assets.partitions import previous_release
    from tempo_assets.resources import open_archive

    archive = open_archive(archive_root)
    prev = previous_release(archive.ids(), release)
    reader = CutoffReader(archive, archive.cutoff_of(prev))
    ontology = reader.ontology(prev)
    frame, _ = reader.gaf_frame(prev)
    experimental, non_experimental = split_by_evidence(frame)
    cleaned, _ = clean_annotations(experimental, ontology)
    sequences = reader.sequences(prev)
    propagated = propagate_annotations(cleaned, ontology)
    ids = sorted(set(propagated["protein"]) & set(sequences))
    if not ids:
        raise TempoInputError(f"release {prev}: no protein has both a sequence and an experimental term",
                              path=archive_root)
    corpus = propagated[propagated["protein"].isin(ids)].reset_index(drop=True)
    matrix = KmerEmbedder().embed([sequences[p] for p in ids])
    rng = np.random.default_rng(int(seed))
    picks = sorted(rng.choice(len(ids), size=min(int(sample), len(ids)), replace=False))
    queries = [ids[i] for i in picks]
    k = int(k or 25)
    neighbours = KnnIndex.build(ids, matrix).search(queries, matrix[picks], k, exclude_self=True)
    depth = {t: float(ontology.depth(t)) for t in corpus["term"].unique()}
    with owned_temporary_folder("tempo_audit_") as workdir:
        hits = homology_hits({p: sequences[p] for p in queries}, {p: sequences[p] for p in ids}, workdir,
                             threads=1, top=HIT_TOP)
    nonexp_cleaned, _ = clean_annotations(non_experimental, ontology)
    nonexp = nonexp_groups(nonexp_cleaned, ontology, queries)
    inputs = FeatureInputs(neighbours, corpus, ia=ia_counts(corpus, ontology), term_depth=depth, k=k, hits=hits,
                           nonexp=nonexp)
    return inputs, queries, prev


def run_audit_features(args: argparse.Namespace) -> int:
    from tempo_assets.core.audits.leakage import audit_golden_rule, feature_inputs_from_labels, sample_proteins
    from tempo_assets.core.base.errors import TempoInputError
    from tempo_assets.resources import open_artefact_store

    hook = load_hook(args.extra_features)
    if args.sample < 1:
        raise TempoInputError(f"--sample must be >= 1, got {args.sample}")
    if args.release is not None:
        if not args.archive:
            raise TempoInputError("--release needs --archive DIR")
        inputs, proteins, built_at = archive_feature_inputs(args.archive, args.release, args.sample,
                                                            args.seed, args.k)
        where = {"archive": str(args.archive), "release": args.release, "candidate_release": built_at}
    else:
        store = open_artefact_store(args.artefacts)
        artefact = store.open("reranker_labels", args.cutoff)
        prev = artefact.meta.get("candidate_release")
        inputs = feature_inputs_from_labels(artefact.value, k=args.k, load_ontology=lambda: (
            store.open("ontology", prev).value if prev and store.exists("ontology", prev) else None))
        proteins = sample_proteins(inputs, args.sample, args.seed)
        where = {"artefacts": str(store.location), "cutoff": args.cutoff, "candidate_release": prev,
                 "reranker_labels_sha256": artefact.meta.get("sha256")}
    report = audit_golden_rule(inputs, proteins, extra_features=hook)
    passed = report.passed and not report.not_audited
    document: dict[str, Any] = {"audit": "audit-features", **report.to_dict(), **where, "sample": args.sample,
                                "seed": args.seed, "k": args.k, "extra_features": args.extra_features}
    document["status"] = "pass" if passed else "fail"
    print(f"golden rule: {len(report.proteins)} target(s) audited of {report.labelled_queries} labelled "
          f"({report.queries} queried), {len(report.features)} feature(s)")
    for name, count in report.leaking_features().items():
        print(f"LEAK {name}: differs for {count} of {len(report.proteins)} protein(s)")
    for name in report.not_audited:
        print(f"NOT AUDITED {name}: a fixed weight whose source counts are unknown")
    print("PASS" if passed else "FAIL")
    write_report(args.out, document)
    return 0 if passed else 1


def write_report(path: str | None, document: dict) -> None:
    if not path:
        return
    from tempo_assets.core.base.io import atomic_write

    with atomic_write(path) as handle:
        handle.write(json.dumps(document, indent=1, sort_keys=True, default=str) + "\n")


# --- audit-cutoffs -----------------------------------------------------------------------------


def instance_records(instance, asset_keys, page: int = 1000) -> list:
    """Every materialisation of ``asset_keys`` in ``instance`` as ``MaterialisationRecord``s."""
    import dagster as dg

    from tempo_assets.core.audits.leakage import MaterialisationRecord
    from tempo_assets.io_managers import unwrap_metadata

    records = []
    for key in asset_keys:
        cursor = None
        while True:
            result = instance.fetch_materializations(dg.AssetRecordsFilter(asset_key=key), limit=page,
                                                     cursor=cursor, ascending=True)
            for rec in result.records:
                event = rec.asset_materialization
                if event is None:
                    continue
                records.append(MaterialisationRecord(
                    asset=key.to_user_string(), partition=event.partition,
                    metadata=unwrap_metadata(event.metadata), storage_id=int(rec.storage_id),
                    timestamp=float(rec.timestamp), run_id=rec.run_id or None))
            if not result.has_more:
                break
            cursor = result.cursor
    return records


def test_read_records(instance, page: int = 1000) -> list:
    """The TEST reads recorded in ``instance``: ``test_growth`` observations with ``tempo/test_read``."""
    import dagster as dg

    from tempo_assets.core.audits.leakage import MaterialisationRecord
    from tempo_assets.io_managers import unwrap_metadata

    reads, cursor = [], None
    while True:
        result = instance.fetch_observations(dg.AssetRecordsFilter(asset_key=dg.AssetKey("test_growth")),
                                             limit=page, cursor=cursor, ascending=True)
        for rec in result.records:
            event = rec.asset_observation
            metadata = unwrap_metadata(event.metadata) if event is not None else {}
            if "tempo/test_read" in metadata:
                reads.append(MaterialisationRecord(
                    asset="test_growth", partition=event.partition, metadata=metadata,
                    storage_id=int(rec.storage_id), timestamp=float(rec.timestamp), run_id=rec.run_id or None))
        if not result.has_more:
            return reads
        cursor = result.cursor


def audit_instance(instance, archive_root: str, asset_keys=None):
    """The ``CutoffAuditReport`` of every materialisation in ``instance``."""
    from tempo_assets.core.audits.leakage import audit_cutoff_records
    from tempo_assets.resources import archive_release_dates

    if asset_keys is None:
        from tempo_assets.definitions import ASSETS

        asset_keys = [a.key for a in ASSETS]
    _, as_of = archive_release_dates(archive_root)
    records = instance_records(instance, asset_keys)
    return audit_cutoff_records(records, as_of, assets=[k.to_user_string() for k in asset_keys],
                                test_reads=test_read_records(instance))


def unfinished_tests(instance, archive_root: str) -> list:
    """``core.storage.claims.WindowTest`` of every window of the archive whose TEST is neither unread nor scored."""
    from tempo_assets.core.inputs.releases import open_archive
    from tempo_assets.graph_state import window_tests
    from tempo_assets.partitions import plan_partitions
    from tempo_assets.resources import open_artefact_store

    windows = plan_partitions(open_archive(archive_root)).windows
    tests = window_tests(open_artefact_store(), windows, instance)
    return [t for t in tests.values() if t.state not in ("unread", "scored")]


def run_audit_cutoffs(args: argparse.Namespace) -> int:
    import dagster as dg

    from tempo_assets.cli.graph_cmd import ensure_dagster_home
    from tempo_assets.resources import default_archive_root
    from tempo_assets.runs import settle_dead_runs

    ensure_dagster_home()
    with dg.DagsterInstance.get() as instance:
        settle_dead_runs(instance, echo=lambda line: print(line, file=sys.stderr))
        report = audit_instance(instance, args.archive or default_archive_root())
        tests = unfinished_tests(instance, args.archive or default_archive_root())
    print(report.table().to_string(index=False))
    for finding in report.findings:
        print(f"VIOLATION [{finding.rule}] {finding.message}")
    for test in tests:  # not violations: windows whose TEST is claimed, burned or read and not scored
        print(f"TEST {test.state} [{test.window}] {test.describe()}")
    print("PASS" if report.passed else f"FAIL: {len(report.findings)} violation(s)")
    write_report(args.out, {"audit": "audit-cutoffs", **report.to_dict()})
    return 0 if report.passed else 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit("run through `tempo audit-features` / `tempo audit-cutoffs`")
