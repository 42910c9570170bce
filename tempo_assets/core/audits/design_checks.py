"""The checks of a design audit: the evaluation table and reference read as declared, rows
assigned to partitions, and each declared rule checked (repeated entities, overlap, groups,
labels, chronology, the reference), each finding with its status and a scope sentence saying
what a negative result covers.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from tempo_assets.core.audits.design_spec import (
    ALGORITHM, DesignError, EVALUATED, EXIT_CODES, EvaluationDesign, REPORT_SCHEMA_VERSION, STATUS_RANK,
    _LIST_SUFFIXES, _PARQUET_SUFFIXES, _TABLE_SUFFIXES, _parse_instant, _zone,
)


def read_table(path: str | Path) -> pd.DataFrame:
    """Read a CSV, TSV or parquet table; delimited text is read as strings (ids stay exact).

    Only empty cells are missing: ``NA`` or ``null`` are ordinary strings (they may be ids).
    """
    path = Path(path)
    if not path.is_file():
        raise DesignError("table not found", path=path)
    suffixes = [s.lower() for s in path.suffixes]
    last = suffixes[-2] if suffixes and suffixes[-1] == ".gz" and len(suffixes) > 1 else (
        suffixes[-1] if suffixes else "")
    try:
        if last in _PARQUET_SUFFIXES:
            return pd.read_parquet(path)
        if last in _TABLE_SUFFIXES:
            return pd.read_csv(path, sep=_TABLE_SUFFIXES[last], dtype=str, keep_default_na=False,
                               na_values=[""], compression="infer")
    except (ValueError, OSError, pd.errors.ParserError) as exc:
        raise DesignError(f"cannot read table: {exc}", path=path) from exc
    raise DesignError(f"unsupported table format {last or '(no suffix)'!r}: use .csv, .tsv or .parquet",
                      path=path)


def read_reference(path: str | Path, design: EvaluationDesign) -> pd.DataFrame:
    """Read a training reference: its entity columns, train-partition rows only.

    A file without the design's split column is the train partition. A plain id list (``.txt``,
    one id per line) is accepted when the identity is a single column.
    """
    path = Path(path)
    if not path.is_file():
        raise DesignError("reference file not found", path=path)
    if path.suffix.lower() in _LIST_SUFFIXES:
        if len(design.entity_columns) != 1:
            raise DesignError(f"an id list cannot hold the composite identity "
                              f"{list(design.entity_columns)}; give a table with those columns", path=path)
        with open(path, encoding="utf-8") as handle:
            ids = [line.strip() for line in handle if line.strip() and not line.startswith("#")]
        return pd.DataFrame({design.entity_columns[0]: pd.Series(ids, dtype=object)})
    frame = read_table(path)
    missing = [c for c in design.entity_columns if c not in frame.columns]
    if missing:
        raise DesignError(f"key 'entity_columns': column {missing[0]!r} is not in the reference "
                          f"(columns: {', '.join(map(str, frame.columns))})", path=path)
    if design.split_column is not None and design.split_column in frame.columns:
        roles = _assign_partitions(frame[design.split_column], design, path)
        frame = frame.loc[roles == "train"]
    return frame.loc[:, list(design.entity_columns)].reset_index(drop=True)


def _assign_partitions(values: pd.Series, design: EvaluationDesign, path: Path | None) -> np.ndarray:
    aliases = design.alias_map()
    text = values.map(lambda v: None if _is_missing(v) else str(v))
    mapped = text.map(aliases)
    unknown = mapped.isna()
    if unknown.any():
        counts = text[unknown].fillna("<missing>").value_counts()
        value, count = counts.index[0], int(counts.iloc[0])
        more = f" (and {len(counts) - 1} other unknown value(s))" if len(counts) > 1 else ""
        raise DesignError(
            f"key 'split_column': unknown split value {value!r} in column {design.split_column!r} "
            f"on {count} row(s){more}; declare it under 'partitions' "
            f"(declared: {', '.join(sorted(aliases))})",
            path=path,
        )
    return mapped.to_numpy(dtype=object)


def _is_missing(value: Any) -> bool:
    if value is None or value is pd.NA or value is pd.NaT:
        return True
    if isinstance(value, float) and math.isnan(value):
        return True
    return isinstance(value, str) and not value.strip()


def audit_design(
    design: EvaluationDesign,
    table: pd.DataFrame | None = None,
    reference: pd.DataFrame | None = None,
    reference_complete: bool = False,
    max_examples: int = 5,
    inputs: list[dict] | None = None,
    reference_path: str | Path | None = None,
) -> dict:
    """Run every declared check and return the report (a JSON-ready dict).

    Parameters
    ----------
    design : EvaluationDesign
    table : DataFrame, optional
        The evaluation table, shape ``(n_rows, n_columns)``; read from ``design.table_path``
        when omitted.
    reference : DataFrame, optional
        The training reference's entity columns, shape ``(n_reference, len(entity_columns))``
        (see :func:`read_reference`). ``None``: no reference supplied.
    reference_complete : bool
        The caller's declaration that ``reference`` lists everything the model trained on.
    max_examples : int
        At most this many example identities per finding are kept in the report.
    inputs : list of dict, optional
        Input snapshots (role, path, sha256) to record; :func:`audit_design_files` fills it.
    """
    if max_examples < 0:
        raise DesignError("max_examples must be >= 0")
    table_path = design.table_path if design.table is not None else None
    if table is None:
        table = read_table(design.table_path)
    _check_columns(design, table, table_path)

    n = len(table)
    roles = _partition_roles(design, table, table_path)

    keys, ref_keys, identified, examples_of = _entity_keys(design, table, reference)
    ctx = _Context(design, table, roles, keys, identified, examples_of, max_examples)

    checks = _declared_checks(ctx)
    checks.append(_check_reference(ctx, reference, ref_keys, reference_complete))
    status = max((c["status"] for c in checks), key=STATUS_RANK.__getitem__)
    partition_rows = {name: int((roles == name).sum()) for name in design.partitions}
    report = {
        "schema_version": REPORT_SCHEMA_VERSION,
        "algorithm": dict(ALGORITHM),
        "status": status,
        "exit_code": EXIT_CODES[status],
        "rules": design.rules(),
        "rules_sha256": design.rules_digest(),
        "inputs": inputs or [],
        "reference": _reference_summary(reference, reference_path, reference_complete),
        "table": {"rows": n, "partition_rows": partition_rows,
                  "unidentifiable_rows": int((~identified).sum())},
        "checks": checks,
        "not_requested": _not_requested(design),
    }
    report["scope"] = _scope_sentence(design, report)
    return report


def _partition_roles(design: EvaluationDesign, table: pd.DataFrame, table_path: Path | None) -> np.ndarray:
    """Each row's partition: by its split column, or ``test`` for all when there is none."""
    if design.split_column is None:
        return np.full(len(table), "test", dtype=object)
    return _assign_partitions(table[design.split_column], design, table_path)


def _declared_checks(ctx: "_Context") -> list[dict]:
    """The findings of the checks the design asks for, the reference check aside."""
    design = ctx.design
    checks = [_check_repeated(ctx), _check_overlap(ctx)]
    checks += [_check_group(ctx, column) for column in design.group_columns]
    if design.label_column is not None:
        checks.append(_check_labels(ctx))
    if design.chronology is not None:
        checks.append(_check_chronology(ctx))
    return checks


def _not_requested(design: EvaluationDesign) -> list[str]:
    """The checks the design does not ask for."""
    not_requested = []
    if not design.group_columns:
        not_requested.append("shared_groups")
    if design.label_column is None:
        not_requested.append("conflicting_labels")
    if design.chronology is None:
        not_requested.append("chronology")
    return not_requested


def _reference_summary(reference: pd.DataFrame | None, reference_path: str | Path | None,
                       reference_complete: bool) -> dict:
    """What the report says of the training reference: supplied, where from, declared complete, size."""
    return {
        "supplied": reference is not None,
        "path": str(reference_path) if reference_path is not None else None,
        "declared_complete": bool(reference_complete) if reference is not None else False,
        "records": int(len(reference)) if reference is not None else 0,
    }


def _check_columns(design: EvaluationDesign, table: pd.DataFrame, path: Path | None) -> None:
    columns = set(map(str, table.columns))
    wanted = [("split_column", design.split_column)]
    wanted += [("entity_columns", c) for c in design.entity_columns]
    wanted += [("group_columns", c) for c in design.group_columns]
    wanted.append(("label_column", design.label_column))
    if design.chronology is not None:
        wanted.append(("chronology.column", design.chronology.column))
    for key, column in wanted:
        if column is not None and column not in columns:
            raise DesignError(f"key '{key}': column {column!r} is not in the table "
                              f"(columns: {', '.join(sorted(columns))})", path=path)


def _as_text(series: pd.Series) -> pd.Series:
    """Values as strings with missing (and blank) values as None, for exact identity."""
    return series.map(lambda v: None if _is_missing(v) else str(v))


def _entity_keys(design, table, reference):
    """One int64 key per row for the entity tuple, shared by the table and the reference.

    Returns ``keys`` (n_rows,), ``ref_keys`` (n_reference,) or None, ``identified`` (n_rows,)
    bool (no missing identity value) and a function key -> identity tuple for examples.
    """
    cols = list(design.entity_columns)
    parts = [table.loc[:, cols]]
    if reference is not None:
        parts.append(reference.loc[:, cols])
    both = pd.concat(parts, ignore_index=True)
    text = {c: _as_text(both[c]) for c in cols}
    missing = np.zeros(len(both), dtype=bool)
    for c in cols:
        missing |= text[c].isna().to_numpy()
    combined = np.zeros(len(both), dtype=np.int64)
    for c in cols:
        codes, uniques = pd.factorize(text[c], use_na_sentinel=True)
        codes = codes.astype(np.int64) + 1  # 0 for missing
        combined, _ = pd.factorize(combined * (len(uniques) + 1) + codes)
        combined = combined.astype(np.int64)
    combined[missing] = -1
    n = len(table)
    first_row = {}

    def example_of(key: int) -> list[str]:
        if not first_row:
            _, index = np.unique(combined, return_index=True)
            first_row.update(zip(np.unique(combined).tolist(), index.tolist()))
        row = first_row[int(key)]
        return [text[c].iloc[row] for c in cols]

    keys = combined[:n]
    ref_keys = combined[n:] if reference is not None else None
    return keys, ref_keys, ~missing[:n], example_of


@dataclass
class _Context:
    design: EvaluationDesign
    table: pd.DataFrame
    roles: np.ndarray
    keys: np.ndarray
    identified: np.ndarray
    example_of: Any
    max_examples: int

    def examples(self, keys) -> list[list[str]]:
        picked = sorted(int(k) for k in keys)[: self.max_examples] if self.max_examples else []
        return [self.example_of(k) for k in picked]


def _status(violation: bool, untestable: bool, on_violation: str = "fail") -> str:
    if violation:
        return "fail" if on_violation == "fail" else "investigate"
    return "not_testable" if untestable else "pass"


def _check_repeated(ctx: _Context) -> dict:
    counts, examples, total_entities = {}, {}, 0
    for name in ctx.design.partitions:
        mask = (ctx.roles == name) & ctx.identified
        keys = ctx.keys[mask]
        uniq, freq = np.unique(keys, return_counts=True)
        repeated = uniq[freq > 1]
        counts[name] = {"repeated_entities": int(len(repeated)),
                        "rows_in_repeats": int(freq[freq > 1].sum())}
        total_entities += len(repeated)
        if len(repeated):
            examples[name] = ctx.examples(repeated)
    unidentifiable = int((~ctx.identified).sum())
    policy = ctx.design.repeated_entities
    status = _status(policy == "fail" and total_entities > 0, unidentifiable > 0)
    reason = (f"entities repeated within a partition ({policy} by the design)" if total_entities
              else "no entity repeats within a partition")
    if unidentifiable and status != "fail":
        reason = f"{unidentifiable} row(s) have a missing identity value and cannot be compared"
    return _finding("repeated_entities", status, reason,
                    {"by_partition": counts, "unidentifiable_rows": unidentifiable}, examples)


def _check_overlap(ctx: _Context) -> dict:
    counts, examples, total = {}, {}, 0
    for a, b in ctx.design.forbidden_pairs:
        in_a = ctx.keys[(ctx.roles == a) & ctx.identified]
        in_b = ctx.keys[(ctx.roles == b) & ctx.identified]
        shared = np.intersect1d(in_a, in_b)
        label = f"{a}|{b}"
        counts[label] = {"shared_entities": int(len(shared)),
                         f"rows_in_{a}": int(np.isin(in_a, shared).sum()),
                         f"rows_in_{b}": int(np.isin(in_b, shared).sum())}
        total += len(shared)
        if len(shared):
            examples[label] = ctx.examples(shared)
    unidentifiable = int((~ctx.identified).sum())
    status = _status(total > 0, unidentifiable > 0)
    if not ctx.design.forbidden_pairs:
        reason = "the design forbids no partition pair"
    elif total:
        reason = "entities shared across a forbidden partition pair"
    elif unidentifiable:
        reason = f"{unidentifiable} row(s) have a missing identity value and cannot be compared"
    else:
        reason = "no entity shared across a forbidden partition pair"
    return _finding("partition_overlap", status, reason,
                    {"by_pair": counts, "unidentifiable_rows": unidentifiable}, examples)


def _check_group(ctx: _Context, column: str) -> dict:
    values = _as_text(ctx.table[column])
    present = values.notna().to_numpy()
    codes, uniques = pd.factorize(values)
    counts, examples, total = {}, {}, 0
    for a, b in ctx.design.forbidden_pairs:
        in_a = codes[(ctx.roles == a) & present]
        in_b = codes[(ctx.roles == b) & present]
        shared = np.intersect1d(in_a, in_b)
        label = f"{a}|{b}"
        counts[label] = {"shared_groups": int(len(shared)),
                         f"rows_in_{a}": int(np.isin(in_a, shared).sum()),
                         f"rows_in_{b}": int(np.isin(in_b, shared).sum())}
        total += len(shared)
        if len(shared) and ctx.max_examples:
            examples[label] = [[str(uniques[k])] for k in sorted(shared.tolist())[: ctx.max_examples]]
    missing = int((~present).sum())
    status = _status(total > 0, missing > 0)
    if total:
        reason = f"group keys of {column!r} shared across a forbidden partition pair"
    elif missing:
        reason = f"{missing} row(s) have no {column!r} value and cannot be compared"
    else:
        reason = f"no {column!r} group key shared across a forbidden partition pair"
    return _finding(f"shared_groups:{column}", status, reason,
                    {"by_pair": counts, "rows_without_group": missing}, examples)


def _check_labels(ctx: _Context) -> dict:
    design = ctx.design
    raw = ctx.table[design.label_column]
    text = _as_text(raw)
    has_label = text.notna().to_numpy()
    numeric = pd.to_numeric(text[has_label], errors="coerce")
    is_numeric = bool(has_label.any()) and not numeric.isna().any()
    frame = pd.DataFrame({"key": ctx.keys, "role": ctx.roles, "has": has_label})
    frame = frame.loc[ctx.identified]
    if is_numeric:
        values = np.full(len(ctx.table), np.nan)
        values[has_label] = numeric.to_numpy(dtype=float)
        frame["value"] = values[ctx.identified]
    else:
        frame["value"] = text.to_numpy(dtype=object)[ctx.identified]
    sizes = frame.groupby("key").size()
    repeated_keys = sizes.index[sizes > 1]
    rep = frame.loc[frame["key"].isin(repeated_keys)]
    labelled = rep.loc[rep["has"]]
    grouped = labelled.groupby("key")["value"]
    if is_numeric:
        spread = grouped.max() - grouped.min()
        conflicting = spread.index[spread > design.label_tolerance + 1e-12 * max(1.0, design.label_tolerance)]
    else:
        distinct = grouped.nunique()
        conflicting = distinct.index[distinct > 1]
    conflicting = np.asarray(conflicting, dtype=np.int64)
    unlabelled_in_repeats = rep.loc[~rep["has"], "key"].unique()
    untestable = np.setdiff1d(unlabelled_in_repeats, conflicting)
    in_conflict = rep.loc[rep["key"].isin(conflicting)]
    spans = in_conflict.groupby("key")["role"].nunique()
    counts = {
        "label_kind": "numeric" if is_numeric else "categorical",
        "conflicting_entities": int(len(conflicting)),
        "conflicting_rows": int(len(in_conflict)),
        "conflicts_within_one_partition": int((spans == 1).sum()),
        "conflicts_across_partitions": int((spans > 1).sum()),
        "rows_without_label": int((~has_label).sum()),
        "repeated_entities_with_missing_label": int(len(untestable)),
    }
    if not has_label.any():
        status, reason = "not_testable", f"no row has a {design.label_column!r} value"
    else:
        status = _status(len(conflicting) > 0, len(untestable) > 0, design.conflicting_labels)
        if len(conflicting):
            tol = f" by more than {design.label_tolerance:g}" if is_numeric else ""
            reason = f"the same entity carries labels that differ{tol} (policy {design.conflicting_labels})"
        elif len(untestable):
            reason = "repeated entities with a missing label cannot be compared"
        else:
            reason = "every repeated entity carries consistent labels"
    examples = {"conflicting": ctx.examples(conflicting)} if len(conflicting) else {}
    return _finding("conflicting_labels", status, reason, counts, examples)


def parse_instants(values: pd.Series, timezone_name: str = "UTC") -> np.ndarray:
    """ISO dates/timestamps -> UTC nanoseconds since the epoch; missing or unparseable -> NaN.

    Parameters
    ----------
    values : Series, shape (n,)
        Strings (``YYYY-MM-DD``, ``YYYYMMDD``, ISO timestamps with or without an offset),
        dates, datetimes or a datetime64 column. Naive values are read in ``timezone_name``.

    Returns
    -------
    ndarray of float64, shape (n,)
    """
    zone = _zone(timezone_name)
    if zone is None:
        raise DesignError(f"unknown time zone {timezone_name!r}")
    if pd.api.types.is_datetime64_any_dtype(values.dtype):
        stamps = pd.DatetimeIndex(values)
        if stamps.tz is None:
            stamps = stamps.tz_localize(timezone_name if zone is not timezone.utc else "UTC",
                                        ambiguous="NaT", nonexistent="NaT")
        stamps = stamps.tz_convert("UTC")
        out = stamps.as_unit("ns").asi8.astype(np.float64)
        out[stamps.isna()] = np.nan
        return out
    codes, uniques = pd.factorize(values, use_na_sentinel=True)
    epoch = datetime(1970, 1, 1, tzinfo=timezone.utc)
    parsed = np.full(len(uniques) + 1, np.nan)
    for i, value in enumerate(uniques):
        moment = _parse_instant(value, zone)
        if moment is not None:
            delta = moment - epoch
            parsed[i] = (delta // timedelta(microseconds=1)) * 1000.0
    return parsed[np.where(codes < 0, len(uniques), codes)]


def _epoch_ns(moment: datetime) -> float:
    return (moment - datetime(1970, 1, 1, tzinfo=timezone.utc)) // timedelta(microseconds=1) * 1000.0


def _check_chronology(ctx: _Context) -> dict:
    chron = ctx.design.chronology
    stamps = parse_instants(ctx.table[chron.column], chron.timezone)
    dated = ~np.isnan(stamps)
    is_train = ctx.roles == "train"
    is_eval = np.isin(ctx.roles, EVALUATED)
    train, evaluated = stamps[is_train & dated], stamps[is_eval & dated]
    counts: dict[str, Any] = {
        "undated_rows": int((~dated).sum()),
        "dated_train_rows": int(len(train)),
        "dated_evaluated_rows": int(len(evaluated)),
    }
    # a record 'precedes' another when strictly earlier, or no later when ties are allowed
    def not_before(later, earlier_max):
        return later <= earlier_max if chron.strictly_before else later < earlier_max

    violations = 0
    if len(train) and len(evaluated):
        counts["evaluated_not_after_train"] = int(not_before(evaluated, train.max()).sum())
        counts["train_not_before_evaluated"] = int(not_before(evaluated.min(), train).sum())
        violations += counts["evaluated_not_after_train"] + counts["train_not_before_evaluated"]
    if chron.cutoff is not None:
        cut = _epoch_ns(chron.cutoff)
        counts["train_at_or_after_cutoff"] = int((train >= cut).sum())
        counts["evaluated_before_cutoff"] = int((evaluated < cut).sum())
        violations += counts["train_at_or_after_cutoff"] + counts["evaluated_before_cutoff"]
    valid = stamps[(ctx.roles == "validation") & dated]
    test = stamps[(ctx.roles == "test") & dated]
    if chron.test_cutoff is not None:
        cut = _epoch_ns(chron.test_cutoff)
        counts["validation_at_or_after_test_cutoff"] = int((valid >= cut).sum())
        counts["test_before_test_cutoff"] = int((test < cut).sum())
        violations += counts["validation_at_or_after_test_cutoff"] + counts["test_before_test_cutoff"]
    if chron.validation_precedes_test:
        if len(valid) and len(test):
            counts["test_not_after_validation"] = int(not_before(test, valid.max()).sum())
            violations += counts["test_not_after_validation"]
    comparable = bool(len(train) and len(evaluated)) or chron.cutoff is not None \
        or chron.test_cutoff is not None
    untestable = counts["undated_rows"] > 0 or not comparable
    status = _status(violations > 0, untestable)
    if violations:
        reason = "dated records out of the declared order"
    elif counts["undated_rows"]:
        reason = f"{counts['undated_rows']} row(s) have a missing or unparseable {chron.column!r}"
    elif not comparable:
        reason = "no cutoff and no dated train/evaluated pair to compare"
    else:
        reason = "every dated record is in the declared order"
    return _finding("chronology", status, reason, counts, {})


def _check_reference(ctx: _Context, reference, ref_keys, complete: bool) -> dict:
    evaluated = np.isin(ctx.roles, EVALUATED) & ctx.identified
    counts: dict[str, Any] = {"reference_records": 0, "reference_entities": 0}
    if reference is None:
        return _finding("reference_overlap", "not_testable", "no training reference supplied", counts, {})
    valid_ref = ref_keys[ref_keys >= 0]
    counts["reference_records"] = int(len(ref_keys))
    counts["reference_rows_without_identity"] = int((ref_keys < 0).sum())
    ref_unique = np.unique(valid_ref)
    counts["reference_entities"] = int(len(ref_unique))
    examples = {}
    total = 0
    by_partition = {}
    for name in EVALUATED:
        if name not in ctx.design.partitions:
            continue
        keys = ctx.keys[(ctx.roles == name) & ctx.identified]
        shared = np.intersect1d(keys, ref_unique)
        by_partition[name] = {"shared_entities": int(len(shared)),
                              "rows": int(np.isin(keys, shared).sum())}
        total += len(shared)
        if len(shared):
            examples[name] = ctx.examples(shared)
    counts["by_partition"] = by_partition
    unidentifiable = int((np.isin(ctx.roles, EVALUATED) & ~ctx.identified).sum())
    counts["evaluated_rows_without_identity"] = unidentifiable
    if total:
        # an overlap is a witness whatever the completeness declaration says
        status, reason = "fail", "evaluated entities appear in the training reference"
    elif len(ref_unique) == 0:
        status, reason = "not_testable", "the training reference is empty"
    elif not complete:
        status, reason = "not_testable", ("the training reference is not declared complete, so "
                                           "an empty overlap excludes nothing")
    elif unidentifiable:
        status, reason = "not_testable", f"{unidentifiable} evaluated row(s) have a missing identity value"
    elif not evaluated.any():
        status, reason = "not_testable", "no evaluated (validation/test) row to compare"
    else:
        status, reason = "pass", "no evaluated entity appears in the declared-complete reference"
    return _finding("reference_overlap", status, reason, counts, examples)


def _finding(name: str, status: str, reason: str, counts: dict, examples: dict) -> dict:
    return {"name": name, "status": status, "reason": reason, "counts": counts, "examples": examples}


def _scope_sentence(design: EvaluationDesign, report: dict) -> str:
    identity = ", ".join(design.entity_columns)
    table = next((i for i in report["inputs"] if i.get("role") == "table"), None)
    table_text = (f"the table {Path(table['path']).name} (sha256 {table['sha256'][:12]}...)"
                  if table else "the supplied table")
    checked = [f"repeated and shared identities over ({identity}) for the forbidden pairs "
               + (", ".join("/".join(p) for p in design.forbidden_pairs) or "(none)")]
    if design.group_columns:
        checked.append("shared group keys in " + ", ".join(design.group_columns))
    if design.label_column:
        checked.append(f"label consistency of {design.label_column}")
    if design.chronology:
        checked.append(f"record order by {design.chronology.column}")
    ref = report["reference"]
    if ref["supplied"]:
        ref_text = (f"a training reference of {ref['records']} record(s) "
                    + ("declared complete" if ref["declared_complete"] else "not declared complete"))
    else:
        ref_text = "no training reference"
    return (
        f"Checked {report['table']['rows']} row(s) of {table_text} and {ref_text} against the "
        f"declared rules (sha256 {report['rules_sha256'][:12]}...): " + "; ".join(checked) + ". "
        "The verdict covers only these records, this identity and these rules; it cannot see "
        "training data that was not supplied, identifiers that alias one another, or an inaccurate "
        "completeness declaration, and a pass is not a certificate that the evaluation is free of "
        "leaks."
    )
