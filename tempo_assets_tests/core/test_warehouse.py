"""The SQL warehouse: every model on hand-computed synthetic frames, checks with planted
violations, partition atomicity, and the SQL growth against the Python reference.

Every test that takes the ``wh`` fixture runs twice: on SQLite (the embedded default) and on a
real PostgreSQL server (``production``, started by ``scripts/dev_services.sh``), with the same
SQL models."""
from __future__ import annotations

import hashlib
import multiprocessing
import re
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from sqlalchemy import event, inspect, text
from sqlalchemy.exc import IntegrityError

from tempo_assets.core.storage import warehouse as warehouse_module
from tempo_assets.core.base.errors import TempoInputError
from tempo_assets.core.storage.warehouse import (
    Warehouse, default_sql_dir, default_warehouse_url, ontology_frames,
)
from tempo_assets.core.storage.warehouse_models import WarehouseError, _positional
from tempo_assets_tests.services import postgres_database

OLD, NEW = "2014-09-29", "2019-01-14"
WINDOW = "2010-01-01__2014-09-29__2019-01-14__2022-09-12"

# Two tiny ontologies. MF: M1 <- M2 <- M3, M1 <- M5 (old only; at NEW, M5 is an alt id of M2),
# M1 <- M4 (NEW only). BP: B1 <- B2. CC: C1 <- C2.
M1, M2, M3, M4, M5 = (f"GO:000000{i}" for i in range(1, 6))
B1, B2, C1, C2 = "GO:0000011", "GO:0000012", "GO:0000021", "GO:0000022"
_OBO_TERM = "[Term]\nid: {id}\nname: {id}\nnamespace: {ns}\n{extra}\n"
_NS = {"M": "molecular_function", "B": "biological_process", "C": "cellular_component"}


def _obo(path: Path, version: str, stanzas: list[tuple[str, str, str]]) -> Path:
    body = f"format-version: 1.2\ndata-version: releases/{version}\n\n"
    body += "\n".join(_OBO_TERM.format(id=i, ns=_NS[kind], extra=extra)
                      for i, kind, extra in stanzas)
    path.write_text(body)
    return path


def _old_obo(folder: Path) -> Path:
    return _obo(folder / "old.obo", OLD, [
        (M1, "M", ""), (M2, "M", f"is_a: {M1}"), (M3, "M", f"is_a: {M2}"),
        (M5, "M", f"is_a: {M1}"), (B1, "B", ""), (B2, "B", f"is_a: {B1}"),
        (C1, "C", ""), (C2, "C", f"is_a: {C1}"),
    ])


def _new_obo(folder: Path) -> Path:
    return _obo(folder / "new.obo", NEW, [
        (M1, "M", ""), (M2, "M", f"is_a: {M1}\nalt_id: {M5}"), (M3, "M", f"is_a: {M2}"),
        (M4, "M", f"is_a: {M1}"), (B1, "B", ""), (B2, "B", f"is_a: {B1}"),
        (C1, "C", ""), (C2, "C", f"is_a: {C1}"),
    ])


def _closure(pairs: dict[str, tuple[str, ...]], aspect: dict[str, str]) -> pd.DataFrame:
    rows = [(t, a, aspect[t]) for t, ancestors in pairs.items() for a in (t, *ancestors)]
    return pd.DataFrame(rows, columns=["term", "ancestor", "aspect"])


_ASPECT = {M1: "MF", M2: "MF", M3: "MF", M4: "MF", M5: "MF", B1: "BP", B2: "BP", C1: "CC",
           C2: "CC"}
OLD_CLOSURE = _closure({M1: (), M2: (M1,), M3: (M2, M1), M5: (M1,), B1: (), B2: (B1,), C1: (),
                        C2: (C1,)}, _ASPECT)
NEW_CLOSURE = _closure({M1: (), M2: (M1,), M3: (M2, M1), M4: (M1,), B1: (), B2: (B1,), C1: (),
                        C2: (C1,)}, _ASPECT)
NEW_ALT_IDS = pd.DataFrame({"alt_id": [M5], "term": [M2]})


def _annotations(rows: list[tuple[str, str, str]]) -> pd.DataFrame:
    """(protein, term, evidence) -> a cleaned annotation frame."""
    frame = pd.DataFrame(rows, columns=["protein", "term", "evidence"])
    frame["aspect"] = frame["term"].map(_ASPECT)
    frame["is_experimental"] = frame["evidence"] != "IEA"
    frame["date"] = 20100101
    frame["qualifier"] = None
    return frame


OLD_ANNOTATIONS = _annotations([
    ("P1", M2, "IDA"), ("P1", B2, "IMP"),
    ("P2", B2, "EXP"), ("P2", M3, "IEA"),
    ("P3", C2, "IEA"),
    ("P4", M3, "IDA"),
    ("P5", C2, "IDA"),          # no sequence at OLD
    ("P6", M2, "IDA"),          # sequence changes at NEW
    ("P7", M5, "IDA"),          # M5 becomes an alt id of M2
    ("P8", M3, "TAS"),
])
NEW_ANNOTATIONS = _annotations([
    ("P1", M3, "IDA"), ("P1", B2, "IMP"),
    ("P2", M2, "IPI"), ("P2", B2, "EXP"),
    ("P3", C2, "HDA"),
    ("P4", M2, "IDA"),
    ("P5", C2, "IDA"), ("P5", M2, "IDA"),
    ("P6", M3, "IDA"),
    ("P7", M2, "IDA"),
    ("P8", M4, "IDA"),
])


def _sha(text_: str) -> str:
    return hashlib.sha256(text_.encode()).hexdigest()


OLD_SEQUENCES = pd.DataFrame({"protein": ["P1", "P2", "P3", "P4", "P6", "P7", "P8"],
                              "sequence_sha256": [_sha(p) for p in
                                                  ["P1", "P2", "P3", "P4", "P6", "P7", "P8"]]})
NEW_SEQUENCES = pd.DataFrame({"protein": ["P1", "P3", "P4", "P5", "P6", "P7", "P8"],
                              "sequence_sha256": [_sha(p) for p in
                                                  ["P1", "P3", "P4", "P5", "P6x", "P7", "P8"]]})

# hand-computed growth (OLD, NEW]
EXPECTED_TARGETS = {("P1", "MF", "PK"), ("P2", "MF", "LK"), ("P3", "CC", "NK"),
                    ("P8", "MF", "PK")}
EXPECTED_TRUTH = {("P1", M1, "MF", "PK"), ("P1", M2, "MF", "PK"), ("P1", M3, "MF", "PK"),
                  ("P2", M1, "MF", "LK"), ("P2", M2, "MF", "LK"),
                  ("P3", C1, "CC", "NK"), ("P3", C2, "CC", "NK"),
                  ("P8", M1, "MF", "PK"), ("P8", M4, "MF", "PK")}
EXPECTED_KNOWN = {("P1", M1, "MF"), ("P1", M2, "MF"),
                  ("P8", M1, "MF"), ("P8", M2, "MF"), ("P8", M3, "MF")}


def _rows(frame: pd.DataFrame, columns: list[str]) -> set[tuple]:
    return set(map(tuple, frame[columns].astype(str).to_numpy()))



def test_a_postgres_url_without_its_driver_names_the_setup_command_not_the_password(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "psycopg", None)  # as on a machine set up without --production
    with pytest.raises(TempoInputError, match=r"^TEMPO_WAREHOUSE_URL=postgresql\+psycopg://u:\*\*\*@127.0.0.1:1/w "
                                              r"needs the production extra \(psycopg is not installed\): "
                                              r"run `bash scripts/setup.sh --production`$"):
        Warehouse("postgresql+psycopg://u:secret@127.0.0.1:1/w")

@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.production)])
def wh(request, tmp_path):
    if request.param == "sqlite":
        warehouse = Warehouse(f"sqlite:///{tmp_path / 'warehouse.sqlite'}")
        yield warehouse
        warehouse.close()
        return
    with postgres_database(request.getfixturevalue("dev_services")) as url:
        warehouse = Warehouse(url)
        yield warehouse
        warehouse.close()


def _load_both(wh: Warehouse) -> None:
    wh.load_annotations(OLD, OLD_ANNOTATIONS)
    wh.load_annotations(NEW, NEW_ANNOTATIONS)
    wh.load_term_closure(OLD, OLD_CLOSURE)
    wh.load_term_closure(NEW, NEW_CLOSURE, NEW_ALT_IDS)
    wh.load_sequences(OLD, OLD_SEQUENCES)
    wh.load_sequences(NEW, NEW_SEQUENCES)


@pytest.fixture
def built(wh):
    """Both releases loaded and every mart built up to the growth."""
    _load_both(wh)
    for release in (OLD, NEW):
        wh.run_model("experimental_annotations", release_id=release)
        wh.run_model("nonexperimental_annotations", release_id=release)
    wh.run_model("aligned_annotations", old_release=OLD, new_release=NEW)
    wh.run_model("annotation_growth", old_release=OLD, new_release=NEW)
    return wh


# ---------------------------------------------------------------------------------------------
# schema and registry

def test_window_role_check_constraint_rejects_train(wh):
    insert = text("insert into evaluation_sets (window_key, window_role, old_release, "
                  "new_release, protein, aspect, term, mode, is_ground_truth, is_known) values "
                  "(:w, :role, :o, :n, 'P1', 'MF', :t, 'PK', true, false)")
    values = {"w": WINDOW, "o": OLD, "n": NEW, "t": M1}
    with wh.engine.begin() as conn:
        conn.execute(insert, {**values, "role": "valid"})
        conn.execute(insert, {**values, "role": "test"})
        conn.execute(insert, {**values, "role": None})
    with pytest.raises(IntegrityError, match="window_role"):
        with wh.engine.begin() as conn:
            conn.execute(insert, {**values, "role": "train"})
    assert len(wh.read_table("evaluation_sets")) == 3


def test_models_are_listed_in_dependency_order_with_grain_and_params(wh):
    models = wh.models()
    names = [m.name for m in models]
    assert names[:4] == ["stg_annotations", "stg_term_closure", "stg_term_alt_ids",
                         "stg_sequences"]
    for position, model in enumerate(models):
        assert model.grain.startswith("one row per ("), model.name
        assert set(model.depends_on) <= set(names[:position]), model.name
        assert set(model.partition) <= set(model.params)
    by_name = {m.name: m for m in models}
    assert by_name["annotation_growth"].params == ("old_release", "new_release")
    assert set(by_name["evaluation_sets"].params) == {"window_key", "window_role",
                                                      "old_release", "new_release"}
    assert by_name["evaluation_sets"].partition == ("window_key", "window_role")
    assert {c.relation for c in wh.checks()} <= set(names)


def test_a_table_another_process_created_meanwhile_is_not_an_error(wh, monkeypatch):
    """Two launches opening a new warehouse at once both find ``annotation_growth`` missing;
    the second CREATE meets "already exists". Simulated exactly: the other process creates the
    table between this one's look and its CREATE."""
    table_name = "annotation_growth"
    wh.metadata.tables[table_name].drop(wh.engine)
    build_metadata = warehouse_module._build_metadata

    def racing_metadata():
        metadata = build_metadata()
        table = metadata.tables[table_name]
        raced = []

        @event.listens_for(table, "before_create")
        def other_process_creates_it_first(target, connection, **_kw):  # noqa: ANN001
            if not raced:
                raced.append(True)
                wh.metadata.tables[table_name].create(wh.engine)
        return metadata

    monkeypatch.setattr(warehouse_module, "_build_metadata", racing_metadata)
    with Warehouse(wh.url) as second:
        assert inspect(second.engine).has_table(table_name)


def _open_and_close(url: str, start: Any, outcomes: Any) -> None:
    start.wait()
    try:
        Warehouse(url).close()
        outcomes.put("ok")
    except Exception as error:  # noqa: BLE001 - the parent reports it
        outcomes.put(f"{type(error).__name__}: {error}")


def test_processes_opening_a_new_sqlite_warehouse_at_once_all_succeed(tmp_path):
    """The real race, four processes released together onto a new file, 25 times. Before the
    retries about one round in three failed ("table ... already exists", "database is locked")."""
    context = multiprocessing.get_context("fork")
    failures = []
    for attempt in range(25):
        url = f"sqlite:///{tmp_path / f'warehouse{attempt}.sqlite'}"
        start, outcomes = context.Barrier(4), context.Queue()
        processes = [context.Process(target=_open_and_close, args=(url, start, outcomes))
                     for _ in range(4)]
        for process in processes:
            process.start()
        for process in processes:
            process.join(timeout=120)
        failures += [o for o in (outcomes.get(timeout=10) for _ in processes) if o != "ok"]
    assert failures == []


class _SwitchingElsewhere:
    """A cursor whose file another connection is switching to WAL: "database is locked" the
    first ``busy`` times, as SQLite answers without waiting."""

    def __init__(self, busy: int):
        self.busy, self.statements = busy, []

    def execute(self, statement: str) -> "_SwitchingElsewhere":
        self.statements.append(statement)
        if self.busy:
            self.busy -= 1
            raise sqlite3.OperationalError("database is locked")
        self.mode = "wal" if statement.endswith("wal") else getattr(self, "mode", "delete")
        return self

    def fetchone(self) -> tuple[str]:
        return (self.mode,)


def test_wal_switch_waits_for_another_connection_switching_it():
    cursor = _SwitchingElsewhere(busy=3)
    warehouse_module._use_write_ahead_log(cursor)
    assert cursor.statements[-2:] == ["pragma journal_mode", "pragma journal_mode = wal"]
    with pytest.raises(sqlite3.OperationalError, match="disk I/O"):
        warehouse_module._use_write_ahead_log(_DiskError())


class _DiskError:
    def execute(self, statement: str) -> None:
        raise sqlite3.OperationalError("disk I/O error")


def test_default_warehouse_url(monkeypatch, tmp_path):
    monkeypatch.setenv("TEMPO_WAREHOUSE_URL", "postgresql://db/tempo")
    assert default_warehouse_url() == "postgresql://db/tempo"
    monkeypatch.delenv("TEMPO_WAREHOUSE_URL")
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path))
    assert default_warehouse_url() == f"sqlite:///{tmp_path.resolve()}/tempo_warehouse.sqlite"
    monkeypatch.delenv("DAGSTER_HOME")
    assert default_warehouse_url().endswith("/.tempo_cache/tempo_warehouse.sqlite")


# ---------------------------------------------------------------------------------------------
# models on hand-computed frames

def test_propagation_marts(built):
    experimental = built.read_table("experimental_annotations", release_id=OLD)
    assert _rows(experimental, ["protein", "term", "aspect"]) == {
        ("P1", M1, "MF"), ("P1", M2, "MF"), ("P1", B1, "BP"), ("P1", B2, "BP"),
        ("P2", B1, "BP"), ("P2", B2, "BP"),
        ("P4", M1, "MF"), ("P4", M2, "MF"), ("P4", M3, "MF"),
        ("P5", C1, "CC"), ("P5", C2, "CC"),
        ("P6", M1, "MF"), ("P6", M2, "MF"),
        ("P7", M1, "MF"), ("P7", M5, "MF"),
        ("P8", M1, "MF"), ("P8", M2, "MF"), ("P8", M3, "MF"),
    }
    assert len(experimental) == 18  # one row per (protein, term): no duplicates
    non_experimental = built.read_table("nonexperimental_annotations", release_id=OLD)
    assert _rows(non_experimental, ["protein", "term", "aspect"]) == {
        ("P2", M1, "MF"), ("P2", M2, "MF"), ("P2", M3, "MF"), ("P3", C1, "CC"), ("P3", C2, "CC"),
    }
    assert set(built.read_table("experimental_annotations")["release_id"]) == {OLD, NEW}


def test_annotation_growth_hand_computed(built):
    growth = built.read_growth(OLD, NEW)
    assert _rows(growth.targets, ["protein", "aspect", "mode"]) == EXPECTED_TARGETS
    assert len(growth.targets) == len(EXPECTED_TARGETS)
    assert _rows(growth.ground_truth, ["protein", "term", "aspect", "mode"]) == EXPECTED_TRUTH
    assert _rows(growth.known, ["protein", "term", "aspect"]) == EXPECTED_KNOWN
    raw = built.read_table("annotation_growth")
    # P8's M2 and M3 are known at OLD but gone at NEW: kept as known, not as ground truth
    known_only = raw[~raw["is_ground_truth"].astype(bool)]
    assert _rows(known_only, ["protein", "term"]) == {("P8", M2), ("P8", M3)}


def test_evaluation_sets_tag_roles_and_read_back(built):
    built.run_model("evaluation_sets", window_key=WINDOW, window_role="test",
                    old_release=OLD, new_release=NEW)
    built.run_model("evaluation_sets", window_key="adhoc", window_role=None,
                    old_release=OLD, new_release=NEW)
    test_set = built.read_evaluation_set(WINDOW, "test")
    assert _rows(test_set.targets, ["protein", "aspect", "mode"]) == EXPECTED_TARGETS
    assert _rows(test_set.ground_truth, ["protein", "term", "aspect", "mode"]) == EXPECTED_TRUTH
    assert _rows(test_set.known, ["protein", "term", "aspect"]) == EXPECTED_KNOWN
    assert len(built.read_evaluation_set("adhoc", None).targets) == len(EXPECTED_TARGETS)
    with pytest.raises(WarehouseError, match="no evaluation set"):
        built.read_evaluation_set(WINDOW, "valid")
    with pytest.raises(WarehouseError, match="window_role"):
        built.read_evaluation_set(WINDOW, "train")
    stored = built.read_table("evaluation_sets", window_key=WINDOW)
    assert set(stored["window_role"]) == {"test"}


def test_rerun_is_idempotent_and_partition_scoped(built):
    before_old = built.read_table("experimental_annotations", release_id=OLD)
    before_new = built.read_table("experimental_annotations", release_id=NEW)
    run = built.run_model("experimental_annotations", release_id=NEW)
    assert run.rows == len(before_new) and run.partition == {"release_id": NEW}
    pd.testing.assert_frame_equal(built.read_table("experimental_annotations", release_id=NEW),
                                  before_new)
    pd.testing.assert_frame_equal(built.read_table("experimental_annotations", release_id=OLD),
                                  before_old)
    # reloading a staging partition replaces it, and a re-run follows the new input
    built.load_annotations(NEW, NEW_ANNOTATIONS[NEW_ANNOTATIONS["protein"] != "P1"])
    assert built.load_annotations(OLD, OLD_ANNOTATIONS) == len(OLD_ANNOTATIONS)
    assert len(built.read_table("stg_annotations", release_id=OLD)) == len(OLD_ANNOTATIONS)
    built.run_model("experimental_annotations", release_id=NEW)
    after = built.read_table("experimental_annotations", release_id=NEW)
    assert "P1" not in set(after["protein"])
    assert len(after) == len(before_new) - 5  # P1 held M1 M2 M3 B1 B2


def test_failed_model_run_keeps_previous_rows(built, tmp_path):
    before = built.read_table("experimental_annotations", release_id=OLD)
    broken_dir = tmp_path / "sql"
    shutil.copytree(default_sql_dir(), broken_dir)
    model = broken_dir / "marts" / "experimental_annotations.sql"
    # a NULL aspect violates NOT NULL part-way through the insert, after the delete
    model.write_text(model.read_text().replace("        p.aspect\n",
                                               "        case when p.protein = 'P8' then null "
                                               "else p.aspect end as aspect\n"))
    broken = Warehouse(built.url, sql_dir=broken_dir)
    with pytest.raises(IntegrityError):
        broken.run_model("experimental_annotations", release_id=OLD)
    broken.close()
    pd.testing.assert_frame_equal(built.read_table("experimental_annotations", release_id=OLD),
                                  before)


def test_failed_load_keeps_previous_rows(wh, monkeypatch):
    wh.load_annotations(OLD, OLD_ANNOTATIONS)
    monkeypatch.setattr(warehouse_module, "_LOAD_CHUNK", 3)

    def failing_chunks(columns):
        chunks = Warehouse._chunks(columns)
        yield next(chunks)
        raise RuntimeError("disk full")

    monkeypatch.setattr(wh, "_chunks", failing_chunks)
    with pytest.raises(RuntimeError, match="disk full"):
        wh.load_annotations(OLD, NEW_ANNOTATIONS)
    stored = wh.read_table("stg_annotations", release_id=OLD)
    assert _rows(stored, ["protein", "term", "evidence"]) == _rows(
        OLD_ANNOTATIONS, ["protein", "term", "evidence"])


# ---------------------------------------------------------------------------------------------
# bad input

def test_models_refuse_missing_inputs_and_bad_parameters(wh):
    with pytest.raises(WarehouseError, match="stg_annotations holds no rows"):
        wh.run_model("experimental_annotations", release_id=OLD)
    wh.load_annotations(OLD, OLD_ANNOTATIONS)
    with pytest.raises(WarehouseError, match="stg_term_closure holds no rows"):
        wh.run_model("experimental_annotations", release_id=OLD)
    with pytest.raises(WarehouseError, match="missing \\['release_id'\\]"):
        wh.run_model("experimental_annotations")
    with pytest.raises(WarehouseError, match="unexpected \\['cutoff'\\]"):
        wh.run_model("experimental_annotations", release_id=OLD, cutoff=OLD)
    with pytest.raises(WarehouseError, match="not a release id"):
        wh.run_model("experimental_annotations", release_id="2014-9-29")
    with pytest.raises(WarehouseError, match="must precede"):
        wh.run_model("annotation_growth", old_release=NEW, new_release=OLD)
    with pytest.raises(WarehouseError, match="window_role='train'"):
        wh.run_model("evaluation_sets", window_key=WINDOW, window_role="train",
                     old_release=OLD, new_release=NEW)
    with pytest.raises(WarehouseError, match="staging relation"):
        wh.run_model("stg_annotations", release_id=OLD)
    with pytest.raises(WarehouseError, match="unknown model"):
        wh.run_model("gold_standard", release_id=OLD)
    with pytest.raises(WarehouseError, match="no column 'cutoff'"):
        wh.read_table("stg_annotations", cutoff=OLD)


def test_growth_refuses_a_release_without_sequences(wh):
    wh.load_annotations(OLD, OLD_ANNOTATIONS)
    wh.load_annotations(NEW, NEW_ANNOTATIONS)
    wh.load_term_closure(OLD, OLD_CLOSURE)
    wh.load_term_closure(NEW, NEW_CLOSURE, NEW_ALT_IDS)
    wh.run_model("experimental_annotations", release_id=OLD)
    wh.run_model("experimental_annotations", release_id=NEW)
    wh.run_model("aligned_annotations", old_release=OLD, new_release=NEW)
    with pytest.raises(WarehouseError, match="stg_sequences holds no rows"):
        wh.run_model("annotation_growth", old_release=OLD, new_release=NEW)


@pytest.mark.parametrize("mutate, message", [
    (lambda f: f.drop(columns="evidence"), "lacks column"),
    (lambda f: f.assign(term=[None] + list(f["term"][1:])), "'term' is null at row 0"),
    (lambda f: f.assign(aspect=["P"] * len(f)), "'aspect' holds 'P' at row 0"),
    (lambda f: f.assign(is_experimental="yes"), "'is_experimental' holds 'yes'"),
])
def test_load_annotations_names_the_bad_key(wh, mutate, message):
    with pytest.raises(TempoInputError, match=re.escape(message)) as error:
        wh.load_annotations(OLD, mutate(OLD_ANNOTATIONS.copy()))
    assert "stg_annotations[release_id=2014-09-29]" in str(error.value)


def test_other_loaders_validate(wh):
    with pytest.raises(WarehouseError, match="not a lowercase hex sha256"):
        wh.load_sequences(OLD, OLD_SEQUENCES.assign(sequence_sha256="abc"))
    twice = pd.concat([OLD_SEQUENCES, OLD_SEQUENCES.assign(sequence_sha256=_sha("x"))])
    with pytest.raises(WarehouseError, match="two different sequence hashes"):
        wh.load_sequences(OLD, twice)
    with pytest.raises(WarehouseError, match="more than one aspect"):
        wh.load_term_closure(OLD, pd.concat([OLD_CLOSURE, pd.DataFrame(
            {"term": [M2], "ancestor": [B1], "aspect": ["BP"]})]))
    with pytest.raises(WarehouseError, match="alt id must not be a live term"):
        wh.load_term_closure(NEW, NEW_CLOSURE, pd.DataFrame({"alt_id": [M3], "term": [M2]}))
    with pytest.raises(WarehouseError, match="not a release id"):
        wh.load_sequences("latest", OLD_SEQUENCES)
    assert wh.read_table("stg_sequences").empty


def _stored(wh: Warehouse, name: str, columns: list[str]) -> set[tuple]:
    """The release OLD's rows of ``name`` as tuples of plain Python values (SQLite hands booleans
    back as 0/1, PostgreSQL as bool; a missing qualifier as None)."""
    frame = wh.read_table(name, release_id=OLD)
    rows = frame[columns].astype(object).where(frame[columns].notna(), None)
    return {tuple(bool(v) if c == "is_experimental" else v for c, v in zip(columns, row))
            for row in rows.itertuples(index=False)}


def test_loads_write_exactly_the_rows_given(wh):
    """The loads hand the driver positional tuples: each value must land in its own column."""
    annotations = pd.DataFrame({
        "protein": ["P2", "P1", "P3"], "term": [M2, B2, C2], "aspect": ["MF", "BP", "CC"],
        "evidence": ["IDA", "IEA", "EXP"], "is_experimental": [True, False, True],
        "date": [20100102, 20091231, 20140929],
        "qualifier": [None, "NOT|involved_in", "contributes_to"],
    })
    wh.load_annotations(OLD, annotations)
    wh.load_term_closure(OLD, NEW_CLOSURE, NEW_ALT_IDS)
    wh.load_sequences(OLD, OLD_SEQUENCES)
    given = annotations.astype(object).where(annotations.notna(), None)
    assert _stored(wh, "stg_annotations", ["protein", "term", "aspect", "evidence", "qualifier",
                                           "is_experimental", "annotation_date"]) == {
        (r.protein, r.term, r.aspect, r.evidence, r.qualifier, r.is_experimental, r.date)
        for r in given.itertuples(index=False)}
    assert _stored(wh, "stg_term_closure", ["term", "ancestor", "aspect"]) == set(
        NEW_CLOSURE.itertuples(index=False, name=None))
    assert _stored(wh, "stg_term_alt_ids", ["alt_id", "term"]) == {(M5, M2)}
    assert _stored(wh, "stg_sequences", ["protein", "sequence_sha256"]) == set(
        OLD_SEQUENCES.itertuples(index=False, name=None))
    # the aspect CHECK (written as comparisons, not an ``in`` list: warehouse_tables._one_of)
    # still refuses any other value
    with pytest.raises(IntegrityError), wh.engine.begin() as conn:
        conn.execute(text("insert into stg_term_closure (release_id, term, ancestor, aspect) "
                          "values (:r, 'GO:1', 'GO:1', 'XX')"), {"r": NEW})


def test_positional_statement_keeps_comments_and_literals_out():
    sql = "-- grain: one row per :thing\ninsert into t (a, b) values (:b, ':a' || '%') -- :c"
    assert _positional(sql, "qmark") == ("insert into t (a, b) values (?, ':a' || '%')", ("b",))
    assert _positional(sql, "pyformat") == ("insert into t (a, b) values (%s, ':a' || '%%')",
                                            ("b",))
    with pytest.raises(WarehouseError, match="positional"):
        _positional(sql, "named")


# ---------------------------------------------------------------------------------------------
# checks: each passes on clean data and finds a planted violation

def _clean_checks(wh: Warehouse) -> None:
    for check in wh.checks():
        params = {"release_id": OLD, "old_release": OLD, "new_release": NEW}
        found = wh.run_check(check.name, **{k: params[k] for k in check.params})
        assert found.empty, (check.name, found)


def test_checks_pass_on_clean_data(built):
    built.run_model("evaluation_sets", window_key=WINDOW, window_role="test",
                    old_release=OLD, new_release=NEW)
    _clean_checks(built)
    assert len(built.checks()) >= 10


def test_staging_checks_find_planted_violations(wh):
    planted = _annotations([("P1", M2, "IDA"), ("P2", M3, "IEA"), ("P3", M2, "IDA"),
                            ("P4", "GO:0099999", "IDA"), ("P5", M1, "IMP")])
    planted.loc[0, "qualifier"] = "NOT|enables"
    planted.loc[4, "qualifier"] = "contributes_to"
    planted.loc[1, "is_experimental"] = True       # IEA flagged experimental
    planted.loc[2, "aspect"] = "BP"                # M2 is MF in the ontology
    planted.loc[3, "aspect"] = "MF"
    wh.load_annotations(OLD, planted)
    wh.load_term_closure(OLD, OLD_CLOSURE[~((OLD_CLOSURE["term"] == B2)
                                            & (OLD_CLOSURE["ancestor"] == B2))])

    def found(name, columns):
        return _rows(wh.run_check(name, release_id=OLD), columns)

    assert found("stg_annotations__no_not_qualifier", ["protein", "qualifier"]) == {
        ("P1", "NOT|enables")}
    assert found("stg_annotations__experimental_flag_matches_evidence",
                 ["protein", "evidence"]) == {("P2", "IEA")}
    assert found("stg_annotations__aspect_matches_ontology",
                 ["term", "gaf_aspect", "ontology_aspect"]) == {(M2, "BP", "MF")}
    assert found("stg_annotations__terms_in_closure", ["term", "n_annotations"]) == {
        ("GO:0099999", "1")}
    assert found("stg_term_closure__reflexive", ["term"]) == {(B2,)}


def test_growth_checks_find_planted_violations(built):
    # P1's sequence disappears from OLD after the growth was built
    built.load_sequences(OLD, OLD_SEQUENCES[OLD_SEQUENCES["protein"] != "P1"])
    found = built.run_check("annotation_growth__targets_have_sequence",
                            old_release=OLD, new_release=NEW)
    assert _rows(found, ["protein", "aspect", "mode"]) == {("P1", "MF", "PK")}
    with built.engine.begin() as conn:
        conn.execute(text("update annotation_growth set is_known = :yes "
                          "where protein = 'P2' and term = :term"), {"yes": True, "term": M1})
        conn.execute(text("update annotation_growth set is_known = :yes where protein = 'P8'"),
                     {"yes": True})
    found = built.run_check("annotation_growth__known_only_for_pk",
                            old_release=OLD, new_release=NEW)
    assert _rows(found, ["protein", "term", "mode"]) == {("P2", M1, "LK")}
    found = built.run_check("annotation_growth__targets_gain_a_term",
                            old_release=OLD, new_release=NEW)
    assert _rows(found, ["protein", "aspect", "mode"]) == {("P8", "MF", "PK")}


def test_evaluation_set_checks_find_planted_violations(built):
    # the same growth as VALID and TEST: VALID does not end before TEST starts
    for role in ("valid", "test"):
        built.run_model("evaluation_sets", window_key=WINDOW, window_role=role,
                        old_release=OLD, new_release=NEW)
    found = built.run_check("evaluation_sets__valid_precedes_test")
    assert _rows(found, ["window_key", "valid_new_release", "test_old_release"]) == {
        (WINDOW, NEW, OLD)}
    assert built.run_check("evaluation_sets__role_is_valid_or_test").empty
    # only a connection that switches the CHECK constraint off can plant a 'train' set
    plant = text("update evaluation_sets set window_role = 'train' where window_role = 'valid'")
    with built.engine.begin() as conn:
        if built.engine.dialect.name == "sqlite":
            conn.execute(text("pragma ignore_check_constraints = on"))
            conn.execute(plant)
            conn.execute(text("pragma ignore_check_constraints = off"))
        else:
            conn.execute(text("alter table evaluation_sets "
                              "drop constraint ck_evaluation_sets_window_role"))
            conn.execute(plant)
            conn.execute(text("alter table evaluation_sets add constraint "
                              "ck_evaluation_sets_window_role "
                              "check (window_role in ('valid', 'test')) not valid"))
    found = built.run_check("evaluation_sets__role_is_valid_or_test")
    assert _rows(found, ["window_key", "window_role"]) == {(WINDOW, "train")}


# ---------------------------------------------------------------------------------------------
# an ontology staged once per content hash, copied to the releases that share it

SHARED_GO, OTHER_GO = "1" * 64, "2" * 64


def _ontology_rows(wh: Warehouse, release: str) -> tuple[set, set]:
    closure = wh.read_table("stg_term_closure", release_id=release)
    alt_ids = wh.read_table("stg_term_alt_ids", release_id=release)
    return _rows(closure, ["term", "ancestor", "aspect"]), _rows(alt_ids, ["alt_id", "term"])


def _never_read():
    raise AssertionError("the ontology was read although a release staged it before")


def test_a_release_sharing_a_staged_ontology_copies_its_rows_without_reading_it(wh, tmp_path):
    from tempo_assets.core.inputs.ontology import parse_obo

    old_ontology, new_ontology = parse_obo(_old_obo(tmp_path)), parse_obo(_new_obo(tmp_path))
    closure, alt_ids = ontology_frames(new_ontology)
    built = (_rows(closure, ["term", "ancestor", "aspect"]), _rows(alt_ids, ["alt_id", "term"]))
    assert wh.load_ontology(OLD, lambda: new_ontology, SHARED_GO) == len(closure)
    assert wh.load_ontology(NEW, _never_read, SHARED_GO) == len(closure)
    assert _ontology_rows(wh, NEW) == _ontology_rows(wh, OLD) == built
    recorded = wh.read_table("stg_release_ontologies")
    assert _rows(recorded, ["release_id", "ontology_sha256"]) == {(OLD, SHARED_GO), (NEW, SHARED_GO)}
    # another ontology is built from itself and replaces the copy; the other release keeps its rows
    wh.load_ontology(NEW, lambda: old_ontology, OTHER_GO)
    old_closure, old_alt_ids = ontology_frames(old_ontology)
    assert _ontology_rows(wh, NEW) == (_rows(old_closure, ["term", "ancestor", "aspect"]), set())
    assert _ontology_rows(wh, OLD) == built
    # frames loaded without a hash record none: no release copies them as an ontology's
    wh.load_term_closure(OLD, NEW_CLOSURE, NEW_ALT_IDS)
    assert set(wh.read_table("stg_release_ontologies")["release_id"]) == {NEW}
    assert wh.load_ontology("2022-09-12", lambda: new_ontology, SHARED_GO) == len(closure)
    with pytest.raises(WarehouseError, match="not a lowercase hex sha256"):
        wh.load_ontology(NEW, new_ontology, "ABC")


def test_a_copy_reads_only_a_donor_still_recording_the_hash(wh, tmp_path):
    """The copy's own filter (not only the donor look-up) holds the hash: a donor re-staged with
    another ontology between the two gives no rows, and the ontology is then built from itself."""
    from tempo_assets.core.inputs.ontology import parse_obo
    from tempo_assets.core.storage.warehouse_ontology import copy_ontology_statements

    new_ontology = parse_obo(_new_obo(tmp_path))
    wh.load_ontology(OLD, new_ontology, OTHER_GO)
    with wh.engine.begin() as conn:
        for statement in copy_ontology_statements(wh.metadata, NEW, OLD, SHARED_GO).values():
            conn.execute(statement)
    assert _ontology_rows(wh, NEW) == (set(), set())
    # a donor recorded without rows (its rows gone meanwhile): nothing is copied, the ontology is built
    with wh.engine.begin() as conn:
        conn.execute(text("insert into stg_release_ontologies (release_id, ontology_sha256) "
                          "values (:r, :h)"), {"r": "2010-01-01", "h": SHARED_GO})
    read = []
    assert wh.load_ontology(NEW, lambda: read.append(1) or new_ontology, SHARED_GO) > 0
    assert read and _ontology_rows(wh, NEW) == _ontology_rows(wh, OLD)


# ---------------------------------------------------------------------------------------------
# the SQL files themselves

SQL_FILES = sorted(default_sql_dir().rglob("*.sql"))


def _code(sql: str) -> str:
    """The SQL without comments and string literals."""
    code = "\n".join(line.split("--", 1)[0] for line in sql.splitlines())
    return re.sub(r"'[^']*'", "''", code)


@pytest.mark.parametrize("path", SQL_FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_sql_files_follow_house_style(path):
    sql = path.read_text()
    assert len(SQL_FILES) >= 17
    assert sql.startswith("-- one row per "), "first line states the grain"
    # values are bound, never formatted into the text
    assert not re.search(r"\{|\}|%s|%\(|%d|\.format\(", sql), "string formatting in SQL"
    code = _code(sql)
    assert ";" not in code.strip().rstrip(";"), "one statement per file"
    assert not re.search(r"\b(SELECT|FROM|WHERE|JOIN|INSERT|INTO|VALUES|GROUP|ORDER|WITH|AS|"
                         r"AND|OR|NOT|NULL|CASE|WHEN|THEN|ELSE|END|DISTINCT|UNION)\b", code), \
        "lowercase keywords"
    if path.parent.name == "staging":
        assert code.lstrip().startswith("insert into stg_")
    else:
        assert code.lstrip().startswith("with ")
        assert code.strip().endswith("select * from final")
        # every table reference has an explicit alias
        for match in re.finditer(r"\b(?:from|join)\s+(\w+)(\s+as\s+\w+)?", code):
            assert match.group(2) or match.group(1) == "final", \
                f"{match.group(1)} without an alias in {path.name}"


# ---------------------------------------------------------------------------------------------
# against the Python reference (core/labels/growth.py)

def _python_growth(old_ontology, new_ontology, sequences, new_sequences=None):
    from tempo_assets.core.labels.annotations import experimental_annotations
    from tempo_assets.core.labels.growth import align_terms, annotation_growth

    old, _ = experimental_annotations(OLD_GAF_FRAMES["old"], old_ontology)
    new, _ = experimental_annotations(OLD_GAF_FRAMES["new"], new_ontology)
    aligned, _ = align_terms(old, new_ontology)
    return annotation_growth(aligned, new, sequences, new_sequences)


OLD_GAF_FRAMES = {"old": OLD_ANNOTATIONS, "new": NEW_ANNOTATIONS}


def _assert_same_growth(sql, python) -> None:
    assert _rows(sql.targets, ["protein", "aspect", "mode"]) == _rows(
        python.targets, ["protein", "aspect", "mode"])
    assert len(sql.targets) == len(python.targets)
    assert _rows(sql.ground_truth, ["protein", "term", "aspect", "mode"]) == _rows(
        python.ground_truth, ["protein", "term", "aspect", "mode"])
    assert len(sql.ground_truth) == len(python.ground_truth)
    assert _rows(sql.known, ["protein", "term", "aspect"]) == _rows(
        python.known, ["protein", "term", "aspect"])
    assert len(sql.known) == len(python.known)


def test_sql_growth_matches_python_reference_on_synthetic_ontologies(wh, tmp_path):
    from tempo_assets.core.inputs.ontology import parse_obo

    old_ontology, new_ontology = parse_obo(_old_obo(tmp_path)), parse_obo(_new_obo(tmp_path))
    closure, alt_ids = ontology_frames(new_ontology)
    assert _rows(closure, ["term", "ancestor", "aspect"]) == _rows(
        NEW_CLOSURE, ["term", "ancestor", "aspect"])
    assert _rows(alt_ids, ["alt_id", "term"]) == {(M5, M2)}
    wh.load_annotations(OLD, OLD_ANNOTATIONS)
    wh.load_annotations(NEW, NEW_ANNOTATIONS)
    wh.load_ontology(OLD, old_ontology)
    wh.load_ontology(NEW, new_ontology)
    wh.load_sequences(OLD, OLD_SEQUENCES)
    wh.load_sequences(NEW, NEW_SEQUENCES)
    for release in (OLD, NEW):
        wh.run_model("experimental_annotations", release_id=release)
    wh.run_model("aligned_annotations", old_release=OLD, new_release=NEW)
    wh.run_model("annotation_growth", old_release=OLD, new_release=NEW)
    sql = wh.read_growth(OLD, NEW)
    python = _python_growth(
        old_ontology, new_ontology,
        dict(zip(OLD_SEQUENCES["protein"], OLD_SEQUENCES["sequence_sha256"])),
        dict(zip(NEW_SEQUENCES["protein"], NEW_SEQUENCES["sequence_sha256"])))
    _assert_same_growth(sql, python)
    assert _rows(sql.targets, ["protein", "aspect", "mode"]) == EXPECTED_TARGETS


# 1 protein in SAMPLE_ONE_IN (by accession hash). At 16 the sample's growth still has every mode in every
# aspect, each (mode, aspect) with 55 to 330 targets (1,286 in all; 47,831 ground-truth rows, 32,441 known
# terms): every join and rule of the models is exercised many times over. At 8 it was twice as many
# rows of each, loaded and joined twice on every backend, to show the same.
SAMPLE_ONE_IN = 16


@pytest.fixture(scope="module")
def real_sample(tmp_path_factory):
    """Human 2014-09-29 -> 2019-01-14, a 1-in-SAMPLE_ONE_IN sample of proteins (by accession hash): what each
    warehouse loads and the Python reference's growth, read and computed once for both backends."""
    from tempo_assets.core.labels.annotations import (
        clean_annotations,
        experimental_annotations,
        split_by_evidence,
    )
    from tempo_assets.core.inputs.fasta import sequence_sha256
    from tempo_assets.core.labels.growth import align_terms, annotation_growth
    from tempo_assets_tests.conftest import run_folder
    from tempo_assets_tests.core.real_archive import real_fasta, real_gaf, real_obo

    def sample(frame):
        keep = frame["protein"].map(lambda p: hashlib.md5(p.encode()).digest()[0] % SAMPLE_ONE_IN == 0)
        return frame[keep.to_numpy(dtype=bool)].reset_index(drop=True)

    folder = run_folder(tmp_path_factory)  # the files parsed once per run (real_archive.py)
    releases = {OLD: ("goa_human_2014-09-29.gaf.gz", "go_2014-10-27.obo.gz"),
                NEW: ("goa_human_2019-01-14.gaf.gz", "go_2019-01-27.obo.gz")}
    annotations, propagated, ontologies, seeds = {}, {}, {}, {}
    for release, (gaf, obo) in releases.items():
        frame = sample(real_gaf(folder, gaf))
        ontology = ontologies[release] = real_obo(folder, obo)
        experimental, non_experimental = split_by_evidence(frame)
        experimental, _ = clean_annotations(experimental, ontology)
        non_experimental, _ = clean_annotations(non_experimental, ontology)
        annotations[release] = pd.concat([experimental.assign(is_experimental=True),
                                          non_experimental.assign(is_experimental=False)])
        propagated[release], _ = experimental_annotations(frame, ontology)
        seeds[release] = set(experimental["term"])
    aligned, _ = align_terms(propagated[OLD], ontologies[NEW])
    # the closure rows the sample can reach keep the load small; the join is the same
    reach = {OLD: seeds[OLD],
             NEW: seeds[NEW] | {ontologies[NEW].resolve(t) for t in propagated[OLD]["term"]}}
    closures = {}
    for release, ontology in ontologies.items():
        closure, alt_ids = ontology_frames(ontology)
        closures[release] = (closure[closure["term"].isin(reach[release])],
                             alt_ids[alt_ids["term"].isin(reach[release])])
    sequences = {acc: sequence_sha256(seq) for acc, seq in real_fasta(folder).items()}
    python = annotation_growth(aligned, propagated[NEW], sequences)
    return annotations, closures, propagated, sequences, python


@pytest.mark.slow
def test_sql_growth_matches_python_reference_on_real_archive_sample(wh, real_sample):
    """Human 2014-09-29 -> 2019-01-14, a 1-in-SAMPLE_ONE_IN sample of proteins (by accession hash): the
    SQL models' propagation and growth equal the Python reference's, in every mode and aspect."""
    annotations, closures, propagated, sequences, python = real_sample
    for release in (OLD, NEW):
        wh.load_annotations(release, annotations[release])
    for release in (OLD, NEW):
        wh.load_term_closure(release, *closures[release])
        wh.run_model("experimental_annotations", release_id=release)
        sql_propagated = wh.read_table("experimental_annotations", release_id=release)
        assert _rows(sql_propagated, ["protein", "term", "aspect"]) == _rows(
            propagated[release], ["protein", "term", "aspect"])
    wh.load_sequences(OLD, pd.DataFrame({"protein": list(sequences),
                                         "sequence_sha256": list(sequences.values())}))
    wh.run_model("aligned_annotations", old_release=OLD, new_release=NEW)
    wh.run_model("annotation_growth", old_release=OLD, new_release=NEW)
    sql = wh.read_growth(OLD, NEW)
    assert len(python.targets) > 200 and set(python.targets["mode"]) == {"NK", "LK", "PK"}
    per_cell = python.targets.groupby(["mode", "aspect"]).size()  # every mode in every aspect, many times
    assert len(per_cell) == 9 and per_cell.min() >= 20, per_cell.to_dict()
    _assert_same_growth(sql, python)
    for check in wh.checks("annotation_growth"):
        assert wh.run_check(check.name, old_release=OLD, new_release=NEW).empty, check.name


# ---------------------------------------------------------------------------------------------
# a PostgreSQL endpoint that is down or refuses the credentials

def _free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.mark.production
def test_unreachable_or_refusing_postgres_names_the_endpoint_not_the_password(dev_services):
    from sqlalchemy.engine import make_url

    url = make_url(dev_services["TEMPO_WAREHOUSE_URL"])
    port = _free_port()
    with pytest.raises(WarehouseError) as down:
        Warehouse(url.set(port=port).render_as_string(hide_password=False))
    assert f"127.0.0.1:{port}/{url.database}" in str(down.value)
    assert "Connection refused" in str(down.value)
    assert url.password not in str(down.value)
    wrong = "not-the-password-" + url.password[:4]
    with pytest.raises(WarehouseError, match="password authentication failed") as refused:
        Warehouse(url.set(password=wrong).render_as_string(hide_password=False))
    assert f"127.0.0.1:{url.port}" in str(refused.value)
    assert wrong not in str(refused.value) and url.password not in str(refused.value)
    with Warehouse(url.render_as_string(hide_password=False)) as reachable:
        assert url.password not in repr(reachable) and "***" in repr(reachable)
