from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from tempo_assets.core.labels import ia as ia_module
from tempo_assets.core.labels.annotations import propagate_annotations
from tempo_assets.core.base.errors import TempoInputError
from tempo_assets.core.labels.ia import information_accretion, read_ia_file, write_ia_file
from tempo_assets.core.inputs.ontology import parse_obo
from tempo_assets_tests.core.obo_fixtures import ROOTS, random_terms, small_terms, write_obo


def reference_ia(propagated, ontology):
    """Loop-based Clark & Radivojac IA over python sets of terms per protein."""
    by_protein: dict[str, set] = {}
    for protein, term in zip(propagated["protein"], propagated["term"]):
        by_protein.setdefault(protein, set()).add(term)
    out = {}
    for term, record in ontology.terms.items():
        if record.is_obsolete:
            continue
        parents = set(ontology.parents(term))
        if not parents:
            out[term] = 0.0
            continue
        with_parents = sum(1 for terms in by_protein.values() if parents <= terms)
        with_both = sum(1 for terms in by_protein.values() if parents | {term} <= terms)
        out[term] = 0.0 if with_both == 0 else -math.log2(with_both / with_parents)
    return pd.Series(out).sort_index()


def live_terms(ontology):
    return sorted(t for t in ontology.terms if ontology.resolve(t) == t)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("closed", [True, False])
def test_ia_matches_loop_reference(tmp_path, seed, closed, monkeypatch):
    rng = np.random.default_rng(seed)
    ontology = parse_obo(write_obo(tmp_path / "r.obo", random_terms(rng, n_per_aspect=15)))
    monkeypatch.setattr(ia_module, "ROW_CHUNK", 7)  # exercise the chunked accumulation
    seeds = pd.DataFrame({"protein": [f"P{i}" for i in rng.integers(0, 40, 120)],
                          "term": rng.choice(live_terms(ontology), 120)})
    # an unclosed corpus (raw seeds) checks that n(t) is counted jointly with its parents
    corpus = propagate_annotations(seeds, ontology) if closed else seeds
    got = information_accretion(corpus, ontology)
    expected = reference_ia(corpus, ontology)
    assert list(got.index) == list(expected.index)
    np.testing.assert_allclose(got.to_numpy(), expected.to_numpy(), rtol=0, atol=1e-12)
    assert (got >= 0).all() and got.name == "ia"
    shuffled = information_accretion(corpus.sample(frac=1.0, random_state=seed), ontology)
    pd.testing.assert_series_equal(shuffled, got)


def test_ia_by_hand(tmp_path):
    ontology = parse_obo(write_obo(tmp_path / "s.obo", small_terms()))
    # 4 proteins in BP; 2 hold GO:0000001, 1 holds GO:0000002; 1 of them holds both and
    # GO:0000003 (parents GO:0000001 and GO:0000002)
    seeds = pd.DataFrame({"protein": ["P1", "P2", "P3", "P4"],
                          "term": ["GO:0000003", "GO:0000001", "GO:0008150", "GO:0008150"]})
    ia = information_accretion(propagate_annotations(seeds, ontology), ontology)
    assert ia["GO:0008150"] == 0.0                    # root
    assert ia["GO:0000001"] == pytest.approx(1.0)     # 2 of 4
    assert ia["GO:0000002"] == pytest.approx(2.0)     # 1 of 4
    assert ia["GO:0000003"] == 0.0                    # 1 of 1 with both parents
    assert ia["GO:0000004"] == 0.0                    # never annotated
    assert ia["GO:0000011"] == 0.0                    # parents never annotated (0/0)
    assert "GO:0000005" not in ia.index               # obsolete
    assert set(ROOTS.values()) <= set(ia.index)


def test_ia_rejects_terms_outside_the_ontology(tmp_path):
    ontology = parse_obo(write_obo(tmp_path / "s.obo", small_terms()))
    corpus = pd.DataFrame({"protein": ["P1"], "term": ["GO:0000044"]})  # an alt_id
    with pytest.raises(TempoInputError, match="GO:0000044"):
        information_accretion(corpus, ontology)


def test_ia_file_round_trip_in_cafaeval_format(tmp_path):
    ia = pd.Series([0.0, 1.0 / 3.0, 13.286847], index=["GO:1", "GO:2", "GO:3"])
    path = tmp_path / "ia.tsv"
    assert write_ia_file(path, ia) == 3
    for line in path.read_text().splitlines():
        term, value = line.strip().split()   # cafaeval's reader
        assert float(value) == ia[term]
        assert "\t" in line
    back = read_ia_file(path)
    assert back.index.tolist() == ia.index.tolist()
    np.testing.assert_array_equal(back.to_numpy(), ia.to_numpy())


@pytest.mark.parametrize("text, line, message", [
    ("GO:1\t0.5\nGO:2\n", 2, "field"),
    ("GO:1\t0.5\n\nGO:2\tabc\n", 3, "not a number"),
    ("GO:1\tinf\n", 1, "not finite"),
    ("GO:1\t0.5\nGO:1\t0.7\n", 2, "already given on line 1"),
])
def test_read_ia_file_names_file_and_line(tmp_path, text, line, message):
    path = tmp_path / "bad_ia.tsv"
    path.write_text(text)
    with pytest.raises(TempoInputError, match=message) as info:
        read_ia_file(path)
    assert f"bad_ia.tsv:{line}" in str(info.value)


def test_write_ia_rejects_bad_values_and_keeps_previous_file(tmp_path):
    path = tmp_path / "ia.tsv"
    write_ia_file(path, pd.Series([1.5], index=["GO:1"]))
    for bad in (pd.Series([float("nan")], index=["GO:2"]),
                pd.Series([-1.0], index=["GO:2"]),
                pd.Series([1.0], index=["GO 2"])):
        with pytest.raises(TempoInputError, match="GO"):
            write_ia_file(path, bad)
    assert path.read_text() == "GO:1\t1.5\n"
    assert [p.name for p in tmp_path.iterdir()] == ["ia.tsv"]
