"""Gene Ontology (OBO 1.2) parsing into the ``Ontology`` graph of ``go_graph.py`` (term
resolution and annotation propagation live there); the OBO header's date in ``obo_header.py``.

The parser streams the file once, keeps every ``[Term]`` stanza (obsolete ones included, so
that ids can be resolved and counted) and skips ``[Typedef]`` and ``[Instance]`` stanzas.
Propagation follows ``is_a`` and ``relationship: part_of`` inside one namespace, the rule of
docs/PROTOCOL.md; parents in another namespace are dropped.

This is the project's own ontology model. The cafaeval-exact reading rules live in
``tempo_assets.core.evaluation`` (cafaeval keeps a few quirks we do not want here).
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterator, Mapping

from tempo_assets.core.base.errors import StorageWriteError
from tempo_assets.core.base.io import atomic_write, is_gzip, numbered_lines, sha256_file
from tempo_assets.core.inputs.go_graph import Ontology, Term
from tempo_assets.core.inputs.obo_header import OboFormatError

__all__ = [
    "ASPECTS",
    "NAMESPACE_TO_ASPECT",
    "check_release_ontology",
    "parse_obo",
]

from tempo_assets.core.base.vocabulary import ASPECTS, NAMESPACE_TO_ASPECT  # noqa: E402,F401
logger = logging.getLogger(__name__)


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


def parse_obo(path: str | Path, cache_dir: str | Path | None = None) -> "Ontology":
    """Parse an OBO 1.2 file (plain or gzipped) into an :class:`Ontology`.

    The whole file is read: a truncated or corrupt gzip stream raises ``DamagedFileError``.

    ``cache_dir`` (default ``$TEMPO_CACHE``; none when that is unset) keeps each parsed file under
    ``parsed_go/``, named by the sha256 of its bytes and of this parser's source: a process that parses
    the same bytes again (another release's copy of one GO file, ``tempo release`` then the ``ontology``
    asset) reads the entry instead (a full GO: ~0.4 against ~1.7 CPU s). An entry that does not read back
    whole (its own sha256 is checked) is ignored and written again; an entry is written atomically.

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
    folder = cache_dir if cache_dir is not None else os.environ.get(CACHE_VARIABLE, "").strip()
    if not folder:
        return _parse_whole(path)
    digest = sha256_file(path)
    entry = Path(folder) / CACHE_FOLDER / f"{digest}-{_parser_sha256()[:16]}.terms"
    cached = _read_cache_entry(entry, path)
    if cached is not None:
        return cached
    ontology = _parse_whole(path)
    if sha256_file(path) == digest:  # not rewritten while it was parsed
        _write_cache_entry(entry, ontology)
    return ontology


CACHE_VARIABLE = "TEMPO_CACHE"  # the cache folder the embeddings use (resources.default_cache_root)
CACHE_FOLDER = "parsed_go"
_PARSER_FILES = ("ontology.py", "go_graph.py", "obo_header.py")  # a change to any rereads every file


@lru_cache(maxsize=1)
def _parser_sha256() -> str:
    here = Path(__file__).resolve().parent
    return hashlib.sha256(b"".join((here / name).read_bytes() for name in _PARSER_FILES)).hexdigest()


def _parse_whole(path: Path) -> "Ontology":
    try:
        return _parse_obo(path)
    except OboFormatError as exc:
        last = unterminated_last_line(path)
        if last is None:
            raise
        raise OboFormatError(_TRUNCATED, path, last) from exc


_NONE = "\x1f"  # a term without a namespace (``None``)
_TEXT_LISTS = ("alt_ids", "is_a", "part_of", "replaced_by", "consider")


def _term_line(term: Term) -> str | None:
    """One term as a tab-separated line, its lists space-separated; None when a value would not read back."""
    texts = [term.id, term.name, term.namespace or "", "1" if term.is_obsolete else ""]
    lists = [getattr(term, name) for name in _TEXT_LISTS] + [[part for pair in term.other_relations for part in pair]]
    if any(c in text for text in texts for c in "\t\n\r" + _NONE) or any(
            item.split() != [item] for items in lists for item in items):
        return None
    if term.namespace is None:
        texts[2] = _NONE
    return "\t".join(texts + [" ".join(items) for items in lists])


def _write_cache_entry(entry: Path, ontology: "Ontology") -> None:
    """``entry``: the sha256 of its payload on the first line, then the payload: the header and count as JSON
    on one line, then a line per term (a JSON array of every term reads back ~3 times slower)."""
    lines = [_term_line(term) for term in ontology.terms.values()]
    if any(line is None for line in lines):
        return  # a value with a tab, a line break or a space in a list: parsed each time, as it was
    head = json.dumps({"header": ontology.header, "ignored_references": ontology.ignored_references})
    payload = "\n".join([head, *lines]).encode("utf-8")
    try:
        with atomic_write(entry, "wb") as handle:
            handle.write(hashlib.sha256(payload).hexdigest().encode("ascii") + b"\n" + payload)
    except StorageWriteError as exc:  # a cache that cannot be written is only slower
        logger.warning("parsed GO not cached: %s", exc)


def _read_cache_entry(entry: Path, path: Path) -> "Ontology | None":
    """The ontology ``entry`` holds, read as parsed from ``path``; None when absent or not whole."""
    try:
        raw = entry.read_bytes()
    except OSError:
        return None
    checksum, _, payload = raw.partition(b"\n")
    try:
        if hashlib.sha256(payload).hexdigest().encode("ascii") != checksum:
            raise ValueError("its payload does not match its sha256")
        head, *lines = payload.decode("utf-8").split("\n")
        values = json.loads(head)
        terms = {}
        for line in lines:
            term_id, name, namespace, obsolete, alt_ids, is_a, part_of, replaced_by, consider, other = line.split("\t")
            pairs = other.split()
            terms[term_id] = Term(term_id, name, None if namespace == _NONE else namespace, obsolete == "1",
                                  tuple(alt_ids.split()), tuple(is_a.split()), tuple(part_of.split()),
                                  tuple(zip(pairs[::2], pairs[1::2])), tuple(replaced_by.split()),
                                  tuple(consider.split()))
        ontology = Ontology(terms, header=values["header"], path=path)
        ontology.ignored_references = int(values["ignored_references"])
    except (ValueError, KeyError, TypeError) as exc:  # json's and UnicodeDecodeError are ValueErrors
        logger.warning("parsed GO cache entry %s ignored (%s): parsing %s again", entry, exc, path)
        return None
    return ontology


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
