"""The frozen recipe put to use: scored ONCE on a window's TEST growth (the ``test_score`` asset), and
applied at a cutoff for a CAFA submission (the ``submission`` asset).

The assets take the claims, read their inputs and call these; nothing here knows Dagster.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

from tempo_assets.core.audits.removals import RemovalLog, log_evaluation, log_growth, log_submission
from tempo_assets.core.base.liveness import owned_temporary_folder
from tempo_assets.core.evaluation import EvalOntology
from tempo_assets.core.evaluation.scoring import ORACLE_LABEL
from tempo_assets.core.labels.ia import ia_series
from tempo_assets.core.methods.submission import write_cafa_submission
from tempo_assets.core.pipeline.workflow import (
    CandidateRelease, Queries, TestScoring, candidate_source, recipe_chunks, score_test,
)
from tempo_assets.core.recipe.selection import recipe_profile
from tempo_assets.core.storage.artefact_types import Scores
from tempo_assets.core.storage.artefacts import Artefact

HEADLINE_COLUMNS = ("f_at_valid_tau", "valid_tau", "fmax_oracle")


@dataclass(frozen=True)
class RecipeAtT0:
    """What the frozen recipe reads on TEST: the TEST growth, the t0 corpus, IA, embeddings, ontology,
    sequences and annotations, the TRAIN ``labels`` its rerankers were selected with
    (``Window.recipe_labels``), for a recipe selected under lafa the t1 ontology, and the rerankers
    frozen with the recipe (fitted on ``labels``, ``core.pipeline.frozen_rerankers``; None: refit on them)."""

    test_growth: Artefact
    corpus: Artefact
    ia: Artefact
    embeddings: Artefact
    ontology: Artefact
    sequences: Artefact
    annotations: Artefact
    labels: Artefact
    ontology_t1: Artefact | None = None
    rerankers: Mapping[str, Any] | None = None

    def read(self) -> list[Artefact]:
        """The artefacts read, in the order the sidecar lists them."""
        return [self.test_growth, self.corpus, self.labels, self.ia, self.embeddings, self.ontology,
                self.sequences, self.annotations] + ([self.ontology_t1] if self.ontology_t1 else [])


@dataclass(frozen=True)
class ScoreSettings:
    """The t1 OBO file (the evaluator's ontology), the grid's ``ks`` and the bootstrap."""

    obo_path_t1: Path
    ks: Sequence[int]
    bootstrap_samples: int
    seed: int


@dataclass(frozen=True)
class RecipeTestScore:
    """The scores, what scoring left out (``removals``) and the recipe's headline per (mode, aspect)."""

    scores: Scores
    removals: RemovalLog
    headline: dict[str, float]
    targets: int

    def summary_markdown(self) -> str:
        """The summary table with the oracle columns labelled as such."""
        table = self.scores.summary.drop(columns=["truth_sha256"]).round(4).to_markdown(index=False)
        return table + f"\n\n`fmax_oracle`, `tau_oracle`: {ORACLE_LABEL}."


def score_recipe_on_test(recipe: Mapping[str, Any], inputs: RecipeAtT0, settings: ScoreSettings) -> RecipeTestScore:
    """The frozen recipe at t0 beside plain KNN and naive, scored once on TEST (t0, t1], under the profile
    it was selected under (its VALID thresholds' conventions; LAFA's evaluator drops orphans)."""
    growth = inputs.test_growth.value.growth
    lafa = recipe_profile(recipe) == "lafa"
    release = CandidateRelease(inputs.corpus.value, inputs.ontology.value, inputs.sequences.value,
                               inputs.annotations.value)
    evaluator = EvalOntology.from_obo(settings.obo_path_t1, ia=ia_series(inputs.ia.value), orphans=not lafa)
    scoring = TestScoring(evaluator, settings.bootstrap_samples, settings.seed,
                          ontology_t1=None if inputs.ontology_t1 is None else inputs.ontology_t1.value,
                          rerankers=inputs.rerankers)
    scores, methods = score_test(recipe, growth, release, inputs.labels.value, inputs.embeddings.value,
                                 settings.ks, scoring)
    removals = RemovalLog()
    log_growth(removals, growth)
    log_evaluation(removals, growth, methods)
    recipe_rows = scores.summary[scores.summary["method"] == "recipe"]
    headline = {f"{column}_{r.mode}_{r.aspect}": float(getattr(r, column)) for r in recipe_rows.itertuples()
                for column in HEADLINE_COLUMNS if column in recipe_rows}
    return RecipeTestScore(scores, removals, headline, len(growth.targets))


@dataclass(frozen=True)
class SubmissionText:
    """The CAFA submission file's text, its writer's stats and what it left out."""

    text: str
    stats: Mapping[str, Any]
    removals: RemovalLog

    @property
    def rows(self) -> int:
        return int(self.stats.get("rows", 0)) if isinstance(self.stats, dict) else 0


def _logged(chunks: Iterator, removals: RemovalLog) -> Iterator:
    """``chunks`` as they are written, each one's left-out rows logged into ``removals``."""
    for chunk in chunks:
        log_submission(removals, chunk)
        yield chunk


def submission_text(recipe: Mapping[str, Any], release: CandidateRelease, embedded, labels, ks) -> SubmissionText:
    """The recipe applied at the cutoff of ``release`` to every embedded protein, as a CAFA submission.

    The same leave-one-out IA counts the recipe's rerankers were trained on; the rerankers refit on
    this cutoff's ``labels`` (a CAFA submission has no threshold), the proteins scored a chunk at a time.
    """
    source = candidate_source(release, Queries(embedded), embedded["ids"], max(ks))
    removals = RemovalLog()
    chunks = recipe_chunks(recipe, source, labels, embedded["ids"], ontology=release.ontology)
    with owned_temporary_folder("tempo_submission_") as tmp:
        path = Path(tmp) / "submission.tsv"
        stats = write_cafa_submission(_logged(chunks, removals), path, author="Tempo", model=1,
                                      keywords=["k-nearest neighbors"])
        text = path.read_text(encoding="utf-8")
    return SubmissionText(text, stats, removals)
