"""The artefact store: open formats only, typed values round-trip, a crash between writes keeps the old value."""
import json

import numpy as np
import pandas as pd
import pytest

from tempo_assets.core.storage import artefacts
from tempo_assets.core.storage.artefact_types import Embeddings, FrozenRecipe, KnnCorpus, ReleaseAnnotations
from tempo_assets.core.storage.artefacts import ArtefactStore, LocalLocation
from tempo_assets.core.base.errors import CutoffViolation, TempoInputError
from tempo_assets.core.labels.ia import ia_counts
from tempo_assets.core.inputs.ontology import parse_obo
from tempo_assets.core.recipe.selection import CandidateSource
from tempo_assets_tests.assets.tiny_archive import write_obo
from tempo_assets_tests.toolkit import GOA_ARCHIVE, shared

BINDING = {"cutoff": "2020-01-01", "max_source_date": "2019-12-31", "sources": []}
PICKLE_MAGIC = tuple(bytes([0x80, protocol]) for protocol in range(2, 6))


def frame(n: int = 3, offset: int = 0) -> pd.DataFrame:
    return pd.DataFrame({"protein": [f"P{i + offset}" for i in range(n)], "term": ["GO:0000001"] * n,
                         "aspect": ["BP"] * n})


def stored_files(root):
    return [p for p in root.rglob("*") if p.is_file()]


def test_a_crash_between_value_and_sidecar_leaves_the_previous_artefact(tmp_path, monkeypatch):
    store = ArtefactStore(tmp_path)
    first = store.write("a", "k", frame(3), BINDING)
    original = LocalLocation.write_bytes

    def crash_on_sidecar(self, key, data):
        if key.endswith(artefacts.SIDECAR):
            raise KeyboardInterrupt("killed between the value and the sidecar")
        return original(self, key, data)

    monkeypatch.setattr(LocalLocation, "write_bytes", crash_on_sidecar)
    with pytest.raises(KeyboardInterrupt):
        store.write("a", "k", frame(5, offset=10), BINDING)
    monkeypatch.undo()
    # the new value was written (a second version folder exists) but nothing points at it
    assert len(list((tmp_path / "a" / "k" / artefacts.VERSIONS).iterdir())) == 2
    again = store.open("a", "k")
    assert again.meta["sha256"] == first["sha256"]
    pd.testing.assert_frame_equal(again.value, frame(3))
    # the next successful write commits and collects the orphan
    store.write("a", "k", frame(4), BINDING)
    store.write("a", "k", frame(6), BINDING)
    assert len(list((tmp_path / "a" / "k" / artefacts.VERSIONS).iterdir())) == 2
    pd.testing.assert_frame_equal(store.open("a", "k").value, frame(6))


def test_typed_values_round_trip_without_pickle(tmp_path):
    write_obo(tmp_path / "go.obo", "2020-01-01")
    onto = parse_obo(tmp_path / "go.obo")
    annotations = frame(3).assign(term=["GO:0000002", "GO:0000003", "GO:0000011"])
    annotations["aspect"] = [onto.aspect(t) for t in annotations["term"]]
    counts = ia_counts(annotations, onto)
    matrix = np.arange(12, dtype=np.float32).reshape(3, 4)
    values = {
        "annotations": ReleaseAnnotations(annotations, annotations.iloc[:0], annotations, annotations.iloc[:1],
                                          {"gaf_rows": 3, "nested": {"x": [1, 2]}}),
        "embeddings": Embeddings(ids=["P0", "P1", "P2"], matrix=matrix, embedder_id="kmer-3"),
        "corpus": KnnCorpus(ids=["P0", "P1", "P2"], matrix=matrix, annotations=annotations, embedder_id="kmer-3"),
        "labels": CandidateSource(neighbours=frame(2).rename(columns={"protein": "query"}),
                                  corpus_annotations=annotations, ground_truth=None, known=annotations,
                                  ia=counts, term_depth=pd.Series([1.0, 2.0], index=["GO:1", "GO:2"])),
        "recipe": FrozenRecipe(recipe={"format": "x", "aspects": {"BP": {"tau": 0.25}}}, recipe_hash="h", window="w"),
        "ontology": onto,
    }
    store = ArtefactStore(tmp_path / "store")
    for name, value in values.items():
        store.write(name, None, value, BINDING)
    for path in stored_files(tmp_path / "store"):
        assert path.suffix in {".parquet", ".npy", ".npz", ".json"}, path
        assert not path.read_bytes()[:2] in PICKLE_MAGIC, path
    back = {name: store.open(name, None).value for name in values}
    pd.testing.assert_frame_equal(back["annotations"].experimental, annotations)
    assert back["annotations"]["report"] == {"gaf_rows": 3, "nested": {"x": [1, 2]}}
    np.testing.assert_array_equal(back["embeddings"].matrix, matrix)
    assert back["embeddings"].matrix.dtype == np.float32 and back["embeddings"].ids == ["P0", "P1", "P2"]
    labels = back["labels"]
    assert isinstance(labels, CandidateSource) and labels.ground_truth is None
    assert (labels.ia.annotation != counts.annotation).nnz == 0 and labels.ia.annotation.format == "csr"
    np.testing.assert_array_equal(labels.ia.terms, counts.terms)
    pd.testing.assert_series_equal(labels.ia.series(), counts.series())
    pd.testing.assert_series_equal(labels.term_depth, values["labels"].term_depth)
    assert back["recipe"].recipe == values["recipe"].recipe and back["recipe"]["recipe_hash"] == "h"
    rebuilt = back["ontology"]
    assert rebuilt.terms == onto.terms and rebuilt.alt_ids == onto.alt_ids and rebuilt.date == onto.date
    assert rebuilt.ancestors("GO:0000011") == onto.ancestors("GO:0000011")


OBO_WITH_LISTS = """format-version: 1.2
data-version: releases/2020-01-01

[Term]
id: GO:0008150
name: biological_process
namespace: biological_process

[Term]
id: GO:0000001
name: one
namespace: biological_process
is_a: GO:0008150 ! parent

[Term]
id: GO:0000002
name: two
namespace: biological_process
alt_id: GO:0000020
alt_id: GO:0000021
is_a: GO:0008150 ! parent
is_a: GO:0000001 ! parent
relationship: part_of GO:0000001 ! parent
relationship: part_of GO:0008150 ! parent
relationship: regulates GO:0000001 ! other
relationship: has_part GO:0008150 ! other

[Term]
id: GO:0000003
name: gone
namespace: biological_process
is_obsolete: true
replaced_by: GO:0000001
replaced_by: GO:0000002
consider: GO:0000001
consider: GO:0000002
"""


def test_a_stored_ontology_keeps_every_value_of_every_list(tmp_path):
    """Terms with two values in each list field (alt_id, is_a, part_of, other relations, replaced_by,
    consider) read back with all of them, in order, as tuples of strings."""
    (tmp_path / "go.obo").write_text(OBO_WITH_LISTS, encoding="utf-8")
    onto = parse_obo(tmp_path / "go.obo")
    two, gone = onto.terms["GO:0000002"], onto.terms["GO:0000003"]
    assert len(two.alt_ids) == len(two.is_a) == len(two.part_of) == len(two.other_relations) == 2
    assert len(gone.replaced_by) == len(gone.consider) == 2
    store = ArtefactStore(tmp_path / "store")
    store.write("ontology", None, onto, BINDING)
    back = store.open("ontology", None).value
    assert back.terms == onto.terms and back.alt_ids == onto.alt_ids
    assert all(type(value) is str for term in back.terms.values()
               for value in (*term.alt_ids, *term.is_a, *term.part_of, *term.replaced_by, *term.consider,
                             *(x for pair in term.other_relations for x in pair)))


def test_what_has_no_open_format_is_refused_not_pickled(tmp_path):
    store = ArtefactStore(tmp_path)
    with pytest.raises(TempoInputError, match="never pickles"):
        store.write("a", None, {"f": frame(), "thing": object()}, BINDING)
    assert not store.exists("a", None)


def test_unknown_types_and_tampered_parts_are_refused(tmp_path):
    store = ArtefactStore(tmp_path)
    meta = store.write("e", None, Embeddings(ids=["P"], matrix=np.ones((1, 2), np.float32), embedder_id="x"),
                       BINDING)
    folder = store.folder("e", None) / meta["file"].rsplit("/", 1)[0]
    (folder / "value.matrix.npy").write_bytes((folder / "value.matrix.npy").read_bytes()[:-4] + b"\0\0\0\0")
    with pytest.raises(TempoInputError, match="does not match its manifest"):
        store.open("e", None).value
    manifest = json.loads((folder / "value.json").read_text())
    manifest["value"]["typed"] = "os.system"
    with pytest.raises(TempoInputError):
        artefacts.decode_value("typed", lambda name: json.dumps(manifest).encode() if name == "value.json"
                               else (folder / name).read_bytes(), "x")


def test_binding_is_checked_before_anything_is_written(tmp_path):
    store = ArtefactStore(tmp_path)
    with pytest.raises(CutoffViolation):
        store.write("a", "k", frame(), {**BINDING, "max_source_date": "2020-02-01"})
    with pytest.raises(TempoInputError, match="lacks metadata"):
        store.write("a", "k", frame(), {"cutoff": "2020-01-01"})
    assert stored_files(tmp_path) == []


def test_a_real_ontology_round_trips_term_by_term(tmp_path):
    # the list fields are decoded from one flat list per column, sliced per term: a real GO has
    # terms with no, one and many alt ids, parents and other relations side by side
    onto = parse_obo(shared(GOA_ARCHIVE / "go" / "go_2014-10-27.obo.gz"))
    assert max(len(t.is_a) for t in onto.terms.values()) > 1 and any(t.other_relations for t in onto.terms.values())
    store = ArtefactStore(tmp_path)
    store.write("ontology", None, onto, BINDING)
    rebuilt = store.open("ontology", None).value
    assert rebuilt.terms == onto.terms and rebuilt.alt_ids == onto.alt_ids
    assert all(type(v) is str for t in rebuilt.terms.values() for v in (*t.is_a, *t.alt_ids, *t.part_of))
