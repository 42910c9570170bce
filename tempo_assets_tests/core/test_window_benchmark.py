"""core.pipeline.window_benchmark: the benchmark reads each (asset set, partition) once, through its gate."""
from __future__ import annotations

from datetime import date

import pytest

from tempo_assets.core.base.errors import CutoffViolation
from tempo_assets.core.pipeline.window_benchmark import ReadOnce
from tempo_assets.core.storage.artefacts import Artefact, ArtefactSet

RELEASES = {"r1": date(2020, 1, 1), "r2": date(2021, 1, 1), "r3": date(2022, 1, 1)}


def counted_set(asset: str, limit: str, fetched: list[str]) -> ArtefactSet:
    """A set of ``asset`` gated at release ``limit`` whose every fetch (a fresh artefact) is logged."""
    def fetch(key: str) -> Artefact:
        fetched.append(f"{asset}[{key}]")
        return Artefact(meta={"asset": asset, "partition": key, "max_source_date": RELEASES[key].isoformat()},
                        loader=lambda: {"decoded": key})
    order = {r: i for i, r in enumerate(RELEASES)}
    return ArtefactSet(asset, "refit", limit, RELEASES[limit], order, fetch, as_of=dict(RELEASES))


def test_each_partition_is_fetched_and_decoded_once():
    fetched: list[str] = []
    ontology, sequences = counted_set("ontology", "r2", fetched), counted_set("sequences", "r2", fetched)
    reads = ReadOnce()
    first = reads.get(ontology, "r2")
    assert reads.get(ontology, "r2") is first  # the same artefact: its value is decoded once
    assert first.value == {"decoded": "r2"}
    assert reads.get(ontology, "r1") is not first and reads.get(sequences, "r2") is not first
    reads.get(sequences, "r2")
    assert fetched == ["ontology[r2]", "ontology[r1]", "sequences[r2]"]
    assert ontology.read == ["r2", "r1"]  # the set still records what was read, once each


def test_a_read_past_the_gate_is_refused_every_time():
    fetched: list[str] = []
    gated, reads = counted_set("ontology", "r2", fetched), ReadOnce()
    for _ in range(2):
        with pytest.raises(CutoffViolation):
            reads.get(gated, "r3")
    assert fetched == []
