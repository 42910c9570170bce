"""The SQL warehouse: staged annotations, propagated marts, growths and evaluation sets.

Python loads the staging relations (cleaned annotations, the ontology's term closure and alt
ids with its content hash, sequence hashes); everything else is a SQL model under ``dbt_like_sql/`` run through
SQLAlchemy (``Warehouse`` here; its tables in ``warehouse_tables.py``, its models and checks in
``warehouse_models.py``).
Every model writes one *partition* (a release, a pair of releases, or a window and its role):
re-running it deletes that partition's rows and inserts the new ones in one transaction, so a
failure leaves the previous rows in place. Checks are SQL files that return violating rows.

The evaluation-set table keeps ``window_role`` as a nullable column that a CHECK constraint
restricts to ``'valid'`` or ``'test'`` (docs/PROTOCOL.md): selection reads VALID sets, reporting reads
TEST sets, and nothing else can be stored.

SQLite is the embedded default; the models use portable SQL (CTEs, ``case``, ``distinct``,
bound parameters) and run unchanged on PostgreSQL (``postgresql+psycopg://...``; the tests run
both). Reads are ordered by the database's collation: ``scripts/dev_services.sh`` creates its
cluster with the C locale, so PostgreSQL orders strings as SQLite does.
"""
from __future__ import annotations

import os
import re
import sqlite3
import time
from itertools import islice
from pathlib import Path
from typing import Any, Iterable, Iterator

import numpy as np
import pandas as pd
from sqlalchemy import Table, create_engine, delete, event, func, select, text
from sqlalchemy.engine import Engine, make_url
from sqlalchemy.exc import DBAPIError, OperationalError

from tempo_assets.core.base.dates import parse_date
from tempo_assets.core.base.errors import MissingExtraError
from tempo_assets.core.base.io import REPO_ROOT
from tempo_assets.core.storage.warehouse_models import (
    Check, GrowthFrames, Model, ModelRun, WarehouseError, _REGISTRY, _RELEASE_PARAMS, _REQUIRED_INPUTS,
    _grain, _params, _positional, _read_sql, _statement,
)
from tempo_assets.core.storage.warehouse_ontology import (
    ONTOLOGY_RELATIONS, copy_ontology_statements, ontology_donor, ontology_frames,
)
from tempo_assets.core.storage.warehouse_tables import _build_metadata

__all__ = [
    "WINDOW_ROLES",
    "Warehouse",
    "default_sql_dir",
    "default_warehouse_url",
]

from tempo_assets.core.base.vocabulary import ASPECTS  # noqa: E402
WINDOW_ROLES = ("valid", "test")
_LOAD_CHUNK = 50_000
_SHA256 = re.compile(r"^[0-9a-f]{64}$")


def default_sql_dir() -> Path:
    """``dbt_like_sql/`` at the repository root (beside the ``tempo_assets`` package)."""
    return REPO_ROOT / "dbt_like_sql"


def default_warehouse_url(dagster_home: str | None = None) -> str:
    """``$TEMPO_WAREHOUSE_URL``, else a SQLite file in ``dagster_home`` (default ``$DAGSTER_HOME``).

    Without either, the repository root's git-ignored ``.tempo_cache/`` folder holds it.
    """
    url = os.environ.get("TEMPO_WAREHOUSE_URL")
    if url:
        return url
    home = dagster_home or os.environ.get("DAGSTER_HOME")
    folder = Path(home) if home else default_sql_dir().parent / ".tempo_cache"
    return f"sqlite:///{(folder / 'tempo_warehouse.sqlite').resolve()}"


# ----------------------------------------------------------------------------------------------
# the warehouse

_SQLITE_LOCK_WAIT_S = 120


def _use_write_ahead_log(cursor: Any) -> None:
    """Put a SQLite file in WAL mode, which the file then keeps. SQLite answers "database is
    locked" at once, without waiting, while another connection switches a new file's mode:
    wait for that switch and look again."""
    deadline = time.monotonic() + _SQLITE_LOCK_WAIT_S
    while True:
        try:
            if cursor.execute("pragma journal_mode").fetchone()[0] != "wal":
                cursor.execute("pragma journal_mode = wal")
            return
        except sqlite3.OperationalError as error:
            if "locked" not in str(error) or time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def _created_meanwhile(error: DBAPIError) -> bool:
    """Whether a CREATE failed because another process created the same object first (SQLite and
    PostgreSQL say "already exists"; PostgreSQL may trip over its type catalogue's unique index)."""
    message = str(error.orig).lower()
    return "already exists" in message or "pg_type_typname_nsp_index" in message


class Warehouse:
    """A SQL warehouse at ``url`` whose models live in ``sql_dir``.

    Parameters
    ----------
    url : str, optional
        SQLAlchemy URL; :func:`default_warehouse_url` when omitted (a SQLite file's folder is created).
    sql_dir : path, optional
        The ``dbt_like_sql`` tree (``staging/``, ``marts/``, ``checks/``).
    """

    def __init__(self, url: str | None = None, sql_dir: str | Path | None = None):
        self.url = url or default_warehouse_url()
        self.sql_dir = Path(sql_dir) if sql_dir is not None else default_sql_dir()
        self.metadata = _build_metadata()
        self._models = self._discover_models()
        self._checks = self._discover_checks()
        try:
            self.engine = self._create_engine(self.url)
        except ModuleNotFoundError as missing:  # a server's driver (psycopg) not installed
            raise MissingExtraError(f"TEMPO_WAREHOUSE_URL={self.safe_url}", missing) from None
        try:
            self._create_missing_tables()
        except OperationalError as error:
            self.engine.dispose()
            # the endpoint, never the password (the driver's own message holds neither)
            raise WarehouseError(f"cannot reach the warehouse at {self.safe_url}: "
                                 f"{str(error.orig).strip()}") from None

    @property
    def safe_url(self) -> str:
        """The URL with its password masked, for messages and logs."""
        return make_url(self.url).render_as_string(hide_password=True)

    # -- setup ------------------------------------------------------------------------------
    def _create_missing_tables(self) -> None:
        """Create the tables this warehouse lacks. Two processes opening a new warehouse at once
        both see a table missing and both create it: the one that loses that race gets "already
        exists" and looks again, when the table is there."""
        # each lost race leaves one more table in place, so this many looks are enough
        attempts = len(self.metadata.tables) + 1
        for attempt in range(attempts):
            try:
                self.metadata.create_all(self.engine)
                return
            except DBAPIError as error:
                if attempt + 1 == attempts or not _created_meanwhile(error):
                    raise

    @staticmethod
    def _create_engine(url: str) -> Engine:
        if not url.startswith("sqlite"):
            return create_engine(url)
        database = url.split("///", 1)[1] if "///" in url else ""
        if database and database != ":memory:":
            Path(database).parent.mkdir(parents=True, exist_ok=True)
        # several Dagster processes may write: wait for the lock rather than fail at once
        engine = create_engine(url, connect_args={"timeout": _SQLITE_LOCK_WAIT_S})

        @event.listens_for(engine, "connect")
        def _pragmas(dbapi_connection, _record):  # noqa: ANN001
            cursor = dbapi_connection.cursor()
            _use_write_ahead_log(cursor)
            cursor.execute("pragma synchronous = normal")
            cursor.execute("pragma temp_store = memory")
            cursor.execute("pragma cache_size = -131072")
            cursor.close()

        return engine

    def _discover_models(self) -> dict[str, Model]:
        models: dict[str, Model] = {}
        for name, kind, partition, depends_on, loader in _REGISTRY:
            folder = "staging" if kind == "staging" else "marts"
            path = self.sql_dir / folder / f"{name}.sql"
            params = _params(_read_sql(path))
            missing = [p for p in partition if p not in params]
            if missing:
                raise WarehouseError(f"partition parameters {missing} are not bound in the SQL",
                                     path)
            models[name] = Model(name, kind, path, _grain(path), params, partition, depends_on,
                                 loader)
        return models

    def _discover_checks(self) -> dict[str, Check]:
        checks: dict[str, Check] = {}
        for path in sorted((self.sql_dir / "checks").glob("*.sql")):
            name = path.stem
            relation, sep, rule = name.partition("__")
            if not sep or relation not in self.metadata.tables:
                raise WarehouseError("a check is named <relation>__<rule> after a warehouse "
                                     "relation", path)
            checks[name] = Check(name, relation, rule, path, _grain(path),
                                 _params(_read_sql(path)))
        return checks

    def close(self) -> None:
        """Release the connection pool."""
        self.engine.dispose()

    def __enter__(self) -> "Warehouse":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Warehouse({self.safe_url!r})"

    # -- registry ---------------------------------------------------------------------------
    def models(self) -> list[Model]:
        """Every relation in dependency order: the staging loads, then the marts."""
        return list(self._models.values())

    def checks(self, relation: str | None = None) -> list[Check]:
        """The SQL checks, optionally those of one relation."""
        return [c for c in self._checks.values() if relation is None or c.relation == relation]

    def _model(self, name: str) -> Model:
        if name not in self._models:
            raise WarehouseError(f"unknown model {name!r} (known: {', '.join(self._models)})")
        return self._models[name]

    # -- validation -------------------------------------------------------------------------
    @staticmethod
    def _check_release_id(key: str, value: Any) -> str:
        try:
            parsed = parse_date(value) if isinstance(value, str) else None
        except ValueError:
            parsed = None
        if parsed is None or parsed.isoformat() != value:
            raise WarehouseError(f"{key}={value!r} is not a release id (an ISO date YYYY-MM-DD)")
        return value

    def _bind(self, model_or_check: Model | Check, params: dict[str, Any]) -> dict[str, Any]:
        expected = set(model_or_check.params)
        given = set(params)
        if given != expected:
            problems = []
            if expected - given:
                problems.append(f"missing {sorted(expected - given)}")
            if given - expected:
                problems.append(f"unexpected {sorted(given - expected)}")
            raise WarehouseError(f"{model_or_check.name}: parameters {'; '.join(problems)} "
                                 f"(it binds {list(model_or_check.params)})")
        for key in _RELEASE_PARAMS:
            if key in params:
                self._check_release_id(key, params[key])
        if "old_release" in params and "new_release" in params:
            if not params["old_release"] < params["new_release"]:
                raise WarehouseError(f"{model_or_check.name}: old_release={params['old_release']!r}"
                                     f" must precede new_release={params['new_release']!r}")
        if "window_role" in params and params["window_role"] not in (None, *WINDOW_ROLES):
            raise WarehouseError(f"window_role={params['window_role']!r} is not one of "
                                 f"{WINDOW_ROLES} or None")
        if "window_key" in params and not (isinstance(params["window_key"], str)
                                           and params["window_key"]):
            raise WarehouseError(f"window_key={params['window_key']!r} must be a non-empty string")
        return dict(params)

    def _where(self, table: Table, filters: dict[str, Any]) -> list:
        clauses = []
        for key, value in filters.items():
            if key not in table.c:
                raise WarehouseError(f"{table.name} has no column {key!r} "
                                     f"(columns: {', '.join(table.c.keys())})")
            clauses.append(table.c[key].is_(None) if value is None else table.c[key] == value)
        return clauses

    def _count(self, conn, name: str, filters: dict[str, Any]) -> int:  # noqa: ANN001
        table = self.metadata.tables[name]
        query = select(func.count()).select_from(table).where(*self._where(table, filters))
        return int(conn.execute(query).scalar_one())

    # -- staging loads ----------------------------------------------------------------------
    def _replace_partitions(self, release_id: str,
                            loads: dict[str, dict[str, list]]) -> dict[str, int]:
        """Replace the ``release_id`` rows of each staging relation in ONE transaction.

        ``loads`` maps a relation to its columns (name -> one value per row). The rows reach the
        driver's ``executemany`` as plain tuples in the order of the staging file's parameters:
        no dict per row and no SQLAlchemy processing per row, on SQLite and PostgreSQL alike.
        """
        written = {name: 0 for name in loads}
        with self.engine.begin() as conn:
            for name, columns in loads.items():
                table = self.metadata.tables[name]
                statement, order = _positional(_statement(self._model(name).sql),
                                               self.engine.dialect.paramstyle)
                missing = [p for p in order if p not in columns]
                if missing:
                    raise WarehouseError(f"{name}: no values for parameter(s) {missing}",
                                         self._model(name).path)
                conn.execute(delete(table).where(table.c.release_id == release_id))
                for chunk in self._chunks({p: columns[p] for p in order}):
                    if not chunk:
                        continue
                    conn.exec_driver_sql(statement, chunk)
                    written[name] += len(chunk)
        return written

    @staticmethod
    def _frame_columns(where: str, frame: pd.DataFrame, required: Iterable[str]) -> None:
        if not isinstance(frame, pd.DataFrame):
            raise WarehouseError(f"expected a pandas DataFrame, got {type(frame).__name__}", where)
        missing = [c for c in required if c not in frame.columns]
        if missing:
            raise WarehouseError(f"frame lacks column(s) {missing} (has {list(frame.columns)})",
                                 where)
        for column in required:
            nulls = frame[column].isna().to_numpy()
            if nulls.any():
                row = int(nulls.argmax())
                raise WarehouseError(f"column {column!r} is null at row {row} "
                                     f"(index {frame.index[row]!r})", where)

    @staticmethod
    def _check_values(where: str, frame: pd.DataFrame, column: str, allowed: Iterable[str]) -> None:
        bad = ~frame[column].isin(list(allowed)).to_numpy()
        if bad.any():
            row = int(bad.argmax())
            raise WarehouseError(f"column {column!r} holds {frame[column].iloc[row]!r} at row {row} "
                                 f"(expected one of {tuple(allowed)})", where)

    @staticmethod
    def _chunks(columns: dict[str, list]) -> Iterator[list[tuple]]:
        """The rows of ``columns`` as tuples (in the dict's order), ``_LOAD_CHUNK`` at a time."""
        rows = zip(*columns.values())
        while chunk := list(islice(rows, _LOAD_CHUNK)):
            yield chunk

    def load_annotations(self, release_id: str, frame: pd.DataFrame) -> int:
        """Replace ``stg_annotations`` rows of ``release_id`` with ``frame``; returns rows written.

        ``frame`` holds cleaned GAF rows (alt ids mapped, obsolete terms and NOT rows dropped):
        ``protein, term, aspect, evidence, is_experimental, date`` (int ``yyyymmdd``), and an
        optional ``qualifier`` kept so that a check can prove the NOT rows are gone.
        """
        where = f"stg_annotations[release_id={release_id}]"
        self._check_release_id("release_id", release_id)
        required = ("protein", "term", "aspect", "evidence", "is_experimental", "date")
        self._frame_columns(where, frame, required)
        self._check_values(where, frame, "aspect", ASPECTS)
        self._check_values(where, frame, "is_experimental", (True, False, 0, 1))
        # rows in index order make the index insert an append rather than random B-tree writes
        frame = frame.assign(is_experimental=frame["is_experimental"].astype(bool))
        frame = frame.sort_values(["is_experimental", "term", "protein"], kind="stable")
        n = len(frame)
        qualifier = (frame["qualifier"].astype(object).where(frame["qualifier"].notna(), None)
                     .tolist() if "qualifier" in frame.columns else [None] * n)
        columns = {
            "release_id": [release_id] * n,
            "protein": frame["protein"].astype(str).tolist(),
            "term": frame["term"].astype(str).tolist(),
            "aspect": frame["aspect"].astype(str).tolist(),
            "evidence": frame["evidence"].astype(str).tolist(),
            "qualifier": qualifier,
            "is_experimental": frame["is_experimental"].tolist(),
            "annotation_date": frame["date"].astype("int64").tolist(),
        }
        return self._replace_partitions(release_id, {"stg_annotations": columns})["stg_annotations"]

    def load_term_closure(self, release_id: str, frame: pd.DataFrame,
                          alt_ids: pd.DataFrame | None = None,
                          ontology_sha256: str | None = None) -> int:
        """Replace the release's ontology staging: ``stg_term_closure`` and ``stg_term_alt_ids``.

        ``frame`` (``term, ancestor, aspect``) is the is_a/part_of closure inside each namespace
        over the live primary terms, with a ``term = ancestor`` row for every term (the
        ``stg_term_closure__reflexive`` check verifies it). ``alt_ids`` (``alt_id, term``) maps
        alternative ids to live primary terms; the growth model uses it to express an older
        release's terms in this release's vocabulary (None loads no alt ids). Both relations
        are replaced in one transaction, with the release's ``stg_release_ontologies`` row: the
        content hash of the ontology the frames were built from (``ontology_sha256``, which
        :meth:`load_ontology` gives), or none. Returns the closure rows written.
        """
        where = f"stg_term_closure[release_id={release_id}]"
        self._check_release_id("release_id", release_id)
        self._check_ontology_sha256(ontology_sha256)
        self._frame_columns(where, frame, ("term", "ancestor", "aspect"))
        self._check_values(where, frame, "aspect", ASPECTS)
        frame = (frame[["term", "ancestor", "aspect"]].astype(str).drop_duplicates()
                 .sort_values(["term", "ancestor"], kind="stable"))
        aspects = frame.groupby("term")["aspect"].nunique()
        if (aspects > 1).any():
            term = aspects.index[(aspects > 1).to_numpy()][0]
            raise WarehouseError(f"term {term!r} is given more than one aspect", where)
        closure = {"release_id": [release_id] * len(frame)}
        closure.update({c: frame[c].tolist() for c in ("term", "ancestor", "aspect")})
        if alt_ids is None:
            alt_ids = pd.DataFrame({"alt_id": [], "term": []}, dtype=str)
        alt_where = f"stg_term_alt_ids[release_id={release_id}]"
        self._frame_columns(alt_where, alt_ids, ("alt_id", "term"))
        alt_ids = (alt_ids[["alt_id", "term"]].astype(str).drop_duplicates()
                   .sort_values("alt_id", kind="stable"))
        duplicated = alt_ids["alt_id"].duplicated().to_numpy()
        if duplicated.any():
            alt = alt_ids["alt_id"].iloc[int(duplicated.argmax())]
            raise WarehouseError(f"alt_id {alt!r} maps to two terms", alt_where)
        # a set of the live terms, read through tolist(): iterating an Arrow-backed column, or
        # isin() with a set, makes one Python object per row the slow way (seconds on full GO)
        live = set(frame["term"].unique().tolist())
        bad = np.array([term not in live or alt in live for alt, term in
                        zip(alt_ids["alt_id"].tolist(), alt_ids["term"].tolist())], dtype=bool)
        if bad.any():
            row = alt_ids.iloc[int(bad.argmax())]
            raise WarehouseError(f"alt_id {row['alt_id']!r} -> {row['term']!r}: an alt id must "
                                 "not be a live term and must map to one", alt_where)
        alternatives = {"release_id": [release_id] * len(alt_ids),
                        "alt_id": alt_ids["alt_id"].tolist(), "term": alt_ids["term"].tolist()}
        recorded = [] if ontology_sha256 is None else [ontology_sha256]
        written = self._replace_partitions(release_id, {
            "stg_term_closure": closure,
            "stg_term_alt_ids": alternatives,
            "stg_release_ontologies": {"release_id": [release_id] * len(recorded),
                                       "ontology_sha256": recorded},
        })
        return written["stg_term_closure"]

    def load_ontology(self, release_id: str, ontology: Any, ontology_sha256: str | None = None) -> int:
        """:meth:`load_term_closure` with the frames of :func:`ontology_frames`; returns the closure rows.

        ``ontology_sha256`` is the ontology's content hash (its stored artefact's sha256): when
        another release staged that ontology, its rows are copied in SQL (``warehouse_ontology.py``)
        and ``ontology``, which may be a function returning it, is not read.
        """
        self._check_release_id("release_id", release_id)
        self._check_ontology_sha256(ontology_sha256)
        copied = None if ontology_sha256 is None else self._copy_ontology(release_id, ontology_sha256)
        if copied is not None:
            return copied
        closure, alt_ids = ontology_frames(ontology() if callable(ontology) else ontology)
        return self.load_term_closure(release_id, closure, alt_ids, ontology_sha256)

    @staticmethod
    def _check_ontology_sha256(value: str | None) -> None:
        if value is not None and not (isinstance(value, str) and _SHA256.fullmatch(value)):
            raise WarehouseError(f"ontology_sha256={value!r} is not a lowercase hex sha256")

    def _copy_ontology(self, release_id: str, ontology_sha256: str) -> int | None:
        """Replace the release's ontology staging by another release's of the same content hash, in
        one transaction; the closure rows copied, or None (nothing changed) when no release has it."""
        recorded = self.metadata.tables["stg_release_ontologies"]
        # PostgreSQL: one snapshot for the look-up and the copies (SQLite's writer holds the database)
        isolation = {"isolation_level": "REPEATABLE READ"} if self.engine.dialect.name == "postgresql" else {}
        with self.engine.connect().execution_options(**isolation) as conn, conn.begin() as transaction:
            donor = conn.execute(ontology_donor(self.metadata, release_id, ontology_sha256)).scalar()
            if donor is None:
                return None
            for table in (*(self.metadata.tables[name] for name in ONTOLOGY_RELATIONS), recorded):
                conn.execute(delete(table).where(table.c.release_id == release_id))
            for statement in copy_ontology_statements(self.metadata, release_id, donor, ontology_sha256).values():
                conn.execute(statement)
            copied = self._count(conn, "stg_term_closure", {"release_id": release_id})  # psycopg's rowcount: -1
            if not copied:  # the donor was re-staged meanwhile
                transaction.rollback()
                return None
            conn.execute(recorded.insert().values(release_id=release_id, ontology_sha256=ontology_sha256))
        return copied

    def load_sequences(self, release_id: str, frame: pd.DataFrame) -> int:
        """Replace ``stg_sequences`` rows of ``release_id``: ``protein, sequence_sha256``.

        The sequences in effect at the release (for a release without a FASTA of its own, the
        latest earlier one). A protein listed twice with different hashes is an error.
        """
        where = f"stg_sequences[release_id={release_id}]"
        self._check_release_id("release_id", release_id)
        self._frame_columns(where, frame, ("protein", "sequence_sha256"))
        frame = (frame[["protein", "sequence_sha256"]].astype(str).drop_duplicates()
                 .sort_values("protein", kind="stable"))
        bad = ~frame["sequence_sha256"].str.fullmatch(_SHA256.pattern).to_numpy(dtype=bool)
        if bad.any():
            row = frame.iloc[int(bad.argmax())]
            raise WarehouseError(f"protein {row['protein']!r}: {row['sequence_sha256']!r} is not "
                                 "a lowercase hex sha256", where)
        duplicated = frame["protein"].duplicated().to_numpy()
        if duplicated.any():
            protein = frame["protein"].iloc[int(duplicated.argmax())]
            raise WarehouseError(f"protein {protein!r} has two different sequence hashes", where)
        columns = {"release_id": [release_id] * len(frame),
                   "protein": frame["protein"].tolist(),
                   "sequence_sha256": frame["sequence_sha256"].tolist()}
        return self._replace_partitions(release_id, {"stg_sequences": columns})["stg_sequences"]

    # -- marts ------------------------------------------------------------------------------
    def run_model(self, name: str, **params: Any) -> ModelRun:
        """Build one partition of mart ``name`` from its SQL, replacing that partition's rows.

        The delete and the insert share one transaction: if the insert fails, the previous rows
        stay. Raises :class:`WarehouseError` on unknown or missing parameters, on malformed
        release ids or roles, and when a required input partition holds no rows.
        """
        model = self._model(name)
        if model.kind != "mart":
            raise WarehouseError(f"{name} is a staging relation: fill it with Warehouse."
                                 f"{model.loader}(release_id, frame)")
        params = self._bind(model, params)
        table = self.metadata.tables[name]
        columns = ", ".join(table.c.keys())
        order = ", ".join(c.name for c in table.primary_key.columns)
        insert = text(f"insert into {name} ({columns}) "
                      f"select {columns} from ({_statement(model.sql)}) as model_rows"
                      + (f" order by {order}" if order else ""))
        partition = {key: params[key] for key in model.partition}
        started = time.perf_counter()
        with self.engine.begin() as conn:
            if self.engine.dialect.name == "postgresql":
                # fresh statistics on the inputs: without them PostgreSQL plans freshly loaded
                # tables as tiny and the growth model's joins run for hours instead of seconds
                for relation in model.depends_on:
                    conn.execute(text(f"analyze {relation}"))
            for relation, mapping in _REQUIRED_INPUTS.get(name, ()):
                filters = {column: params[param] for column, param in mapping.items()}
                if self._count(conn, relation, filters) == 0:
                    raise WarehouseError(f"{name}: input {relation} holds no rows for {filters}; "
                                         "load or run it first")
            conn.execute(delete(table).where(*self._where(table, partition)))
            result = conn.execute(insert, params)
            rows = result.rowcount
        return ModelRun(name, partition, int(rows), time.perf_counter() - started)

    # -- reads ------------------------------------------------------------------------------
    def read_table(self, name: str, **filters: Any) -> pd.DataFrame:
        """Rows of relation ``name`` whose columns equal ``filters`` (``None`` matches NULL).

        Sorted by the primary key (or every column), so reads are deterministic.
        """
        if name not in self.metadata.tables:
            raise WarehouseError(f"unknown relation {name!r} "
                                 f"(known: {', '.join(self.metadata.tables)})")
        table = self.metadata.tables[name]
        order = list(table.primary_key.columns) or list(table.c)
        query = select(table).where(*self._where(table, filters)).order_by(*order)
        with self.engine.connect() as conn:
            result = conn.execute(query)
            return _frame(result)

    @staticmethod
    def _growth_frames(rows: pd.DataFrame) -> GrowthFrames:
        rows = rows.sort_values(["protein", "aspect", "term"], kind="stable")
        targets = rows[["protein", "aspect", "mode"]].drop_duplicates()
        truth = rows.loc[rows["is_ground_truth"].astype(bool), ["protein", "term", "aspect", "mode"]]
        known = rows.loc[rows["is_known"].astype(bool), ["protein", "term", "aspect"]]
        return GrowthFrames(targets.reset_index(drop=True), truth.reset_index(drop=True),
                            known.reset_index(drop=True))

    def read_growth(self, old_release: str, new_release: str) -> GrowthFrames:
        """The growth ``(old_release, new_release]`` as targets, ground truth and known terms."""
        rows = self.read_table("annotation_growth", old_release=old_release,
                               new_release=new_release)
        if rows.empty:
            raise WarehouseError(f"annotation_growth holds no rows for ({old_release}, "
                                 f"{new_release}]; run_model('annotation_growth', ...) first")
        return self._growth_frames(rows)

    def read_evaluation_set(self, window: str, window_role: str | None) -> GrowthFrames:
        """The evaluation set of ``window`` in ``window_role`` (``'valid'``, ``'test'`` or None).

        The role has no default, so every read says whether it is tuning (VALID) or reporting
        (TEST).
        """
        if window_role not in (None, *WINDOW_ROLES):
            raise WarehouseError(f"window_role={window_role!r} is not one of {WINDOW_ROLES} "
                                 "or None")
        rows = self.read_table("evaluation_sets", window_key=window, window_role=window_role)
        if rows.empty:
            raise WarehouseError(f"no evaluation set for window={window!r}, "
                                 f"window_role={window_role!r}; run_model('evaluation_sets', ...) "
                                 "first")
        return self._growth_frames(rows)

    # -- checks -----------------------------------------------------------------------------
    def run_check(self, name: str, **params: Any) -> pd.DataFrame:
        """The violating rows of check ``name`` (an empty frame means it passes)."""
        if name not in self._checks:
            raise WarehouseError(f"unknown check {name!r} (known: {', '.join(self._checks)})")
        check = self._checks[name]
        params = self._bind(check, params)
        if self.engine.dialect.name == "postgresql":  # fresh statistics, as before a mart (a check may run first)
            with self.engine.begin() as conn:
                for relation in (t for t in self.metadata.tables if re.search(rf"\b{t}\b", check.sql)):
                    conn.execute(text(f"analyze {relation}"))
        with self.engine.connect() as conn:
            result = conn.execute(text(_statement(check.sql)), params)
            return _frame(result)


def _frame(result) -> pd.DataFrame:
    """A query's rows as a frame. The rows go in as plain tuples: handed SQLAlchemy ``Row`` objects,
    pandas asks each row for a ``dtype`` attribute, and every miss raises inside SQLAlchemy (half the
    time of reading a real-archive growth) before pandas makes the same tuples itself."""
    return pd.DataFrame([tuple(row) for row in result.fetchall()], columns=list(result.keys()))
