"""Removal manifests: which records an artefact dropped, and why.

Every artefact that drops records because of a cutoff, a mask or a filter collects them in a
:class:`RemovalLog` and writes it beside itself as ``removals.tsv.gz`` (gzip, tab-separated,
header ``record_id kind reason count``, rows sorted). Its metadata carries ``removed_<reason>``
(the sum of ``count`` over the rows with that reason), ``removed_total`` and the manifest's
sha256, so the counts in the Dagster UI, in the artefact sidecar and in the file agree and
:func:`verify_removal_manifest` can prove it.

``record_id`` is ``|``-joined fields whose layout depends on ``kind``:

=========================  ===================================  ==============================
kind                       record_id                            reasons
=========================  ===================================  ==============================
``gaf_row``                protein|term|evidence|yyyymmdd       ``after_cutoff``, ``not_qualifier``
``<set>_annotation``       protein|term (term as in the GAF)    ``obsolete_term``, ``unknown_term``,
                                                                ``no_namespace_term``,
                                                                ``alt_id_remapped`` (kept, rewritten)
``target``                 protein|aspect|mode                  ``no_sequence_at_a``, ``sequence_changed``
``protein``                protein                              ``not_in_precomputed_file``, ``no_embedding``
``prediction``             [method|]protein|term                ``score_rounds_to_zero``,
                                                                ``beyond_max_terms``,
                                                                ``duplicate_lower_score``,
                                                                ``pk_known_term_predicted``
``prediction``             method|protein|aspect                ``not_a_target``
``ground_truth``           protein|term|aspect                  ``pk_known_term_in_truth``
=========================  ===================================  ==============================

``count`` is how many source rows the record stands for (duplicate GAF lines, the rows of one
dropped protein-term pair, the predictions of one non-target protein and aspect).
"""
from __future__ import annotations

import gzip
import io
import json
import re
from pathlib import Path
from typing import Any, Iterable, Mapping

import numpy as np
import pandas as pd

from tempo_assets.core.base.arrays import rows_in
from tempo_assets.core.base.errors import TempoInputError
from tempo_assets.core.base.io import atomic_write, sha256_file
from tempo_assets.core.base.dates import date_to_int
from tempo_assets.core.inputs.gaf import read_gaf
from tempo_assets.core.labels.annotations import classify_terms
from tempo_assets.core.labels.annotations import not_qualified_mask
from tempo_assets.core.methods.submission import score_cents, submission_rows

MANIFEST_NAME = "removals.tsv.gz"
COLUMNS = ("record_id", "kind", "reason", "count")
METADATA_PREFIX = "removed_"

REASON_AFTER_CUTOFF = "after_cutoff"
REASON_NOT_QUALIFIER = "not_qualifier"
REASON_ALT_ID = "alt_id_remapped"
TERM_REASONS = {"obsolete": "obsolete_term", "unknown": "unknown_term", "no_namespace": "no_namespace_term"}
REASON_NOT_IN_FILE = "not_in_precomputed_file"
REASON_NO_EMBEDDING = "no_embedding"
REASON_ZERO = "score_rounds_to_zero"
REASON_TRUNCATED = "beyond_max_terms"
REASON_DUPLICATE = "duplicate_lower_score"
REASON_NOT_TARGET = "not_a_target"
REASON_KNOWN_PREDICTED = "pk_known_term_predicted"
REASON_KNOWN_TRUTH = "pk_known_term_in_truth"
GROWTH_REASONS = ("no_sequence_at_a", "sequence_changed")

_REASON_PATTERN = re.compile(r"^[a-z][a-z0-9_]*$")


def _joined(frame: pd.DataFrame, columns: Iterable[str]) -> pd.Series:
    columns = list(columns)
    out = frame[columns[0]].astype(str)
    for column in columns[1:]:
        out = out + "|" + frame[column].astype(str)
    return out


class RemovalLog:
    """Rows ``(record_id, kind, reason, count)`` collected while an artefact is built.

    Parameters
    ----------
    reasons : iterable of str
        Reasons the artefact can drop records for; they appear in :meth:`counts` (and the
        metadata) with 0 when nothing was dropped for them, so a clean run says so explicitly.
    """

    def __init__(self, reasons: Iterable[str] = ()):
        self._parts: list[pd.DataFrame] = []
        self._reasons: list[str] = []
        for reason in reasons:
            self._declare(reason)

    def _declare(self, reason: str) -> None:
        if not isinstance(reason, str) or not _REASON_PATTERN.match(reason):
            raise TempoInputError(f"removal reason {reason!r} must be snake_case (it becomes a metadata key)")
        if reason not in self._reasons:
            self._reasons.append(reason)

    def add(self, record_ids: Iterable[str], kind: str, reason: str | Iterable[str],
            count: int | Iterable[int] = 1) -> int:
        """Log records; ``reason`` and ``count`` are one value or one per record. Returns the count added."""
        ids = pd.Series(_listed(record_ids), dtype=object).astype(str)
        n = len(ids)
        reasons = pd.Series([reason] * n if isinstance(reason, str) else _listed(reason), dtype=object)
        counts = np.full(n, count, dtype=np.int64) if np.isscalar(count) else np.asarray(list(count), dtype=np.int64)
        if len(reasons) != n or len(counts) != n:
            raise TempoInputError(f"removal log ({kind}): {n} ids but {len(reasons)} reasons, {len(counts)} counts")
        if n and (counts < 1).any():
            raise TempoInputError(f"removal log ({kind}): counts must be >= 1")
        if not isinstance(kind, str) or not kind:
            raise TempoInputError("removal log: kind must be a non-empty string")
        for value in pd.unique(reasons) if n else ([reason] if isinstance(reason, str) else []):
            self._declare(str(value))
        if n:
            self._parts.append(pd.DataFrame({"record_id": ids.to_numpy(), "kind": kind,
                                             "reason": reasons.astype(str).to_numpy(), "count": counts}))
        return int(counts.sum())

    def add_frame(self, frame: pd.DataFrame, id_columns: Iterable[str], kind: str, reason: str | None = None,
                  reason_column: str = "reason") -> int:
        """Log one record per row of ``frame`` (identical ids collapse into one record with a count)."""
        id_columns = list(id_columns)
        if reason is None and reason_column not in frame.columns:
            raise TempoInputError(f"removal log ({kind}): frame has no {reason_column!r} column")
        if frame.empty:
            if reason is not None:
                self._declare(reason)
            return 0
        work = pd.DataFrame({"record_id": _joined(frame, id_columns),
                             "reason": reason if reason is not None else frame[reason_column].astype(str)})
        grouped = work.groupby(["record_id", "reason"], sort=True).size().reset_index(name="count")
        return self.add(grouped["record_id"], kind, grouped["reason"], grouped["count"])

    def frame(self) -> pd.DataFrame:
        """The manifest: one row per (record_id, kind, reason), counts summed, sorted."""
        if not self._parts:
            return pd.DataFrame({"record_id": pd.Series([], dtype=object), "kind": pd.Series([], dtype=object),
                                 "reason": pd.Series([], dtype=object), "count": pd.Series([], dtype=np.int64)})
        rows = pd.concat(self._parts, ignore_index=True)
        rows = rows.groupby(["kind", "reason", "record_id"], sort=True)["count"].sum().reset_index()
        return rows[list(COLUMNS)].astype({"count": np.int64})

    def counts(self) -> dict[str, int]:
        """``{reason: summed count}`` for every declared or logged reason."""
        out = {reason: 0 for reason in self._reasons}
        for part in self._parts:
            for reason, total in part.groupby("reason")["count"].sum().items():
                out[str(reason)] += int(total)
        return out

    def counts_by_kind(self) -> dict[str, dict[str, int]]:
        """``{kind: {reason: summed count}}`` of what was logged."""
        rows = self.frame()
        out: dict[str, dict[str, int]] = {}
        for (kind, reason), total in rows.groupby(["kind", "reason"])["count"].sum().items():
            out.setdefault(str(kind), {})[str(reason)] = int(total)
        return out

    def metadata(self, sha256: str | None = None, file: str = MANIFEST_NAME) -> dict[str, Any]:
        """``removed_<reason>`` ints, ``removed_total``, ``removals`` (per kind) and the file's name/sha256."""
        counts = self.counts()
        meta: dict[str, Any] = {f"{METADATA_PREFIX}{reason}": total for reason, total in sorted(counts.items())}
        meta[f"{METADATA_PREFIX}total"] = int(sum(counts.values()))
        meta["removals"] = self.counts_by_kind()
        meta["removals_file"] = file
        if sha256 is not None:
            meta["removals_sha256"] = sha256
        return meta

    def write(self, path: str | Path) -> str:
        """Write the manifest atomically (byte-identical for equal content); return its sha256."""
        text = manifest_text(self.frame())
        buffer = io.BytesIO()
        with gzip.GzipFile(fileobj=buffer, mode="wb", mtime=0, filename="") as handle:
            handle.write(text.encode("utf-8"))
        with atomic_write(path, "wb") as handle:
            handle.write(buffer.getvalue())
        return sha256_file(path)


def _listed(values: Iterable) -> list:
    """``list(values)``; a Series or array through ``tolist`` (not one Python step per Arrow element)."""
    return values.tolist() if isinstance(values, (pd.Series, pd.Index, np.ndarray)) else list(values)


def manifest_text(rows: pd.DataFrame) -> str:
    """The TSV text of a manifest frame (header, then one line per row)."""
    lines = ["\t".join(COLUMNS)]
    # each column read as Python values once (what iterating the rows gives, without a row per record)
    columns = [rows[column].tolist() for column in COLUMNS]
    record_ids = [str(record_id) for record_id in columns[0]]
    joined = "\0".join(record_ids)  # one search of every id for a field or line separator
    if any(c in joined for c in "\t\n\r"):
        record_id = next(r for r in record_ids if any(c in r for c in "\t\n\r"))
        raise TempoInputError(f"removal record id {record_id!r} contains a tab or newline")
    lines.extend(f"{record_id}\t{kind}\t{reason}\t{int(count)}"
                 for record_id, kind, reason, count in zip(record_ids, *columns[1:]))
    return "\n".join(lines) + "\n"


def read_removal_manifest(path: str | Path) -> pd.DataFrame:
    """Read a ``removals.tsv.gz`` back: DataFrame ``record_id, kind, reason, count`` (int64)."""
    path = Path(path)
    if not path.exists():
        raise TempoInputError("removal manifest missing", path=path)
    try:
        with gzip.open(path, "rt", encoding="utf-8", newline="") as handle:
            text = handle.read()
    except (OSError, EOFError, UnicodeDecodeError) as exc:
        raise TempoInputError(f"unreadable removal manifest: {exc}", path=path) from exc
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if not lines or lines[0] != "\t".join(COLUMNS):
        raise TempoInputError(f"removal manifest header must be {'<TAB>'.join(COLUMNS)!r}", path=path, line=1)
    rows = []
    for number, line in enumerate(lines[1:], start=2):
        fields = line.split("\t")
        if len(fields) != 4 or not fields[3].isdigit() or int(fields[3]) < 1:
            raise TempoInputError("removal manifest row must be record_id, kind, reason, count >= 1",
                                  path=path, line=number)
        rows.append((fields[0], fields[1], fields[2], int(fields[3])))
    frame = pd.DataFrame(rows, columns=list(COLUMNS))
    frame["count"] = frame["count"].astype(np.int64)
    return frame


# --- collectors: turn each stage's report into rows ------------------------------------------


def gaf_row_ids(frame: pd.DataFrame) -> pd.DataFrame:
    """``protein, term, evidence, date`` of GAF rows (the id columns of a ``gaf_row`` record)."""
    return frame[["protein", "term", "evidence", "date"]]


def gaf_rows_after_cutoff(reader: Any, release_id: str) -> pd.DataFrame:
    """The GAF rows ``reader.gaf_frame(release_id)`` dropped for a column-14 date after its cutoff.

    Reads again only the files ``reader.dropped_by_file`` reports drops for (files the reader
    has already checked against the cutoff and their sha256); returns ``read_gaf`` columns.
    """

    limit = date_to_int(reader.cutoff)
    frames = []
    for key, count in sorted(reader.dropped_by_file.items()):
        if not count or not key.split("/")[1:2] == [release_id]:
            continue
        frame = read_gaf(Path(reader.archive.root) / key)
        late = frame[frame["date"].to_numpy() > limit]
        if len(late) != count:
            raise TempoInputError(f"{key} changed while it was read: {count} rows after the cutoff, now {len(late)}",
                                  path=Path(reader.archive.root) / key)
        frames.append(late)
    if not frames:
        return pd.DataFrame(columns=["protein", "term", "evidence", "date"])
    return pd.concat(frames, ignore_index=True)


def log_gaf_rows(log: RemovalLog, after_cutoff: pd.DataFrame, gaf_frame: pd.DataFrame) -> None:
    """GAF rows dropped after the cutoff, and rows with a NOT qualifier (removed from both sets)."""

    log.add_frame(gaf_row_ids(after_cutoff), ["protein", "term", "evidence", "date"], "gaf_row", REASON_AFTER_CUTOFF)
    negated = (not_qualified_mask(gaf_frame["qualifier"]) if "qualifier" in gaf_frame.columns
               else pd.Series(False, index=gaf_frame.index))
    log.add_frame(gaf_row_ids(gaf_frame.loc[negated]), ["protein", "term", "evidence", "date"], "gaf_row",
                  REASON_NOT_QUALIFIER)


def log_term_cleaning(log: RemovalLog, rows: pd.DataFrame, report: Mapping[str, Any], ontology: Any,
                      kind: str) -> None:
    """Pairs ``clean_annotations`` dropped (obsolete/unknown/no-namespace) and rows it remapped.

    ``rows`` is the frame given to ``clean_annotations`` and ``report`` what it returned; the
    count of each dropped pair is its number of rows, so the per-reason sums equal the
    report's ``*_dropped`` counts.
    """

    for reason in TERM_REASONS.values():
        log._declare(reason)
    log._declare(REASON_ALT_ID)
    pairs = rows[["protein", "term"]].astype(str)
    dropped = report["dropped"]
    if len(dropped):
        hit = pairs.merge(dropped[["protein", "term", "reason"]].astype(str), on=["protein", "term"])
        hit["reason"] = hit["reason"].map(lambda r: TERM_REASONS.get(r, r))
        log.add_frame(hit, ["protein", "term"], kind)
    primary, _ = classify_terms(pd.unique(pairs["term"]).tolist(), ontology)
    remapped = {t for t, p in primary.items() if t != p}
    if remapped:
        log.add_frame(pairs[pairs["term"].isin(remapped)], ["protein", "term"], kind, REASON_ALT_ID)


def log_growth(log: RemovalLog, growth: Any) -> None:
    """Would-be targets the growth excluded (no sequence at ``a``, sequence changed)."""
    for reason in GROWTH_REASONS:
        log._declare(reason)
    log.add_frame(growth.removed, ["protein", "aspect", "mode"], "target")


def log_proteins(log: RemovalLog, proteins: Iterable[str], reason: str) -> None:
    """Proteins left out (no row in a precomputed embeddings file, no embedding for the corpus)."""
    log._declare(reason)
    log.add(sorted(set(map(str, proteins))), "protein", reason)


def submission_removals(predictions: pd.DataFrame, max_terms_per_aspect: int = 1500) -> pd.DataFrame:
    """Rows ``write_cafa_submission`` leaves out, with the same rules: ``protein, term, reason``.

    A duplicate (protein, term) keeps its highest two-decimal score (the others are
    ``duplicate_lower_score``); a score rounding to 0.00 is ``score_rounds_to_zero``; past
    ``max_terms_per_aspect`` per (protein, aspect), highest score first then term id, rows are
    ``beyond_max_terms``.
    """

    protein, term, aspect = (predictions[column].astype(str) for column in ("protein", "term", "aspect"))
    cents = score_cents(pd.to_numeric(predictions["score"]).to_numpy(dtype=np.float64))
    _, removed = submission_rows(protein, term, aspect, cents, max_terms_per_aspect)
    rows = np.concatenate([removed["duplicate"], removed["zero"], removed["truncated"]])
    reasons = np.repeat([REASON_DUPLICATE, REASON_ZERO, REASON_TRUNCATED],
                        [len(removed["duplicate"]), len(removed["zero"]), len(removed["truncated"])])
    return pd.DataFrame({"protein": protein.array.take(rows), "term": term.array.take(rows),
                         "reason": reasons.astype(object)})


def log_submission(log: RemovalLog, predictions: pd.DataFrame, max_terms_per_aspect: int = 1500) -> None:
    """Predictions left out of a CAFA submission (see :func:`submission_removals`)."""
    for reason in (REASON_ZERO, REASON_TRUNCATED, REASON_DUPLICATE):
        log._declare(reason)
    log.add_frame(submission_removals(predictions, max_terms_per_aspect), ["protein", "term"], "prediction")


def log_evaluation(log: RemovalLog, growth: Any, methods: Mapping[str, pd.DataFrame]) -> None:
    """What scoring on ``growth`` leaves out of each method's predictions and of the truth.

    Predictions for a (protein, aspect) that is not a target are never scored (one record per
    method, protein and aspect, counting its rows); PK known terms are removed from the truth
    (one record per pair) and from the predictions (one record per predicted known pair).
    """
    for reason in (REASON_NOT_TARGET, REASON_KNOWN_PREDICTED, REASON_KNOWN_TRUTH):
        log._declare(reason)
    targets = growth.targets[["protein", "aspect"]].astype(str).drop_duplicates()
    known = growth.known[["protein", "term", "aspect"]].astype(str).drop_duplicates()
    # the rows a join with the targets misses and the rows a join with the known terms finds (ids as strings:
    # no missing key), found on integer codes of the ids: the records are counted per id, so their order is free
    for method in sorted(methods):
        preds = methods[method][["protein", "term", "aspect"]].astype(str)
        outside = preds[~rows_in(preds, targets, ["protein", "aspect"])].assign(method=method)
        log.add_frame(outside, ["method", "protein", "aspect"], "prediction", REASON_NOT_TARGET)
        masked = preds[rows_in(preds, known, ["protein", "term", "aspect"])].assign(method=method)
        log.add_frame(masked, ["method", "protein", "term"], "prediction", REASON_KNOWN_PREDICTED)
    truth = growth.ground_truth[["protein", "term", "aspect"]].astype(str)
    log.add_frame(truth[rows_in(truth, known, ["protein", "term", "aspect"])], ["protein", "term", "aspect"],
                  "ground_truth", REASON_KNOWN_TRUTH)


# --- verification --------------------------------------------------------------------------


def verify_removal_manifest(folder: str | Path, meta: Mapping[str, Any]) -> list[str]:
    """Problems (empty when none) between an artefact's metadata and its removal manifest.

    ``meta`` is the artefact's sidecar or its Dagster materialisation metadata (plain values):
    the file named by ``removals_file`` must exist, hash to ``removals_sha256`` and hold, per
    reason, rows whose counts sum to ``removed_<reason>``; ``removed_total`` is their sum.
    """
    folder = Path(folder)
    name = meta.get("removals_file")
    if not name:
        return ["metadata names no removals_file"]
    path = folder / str(name)
    if not path.exists():
        return [f"{path}: removal manifest missing"]
    problems = []
    expected_sha = meta.get("removals_sha256")
    if expected_sha and sha256_file(path) != expected_sha:
        problems.append(f"{path}: sha256 differs from the recorded removals_sha256")
    try:
        rows = read_removal_manifest(path)
    except TempoInputError as exc:
        return problems + [str(exc)]
    in_file = {str(k): int(v) for k, v in rows.groupby("reason")["count"].sum().items()}
    recorded = {k[len(METADATA_PREFIX):]: v for k, v in meta.items()
                if k.startswith(METADATA_PREFIX) and k != f"{METADATA_PREFIX}total"}
    for reason in sorted(set(in_file) | set(recorded)):
        have, said = in_file.get(reason, 0), recorded.get(reason)
        if said is None:
            problems.append(f"{path}: reason {reason!r} ({have}) has no {METADATA_PREFIX}{reason} in the metadata")
        elif int(said) != have:
            problems.append(f"{path}: {METADATA_PREFIX}{reason}={said} but the manifest counts {have}")
    total = meta.get(f"{METADATA_PREFIX}total")
    if total is not None and int(total) != int(rows["count"].sum()):
        problems.append(f"{path}: {METADATA_PREFIX}total={total} but the manifest counts {int(rows['count'].sum())}")
    return problems


def audit_removal_manifests(root: str | Path, required_assets: Iterable[str] = ()) -> list[dict[str, Any]]:
    """Check every artefact under an artefact store ``root`` against its removal manifest.

    Returns one dict ``asset, partition, problem`` per problem: a sidecar of an asset in
    ``required_assets`` without a manifest, or any :func:`verify_removal_manifest` problem.
    """
    required = set(required_assets)
    found = []
    for sidecar in sorted(Path(root).glob("*/*/artefact.json")):
        try:
            meta = json.loads(sidecar.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise TempoInputError(f"corrupt sidecar: {exc}", path=sidecar, line=exc.lineno) from exc
        asset, partition = sidecar.parent.parent.name, sidecar.parent.name
        if "removals_file" not in meta and asset not in required:
            continue
        for problem in verify_removal_manifest(sidecar.parent, meta):
            found.append({"asset": asset, "partition": partition, "problem": problem})
    return found
