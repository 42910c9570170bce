"""The graph on an archive it has never seen: mouse releases built with the ``tempo release`` CLI.

From ``../shared/data/goa_archive``: mouse 2014-09-29 GAF + GO 2014-10-27; mouse 2019-01-14 GAF +
GO 2019-01-27; 2016-01-15 and 2017-06-15 derived from the 2019 GAF (GO 2014-10-27). A seeded
sample of mouse proteins (experimentally annotated in 2019, with a Swiss-Prot 2014-01 sequence)
keeps it fast: the FASTA and both GAFs are cut to those proteins, and each GO file is pruned as
``data/``'s are (``scripts/build_demo_archive.py``'s ``prune_obo``: the is_a/part_of ancestor closure
of the terms the sample's rows name, alt_ids and obsolete terms' replacements kept), so the two GO
versions still differ where the sample's terms do. The window's time went with GO's size, not the
sample's (75 to 86 CPU s on whole GO, 50 to 53 pruned: docs/performance.md); whole GO files are parsed,
closed and staged in the real-data tests (``core/test_real_growth.py``, ``core/test_warehouse.py``,
``core/test_audits.py``) and the full mouse archive is measured end to end by ``benchmarks/bench_jobs.py``.
No code is specific to it. The four ``tempo release`` commands run in this test process (``cli_here.tempo_here``: the
command's own code, output and exit status, without a new interpreter each; the console script runs
``tempo release`` in test_ui_staleness.py and cli/test_bad_input.py). Every parse of a GO file (each
``tempo release``, each release's ``ontology``) goes through the parsed-GO cache in the graph's cache
folder (``$TEMPO_CACHE``): each of the two files is parsed once.
"""
import gzip
import importlib.util
import os
import random
from pathlib import Path

import pytest

from tempo_assets.core.inputs.ontology import CACHE_FOLDER, CACHE_VARIABLE
from tempo_assets.core.labels.annotations import EXPERIMENTAL_CODES
from tempo_assets.core.storage.warehouse import Warehouse
from tempo_assets_tests.cli_here import tempo_here
from tempo_assets_tests.conftest import REPO, materialise_archive
from tempo_assets_tests.toolkit import GOA_ARCHIVE, shared
N_PROTEINS = 600
SEED = 20190114


def sequence_ids(fasta: Path) -> set[str]:
    with gzip.open(fasta, "rt", encoding="utf-8") as handle:
        return {line.split("|")[1] for line in handle if line.startswith(">")}


def experimental_proteins(gaf: Path) -> set[str]:
    found = set()
    with gzip.open(gaf, "rt", encoding="utf-8") as handle:
        for line in handle:
            if line.startswith("!"):
                continue
            cols = line.split("\t")
            if cols[6] in EXPERIMENTAL_CODES and "NOT" not in cols[3]:
                found.add(cols[1])
    return found


def subset_gaf(source: Path, target: Path, proteins: set[str]) -> None:
    """Header lines verbatim, then only the rows of ``proteins``."""
    with gzip.open(source, "rt", encoding="utf-8") as src, open(target, "w", encoding="utf-8") as out:
        for line in src:
            if line.startswith("!") or line.split("\t", 2)[1] in proteins:
                out.write(line)


def subset_fasta(source: Path, target: Path, proteins: set[str]) -> None:
    keep = False
    with gzip.open(source, "rt", encoding="utf-8") as src, open(target, "w", encoding="utf-8") as out:
        for line in src:
            if line.startswith(">"):
                keep = line.split("|")[1] in proteins
            if keep:
                out.write(line)


def gaf_terms(gafs) -> set[str]:
    """The GO ids the rows of ``gafs`` (plain GAF files) name."""
    terms: set[str] = set()
    for gaf in gafs:
        with open(gaf, encoding="utf-8") as handle:
            terms |= {line.split("\t", 5)[4] for line in handle if not line.startswith("!")}
    return terms


def demo_prune_obo():
    """``prune_obo`` of ``scripts/build_demo_archive.py``, the function that pruned ``data/``'s GO files (a
    script, not a package: loaded from its file)."""
    spec = importlib.util.spec_from_file_location("build_demo_archive", REPO / "scripts" / "build_demo_archive.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    return script.prune_obo


def release(*args: str) -> None:
    done = tempo_here("release", *args, env=dict(os.environ))
    assert done.returncode == 0, done.stderr


def build_mouse_archive(root: Path, n_proteins: int = N_PROTEINS, prune_go: bool = False) -> Path:
    """``n_proteins`` sampled mouse proteins' releases in ``root / "archive"``; whole GO files unless ``prune_go``."""
    src = root / "src"
    src.mkdir()
    fasta = shared(GOA_ARCHIVE / "uniprot" / "uniprot_sprot_2014-01-31_human_mouse.fasta.gz")
    gaf14 = shared(GOA_ARCHIVE / "goa" / "goa_mouse_2014-09-29.gaf.gz")
    gaf19 = shared(GOA_ARCHIVE / "goa" / "goa_mouse_2019-01-14.gaf.gz")
    pool = sorted(experimental_proteins(gaf19) & sequence_ids(fasta))
    proteins = set(random.Random(SEED).sample(pool, n_proteins))
    subset_fasta(fasta, src / "mouse.fasta", proteins)
    subset_gaf(gaf14, src / "goa_mouse_2014-09-29.sample.gaf", proteins)
    subset_gaf(gaf19, src / "goa_mouse_2019-01-14.sample.gaf", proteins)
    archive = root / "archive"
    obo14, obo19 = shared(GOA_ARCHIVE / "go" / "go_2014-10-27.obo.gz"), shared(GOA_ARCHIVE / "go" / "go_2019-01-27.obo.gz")
    if prune_go:
        prune, terms = demo_prune_obo(), gaf_terms(src.glob("*.sample.gaf"))
        for obo in (obo14, obo19):
            prune(obo, src / obo.name, terms)
        obo14, obo19 = src / obo14.name, src / obo19.name
    common = ["--fasta", str(src / "mouse.fasta"), "--fasta-date", "2014-01-31", "--provenance", "derived",
              "--note", f"seeded sample of {n_proteins} mouse proteins (test)"]
    release("add", str(archive), "--id", "2014-09-29", "--gaf", str(src / "goa_mouse_2014-09-29.sample.gaf"),
          "--obo", str(obo14), *common)
    release("add", str(archive), "--id", "2019-01-14", "--gaf", str(src / "goa_mouse_2019-01-14.sample.gaf"),
          "--obo", str(obo19), *common)
    for cutoff in ("2016-01-15", "2017-06-15"):
        release("derive", str(archive), "--from", "2019-01-14", "--cutoff", cutoff, "--id", cutoff,
              "--obo", str(obo14), "--fasta", str(src / "mouse.fasta"), "--fasta-date", "2014-01-31")
    return archive


@pytest.mark.slow
def test_mouse_archive_through_one_window(tmp_path, monkeypatch):
    cache = tmp_path / "cache"  # materialise_archive's cache folder, for the tempo commands too
    monkeypatch.setenv(CACHE_VARIABLE, str(cache))
    archive = build_mouse_archive(tmp_path, prune_go=True)
    window = "2014-09-29__2016-01-15__2017-06-15__2019-01-14"
    # through the window's TEST score (the benchmark step, whose baselines other tests cover on data/, is left out)
    graph = materialise_archive(tmp_path, archive, target="window", key=window, exclude=("benchmark",))
    assert graph.plan.windows == [window]
    assert [r[2] for r in graph.report] == ["ok"] * len(graph.report), graph.report
    store = graph.store()
    meta = store.read_meta("test_score", window)
    assert (meta["window"], meta["window_role"], meta["cutoff"]) == (window, "test", "2019-01-27")
    summary = store.open("test_score", window).value["summary"]
    assert set(summary["method"]) == {"recipe", "knn", "naive"}
    assert summary["n_targets"].gt(0).all() and summary["fmax_oracle"].between(0, 1).all()
    # every source the TEST score read is dated on or before t1's cutoff
    assert max(s["date"] for s in meta["sources"] if "date" in s) <= "2019-01-27"
    # the warehouse records each release's ontology by its artefact's sha256: the three releases on
    # GO 2014-10-27 built its closure once and copied it (core/storage/warehouse_ontology.py)
    with Warehouse(graph.env["TEMPO_WAREHOUSE_URL"]) as warehouse:
        recorded = warehouse.read_table("stg_release_ontologies")
    releases = ("2014-09-29", "2016-01-15", "2017-06-15", "2019-01-14")
    assert dict(zip(recorded["release_id"], recorded["ontology_sha256"])) == {
        release: store.read_meta("ontology", release)["sha256"] for release in releases}
    assert recorded["ontology_sha256"].nunique() == 2
    assert len(list((cache / CACHE_FOLDER).iterdir())) == 2  # an entry per GO file content, whichever process wrote it
    graph.instance.dispose()
