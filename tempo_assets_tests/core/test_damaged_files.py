"""Damaged input and refused writes name the file: truncated gzip streams, cut OBOs, a full disk."""
from __future__ import annotations

import errno
import gzip

import numpy as np
import pandas as pd
import pytest

from tempo_assets.core.storage.artefacts import ArtefactStore
from tempo_assets.core.base.errors import DamagedFileError, StorageWriteError
from tempo_assets.core.inputs.fasta import read_fasta
from tempo_assets.core.inputs.gaf import read_gaf
from tempo_assets.core.base.io import atomic_write
from tempo_assets.core.inputs.ontology import check_release_ontology, parse_obo
from tempo_assets.core.inputs.obo_header import OboFormatError
from tempo_assets_tests.assets.tiny_archive import write_gaf, write_obo
from tempo_assets_tests.full_disk import small_filesystem  # noqa: F401 (a fixture)

BINDING = {"cutoff": "2020-01-01", "max_source_date": "2019-12-31", "sources": []}


def cut_gzip(path, text: bytes, keep: float = 0.5):
    data = gzip.compress(text, mtime=0)
    path.write_bytes(data[: int(len(data) * keep)])
    return path


def test_truncated_gzip_names_the_file_and_the_line_it_stops_in(tmp_path):
    plain = tmp_path / "goa.gaf"
    write_gaf(plain, "2019-01-01", [(f"P{i:05d}", "GO:0000002", "P", "IDA", "20180101") for i in range(4000)])
    gaf = cut_gzip(tmp_path / "goa.gaf.gz", plain.read_bytes())
    with pytest.raises(DamagedFileError, match="truncated") as caught:
        read_gaf(gaf)
    assert caught.value.path == str(gaf) and 2 < caught.value.line <= 4003
    fasta = cut_gzip(tmp_path / "s.fasta.gz", b"".join(b">sp|P%05d|X\nMKVLAAGIVG\n" % i for i in range(5000)))
    with pytest.raises(DamagedFileError) as caught:
        read_fasta(fasta)
    assert caught.value.path == str(fasta) and caught.value.line > 1
    write_obo(tmp_path / "go.obo", "2019-01-01")
    padding = b"".join(b"! comment %d\n" % i for i in range(20000))
    obo = cut_gzip(tmp_path / "go.obo.gz", (tmp_path / "go.obo").read_bytes() + padding, keep=0.9)
    with pytest.raises(DamagedFileError):
        parse_obo(obo)


def test_a_cycle_names_its_terms_and_the_line_of_an_edge(tmp_path):
    path = tmp_path / "cycle.obo"
    path.write_text("[Term]\nid: GO:1\nnamespace: biological_process\nis_a: GO:3\n\n"
                    "[Term]\nid: GO:2\nnamespace: biological_process\nis_a: GO:1\n\n"
                    "[Term]\nid: GO:3\nnamespace: biological_process\nrelationship: part_of GO:2\n")
    with pytest.raises(OboFormatError) as caught:
        parse_obo(path)
    assert "cycle GO:1 -> GO:3 -> GO:2 -> GO:1" in str(caught.value) and caught.value.line == 4
    # across namespaces nothing is propagated, so an edge there closes no cycle
    path.write_text("[Term]\nid: GO:1\nnamespace: biological_process\nrelationship: part_of GO:2\n\n"
                    "[Term]\nid: GO:2\nnamespace: molecular_function\nrelationship: part_of GO:1\n")
    assert parse_obo(path).ancestors("GO:1") == {"GO:1"}


def test_a_release_ontology_must_end_its_last_line(tmp_path):
    write_obo(tmp_path / "go.obo", "2019-01-01")
    text = (tmp_path / "go.obo").read_text().rstrip("\n")
    assert check_release_ontology(tmp_path / "go.obo").date.isoformat() == "2019-01-01"
    (tmp_path / "cut.obo").write_text(text)  # every stanza whole, the last newline gone
    assert len(parse_obo(tmp_path / "cut.obo").terms) == 11  # parsing alone cannot tell
    with pytest.raises(OboFormatError, match="truncated") as caught:
        check_release_ontology(tmp_path / "cut.obo")
    assert caught.value.line == text.count("\n") + 1


def test_a_refused_write_names_the_path_and_leaves_the_previous_version(tmp_path, small_filesystem):
    store = ArtefactStore(small_filesystem.path / "artefacts")
    first = store.write("a", "k", pd.DataFrame({"x": [1, 2, 3]}), BINDING)
    small_filesystem.fill()
    big = pd.DataFrame({"x": np.random.default_rng(0).random(400_000)})
    with pytest.raises(StorageWriteError) as caught:
        store.write("a", "k", big, BINDING)
    assert caught.value.errno == errno.ENOSPC
    assert caught.value.filename.startswith(str(small_filesystem.path / "artefacts" / "a" / "k" / "versions"))
    assert str(caught.value).startswith(f"cannot write {caught.value.filename}: No space left on device; ")
    again = store.open("a", "k")
    assert again.meta["sha256"] == first["sha256"]
    pd.testing.assert_frame_equal(again.value, pd.DataFrame({"x": [1, 2, 3]}))
    leftovers = [p for p in (small_filesystem.path / "artefacts").rglob("*") if p.name.endswith(".tmp")]
    assert leftovers == []
    with pytest.raises(StorageWriteError, match="cannot write .*/b.txt: No space left on device"):
        with atomic_write(small_filesystem.path / "b.txt") as handle:
            handle.write("x" * (1 << 20))
