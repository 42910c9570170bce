"""The warehouse's ontology staging: an ontology's staging frames (its term closure and alt ids),
and the statements that copy the staged ontology of one release to another release that uses the
same ontology (the same content hash in ``stg_release_ontologies``) instead of building it again.

A release's closure is the full ontology's (about 700,000 rows for GO), and the releases of an
archive often share a GO file: three of the mouse test's four. Copying keeps every release's rows
its own (a release deleted or re-staged touches no other), at a fraction of decoding the ontology,
walking its ancestors and inserting the rows one by one.
"""
from __future__ import annotations

from typing import Any

import pandas as pd
from sqlalchemy import Insert, MetaData, Select, String, insert, literal, select

from tempo_assets.core.base.vocabulary import ASPECTS

__all__ = ["ONTOLOGY_RELATIONS", "copy_ontology_statements", "ontology_donor", "ontology_frames"]

# the staging relations one ontology fills for a release, with the key each copy is ordered by
# (the primary key after release_id: rows in index order make the inserts appends)
ONTOLOGY_RELATIONS = {"stg_term_closure": ("term", "ancestor"), "stg_term_alt_ids": ("alt_id",)}


def ontology_frames(ontology: Any) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The staging frames of an ``core.inputs.go_graph.Ontology``.

    Returns
    -------
    closure : DataFrame ``term, ancestor, aspect``, shape (n_pairs, 3)
        ``ontology.ancestors(term)`` (self included) for every live primary term with an aspect.
    alt_ids : DataFrame ``alt_id, term``, shape (n_alt, 2)
        Every alt id that ``ontology.resolve`` maps to such a term (ids that are stanzas of
        their own are left out: ``resolve`` never reads them as alt ids).
    """
    terms, ancestors, aspects = [], [], []
    live = set()
    for term_id, record in ontology.terms.items():
        aspect = ontology.aspect(term_id)
        if record.is_obsolete or aspect not in ASPECTS:
            continue
        live.add(term_id)
        for ancestor in sorted(ontology.ancestors(term_id)):
            terms.append(term_id)
            ancestors.append(ancestor)
            aspects.append(aspect)
    closure = pd.DataFrame({"term": terms, "ancestor": ancestors, "aspect": aspects}, dtype=str)
    pairs = [(alt, ontology.resolve(alt)) for alt in ontology.alt_ids if alt not in ontology.terms]
    pairs = [(alt, primary) for alt, primary in pairs if primary in live]
    alt_ids = pd.DataFrame(pairs or None, columns=["alt_id", "term"], dtype=str)
    return closure, alt_ids


def ontology_donor(metadata: MetaData, release_id: str, ontology_sha256: str) -> Select:
    """The first other release whose staged ontology has content hash ``ontology_sha256``.

    No row lock: two releases copying from each other would deadlock on PostgreSQL. The copy reads
    one snapshot there instead (``Warehouse._copy_ontology``), and its rows only while the donor
    still records the hash (:func:`copy_ontology_statements`).
    """
    recorded = metadata.tables["stg_release_ontologies"]
    return (select(recorded.c.release_id)
            .where(recorded.c.ontology_sha256 == ontology_sha256, recorded.c.release_id != release_id)
            .order_by(recorded.c.release_id).limit(1))


def copy_ontology_statements(metadata: MetaData, release_id: str, donor: str,
                             ontology_sha256: str) -> dict[str, Insert]:
    """Per relation of :data:`ONTOLOGY_RELATIONS`, the insert of ``donor``'s rows as ``release_id``'s.

    The rows are read only while ``donor`` still records ``ontology_sha256``: a donor re-staged
    meanwhile with another ontology gives no rows, never another ontology's.
    """
    recorded = metadata.tables["stg_release_ontologies"]
    statements = {}
    for name, key in ONTOLOGY_RELATIONS.items():
        table = metadata.tables[name]
        columns = [column for column in table.c.keys() if column != "release_id"]
        rows = (select(literal(release_id, String), *(table.c[c] for c in columns))
                .select_from(table.join(recorded, recorded.c.release_id == table.c.release_id))
                .where(recorded.c.release_id == donor, recorded.c.ontology_sha256 == ontology_sha256)
                .order_by(*(table.c[c] for c in key)))
        statements[name] = insert(table).from_select(["release_id", *columns], rows)
    return statements
