"""The warehouse's tables, as SQLAlchemy metadata: staging relations (annotations, term
closure, alt ids, sequence hashes), propagated annotation marts and growth / evaluation-set
tables, each with its primary key, indexes and the CHECK constraints on aspect, mode and
``window_role``.
"""
from __future__ import annotations

from sqlalchemy import (
    Boolean, CheckConstraint, Column, Index, Integer, MetaData, PrimaryKeyConstraint, String, Table,
)

from tempo_assets.core.base.vocabulary import ASPECTS, MODES


def _one_of(column: str, values: tuple[str, ...]) -> str:
    """``column = 'a' or column = 'b' or ...``: the same rule as ``column in ('a', 'b', ...)``.

    SQLite evaluates an ``in`` list of three or more constants through a small table it builds
    at each execution of a statement, and a staging load executes its insert once per row: on
    full GO's term closure that doubled the load's time. The comparisons cost nothing extra.
    """
    return " or ".join(f"{column} = '{value}'" for value in values)


def _aspect_check(table: str) -> CheckConstraint:
    return CheckConstraint(_one_of("aspect", ASPECTS), name=f"ck_{table}_aspect")


def _mode_check(table: str) -> CheckConstraint:
    return CheckConstraint(_one_of("mode", MODES), name=f"ck_{table}_mode")


# SQLite stores a table with a primary key as one B-tree keyed by it (other dialects ignore
# the option): half the write work of a rowid table plus a key index
_CLUSTERED = {"sqlite_with_rowid": False}


def _build_metadata() -> MetaData:
    metadata = MetaData()
    _add_staging_tables(metadata)
    _add_annotation_tables(metadata)
    _add_growth_tables(metadata)
    return metadata


def _add_staging_tables(metadata: MetaData) -> None:
    """The ``stg_*`` tables: each release's annotations, term closure, alt ids, sequences and the
    content hash of the ontology its closure was built from."""
    Table(
        "stg_annotations", metadata,
        Column("release_id", String(32), nullable=False),
        Column("protein", String(64), nullable=False),
        Column("term", String(32), nullable=False),
        Column("aspect", String(2), nullable=False),
        Column("evidence", String(8), nullable=False),
        Column("qualifier", String(128), nullable=True),
        Column("is_experimental", Boolean, nullable=False),
        Column("annotation_date", Integer, nullable=False),
        _aspect_check("stg_annotations"),
        # covering index: the propagation models read only (protein, term) per release and class
        Index("ix_stg_annotations_partition", "release_id", "is_experimental", "term", "protein"),
    )
    Table(
        "stg_term_closure", metadata,
        Column("release_id", String(32), nullable=False),
        Column("term", String(32), nullable=False),
        Column("ancestor", String(32), nullable=False),
        Column("aspect", String(2), nullable=False),
        PrimaryKeyConstraint("release_id", "term", "ancestor", name="pk_stg_term_closure"),
        _aspect_check("stg_term_closure"),
        **_CLUSTERED,
    )
    Table(
        "stg_term_alt_ids", metadata,
        Column("release_id", String(32), nullable=False),
        Column("alt_id", String(32), nullable=False),
        Column("term", String(32), nullable=False),
        PrimaryKeyConstraint("release_id", "alt_id", name="pk_stg_term_alt_ids"),
        **_CLUSTERED,
    )
    Table(
        "stg_sequences", metadata,
        Column("release_id", String(32), nullable=False),
        Column("protein", String(64), nullable=False),
        Column("sequence_sha256", String(64), nullable=False),
        PrimaryKeyConstraint("release_id", "protein", name="pk_stg_sequences"),
        **_CLUSTERED,
    )
    # which ontology each release's closure and alt ids were built from: another release with the
    # same content hash copies those rows instead of building them again (warehouse_ontology.py)
    Table(
        "stg_release_ontologies", metadata,
        Column("release_id", String(32), nullable=False),
        Column("ontology_sha256", String(64), nullable=False),
        PrimaryKeyConstraint("release_id", name="pk_stg_release_ontologies"),
        Index("ix_stg_release_ontologies_sha256", "ontology_sha256"),
    )


def _add_annotation_tables(metadata: MetaData) -> None:
    """The cleaned experimental/non-experimental annotations and the pairs aligned across releases."""
    for name in ("experimental_annotations", "nonexperimental_annotations"):
        Table(
            name, metadata,
            Column("release_id", String(32), nullable=False),
            Column("protein", String(64), nullable=False),
            Column("term", String(32), nullable=False),
            Column("aspect", String(2), nullable=False),
            PrimaryKeyConstraint("release_id", "protein", "term", name=f"pk_{name}"),
            _aspect_check(name),
            **_CLUSTERED,
        )
    Table(
        "aligned_annotations", metadata,
        Column("old_release", String(32), nullable=False),
        Column("new_release", String(32), nullable=False),
        Column("protein", String(64), nullable=False),
        Column("term", String(32), nullable=False),
        Column("aspect", String(2), nullable=False),
        PrimaryKeyConstraint("old_release", "new_release", "protein", "term",
                             name="pk_aligned_annotations"),
        _aspect_check("aligned_annotations"),
        **_CLUSTERED,
    )


def _add_growth_tables(metadata: MetaData) -> None:
    """Annotation growth between releases and the evaluation sets drawn from it."""
    Table(
        "annotation_growth", metadata,
        Column("old_release", String(32), nullable=False),
        Column("new_release", String(32), nullable=False),
        Column("protein", String(64), nullable=False),
        Column("aspect", String(2), nullable=False),
        Column("term", String(32), nullable=False),
        Column("mode", String(2), nullable=False),
        Column("is_ground_truth", Boolean, nullable=False),
        Column("is_known", Boolean, nullable=False),
        PrimaryKeyConstraint("old_release", "new_release", "protein", "aspect", "term",
                             name="pk_annotation_growth"),
        _aspect_check("annotation_growth"),
        _mode_check("annotation_growth"),
        **_CLUSTERED,
    )
    Table(
        "evaluation_sets", metadata,
        Column("window_key", String(64), nullable=False),
        # NULL for ad-hoc sets; the CHECK is the structural VALID/TEST separation of docs/PROTOCOL.md
        Column("window_role", String(8), nullable=True),
        Column("old_release", String(32), nullable=False),
        Column("new_release", String(32), nullable=False),
        Column("protein", String(64), nullable=False),
        Column("aspect", String(2), nullable=False),
        Column("term", String(32), nullable=False),
        Column("mode", String(2), nullable=False),
        Column("is_ground_truth", Boolean, nullable=False),
        Column("is_known", Boolean, nullable=False),
        CheckConstraint("window_role in ('valid', 'test')", name="ck_evaluation_sets_window_role"),
        _aspect_check("evaluation_sets"),
        _mode_check("evaluation_sets"),
        Index("ix_evaluation_sets_partition", "window_key", "window_role"),
    )
