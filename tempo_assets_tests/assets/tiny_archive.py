"""A tiny four/five-release archive built with ``core.inputs.new_releases.add_release`` (tests only)."""
from __future__ import annotations

import random
from pathlib import Path

from tempo_assets.core.inputs.new_releases import ReleaseRequest, add_release

RELEASES = ["2015-01-15", "2016-01-15", "2017-01-15", "2018-01-15", "2019-01-15"]
TERMS = {  # term: (namespace, parents)
    "GO:0008150": ("biological_process", []), "GO:0000001": ("biological_process", ["GO:0008150"]),
    "GO:0000002": ("biological_process", ["GO:0008150"]), "GO:0000003": ("biological_process", ["GO:0000001"]),
    "GO:0003674": ("molecular_function", []), "GO:0000011": ("molecular_function", ["GO:0003674"]),
    "GO:0000012": ("molecular_function", ["GO:0003674"]), "GO:0000013": ("molecular_function", ["GO:0000011"]),
    "GO:0005575": ("cellular_component", []), "GO:0000021": ("cellular_component", ["GO:0005575"]),
    "GO:0000022": ("cellular_component", ["GO:0005575"]),
}
LEAVES = {"P": ["GO:0000002", "GO:0000003"], "F": ["GO:0000012", "GO:0000013"], "C": ["GO:0000021", "GO:0000022"]}


def write_obo(path: Path, version: str) -> None:
    lines = ["format-version: 1.2", f"data-version: releases/{version}", ""]
    for term, (namespace, parents) in TERMS.items():
        lines += ["[Term]", f"id: {term}", f"name: term {term[-4:]}", f"namespace: {namespace}"]
        lines += [f"is_a: {p} ! parent" for p in parents] + [""]
    path.write_text("\n".join(lines), encoding="utf-8")


def write_gaf(path: Path, generated: str, rows: list[tuple]) -> None:
    out = ["!gaf-version: 2.1", f"!Generated: {generated}"]
    for protein, term, aspect, evidence, day in rows:
        out.append("\t".join(["UniProtKB", protein, protein, "", term, "PMID:1", evidence, "", aspect,
                              "", "", "protein", "taxon:9606", day, "UniProt", "", ""]))
    path.write_text("\n".join(out) + "\n", encoding="utf-8")


def build_tiny_archive(root: Path, n_releases: int = 4, n_proteins: int = 60, seed: int = 0) -> Path:
    """Releases a year apart; each adds experimental annotations (growth in every mode)."""
    rng = random.Random(seed)
    src = root / "src"
    src.mkdir(parents=True, exist_ok=True)
    proteins = [f"P{i:05d}" for i in range(n_proteins)]
    families = {p: i % 6 for i, p in enumerate(proteins)}
    motifs = ["".join(rng.choice("ACDEFGHIKLMNPQRSTVWY") for _ in range(40)) for _ in range(6)]
    fasta = src / "seqs.fasta"
    with open(fasta, "w", encoding="utf-8") as handle:
        for p in proteins:
            seq = motifs[families[p]] + "".join(rng.choice("ACDEFGHIKLMNPQRSTVWY") for _ in range(20))
            handle.write(f">sp|{p}|{p}_HUMAN test\n{seq}\n")
    rows: list[tuple] = []
    archive = root / "archive"
    for index, release in enumerate(RELEASES[:n_releases]):
        day = release.replace("-", "")
        for p in rng.sample(proteins, n_proteins // 4):
            aspect = "PFC"[(families[p] + index) % 3]
            term = LEAVES[aspect][families[p] % 2]
            rows.append((p, term, aspect, "IDA" if rng.random() < 0.8 else "IEA", day))
        gaf, obo = src / f"goa_{release}.gaf", src / f"go_{release}.obo"
        write_gaf(gaf, release, rows)
        write_obo(obo, release)
        add_release(archive, ReleaseRequest(release, [gaf], obo, fasta=fasta, fasta_date=RELEASES[0]))
    return archive
