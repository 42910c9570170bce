"""benchmarks/bench_scale.py on a tiny FASTA cut from data/: every stage runs and prints its row."""
from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
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


def knn_rows(work: Path) -> dict[str, str]:
    return {p.name: p.read_text() for p in sorted((work / "proteins_200" / "rows").glob("knn_chunk_*.json"))}


def test_a_stopped_run_continues_where_it_stopped(tmp_path, capsys, monkeypatch):
    """A run killed in its third KNN chunk, rerun with the same arguments: the embedding and the two
    finished chunks are read back, not measured again; the neighbours are those of an unbroken run;
    the peer on every second chunk gives a ratio marked as a sample."""
    from tempo_assets.core.neighbours import knn

    bench = load_benchmark("bench_scale")
    args = tiny_args(tmp_path, "200") + ["--stages", "embedding,knn,scores", "--peer-every", "2"]
    search, calls = knn.KnnIndex.search, []

    def dies_in_the_third_chunk(self, *a, **kw):
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return search(self, *a, **kw)

    monkeypatch.setattr(knn.KnnIndex, "search", dies_in_the_third_chunk)
    with pytest.raises(KeyboardInterrupt):
        bench.main(args)
    work = tmp_path / "work"
    first = knn_rows(work)
    assert sorted(first) == ["knn_chunk_0000.json", "knn_chunk_0001.json"]
    monkeypatch.setattr(knn.KnnIndex, "search", search)
    capsys.readouterr()
    assert bench.main(args) == 0
    out = capsys.readouterr().out
    assert "resuming" in out and "embedding: measured at" in out and "read back" in out
    assert "knn: 2 of 4 chunks already measured, continuing" in out
    assert "knn chunk 1/4" not in out and "knn chunk 2/4" not in out and "knn chunk 3/4" in out
    again = knn_rows(work)
    assert len(again) == 4 and {name: again[name] for name in first} == first
    table = {line.split("|")[1].strip(): [c.strip() for c in line.split("|")[2:-1]]
             for line in out.splitlines() if line.startswith("| ") and not line.startswith("| stage")}
    assert table["knn"][2] == bench.PEERS["knn"] + " — on a sample: 2 of 4 chunks"
    assert table["knn"][5].endswith("x (sample)") and table["knn"][6].endswith("x (sample)")
    # an unbroken run in another folder finds the same neighbours and scores
    unbroken = tiny_args(tmp_path, "200") + ["--stages", "embedding,knn,scores", "--work", str(tmp_path / "w2")]
    assert bench.main(unbroken) == 0
    record, fresh = bench.Record(work / "proteins_200"), bench.Record(tmp_path / "w2" / "proteins_200")
    pd.testing.assert_frame_equal(record.frame("scores"), fresh.frame("scores"))
    # other window arguments: the folder starts afresh
    capsys.readouterr()
    assert bench.main(args + ["--seed", "1"]) == 0
    assert "starting afresh" in capsys.readouterr().out


@needs_diamond
def test_diamond_peer_can_be_the_stage_s_own_diamond_processes(tmp_path, capsys):
    """``--diamond-peer children``: DIAMOND runs once; its peer's CPU is its child processes' own
    (here every child this run waited for), the stage's less Tempo's own work in this process."""
    import resource

    bench = load_benchmark("bench_scale")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    assert bench.main(tiny_args(tmp_path, "50") + ["--stages", "diamond", "--diamond-peer", "children"]) == 0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    children = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    out = capsys.readouterr().out
    cells = [line.split("|")[2:-1] for line in out.splitlines() if line.startswith("| diamond ")][0]
    assert cells[2].strip() == bench.PEERS["diamond:children"]
    saved = bench.Record(tmp_path / "work" / "proteins_50").row("diamond")
    assert saved["peer"]["cpu"] == pytest.approx(children, abs=1e-4) and children > 0
    assert saved["tempo"]["cpu"] > saved["peer"]["cpu"]
    assert not (tmp_path / "work" / "proteins_50" / "diamond_raw").exists()


def test_an_inverted_file_knn_is_kept_apart_and_its_recall_printed(tmp_path, capsys):
    """``--knn-index ivf:NLIST:NPROBE`` in a folder holding a flat run: the flat rows stay as they were,
    the inverted file's KNN rows and the later stages' are named apart, the later stages read its
    neighbours, and its recall against the flat chunks is printed (1 when every list is probed)."""
    from tempo_assets.core.neighbours.knn import knn_term_scores

    bench = load_benchmark("bench_scale")
    args = tiny_args(tmp_path, "200") + ["--stages", "embedding,knn,scores", "--peer-every", "2"]
    assert bench.main(args) == 0
    work = tmp_path / "work" / "proteins_200"
    flat_rows = {p.name: p.read_text() for p in (work / "rows").glob("*.json") if p.stem != "knn"}
    record = bench.Record(work)
    for nlist, nprobe, recall in ((8, 8, "1.0000"), (8, 1, r"0\.\d{4}")):
        capsys.readouterr()
        assert bench.main(args + ["--knn-index", f"ivf:{nlist}:{nprobe}"]) == 0
        out, name = capsys.readouterr().out, f"ivf{nlist}x{nprobe}"
        assert "embedding: measured at" in out and f"knn_{name} chunk 4/4" in out
        assert re.search(rf"inverted file {name} \(nlist {nlist}, nprobe {nprobe}, k-means on 400 rows drawn "
                         rf"with seed 0\); recall@10 against exact flat search {recall} over 200 queries", out)
        table = {line.split("|")[1].strip(): [c.strip() for c in line.split("|")[2:-1]]
                 for line in out.splitlines() if line.startswith("| ") and not line.startswith("| stage")}
        assert table["knn"][2] == bench.PEERS["knn:ivf"] + " — on a sample: 2 of 4 chunks"
        assert "neighbour overlap with faiss 1.0000" in out
        neighbours = pd.concat([record.frame(f"knn_{name}_chunk_{i:04d}") for i in range(4)])
        expected = knn_term_scores(neighbours, bench.build_window(bench.parse_args(args)).corpus_annotations,
                                   k=bench.K_MAX)
        pd.testing.assert_frame_equal(record.frame(f"scores_{name}"), expected)
        assert record.row(f"knn_{name}_build") is not None and record.row(f"scores_{name}") is not None
    assert {p: (work / "rows" / p).read_text() for p in flat_rows} == flat_rows
    pd.testing.assert_frame_equal(record.frame("scores_ivf8x8"), record.frame("scores"))
    assert not record.frame("scores_ivf8x1").equals(record.frame("scores"))
    with pytest.raises(SystemExit):
        bench.main(args + ["--knn-index", "ivf:8"])
    assert "--knn-index must be 'flat' or 'ivf:NLIST:NPROBE'" in capsys.readouterr().err


@needs_diamond
def test_a_relative_work_folder_reaches_diamond(tmp_path, capsys, monkeypatch):
    """``--work bench_out/scale`` as typed: DIAMOND runs inside its own work folder, where a path
    relative to the caller's folder would name nothing."""
    bench = load_benchmark("bench_scale")
    args = tiny_args(tmp_path, "20")
    monkeypatch.chdir(tmp_path)
    args[args.index("--work") + 1] = "relative/work"
    assert bench.main(args + ["--stages", "diamond", "--diamond-peer", "children"]) == 0
    assert bench.Record(tmp_path / "relative" / "work" / "proteins_20").row("diamond") is not None
