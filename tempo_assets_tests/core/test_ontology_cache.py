"""The parsed-GO cache of ``parse_obo`` (``core/inputs/ontology.py``): an entry per file content, read back
as parsed, a changed file parsed again, a damaged entry ignored and written again."""
from __future__ import annotations

import gzip
import shutil

import pytest

from tempo_assets.core.inputs import ontology as ontology_module
from tempo_assets.core.inputs.ontology import CACHE_FOLDER, CACHE_VARIABLE, parse_obo
from tempo_assets_tests.assets.tiny_archive import write_obo

EXTRA = ("[Term]\nid: GO:0000031\nname: term 0031\nnamespace: cellular_component\nis_a: GO:0005575 ! parent\n"
         "alt_id: GO:0000032\nrelationship: part_of GO:0000021 ! part\nrelationship: regulates GO:0000022\n\n"
         "[Term]\nid: GO:0000033\nname: term 0033\nnamespace: cellular_component\nis_obsolete: true\n"
         "replaced_by: GO:0000031\nconsider: GO:0000021\n\n")


@pytest.fixture
def obo(tmp_path):
    """A small OBO with every field the cache holds (alt, part_of, other relation, obsolete, replaced_by, consider)."""
    path = tmp_path / "go.obo"
    write_obo(path, "2017-01-15")
    path.write_text(path.read_text(encoding="utf-8") + "\n" + EXTRA, encoding="utf-8")
    return path


@pytest.fixture
def parses(monkeypatch) -> list:
    """The files ``parse_obo`` really parsed (not read from the cache), in order."""
    seen = []
    real = ontology_module._parse_obo
    monkeypatch.setattr(ontology_module, "_parse_obo", lambda path: seen.append(path) or real(path))
    return seen


def same(a, b) -> bool:
    return (a.terms, a.header, a.alt_ids, a.date, a.ignored_references) == (
        b.terms, b.header, b.alt_ids, b.date, b.ignored_references)


def entries(cache):
    return sorted((cache / CACHE_FOLDER).glob("*.terms"))


def test_the_same_bytes_are_parsed_once_and_read_back_as_parsed(obo, tmp_path, parses, monkeypatch):
    cache = tmp_path / "cache"
    monkeypatch.delenv(CACHE_VARIABLE, raising=False)
    fresh = parse_obo(obo)
    assert not (cache / CACHE_FOLDER).exists() and parses == [obo]  # no cache folder given: none written
    copy = tmp_path / "elsewhere" / "go_copy.obo"  # another release's copy of the file
    copy.parent.mkdir()
    shutil.copyfile(obo, copy)
    first = parse_obo(obo, cache)
    second = parse_obo(copy, cache)
    assert parses == [obo, obo] and len(entries(cache)) == 1  # the copy was read from the cache
    assert same(first, fresh) and same(second, fresh) and second.path == copy
    assert second.terms["GO:0000031"].other_relations == (("regulates", "GO:0000022"),)
    assert second.resolve("GO:0000032") == "GO:0000031" and second.terms["GO:0000003"].namespace == "biological_process"
    # other bytes (the same terms gzipped) are another entry
    gzipped = copy.with_suffix(".obo.gz")
    with open(obo, "rb") as src, gzip.open(gzipped, "wb") as out:
        out.write(src.read())
    assert same(parse_obo(gzipped, cache), fresh) and parses[-1] == gzipped and len(entries(cache)) == 2


def test_a_changed_file_is_parsed_again(obo, tmp_path, parses, monkeypatch):
    cache = tmp_path / "cache"
    monkeypatch.setenv(CACHE_VARIABLE, str(cache))  # the default cache folder: $TEMPO_CACHE
    before = parse_obo(obo)
    obo.write_text(obo.read_text(encoding="utf-8").replace("name: term 0031", "name: term 0031 renamed"),
                   encoding="utf-8")
    after = parse_obo(obo)
    assert parses == [obo, obo] and len(entries(cache)) == 2
    assert before.terms["GO:0000031"].name == "term 0031" and after.terms["GO:0000031"].name == "term 0031 renamed"


@pytest.mark.parametrize("damage", ["truncated", "edited", "not utf-8", "empty"])
def test_a_damaged_entry_is_ignored_and_written_again(obo, tmp_path, parses, damage):
    cache = tmp_path / "cache"
    fresh = parse_obo(obo, cache)
    [entry] = entries(cache)
    raw = entry.read_bytes()
    damaged = {"truncated": raw[:len(raw) // 2], "edited": raw.replace(b"term 0031", b"term 9031"),
               "not utf-8": raw[:-3] + b"\xff\xfe\n", "empty": b""}[damage]
    entry.write_bytes(damaged)
    again = parse_obo(obo, cache)
    assert same(again, fresh) and again.terms["GO:0000031"].name == "term 0031"
    assert parses == [obo, obo] and entry.read_bytes() == raw  # parsed again, the entry written again
    assert same(parse_obo(obo, cache), fresh) and parses == [obo, obo]


def test_a_changed_parser_parses_again(obo, tmp_path, parses, monkeypatch):
    """An entry is named by the parser's source too (``ontology.py``, ``go_graph.py``, ``obo_header.py``): a
    parser changed since it was written parses again rather than read what the old one made."""
    cache = tmp_path / "cache"
    parse_obo(obo, cache)
    monkeypatch.setattr(ontology_module, "_parser_sha256", lambda: "0" * 64)
    parse_obo(obo, cache)
    assert parses == [obo, obo] and len(entries(cache)) == 2
