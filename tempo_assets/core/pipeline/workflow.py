"""The pipeline between releases: growth, candidate sources, method predictions, scoring a window.

Asset bodies call these (one or two calls each) on the typed values of ``core/storage/artefact_types.py``;
nothing here knows Dagster. Every (mode, aspect) cell is scored by ``core/evaluation/scoring.py``.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Iterable, Mapping, Sequence

import pandas as pd

from tempo_assets.core.base.liveness import owned_temporary_folder
from tempo_assets.core.storage.artefact_types import (
    Benchmark, Embeddings, EvaluationSet, FrozenRecipe, KnnCorpus, ReleaseAnnotations, Scores, ValidSelection,
)
from tempo_assets.core.recipe.baselines import goa_nonexperimental_scores
from tempo_assets.core.evaluation.benchmark import decay_table, paired_differences
from tempo_assets.core.recipe.candidates import CandidateSource, nonexp_groups
from tempo_assets.core.base.errors import TempoInputError
from tempo_assets.core.labels.growth import Growth
from tempo_assets.core.neighbours.homology import MIN_COVERAGE, MIN_IDENTITY, target_homology
from tempo_assets.core.labels.ia import ia_counts
from tempo_assets.core.base.vocabulary import MODES
from tempo_assets.core.evaluation.cells import CellFrames
from tempo_assets.core.evaluation.scoring import (
    ScoringOptions, recipe_valid_taus, score_methods, score_profile, taus_of,
)
from tempo_assets.core.recipe.selection import recipe_hash, recipe_profile, select_recipe_candidates
from tempo_assets.core.recipe.valid_grid import cafa_scorer
from tempo_assets.core.recipe.frozen_recipe import BuiltForRecipe, fit_rerankers
from tempo_assets.core.base.windows import Window
from tempo_assets.core.pipeline.frozen_rerankers import kept_rerankers
from tempo_assets.core.pipeline.corpus_neighbours import neighbours_of, recipe_hits, term_depths
from tempo_assets.core.pipeline.recipe_predictions import (
    blast_predictions, method_predictions, plain_predictions, recipe_chunks,
)
from tempo_assets.core.pipeline.benchmark_inputs import (
    TestTargets, WindowHomology, mark_rows, merge_embeddings, restrict, valid_taus,
)
from tempo_assets.core.pipeline.window_growth import (
    growth_between, growth_differences, lafa_growth, sequence_map, warehouse_growth,
)

OLDER = "@t-1"  # suffix of a method trained at the window's t-1 instead of t0 (performance decay)


# --------------------------------------------------------------------------------------------
# growth and corpora


def release_growth(old: ReleaseAnnotations, new: ReleaseAnnotations, new_ontology, old_sequences: pd.DataFrame,
                   new_sequences: pd.DataFrame, embedded_ids: Iterable[str]) -> Growth:
    """Growth between two releases, targets restricted to proteins embedded at the older one."""
    return growth_between(old, new, new_ontology, sequence_map(old_sequences, embedded_ids),
                          sequence_map(new_sequences))


def build_corpus(embedded: Mapping[str, Any], annotations: Mapping[str, Any]) -> KnnCorpus:
    """Corpus of the proteins with both an embedding and an experimental term at one release."""
    experimental = annotations["experimental"]
    position = {p: i for i, p in enumerate(embedded["ids"])}
    ids = sorted(set(experimental["protein"]) & set(position))
    return KnnCorpus(ids=ids, matrix=embedded["matrix"][[position[p] for p in ids]],
                     annotations=experimental[experimental["protein"].isin(ids)].reset_index(drop=True),
                     embedder_id=embedded["embedder_id"])


@dataclass(frozen=True)
class CandidateRelease:
    """The release candidates are built at: its KNN corpus and ontology, and optionally its
    ``sequences`` frame (for DIAMOND hits) and ``release_annotations`` (non-experimental annotations)."""

    corpus: KnnCorpus
    ontology: Any
    sequences: pd.DataFrame | None = None
    annotations: ReleaseAnnotations | None = None


@dataclass(frozen=True)
class Queries:
    """The proteins' embeddings, and optionally their sequences and the groups DIAMOND searches them in."""

    embedded: Embeddings
    sequences: Mapping[str, str] | None = None
    groups: Sequence[Iterable[str]] | None = None


def candidate_source(release: CandidateRelease, queries: Queries, proteins, k: int,
                     growth: Growth | None = None) -> CandidateSource:
    """Neighbours of ``proteins`` in ``release``'s corpus with term weights (a ``core.recipe.candidates.CandidateSource``).

    IA and depth come from the release's corpus and ontology, IA as counts so each candidate's IA
    leaves its own protein out (the golden rule). With ``growth`` the source also carries the ground
    truth (with its ``mode``) and known terms. With the release's ``sequences`` it carries the
    DIAMOND hits of ``proteins`` (their sequences from ``queries.sequences``, else from the
    release's) in the corpus proteins' sequences; with its ``annotations`` the proteins'
    non-experimental annotations per evidence group: the recipe's other candidate sources
    (``core.recipe.candidates``).
    """

    corpus, ontology = release.corpus, release.ontology
    proteins = list(dict.fromkeys(map(str, proteins)))
    neighbours = neighbours_of(corpus, queries.embedded, proteins, k)
    depth = term_depths(ontology, corpus["annotations"]["term"].unique())
    hits = nonexp = None
    if release.sequences is not None:
        sequences = release.sequences
        by_protein = queries.sequences if queries.sequences is not None else dict(zip(sequences["protein"],
                                                                                      sequences["sequence"]))
        hits = recipe_hits(proteins, by_protein, corpus, sequences, queries.groups)
    if release.annotations is not None:
        nonexp = nonexp_groups(release.annotations["non_experimental_cleaned"], ontology, proteins)
    return CandidateSource(
        neighbours=neighbours, corpus_annotations=corpus["annotations"],
        ground_truth=None if growth is None else growth.ground_truth,
        known=None if growth is None else growth.known,
        ia=ia_counts(corpus["annotations"], ontology), term_depth=depth, hits=hits, nonexp=nonexp)


def reranker_labels(corpus: KnnCorpus, embedded_prev: Embeddings, growth: Growth, ontology_prev, k: int,
                    sequences_prev: pd.DataFrame | None = None,
                    annotations_prev: ReleaseAnnotations | None = None) -> CandidateSource:
    """Labelled candidates of a cutoff: growth (prev, cutoff] targets searched in the prev corpus.

    Every candidate source reads the candidate release (prev): KNN and DIAMOND in its corpus, its
    non-experimental annotations, its IA and depth; never the label release.
    """
    return candidate_source(CandidateRelease(corpus, ontology_prev, sequences_prev, annotations_prev),
                            Queries(embedded_prev), growth.targets["protein"].unique(), k, growth=growth)


# --------------------------------------------------------------------------------------------
# methods


def verify_recipe(frozen: FrozenRecipe | Mapping[str, Any], recorded_hash: str | None, where: str) -> dict:
    """The frozen recipe, after checking its content still hashes to what was frozen."""

    actual = recipe_hash(frozen["recipe"])
    if actual != frozen["recipe_hash"] or actual != recorded_hash:
        raise TempoInputError(f"frozen recipe of {where} hashes to {actual}, not the frozen {recorded_hash}: "
                              "refusing to score TEST")
    return frozen["recipe"]


@dataclass(frozen=True)
class TrainedAt:
    """What every method trained at one cutoff reads: corpus, labels, annotations, ontology, sequences."""

    corpus: KnnCorpus
    labels: CandidateSource
    annotations: ReleaseAnnotations
    ontology: Any
    sequences: pd.DataFrame
    rerankers: Mapping[str, Any] | None = None  # the recipe's, fitted on ``labels`` (frozen ones); None: fit
    # the recipe's predictions of the targets already made by the same recipe on the same inputs (test_score's
    # at t0, ``Scores.recipe_predictions``); None: the recipe is applied here
    recipe_predictions: pd.DataFrame | None = None

    def release(self) -> CandidateRelease:
        """The cutoff's release as the recipe's candidates read it."""
        return CandidateRelease(self.corpus, self.ontology, self.sequences, self.annotations)


@dataclass(frozen=True)
class BaselineConfig:
    """The benchmark's BLAST settings (``blast_sensitivity`` is a DIAMOND mode flag, ``""`` = default)."""

    blast_threads: int = 2
    blast_sensitivity: str = ""


def every_method(recipe: Mapping[str, Any], trained: TrainedAt, queries: Queries, targets: pd.DataFrame, ks,
                 config: BaselineConfig) -> dict[str, pd.DataFrame]:
    """Every method trained at one cutoff scoring ``targets``: recipe, KNN, naive, BLAST, non-experimental GOA.

    ``queries`` hold the targets' embeddings and sequences; its ``groups`` (protein sets covering
    ``targets``) run DIAMOND once per group, each protein in the first group holding it: DIAMOND
    picks its algorithm by the number of queries, so a protein's hits depend on the set it is
    searched with, and TEST targets keep the hits they get alone when VALID targets join them (see
    :func:`union_query`).
    """

    proteins = targets["protein"].unique()
    if trained.recipe_predictions is None:
        source = candidate_source(trained.release(), queries, proteins, max(ks))
        methods = method_predictions(recipe, source, trained.labels, targets, k_plain=min(ks),
                                     ontology=trained.ontology, built=BuiltForRecipe(rerankers=trained.rerankers))
    else:  # the recipe's predictions were made already: the plain baselines read only the KNN neighbours
        source = candidate_source(CandidateRelease(trained.corpus, trained.ontology), queries, proteins, max(ks))
        methods = {"recipe": trained.recipe_predictions, **plain_predictions(source, targets, min(ks))}
    methods["blast"] = _blast_by_group(trained, queries, proteins, config)
    methods["goa_nonexp"] = goa_nonexperimental_scores(trained.annotations["non_experimental"], targets)
    return methods


def _blast_by_group(trained: TrainedAt, queries: Queries, proteins, config: BaselineConfig) -> pd.DataFrame:
    """The BLAST baseline of ``proteins``, DIAMOND run once per query group (:func:`every_method`)."""
    in_corpus = set(trained.corpus["ids"])
    corpus_sequences = {p: s for p, s in zip(trained.sequences["protein"], trained.sequences["sequence"])
                        if p in in_corpus}
    seen: set[str] = set()
    hits = []
    for group in (queries.groups or [proteins]):
        chosen = [p for p in dict.fromkeys(group) if p not in seen and p in queries.sequences]
        seen.update(chosen)
        if chosen or not hits:
            hits.append(blast_predictions({p: queries.sequences[p] for p in chosen}, corpus_sequences,
                                          trained.corpus["annotations"], config.blast_threads,
                                          config.blast_sensitivity))
    return hits[0] if len(hits) == 1 else pd.concat(hits, ignore_index=True)


# --------------------------------------------------------------------------------------------
# VALID, TEST and the benchmark


@dataclass(frozen=True)
class ValidScoring:
    """How VALID is scored: the evaluator, and with ``lafa`` LAFA's conventions (``ontology_t0`` gives
    the terms of interest)."""

    eval_ontology: Any
    lafa: bool = False
    ontology_t0: Any = None


@dataclass(frozen=True)
class TestScoring:
    """How TEST is scored: the evaluator, the bootstrap, for a recipe selected under ``lafa`` the
    ``t1`` ontology (its terms of interest), and the recipe's frozen ``rerankers`` (None: refit)."""

    eval_ontology: Any
    n_boot: int
    seed: int
    ontology_t1: Any = None
    rerankers: Mapping[str, Any] | None = None


def select_on_valid(grid: Mapping[str, Any], window: Window, release: CandidateRelease, labels: CandidateSource,
                    embedded: Embeddings, growth: Growth,
                    scoring: ValidScoring) -> tuple[ValidSelection, dict[str, pd.DataFrame]]:
    """The VALID grid and recipe, and the recipe beside plain KNN and naive on the same VALID targets.

    ``release`` is the ``t-1`` release (its ``sequences`` and ``annotations`` give the VALID
    candidates' DIAMOND hits and non-experimental annotations; without them only KNN candidate sets
    can be selected). With ``scoring.lafa`` the grid is scored under LAFA's conventions, as
    ``benchmark`` scores VALID and TEST with ``lafa`` (terms of interest of the ``t-1`` and
    ``scoring.ontology_t0`` ontologies, ``prop fill``, ``eval_ontology`` built without orphans, MF
    protein-binding-only targets dropped), so the recipe's threshold and choices are made under the
    conventions it is reported under; the recipe records it (``profile``,
    :func:`assets.recipe.recipe_profile`) and ``score_test`` scores it under the same. The recipe's
    rerankers are fitted here once, on ``labels`` (``window.recipe_labels``), and returned with the
    selection (LightGBM's model text, ``core.pipeline.frozen_rerankers``) to be frozen with the recipe.
    """

    ks, lafa, ontology_t_minus_1 = grid["ks"], scoring.lafa, release.ontology
    toi = None
    scored_growth = growth
    if lafa:
        if scoring.ontology_t0 is None:
            raise TempoInputError("a LAFA selection needs the t0 ontology (terms of interest)", path="select_on_valid")
        scored_growth, toi, _ = lafa_growth(growth, ontology_t_minus_1, scoring.ontology_t0)
    valid = candidate_source(release, Queries(embedded), scored_growth.targets["protein"].unique(), max(ks),
                             growth=scored_growth)
    scorer = cafa_scorer(scoring.eval_ontology, toi=None if toi is None else sorted(toi),
                         prop="fill" if lafa else "max")
    embedder = release.corpus["embedder_id"]
    grid_frame, recipe, built = select_recipe_candidates(
        grid, train_sets={embedder: labels}, valid_sets={embedder: valid}, scorer=scorer, window=window.key,
        ontology=ontology_t_minus_1)
    recipe["profile"] = "lafa" if lafa else "cafaeval"
    # once per window: frozen with the recipe, read on TEST; on the candidates the grid built for its cells
    rerankers = fit_rerankers(recipe, labels, valid, labelled=built.labelled)
    methods = method_predictions(recipe, valid, labels, scored_growth.targets, k_plain=min(ks),
                                 ontology=ontology_t_minus_1,
                                 built=BuiltForRecipe(rerankers=rerankers, features=built.features))
    summary, _ = score_methods(scoring.eval_ontology, scored_growth.targets, scored_growth.ground_truth,
                               scored_growth.known, methods, ScoringOptions(n_boot=0, lafa=lafa), toi=toi)
    return ValidSelection(grid=grid_frame, recipe=recipe, valid_counts=growth.counts(), valid_summary=summary,
                          rerankers=kept_rerankers(rerankers, window)), methods


def score_test(recipe: Mapping[str, Any], growth: Growth, release: CandidateRelease, labels: CandidateSource,
               embedded: Embeddings, ks, scoring: TestScoring) -> tuple[Scores, dict[str, pd.DataFrame]]:
    """The frozen recipe at t0 beside plain KNN and naive, scored once on TEST growth.

    Scored under the profile the recipe was selected under (:func:`assets.recipe.recipe_profile`),
    the conventions its VALID thresholds were fixed under: ``lafa`` filters the growth by
    :func:`lafa_growth` (needs ``scoring.ontology_t1``) and expects ``scoring.eval_ontology`` built
    without orphans.

    ``labels`` are the TRAIN labels the recipe's rerankers were selected with (``Window.recipe_labels``):
    the rerankers VALID fixed the thresholds for, fed by the ``t0`` corpus and candidate sources; read as
    frozen (``scoring.rerankers``, fitted once by :func:`select_on_valid`) when the recipe carries them.

    ``release`` is the ``t0`` release: its corpus and ontology, and its ``sequences`` and
    ``annotations`` (the recipe's DIAMOND and non-experimental GOA candidate sources, as
    ``every_method`` reads them for the benchmark).

    F at the threshold the recipe froze on VALID is the headline: per (mode, aspect) the threshold
    maximising F on VALID (``tau_by_mode``, the rule ``benchmark`` applies to every method, so
    both report the same recipe number); the recipe gets bootstrap CIs of it and of the oracle Fmax.

    The recipe is applied to every growth target (``Scores.recipe_predictions``, which ``benchmark``
    reads for the recipe at t0); the profile's targets are scored.
    """

    lafa, toi, scored = recipe_profile(recipe) == "lafa", None, growth
    if lafa:
        if scoring.ontology_t1 is None:
            raise TempoInputError("a recipe selected under lafa is scored under lafa: pass the t1 ontology "
                                  "(terms of interest)", path="score_test.ontology_t1")
        scored, toi, _ = lafa_growth(growth, release.ontology, scoring.ontology_t1)
    # every growth target, as benchmark's t0 frame asks them (DIAMOND's hits depend on the query set, so the
    # recipe's predictions are made for the same set there and here); a profile's subset is scored
    source = candidate_source(release, Queries(embedded), growth.targets["protein"].unique(), max(ks))
    methods = method_predictions(recipe, source, labels, growth.targets, k_plain=min(ks), ontology=release.ontology,
                                 built=BuiltForRecipe(rerankers=scoring.rerankers))
    every_target = methods["recipe"]
    if lafa:  # the profile's targets as if asked alone: the recipe and KNN are per protein, naive per target
        keep = set(scored.targets["protein"])
        asked = replace(source, neighbours=source.neighbours[source.neighbours["query"].isin(keep)])
        methods = {**restrict({"recipe": every_target}, keep), **plain_predictions(asked, scored.targets, min(ks))}
    options = ScoringOptions(lafa=lafa, n_boot=scoring.n_boot, seed=scoring.seed, ci_metrics=("fmax_oracle",))
    summary, curves = score_methods(scoring.eval_ontology, scored.targets, scored.ground_truth, scored.known, methods,
                                    options, ci_methods=["recipe"], taus=recipe_valid_taus(recipe),
                                    toi=None if toi is None else sorted(toi))
    return Scores(summary=summary, curves=curves, counts=growth.counts(), excluded_by_sequence=len(growth.removed),
                  recipe_predictions=every_target), methods


def benchmark_targets(growth: EvaluationSet, ontology_t0, ontology_t1, eval_ontology, lafa: bool) -> TestTargets:
    """Growth as test_score scored it (profile ``cafaeval``) or, with ``lafa``, under LAFA's conventions.

    ``lafa``: terms of interest present in both ontologies, MF targets whose only new term is
    protein binding dropped; ``eval_ontology`` must then be built without orphans. Targets whose
    sequence changed between the two releases are already out of the growth (``growth_between``),
    so both profiles score only sequences unchanged t0..t1; PK known terms are removed in both.
    """
    g = growth.growth
    targets, toi, dropped = g.targets, None, []
    if lafa:
        targets, toi, dropped = lafa_growth(g, ontology_t0, ontology_t1)
        targets = targets.targets
    return TestTargets(targets.reset_index(drop=True), g.ground_truth, g.known, growth.counts, eval_ontology,
                       toi, dropped, bool(lafa))


def union_query(test_targets: pd.DataFrame | None, valid_targets: pd.DataFrame, embedded_t0: Embeddings,
                embedded_valid: Embeddings, sequences_t0: pd.DataFrame, sequences_valid: pd.DataFrame
                ) -> tuple[Embeddings, dict[str, str], pd.DataFrame, list[list[str]]]:
    """Query embeddings, sequences, targets and query groups for one run of every method at ``t-1``.

    VALID targets as of ``t-1`` and, when ``test_targets`` is given (decay), the TEST targets as
    of ``t0``: the methods run once on the union, then each set is taken back out of it. The
    groups (TEST proteins first) are DIAMOND's separate searches (see :func:`every_method`).
    """
    frames = [valid_targets] if test_targets is None else [test_targets, valid_targets]
    targets = pd.concat(frames).drop_duplicates(["protein", "aspect"]).reset_index(drop=True)
    test_proteins = [] if test_targets is None else test_targets["protein"]
    def texts(frame: pd.DataFrame) -> dict[str, str]:
        return dict(zip(frame["protein"], frame["sequence"]))

    sequences = {**texts(sequences_valid), **(texts(sequences_t0) if test_targets is not None else {})}
    groups = [list(dict.fromkeys(f["protein"])) for f in frames]
    return (merge_embeddings(embedded_t0, embedded_valid, test_proteins, valid_targets["protein"]), sequences,
            targets, groups)


def window_homology(targets: pd.DataFrame, target_sequences: Mapping[str, str], corpus: KnnCorpus,
                    corpus_sequences: pd.DataFrame, threads: int = 2) -> WindowHomology:
    """Clusters of the TEST targets' t0 sequences and each target's max identity to the t0 corpus.

    The corpus is the one the t0 methods are trained on (``knn_corpus`` at t0: proteins
    experimentally annotated at t0); a target's identity counts only corpus proteins annotated
    in the target's aspect (``core.neighbours.homology.max_train_identity``). Clusters: connected
    components of all-vs-all DIAMOND hits at ``MIN_IDENTITY`` % identity over ``MIN_COVERAGE`` %
    of the query (docs/homology.md).
    """

    in_corpus = set(corpus["ids"])
    sequences = {p: s for p, s in zip(corpus_sequences["protein"], corpus_sequences["sequence"]) if p in in_corpus}
    keys = targets[["protein", "aspect", "mode"]].drop_duplicates().reset_index(drop=True)
    with owned_temporary_folder("tempo_homology_") as workdir:
        clusters, identity = target_homology(keys, target_sequences, sequences,
                                             corpus["annotations"][["protein", "aspect"]], workdir, threads=threads)
    info = {"min_identity": MIN_IDENTITY, "min_coverage": MIN_COVERAGE, "n_proteins": int(len(clusters)),
            "n_clusters": int(clusters["cluster"].nunique()) if len(clusters) else 0,
            "largest_cluster": int(clusters["cluster_size"].max()) if len(clusters) else 0,
            "identity_corpus": f"knn_corpus at t0 ({len(sequences)} proteins), hits at e-value 1e-3"}
    return WindowHomology(clusters, identity, info)


@dataclass(frozen=True)
class WindowPredictions:
    """A window's predictions: ``methods`` trained at ``t0``, ``older`` at ``t-1`` (VALID targets and, for
    decay, TEST targets), and the frozen ``recipe``."""

    methods: Mapping[str, pd.DataFrame]
    older: Mapping[str, pd.DataFrame]
    recipe: Mapping[str, Any]


@dataclass(frozen=True)
class WindowNotes:
    """What a benchmark adds beside the scores: row ``notes``, registered methods' ``method_status``, and
    the TEST targets' ``homology``."""

    notes: Mapping[str, str] | None = None
    method_status: pd.DataFrame | None = None
    homology: WindowHomology | None = None


def score_one_profile(cells: tuple[TestTargets, TestTargets], predictions: WindowPredictions,
                      options: ScoringOptions, decay: bool, valid_source: str, homology: WindowHomology | None):
    """(summary, paired, decay, curves, valid_taus, strata) of every method under the profile of
    ``cells`` (its TEST and VALID targets)."""

    test, valid = cells
    methods, older = predictions.methods, predictions.older
    options = test.options(options)
    source = f"{valid_source}, scored under {options.profile}"
    tau_table = valid_taus(valid, older, methods, predictions.recipe, options, source)
    taus = taus_of(tau_table, OLDER)
    scored = dict(methods)
    if decay:
        scored.update({f"{m}{OLDER}": p for m, p in restrict(older, test.targets["protein"]).items()})
    args = (test.eval_ontology, test.targets, test.ground_truth, test.known)
    clusters = None if homology is None else homology.clusters
    newest = [m for m in scored if not m.endswith(OLDER)]
    # the older-cutoff variants get their interval from the paired bootstrap (newer - older)
    # the summary and the paired bootstrap read each method's predictions cut to each cell once
    frames = CellFrames(args[1:], scored)
    result = score_profile(*args, scored, options=options, toi=test.toi, ci_methods=newest, taus=taus,
                           clusters=clusters, strata=None if homology is None else homology.identity,
                           strata_methods=newest, frames=frames)
    pairs = [(options.reference, b) for b in scored if b != options.reference and not b.endswith(OLDER)]
    pairs += [(m[: -len(OLDER)], m) for m in scored if m.endswith(OLDER)]
    paired = paired_differences(args[0], args[1:], scored, pairs, options=options, toi=test.toi, taus=taus,
                                clusters=clusters, frames=frames)
    decayed = decay_table(result.summary, paired, OLDER) if decay else pd.DataFrame()
    return result.summary, paired, decayed, result.curves, tau_table, result.strata


def benchmark_window(profiles: Sequence[tuple[TestTargets, TestTargets]], predictions: WindowPredictions,
                     options: ScoringOptions, derived: list[str], decay: bool, valid_source: str,
                     extra: WindowNotes = WindowNotes()) -> Benchmark:
    """Every profile's summary at every method's VALID threshold, paired differences, decay, curves, strata.

    ``profiles`` are ``(test, valid)`` cells per profile (:func:`benchmark_targets`, ``lafa`` first);
    the predictions are computed once and only scored per profile. ``predictions.methods`` are trained
    at ``t0``, ``predictions.older`` at ``t-1`` (predicting the VALID targets and, for ``decay``, the
    TEST targets); ``valid_source`` names the VALID data. Every method gets a VALID threshold per
    profile from ``older`` scored on VALID under that profile (see :func:`valid_taus`) and its
    older variant ``<method>@t-1`` reads the same one on TEST. ``extra.homology``
    (:func:`window_homology`) adds cluster-level intervals and F per identity stratum.
    ``extra.notes`` mark rows (e.g. a registered method's ``training date undeclared``);
    ``extra.method_status`` is the registered methods' eligibility on this window
    (``core.methods.eligibility.method_eligibility``).
    """
    homology = extra.homology
    tables: list[tuple] = [score_one_profile(cells, predictions, options, decay, valid_source, homology)
                           for cells in profiles]

    def stacked(i: int) -> pd.DataFrame:
        frames = [t[i] for t in tables if len(t[i])]
        return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()

    summary = mark_rows(stacked(0), extra.notes or {}, ())
    dropped = sorted({p for test, _ in profiles for p in test.dropped})
    empty = pd.DataFrame()
    return Benchmark(summary=summary, paired=stacked(1), decay=stacked(2),
                     methods=empty if extra.method_status is None else extra.method_status, curves=stacked(3),
                     counts=profiles[0][0].counts, derived_releases=list(derived),
                     profiles=[test.options(options).profile for test, _ in profiles],
                     dropped_protein_binding=dropped, valid_taus=stacked(4), strata=stacked(5),
                     identity=empty if homology is None else homology.identity,
                     clusters=empty if homology is None else homology.clusters,
                     homology={} if homology is None else dict(homology.info), n_boot=int(options.n_boot))


def latest_recipe_key(frozen_windows: Iterable[Window], release_ids: list[str], cutoff: str,
                      windows: Iterable[Window] = ()) -> str:
    """The latest window (by t0, then t1) with a frozen recipe whose t0 <= cutoff.

    ``windows`` (every window of the archive) lets the refusal say which case it is: no window
    has t0 <= cutoff (no submission can ever be made there), or one has but is not frozen yet.
    """
    order = {r: i for i, r in enumerate(release_ids)}
    usable = [w for w in frozen_windows if order.get(w.t0, 1 << 30) <= order[cutoff]]
    if usable:
        return max(usable, key=lambda w: (order[w.t0], order[w.t1])).key
    windows = list(windows)
    possible = [w for w in windows if order.get(w.t0, 1 << 30) <= order[cutoff]]
    if not possible:
        first = min((w.t0 for w in windows if w.t0 in order), key=order.get, default=None)
        later = (f"; the first cutoff with one is {first}" if first
                 else "; the archive has no window yet: a window spans four consecutive releases")
        raise TempoInputError(f"no submission at cutoff {cutoff}: no window of the archive has t0 <= {cutoff}, so no "
                              f"recipe frozen on VALID can apply there (docs/PROTOCOL.md){later}")
    latest = max(possible, key=lambda w: (order[w.t0], order[w.t1])).key if possible else None
    how = f"`tempo materialize --window {latest}`" if latest else "`tempo materialize --all`"
    raise TempoInputError(f"no frozen recipe yet on a window with t0 <= {cutoff}: freeze one first ({how})")


__all__ = [
    "MODES", "OLDER", "BaselineConfig", "CandidateRelease", "Queries", "TestScoring", "TrainedAt",
    "ValidScoring", "WindowNotes", "WindowPredictions", "window_homology", "score_one_profile",
    "benchmark_targets", "benchmark_window", "build_corpus", "candidate_source", "every_method",
    "latest_recipe_key", "recipe_chunks", "union_query", "release_growth", "reranker_labels", "score_test",
    "select_on_valid", "verify_recipe", "evaluation_set",
]


# --------------------------------------------------------------------------------------------
# evaluation sets from the SQL warehouse


def evaluation_set(frames, python: Growth, where: str) -> Growth:
    """The warehouse's evaluation set as a ``Growth``, refused when it disagrees with the Python growth."""
    growth = warehouse_growth(frames, python.removed)
    differences = growth_differences(growth, python)
    if any(differences.values()):
        raise TempoInputError(f"the warehouse evaluation set disagrees with the Python growth: {differences}",
                              path=where)
    return growth
