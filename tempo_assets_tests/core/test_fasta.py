import gzip
import hashlib

import pytest

from tempo_assets.core.inputs.fasta import (
    FastaFormatError,
    header_accession,
    read_fasta,
    sequence_sha256,
    write_fasta,
)
from tempo_assets_tests.toolkit import GOA_ARCHIVE, shared



@pytest.mark.parametrize(
    "header, accession",
    [
        (">sp|P12345|ABC_HUMAN Some protein OS=Homo sapiens", "P12345"),
        (">tr|A0A024R161|A0A024R161_HUMAN desc", "A0A024R161"),
        (">sp|Q96J66|", "Q96J66"),
        (">P12345 bare description", "P12345"),
        (">P12345", "P12345"),
        (">", ""),
    ],
)
def test_header_accession(header, accession):
    assert header_accession(header) == accession


def test_read_fasta_multiline_lowercase_and_stop(tmp_path):
    path = tmp_path / "s.fasta"
    path.write_text(">sp|P1|A_HUMAN x\nMKV\nlla\n\n>tr|Q2|B\nMK*\n>R3 bare\nM\n")
    assert read_fasta(path) == {"P1": "MKVLLA", "Q2": "MK", "R3": "M"}
    assert list(read_fasta(path)) == ["P1", "Q2", "R3"]  # file order


@pytest.mark.parametrize(
    "text, line, fragment",
    [
        ("MKV\n>P1\nMKV\n", 1, "before the first"),
        (">P1\n>P2\nMKV\n", 1, "empty sequence"),
        (">P1\nMKV\n>P2\n", 3, "empty sequence"),
        (">P1\nMKV\n>sp|P1|X\nMKV\n", 3, "duplicate"),
        (">P1\nMK1V\n", 2, "illegal character '1'"),
        (">P1\nMK-V\n", 2, "illegal character '-'"),
        (">P1\nMK*V\n", 2, "illegal character '*'"),
        (">P1\nMK*\nVV\n", 2, "'*' (stop)"),
        (">\nMK\n", 1, "no accession"),
        ("", 1, "no sequences"),
    ],
)
def test_errors_name_file_and_line(tmp_path, text, line, fragment):
    path = tmp_path / "bad.fasta"
    path.write_text(text)
    with pytest.raises(FastaFormatError) as info:
        read_fasta(path)
    assert info.value.line == line
    assert str(path) in str(info.value)
    assert fragment in str(info.value)


def test_write_read_roundtrip_gzip_reproducible(tmp_path):
    sequences = {"P1": "M" + "A" * 130, "Q2": "MKV"}
    first, second = tmp_path / "a.fasta.gz", tmp_path / "b.fasta.gz"
    write_fasta(first, sequences, width=50, headers={"P1": "sp|P1|"})
    write_fasta(second, sequences, width=50, headers={"P1": "sp|P1|"})
    assert first.read_bytes() == second.read_bytes()
    text = gzip.decompress(first.read_bytes()).decode()
    assert text.splitlines()[0] == ">sp|P1|"
    assert max(len(line) for line in text.splitlines()) == 50
    assert ">Q2\n" in text
    assert read_fasta(first) == sequences


def test_sequence_sha256_normalises_case_and_stop():
    expected = hashlib.sha256(b"MKV").hexdigest()
    assert sequence_sha256("MKV") == expected
    assert sequence_sha256("mkv*") == expected
    assert sequence_sha256("MKA") != expected


@pytest.mark.slow
def test_real_swissprot_fasta():
    path = shared(GOA_ARCHIVE / "uniprot" / "uniprot_sprot_2014-01-31_human_mouse.fasta.gz")
    sequences = read_fasta(path)
    assert len(sequences) == 35071
    assert sequences["P30613"].startswith("MSIQENISSLQLRSW")
