import gzip
import random
from datetime import date
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tempo_assets.core.inputs.gaf import (
    GAF_COLUMNS,
    GafFormatError,
    gaf_generated_date,
    gaf_version,
    read_gaf,
    read_gaf_header,
    write_gaf_rows,
)
from tempo_assets_tests.toolkit import GOA_ARCHIVE, shared



def gaf_line(protein="P12345", term="GO:0005515", evidence="IPI", aspect="F", day="20150102",
             qualifier="", symbol="SYM", taxon="taxon:9606", assigned_by="UniProt", ncols=17):
    fields = ["UniProtKB", protein, symbol, qualifier, term, "PMID:1", evidence, "", aspect,
              "name", "", "protein", taxon, day, assigned_by, "", ""]
    return "\t".join(fields[:ncols])


def write_gaf(path, lines, header=("!gaf-version: 2.1", "!Generated: 2019-01-14 09:47")):
    text = "".join(f"{line}\n" for line in (*header, *lines))
    if str(path).endswith(".gz"):
        with gzip.open(path, "wt") as handle:
            handle.write(text)
    else:
        Path(path).write_text(text)
    return path


def reference_read_gaf(path):
    """Slow loop-based reader: the behaviour read_gaf must reproduce."""
    opener = gzip.open if str(path).endswith(".gz") else open
    rows = []
    with opener(path, "rt") as handle:
        for line in handle:
            line = line.rstrip("\n")
            if line.startswith("!") or not line.strip():
                continue
            f = line.split("\t")
            rows.append({
                "db": f[0], "protein": f[1], "symbol": f[2], "qualifier": f[3], "term": f[4],
                "evidence": f[6], "aspect": {"P": "BP", "F": "MF", "C": "CC"}[f[8]],
                "taxon": f[12], "date": int(f[13]), "assigned_by": f[14],
            })
    return rows


@pytest.mark.parametrize("suffix", [".gaf", ".gaf.gz"])
def test_read_gaf_matches_loop_reference(tmp_path, suffix):
    rng = random.Random(7)
    lines = []
    for i in range(300):
        lines.append(gaf_line(
            protein=f"P{rng.randrange(10**5):05d}", term=f"GO:{rng.randrange(10**7):07d}",
            evidence=rng.choice(["IDA", "IEA", "EXP", "TAS"]), aspect=rng.choice("PFC"),
            day=f"20{rng.randrange(10, 19)}{rng.randrange(1, 13):02d}{rng.randrange(1, 29):02d}",
            qualifier=rng.choice(["", "NOT", "enables", "NOT|colocalizes_with"]),
            ncols=rng.choice([15, 16, 17]),
        ))
    path = write_gaf(tmp_path / f"x{suffix}", lines)
    frame = read_gaf(path)
    assert tuple(frame.columns) == GAF_COLUMNS
    assert frame["date"].dtype == np.int32
    expected = pd.DataFrame(reference_read_gaf(path))
    assert frame.astype({"date": "int64"}).astype(object).to_dict("records") == \
        expected.astype(object).to_dict("records")


def test_gzip_detected_by_magic_not_suffix(tmp_path):
    plain = write_gaf(tmp_path / "a.gaf", [gaf_line(), gaf_line(aspect="C")])
    packed = tmp_path / "b.txt"  # gzip bytes under a name that does not say so
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    pd.testing.assert_frame_equal(read_gaf(plain), read_gaf(packed))
    assert list(read_gaf(plain)["aspect"]) == ["MF", "CC"]


@pytest.mark.parametrize(
    "header, expected_date, expected_version",
    [
        (("!gaf-version: 2.0", "!Generated: 2014-09-29 11:09"), date(2014, 9, 29), "2.0"),
        (("!gaf-version: 2.2", "!date-generated: 2022-09-12"), date(2022, 9, 12), "2.2"),
        (("!gaf-version: 2.1", "!some comment"), None, "2.1"),
    ],
)
def test_header_dates_and_versions(tmp_path, header, expected_date, expected_version):
    path = write_gaf(tmp_path / "h.gaf", [gaf_line()], header=header)
    assert gaf_generated_date(path) == expected_date
    assert gaf_version(path) == expected_version
    assert read_gaf_header(path) == list(header)


GOOD = gaf_line()


@pytest.mark.parametrize(
    "lines, bad_line, fragment",
    [
        ([GOOD, GOOD + "\textra"], 4, "columns"),               # 18 columns
        ([GOOD, gaf_line(ncols=14)], 4, "column"),               # too few columns
        ([GOOD, GOOD, gaf_line(aspect="X")], 5, "aspect"),
        ([gaf_line(day="20191301")], 3, "date"),
        ([gaf_line(day="2019-01-01")], 3, "date"),
        ([GOOD, gaf_line(term="GO:12")], 4, "GO id"),
        ([GOOD, gaf_line(protein="")], 4, "protein"),
        ([GOOD, "!late header", GOOD], 4, "header"),
    ],
)
def test_malformed_rows_name_file_and_line(tmp_path, lines, bad_line, fragment):
    path = write_gaf(tmp_path / "bad.gaf", lines)
    with pytest.raises(GafFormatError) as info:
        read_gaf(path)
    assert info.value.line == bad_line
    assert str(path) in str(info.value)
    assert fragment in str(info.value)


@pytest.mark.parametrize(
    "content, fragment",
    [
        ("", "empty"),
        ("!gaf-version: 2.1\n!Generated: 2019-01-14\n", "no data rows"),
        ("!Generated: 2019-01-14\n" + GOOD + "\n", "gaf-version"),
        (GOOD + "\n", "gaf-version"),
        ("!gaf-version: 1.0\n" + GOOD + "\n", "unsupported"),
    ],
)
def test_bad_files(tmp_path, content, fragment):
    path = tmp_path / "f.gaf"
    path.write_text(content)
    with pytest.raises(GafFormatError, match=fragment):
        read_gaf(path)


def test_blank_lines_are_tolerated(tmp_path):
    path = write_gaf(tmp_path / "b.gaf", ["", GOOD, "", gaf_line(aspect="P")])
    assert list(read_gaf(path)["aspect"]) == ["MF", "BP"]


def test_write_gaf_rows_roundtrip_and_reproducible_gzip(tmp_path):
    header = ["!gaf-version: 2.1", "Generated: 2019-01-14"]  # a missing "!" is added
    rows = [GOOD, gaf_line(aspect="C").split("\t")]
    first = tmp_path / "one.gaf.gz"
    second = tmp_path / "two.gaf.gz"
    assert write_gaf_rows(first, header, rows) == 2
    write_gaf_rows(second, header, rows)
    assert first.read_bytes()[:2] == b"\x1f\x8b"
    assert first.read_bytes() == second.read_bytes()
    assert gaf_generated_date(first) == date(2019, 1, 14)
    assert list(read_gaf(first)["aspect"]) == ["MF", "CC"]


def test_write_gaf_rows_failure_keeps_previous_file(tmp_path):
    path = tmp_path / "keep.gaf"
    write_gaf_rows(path, ["!gaf-version: 2.1"], [GOOD])
    before = path.read_bytes()

    def rows():
        yield GOOD
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        write_gaf_rows(path, ["!gaf-version: 2.1"], rows())
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["keep.gaf"]


@pytest.mark.slow
def test_real_human_2019_gaf_parses():
    path = shared(GOA_ARCHIVE / "goa" / "goa_human_2019-01-14.gaf.gz")
    frame = read_gaf(path)
    assert len(frame) == 475402
    assert gaf_generated_date(path) == date(2019, 1, 14)
    assert gaf_version(path) == "2.1"
    assert set(frame["aspect"].unique()) == {"BP", "MF", "CC"}
    assert frame["date"].max() <= 20190114
