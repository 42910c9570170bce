"""Per-window benchmark (the recipe beside CAFA/LAFA baselines on TEST) and the window catalog."""

import base64
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Mapping

import dagster as dg
import pandas as pd

from tempo_assets.assets.common import binding_metadata, eval_ontology, role_in
from tempo_assets.assets.scoring import verify_recipe
from tempo_assets.core.storage.artefact_types import BenchmarkCatalog
from tempo_assets.core.storage.artefacts import Artefact, ArtefactSet, ArtefactStore
from tempo_assets.core.evaluation.benchmark import results_frame
from tempo_assets.core.pipeline.workflow import OLDER
from tempo_assets.partitions import WINDOWS, parse_window_key, plan_partitions
from tempo_assets.resources import ArchiveResource, ArtefactStoreResource, GridResource, open_archive

BASELINES = ("naive", "blast", "knn", "goa_nonexp")


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

    def options(self):
        from tempo_assets.core.evaluation.benchmark import BenchmarkOptions

        return BenchmarkOptions(n_boot=self.bootstrap_samples, seed=self.seed,
                                ci_metrics=tuple(self.ci_metrics))


def methods_at(cutoff: str, recipe, inputs, query_embedded, query_sequences, targets: pd.DataFrame, ks,
               config: BenchmarkResource, groups=None, labels_at: str | None = None) -> tuple[dict, list[Artefact]]:
    """Every method trained at ``cutoff`` (corpus, annotations, ontology, sequences as of it); the recipe's
    rerankers on the labels of ``labels_at`` (default ``cutoff``; ``Window.recipe_labels`` at t0)."""
    from tempo_assets.core.pipeline.workflow import BaselineConfig, Queries, TrainedAt, every_method

    names = [field.name for field in fields(TrainedAt)]  # ``inputs`` come in TrainedAt's field order
    read = [artefacts.get(labels_at if name == "labels" and labels_at else cutoff)
            for name, artefacts in zip(names, inputs, strict=True)]
    trained = TrainedAt(*(artefact.value for artefact in read))
    baseline = BaselineConfig(blast_threads=config.blast_threads, blast_sensitivity=config.blast_sensitivity)
    return every_method(recipe, trained, Queries(query_embedded, query_sequences, groups), targets, ks, baseline), read


@dataclass(frozen=True)
class RegisteredFrames:
    """Registered methods' frames for one window, named ``method:<key>`` (see core.method_eligibility)."""

    at_t0: dict
    at_t_minus_1: dict
    notes: dict


def registered_methods(archive: ArchiveResource, window, method_predictions: ArtefactSet):
    """``(eligibility, RegisteredFrames, records)`` of the methods in ``ARCHIVE/methods.yaml`` on ``window``.

    The t0 predictions are read through the refit-bounded set, the t-1 ones through the same set
    narrowed to the TRAIN bound, so no method frame past either bound can be loaded.
    """
    from tempo_assets.core.methods.eligibility import benchmark_methods, collect_records, method_eligibility
    from tempo_assets.core.methods.registry import load_registry
    from tempo_assets.core.inputs.releases import archive_release_dates

    specs = load_registry(archive.root).methods
    sets = {window.t0: method_predictions,
            window.t_minus_1: method_predictions.narrowed("train", window.bound_of("train"))}
    records = collect_records(sets, [spec.key for spec in specs])
    status = method_eligibility(specs, records, window, archive_release_dates(archive.root)[1])
    return status, RegisteredFrames(*benchmark_methods(status, records)), records


def window_derived(archive: ArchiveResource, window) -> list[str]:
    """The window's releases that are derived (reconstructed): numbers on them say so."""
    return [r for r in window.releases if getattr(archive.manifest(r), "derived", False)]


def inline_png(png: bytes, alt: str) -> str:
    """Markdown image with the PNG inlined as a data URI (the Dagster UI renders it)."""
    return f"![{alt}](data:image/png;base64,{base64.b64encode(png).decode('ascii')})"


def by_profile_label(frame: pd.DataFrame) -> pd.DataFrame:
    """``method`` renamed ``<method> [<profile>]`` and the ``profile`` column dropped (one plot line each)."""
    if frame is None or not len(frame) or "profile" not in frame.columns:
        return frame
    return frame.assign(method=frame["method"].astype(str) + " [" + frame["profile"].astype(str) + "]").drop(
        columns=["profile"])


def curve_images(curves: pd.DataFrame, summary: pd.DataFrame, folder: Path) -> dict[str, str]:
    """Per mode: Markdown with the F-over-threshold and precision-recall plot of each aspect.

    The PNGs are also written to ``folder`` (``fmax_<mode>_<aspect>.png``, ``pr_<mode>_<aspect>.png``).
    """
    from tempo_assets.core.evaluation.plots import plot_fmax_curve, plot_precision_recall

    curves, summary = by_profile_label(curves), by_profile_label(summary)
    out = {}
    for mode in ("NK", "LK", "PK"):
        parts = []
        for aspect in ("BP", "MF", "CC"):
            cell = curves[(curves["mode"] == mode) & (curves["aspect"] == aspect)] if len(curves) else curves
            if cell.empty:
                continue
            group = {m: rows.drop(columns=["method", "mode", "aspect"]) for m, rows in cell.groupby("method")}
            rows = summary[(summary["mode"] == mode) & (summary["aspect"] == aspect)]
            valid = rows["valid_tau"] if "valid_tau" in rows else pd.Series(float("nan"), index=rows.index)
            taus = {m: t for m, t in zip(rows["method"], valid) if m in group and pd.notna(t)} or None
            fmax = plot_fmax_curve(group, aspect, folder / f"fmax_{mode}_{aspect}.png", taus=taus)
            pr = plot_precision_recall(group, aspect, folder / f"pr_{mode}_{aspect}.png", taus=taus)
            parts += [f"**{mode} {aspect}**", inline_png(fmax, f"F over threshold {mode} {aspect}"),
                      inline_png(pr, f"precision-recall {mode} {aspect}")]
        if parts:
            out[f"curves_{mode}"] = dg.MetadataValue.md("\n\n".join(parts))
    return out


def curve_groups(curves: pd.DataFrame) -> dict[str, dict[str, pd.DataFrame]]:
    """``{mode: {method: df_all}}`` as ``core.evaluation.report.render_window_report`` takes them."""
    if curves.empty:
        return {}
    curves = by_profile_label(curves)
    return {mode: {m: rows.drop(columns=["method", "mode", "aspect"]) for m, rows in by_mode.groupby("method")}
            for mode, by_mode in curves.groupby("mode")}


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
    from tempo_assets.core.evaluation.report import render_window_report, write_report
    from tempo_assets.core.evaluation.results import strata_frame
    from tempo_assets.core.evaluation.scoring import PROFILES
    from tempo_assets.core.base.faults import fault_point
    from tempo_assets.core.pipeline.workflow import (
        WindowNotes, WindowPredictions, benchmark_targets, benchmark_window, union_query, window_homology,
    )

    fault_point("benchmark", "started")
    window = parse_window_key(context.partition_key)
    recipe, options, (t0, t1) = verify_recipe(frozen_recipe), benchmark_config.options(), window.growth_span("test")
    tm1 = window.t_minus_1
    (emb_t0, emb_v), (seq_t0, seq_v), (ia_t0, ia_v) = ((s.get(t0), s.get(tm1)) for s in (embeddings, sequences,
                                                                                            ia_weights))
    onto_v, onto_t0, onto_t1 = ontology.get(tm1), ontology.get(t0), ontology.get(t1)
    # per profile (lafa first): TEST cells, and VALID (t-1, t0] as valid_selection scored it
    # (ontology of t0, IA and embeddings of t-1); LAFA's evaluator drops orphans
    profiles = [(benchmark_targets(test_growth.value, onto_t0.value, onto_t1.value,
                                   eval_ontology(archive, t1, ia_t0.value, orphans=p != "lafa"), p == "lafa"),
                 benchmark_targets(valid_evaluation_set.value, onto_v.value, onto_t0.value,
                                   eval_ontology(archive, t0, ia_v.value, orphans=p != "lafa"), p == "lafa"))
                for p in PROFILES]
    test, valid = profiles[-1]  # cafaeval: every growth target (LAFA's are a subset)
    inputs = (knn_corpus, reranker_labels, release_annotations, ontology, sequences)
    query = (emb_t0.value, dict(zip(seq_t0.value["protein"], seq_t0.value["sequence"])), test.targets)
    methods, read = methods_at(t0, recipe, inputs, *query, grid.ks, benchmark_config, labels_at=window.recipe_labels)
    status, registered, records = registered_methods(archive, window, method_predictions)
    # every method at t-1 once, on VALID targets and (decay) TEST targets together
    older_query = union_query(test.targets if benchmark_config.decay else None, valid.targets, emb_t0.value,
                              emb_v.value, seq_t0.value, seq_v.value)
    older, read_older = methods_at(tm1, recipe, inputs, *older_query[:3], grid.ks, benchmark_config, older_query[3])
    methods.update(registered.at_t0)  # registered methods: their stored predictions at t0 and t-1
    older.update(registered.at_t_minus_1)
    read += read_older + list(records.values())
    derived = window_derived(archive, window)
    source = f"valid_evaluation_set[{window.key}]: VALID growth ({tm1}, {t0}], every method trained at {tm1}"
    homology = window_homology(test.targets, query[1], knn_corpus.get(t0).value, seq_t0.value,
                               threads=benchmark_config.blast_threads)
    value = benchmark_window(profiles, WindowPredictions(methods, older, recipe), options, derived,
                             benchmark_config.decay, source,
                             WindowNotes(notes=registered.notes, method_status=status, homology=homology))
    folder = artefact_store.store().folder("benchmark", window.key)
    newest = value.curves[~value.curves["method"].str.endswith(OLDER)] if len(value.curves) else value.curves
    images = curve_images(newest, value.summary, folder)  # decay lives in its table
    results = results_frame(value.summary, window.key, bool(derived))
    provenance = {"window": window.key, "derived_releases": derived or "none", "profiles": value.profiles,
                  "recipe_hash": frozen_recipe.meta["recipe_hash"], "bootstrap_samples": options.n_boot,
                  "valid_tau_source": source, **homology_provenance(value.homology)}
    strata = strata_frame(value.strata, window.key, bool(derived)) if len(value.strata) else None
    write_report(folder / "report.html", render_window_report(window.key, results, curve_groups(newest), provenance,
                                                              strata=strata))
    read += [test_growth, test_score, frozen_recipe, valid_evaluation_set, emb_t0, emb_v, seq_t0, seq_v, ia_t0,
             ia_v, onto_v, onto_t0, onto_t1]
    # the curve images (MBs of PNG) go in an observation of this partition, shown in the UI's event
    # list, so the sidecar that records the time binding stays small
    context.log_event(dg.AssetObservation(asset_key=context.asset_key, partition=window.key, metadata=images))
    return dg.Output(value, metadata=binding_metadata(
        archive.cutoff_of(t1), artefacts=read, window=window.key, window_role="test",
        recipe_hash=frozen_recipe.meta["recipe_hash"], derived=bool(derived), profiles=", ".join(value.profiles),
        bootstrap_samples=int(options.n_boot), **homology_provenance(value.homology),
        report=dg.MetadataValue.path(str(folder / "report.html")),
        table=dg.MetadataValue.md(summary_markdown(value.summary)),
        valid_taus=dg.MetadataValue.md(valid_tau_markdown(value.valid_taus)), valid_tau_source=source,
        curves=f"images in this partition's observation: {', '.join(sorted(images))}"))


def homology_provenance(info: Mapping[str, Any]) -> dict[str, Any]:
    """The clustering of the TEST targets as metadata / provenance entries (thresholds, n_clusters)."""
    if not info:
        return {}
    return {"clusters": (f"{info['n_clusters']} clusters of {info['n_proteins']} TEST target proteins "
                         f"(largest {info['largest_cluster']}): DIAMOND all-vs-all, >= {info['min_identity']:g} % "
                         f"identity over >= {info['min_coverage']:g} % of the query"),
            "cluster_min_identity": float(info["min_identity"]), "cluster_min_coverage": float(info["min_coverage"]),
            "n_clusters": int(info["n_clusters"]), "identity_corpus": info.get("identity_corpus", "")}


def method_status_markdown(status: pd.DataFrame) -> str:
    """Registered methods per window: status and reason, the VALID-threshold note."""
    columns = ["window", "method", "trained_until", "status", "reason", "valid_tau_note"]
    return status[columns].to_markdown(index=False)


def summary_markdown(summary: pd.DataFrame) -> str:
    """The headline (F at each method's VALID threshold) first; the oracle columns labelled as such."""
    from tempo_assets.core.evaluation.scoring import ORACLE_LABEL

    columns = [c for c in ("profile", "method", "mode", "aspect", "n_targets", "valid_tau", "f_at_valid_tau",
                           "f_at_valid_tau_low", "f_at_valid_tau_high", "f_at_valid_tau_cluster_low",
                           "f_at_valid_tau_cluster_high", "wf_at_valid_tau", "s_at_valid_tau", "f_micro_w_at_valid_tau",
                           "fmax_oracle", "tau_oracle", "wfmax", "smin", "f_micro_w", "coverage", "note")
               if c in summary.columns]
    if "profile" in summary.columns:  # LAFA's profile first, as every report shows them
        from tempo_assets.core.evaluation.scoring import PROFILES

        order = {p: i for i, p in enumerate(PROFILES)}
        summary = summary.iloc[summary["profile"].map(order).argsort(kind="stable")]
    table = summary[columns].round(3).to_markdown(index=False)
    return f"{table}\n\n`fmax_oracle`, `tau_oracle`, `wfmax`, `smin`: {ORACLE_LABEL}."


def valid_tau_markdown(taus: pd.DataFrame) -> str:
    """Every method's VALID threshold per (mode, aspect), with the data it came from."""
    if taus is None or not len(taus):
        return "no VALID thresholds"
    return taus.round(4).to_markdown(index=False)


# --------------------------------------------------------------------------------------------
# the longitudinal view


def build_catalog(store: ArtefactStore, archive_root: str, instance=None) -> dict[str, Any]:
    """Catalog of every window of the archive, results of the stored benchmarks, and their decay.

    Returns ``{"catalog", "results", "decay", "metas"}``: the catalog frame (status per window),
    the tidy results table over every window with a stored benchmark (stale ones included and
    flagged by the catalog), and the decay rows with a ``window`` column.
    """
    from tempo_assets.core.evaluation.benchmark import catalog_frame
    from tempo_assets.core.storage.staleness import window_releases
    from tempo_assets.graph_state import GraphState, superseded_windows

    archive = open_archive(archive_root)
    plan = plan_partitions(archive)
    windows = plan.windows
    derived_ids = {m.id for m in archive.releases() if m.derived}
    metas, results, decays = {}, [], []
    for window in windows:
        if not store.exists("benchmark", window):
            metas[window] = None
            continue
        artefact = store.open("benchmark", window)
        metas[window] = artefact.meta
        value = artefact.value
        derived = bool(set(parse_window_key(window).releases) & derived_ids)
        results.append(results_frame(value["summary"], window, derived))
        if len(value.get("decay", [])):
            decays.append(value["decay"].assign(window=window))
    # each window as `tempo status` states its benchmark, and windows the archive no longer has (a
    # release inserted inside them): history, with the reason; their results stay out of the tables
    graph = GraphState(store, plan, archive=archive, instance=instance)
    history = superseded_windows(store, archive)
    states = {w: (graph.state("benchmark", w).state, graph.state("benchmark", w).reason) for w in windows}
    states.update({w: ("superseded", reason) for w, reason in history.items()})
    history = list(history)
    derived = {w: bool(set(window_releases(w)) & derived_ids) for w in windows + history}
    catalog = catalog_frame(windows + history, states, derived)
    for window in history:
        metas[window] = store.read_meta("benchmark", window) if store.exists("benchmark", window) else None
    return {"catalog": catalog, "metas": metas, "methods": registered_catalog(store, archive_root, windows),
            "results": pd.concat(results, ignore_index=True) if results else pd.DataFrame(),
            "decay": pd.concat(decays, ignore_index=True) if decays else pd.DataFrame()}


def registered_catalog(store: ArtefactStore, archive_root: str, windows) -> pd.DataFrame:
    """Each registered method's status on every window: eligible, excluded (trained after t0),
    failed (with its reason), pending, and whether its numbers are marked (training date undeclared)."""
    from tempo_assets.assets.methods import method_records
    from tempo_assets.core.methods.eligibility import method_catalog
    from tempo_assets.core.methods.registry import load_registry
    from tempo_assets.core.inputs.releases import archive_release_dates

    specs = load_registry(archive_root).methods
    ids, as_of = archive_release_dates(archive_root)
    records = method_records(store, ids, [spec.key for spec in specs])
    return method_catalog(specs, records, [parse_window_key(w) for w in windows], as_of)


@dg.asset(code_version="1", group_name="benchmark", deps=[benchmark])
def benchmark_catalog(context: dg.AssetExecutionContext, archive: ArchiveResource,
                      artefact_store: ArtefactStoreResource) -> dg.Output:
    """One row per window (ready / stale / failed / pending) and the longitudinal plot across windows."""
    from tempo_assets.core.evaluation.plots import plot_longitudinal
    from tempo_assets.core.evaluation.report import render_archive_report, write_report

    store = artefact_store.store()
    built = build_catalog(store, archive.root, context.instance)
    catalog, results = built["catalog"], built["results"]
    read = [store.open("benchmark", w) for w, m in built["metas"].items() if m]
    folder = store.folder("benchmark_catalog", None)
    extra: dict[str, Any] = {"table": dg.MetadataValue.md(catalog.to_markdown(index=False))}
    if len(built["methods"]):
        extra["methods"] = dg.MetadataValue.md(method_status_markdown(built["methods"]))
    if len(results):
        main = results[~results["method"].str.endswith(OLDER)]
        extra["longitudinal"] = dg.MetadataValue.md(inline_png(
            plot_longitudinal(main, "f_at_valid_tau", folder / "longitudinal_f_at_valid_tau.png"),
            "F at the VALID threshold by window"))
        provenance = {"catalog": catalog.to_dict("records")}
        if len(built["methods"]):  # each registered method's status per window
            provenance["registered methods"] = built["methods"][
                ["window", "method", "status", "reason", "valid_tau_note"]].to_dict("records")
        statuses = {row.window: (row.status, row.reasons) for row in catalog.itertuples()}
        write_report(folder / "report.html", render_archive_report(main, provenance, statuses))
        extra["report"] = dg.MetadataValue.path(str(folder / "report.html"))
    ids = archive.release_ids()
    # the latest t1 of the archive's windows (a superseded window's may no longer be a release)
    cutoff = max((parse_window_key(m["partition"]).t1 for m in built["metas"].values()
                  if m and parse_window_key(m["partition"]).t1 in ids), default=ids[-1], key=ids.index)
    counts = catalog["status"].value_counts().to_dict()
    value = BenchmarkCatalog(catalog=catalog, results=results, decay=built["decay"], methods=built["methods"])
    return dg.Output(value, metadata=binding_metadata(
        archive.cutoff_of(cutoff), artefacts=read, **{f"windows_{k}": int(v) for k, v in counts.items()}, **extra))
