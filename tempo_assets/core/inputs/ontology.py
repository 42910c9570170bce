"""Gene Ontology (OBO 1.2) parsing, term resolution and annotation propagation.

The parser streams the file once, keeps every ``[Term]`` stanza (obsolete ones included, so
that ids can be resolved and counted) and skips ``[Typedef]`` and ``[Instance]`` stanzas.
Propagation follows ``is_a`` and ``relationship: part_of`` inside one namespace, the rule of
docs/PROTOCOL.md; parents in another namespace are dropped.

This is the project's own ontology model. The cafaeval-exact reading rules live in
``tempo_assets.core.evaluation`` (cafaeval keeps a few quirks we do not want here).
"""
from __future__ import annotations

import calendar
import logging
import re
from dataclasses import dataclass
from datetime import date
from functools import cached_property
from pathlib import Path
from typing import Any, Iterator, Mapping

import numpy as np
import pandas as pd

from tempo_assets.core.base.errors import TempoInputError
from tempo_assets.core.base.io import is_gzip, numbered_lines

__all__ = [
    "ASPECTS",
    "NAMESPACE_TO_ASPECT",
    "OboFormatError",
    "Ontology",
    "Term",
    "UnknownTermError",
    "check_release_ontology",
    "obo_file_date",
    "parse_obo",
]

from tempo_assets.core.base.vocabulary import ASPECT_TO_NAMESPACE, ASPECTS, NAMESPACE_TO_ASPECT  # noqa: E402,F401
logger = logging.getLogger(__name__)

# tags whose value is a reference: keep the first token (drop trailing "{...}" and "! comment")
_DATA_VERSION = re.compile(r"(\d{4})-(\d{2})(?:-(\d{2}))?")
_HEADER_DATE = re.compile(r"^(\d{1,2}):(\d{1,2}):(\d{4})")


class OboFormatError(TempoInputError):
    """The OBO file is malformed; the message names the file and the line."""


class UnknownTermError(TempoInputError):
    """A GO id is not a term of this ontology (or not a primary, non-obsolete one)."""


@dataclass(frozen=True)
class Term:
    """One ``[Term]`` stanza.

    ``namespace`` is the stanza's ``namespace`` (or the header's ``default-namespace``);
    ``is_a``/``part_of`` hold every declared parent, before the same-namespace filter that
    :meth:`Ontology.parents` applies.
    """

    id: str
    name: str
    namespace: str | None
    is_obsolete: bool
    alt_ids: tuple[str, ...]
    is_a: tuple[str, ...]
    part_of: tuple[str, ...]
    other_relations: tuple[tuple[str, str], ...]
    replaced_by: tuple[str, ...]
    consider: tuple[str, ...]

    @property
    def aspect(self) -> str | None:
        return NAMESPACE_TO_ASPECT.get(self.namespace or "")


def _date_from_data_version(value: str) -> date | None:
    match = _DATA_VERSION.search(value)
    if not match:
        return None
    year, month = int(match.group(1)), int(match.group(2))
    if not 1 <= month <= 12:
        return None
    if match.group(3) is None:
        # a month-only release ("releases/2014-01") is dated to that month's last day
        return date(year, month, calendar.monthrange(year, month)[1])
    try:
        return date(year, month, int(match.group(3)))
    except ValueError:
        return None


def _date_from_header_date(value: str) -> date | None:
    match = _HEADER_DATE.match(value.strip())
    if not match:
        return None
    day, month, year = (int(part) for part in match.groups())
    try:
        return date(year, month, day)
    except ValueError:
        return None


def _read_header(path: str | Path) -> dict[str, str]:
    """First value of each tag before the first stanza."""
    header: dict[str, str] = {}
    for _number, raw in numbered_lines(path):
        line = raw.strip()
        if line.startswith("["):
            break
        if not line or line.startswith("!"):
            continue
        tag, sep, value = line.partition(": ")
        if sep:
            header.setdefault(tag, value.strip())
    return header


def _header_date(header: dict[str, str]) -> date | None:
    found = None
    if "data-version" in header:
        found = _date_from_data_version(header["data-version"])
    if found is None and "date" in header:
        found = _date_from_header_date(header["date"])
    return found


def obo_file_date(path: str | Path) -> date | None:
    """The release date an OBO file declares in its header (the stanzas are not read).

    ``data-version: releases/2019-01-27`` -> 2019-01-27; ``data-version: releases/2014-01`` ->
    the last day of that month; otherwise ``date: 27:10:2014 12:00`` -> 2014-10-27; else None.
    """
    return _header_date(_read_header(path))


def _strip_value(value: str) -> str:
    """Drop a trailing ``! comment`` and ``{qualifiers}`` from a reference value."""
    value = value.split(" !", 1)[0]
    value = value.split("{", 1)[0]
    return value.strip()


def _iter_stanzas(path: str | Path) -> Iterator[tuple[str, int, list[tuple[str, str, int]], dict]]:
    """Yield ``(stanza_type, start_line, [(tag, value, line)], header)``; header first as type ''."""
    header: dict[str, str] = {}
    kind = ""
    start = 0
    tags: list[tuple[str, str, int]] = []
    seen_any = False
    for lineno, raw in numbered_lines(path):
        line = raw.strip()
        if not line or line.startswith("!"):
            continue
        seen_any = True
        if line.startswith("[") and line.endswith("]"):
            if kind == "":
                yield "", 0, [], header
            else:
                yield kind, start, tags, header
            kind, start, tags = line[1:-1], lineno, []
            continue
        tag, sep, value = line.partition(": ")
        if not sep:
            # tolerate an empty value written "tag:" but not a line with no tag at all
            if line.endswith(":") and " " not in line:
                tag, value = line[:-1], ""
            else:
                raise OboFormatError(f"tag line without ': ': {line[:80]!r}", path, lineno)
        if kind == "":
            header.setdefault(tag, value.strip())
        else:
            tags.append((tag, value, lineno))
    if not seen_any:
        raise OboFormatError("empty OBO file", path)
    if kind == "":
        yield "", 0, [], header
    else:
        yield kind, start, tags, header


def parse_obo(path: str | Path) -> "Ontology":
    """Parse an OBO 1.2 file (plain or gzipped) into an :class:`Ontology`.

    The whole file is read: a truncated or corrupt gzip stream raises ``DamagedFileError``.

    Raises
    ------
    OboFormatError
        Empty file, a stanza without ``id``, a tag line without ``": "``, a duplicate term id,
        an empty ``is_a``, an ``is_a``/``part_of`` to an id the file does not define, a cycle
        of ``is_a``/``part_of`` parents inside a namespace (the message names the terms and the
        line of one edge), or no ``[Term]`` at all; when the file also ends mid-line, the
        message says it looks truncated instead. A reference to a non-id pseudo-root (GO.db's
        ``is_a: all``, no ``:`` in it) is ignored and counted in ``Ontology.ignored_references``.
    """
    path = Path(path)
    try:
        return _parse_obo(path)
    except OboFormatError as exc:
        last = unterminated_last_line(path)
        if last is None:
            raise
        raise OboFormatError(_TRUNCATED, path, last) from exc


_TRUNCATED = "the file ends mid-line, without a newline: it looks truncated; download or copy it again"


def unterminated_last_line(path: str | Path) -> int | None:
    """The number of a plain text file's last line when it has no newline (a cut file), else None.

    A gzip file is not looked at: a cut gzip stream fails its own integrity check.
    """
    path = Path(path)
    if is_gzip(path) or path.stat().st_size == 0:
        return None
    with open(path, "rb") as handle:
        handle.seek(-1, 2)
        if handle.read(1) == b"\n":
            return None
        handle.seek(0)
        return sum(block.count(b"\n") for block in iter(lambda: handle.read(1 << 20), b"")) + 1


def _parse_obo(path: Path) -> "Ontology":
    terms: dict[str, Term] = {}
    # (relation, child, parent, line) references to check once every stanza is known
    references: list[tuple[str, str, str, int]] = []
    header: dict[str, str] = {}
    for kind, start, tags, header in _iter_stanzas(path):
        if kind != "Term":
            continue
        term, edges = _term_of_stanza(path, start, tags, header.get("default-namespace"))
        if term.id in terms:
            raise OboFormatError(f"duplicate term id {term.id}", path, start)
        references += [(rel, term.id, target, lineno) for rel, target, lineno in edges]
        terms[term.id] = term
    if not terms:
        raise OboFormatError("no [Term] stanza", path)
    ontology = Ontology(terms, header=header, path=path)
    ontology.ignored_references = _count_pseudo_root_references(path, terms, references)
    _refuse_cycles(ontology, {(child, target): lineno for _, child, target, lineno in references})
    return ontology


def _term_of_stanza(path: Path, start: int, tags, default_namespace: str | None
                    ) -> tuple[Term, list[tuple[str, str, int]]]:
    """The term of one ``[Term]`` stanza and its (relation, parent, line) is_a/part_of edges."""
    fields: dict[str, Any] = {"id": None, "name": "", "namespace": None, "is_obsolete": False}
    lists: dict[str, list] = {key: [] for key in ("alt_id", "is_a", "part_of", "other", "replaced_by", "consider")}
    edges: list[tuple[str, str, int]] = []
    for tag, value, lineno in tags:
        if tag == "id":
            if fields["id"] is not None:
                raise OboFormatError("stanza with two id tags", path, lineno)
            fields["id"] = _strip_value(value)
            if not fields["id"]:
                raise OboFormatError("empty id", path, lineno)
        elif tag in ("name", "namespace"):
            fields[tag] = value.strip()
        elif tag == "is_obsolete":
            fields["is_obsolete"] = value.strip().lower() == "true"
        elif tag in ("alt_id", "replaced_by", "consider"):
            lists[tag].append(_strip_value(value))
        elif tag in ("is_a", "relationship"):
            _add_edge(path, tag, value, lineno, lists, edges)
    if fields["id"] is None:
        raise OboFormatError("[Term] stanza without an id", path, start)
    term = Term(
        id=fields["id"],
        name=fields["name"],
        namespace=fields["namespace"] if fields["namespace"] is not None else default_namespace,
        is_obsolete=fields["is_obsolete"],
        alt_ids=tuple(lists["alt_id"]),
        is_a=tuple(lists["is_a"]),
        part_of=tuple(lists["part_of"]),
        other_relations=tuple(lists["other"]),
        replaced_by=tuple(lists["replaced_by"]),
        consider=tuple(lists["consider"]),
    )
    return term, edges


def _add_edge(path: Path, tag: str, value: str, lineno: int, lists: dict[str, list],
              edges: list[tuple[str, str, int]]) -> None:
    """Record an ``is_a`` or ``relationship`` tag: is_a/part_of are edges, other relations kept aside."""
    if tag == "is_a":
        target = _strip_value(value)
        if not target:
            raise OboFormatError("is_a without a target", path, lineno)
        lists["is_a"].append(target)
        edges.append(("is_a", target, lineno))
        return
    parts = _strip_value(value).split()
    if len(parts) < 2:
        raise OboFormatError(f"relationship needs 'type target': {value!r}", path, lineno)
    rel, target = parts[0], parts[1]
    if rel == "part_of":
        lists["part_of"].append(target)
        edges.append(("part_of", target, lineno))
    else:
        lists["other"].append((rel, target))


def _count_pseudo_root_references(path: Path, terms: Mapping[str, Term],
                                  references: list[tuple[str, str, str, int]]) -> int:
    """Refuse an edge to an undefined term; count (and log) those to a non-term pseudo-root."""
    pseudo: list[tuple[str, str, int]] = []
    for rel, _child, target, lineno in references:
        if target in terms:
            continue
        if ":" not in target:
            # GO.db exports its pseudo-root as "is_a: all": not a term, not an error
            pseudo.append((rel, target, lineno))
            continue
        raise OboFormatError(f"{rel} to undefined term {target}", path, lineno)
    if pseudo:
        logger.info("%s: %d is_a/part_of references to non-term pseudo-roots (e.g. %r) ignored",
                    path, len(pseudo), pseudo[0][1])
    return len(pseudo)


def _refuse_cycles(ontology: "Ontology", edge_lines: dict[tuple[str, str], int]) -> None:
    """Raise :class:`OboFormatError` naming a cycle of :meth:`Ontology.parents` edges (the graph
    propagation walks), with the line of its first edge.

    Kahn's algorithm from the roots: a live term never reached sits on a cycle or below one.
    """
    parents = {t: ontology.parents(t) for t, term in ontology.terms.items() if not term.is_obsolete}
    children: dict[str, list[str]] = {}
    pending = {}
    for term, ups in parents.items():
        pending[term] = len(ups)
        for parent in ups:
            children.setdefault(parent, []).append(term)
    frontier = [term for term, count in pending.items() if count == 0]
    while frontier:
        term = frontier.pop()
        for child in children.get(term, ()):
            pending[child] -= 1
            if pending[child] == 0:
                frontier.append(child)
    stuck = {term for term, count in pending.items() if count > 0}
    if not stuck:
        return
    # walk up through unreached parents from any unreached term until a term repeats: a cycle
    path_order: list[str] = []
    seen: dict[str, int] = {}
    node = min(stuck)
    while node not in seen:
        seen[node] = len(path_order)
        path_order.append(node)
        node = next(parent for parent in parents[node] if parent in stuck)
    cycle = path_order[seen[node]:] + [node]
    raise OboFormatError(
        f"is_a/part_of cycle {' -> '.join(cycle)}: a term cannot be its own ancestor; fix or replace the file",
        ontology.path, edge_lines.get((cycle[0], cycle[1])),
    )


def check_release_ontology(path: str | Path) -> "Ontology":
    """Parse an OBO file as a release admits it, and return the ontology.

    On top of :func:`parse_obo` (the whole file, gzip integrity, undefined references, cycles):
    the last line must end with a newline (a cut file is refused, not half-read) and each GO
    namespace must hang under exactly one root term, a live term without parents in it, as every
    GO release does; none means the namespace is missing, several that the file is a subset
    or lost its root's stanza.

    Raises
    ------
    OboFormatError
        Naming the file and the line (a cut file) or the namespace and its root terms.
    """
    path = Path(path)
    ontology = parse_obo(path)
    last = unterminated_last_line(path)
    if last is not None:
        raise OboFormatError(_TRUNCATED, path, last)
    for namespace in NAMESPACE_TO_ASPECT:
        roots = sorted(t.id for t in ontology.terms.values()
                       if t.namespace == namespace and not t.is_obsolete and not ontology.parents(t.id))
        if len(roots) == 1:
            continue
        if not roots:
            problem = f"no term of namespace {namespace}: its root is missing"
        else:
            shown = ", ".join(roots[:5]) + (", ..." if len(roots) > 5 else "")
            problem = (f"namespace {namespace} has {len(roots)} root terms ({shown}), terms without "
                       "parents in it; GO has one: the file is a subset or lost its root's stanza")
        raise OboFormatError(f"{problem}; a release needs a complete GO ontology (go.obo or go-basic.obo)",
                             path)
    return ontology


class Ontology:
    """A parsed GO release.

    Attributes
    ----------
    terms : dict[str, Term]
        Every ``[Term]`` stanza by id, obsolete terms included.
    alt_ids : dict[str, str]
        ``alt_id -> primary id``. When two stanzas claim one alt_id, a non-obsolete primary wins,
        then the first in file order.
    date : datetime.date or None
        From the header (see :func:`obo_file_date`).
    data_version : str or None
    path : pathlib.Path or None
    """

    def __init__(self, terms: dict[str, Term], header: dict[str, str] | None = None,
                 path: str | Path | None = None):
        self.terms = terms
        self.header = dict(header or {})
        self.path = Path(path) if path is not None else None
        self.data_version = self.header.get("data-version")
        self.date = _header_date(self.header)
        alt_ids: dict[str, str] = {}
        for term in terms.values():
            for alt in term.alt_ids:
                if alt in terms:
                    continue  # a primary id is never shadowed by an alt_id
                previous = alt_ids.get(alt)
                if previous is None or (terms[previous].is_obsolete and not term.is_obsolete):
                    alt_ids[alt] = term.id
        self.alt_ids = alt_ids
        self.ignored_references = 0  # references to non-term pseudo-roots ("is_a: all")
        self._ancestors: dict[str, frozenset[str]] = {}
        self._depth: dict[str, int] = {}

    def __repr__(self) -> str:
        return f"Ontology({len(self.terms)} terms, data_version={self.data_version!r}, path={str(self.path)!r})"

    def __contains__(self, term: str) -> bool:
        return term in self.terms

    def resolve(self, term: str) -> str | None:
        """Primary id of ``term`` (mapping an alt_id), or None when obsolete or unknown."""
        found = self.terms.get(term)
        if found is None:
            primary = self.alt_ids.get(term)
            if primary is None:
                return None
            found = self.terms[primary]
        if found.is_obsolete:
            return None
        return found.id

    def _term(self, term: str) -> Term:
        try:
            return self.terms[term]
        except KeyError:
            raise UnknownTermError(f"{term} is not a term id of this ontology", self.path) from None

    def aspect(self, term: str) -> str | None:
        """``"BP"``, ``"MF"`` or ``"CC"`` for a term id (alt ids resolved); None if none."""
        found = self.terms.get(term)
        if found is None:
            primary = self.alt_ids.get(term)
            if primary is None:
                return None
            found = self.terms[primary]
        return found.aspect

    def parents(self, term: str) -> tuple[str, ...]:
        """Direct ``is_a`` and ``part_of`` parents in the term's own namespace (file order)."""
        found = self._term(term)
        seen: dict[str, None] = {}
        for parent in found.is_a + found.part_of:
            other = self.terms.get(parent)
            if other is not None and other.namespace == found.namespace and not other.is_obsolete:
                seen.setdefault(parent, None)
        return tuple(seen)

    def ancestors(self, term: str) -> frozenset[str]:
        """``term`` and every term reachable through :meth:`parents` (cached)."""
        cached = self._ancestors.get(term)
        if cached is not None:
            return cached
        self._term(term)
        # iterative post-order walk: no recursion limit, and a cycle is reported, not looped
        stack: list[tuple[str, bool]] = [(term, False)]
        on_path: set[str] = set()
        while stack:
            node, expanded = stack.pop()
            if node in self._ancestors:
                continue
            parents = self.parents(node)
            if expanded:
                on_path.discard(node)
                closure = {node}
                for parent in parents:
                    closure |= self._ancestors[parent]
                self._ancestors[node] = frozenset(closure)
                continue
            if node in on_path:
                raise OboFormatError(f"is_a/part_of cycle through {node}", self.path)
            on_path.add(node)
            stack.append((node, True))
            for parent in parents:
                if parent not in self._ancestors:
                    if parent in on_path:
                        raise OboFormatError(f"is_a/part_of cycle through {parent}", self.path)
                    stack.append((parent, False))
        return self._ancestors[term]

    def depth(self, term: str) -> int:
        """Length of the LONGEST :meth:`parents` path from ``term`` to a root (a root is 0)."""
        cached = self._depth.get(term)
        if cached is not None:
            return cached
        self.ancestors(term)  # raises on unknown ids and on cycles
        stack = [term]
        while stack:
            node = stack[-1]
            pending = [p for p in self.parents(node) if p not in self._depth]
            if pending:
                stack.extend(pending)
                continue
            stack.pop()
            if node not in self._depth:
                parents = self.parents(node)
                self._depth[node] = 1 + max((self._depth[p] for p in parents), default=-1)
        return self._depth[term]

    def namespace_terms(self, aspect: str) -> frozenset[str]:
        """Primary, non-obsolete term ids of one aspect (``"BP"``, ``"MF"``, ``"CC"``)."""
        if aspect not in ASPECT_TO_NAMESPACE:
            raise TempoInputError(f"unknown aspect {aspect!r} (expected one of {ASPECTS})")
        return frozenset(t.id for t in self.terms.values()
                         if not t.is_obsolete and t.aspect == aspect)

    @cached_property
    def _closure(self) -> tuple[pd.Index, np.ndarray, np.ndarray, np.ndarray]:
        """Ancestor closure in CSR form over sorted live terms.

        Returns
        -------
        index : pd.Index, shape (n_terms,)
            Sorted ids of the non-obsolete terms that have an aspect.
        indptr : ndarray of int64, shape (n_terms + 1,)
        indices : ndarray of int32, shape (nnz,)
            ``indices[indptr[i]:indptr[i+1]]`` are the positions of term ``i``'s ancestors.
        aspects : ndarray of object, shape (n_terms,)
        """
        ids = sorted(t.id for t in self.terms.values() if not t.is_obsolete and t.aspect)
        index = pd.Index(ids)
        position = {term: i for i, term in enumerate(ids)}
        lengths = np.zeros(len(ids) + 1, dtype=np.int64)
        chunks = []
        for i, term in enumerate(ids):
            anc = sorted(position[a] for a in self.ancestors(term))
            lengths[i + 1] = len(anc)
            chunks.append(np.asarray(anc, dtype=np.int32))
        indptr = np.cumsum(lengths)
        indices = np.concatenate(chunks) if chunks else np.zeros(0, dtype=np.int32)
        aspects = np.asarray([self.terms[t].aspect for t in ids], dtype=object)
        return index, indptr, indices, aspects

    def propagate_terms(self, frame: pd.DataFrame) -> pd.DataFrame:
        """Add every ancestor of each ``(protein, term)`` row; deduplicated.

        Parameters
        ----------
        frame : DataFrame with columns ``protein``, ``term`` (n_rows,)
            Terms must be primary, non-obsolete ids of this ontology (map alt ids first with
            :meth:`resolve`); other columns are ignored.

        Returns
        -------
        DataFrame with columns ``protein, term, aspect`` (n_propagated,), sorted by protein then
        term, one row per distinct pair.

        Raises
        ------
        UnknownTermError
            A term that is not a live primary id of this ontology (the first few are named).
        """
        for column in ("protein", "term"):
            if column not in frame.columns:
                raise TempoInputError(f"propagate_terms needs a {column!r} column")
        index, _, _, aspects = self._closure
        if len(frame) == 0:
            return pd.DataFrame({"protein": pd.Series([], dtype=object),
                                 "term": pd.Series([], dtype=object),
                                 "aspect": pd.Series([], dtype=object)})
        term_pos = index.get_indexer(frame["term"].to_numpy())
        bad = term_pos < 0
        if bad.any():
            offenders = pd.unique(frame["term"].to_numpy()[bad])
            raise UnknownTermError(
                f"{len(offenders)} term id(s) are not live primary ids of this ontology "
                f"(e.g. {', '.join(map(str, offenders[:5]))}); map them with Ontology.resolve first",
                self.path,
            )
        protein_codes, proteins = pd.factorize(frame["protein"].to_numpy(), sort=True)
        n_terms = np.int64(len(index))
        seeds = _sorted_unique(protein_codes.astype(np.int64) * n_terms + term_pos)
        seed_protein = seeds // n_terms
        counts, ancestor = self._ancestor_rows(seeds % n_terms)
        keys = _sorted_unique(np.repeat(seed_protein, counts) * n_terms + ancestor)
        out_protein = keys // n_terms
        out_term = keys % n_terms
        return pd.DataFrame({
            "protein": np.asarray(proteins, dtype=object)[out_protein],
            "term": index.to_numpy(dtype=object)[out_term],
            "aspect": aspects[out_term],
        })

    def _ancestor_rows(self, term_pos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per term position, how many ancestors it has, and all their positions, term after term."""
        _, indptr, indices, _ = self._closure
        counts = indptr[term_pos + 1] - indptr[term_pos]
        starts = np.repeat(indptr[term_pos], counts)
        offsets = np.arange(int(counts.sum()), dtype=np.int64) - np.repeat(np.cumsum(counts) - counts, counts)
        return counts, indices[starts + offsets].astype(np.int64)

    def propagate_max(self, frame: pd.DataFrame, chunk_rows: int = 1_000_000) -> pd.DataFrame:
        """Scores made consistent with the ontology: each ancestor of a scored term gets at least
        its score (the ``max`` propagation cafaeval applies to predictions), one row per distinct pair.

        Parameters
        ----------
        frame : DataFrame ``protein, term, score[, ...]``; a term that is not a live primary id of
            this ontology keeps its own row and passes nothing up. Other columns are dropped but
            ``aspect``, which each term's (and so each ancestor's) namespace gives.
        chunk_rows : rows expanded at a time (whole proteins per chunk), to bound memory.

        Returns
        -------
        DataFrame ``protein, term[, aspect], score`` sorted by protein, then term.
        """
        for column in ("protein", "term", "score"):
            if column not in frame.columns:
                raise TempoInputError(f"propagate_max needs a {column!r} column")
        index, indptr, _, aspects = self._closure
        columns = ["protein", "term"] + (["aspect"] if "aspect" in frame.columns else []) + ["score"]
        if len(frame) == 0:
            return frame[columns].reset_index(drop=True)
        term_pos = index.get_indexer(frame["term"].to_numpy())
        known = term_pos >= 0
        unknown = frame.loc[~known, columns]
        frame, term_pos = frame[known], term_pos[known]
        protein_codes, proteins = pd.factorize(frame["protein"].to_numpy(), sort=True)
        protein_codes = protein_codes.astype(np.int64)
        scores = frame["score"].to_numpy(dtype=np.float64)
        order = np.argsort(protein_codes, kind="stable")
        protein_codes, term_pos, scores = protein_codes[order], term_pos[order], scores[order]
        counts = indptr[term_pos + 1] - indptr[term_pos]
        n_terms = np.int64(len(index))
        parts = []
        start = 0
        ends = np.cumsum(counts)
        while start < len(protein_codes):
            base = ends[start - 1] if start else 0
            stop = int(np.searchsorted(ends, base + chunk_rows, side="right"))
            stop = max(stop, start + 1)
            if stop < len(protein_codes):  # whole proteins: extend to the last row of this protein
                stop = int(np.searchsorted(protein_codes, protein_codes[stop - 1], side="right"))
            parts.append(self._max_over_ancestors(protein_codes[start:stop], term_pos[start:stop],
                                                  scores[start:stop], n_terms))
            start = stop
        keys = np.concatenate([k for k, _ in parts])
        values = np.concatenate([v for _, v in parts])
        out = pd.DataFrame({"protein": np.asarray(proteins, dtype=object)[keys // n_terms],
                            "term": index.to_numpy(dtype=object)[keys % n_terms]})
        if "aspect" in columns:
            out["aspect"] = aspects[keys % n_terms]
        out["score"] = values
        if len(unknown):
            out = pd.concat([out, unknown], ignore_index=True).sort_values(["protein", "term"], kind="mergesort")
        return out[columns].reset_index(drop=True)

    def _max_over_ancestors(self, protein_codes: np.ndarray, term_pos: np.ndarray, scores: np.ndarray,
                            n_terms: np.int64) -> tuple[np.ndarray, np.ndarray]:
        """``protein * n_terms + ancestor`` keys, distinct and sorted, each with the highest score
        any of the protein's terms below it (or itself) has."""
        c, ancestor = self._ancestor_rows(term_pos)
        keys = np.repeat(protein_codes, c) * n_terms + ancestor
        values = np.repeat(scores, c)
        by = np.lexsort((-values, keys))  # per key, the highest score first
        keys, values = keys[by], values[by]
        first = np.ones(len(keys), dtype=bool)
        first[1:] = keys[1:] != keys[:-1]
        return keys[first], values[first]


def _sorted_unique(values: np.ndarray) -> np.ndarray:
    """Sorted distinct values of an int64 array (a sort beats numpy's hash path here)."""
    values = np.sort(values, kind="stable")
    if values.size == 0:
        return values
    keep = np.empty(values.size, dtype=bool)
    keep[0] = True
    np.not_equal(values[1:], values[:-1], out=keep[1:])
    return values[keep]
