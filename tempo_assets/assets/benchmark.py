"""Per-window benchmark (the recipe beside CAFA/LAFA baselines on TEST) and the window catalog."""

import base64
import tempfile
from pathlib import Path
from typing import Any, Mapping

import dagster as dg
import pandas as pd

from tempo_assets.assets.common import (
    binding_metadata, candidate_source, growth_between, method_predictions, role_in, sequence_map,
)
from tempo_assets.assets.ia import ia_series
from tempo_assets.assets.scoring import verify_recipe
from tempo_assets.io_managers import Artefact, ArtefactSet, ArtefactStore
from tempo_assets.partitions import WINDOWS, parse_window_key, plan_partitions
from tempo_assets.resources import ArchiveResource, ArtefactStoreResource, GridResource, open_archive

BASELINES = ("naive", "blast", "knn", "goa_nonexp")
OLDER = "@t-1"  # suffix of a method trained at the window's t-1 instead of t0 (performance decay)


class BenchmarkResource(dg.ConfigurableResource):
    """How ``benchmark`` scores: bootstrap size, LAFA's conventions, BLAST and decay settings.

    ``lafa`` applies LAFA's conventions (terms in both ontologies, ``prop fill``, no orphans,
    MF protein-binding-only targets dropped); ``decay`` also scores every method trained at
    ``t-1`` on the same TEST targets; ``blast_sensitivity`` is a DIAMOND mode flag
    (``""`` = DIAMOND's default).
    """

    lafa: bool = False
    bootstrap_samples: int = 100
    seed: int = 0
    # any of fmax, wfmax, smin, f_micro_w: each costs one bootstrap per (method, mode, aspect)
    ci_metrics: list[str] = ["fmax", "wfmax", "smin"]
    decay: bool = True
    blast_threads: int = 2
    blast_sensitivity: str = ""

    def options(self):
        from tempo_assets.core.benchmark import BenchmarkOptions

        return BenchmarkOptions(lafa=self.lafa, n_boot=self.bootstrap_samples, seed=self.seed,
                                ci_metrics=tuple(self.ci_metrics))


def blast_predictions(query: Mapping[str, str], corpus: Mapping[str, str], annotations: pd.DataFrame,
                      threads: int, sensitivity: str | None) -> pd.DataFrame:
    """The BLAST baseline: DIAMOND hits of ``query`` in ``corpus``, terms scored by max pident/100."""
    from tempo_assets.core.blast import blast_term_scores, diamond_hits

    with tempfile.TemporaryDirectory(prefix="tempo_blast_") as workdir:
        hits = diamond_hits(query, corpus, workdir, threads=threads, sensitivity=sensitivity or None)
    return blast_term_scores(hits, annotations)


def methods_at(cutoff: str, recipe, inputs: Mapping[str, ArtefactSet], query_embedded, query_sequences,
               targets: pd.DataFrame, ks, config: BenchmarkResource) -> tuple[dict, list[Artefact]]:
    """Every method trained at ``cutoff`` (corpus, labels, IA, annotations as of it) scoring ``targets``."""
    from tempo_assets.core.baselines import goa_nonexperimental_scores
    from tempo_assets.core.selection import CandidateSource

    corpus, labels, ann, onto, seqs = (inputs[n].get(cutoff) for n in (
        "knn_corpus", "reranker_labels", "release_annotations", "ontology", "sequences"))
    proteins = targets["protein"].unique()
    source = candidate_source(corpus.value, query_embedded, proteins, onto.value, max(ks))
    methods = method_predictions(recipe, source, CandidateSource(**labels.value), targets, k_plain=min(ks))
    corpus_sequences = {p: s for p, s in zip(seqs.value["protein"], seqs.value["sequence"])
                        if p in set(corpus.value["ids"])}
    queries = {p: query_sequences[p] for p in proteins if p in query_sequences}
    methods["blast"] = blast_predictions(queries, corpus_sequences, corpus.value["annotations"],
                                         config.blast_threads, config.blast_sensitivity)
    methods["goa_nonexp"] = goa_nonexperimental_scores(ann.value["non_experimental"], targets)
    return methods, [corpus, labels, ann, onto, seqs]


def window_derived(archive: ArchiveResource, window) -> list[str]:
    """The window's releases that are derived (reconstructed): numbers on them say so."""
    return [r for r in window.releases if getattr(archive.manifest(r), "derived", False)]


def inline_png(png: bytes, alt: str) -> str:
    """Markdown image with the PNG inlined as a data URI (the Dagster UI renders it)."""
    return f"![{alt}](data:image/png;base64,{base64.b64encode(png).decode('ascii')})"


def curve_images(curves: pd.DataFrame, summary: pd.DataFrame, folder: Path) -> dict[str, str]:
    """Per mode: Markdown with the F-over-threshold and precision-recall plot of each aspect.

    The PNGs are also written to ``folder`` (``fmax_<mode>_<aspect>.png``, ``pr_<mode>_<aspect>.png``).
    """
    from tempo_assets.core.report import plot_fmax_curve, plot_precision_recall

    out = {}
    for mode in ("NK", "LK", "PK"):
        parts = []
        for aspect in ("BP", "MF", "CC"):
            cell = curves[(curves["mode"] == mode) & (curves["aspect"] == aspect)] if len(curves) else curves
            if cell.empty:
                continue
            group = {m: rows.drop(columns=["method", "mode", "aspect"]) for m, rows in cell.groupby("method")}
            rows = summary[(summary["mode"] == mode) & (summary["aspect"] == aspect)]
            taus = {m: t for m, t in zip(rows["method"], rows["tau"]) if m in group and pd.notna(t)} or None
            fmax = plot_fmax_curve(group, aspect, folder / f"fmax_{mode}_{aspect}.png", taus=taus)
            pr = plot_precision_recall(group, aspect, folder / f"pr_{mode}_{aspect}.png", taus=taus)
            parts += [f"**{mode} {aspect}**", inline_png(fmax, f"F over threshold {mode} {aspect}"),
                      inline_png(pr, f"precision-recall {mode} {aspect}")]
        if parts:
            out[f"curves_{mode}"] = dg.MetadataValue.md("\n\n".join(parts))
    return out


def curve_groups(curves: pd.DataFrame) -> dict[str, dict[str, pd.DataFrame]]:
    """``{mode: {method: df_all}}`` as ``core.report.render_window_report`` takes them."""
    if curves.empty:
        return {}
    return {mode: {m: rows.drop(columns=["method", "mode", "aspect"]) for m, rows in by_mode.groupby("method")}
            for mode, by_mode in curves.groupby("mode")}


@dg.asset(
    partitions_def=WINDOWS, group_name="benchmark",
    ins={"test_score": role_in("test", dg.IdentityPartitionMapping()),
         "frozen_recipe": role_in("valid", dg.IdentityPartitionMapping()),
         "knn_corpus": role_in("refit"), "reranker_labels": role_in("refit"), "ia_weights": role_in("refit"),
         "embeddings": role_in("refit"), "release_annotations": role_in("test"), "ontology": role_in("test"),
         "sequences": role_in("test")},
)
def benchmark(
    context: dg.AssetExecutionContext, archive: ArchiveResource, grid: GridResource,
    artefact_store: ArtefactStoreResource, benchmark_config: BenchmarkResource, test_score: Artefact,
    frozen_recipe: Artefact, knn_corpus: ArtefactSet, reranker_labels: ArtefactSet, ia_weights: ArtefactSet,
    embeddings: ArtefactSet, release_annotations: ArtefactSet, ontology: ArtefactSet, sequences: ArtefactSet,
) -> dg.Output:
    """One row per (method, mode, aspect) on TEST (t0, t1], after test_score: recipe vs baselines, CIs."""
    from tempo_assets.core.benchmark import attach_valid_tau, decay_table, results_frame
    from tempo_assets.core.report import render_window_report, write_report

    window = parse_window_key(context.partition_key)
    recipe, options = verify_recipe(frozen_recipe), benchmark_config.options()
    inputs = {"knn_corpus": knn_corpus, "reranker_labels": reranker_labels, "ia_weights": ia_weights,
              "release_annotations": release_annotations, "ontology": ontology, "sequences": sequences}
    emb_t0, seq_t0 = embeddings.get(window.t0), sequences.get(window.t0)
    # TEST data is read only now, after test_score froze and scored the recipe once
    test = tempo_test_targets(archive, window, release_annotations, ontology, sequences, ia_weights, emb_t0, options)
    query_sequences = dict(zip(seq_t0.value["protein"], seq_t0.value["sequence"]))
    methods, read = methods_at(window.t0, recipe, inputs, emb_t0.value, query_sequences, test["targets"],
                               grid.ks, benchmark_config)
    if benchmark_config.decay:
        older, read_older = methods_at(window.t_minus_1, recipe, inputs, emb_t0.value, query_sequences,
                                       test["targets"], grid.ks, benchmark_config)
        methods.update({f"{m}{OLDER}": p for m, p in older.items()})
        read += read_older
    summary, paired, curves = score_window(test, methods, options)
    summary = attach_valid_tau(summary, curves, recipe_taus(recipe, ("recipe", f"recipe{OLDER}")))
    derived = window_derived(archive, window)
    results = results_frame(summary, window.key, bool(derived))
    folder = artefact_store.store().folder("benchmark", window.key)
    newest = curves[~curves["method"].str.endswith(OLDER)] if len(curves) else curves  # decay lives in its table
    images = curve_images(newest, summary, folder)
    provenance = {"window": window.key, "derived_releases": derived or "none", "lafa": options.lafa,
                  "recipe_hash": frozen_recipe.meta["recipe_hash"], "bootstrap_samples": options.n_boot}
    write_report(folder / "report.html", render_window_report(window.key, results, curve_groups(newest), provenance))
    decay = decay_table(summary, paired, OLDER) if benchmark_config.decay else pd.DataFrame()
    matches = recipe_matches_test_score(summary, test_score.value["summary"]) if not options.lafa else None
    read += [test_score, frozen_recipe, emb_t0, seq_t0, *test["read"]]
    # the curve images (MBs of PNG) go in an observation of this partition, shown in the UI's event
    # list, so the sidecar that records the time binding stays small
    context.log_event(dg.AssetObservation(asset_key=context.asset_key, partition=window.key, metadata=images))
    return dg.Output(
        {"summary": summary, "paired": paired, "decay": decay, "curves": curves, "counts": test["counts"],
         "derived_releases": derived, "lafa": options.lafa, "dropped_protein_binding": test["dropped"]},
        metadata=binding_metadata(
            archive.cutoff_of(window.t1), artefacts=read, window=window.key, window_role="test",
            recipe_hash=frozen_recipe.meta["recipe_hash"], derived=bool(derived), lafa=options.lafa,
            recipe_matches_test_score=("n/a (lafa)" if matches is None else matches),
            report=dg.MetadataValue.path(str(folder / "report.html")),
            table=dg.MetadataValue.md(summary_markdown(summary)),
            curves=f"images in this partition's observation: {', '.join(sorted(images))}"))


def tempo_test_targets(archive: ArchiveResource, window, release_annotations: ArtefactSet, ontology: ArtefactSet,
                       sequences: ArtefactSet, ia_weights: ArtefactSet, emb_t0: Artefact, options) -> dict[str, Any]:
    """TEST growth (t0, t1] exactly as test_score derives it (IA at t0), plus LAFA's filters when asked."""
    from tempo_assets.core.benchmark import lafa_terms_of_interest, protein_binding_only_targets
    from tempo_assets.core.evaluation import EvalOntology

    ia_t0 = ia_weights.get(window.t0)
    ann_t0, onto_t0, seq_t0 = (s.get(window.t0) for s in (release_annotations, ontology, sequences))
    ann_t1, onto_t1, seq_t1 = (s.get(window.t1) for s in (release_annotations, ontology, sequences))
    growth = growth_between(ann_t0.value, ann_t1.value, onto_t1.value,
                            sequence_map(seq_t0.value, emb_t0.value["ids"]), sequence_map(seq_t1.value))
    targets, toi, dropped = growth.targets, None, []
    if options.lafa:
        toi = lafa_terms_of_interest(onto_t0.value, onto_t1.value)
        dropped = sorted(protein_binding_only_targets(growth.ground_truth, growth.known, onto_t1.value))
        targets = targets[~((targets["aspect"] == "MF") & targets["protein"].isin(dropped))]
    eval_ontology = EvalOntology.from_obo(archive.reader(window.t1).obo_path(window.t1), ia=ia_series(ia_t0.value),
                                          orphans=options.orphans)
    return {"targets": targets.reset_index(drop=True), "ground_truth": growth.ground_truth, "known": growth.known,
            "toi": toi, "dropped": dropped, "counts": growth.counts(), "eval_ontology": eval_ontology,
            "read": [ann_t0, onto_t0, ann_t1, onto_t1, seq_t1, ia_t0]}


def score_window(test: Mapping[str, Any], methods: Mapping[str, pd.DataFrame], options):
    """Summary, paired differences (recipe minus each baseline, newer minus older) and curves."""
    from tempo_assets.core.benchmark import paired_differences, score_benchmark

    args = (test["eval_ontology"], test["targets"], test["ground_truth"], test["known"])
    # the older-cutoff variants get their interval from the paired bootstrap (newer - older)
    summary, curves = score_benchmark(*args, methods, options=options, toi=test["toi"],
                                      ci_methods=[m for m in methods if not m.endswith(OLDER)])
    pairs = [(options.reference, b) for b in methods if b != options.reference and not b.endswith(OLDER)]
    pairs += [(m[: -len(OLDER)], m) for m in methods if m.endswith(OLDER)]
    paired = paired_differences(*args, methods, pairs, options=options, toi=test["toi"])
    return summary, paired, curves


def recipe_taus(recipe: Mapping[str, Any], names) -> dict[tuple[str, str, str], float]:
    """``(method, mode, aspect) -> tau`` the recipe fixed on VALID (per mode, else per aspect)."""
    taus = {}
    for aspect, choice in recipe.get("aspects", {}).items():
        for mode in ("NK", "LK", "PK"):
            tau = (choice.get("tau_by_mode") or {}).get(mode, choice.get("tau"))
            if tau is not None:
                taus.update({(name, mode, aspect): float(tau) for name in names})
    return taus


def recipe_matches_test_score(summary: pd.DataFrame, stored: pd.DataFrame) -> bool:
    """Whether the re-derived recipe Fmax equals test_score's stored one in every (mode, aspect)."""
    mine = summary[summary["method"] == "recipe"].set_index(["mode", "aspect"])["fmax"]
    theirs = stored[stored["method"] == "recipe"].set_index(["mode", "aspect"])["fmax"]
    joined = pd.concat([mine.rename("a"), theirs.rename("b")], axis=1).dropna()
    return bool(len(joined) and ((joined["a"] - joined["b"]).abs() < 1e-9).all())


def summary_markdown(summary: pd.DataFrame) -> str:
    columns = [c for c in ("method", "mode", "aspect", "n_targets", "fmax", "fmax_low", "fmax_high", "wfmax",
                           "smin", "f_micro_w", "coverage", "tau", "f_at_tau") if c in summary.columns]
    return summary[columns].round(3).to_markdown(index=False)


# --------------------------------------------------------------------------------------------
# the longitudinal view


def failed_benchmark_runs(instance, windows) -> dict[str, str]:
    """window -> ISO end time of its latest failed run that selected ``benchmark``."""
    from datetime import datetime, timezone

    if instance is None:
        return {}
    failed: dict[str, str] = {}
    records = instance.get_run_records(filters=dg.RunsFilter(statuses=[dg.DagsterRunStatus.FAILURE]))
    for record in records:
        run = record.dagster_run
        key = run.tags.get("dagster/partition")
        selection = run.asset_selection or set()
        if key not in set(windows) or dg.AssetKey("benchmark") not in selection:
            continue
        when = record.end_time or record.create_timestamp.timestamp()
        iso = datetime.fromtimestamp(when, tz=timezone.utc).isoformat(timespec="microseconds")
        failed[key] = max(failed.get(key, ""), iso)
    return failed


def current_shas(store: ArtefactStore, sources, archive) -> tuple[dict, dict]:
    """Current sha256 of every artefact and raw release file named in ``sources``."""
    artefact_sha, file_sha = {}, {}
    manifests = {m.id: m for m in archive.releases()}
    for source in sources:
        if "artefact" in source:
            asset, _, partition = source["artefact"].partition("[")
            partition = partition.rstrip("]")
            partition = None if partition in ("None", "") else partition
            artefact_sha[source["artefact"]] = (store.read_meta(asset, partition)["sha256"]
                                                if store.exists(asset, partition) else None)
        elif "path" in source and "release" in source:
            manifest = manifests.get(str(source["release"]))
            files = {} if manifest is None else {f"releases/{manifest.id}/{f.path}": f.sha256 for f in manifest.files}
            file_sha[(str(source["release"]), str(source["path"]))] = files.get(str(source["path"]))
    return artefact_sha, file_sha


def build_catalog(store: ArtefactStore, archive_root: str, instance=None) -> dict[str, Any]:
    """Catalog of every window of the archive, results of the stored benchmarks, and their decay.

    Returns ``{"catalog", "results", "decay", "metas"}``: the catalog frame (status per window),
    the tidy results table over every window with a stored benchmark (stale ones included and
    flagged by the catalog), and the decay rows with a ``window`` column.
    """
    from tempo_assets.core.benchmark import catalog_frame, results_frame

    archive = open_archive(archive_root)
    windows = plan_partitions(archive).windows
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
    sources = [s for m in metas.values() if m for s in m.get("sources", [])]
    artefact_sha, file_sha = current_shas(store, sources, archive)
    derived = {w: bool(set(parse_window_key(w).releases) & derived_ids) for w in windows}
    catalog = catalog_frame(windows, metas, failed_benchmark_runs(instance, windows), artefact_sha, file_sha,
                            derived)
    # windows the archive no longer has (a release inserted inside them): history, with the reason;
    # their results stay out of the current tables
    from tempo_assets.graph_state import superseded_windows

    history = superseded_windows(store, archive)
    for window in history:
        metas[window] = store.read_meta("benchmark", window) if store.exists("benchmark", window) else None
    catalog = pd.concat([catalog, pd.DataFrame(
        [{"window": w, "status": "superseded", "written_at": (metas[w] or {}).get("written_at", ""),
          "derived": bool(set(w.split("__")) & derived_ids), "reasons": reason} for w, reason in history.items()],
        columns=catalog.columns)], ignore_index=True) if history else catalog
    return {"catalog": catalog, "metas": metas,
            "results": pd.concat(results, ignore_index=True) if results else pd.DataFrame(),
            "decay": pd.concat(decays, ignore_index=True) if decays else pd.DataFrame()}


@dg.asset(group_name="benchmark", deps=[benchmark])
def benchmark_catalog(context: dg.AssetExecutionContext, archive: ArchiveResource,
                      artefact_store: ArtefactStoreResource) -> dg.Output:
    """One row per window (ready / stale / failed / pending) and the longitudinal plot across windows."""
    from tempo_assets.core.report import plot_longitudinal, render_archive_report, write_report

    store = artefact_store.store()
    built = build_catalog(store, archive.root, context.instance)
    catalog, results = built["catalog"], built["results"]
    read = [store.open("benchmark", w) for w, m in built["metas"].items() if m]
    folder = store.folder("benchmark_catalog", None)
    extra: dict[str, Any] = {"table": dg.MetadataValue.md(catalog.to_markdown(index=False))}
    if len(results):
        main = results[~results["method"].str.endswith(OLDER)]
        extra["longitudinal"] = dg.MetadataValue.md(inline_png(
            plot_longitudinal(main, "fmax", folder / "longitudinal_fmax.png"), "Fmax by window"))
        write_report(folder / "report.html", render_archive_report(main, {"catalog": catalog.to_dict("records")}))
        extra["report"] = dg.MetadataValue.path(str(folder / "report.html"))
    ids = archive.release_ids()
    cutoff = max((parse_window_key(m["partition"]).t1 for m in built["metas"].values() if m), default=ids[-1])
    counts = catalog["status"].value_counts().to_dict()
    return dg.Output({"catalog": catalog, "results": results, "decay": built["decay"]}, metadata=binding_metadata(
        archive.cutoff_of(cutoff), artefacts=read, **{f"windows_{k}": int(v) for k, v in counts.items()}, **extra))
