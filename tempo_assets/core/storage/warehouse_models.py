"""The warehouse's SQL models and checks: ``Model`` and ``Check`` (one SQL file under
``dbt_like_sql/`` each, its grain and bound parameters), the registry of models with the inputs
each requires, what a model run returns (``ModelRun``) and the frames of a growth read back
(``GrowthFrames``).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import pandas as pd

from tempo_assets.core.base.errors import TempoInputError

_PARAM = re.compile(r"(?<![:\w]):([a-z_][a-z0-9_]*)")


class WarehouseError(TempoInputError):
    """A warehouse call got bad input or ran out of order; the message names the key at fault."""


@dataclass(frozen=True)
class Model:
    """One relation of the warehouse.

    ``kind`` is ``"staging"`` (filled by a ``load_*`` method from a Python frame) or ``"mart"``
    (built by :meth:`Warehouse.run_model` from its SQL). ``partition`` names the parameters whose
    values key the rows a run replaces; ``params`` every bound parameter of the SQL.
    """

    name: str
    kind: str
    path: Path
    grain: str
    params: tuple[str, ...]
    partition: tuple[str, ...]
    depends_on: tuple[str, ...]
    loader: str | None = None

    @property
    def sql(self) -> str:
        return _read_sql(self.path)


@dataclass(frozen=True)
class Check:
    """A SQL check ``<relation>__<rule>``: it returns the violating rows (none = pass)."""

    name: str
    relation: str
    rule: str
    path: Path
    description: str
    params: tuple[str, ...]

    @property
    def sql(self) -> str:
        return _read_sql(self.path)


class ModelRun(NamedTuple):
    """What one partition write did: for asset metadata."""

    name: str
    partition: dict
    rows: int
    seconds: float


class GrowthFrames(NamedTuple):
    """A growth or evaluation set as the frames of ``core.labels.growth.Growth``.

    ``targets``: ``protein, aspect, mode``; ``ground_truth``: ``protein, term, aspect, mode``
    (every propagated term at the new release in the target's aspect); ``known``:
    ``protein, term, aspect`` (the old release's terms of PK targets).
    """

    targets: pd.DataFrame
    ground_truth: pd.DataFrame
    known: pd.DataFrame


# (name, kind, partition, depends_on, loader); order is dependency order
_REGISTRY: tuple[tuple[str, str, tuple[str, ...], tuple[str, ...], str | None], ...] = (
    ("stg_annotations", "staging", ("release_id",), (), "load_annotations"),
    ("stg_term_closure", "staging", ("release_id",), (), "load_term_closure"),
    ("stg_term_alt_ids", "staging", ("release_id",), (), "load_term_closure"),
    ("stg_sequences", "staging", ("release_id",), (), "load_sequences"),
    ("stg_release_ontologies", "staging", ("release_id",), (), "load_ontology"),
    ("experimental_annotations", "mart", ("release_id",),
     ("stg_annotations", "stg_term_closure"), None),
    ("nonexperimental_annotations", "mart", ("release_id",),
     ("stg_annotations", "stg_term_closure"), None),
    ("aligned_annotations", "mart", ("old_release", "new_release"),
     ("experimental_annotations", "stg_term_closure", "stg_term_alt_ids"), None),
    ("annotation_growth", "mart", ("old_release", "new_release"),
     ("experimental_annotations", "aligned_annotations", "stg_sequences"), None),
    ("evaluation_sets", "mart", ("window_key", "window_role"), ("annotation_growth",), None),
)

# before a mart runs, each (relation, {column: parameter}) must hold rows: an empty input would
# otherwise produce an empty, silently wrong partition
_REQUIRED_INPUTS: dict[str, tuple[tuple[str, dict[str, str]], ...]] = {
    "experimental_annotations": (("stg_annotations", {"release_id": "release_id"}),
                                 ("stg_term_closure", {"release_id": "release_id"})),
    "nonexperimental_annotations": (("stg_annotations", {"release_id": "release_id"}),
                                    ("stg_term_closure", {"release_id": "release_id"})),
    "aligned_annotations": (("experimental_annotations", {"release_id": "old_release"}),
                            ("stg_term_closure", {"release_id": "new_release"})),
    "annotation_growth": (("aligned_annotations", {"old_release": "old_release",
                                                   "new_release": "new_release"}),
                          ("experimental_annotations", {"release_id": "new_release"}),
                          ("stg_sequences", {"release_id": "old_release"})),
    "evaluation_sets": (("annotation_growth", {"old_release": "old_release",
                                               "new_release": "new_release"}),),
}

_RELEASE_PARAMS = ("release_id", "old_release", "new_release")


def _read_sql(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise WarehouseError("SQL file is missing", path) from None


def _grain(path: Path) -> str:
    lines = _read_sql(path).strip().splitlines()
    first = lines[0] if lines else ""
    if not first.startswith("-- "):
        raise WarehouseError("SQL file must start with a one-line '-- ' grain comment", path, 1)
    return first[3:].strip()


def _without_comments(sql: str) -> str:
    """``sql`` with each line's ``--`` comment dropped (not sent, and no parameter hides in one)."""
    return "\n".join(line.split("--", 1)[0].rstrip() for line in sql.splitlines())


def _params(sql: str) -> tuple[str, ...]:
    code = _without_comments(sql)
    code = re.sub(r"'[^']*'", "''", code)
    return tuple(dict.fromkeys(_PARAM.findall(code)))


# the DBAPI paramstyles whose markers bind by position: sqlite3's, and psycopg's (which takes
# "%s" in a pyformat statement)
_POSITIONAL_MARKS = {"qmark": "?", "format": "%s", "pyformat": "%s"}


def _positional(statement: str, paramstyle: str) -> tuple[str, tuple[str, ...]]:
    """``statement`` with each ``:name`` replaced by the driver's positional marker, and the names
    in the order of the markers: its rows can then go to ``executemany`` as plain tuples.

    Comments are dropped first (they are not sent); string literals are left as they are.
    """
    if paramstyle not in _POSITIONAL_MARKS:
        raise WarehouseError(f"no positional parameter marker for the driver's {paramstyle!r} style")
    code = _without_comments(statement)
    if _POSITIONAL_MARKS[paramstyle] == "%s":
        code = code.replace("%", "%%")  # a literal percent sign, to a "format" driver
    parts = re.split(r"('[^']*')", code)  # odd parts are string literals
    names: list[str] = []

    def mark(match: re.Match) -> str:
        names.append(match.group(1))
        return _POSITIONAL_MARKS[paramstyle]

    parts = [part if i % 2 else _PARAM.sub(mark, part) for i, part in enumerate(parts)]
    return "".join(parts).strip(), tuple(names)


def _statement(sql: str) -> str:
    """The file's single statement without its trailing semicolon."""
    body = sql.strip()
    while body.endswith(";"):
        body = body[:-1].rstrip()
    return body
