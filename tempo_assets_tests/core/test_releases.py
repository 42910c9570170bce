import gzip
import hashlib
import json
import os
import subprocess
from datetime import date
from pathlib import Path

import pytest

from tempo_assets.core.inputs import new_releases as new_releases_module
from tempo_assets.core.base.errors import CutoffViolation, TempoInputError
from tempo_assets.core.inputs.gaf import GafFormatError, gaf_generated_date, read_gaf, read_gaf_header
from tempo_assets.core.inputs.releases import Archive, ArchiveError
from tempo_assets.core.inputs.cutoff_reader import CutoffReader
from tempo_assets.core.inputs.new_releases import DeriveRequest, ReleaseRequest, add_release, derive_release
from tempo_assets_tests.toolkit import GOA_ARCHIVE, shared

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "data"

# (protein, term, aspect, evidence, column-14 date)
ROWS = [
    ("P00001", "GO:0000002", "P", "IDA", "20140105"),
    ("P00001", "GO:0000004", "F", "IEA", "20150301"),
    ("P00002", "GO:0000003", "P", "IMP", "20160720"),
    ("P00002", "GO:0000005", "C", "IDA", "20170101"),
    ("P00003", "GO:0000002", "P", "EXP", "20181231"),
]


def write_synthetic_gaf(path, generated="2019-01-14", rows=ROWS, taxon="taxon:9606"):
    lines = ["!gaf-version: 2.1", "!comment kept", f"!Generated: {generated} 09:47"]
    for protein, term, aspect, evidence, day in rows:
        lines.append("\t".join(["UniProtKB", protein, "SYM", "", term, "PMID:1", evidence, "",
                                aspect, "name", "", "protein", taxon, day, "UniProt", "", ""]))
    text = "\n".join(lines) + "\n"
    path = Path(path)
    path.write_bytes(gzip.compress(text.encode()) if path.name.endswith(".gz") else text.encode())
    return path


def write_synthetic_obo(path, version="2014-10-27"):
    text = f"""format-version: 1.2
data-version: releases/{version}

[Term]
id: GO:0000001
name: root process
namespace: biological_process

[Term]
id: GO:0000002
name: child process
namespace: biological_process
is_a: GO:0000001 ! root process

[Term]
id: GO:0000003
name: grandchild process
namespace: biological_process
is_a: GO:0000002 ! child process

[Term]
id: GO:0000004
name: some function
namespace: molecular_function

[Term]
id: GO:0000005
name: some component
namespace: cellular_component
"""
    Path(path).write_text(text)
    return Path(path)


def write_synthetic_fasta(path):
    Path(path).write_text(">sp|P00001|\nMKV\n>sp|P00002|\nMAAK\n>sp|P00003|\nMW\n")
    return Path(path)


@pytest.fixture
def inputs(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    return {
        "gaf": write_synthetic_gaf(src / "goa_human_2019-01-14.gaf.gz"),
        "gaf_mouse": write_synthetic_gaf(src / "goa_mouse_2019-01-14.gaf", taxon="taxon:10090"),
        "obo_2014": write_synthetic_obo(src / "go_2014-10-27.obo"),
        "obo_2019": write_synthetic_obo(src / "go_2019-01-27.obo", "2019-01-27"),
        "fasta": write_synthetic_fasta(src / "seqs.fasta"),
    }


@pytest.fixture
def archive(tmp_path, inputs):
    root = tmp_path / "archive"
    add_release(root, ReleaseRequest("2019-01-14", [inputs["gaf"], inputs["gaf_mouse"]], inputs["obo_2019"],
                                      fasta=inputs["fasta"], fasta_date="2014-01-31"))
    return root


def test_add_release_manifest(archive, inputs):
    manifest = Archive(archive).release("2019-01-14")
    # the OBO is newer than the GAFs: the release is as of the latest file
    assert manifest.as_of == date(2019, 1, 27)
    assert Archive(archive).cutoff_of("2019-01-14") == date(2019, 1, 27)
    assert manifest.species == ("10090", "9606")
    assert not manifest.derived and manifest.derived_from is None
    data = json.loads((archive / "releases" / "2019-01-14" / "release.json").read_text())
    assert {"id", "as_of", "derived", "derived_from", "species", "files"} <= set(data)
    by_kind = {f["kind"]: f for f in data["files"]}
    assert by_kind["gaf"]["date"] == "2019-01-14"
    assert by_kind["fasta"]["date"] == "2014-01-31"
    assert by_kind["obo"]["date"] == "2019-01-27"
    for entry in data["files"]:
        placed = archive / "releases" / "2019-01-14" / entry["path"]
        assert entry["sha256"] == hashlib.sha256(placed.read_bytes()).hexdigest()
        assert entry["provenance"] == "real"
    # copied, not linked
    assert os.stat(archive / "releases" / "2019-01-14" / inputs["gaf"].name).st_ino != \
        os.stat(inputs["gaf"]).st_ino


def test_add_release_link(tmp_path, inputs):
    add_release(tmp_path / "a", ReleaseRequest("r1", [inputs["gaf"]], inputs["obo_2014"]), link=True)
    placed = tmp_path / "a" / "releases" / "r1" / inputs["gaf"].name
    assert placed.resolve().samefile(inputs["gaf"])


def test_refuses_declared_date_earlier_than_a_file(tmp_path, inputs):
    with pytest.raises(ArchiveError) as info:
        add_release(tmp_path / "a", ReleaseRequest("2019-01-14", [inputs["gaf"]], inputs["obo_2019"],
                                                   declared_date="2019-01-14"))
    message = str(info.value)
    assert str(inputs["obo_2019"]) in message
    assert "2019-01-27" in message and "2019-01-14" in message
    assert not (tmp_path / "a" / "releases" / "2019-01-14").exists()
    # declaring the OBO's date is accepted; the FASTA then takes the declared date
    manifest = add_release(tmp_path / "a", ReleaseRequest("2019-01-14", [inputs["gaf"]], inputs["obo_2019"],
                                                              fasta=inputs["fasta"], declared_date="2019-01-27"))
    assert manifest.files_of("fasta")[0].date == date(2019, 1, 27)
    assert manifest.declared_date == date(2019, 1, 27)


def test_refuses_fasta_dated_after_declared_date(tmp_path, inputs):
    with pytest.raises(ArchiveError, match="fasta file is dated 2020-01-01"):
        add_release(tmp_path / "a", ReleaseRequest("r", [inputs["gaf"]], inputs["obo_2019"], fasta=inputs["fasta"],
                                                   declared_date="2019-02-01", fasta_date="2020-01-01"))


def test_refuses_duplicate_id(archive, inputs):
    with pytest.raises(ArchiveError, match="already exists"):
        add_release(archive, ReleaseRequest("2019-01-14", [inputs["gaf"]], inputs["obo_2019"]))


def test_refuses_gaf_rows_after_its_own_date(tmp_path, inputs):
    gaf = write_synthetic_gaf(tmp_path / "early.gaf", generated="2016-01-01")
    with pytest.raises(ArchiveError, match="3 rows have a column-14 date after"):
        add_release(tmp_path / "a", ReleaseRequest("r", [gaf], inputs["obo_2014"]))


def test_bad_inputs_leave_no_release(tmp_path, inputs, monkeypatch):
    bad = tmp_path / "bad.fasta"
    bad.write_text(">P1\nMK1\n")
    root = tmp_path / "a"
    with pytest.raises(TempoInputError):
        add_release(root, ReleaseRequest("r", [inputs["gaf"]], inputs["obo_2014"], fasta=bad))
    # a failure half way through building the folder leaves nothing behind either
    calls = []
    real_place = new_releases_module._place

    def failing_place(source, target, link):
        calls.append(source)
        if len(calls) == 2:
            raise OSError("disk full")
        real_place(source, target, link)

    monkeypatch.setattr(new_releases_module, "_place", failing_place)
    with pytest.raises(OSError):
        add_release(root, ReleaseRequest("r", [inputs["gaf"]], inputs["obo_2014"]))
    assert len(calls) == 2
    assert not (root / "releases").exists() or list((root / "releases").iterdir()) == []


def test_releases_sorted_by_as_of_then_id(tmp_path, inputs):
    root = tmp_path / "a"
    add_release(root, ReleaseRequest("b-late", [inputs["gaf"]], inputs["obo_2019"]))
    add_release(root, ReleaseRequest("z-early", [inputs["gaf"]], inputs["obo_2014"]))
    add_release(root, ReleaseRequest("a-early", [inputs["gaf"]], inputs["obo_2014"]))
    assert Archive(root).ids() == ["a-early", "z-early", "b-late"]
    assert [m.id for m in Archive(root).releases_as_of("2019-01-20")] == ["a-early", "z-early"]


@pytest.mark.parametrize(
    "mutate, fragment",
    [
        (lambda d: d.pop("as_of"), "missing key 'as_of'"),
        (lambda d: d.update(as_of="2019-13-01"), "'as_of' is not a date"),
        (lambda d: d.update(as_of="2019-01-14"), "latest file date is 2019-01-27"),
        (lambda d: d["files"][0].update(kind="csv"), "files[0].kind"),
        (lambda d: d["files"][1].pop("sha256"), "files[1].sha256"),
        (lambda d: d.update(id="other"), "release folder"),
        (lambda d: d.update(derived="no"), "'derived' has the wrong type"),
    ],
)
def test_corrupt_manifest_names_file_and_key(archive, mutate, fragment):
    path = archive / "releases" / "2019-01-14" / "release.json"
    data = json.loads(path.read_text())
    mutate(data)
    path.write_text(json.dumps(data))
    with pytest.raises(ArchiveError) as info:
        Archive(archive).releases()
    assert str(path) in str(info.value)
    assert fragment in str(info.value)


def test_missing_and_unparsable_manifest(archive):
    path = archive / "releases" / "2019-01-14" / "release.json"
    path.write_text("{not json")
    with pytest.raises(ArchiveError, match="not valid JSON"):
        Archive(archive).release("2019-01-14")
    path.unlink()
    with pytest.raises(ArchiveError, match="manifest is missing"):
        Archive(archive).releases()
    with pytest.raises(ArchiveError, match="no release 'nope'"):
        Archive(archive).release("nope")
    with pytest.raises(ArchiveError, match="does not exist"):
        Archive(archive / "absent")


def _loop_count_kept(gaf_path, cutoff_int):
    kept = 0
    for line in gzip.open(gaf_path, "rt"):
        if not line.startswith("!") and int(line.split("\t")[13]) <= cutoff_int:
            kept += 1
    return kept


def test_derive_release(archive, inputs):
    manifest = derive_release(archive, DeriveRequest("2019-01-14", "2016-12-31", "2016-12-31", inputs["obo_2014"],
                                                       fasta=inputs["fasta"], fasta_date="2014-01-31"))
    assert manifest.derived and manifest.derived_from == "2019-01-14"
    assert manifest.as_of == date(2016, 12, 31)
    gafs = manifest.files_of("gaf")
    assert len(gafs) == 2 and all(f.provenance == "derived" for f in gafs)
    assert manifest.files_of("obo")[0].provenance == "real"
    human = next(f for f in gafs if "human" in f.path)
    path = manifest.file_path(human)
    expected_kept = sum(1 for row in ROWS if int(row[4]) <= 20161231)
    assert len(read_gaf(path)) == expected_kept == 3
    assert "3 of 5 rows" in human.note
    assert gaf_generated_date(path) == date(2016, 12, 31)
    header = read_gaf_header(path)
    assert "!comment kept" in header
    assert any("Derived by Tempo" in line and "2019-01-14" in line and "2016-12-31" in line
               for line in header)
    # the mouse GAF was plain text and stays plain text
    mouse = next(f for f in gafs if "mouse" in f.path)
    assert not mouse.path.endswith(".gz")
    assert Archive(archive).ids() == ["2016-12-31", "2019-01-14"]


def test_derive_refusals(archive, inputs):
    with pytest.raises(ArchiveError, match="not earlier than the source GAF's date"):
        derive_release(archive, DeriveRequest("2019-01-14", "2019-01-14", "x", inputs["obo_2014"]))
    with pytest.raises(ArchiveError, match="OBO is dated 2019-01-27, after the cutoff 2016-01-01"):
        derive_release(archive, DeriveRequest("2019-01-14", "2016-01-01", "x", inputs["obo_2019"]))
    with pytest.raises(ArchiveError, match="FASTA is dated 2016-06-01, after the cutoff"):
        derive_release(archive, DeriveRequest("2019-01-14", "2016-01-01", "x", inputs["obo_2014"],
                                                 fasta=inputs["fasta"], fasta_date="2016-06-01"))
    old_obo = write_synthetic_obo(inputs["obo_2014"].parent / "go_2009.obo", "2009-01-01")
    with pytest.raises(ArchiveError, match="no rows"):
        derive_release(archive, DeriveRequest("2019-01-14", "2010-01-01", "x", old_obo))
    with pytest.raises(ArchiveError, match="no release 'nope'"):
        derive_release(archive, DeriveRequest("nope", "2016-01-01", "x", inputs["obo_2014"]))
    assert Archive(archive).ids() == ["2019-01-14"]
    assert sorted(p.name for p in (archive / "releases").iterdir()) == ["2019-01-14"]


def test_cutoff_reader_reads_and_records(archive):
    reader = CutoffReader(archive, "2019-01-27")
    frame, dropped = reader.gaf_frame("2019-01-14")
    assert dropped == 0
    assert len(frame) == 2 * len(ROWS)
    assert set(frame["taxon"]) == {"taxon:9606", "taxon:10090"}
    assert reader.max_source_date == date(2019, 1, 14)
    ontology = reader.ontology("2019-01-14")
    assert "GO:0000003" in ontology.terms
    assert reader.sequences("2019-01-14")["P00002"] == "MAAK"
    assert reader.max_source_date == date(2019, 1, 27)
    kinds = sorted(source["kind"] for source in reader.sources)
    assert kinds == ["fasta", "gaf", "gaf", "obo"]
    for source in reader.sources:
        assert source["release"] == "2019-01-14"
        assert hashlib.sha256((archive / source["path"]).read_bytes()).hexdigest() == source["sha256"]
    with pytest.raises(ArchiveError, match="no embeddings file"):
        reader.embeddings_path("2019-01-14")


def test_cutoff_violation_per_file(archive):
    # the GAFs are dated 2019-01-14, the OBO 2019-01-27: at 2019-01-20 only the OBO is refused
    reader = CutoffReader(archive, "2019-01-20")
    frame, _ = reader.gaf_frame("2019-01-14")
    assert len(frame) == 2 * len(ROWS)
    with pytest.raises(CutoffViolation) as info:
        reader.ontology("2019-01-14")
    assert info.value.file_date == date(2019, 1, 27)
    assert info.value.cutoff == date(2019, 1, 20)
    assert "go_2019-01-27.obo" in str(info.value)
    with pytest.raises(CutoffViolation):
        CutoffReader(archive, "2019-01-13").gaf_frame("2019-01-14")
    assert [s["kind"] for s in reader.sources] == ["gaf", "gaf"]  # the refused file is not recorded


def test_rows_after_cutoff_are_dropped_and_counted(tmp_path, inputs):
    """A GAF whose own date is within the cutoff cannot normally hold later rows (add_release
    refuses them); a hand-edited archive can, and the reader drops them row by row."""
    root = tmp_path / "a"
    add_release(root, ReleaseRequest("r", [inputs["gaf"]], inputs["obo_2014"]))
    folder = root / "releases" / "r"
    placed = folder / inputs["gaf"].name
    write_synthetic_gaf(placed, generated="2016-01-01")
    manifest = json.loads((folder / "release.json").read_text())
    for entry in manifest["files"]:
        if entry["kind"] == "gaf":
            entry["date"] = "2016-01-01"
            entry["sha256"] = hashlib.sha256(placed.read_bytes()).hexdigest()
    manifest["as_of"] = "2016-01-01"
    (folder / "release.json").write_text(json.dumps(manifest))
    reader = CutoffReader(root, "2016-01-01")
    frame, dropped = reader.gaf_frame("r")
    expected_dropped = sum(1 for row in ROWS if int(row[4]) > 20160101)
    assert dropped == expected_dropped == 3
    assert reader.dropped_by_file == {f"releases/r/{placed.name}": 3}
    assert frame["date"].max() <= 20160101
    assert list(frame["protein"]) == [row[0] for row in ROWS if int(row[4]) <= 20160101]


def test_sha256_tamper_detected(archive, inputs):
    placed = archive / "releases" / "2019-01-14" / inputs["gaf_mouse"].name
    expected = hashlib.sha256(placed.read_bytes()).hexdigest()
    placed.write_text(placed.read_text().replace("P00003", "P00009"))
    actual = hashlib.sha256(placed.read_bytes()).hexdigest()
    with pytest.raises(ArchiveError) as info:
        CutoffReader(archive, "2019-01-27").gaf_frame("2019-01-14")
    message = str(info.value)
    assert str(placed) in message and expected in message and actual in message


def test_data_archive_loads_within_size_limit():
    archive = Archive(DATA)
    manifests = archive.releases()
    assert len(manifests) >= 5
    total = sum(p.stat().st_size for p in DATA.rglob("*") if p.is_file())
    assert total <= 15 * 1024 * 1024
    assert [m.as_of for m in manifests] == sorted(m.as_of for m in manifests)
    for manifest in manifests:
        reader = CutoffReader(archive, manifest.cutoff)
        frame, dropped = reader.gaf_frame(manifest.id)
        assert len(frame) > 0 and dropped == 0
        assert reader.sequences(manifest.id)
        assert reader.obo_path(manifest.id).is_file()
        assert reader.max_source_date == manifest.as_of
    assert sum(m.derived for m in manifests) >= 2


@pytest.mark.slow
def test_data_obo_pruning_keeps_semantics_for_the_annotated_terms():
    from tempo_assets.core.inputs.ontology import parse_obo

    shared_go = shared(GOA_ARCHIVE / "go" / "go_2019-01-27.obo.gz")
    manifest = Archive(DATA).release("2019-01-14")
    pruned = parse_obo(manifest.file_path(manifest.files_of("obo")[0]))
    full = parse_obo(shared_go)
    used = set(read_gaf(manifest.file_path(manifest.files_of("gaf")[0]))["term"])
    assert pruned.date == full.date and len(pruned.terms) < len(full.terms)
    for term in used:
        primary = full.resolve(term)
        assert pruned.resolve(term) == primary
        if primary is not None:
            assert pruned.aspect(primary) == full.aspect(primary)
            assert pruned.ancestors(primary) == full.ancestors(primary)
