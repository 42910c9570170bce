"""One window's benchmark as the ``benchmark`` asset runs it: every method trained at t0 and at t-1
(the recipe, the baselines, the registered methods' stored predictions) scored on the window's TEST
targets at its VALID threshold under each profile, and the window's HTML report.

The asset reads its inputs (:class:`WindowArtefacts`), calls :func:`run_benchmark` and turns the
:class:`BenchmarkRun` into metadata; nothing here knows Dagster.
"""
from __future__ import annotations

from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any, Mapping, Sequence

import pandas as pd

from tempo_assets.core.base.windows import Window
from tempo_assets.core.evaluation import EvalOntology
from tempo_assets.core.evaluation.benchmark import results_frame
from tempo_assets.core.evaluation.report import render_window_report, write_report
from tempo_assets.core.evaluation.results import strata_frame
from tempo_assets.core.evaluation.scoring import PROFILES, ScoringOptions
from tempo_assets.core.evaluation.window_markdown import (
    curve_groups, curve_markdown, draw_curves, homology_provenance,
)
from tempo_assets.core.inputs.releases import archive_release_dates
from tempo_assets.core.labels.ia import ia_series
from tempo_assets.core.methods.eligibility import benchmark_methods, collect_records, method_eligibility
from tempo_assets.core.methods.registry import load_registry
from tempo_assets.core.pipeline.frozen_rerankers import stored_rerankers
from tempo_assets.core.pipeline.workflow import (
    OLDER, BaselineConfig, Queries, TrainedAt, WindowNotes, WindowPredictions, benchmark_targets, benchmark_window,
    every_method, union_query, window_homology,
)
from tempo_assets.core.storage.artefact_types import Benchmark
from tempo_assets.core.storage.artefacts import Artefact, ArtefactSet
from tempo_assets.core.storage.staleness import read_refs, ref

BASELINES = ("naive", "blast", "knn", "goa_nonexp")


@dataclass(frozen=True)
class MethodsAt:
    """Every method trained at ``cutoff`` asked about ``targets`` (``queries``: their embeddings, sequences
    and DIAMOND groups); the recipe's rerankers on the labels of ``labels_at`` (default ``cutoff``;
    ``Window.recipe_labels`` at t0): ``rerankers`` when given (the frozen ones), else fitted on them; the
    recipe's predictions of ``targets`` are ``recipe_predictions`` when given (test_score's), else made here."""

    cutoff: str
    queries: Queries
    targets: pd.DataFrame
    labels_at: str | None = None
    rerankers: Mapping[str, Any] | None = None
    recipe_predictions: pd.DataFrame | None = None


class ReadOnce:
    """The artefacts one benchmark reads, each (asset set, partition) fetched and decoded once.

    The scoring cells read the ontology and sequences at t0 and t-1, and the methods trained there
    read them again; the methods at t0 and the homology both read the t0 corpus. Each first read
    goes through its set's role gate (``ArtefactSet.get``); a later one of the same set and
    partition gets the same :class:`Artefact` (its value decoded once) instead of a second copy.
    """

    def __init__(self) -> None:
        self._held: dict[tuple, tuple[ArtefactSet, Artefact]] = {}

    def get(self, artefacts: ArtefactSet, key: str) -> Artefact:
        """``artefacts.get(key)``, fetched the first time only."""
        held = self._held.get((id(artefacts), key))
        if held is None:  # the set is held beside its artefact, so its id stays its own
            held = self._held[(id(artefacts), key)] = (artefacts, artefacts.get(key))
        return held[1]


def trained_reads(inputs: Sequence[ArtefactSet], at: MethodsAt, reads: ReadOnce) -> list[Artefact]:
    """What every method trained at ``at.cutoff`` reads (``inputs`` in ``TrainedAt``'s field order, the labels
    of ``at.labels_at``), through ``reads``."""
    names = [field.name for field in fields(TrainedAt) if field.name not in ("rerankers", "recipe_predictions")]
    return [reads.get(artefacts, at.labels_at if name == "labels" and at.labels_at else at.cutoff)
            for name, artefacts in zip(names, inputs, strict=True)]


def methods_at(recipe: Mapping[str, Any], inputs: Sequence[ArtefactSet], at: MethodsAt, ks,
               baseline: BaselineConfig, reads: ReadOnce | None = None) -> tuple[dict, list[Artefact]]:
    """Every method trained at ``at.cutoff`` (corpus, labels, annotations, ontology, sequences as of it,
    ``inputs`` in ``TrainedAt``'s field order), and the artefacts it read (through ``reads`` when
    given); the recipe's rerankers are ``at.rerankers`` when given (frozen ones, fitted on the labels
    read here), else fitted on the labels; its predictions ``at.recipe_predictions`` when given."""
    read = trained_reads(inputs, at, reads or ReadOnce())
    trained = TrainedAt(*(artefact.value for artefact in read), rerankers=at.rerankers,
                        recipe_predictions=at.recipe_predictions)
    return every_method(recipe, trained, at.queries, at.targets, ks, baseline), read


def stored_recipe_predictions(artefacts: WindowArtefacts, at_t0: Sequence[Artefact],
                              window: str) -> tuple[pd.DataFrame | None, str]:
    """test_score's predictions of the frozen recipe at t0 on every TEST growth target, and where the
    benchmark's recipe rows come from; ``None`` (the recipe is applied again) when test_score holds none (a
    score stored before they were kept) or read another version of the recipe, the TEST growth or any
    artefact the recipe reads at t0 (``at_t0``) than this benchmark reads."""
    score = artefacts.test_score
    stored = score.value.get("recipe_predictions")
    if stored is None:
        return None, f"applied here at t0: test_score[{window}] was stored before it kept the recipe's predictions"
    used = read_refs(score.meta.get("sources") or [])
    differ = sorted(name for name, sha in ((ref(a.meta.get("asset"), a.meta.get("partition")), a.meta.get("sha256"))
                                           for a in (artefacts.frozen_recipe, artefacts.test_growth, *at_t0))
                    if used.get(name) != sha)
    if differ:
        return None, f"applied here at t0: test_score[{window}] read other versions of {', '.join(differ)}"
    return stored, f"test_score[{window}]: the recipe's predictions at t0 it stored"


@dataclass(frozen=True)
class RegisteredFrames:
    """Registered methods' frames for one window, named ``method:<key>`` (see core.methods.eligibility)."""

    at_t0: dict
    at_t_minus_1: dict
    notes: dict


def registered_methods(archive_root: str, window: Window, method_predictions: ArtefactSet):
    """``(eligibility, RegisteredFrames, records)`` of the methods in ``ARCHIVE/methods.yaml`` on ``window``.

    The t0 predictions are read through the refit-bounded set, the t-1 ones through the same set
    narrowed to the TRAIN bound, so no method frame past either bound can be loaded.
    """
    specs = load_registry(archive_root).methods
    sets = {window.t0: method_predictions,
            window.t_minus_1: method_predictions.narrowed("train", window.bound_of("train"))}
    records = collect_records(sets, [spec.key for spec in specs])
    status = method_eligibility(specs, records, window, archive_release_dates(archive_root)[1])
    return status, RegisteredFrames(*benchmark_methods(status, records)), records


@dataclass(frozen=True)
class WindowArtefacts:
    """What the benchmark of one window reads: its TEST growth and score, frozen recipe and VALID set,
    and the release and cutoff artefact sets (read at t-1, t0 and t1 through the role gate)."""

    test_growth: Artefact
    test_score: Artefact
    frozen_recipe: Artefact
    valid_evaluation_set: Artefact
    knn_corpus: ArtefactSet
    reranker_labels: ArtefactSet
    ia_weights: ArtefactSet
    embeddings: ArtefactSet
    release_annotations: ArtefactSet
    ontology: ArtefactSet
    sequences: ArtefactSet
    method_predictions: ArtefactSet

    def trained_inputs(self) -> tuple[ArtefactSet, ...]:
        """The sets every method trains on, in ``TrainedAt``'s field order."""
        return (self.knn_corpus, self.reranker_labels, self.release_annotations, self.ontology, self.sequences)


@dataclass(frozen=True)
class BenchmarkSettings:
    """How the benchmark scores: bootstrap ``options``, the grid's ``ks``, ``decay`` (every method at t-1
    on TEST too) and the BLAST settings."""

    options: ScoringOptions
    ks: Sequence[int]
    decay: bool = True
    baseline: BaselineConfig = BaselineConfig()


@dataclass(frozen=True)
class BenchmarkJob:
    """One window's benchmark: the verified frozen ``recipe``, what it reads, how it scores, the archive
    (its root, and the OBO file of t0 and t1), the window's ``derived`` releases and the report ``folder``."""

    window: Window
    recipe: Mapping[str, Any]
    artefacts: WindowArtefacts
    settings: BenchmarkSettings
    archive_root: str
    obo_paths: Mapping[str, Path]
    derived: list[str]
    folder: Path


@dataclass(frozen=True)
class BenchmarkRun:
    """The benchmark ``value``, the artefacts it read, its curve images (Markdown per mode), the VALID data
    its thresholds came from (``source``), the written ``report`` and where the recipe's predictions at t0
    came from (``recipe_source``: test_score's stored ones, or applied here)."""

    value: Benchmark
    read: list[Artefact]
    images: dict[str, str]
    source: str
    report: Path
    recipe_source: str = ""


def _read_at(job: BenchmarkJob, reads: ReadOnce) -> dict[str, Artefact]:
    """The window's embeddings, sequences and IA at t0 and t-1 (``*_v``), its ontology at t-1, t0 and t1."""
    a, w = job.artefacts, job.window
    t0, tm1, t1 = w.t0, w.t_minus_1, w.growth_span("test")[1]
    out = {}
    for name, artefacts in (("emb", a.embeddings), ("seq", a.sequences), ("ia", a.ia_weights)):
        out[f"{name}_t0"], out[f"{name}_v"] = reads.get(artefacts, t0), reads.get(artefacts, tm1)
    out["onto_v"], out["onto_t0"], out["onto_t1"] = (reads.get(a.ontology, r) for r in (tm1, t0, t1))
    return out


def _eval_ontology(job: BenchmarkJob, release: str, ia: Artefact, lafa: bool) -> EvalOntology:
    """The cafaeval-exact evaluator's ontology of ``release``, IA attached; LAFA's evaluator drops orphans."""
    return EvalOntology.from_obo(job.obo_paths[release], ia=ia_series(ia.value), orphans=not lafa)


def _profiles(job: BenchmarkJob, at: Mapping[str, Artefact]) -> list:
    """Per profile (lafa first): TEST cells, and VALID (t-1, t0] as valid_selection scored it (ontology of
    t0, IA and embeddings of t-1)."""
    (t0, t1), a = job.window.growth_span("test"), job.artefacts
    return [(benchmark_targets(a.test_growth.value, at["onto_t0"].value, at["onto_t1"].value,
                               _eval_ontology(job, t1, at["ia_t0"], p == "lafa"), p == "lafa"),
             benchmark_targets(a.valid_evaluation_set.value, at["onto_v"].value, at["onto_t0"].value,
                               _eval_ontology(job, t0, at["ia_v"], p == "lafa"), p == "lafa"))
            for p in PROFILES]


def _predictions(job: BenchmarkJob, at: Mapping[str, Artefact], cells: tuple, reads: ReadOnce):
    """``(WindowPredictions, registered methods' status and notes, artefacts read)``: every method at t0 on
    TEST, and at t-1 once on VALID and (decay) TEST targets together (``cells``: the TEST and VALID ones)."""
    (test, valid), w, s, inputs = cells, job.window, job.settings, job.artefacts.trained_inputs()
    sequences_t0 = dict(zip(at["seq_t0"].value["protein"], at["seq_t0"].value["sequence"]))
    frozen = job.artefacts.frozen_recipe

    parsed: dict[str, Any] = {}

    def frozen_on(labels_at: str):
        """The frozen recipe's rerankers where they were fitted on ``labels_at``'s labels, else None (refit);
        parsed once per labels (t0 reads the TRAIN labels, which may be those of t-1)."""
        if labels_at not in parsed:
            parsed[labels_at] = stored_rerankers(job.recipe, frozen.value.get("rerankers"), w,
                                                 frozen.meta.get("rerankers_sha256"), labels_at)
        return parsed[labels_at]

    newest = MethodsAt(w.t0, Queries(at["emb_t0"].value, sequences_t0), test.targets, labels_at=w.recipe_labels,
                       rerankers=frozen_on(w.recipe_labels))
    # the recipe at t0 on the TEST targets is what test_score applied: read, not applied again
    stored, recipe_source = stored_recipe_predictions(job.artefacts, [*trained_reads(inputs, newest, reads),
                                                                      at["emb_t0"]], w.key)
    newest = replace(newest, recipe_predictions=stored)
    methods, read = methods_at(job.recipe, inputs, newest, s.ks, s.baseline, reads)
    status, registered, records = registered_methods(job.archive_root, w, job.artefacts.method_predictions)
    embedded, sequences, targets, groups = union_query(
        test.targets if s.decay else None, valid.targets, at["emb_t0"].value, at["emb_v"].value,
        at["seq_t0"].value, at["seq_v"].value)
    older_at = MethodsAt(w.t_minus_1, Queries(embedded, sequences, groups), targets, rerankers=frozen_on(w.t_minus_1))
    older, read_older = methods_at(job.recipe, inputs, older_at, s.ks, s.baseline, reads)
    methods.update(registered.at_t0)  # registered methods: their stored predictions at t0 and t-1
    older.update(registered.at_t_minus_1)
    predictions = WindowPredictions(methods, older, job.recipe)
    return predictions, (status, registered.notes, recipe_source), read + read_older + list(records.values()), \
        sequences_t0


def _write_report(job: BenchmarkJob, value: Benchmark, source: str) -> tuple[dict[str, str], Path]:
    """The curve images (Markdown per mode, PNGs in the folder) and the window's HTML report."""
    newest = value.curves[~value.curves["method"].str.endswith(OLDER)] if len(value.curves) else value.curves
    drawn = draw_curves(newest, value.summary, job.folder)  # decay lives in its table
    images = curve_markdown(drawn)
    derived, key = bool(job.derived), job.window.key
    results = results_frame(value.summary, key, derived)
    provenance = {"window": key, "derived_releases": job.derived or "none", "profiles": value.profiles,
                  "recipe_hash": job.artefacts.frozen_recipe.meta["recipe_hash"],
                  "bootstrap_samples": job.settings.options.n_boot, "valid_tau_source": source,
                  **homology_provenance(value.homology)}
    strata = strata_frame(value.strata, key, derived) if len(value.strata) else None
    report = job.folder / "report.html"
    write_report(report, render_window_report(key, results, curve_groups(newest), provenance, strata=strata,
                                               drawn=drawn))
    return images, report


def run_benchmark(job: BenchmarkJob) -> BenchmarkRun:
    """Score every method on the window's TEST targets, each at its VALID threshold, and write the report."""
    w, a, s = job.window, job.artefacts, job.settings
    reads = ReadOnce()
    at = _read_at(job, reads)
    profiles = _profiles(job, at)
    test, valid = profiles[-1]  # cafaeval: every growth target (LAFA's are a subset)
    predictions, (status, notes, recipe_source), read, sequences_t0 = _predictions(job, at, (test, valid), reads)
    source = (f"valid_evaluation_set[{w.key}]: VALID growth ({w.t_minus_1}, {w.t0}], "
              f"every method trained at {w.t_minus_1}")
    homology = window_homology(test.targets, sequences_t0, reads.get(a.knn_corpus, w.t0).value, at["seq_t0"].value,
                               threads=s.baseline.blast_threads)
    value = benchmark_window(profiles, predictions, s.options, job.derived, s.decay, source,
                             WindowNotes(notes=notes, method_status=status, homology=homology))
    images, report = _write_report(job, value, source)
    read += [a.test_growth, a.test_score, a.frozen_recipe, a.valid_evaluation_set] + list(at.values())
    return BenchmarkRun(value, read, images, source, report, recipe_source)
