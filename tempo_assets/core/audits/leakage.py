"""Leakage audits over features and over recorded artefact metadata (pure: no dagster).

Two audits live here, both described in ``docs/audits.md``:

- **The golden feature rule** (docs/PROTOCOL.md): for sampled proteins, every candidate feature is
  rebuilt from inputs with that protein's own labels removed (its corpus rows, and its
  contribution to the IA counts), and compared with the features it was actually given.
  ``extra_features`` is the documented hook through which a feature added later (or a
  deliberately leaky one, in the tests) is audited with the built-in ones.
- **The cutoff guard**: rules over materialisation records (asset, partition, metadata), so a
  recorded source after the artefact's cutoff, a window artefact reading past what its role
  allows, or a TEST score without an earlier frozen recipe of the same hash is reported. The
  Dagster side (``cli/audit_graph_cmd.py``) only turns instance events into
  ``MaterialisationRecord`` objects.
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields, is_dataclass, replace
from datetime import date
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from tempo_assets.core.base.dates import parse_date
from tempo_assets.core.base.errors import TempoInputError
from tempo_assets.core.recipe.candidates import SOURCES, CandidateSource, recipe_features
from tempo_assets.core.recipe.features import KEY_COLUMNS, compare_protein_features
from tempo_assets.core.labels.ia import IaCounts
from tempo_assets.core.base.windows import ASSET_ROLE, POSITIONS, ROLE_BOUND, try_parse_window_key
from tempo_assets.core.labels.ia import ia_counts

# ---------------------------------------------------------------------------------------------
# The golden feature rule
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FeatureInputs:
    """Everything a candidate feature is computed from, so it can be rebuilt without a protein.

    ``ia`` is what the feature builder is given (``IaCounts``: leave-one-out; a term -> bits
    series: a fixed weight). ``ia_source`` records the counts a fixed series was estimated
    from, so the audit can re-estimate the series without the audited protein; without it a
    fixed series cannot be audited and the report lists ``ia`` under ``not_audited``.
    """

    neighbours: pd.DataFrame
    corpus_annotations: pd.DataFrame
    ia: IaCounts | pd.Series | Mapping[str, float] | None = None
    term_depth: pd.Series | Mapping[str, float] | None = None
    k: int | None = None
    ia_source: IaCounts | None = None
    # the recipe's other candidate sources (core.recipe.candidates): DIAMOND hits and non-experimental
    # annotations of the queries, and the sources united (every source: every feature is audited)
    hits: pd.DataFrame | None = None
    nonexp: pd.DataFrame | None = None
    sources: tuple[str, ...] = SOURCES

    def restricted_to(self, proteins: Iterable[str]) -> "FeatureInputs":
        """The same inputs with only the neighbour (and hit, non-experimental) rows of ``proteins`` as queries."""
        keep = set(map(str, proteins))
        rows = self.neighbours[self.neighbours["query"].astype(str).isin(keep)]
        hits = None if self.hits is None else self.hits[self.hits["query"].astype(str).isin(keep)]
        nonexp = None if self.nonexp is None else self.nonexp[self.nonexp["protein"].astype(str).isin(keep)]
        return replace(self, neighbours=rows.reset_index(drop=True),
                       hits=None if hits is None else hits.reset_index(drop=True),
                       nonexp=None if nonexp is None else nonexp.reset_index(drop=True))

    def without_protein(self, protein: str) -> "FeatureInputs":
        """The inputs with ``protein``'s own labels removed from every one of them."""
        protein = str(protein)
        corpus = self.corpus_annotations
        corpus = corpus[corpus["protein"].astype(str) != protein]
        ia, source = self.ia, self.ia_source
        if isinstance(ia, IaCounts):
            ia = ia.drop_proteins([protein])
        elif ia is not None and source is not None:
            source = source.drop_proteins([protein])
            ia = source.series()
        return replace(self, corpus_annotations=corpus, ia=ia, ia_source=source)

    def labelled_proteins(self) -> set[str]:
        """Proteins with labels in any input (removing the others' labels changes nothing)."""
        labelled = set(map(str, self.corpus_annotations["protein"].unique()))  # distinct ids first: one string each
        for counts in (self.ia, self.ia_source):
            if isinstance(counts, IaCounts):
                labelled |= set(map(str, counts.proteins))
        return labelled


# extra_features(features, inputs) -> features with additional columns (or rows); the hook
# through which a new feature is built, and audited, together with the built-in ones
ExtraFeatures = Callable[[pd.DataFrame, FeatureInputs], pd.DataFrame]


def build_features(inputs: FeatureInputs, extra_features: ExtraFeatures | None = None) -> pd.DataFrame:
    """``candidates.recipe_features`` over ``inputs`` (every source, every feature), then ``extra_features``."""
    source = CandidateSource(inputs.neighbours, inputs.corpus_annotations, ia=inputs.ia, term_depth=inputs.term_depth,
                             hits=inputs.hits, nonexp=inputs.nonexp)
    features = recipe_features(source, k=inputs.k, sources=inputs.sources)
    if extra_features is not None:
        features = extra_features(features, inputs)
        missing = [c for c in KEY_COLUMNS if c not in features.columns]
        if missing:
            raise TempoInputError(f"extra_features dropped key column(s) {missing}",
                                  path="extra_features")
    return features


def sample_proteins(inputs: FeatureInputs, n: int, seed: int = 0) -> list[str]:
    """A seeded sample of ``n`` queried proteins that hold labels in some input, sorted.

    Only those can reveal a leak: for a protein with no labels, removing them is a no-op.
    """
    if int(n) < 1:
        raise TempoInputError(f"sample size must be >= 1, got {n}", path="--sample")
    queries = set(inputs.neighbours["query"].astype(str))
    if inputs.hits is not None:
        queries |= set(inputs.hits["query"].astype(str))
    pool = sorted(queries & inputs.labelled_proteins())
    if len(pool) <= n:
        return pool
    rng = np.random.default_rng(int(seed))
    return sorted(pool[i] for i in rng.choice(len(pool), size=int(n), replace=False))


@dataclass
class GoldenRuleReport:
    """What the golden-rule audit compared and which features moved for which proteins."""

    proteins: list[str]
    features: list[str]
    differing: dict[str, list[str]] = field(default_factory=dict)  # feature -> proteins
    not_audited: list[str] = field(default_factory=list)
    queries: int = 0
    labelled_queries: int = 0

    @property
    def passed(self) -> bool:
        return not self.differing

    def leaking_features(self) -> dict[str, int]:
        """Feature -> number of audited proteins for which it differed."""
        return {name: len(proteins) for name, proteins in sorted(self.differing.items())}

    def to_dict(self) -> dict[str, Any]:
        return {
            "status": "pass" if self.passed else "fail",
            "proteins_audited": len(self.proteins),
            "proteins": list(self.proteins),
            "queries": self.queries,
            "labelled_queries": self.labelled_queries,
            "features": list(self.features),
            "leaking_features": self.leaking_features(),
            "differing_proteins": {k: list(v) for k, v in sorted(self.differing.items())},
            "not_audited": list(self.not_audited),
        }


def audit_golden_rule(
    inputs: FeatureInputs,
    proteins: Sequence[str],
    *,
    extra_features: ExtraFeatures | None = None,
    atol: float = 1e-12,
) -> GoldenRuleReport:
    """Rebuild every feature of each protein without its own labels; report what moved.

    Parameters
    ----------
    inputs : FeatureInputs
        The inputs the features were (or will be) built from.
    proteins : sequence of str
        Proteins to audit (``sample_proteins`` draws them). Features are built with the
        neighbour rows of these proteins only, identically before and after a removal.
    extra_features : callable, optional
        ``(features, inputs) -> features``: additional features audited with the built-in ones.
    atol : float
        Absolute tolerance (NaN equals NaN).

    Returns
    -------
    GoldenRuleReport
        ``differing`` maps each leaking feature (or ``"candidates"`` when the candidate set
        changed) to the proteins it differed for.
    """
    proteins = list(dict.fromkeys(map(str, proteins)))
    scoped = inputs.restricted_to(proteins)
    full = build_features(scoped, extra_features)
    feature_cols = [c for c in full.columns if c not in KEY_COLUMNS and c != "label"]
    not_audited = []
    if inputs.ia is not None and not isinstance(inputs.ia, IaCounts) and inputs.ia_source is None:
        not_audited.append("ia")
    report = GoldenRuleReport(proteins=proteins, features=feature_cols, not_audited=not_audited,
                              queries=int(inputs.neighbours["query"].nunique()),
                              labelled_queries=len(set(inputs.neighbours["query"].astype(str))
                                                   & inputs.labelled_proteins()))
    for protein in proteins:
        reduced = build_features(scoped.without_protein(protein), extra_features)
        for name in compare_protein_features(full, reduced, protein, feature_cols, atol=atol):
            report.differing.setdefault(name, []).append(protein)
    return report


# ---------------------------------------------------------------------------------------------
# The cutoff guard
# ---------------------------------------------------------------------------------------------

# the role table (window_role -> the release bounding what it read) is core/base/windows.py's
ROLE_LIMIT = ROLE_BOUND
EXPECTED_ROLE = ASSET_ROLE


@dataclass(frozen=True)
class MaterialisationRecord:
    """One recorded materialisation: asset, partition, plain metadata and its order in the log."""

    asset: str
    partition: str | None
    metadata: Mapping[str, Any]
    storage_id: int
    timestamp: float = 0.0
    run_id: str | None = None

    @property
    def where(self) -> str:
        return f"{self.asset}[{self.partition}]#{self.storage_id}"


@dataclass(frozen=True)
class Finding:
    """One violation: the record, the rule it breaks and a message naming what was read."""

    asset: str
    partition: str | None
    storage_id: int
    rule: str
    message: str

    def to_dict(self) -> dict[str, Any]:
        return {"asset": self.asset, "partition": self.partition, "storage_id": self.storage_id,
                "rule": self.rule, "message": self.message}


def _window_releases(key: str) -> dict[str, str] | None:
    window = try_parse_window_key(key)
    return None if window is None else dict(zip(POSITIONS, window.releases))


def _date_or_none(value: Any) -> date | None:
    if value is None or value == "":
        return None
    try:
        return parse_date(value)
    except (TempoInputError, ValueError, TypeError):
        return None


def _referenced_partition(source: Mapping[str, Any]) -> str | None:
    ref = str(source.get("artefact", ""))
    if "[" in ref and ref.endswith("]"):
        return ref.split("[", 1)[1][:-1]
    return None


def _source_label(source: Mapping[str, Any]) -> str:
    return str(source.get("artefact") or source.get("path") or source.get("release") or source)


def check_record(record: MaterialisationRecord, as_of: Mapping[str, date]) -> list[Finding]:
    """Cutoff and stage-table rules of one record (``as_of``: release id -> as-of date).

    Rules: ``binding`` (cutoff and max_source_date recorded and parseable; sources a list),
    ``within_cutoff`` (max_source_date and every dated source <= cutoff; a release or cutoff
    partition's cutoff not after the release's as-of date), ``stage_table`` (a window
    artefact records the role its asset must play, and nothing it read, dated or referenced
    by release id, is later than its role allows: train <= t-1, valid <= t0, test <= t1).
    """
    meta = record.metadata
    problems: list[tuple[str, str]] = []
    cutoff = _date_or_none(meta.get("cutoff"))
    latest = _date_or_none(meta.get("max_source_date"))
    sources = meta.get("sources", [])
    if cutoff is None or latest is None:
        problems.append(("binding", f"{record.where}: no parseable cutoff/max_source_date in its metadata "
                                    f"(cutoff={meta.get('cutoff')!r}, "
                                    f"max_source_date={meta.get('max_source_date')!r})"))
    else:
        if not isinstance(sources, list):
            problems.append(("binding", f"{record.where}: sources is {type(sources).__name__}, not a list"))
            sources = []
        problems += _cutoff_problems(record, cutoff, latest, sources, as_of)
        window = _window_releases(record.partition) if record.partition else None
        if window is not None:
            problems += _stage_table_problems(record, window, latest, sources, as_of)
    return [Finding(record.asset, record.partition, record.storage_id, rule, message)
            for rule, message in problems]


def _cutoff_problems(record: MaterialisationRecord, cutoff: date, latest: date, sources: list,
                     as_of: Mapping[str, date]) -> list[tuple[str, str]]:
    """``within_cutoff``: nothing recorded is dated after the cutoff, the cutoff is not after the
    partition's release, and a release partition read no later release."""
    problems = []
    if latest > cutoff:
        problems.append(("within_cutoff", f"{record.where}: max_source_date {latest} is after its cutoff {cutoff}"))
    for source in sources:
        when = _date_or_none(source.get("date")) if isinstance(source, Mapping) else None
        if when is not None and when > cutoff:
            problems.append(("within_cutoff", f"{record.where}: source {_source_label(source)} dated {when} "
                                              f"is after its cutoff {cutoff}"))
    partition = record.partition
    window = _window_releases(partition) if partition else None
    if partition in as_of and cutoff > as_of[partition]:
        problems.append(("within_cutoff", f"{record.where}: recorded cutoff {cutoff} is after release "
                                          f"{partition}'s as-of date {as_of[partition]}"))
    if window is None and partition in as_of:
        for source in sources:
            ref = _referenced_partition(source) if isinstance(source, Mapping) else None
            if ref in as_of and ref > partition:
                problems.append(("within_cutoff", f"{record.where}: read {_source_label(source)}, a release "
                                                  f"after its own partition {partition}"))
    return problems


def _stage_table_problems(record: MaterialisationRecord, window, latest: date, sources: list,
                          as_of: Mapping[str, date]) -> list[tuple[str, str]]:
    """``stage_table``: the window artefact's role is its asset's, and nothing it read is later
    than the last release its role may read."""
    meta, partition = record.metadata, record.partition
    problems = []
    role = meta.get("window_role")
    expected = EXPECTED_ROLE.get(record.asset)
    if expected is not None and role != expected:
        problems.append(("stage_table", f"{record.where}: window_role {role!r}, but {record.asset} is bound to "
                                        f"{expected!r}"))
    if role not in ROLE_LIMIT:
        if expected is None:
            problems.append(("stage_table", f"{record.where}: a window artefact without a window_role in "
                                            f"{sorted(ROLE_LIMIT)}"))
        role = expected
    if role is None:
        return problems
    if meta.get("window") not in (None, partition):
        problems.append(("stage_table", f"{record.where}: records window {meta.get('window')!r}, not its partition"))
    limit_release = window[ROLE_LIMIT[role]]
    if limit_release not in as_of:
        problems.append(("stage_table", f"{record.where}: release {limit_release} of its window is not in the archive"))
        return problems
    limit = as_of[limit_release]
    if latest > limit:
        problems.append(("stage_table", f"{record.where}: max_source_date {latest} is after {ROLE_LIMIT[role]} "
                                        f"({limit_release}, as of {limit}), the last release a {role} "
                                        "artefact may read"))
    problems += _late_sources(record, sources, as_of, role, limit_release)
    return problems


def _late_sources(record: MaterialisationRecord, sources: list, as_of: Mapping[str, date], role: str,
                  limit_release: str) -> list[tuple[str, str]]:
    """Sources dated, or of a release, after the last release a ``role`` artefact may read."""
    limit = as_of[limit_release]
    order = {rid: i for i, rid in enumerate(sorted(as_of))}
    problems = []
    for source in sources:
        if not isinstance(source, Mapping):
            continue
        when = _date_or_none(source.get("date"))
        ref = _referenced_partition(source)
        late_date = when is not None and when > limit
        late_ref = ref in order and order[ref] > order[limit_release]
        if late_date or late_ref:
            what = f"dated {when}" if late_date else f"of release {ref}"
            problems.append(("stage_table", f"{record.where}: source {_source_label(source)} {what} is after "
                                            f"{ROLE_LIMIT[role]} ({limit_release}), the last release a {role} "
                                            "artefact may read"))
    return problems


def check_test_scores(records: Sequence[MaterialisationRecord]) -> list[Finding]:
    """Every ``test_score`` needs an earlier ``frozen_recipe`` of its window with its recipe hash."""
    recipes: dict[str, list[MaterialisationRecord]] = {}
    for record in records:
        if record.asset == "frozen_recipe":
            recipes.setdefault(str(record.partition), []).append(record)
    found = []
    for record in records:
        if record.asset != "test_score":
            continue
        wanted = record.metadata.get("recipe_hash")
        earlier = [r for r in recipes.get(str(record.partition), []) if r.storage_id < record.storage_id]
        if not wanted:
            message = f"{record.where}: records no recipe_hash, so no frozen recipe can be matched"
        elif not earlier:
            message = (f"{record.where}: no frozen_recipe[{record.partition}] was materialised "
                       f"before it (recipe_hash {wanted})")
        elif not any(r.metadata.get("recipe_hash") == wanted for r in earlier):
            hashes = sorted({str(r.metadata.get("recipe_hash")) for r in earlier})
            message = (f"{record.where}: scored with recipe_hash {wanted}, but the earlier "
                       f"frozen_recipe[{record.partition}] materialisation(s) froze {hashes}")
        else:
            continue
        found.append(Finding(record.asset, record.partition, record.storage_id, "frozen_recipe", message))
    return found


TEST_ONCE_ASSETS = ("test_growth", "test_score")  # the one TEST read, the one scoring


def check_test_once(records: Sequence[MaterialisationRecord],
                    reads: Sequence[MaterialisationRecord] = ()) -> list[Finding]:
    """Per window: at most one ``test_growth`` and one ``test_score`` materialisation, one TEST read.

    ``reads`` are the ``test_growth`` observations recorded when a run took the window's TEST
    claim (metadata ``tempo/test_read``: the claiming run id); a ``test_growth`` materialisation's
    own run counts as a read too, so an instance without claims is audited the same way.
    """
    made: dict[tuple[str, str], list[MaterialisationRecord]] = {}
    readers: dict[str, set[str]] = {}
    for record in records:
        if record.asset in TEST_ONCE_ASSETS:
            made.setdefault((record.asset, str(record.partition)), []).append(record)
        if record.asset == "test_growth":
            readers.setdefault(str(record.partition), set()).add(record.run_id or f"runless#{record.storage_id}")
    for read in reads:
        run = read.metadata.get("tempo/test_read") or read.run_id or f"runless#{read.storage_id}"
        readers.setdefault(str(read.partition), set()).add(str(run))
    found = []
    for (asset, window), materialised in sorted(made.items()):
        materialised = sorted(materialised, key=lambda r: r.storage_id)
        if len(materialised) > 1:
            found.append(Finding(asset, window, materialised[1].storage_id, "test_once",
                                 f"{asset}[{window}] was materialised {len(materialised)} times "
                                 f"(#{', #'.join(str(r.storage_id) for r in materialised)}); TEST is read and "
                                 "scored once"))
    for window, runs in sorted(readers.items()):
        if len(runs) > 1:
            first = min((r.storage_id for r in made.get(("test_growth", window), [])), default=-1)
            found.append(Finding("test_growth", window, first, "test_once",
                                 f"TEST of window {window} was read by {len(runs)} runs ({', '.join(sorted(runs))}); "
                                 "it is read once"))
    return found


@dataclass
class CutoffAuditReport:
    """Per asset: partitions and materialisations checked, and every finding."""

    assets: dict[str, dict[str, int]]
    findings: list[Finding]

    @property
    def passed(self) -> bool:
        return not self.findings

    def table(self) -> pd.DataFrame:
        rows = [{"asset": asset, "partitions": c["partitions"], "materialisations": c["materialisations"],
                 "violations": sum(1 for f in self.findings if f.asset == asset)}
                for asset, c in self.assets.items()]
        return pd.DataFrame(rows, columns=["asset", "partitions", "materialisations", "violations"])

    def to_dict(self) -> dict[str, Any]:
        return {"status": "pass" if self.passed else "fail",
                "assets": self.table().to_dict(orient="records"),
                "violations": [f.to_dict() for f in self.findings]}


def audit_cutoff_records(records: Iterable[MaterialisationRecord], as_of: Mapping[str, date],
                         assets: Iterable[str] = (), test_reads: Iterable[MaterialisationRecord] = ()
                         ) -> CutoffAuditReport:
    """Run every cutoff-guard rule over ``records``; ``assets`` lists assets shown even if empty.

    ``test_reads`` are the recorded TEST reads (see ``check_test_once``).
    """
    records = sorted(records, key=lambda r: r.storage_id)
    counts: dict[str, dict[str, Any]] = {a: {"partitions": set(), "materialisations": 0} for a in assets}
    findings: list[Finding] = []
    for record in records:
        entry = counts.setdefault(record.asset, {"partitions": set(), "materialisations": 0})
        entry["partitions"].add(record.partition)
        entry["materialisations"] += 1
        findings.extend(check_record(record, as_of))
    findings.extend(check_test_scores(records))
    findings.extend(check_test_once(records, list(test_reads)))
    findings.sort(key=lambda f: (f.asset, f.storage_id, f.rule, f.message))
    summary = {a: {"partitions": len(c["partitions"]), "materialisations": c["materialisations"]}
               for a, c in sorted(counts.items())}
    return CutoffAuditReport(summary, findings)


def feature_inputs_from_labels(value: Mapping[str, Any], ontology: Any = None,
                               k: int | None = None, load_ontology: Callable[[], Any] | None = None) -> FeatureInputs:
    """``FeatureInputs`` of a stored ``reranker_labels`` value (a ``CandidateSource``, or its fields as a dict).

    When the stored ``ia`` is a fixed term -> bits series, its provenance is reconstructed:
    if ``ia.ia_counts(corpus_annotations, ontology)`` gives back exactly that series, those
    counts become ``ia_source`` (so the audit re-estimates the series without each protein);
    otherwise ``ia`` stays unaudited and the report says so. The ontology is needed only then:
    ``load_ontology`` (no argument -> the ontology or None) is called only then, when ``ontology`` is None.
    """
    if is_dataclass(value):  # the stored CandidateSource itself
        value = {f.name: getattr(value, f.name) for f in fields(value)}
    missing = [key for key in ("neighbours", "corpus_annotations") if key not in value]
    if missing:
        raise TempoInputError(f"reranker_labels value lacks {missing}", path="reranker_labels")
    ia, source = value.get("ia"), None
    corpus = value["corpus_annotations"]
    if ia is not None and not isinstance(ia, IaCounts) and ontology is None and load_ontology is not None:
        ontology = load_ontology()
    if ia is not None and not isinstance(ia, IaCounts) and ontology is not None:
        counts = ia_counts(corpus, ontology)
        series = pd.Series(ia, dtype=float) if not isinstance(ia, pd.Series) else ia.astype(float)
        rebuilt = counts.series()
        series.index = series.index.astype(str)
        if series.index.equals(rebuilt.index) and np.allclose(series.to_numpy(), rebuilt.to_numpy(),
                                                              rtol=0.0, atol=1e-12):
            source = counts
    return FeatureInputs(value["neighbours"], corpus, ia=ia, term_depth=value.get("term_depth"),
                         k=k, ia_source=source, hits=value.get("hits"), nonexp=value.get("nonexp"))
