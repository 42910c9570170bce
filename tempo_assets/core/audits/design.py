"""Audit a declared evaluation split design (``tempo-evaluation-design/v1``).

A design file names an evaluation table, the column holding each row's partition, the identity
of an entity and the rules the split must obey. :func:`audit_design` checks the supplied records
against those rules and returns a report whose per-check status is ``pass``, ``fail``,
``investigate`` or ``not_testable``. A negative audit is scoped: it covers the supplied records
and the declared rules, nothing else (see ``docs/design_audit.md``).
"""
from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta, timezone
from pathlib import Path
from typing import Annotated, Any, Literal, Mapping
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import numpy as np
import pandas as pd
import pydantic
import yaml

from tempo_assets.core.base.errors import TempoInputError
from tempo_assets.core.base.io import atomic_write, digest_json, sha256_file
from tempo_assets.core.base.windows import split_window_key

SCHEMA_VERSION = "tempo-evaluation-design/v1"
REPORT_SCHEMA_VERSION = "tempo-design-audit-report/v1"
ALGORITHM = {"name": "tempo-design-audit", "version": "1.0.0"}

PARTITIONS = ("train", "validation", "test")
EVALUATED = ("validation", "test")
DEFAULT_ALIASES = {name: (name,) for name in PARTITIONS}

# worst last: the overall status is the highest-ranked status of any check
STATUS_RANK = {"pass": 0, "not_testable": 1, "investigate": 2, "fail": 3}
EXIT_CODES = {"pass": 0, "fail": 1, "investigate": 2, "not_testable": 2}  # 3: input error (CLI)

_DESIGN_KEYS = {
    "schema_version", "table", "split_column", "partitions", "forbidden_pairs", "entity_columns",
    "group_columns", "label_column", "label_tolerance", "conflicting_labels", "repeated_entities",
    "chronology", "description",
}
_CHRONOLOGY_KEYS = {"column", "cutoff", "test_cutoff", "strictly_before", "timezone",
                    "validation_precedes_test"}
_TABLE_SUFFIXES = {".csv": ",", ".tsv": "\t", ".tab": "\t"}
_PARQUET_SUFFIXES = {".parquet", ".pq"}
_LIST_SUFFIXES = {".txt", ".list", ".ids"}


class DesignError(TempoInputError):
    """A design file, evaluation table or reference file that cannot be audited as declared."""


class _ChronologyKeys(pydantic.BaseModel):
    """The keys of ``chronology`` and their simple types (values are parsed in ``_parse_chronology``)."""

    model_config = pydantic.ConfigDict(extra="forbid")
    column: Any = None
    cutoff: Any = None
    test_cutoff: Any = None
    timezone: Any = "UTC"
    strictly_before: pydantic.StrictBool = True
    validation_precedes_test: pydantic.StrictBool = False


class _DesignKeys(pydantic.BaseModel):
    """The declaration's keys, required ones, closed choices and number ranges (pydantic).

    Structured values (partitions, pairs, column lists, instants) keep their own parsers below,
    whose messages name the offending entry.
    """

    model_config = pydantic.ConfigDict(extra="forbid")
    schema_version: Literal["tempo-evaluation-design/v1"]
    table: Any
    split_column: Any
    entity_columns: Any
    partitions: Any = None
    forbidden_pairs: Any = None
    group_columns: Any = None
    label_column: Any = None
    label_tolerance: Annotated[float, pydantic.Field(ge=0, allow_inf_nan=False, strict=False)] = 0.0
    conflicting_labels: Literal["fail", "warn"] = "fail"
    repeated_entities: Literal["allow", "fail"] = "allow"
    chronology: _ChronologyKeys | None = None
    description: Any = None

    @pydantic.field_validator("label_tolerance", mode="before")
    @classmethod
    def _not_bool(cls, value: Any) -> Any:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"must be a finite number >= 0, got {value!r}")
        return value


def _first_error(exc: pydantic.ValidationError) -> tuple[str, str]:
    """``(dotted key, message)`` of the error to report: unknown keys first, then missing ones."""
    rank = {"extra_forbidden": 0, "missing": 1}
    error = min(exc.errors(), key=lambda e: rank.get(e["type"], 2))
    key = ".".join(str(part) for part in error["loc"])
    allowed = _CHRONOLOGY_KEYS if key.startswith("chronology.") else _DESIGN_KEYS
    messages = {"extra_forbidden": f"unknown key (allowed: {', '.join(sorted(allowed))})",
                "missing": "required key is missing",
                "bool_type": f"must be true or false, got {error.get('input')!r}",
                "model_type": "must be a mapping with at least 'column'"}
    if error["type"] == "literal_error":
        expected = error.get("ctx", {}).get("expected", "")
        return key, f"expected {expected}, got {error.get('input')!r}"
    if error["type"] in messages:
        return key, messages[error["type"]]
    value = error.get("input")
    return key, str(error["msg"]).removeprefix("Value error, ") if error["type"] == "value_error" \
        else f"must be a finite number >= 0, got {value!r}"


# --------------------------------------------------------------------------------------------
# the declaration


@dataclass(frozen=True)
class Chronology:
    """Declared temporal ordering: ``column`` holds ISO dates or timestamps."""

    column: str
    cutoff: datetime | None  # aware, UTC
    cutoff_text: str | None
    strictly_before: bool = True
    timezone: str = "UTC"
    validation_precedes_test: bool = False
    test_cutoff: datetime | None = None  # aware, UTC: validation before it, test on/after it

    def rules(self) -> dict:
        return {
            "column": self.column,
            "cutoff": self.cutoff.isoformat() if self.cutoff is not None else None,
            "test_cutoff": self.test_cutoff.isoformat() if self.test_cutoff is not None else None,
            "strictly_before": self.strictly_before,
            "timezone": self.timezone,
            "validation_precedes_test": self.validation_precedes_test,
        }


@dataclass(frozen=True)
class EvaluationDesign:
    """A parsed, validated ``tempo-evaluation-design/v1`` declaration (defaults applied)."""

    path: Path | None
    table: str | None
    split_column: str | None
    partitions: dict[str, tuple[str, ...]]
    forbidden_pairs: tuple[tuple[str, str], ...]
    entity_columns: tuple[str, ...]
    group_columns: tuple[str, ...] = ()
    label_column: str | None = None
    label_tolerance: float = 0.0
    conflicting_labels: str = "fail"
    repeated_entities: str = "allow"
    chronology: Chronology | None = None
    description: str | None = field(default=None, compare=False)

    @property
    def table_path(self) -> Path:
        """The table, resolved relative to the design file's folder."""
        if self.table is None:
            raise DesignError("the design names no table", path=self.path)
        table = Path(self.table)
        if not table.is_absolute() and self.path is not None:
            table = self.path.parent / table
        return table

    def alias_map(self) -> dict[str, str]:
        """Split value -> canonical partition."""
        return {alias: name for name, aliases in self.partitions.items() for alias in aliases}

    def rules(self) -> dict:
        """The canonical rules: every setting that changes a verdict (not the table's path)."""
        return {
            "schema_version": SCHEMA_VERSION,
            "split_column": self.split_column,
            "partitions": {name: sorted(self.partitions[name]) for name in PARTITIONS
                           if name in self.partitions},
            "forbidden_pairs": [list(pair) for pair in self.forbidden_pairs],
            "entity_columns": list(self.entity_columns),
            "group_columns": sorted(self.group_columns),
            "label_column": self.label_column,
            "label_tolerance": float(self.label_tolerance),
            "conflicting_labels": self.conflicting_labels,
            "repeated_entities": self.repeated_entities,
            "chronology": self.chronology.rules() if self.chronology is not None else None,
        }

    def rules_digest(self) -> str:
        """sha256 of the canonical JSON of :meth:`rules` (sorted keys, no whitespace)."""
        return hashlib.sha256(canonical_json(self.rules()).encode("utf-8")).hexdigest()


canonical_json = digest_json  # the one compact canonical JSON (core/base/io.py)


class _StrictLoader(yaml.SafeLoader):
    """Safe YAML loader that refuses duplicate mapping keys (a silent override hides a typo)."""


def _construct_mapping(loader: _StrictLoader, node: yaml.MappingNode, deep: bool = False) -> dict:
    seen: dict[Any, int] = {}
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r} (first on line {seen[key] + 1})", key_node.start_mark
            )
        seen[key] = key_node.start_mark.line
    return loader.construct_mapping(node, deep=deep)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def load_design(path: str | Path) -> EvaluationDesign:
    """Read and validate a design YAML file; errors name the file and the key (or line)."""
    path = Path(path)
    if not path.is_file():
        raise DesignError("design file not found", path=path)
    try:
        with open(path, encoding="utf-8") as handle:
            mapping = yaml.load(handle, Loader=_StrictLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or str(exc)
        raise DesignError(f"not valid YAML: {problem}", path=path,
                          line=mark.line + 1 if mark is not None else None) from exc
    except UnicodeDecodeError as exc:
        raise DesignError("not UTF-8 text", path=path) from exc
    return parse_design(mapping, path=path)


def parse_design(mapping: Any, path: str | Path | None = None) -> EvaluationDesign:
    """Validate a design mapping (as loaded from YAML) and apply the defaults.

    Parameters
    ----------
    mapping : dict
        The declaration. Required keys: ``schema_version``, ``table``, ``split_column``,
        ``entity_columns``.
    path : path, optional
        The design file: named in errors, and the folder ``table`` is relative to.
    """
    path = Path(path) if path is not None else None

    def fail(key: str, message: str) -> DesignError:
        return DesignError(f"key '{key}': {message}", path=path)

    mapping = _with_defaults(mapping, path, fail)
    table = mapping["table"]
    if table is not None and (not isinstance(table, str) or not table.strip()):
        raise fail("table", "must be a path string")

    split_column = mapping["split_column"]
    if split_column is not None and not _is_name(split_column):
        raise fail("split_column", "must be a column name or null (the whole table is the test partition)")

    partitions = _parse_partitions(mapping.get("partitions"), fail)
    if split_column is None:
        partitions = {"test": partitions.get("test", ("test",))}
    forbidden = _parse_forbidden_pairs(mapping.get("forbidden_pairs"), partitions, fail)

    entity_columns = _parse_columns(mapping["entity_columns"], "entity_columns", fail, allow_empty=False)
    group_columns = _parse_columns(mapping.get("group_columns", []) or [], "group_columns", fail,
                                   allow_empty=True)

    label_column = mapping.get("label_column")
    if label_column is not None and not _is_name(label_column):
        raise fail("label_column", "must be a column name")
    tolerance, conflicting, repeated = (mapping["label_tolerance"], mapping["conflicting_labels"],
                                        mapping["repeated_entities"])

    chronology = _parse_chronology(mapping.get("chronology"), fail)

    description = mapping.get("description")
    return EvaluationDesign(
        path=path,
        table=table,
        split_column=split_column,
        partitions=partitions,
        forbidden_pairs=forbidden,
        entity_columns=entity_columns,
        group_columns=group_columns,
        label_column=label_column,
        label_tolerance=float(tolerance),
        conflicting_labels=conflicting,
        repeated_entities=repeated,
        chronology=chronology,
        description=str(description) if description is not None else None,
    )


def _with_defaults(mapping: Any, path: Path | None, fail) -> dict:
    """The mapping, its keys checked (``_DesignKeys``), with the label and repetition defaults."""
    if not isinstance(mapping, Mapping):
        raise DesignError("a design must be a YAML mapping of keys to values", path=path)
    try:
        keys = _DesignKeys.model_validate(dict(mapping))
    except pydantic.ValidationError as exc:
        key, message = _first_error(exc)
        raise fail(key, message) from None
    return {**mapping, "label_tolerance": keys.label_tolerance, "conflicting_labels": keys.conflicting_labels,
            "repeated_entities": keys.repeated_entities}


def _is_name(value: Any) -> bool:
    return isinstance(value, str) and bool(value.strip())


def _parse_partitions(value: Any, fail) -> dict[str, tuple[str, ...]]:
    if value is None:
        return dict(DEFAULT_ALIASES)
    if not isinstance(value, Mapping) or not value:
        raise fail("partitions", "must map partitions (train, validation, test) to lists of split values")
    partitions: dict[str, tuple[str, ...]] = {}
    owner: dict[str, str] = {}
    for name, aliases in value.items():
        if name not in PARTITIONS:
            raise fail(f"partitions.{name}", f"unknown partition (allowed: {', '.join(PARTITIONS)})")
        if isinstance(aliases, (str, int)) and not isinstance(aliases, bool):
            aliases = [aliases]
        if not isinstance(aliases, list) or not aliases:
            raise fail(f"partitions.{name}", "must be a non-empty list of split values")
        texts = []
        for alias in aliases:
            if isinstance(alias, bool) or not isinstance(alias, (str, int)) or not str(alias).strip():
                raise fail(f"partitions.{name}", f"split value {alias!r} must be a non-empty string")
            alias = str(alias)
            if alias in owner:
                raise fail(f"partitions.{name}", f"split value {alias!r} is also declared under {owner[alias]!r}")
            owner[alias] = name
            texts.append(alias)
        partitions[name] = tuple(texts)
    return partitions


def _parse_forbidden_pairs(value: Any, partitions: dict, fail) -> tuple[tuple[str, str], ...]:
    order = {name: i for i, name in enumerate(PARTITIONS)}
    if value is None:
        names = [name for name in PARTITIONS if name in partitions]
        return tuple((a, b) for i, a in enumerate(names) for b in names[i + 1:])
    if not isinstance(value, list):
        raise fail("forbidden_pairs", "must be a list of [partition, partition] pairs")
    pairs = set()
    for i, pair in enumerate(value):
        key = f"forbidden_pairs[{i}]"
        if not isinstance(pair, list) or len(pair) != 2:
            raise fail(key, f"must be a two-item list, got {pair!r}")
        for name in pair:
            if name not in partitions:
                raise fail(key, f"unknown partition {name!r} (declared: {', '.join(partitions)})")
        if pair[0] == pair[1]:
            raise fail(key, "a pair needs two distinct partitions (within-partition repeats are "
                            "'repeated_entities')")
        pairs.add(tuple(sorted(pair, key=order.__getitem__)))
    return tuple(sorted(pairs, key=lambda p: (order[p[0]], order[p[1]])))


def _parse_columns(value: Any, key: str, fail, allow_empty: bool) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or (not value and not allow_empty):
        raise fail(key, "must be a non-empty list of column names" if not allow_empty
                   else "must be a list of column names")
    for name in value:
        if not _is_name(name):
            raise fail(key, f"column name {name!r} must be a non-empty string")
    if len(set(value)) != len(value):
        raise fail(key, "lists a column twice")
    return tuple(value)


def _parse_chronology(value: Any, fail) -> Chronology | None:
    if value is None:
        return None
    # shape, keys and booleans were validated by _DesignKeys (pydantic)
    if not _is_name(value.get("column")):
        raise fail("chronology.column", "required: the column holding ISO dates or timestamps")
    tz_name = value.get("timezone", "UTC")
    zone = _zone(tz_name)
    if zone is None:
        raise fail("chronology.timezone", f"unknown time zone {tz_name!r}")
    cutoffs = {}
    for key in ("cutoff", "test_cutoff"):
        raw = value.get(key)
        cutoffs[key] = None
        if raw is not None:
            cutoffs[key] = _parse_instant(raw, zone)
            if cutoffs[key] is None:
                raise fail(f"chronology.{key}", f"not an ISO date or timestamp: {raw!r}")
    cutoff_raw = value.get("cutoff")
    cutoff = cutoffs["cutoff"]
    if cutoff is not None and cutoffs["test_cutoff"] is not None and cutoffs["test_cutoff"] < cutoff:
        raise fail("chronology.test_cutoff", "must not be earlier than 'cutoff'")
    return Chronology(
        column=value["column"],
        cutoff=cutoff,
        cutoff_text=str(cutoff_raw) if cutoff_raw is not None else None,
        strictly_before=value.get("strictly_before", True),
        timezone=str(tz_name),
        validation_precedes_test=value.get("validation_precedes_test", False),
        test_cutoff=cutoffs["test_cutoff"],
    )


def _zone(name: Any):
    if not isinstance(name, str) or not name.strip():
        return None
    if name.upper() in ("UTC", "Z"):
        return timezone.utc
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return None


def _parse_instant(value: Any, zone) -> datetime | None:
    """One ISO date/timestamp -> aware UTC datetime; naive values are read in ``zone``."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    if isinstance(value, pd.Timestamp):
        value = value.to_pydatetime()
    if isinstance(value, datetime):
        moment = value
    elif isinstance(value, date):
        moment = datetime(value.year, value.month, value.day)
    else:
        text = str(value).strip()
        if not text or not text[:4].isdigit():
            return None
        try:
            moment = datetime.fromisoformat(text)
        except ValueError:
            return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=zone)
    return moment.astimezone(timezone.utc)


# --------------------------------------------------------------------------------------------
# reading inputs


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


# --------------------------------------------------------------------------------------------
# the audit


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


# --------------------------------------------------------------------------------------------
# files in, report out


def audit_design_files(
    design_path: str | Path,
    reference_path: str | Path | None = None,
    reference_complete: bool = False,
    max_examples: int = 5,
) -> dict:
    """Load the design, its table and the optional reference; audit; return the report."""
    if reference_complete and reference_path is None:
        raise DesignError("--reference-complete declares a reference complete, but no reference was given")
    design = load_design(design_path)
    table_path = design.table_path
    table = read_table(table_path)
    reference = read_reference(reference_path, design) if reference_path is not None else None
    inputs = [
        {"role": "design", "path": str(design_path), "sha256": sha256_file(design_path)},
        {"role": "table", "path": str(table_path), "sha256": sha256_file(table_path)},
    ]
    if reference_path is not None:
        inputs.append({"role": "reference", "path": str(reference_path),
                       "sha256": sha256_file(reference_path)})
    return audit_design(design, table, reference, reference_complete, max_examples,
                        inputs=inputs, reference_path=reference_path)


def write_audit_report(report: dict, path: str | Path) -> None:
    """Write the report as indented, key-sorted JSON, atomically."""
    with atomic_write(path) as handle:
        json.dump(report, handle, indent=2, sort_keys=True)
        handle.write("\n")


def format_audit_summary(report: dict) -> str:
    """A plain-text summary holding statuses and counts only (never an identifier)."""
    lines = [f"design audit: {report['status']} (rules sha256 {report['rules_sha256'][:12]})"]
    table = report["table"]
    parts = ", ".join(f"{k} {v}" for k, v in table["partition_rows"].items())
    lines.append(f"  table rows {table['rows']} ({parts})")
    for check in report["checks"]:
        counts = _flatten_counts(check["counts"]) or "all counts 0"
        lines.append(f"  {check['name']:<28} {check['status']:<13} {counts}")
    if report["not_requested"]:
        lines.append("  not requested: " + ", ".join(report["not_requested"]))
    return "\n".join(lines)


def _flatten_counts(counts: dict, prefix: str = "") -> str:
    items = []
    for key, value in counts.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            items.append(_flatten_counts(value, prefix=f"{name}."))
        elif isinstance(value, (int, float)) and not isinstance(value, bool) and value:
            items.append(f"{name}={value}")
    return " ".join(item for item in items if item)


# --------------------------------------------------------------------------------------------
# Tempo's own windows as a design

WINDOW_ROLES = {"train": "train", "valid": "validation", "test": "test"}


def export_window_design(
    window_key: str,
    rows: pd.DataFrame,
    table_name: str = "window_table.csv",
) -> tuple[pd.DataFrame, dict]:
    """Export one Tempo window as an evaluation table and its ``tempo-evaluation-design/v1``.

    Parameters
    ----------
    window_key : str
        ``t-2__t-1__t0__t1`` (ISO dates joined by ``__``), as the ``windows`` partitions write it.
    rows : DataFrame, shape (n, >=4)
        Columns ``protein``, ``term``, ``aspect``, ``window_role`` (``train`` = the corpus's
        propagated terms at t-1, ``valid`` = scored VALID ground truth, ``test`` = scored TEST
        ground truth, known PK terms already removed); optional ``mode`` (NK/LK/PK) and ``date``
        (the annotation date: ``YYYYMMDD`` int or ISO string).

    Returns
    -------
    (DataFrame, dict)
        The table (one row per (protein, term, window_role), sorted) and the design mapping whose
        ``table`` is ``table_name``. The identity is (protein, term): a protein may be a train
        protein and a PK target, but a scored (protein, term) pair must never be a training label.
        With a ``date`` column, chronology requires train dated on or before t-1, validation in
        (t-1, t0] and test after t0 (cutoffs are the days after t-1 and t0).
    """
    _t_2, t_1, t0, t1 = _window_dates(window_key)
    table = _window_table(rows)
    design: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "description": (f"Tempo window {window_key}: train = corpus at t-1 ({t_1}), validation = "
                        f"growth ({t_1}, {t0}], test = growth ({t0}, {t1}]"),
        "table": table_name,
        "split_column": "window_role",
        "partitions": {"train": ["train"], "validation": ["valid"], "test": ["test"]},
        "forbidden_pairs": [["train", "validation"], ["train", "test"], ["validation", "test"]],
        "entity_columns": ["protein", "term"],
        "group_columns": [],
        "repeated_entities": "fail",
    }
    if "date" in table.columns:
        design["chronology"] = {
            "column": "date",
            "cutoff": (t_1 + timedelta(days=1)).isoformat(),
            "test_cutoff": (t0 + timedelta(days=1)).isoformat(),
            "strictly_before": True,
            "timezone": "UTC",
            "validation_precedes_test": True,
        }
    return table, design


def _window_dates(window_key: str) -> tuple[date, date, date, date]:
    """The window's four release dates t-2 < t-1 < t0 < t1, from its key."""
    parts = split_window_key(window_key)
    if parts is None:
        raise DesignError(f"window key {window_key!r} is not t-2__t-1__t0__t1")
    try:
        t_2, t_1, t0, t1 = (date.fromisoformat(p) for p in parts)
    except ValueError as exc:
        raise DesignError(f"window key {window_key!r}: {exc}") from exc
    if not t_2 < t_1 < t0 < t1:
        raise DesignError(f"window key {window_key!r}: releases are not in increasing order")
    return t_2, t_1, t0, t1


def _window_table(rows: pd.DataFrame) -> pd.DataFrame:
    """The window's rows as an evaluation table: one row per (protein, term, window_role), ISO
    dates, sorted."""
    required = ["protein", "term", "aspect", "window_role"]
    missing = [c for c in required if c not in rows.columns]
    if missing:
        raise DesignError(f"window rows lack column {missing[0]!r} (need {', '.join(required)})")
    bad = ~rows["window_role"].isin(list(WINDOW_ROLES))
    if bad.any():
        value = rows.loc[bad, "window_role"].iloc[0]
        raise DesignError(f"window rows: unknown window_role {value!r} on {int(bad.sum())} row(s) "
                          f"(allowed: {', '.join(WINDOW_ROLES)})")
    keep = required + [c for c in ("mode", "date") if c in rows.columns]
    table = rows.loc[:, keep].copy()
    if "date" in table.columns:
        table["date"] = table["date"].map(_iso_day)
    table = table.drop_duplicates().sort_values(["window_role", "protein", "term"], kind="stable")
    return table.reset_index(drop=True)


def _iso_day(value: Any) -> str | None:
    if _is_missing(value):
        return None
    text = str(value).strip()
    if text.isdigit() and len(text) == 8:
        return f"{text[:4]}-{text[4:6]}-{text[6:]}"
    return text


def write_window_design(out_dir: str | Path, window_key: str, rows: pd.DataFrame) -> dict[str, Path]:
    """Write ``window_table.csv``, ``design.yaml`` and ``reference.csv`` (the train pairs).

    The reference lists the (protein, term) training labels of the t-1 corpus, so
    ``tempo audit-design --design design.yaml --reference reference.csv --reference-complete``
    audits the window with a complete reference.
    """
    out_dir = Path(out_dir)
    table, design = export_window_design(window_key, rows)
    paths = {"table": out_dir / design["table"], "design": out_dir / "design.yaml",
             "reference": out_dir / "reference.csv"}
    with atomic_write(paths["table"]) as handle:
        table.to_csv(handle, index=False)
    with atomic_write(paths["reference"]) as handle:
        table.loc[table["window_role"] == "train", ["protein", "term"]].to_csv(handle, index=False)
    with atomic_write(paths["design"]) as handle:
        yaml.safe_dump(design, handle, sort_keys=False)
    return paths
