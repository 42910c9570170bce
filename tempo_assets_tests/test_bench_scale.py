"""benchmarks/bench_scale.py on a tiny FASTA cut from data/: every stage runs and prints its row."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from tempo_assets.core.inputs.fasta import read_fasta, write_fasta
from tempo_assets_tests.toolkit import load_benchmark, needs_diamond

REPO = Path(__file__).resolve().parents[1]
RELEASES = REPO / "data" / "releases"



def tiny_args(tmp_path: Path, proteins: str) -> list[str]:
    sequences = read_fasta(RELEASES / "2014-09-29" / "uniprot_sprot_2014-01-31_human.subset.fasta.gz")
    fasta = tmp_path / "tiny.fasta"
    write_fasta(fasta, {key: sequences[key] for key in list(sequences)[:400]})
    return ["--proteins", proteins, "--fasta", str(fasta), "--work", str(tmp_path / "work"), "--knn-chunk", "64",
            "--old-gaf", str(RELEASES / "2014-09-29" / "goa_human_2014-09-29.subset.gaf.gz"),
            "--new-gaf", str(RELEASES / "2019-01-14" / "goa_human_2019-01-14.subset.gaf.gz"),
            "--old-obo", str(RELEASES / "2014-09-29" / "go_2014-10-27.pruned.obo.gz"),
            "--new-obo", str(RELEASES / "2019-01-14" / "go_2019-01-27.pruned.obo.gz")]


@needs_diamond
def test_small_run_prints_every_stage_row(tmp_path, capsys):
    bench = load_benchmark("bench_scale")
    assert bench.main(tiny_args(tmp_path, "200")) == 0
    out = capsys.readouterr().out
    assert re.search(r"corpus 400 sequences, .*; 200 queries, of which \d+ growth targets", out)
    table = {line.split("|")[1].strip(): [c.strip() for c in line.split("|")[2:-1]]
             for line in out.splitlines() if line.startswith("| ") and not line.startswith("| stage")}
    assert list(table) == list(bench.STAGES)
    for stage, cells in table.items():
        tempo_wall, tempo_cpu, peer, peer_wall, _, ratio = cells[:6]
        assert float(tempo_wall) >= 0 and float(tempo_cpu) >= 0
        assert peer == bench.PEERS[stage]
        if peer == "none":
            assert ratio == "—"
        else:
            assert float(ratio.rstrip("x")) > 0 and float(peer_wall) >= 0
        assert re.fullmatch(r"[\d,]+ \([\d,]+\)", cells[7]), cells[7]
    assert re.fullmatch(r"[\d,]+ / [\d,]+", table["diamond"][9])
    # the peers computed the same thing as Tempo's stage
    assert "rows equal: True" in out and "same model: True" in out
    assert "neighbour overlap with faiss 1.0000" in out
    assert re.search(r"load average before: [\d.]+ [\d.]+ [\d.]+", out)
    assert re.search(r"load average after: [\d.]+ [\d.]+ [\d.]+", out)


def test_bad_options_are_refused(tmp_path, capsys):
    bench = load_benchmark("bench_scale")
    with pytest.raises(SystemExit):
        bench.main(tiny_args(tmp_path, "many"))
    assert "--proteins must be a positive number or 'all'" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        bench.main(tiny_args(tmp_path, "10") + ["--stages", "lightgbm"])
    assert "stage lightgbm needs stage features" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        bench.main(["--fasta", str(tmp_path / "absent.fasta.gz")])
    assert "swissprot_2014_fasta.sh" in capsys.readouterr().err
