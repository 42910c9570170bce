"""Tests for the OBO parser and propagation (tempo_assets.core.inputs.ontology, go_graph, obo_header)."""
from __future__ import annotations

import gzip
from datetime import date

import numpy as np
import pandas as pd
import pytest

from tempo_assets.core.base.errors import TempoInputError
from tempo_assets.core.inputs.ontology import parse_obo
from tempo_assets.core.inputs.obo_header import OboFormatError, obo_file_date
from tempo_assets.core.inputs.go_graph import UnknownTermError
from tempo_assets_tests.toolkit import GOA_ARCHIVE, shared

GO_DIR = GOA_ARCHIVE / "go"

# A small GO-like graph. BP: root B0 <- B1 <- B2, B3 part_of B1, B4 is_a B2 and B3 (diamond),
# plus B5 part_of an MF term (cross-namespace, dropped). MF: M0 <- M1. CC: C0. One obsolete
# term with an alt_id and replaced_by; one alt_id of a live term; one Typedef.
TOY_OBO = """format-version: 1.2
data-version: releases/2019-01-27
date: 24:10:2014 12:49
default-namespace: gene_ontology
ontology: go

[Term]
id: GO:0000100
name: bp root
namespace: biological_process

[Term]
id: GO:0000101
name: b1
namespace: biological_process
alt_id: GO:0000901
is_a: GO:0000100 ! bp root

[Term]
id: GO:0000102
name: b2
namespace: biological_process
is_a: GO:0000101 {source="x"} ! b1

[Term]
id: GO:0000103
name: b3
namespace: biological_process
relationship: part_of GO:0000101 ! b1
relationship: regulates GO:0000102 ! b2

[Term]
id: GO:0000104
name: b4
namespace: biological_process
is_a: GO:0000102
is_a: GO:0000103

[Term]
id: GO:0000105
name: b5
namespace: biological_process
is_a: GO:0000100
relationship: part_of GO:0000201 ! m1

[Term]
id: GO:0000200
name: mf root
namespace: molecular_function

[Term]
id: GO:0000201
name: m1
namespace: molecular_function
is_a: GO:0000200

[Term]
id: GO:0000300
name: cc root
namespace: cellular_component

[Term]
id: GO:0000999
name: obsolete thing
namespace: molecular_function
alt_id: GO:0000998
is_obsolete: true
replaced_by: GO:0000201
consider: GO:0000200

[Typedef]
id: part_of
name: part of
is_transitive: true
"""


@pytest.fixture()
def toy(tmp_path):
    path = tmp_path / "toy.obo"
    path.write_text(TOY_OBO)
    return parse_obo(path)


def test_terms_and_fields(toy):
    assert set(toy.terms) == {
        "GO:0000100", "GO:0000101", "GO:0000102", "GO:0000103", "GO:0000104", "GO:0000105",
        "GO:0000200", "GO:0000201", "GO:0000300", "GO:0000999",
    }  # the Typedef is skipped
    b3 = toy.terms["GO:0000103"]
    assert b3.part_of == ("GO:0000101",)
    assert b3.other_relations == (("regulates", "GO:0000102"),)
    assert toy.terms["GO:0000102"].is_a == ("GO:0000101",)  # qualifiers and comment stripped
    obsolete = toy.terms["GO:0000999"]
    assert obsolete.is_obsolete and obsolete.replaced_by == ("GO:0000201",)
    assert obsolete.consider == ("GO:0000200",)
    assert toy.alt_ids == {"GO:0000901": "GO:0000101", "GO:0000998": "GO:0000999"}
    assert toy.date == date(2019, 1, 27)
    assert toy.data_version == "releases/2019-01-27"


def test_resolve_and_aspect(toy):
    assert toy.resolve("GO:0000101") == "GO:0000101"
    assert toy.resolve("GO:0000901") == "GO:0000101"
    assert toy.resolve("GO:0000999") is None  # obsolete
    assert toy.resolve("GO:0000998") is None  # alt id of an obsolete term
    assert toy.resolve("GO:1234567") is None
    assert toy.aspect("GO:0000104") == "BP"
    assert toy.aspect("GO:0000201") == "MF"
    assert toy.aspect("GO:0000300") == "CC"
    assert toy.aspect("GO:0000901") == "BP"
    assert toy.aspect("GO:1234567") is None


def test_parents_ancestors_depth(toy):
    assert toy.parents("GO:0000105") == ("GO:0000100",)  # cross-namespace part_of dropped
    assert toy.parents("GO:0000103") == ("GO:0000101",)  # regulates is not followed
    assert toy.ancestors("GO:0000104") == frozenset(
        {"GO:0000104", "GO:0000102", "GO:0000103", "GO:0000101", "GO:0000100"})
    assert toy.ancestors("GO:0000100") == frozenset({"GO:0000100"})
    assert toy.depth("GO:0000100") == 0
    assert toy.depth("GO:0000104") == 3  # longest path: 104 -> 102 -> 101 -> 100
    assert toy.depth("GO:0000105") == 1
    assert toy.namespace_terms("MF") == frozenset({"GO:0000200", "GO:0000201"})
    with pytest.raises(UnknownTermError):
        toy.ancestors("GO:7777777")
    with pytest.raises(TempoInputError):
        toy.namespace_terms("XX")


def _reference_propagation(ontology, frame):
    rows = set()
    for protein, term in zip(frame["protein"], frame["term"]):
        for ancestor in ontology.ancestors(term):
            rows.add((protein, ancestor, ontology.aspect(ancestor)))
    return sorted(rows)


def test_propagate_terms_equals_loop_reference(toy):
    rng = np.random.default_rng(3)
    live = sorted(t for t in toy.terms if toy.resolve(t) == t)
    frame = pd.DataFrame({
        "protein": rng.choice(["P1", "P2", "P3", "Q9"], size=40),
        "term": rng.choice(live, size=40),
        "extra": np.arange(40),
    })
    got = toy.propagate_terms(frame)
    assert list(got.columns) == ["protein", "term", "aspect"]
    assert list(map(tuple, got.itertuples(index=False))) == _reference_propagation(toy, frame)
    # invariance to row order and duplicates
    shuffled = pd.concat([frame, frame]).sample(frac=1.0, random_state=1)
    pd.testing.assert_frame_equal(toy.propagate_terms(shuffled), got)


@pytest.mark.parametrize("chunk_rows", [1_000_000, 3])
def test_propagate_max_gives_each_ancestor_its_best_descendant_score(toy, chunk_rows):
    rng = np.random.default_rng(4)
    live = sorted(t for t in toy.terms if toy.resolve(t) == t)
    frame = pd.DataFrame({"protein": rng.choice(["P1", "P2", "P3"], size=30), "term": rng.choice(live, size=30),
                          "score": rng.random(30).round(3)})
    frame = pd.concat([frame, pd.DataFrame({"protein": ["P1"], "term": ["GO:7777777"], "score": [0.5]})])
    want: dict[tuple, float] = {}
    for protein, term, score in frame.itertuples(index=False):
        for ancestor in (toy.ancestors(term) if term in live else {term}):
            want[(protein, ancestor)] = max(want.get((protein, ancestor), 0.0), score)
    got = toy.propagate_max(frame.assign(aspect="BP"), chunk_rows=chunk_rows)
    assert list(got.columns) == ["protein", "term", "aspect", "score"]
    assert {(p, t): s for p, t, _, s in got.itertuples(index=False)} == want  # the unknown term kept as it is
    live_rows = got[got["term"] != "GO:7777777"]
    assert live_rows["aspect"].tolist() == [toy.aspect(t) for t in live_rows["term"]]
    # already consistent scores are a fixed point
    pd.testing.assert_frame_equal(toy.propagate_max(got, chunk_rows=chunk_rows), got)


def test_propagate_terms_rejects_non_primary(toy):
    frame = pd.DataFrame({"protein": ["P1"], "term": ["GO:0000901"]})
    with pytest.raises(UnknownTermError, match="GO:0000901"):
        toy.propagate_terms(frame)
    empty = toy.propagate_terms(pd.DataFrame({"protein": [], "term": []}))
    assert len(empty) == 0 and list(empty.columns) == ["protein", "term", "aspect"]


@pytest.mark.parametrize(
    "header, expected",
    [
        ("data-version: releases/2019-01-27\n", date(2019, 1, 27)),
        ("data-version: releases/2014-01\n", date(2014, 1, 31)),
        ("data-version: releases/2016-02\n", date(2016, 2, 29)),
        ("date: 27:10:2014 12:00\n", date(2014, 10, 27)),
        ("data-version: go-plus\ndate: 01:02:2015 12:00\n", date(2015, 2, 1)),
        ("format-version: 1.2\n", None),
    ],
)
def test_obo_file_date(tmp_path, header, expected):
    path = tmp_path / "x.obo"
    path.write_text(header + "\n[Term]\nid: GO:1\nname: a\nnamespace: biological_process\n"
                    "data-version: releases/2030-01-01\n")
    assert obo_file_date(path) == expected


def test_gzip_input(tmp_path):
    path = tmp_path / "toy.obo.gz"
    with gzip.open(path, "wt") as handle:
        handle.write(TOY_OBO)
    assert len(parse_obo(path).terms) == 10


@pytest.mark.parametrize(
    "text, line, message",
    [
        ("", None, "empty"),
        ("format-version: 1.2\n\n[Term]\nname: x\nnamespace: biological_process\n", 3, "without an id"),
        ("[Term]\nid: GO:1\nthis line has no tag\n", 3, "without ': '"),
        ("[Term]\nid: GO:1\nis_a: GO:2 ! missing\n", 3, "undefined term GO:2"),
        ("[Term]\nid: GO:1\nis_a: \n", 3, "is_a without a target"),
        ("[Term]\nid: GO:1\nrelationship: part_of GO:3\n", 3, "undefined term GO:3"),
        ("[Term]\nid: GO:1\n\n[Term]\nid: GO:1\n", 4, "duplicate"),
        ("format-version: 1.2\n", None, "no \\[Term\\]"),
    ],
)
def test_malformed_obo(tmp_path, text, line, message):
    path = tmp_path / "bad.obo"
    path.write_text(text)
    with pytest.raises(OboFormatError, match=message) as info:
        parse_obo(path)
    assert str(path) in str(info.value)
    assert info.value.line == line


def test_pseudo_root_is_ignored(tmp_path):
    path = tmp_path / "godb.obo"
    path.write_text("[Term]\nid: GO:0003674\nname: molecular_function\n"
                    "namespace: molecular_function\nis_a: all ! \n")
    ontology = parse_obo(path)
    assert ontology.ignored_references == 1
    assert ontology.parents("GO:0003674") == ()


def test_cycle_is_reported(tmp_path):
    path = tmp_path / "cycle.obo"
    path.write_text("[Term]\nid: GO:1\nnamespace: biological_process\nis_a: GO:2\n\n"
                    "[Term]\nid: GO:2\nnamespace: biological_process\nis_a: GO:1\n")
    with pytest.raises(OboFormatError, match="cycle"):
        parse_obo(path).ancestors("GO:1")


def _chain(n: int, loop: tuple[int, int] | None = None):
    """GO:0..GO:{n-1} in one namespace, each ``is_a`` the one before; ``loop``: one more edge (child, parent)."""
    from tempo_assets.core.inputs.go_graph import Ontology, Term

    parents = {i: [i - 1] if i else [] for i in range(n)}
    if loop is not None:
        parents[loop[0]].append(loop[1])
    terms = {f"GO:{i}": Term(id=f"GO:{i}", name="", namespace="biological_process", is_obsolete=False, alt_ids=(),
                             is_a=tuple(f"GO:{p}" for p in parents[i]), part_of=(), other_relations=(),
                             replaced_by=(), consider=()) for i in range(n)}
    return Ontology(terms)


def test_propagation_reaches_the_root_of_a_deep_chain_and_refuses_a_cycle():
    """The closure propagation reads: a 40-term chain (depth 39), and an ontology built without
    ``parse_obo`` (which refuses cycles) with a cycle or a term its own parent."""
    chain = _chain(40)
    got = chain.propagate_terms(pd.DataFrame({"protein": ["P1"], "term": ["GO:39"]}))
    assert sorted(got["term"]) == sorted(f"GO:{i}" for i in range(40))
    assert chain.propagate_terms(pd.DataFrame({"protein": ["P1"], "term": ["GO:0"]}))["term"].tolist() == ["GO:0"]
    for loop in ((5, 30), (7, 7)):
        with pytest.raises(OboFormatError, match="cycle"):
            _chain(40, loop).propagate_terms(pd.DataFrame({"protein": ["P1"], "term": ["GO:2"]}))


@pytest.mark.slow
@pytest.mark.parametrize(
    "name, day, has_alt_ids",
    [
        ("go_2014-01-31.obo.gz", date(2014, 1, 31), False),
        ("go_2014-10-27.obo.gz", date(2014, 10, 27), True),
        ("go_2019-01-27.obo.gz", date(2019, 1, 27), True),
        ("go_2022-07-01.obo.gz", date(2022, 7, 1), True),
    ],
)
def test_real_obos_parse(name, day, has_alt_ids):
    path = shared(GO_DIR / name)
    ontology = parse_obo(path)
    assert ontology.date == day == obo_file_date(path)
    assert bool(ontology.alt_ids) == has_alt_ids
    roots = {"BP": "GO:0008150", "MF": "GO:0003674", "CC": "GO:0005575"}
    for aspect, root in roots.items():
        assert ontology.aspect(root) == aspect
        assert ontology.parents(root) == ()
        assert len(ontology.namespace_terms(aspect)) > 3000
    # every live term reaches its namespace root
    live = [t.id for t in ontology.terms.values() if not t.is_obsolete]
    for term in live[::97]:
        assert roots[ontology.aspect(term)] in ontology.ancestors(term)
