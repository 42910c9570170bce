"""A declared evaluation split design (``tempo-evaluation-design/v1``) and its parsing: the
schema's keys, the partitions and their aliases, forbidden pairs, columns and chronology,
loaded from YAML strictly (duplicate keys refused) into an ``EvaluationDesign``; the statuses a
check can end in and the audit's exit codes.
"""
from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field
from datetime import date, datetime, timezone
from pathlib import Path
from typing import Annotated, Any, Literal, Mapping
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import pandas as pd
import pydantic
import yaml

from tempo_assets.core.base.errors import TempoInputError
from tempo_assets.core.base.io import digest_json


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
