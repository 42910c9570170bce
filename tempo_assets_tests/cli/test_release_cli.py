import json

import pytest

from tempo_assets.cli.main import main
from tempo_assets_tests.core.test_releases import (
    write_synthetic_fasta,
    write_synthetic_gaf,
    write_synthetic_obo,
)


@pytest.fixture
def files(tmp_path):
    return {
        "gaf": write_synthetic_gaf(tmp_path / "goa_human.gaf.gz"),
        "obo_2019": write_synthetic_obo(tmp_path / "go_2019.obo", "2019-01-27"),
        "obo_2014": write_synthetic_obo(tmp_path / "go_2014.obo", "2014-10-27"),
        "fasta": write_synthetic_fasta(tmp_path / "seqs.fasta"),
    }


def test_add_derive_list(tmp_path, files, capsys):
    root = tmp_path / "archive"
    assert main(["release", "add", str(root), "--id", "2019-01-14", "--gaf", str(files["gaf"]),
                 "--obo", str(files["obo_2019"]), "--fasta", str(files["fasta"]),
                 "--fasta-date", "2014-01-31"]) == 0
    assert main(["release", "derive", str(root), "--from", "2019-01-14", "--cutoff", "2016-12-31",
                 "--id", "2016-12-31", "--obo", str(files["obo_2014"])]) == 0
    out = capsys.readouterr().out
    assert "3 of 5 rows" in out
    assert main(["release", "list", str(root)]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert [line.split("\t")[0] for line in lines] == ["2016-12-31", "2019-01-14"]
    assert lines[0].split("\t")[1:3] == ["as_of=2016-12-31", "derived(from=2019-01-14)"]
    assert lines[1].split("\t")[1:3] == ["as_of=2019-01-27", "real"]
    assert "fasta:seqs.fasta" in lines[1]
    manifest = json.loads((root / "releases" / "2016-12-31" / "release.json").read_text())
    assert manifest["derived"] is True


@pytest.mark.parametrize(
    "extra, fragment",
    [
        (["--date", "2019-01-14"], "after the release's declared date"),
        (["--date", "14/01/2019"], "--date"),
    ],
)
def test_add_errors_exit_2(tmp_path, files, capsys, extra, fragment):
    code = main(["release", "add", str(tmp_path / "a"), "--id", "r", "--gaf", str(files["gaf"]),
                 "--obo", str(files["obo_2019"]), *extra])
    assert code == 2
    err = capsys.readouterr().err
    assert err.startswith("tempo: error:") and fragment in err


def test_duplicate_and_missing_exit_2(tmp_path, files, capsys):
    args = ["release", "add", str(tmp_path / "a"), "--id", "r", "--gaf", str(files["gaf"]),
            "--obo", str(files["obo_2014"])]
    assert main(args) == 0
    assert main(args) == 2
    assert "already exists" in capsys.readouterr().err
    assert main(["release", "derive", str(tmp_path / "a"), "--from", "nope", "--cutoff",
                 "2016-01-01", "--id", "x", "--obo", str(files["obo_2014"])]) == 2
    assert "no release 'nope'" in capsys.readouterr().err
    assert main(["release", "list", str(tmp_path / "missing")]) == 2
