#!/usr/bin/env python
"""Build ``data/``: the small real release archive the README's commands run on.

Five human releases (2014-09-29 real, 2016-01-15 and 2017-06-15 derived from the 2019 GAF's
column 14, 2019-01-14 real, 2022-09-12 derived from NCBI gene2go), restricted to a seeded sample
of human proteins that have a Swiss-Prot 2014-01 sequence, with each GO file pruned to what those
annotations need. Everything goes through the archive API (``add_release``/``derive_release``),
so the manifests carry dates and sha256 like any archive. Run from the repository root:

    .venv/bin/python scripts/build_demo_archive.py --source ../shared/data/goa_archive --out data

It reads only the source folder and rewrites ``OUT/releases`` and ``OUT/README.md``.
"""
from __future__ import annotations

import argparse
import gzip
import random
import shutil
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

import pandas as pd

from tempo_assets.core.labels.annotations import EXPERIMENTAL_CODES
from tempo_assets.core.inputs.fasta import read_fasta, write_fasta
from tempo_assets.core.inputs.gaf import iter_gaf_lines, read_gaf, read_gaf_header, write_gaf_rows
from tempo_assets.core.base.io import atomic_write, open_text
from tempo_assets.core.inputs.releases import Archive
from tempo_assets.core.inputs.cutoff_reader import CutoffReader
from tempo_assets.core.inputs.new_releases import DeriveRequest, ReleaseRequest, add_release, derive_release

SEED = 20140929
# proteins sampled per group (see sample_proteins)
QUOTAS = {"gain_nk": 1100, "gain_other": 1350, "no_experimental": 500, "stable": 350}
DERIVED_CUTOFFS = ("2016-01-15", "2017-06-15")
SCRIPT = "scripts/build_demo_archive.py"

GAF_2014 = "goa/goa_human_2014-09-29.gaf.gz"
GAF_2019 = "goa/goa_human_2019-01-14.gaf.gz"
GAF_2022 = "goa/goa_human_2022-09-12.gaf.gz"
OBO_2014 = "go/go_2014-10-27.obo.gz"
OBO_2019 = "go/go_2019-01-27.obo.gz"
OBO_2022 = "go/go_2022-07-01.obo.gz"
FASTA = "uniprot/uniprot_sprot_2014-01-31_human_mouse.fasta.gz"
FASTA_DATE = "2014-01-31"

# OBO stanza tags kept by pruning; everything else (def, synonym, xref, comment, subset,
# intersection_of, union_of, disjoint_from, property_value, created_by, ...) is dropped
KEPT_TAGS = {"id", "name", "namespace", "alt_id", "is_a", "relationship", "is_obsolete",
             "replaced_by", "consider"}
KEPT_HEADER_TAGS = {"format-version", "data-version", "date", "ontology", "default-namespace",
                    "remark"}
PROPAGATING = {"is_a", "part_of"}


def experimental_sets(frame: pd.DataFrame) -> dict[str, set[str]]:
    """protein -> set of experimentally annotated GO ids (NOT rows excluded)."""
    keep = frame["evidence"].isin(EXPERIMENTAL_CODES) & ~frame["qualifier"].str.contains("NOT")
    return frame.loc[keep].groupby("protein")["term"].agg(set).to_dict()


def sample_proteins(snapshots: list[pd.DataFrame], sequences: dict[str, str]) -> tuple[list[str], dict]:
    """A seeded sample of proteins with a sequence, stratified by how their experimental
    annotation changes across the consecutive snapshots:

    - ``gain_nk``: at some step, no experimental term before and some after (NK-like growth);
    - ``gain_other``: gains new experimental terms at some step, never from nothing;
    - ``no_experimental``: in the GAFs, but never with an experimental term;
    - ``stable``: experimental terms that never grow.
    """
    sets = [experimental_sets(frame) for frame in snapshots]
    present = set().union(*(set(frame["protein"]) for frame in snapshots))
    groups: dict[str, list[str]] = defaultdict(list)
    for protein in sorted(present):
        if protein not in sequences:
            continue
        series = [s.get(protein, set()) for s in sets]
        steps = list(zip(series, series[1:]))
        if any(not before and after for before, after in steps):
            groups["gain_nk"].append(protein)
        elif any(after - before for before, after in steps):
            groups["gain_other"].append(protein)
        elif not any(series):
            groups["no_experimental"].append(protein)
        else:
            groups["stable"].append(protein)
    rng = random.Random(SEED)
    chosen: list[str] = []
    stats = {}
    for name, quota in QUOTAS.items():
        pool = groups[name]
        picked = rng.sample(pool, min(quota, len(pool)))
        stats[name] = (len(picked), len(pool))
        chosen.extend(picked)
    return sorted(chosen), stats


def subset_gaf(source: Path, target: Path, proteins: set[str], note: str) -> int:
    """Copy the header (plus a note) and the rows of ``proteins``, verbatim."""
    header = read_gaf_header(source) + [f"!{note}"]
    rows = (line for _n, line, fields in iter_gaf_lines(source)
            if fields is not None and fields[1] in proteins)
    return write_gaf_rows(target, header, rows)


def read_obo_stanzas(path: Path) -> tuple[list[str], list[list[str]]]:
    """(header lines, stanzas as line lists) of an OBO file."""
    header: list[str] = []
    stanzas: list[list[str]] = []
    with open_text(path) as handle:
        for raw in handle:
            line = raw.rstrip("\n")
            if line.startswith("["):
                stanzas.append([line])
            elif stanzas:
                if line.strip():
                    stanzas[-1].append(line)
            else:
                header.append(line)
    return header, stanzas


def _tag(line: str) -> tuple[str, str]:
    tag, _sep, value = line.partition(":")
    return tag.strip(), value.split("!")[0].strip()


def prune_obo(source: Path, target: Path, used_terms: set[str]) -> tuple[int, int]:
    """Keep the is_a/part_of ancestor closure of ``used_terms`` (resolved through alt_ids; the
    replacements of obsolete terms included) and only the tags in ``KEPT_TAGS``. Relationship
    lines pointing outside the kept set are dropped. Returns (kept terms, all terms)."""
    header, stanzas = read_obo_stanzas(source)
    parents: dict[str, set[str]] = defaultdict(set)
    extra: dict[str, set[str]] = defaultdict(set)
    alt_to_primary: dict[str, str] = {}
    terms = set()
    for stanza in stanzas:
        if stanza[0] != "[Term]":
            continue
        fields = [_tag(line) for line in stanza[1:]]
        term = next(value for tag, value in fields if tag == "id")
        terms.add(term)
        for tag, value in fields:
            if tag == "alt_id":
                alt_to_primary[value] = term
            elif tag == "is_a":
                parents[term].add(value.split()[0])
            elif tag == "relationship" and value.split()[0] in PROPAGATING:
                parents[term].add(value.split()[1])
            elif tag in ("replaced_by", "consider"):
                extra[term].add(value.split()[0])
    seeds = {alt_to_primary.get(term, term) for term in used_terms}
    seeds |= {t for term in list(seeds) for t in extra.get(term, ())}
    keep: set[str] = set()
    stack = [t for t in seeds if t in terms]
    while stack:
        term = stack.pop()
        if term in keep:
            continue
        keep.add(term)
        stack.extend(parents.get(term, ()))
        stack.extend(t for t in extra.get(term, ()) if t in terms)
    out = [line for line in header if _tag(line)[0] in KEPT_HEADER_TAGS]
    out.append(f"remark: pruned by Tempo {SCRIPT}: only the is_a/part_of ancestor closure of the "
               "terms annotated in this demo archive; def/synonym/xref/comment/subset and logical "
               "definition lines dropped")
    out.append("")
    for stanza in stanzas:
        if stanza[0] == "[Term]":
            term = next(value for tag, value in map(_tag, stanza[1:]) if tag == "id")
            if term not in keep:
                continue
            lines = [stanza[0]]
            for line in stanza[1:]:
                tag, value = _tag(line)
                if tag not in KEPT_TAGS:
                    continue
                if tag == "relationship" and value.split()[1] not in keep:
                    continue
                lines.append(line)
        else:
            lines = [line for line in stanza if _tag(line)[0] not in ("def", "comment", "xref")]
        out.extend(lines)
        out.append("")
    with atomic_write(target, mode="wb") as raw:
        with gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, filename="") as stream:
            stream.write(("\n".join(out) + "\n").encode("utf-8"))
    return len(keep), len(terms)


def build(source: Path, out: Path) -> None:
    snapshots_src = {
        "2014": read_gaf(source / GAF_2014),
        "2019": read_gaf(source / GAF_2019),
        "2022": read_gaf(source / GAF_2022),
    }
    g19 = snapshots_src["2019"]
    snapshots = [snapshots_src["2014"]]
    snapshots += [g19[g19["date"] <= int(c.replace("-", ""))] for c in DERIVED_CUTOFFS]
    snapshots += [g19, snapshots_src["2022"]]
    all_sequences = read_fasta(source / FASTA)
    proteins, stats = sample_proteins(snapshots, all_sequences)
    protein_set = set(proteins)
    print(f"sampled {len(proteins)} proteins: " +
          ", ".join(f"{k} {n} of {pool}" for k, (n, pool) in stats.items()))

    used_terms = set()
    for frame in snapshots_src.values():
        used_terms |= set(frame.loc[frame["protein"].isin(protein_set), "term"])

    sample_note = (f"subset by Tempo {SCRIPT}: only the rows of {len(proteins)} human proteins "
                   f"sampled with seed {SEED} (stratified by experimental-annotation growth); "
                   "rows otherwise verbatim")
    work = Path(tempfile.mkdtemp(prefix="tempo-demo-"))
    staging = out.parent / f".{out.name}.staging"
    try:
        files = {}
        for key, rel in (("gaf2014", GAF_2014), ("gaf2019", GAF_2019), ("gaf2022", GAF_2022)):
            name = Path(rel).name.replace(".gaf.gz", ".subset.gaf.gz")
            files[key] = work / name
            count = subset_gaf(source / rel, files[key], protein_set, sample_note)
            print(f"{name}: {count} rows")
        pruned = {}
        for key, rel in (("obo2014", OBO_2014), ("obo2019", OBO_2019), ("obo2022", OBO_2022)):
            files[key] = work / Path(rel).name.replace(".obo.gz", ".pruned.obo.gz")
            pruned[key] = prune_obo(source / rel, files[key], used_terms)
            print(f"{files[key].name}: {pruned[key][0]} of {pruned[key][1]} terms kept")
        files["fasta"] = work / "uniprot_sprot_2014-01-31_human.subset.fasta.gz"
        write_fasta(files["fasta"], {p: all_sequences[p] for p in proteins},
                    headers={p: f"sp|{p}|" for p in proteins})

        fasta_note = (f"Swiss-Prot 2014-01 sequences of the {len(proteins)} sampled proteins "
                      f"(from {FASTA}); sequences verbatim")
        obo_note = ("{src}: pruned to the is_a/part_of ancestor closure of the demo's annotated "
                    "terms ({kept} of {total} terms; alt_ids and obsolete terms kept); def, "
                    "synonym, xref, comment, subset and logical-definition lines dropped")

        def notes(gaf_src: str, obo_key: str, obo_src: str) -> dict[str, str]:
            kept, total = pruned[obo_key]
            return {"gaf": f"{gaf_src}: {sample_note}",
                    "obo": obo_note.format(src=obo_src, kept=kept, total=total),
                    "fasta": fasta_note}

        if staging.exists():
            shutil.rmtree(staging)
        staging.mkdir(parents=True)
        add_release(staging, ReleaseRequest(
            "2014-09-29", [files["gaf2014"]], files["obo2014"], fasta=files["fasta"],
            fasta_date=FASTA_DATE, provenance="derived", note=notes(GAF_2014, "obo2014", OBO_2014)))
        add_release(staging, ReleaseRequest(
            "2019-01-14", [files["gaf2019"]], files["obo2019"], fasta=files["fasta"],
            fasta_date=FASTA_DATE, provenance="derived", note=notes(GAF_2019, "obo2019", OBO_2019)))
        for cutoff in DERIVED_CUTOFFS:
            derive_release(staging, DeriveRequest(
                "2019-01-14", cutoff, cutoff, files["obo2014"], fasta=files["fasta"],
                fasta_date=FASTA_DATE, provenance="derived",
                note={k: v for k, v in notes(GAF_2019, "obo2014", OBO_2014).items() if k != "gaf"}))
        gene2go_note = (f"{GAF_2022}: derived upstream from NCBI gene2go (Bioconductor "
                        "org.Hs.eg.db 3.16.0) mapped to UniProtKB; column 14 is the snapshot date; "
                        + sample_note)
        add_release(staging, ReleaseRequest(
            "2022-09-12", [files["gaf2022"]], files["obo2022"], fasta=files["fasta"],
            fasta_date=FASTA_DATE, provenance="derived",
            note={**notes(GAF_2022, "obo2022", OBO_2022), "gaf": gene2go_note}, derived=True))
        (staging / "README.md").write_text(render_readme(staging, proteins, stats))
        if (out / "releases").exists():
            shutil.rmtree(out / "releases")
        out.mkdir(parents=True, exist_ok=True)
        shutil.move(str(staging / "releases"), str(out / "releases"))
        shutil.move(str(staging / "README.md"), str(out / "README.md"))
    finally:
        shutil.rmtree(work, ignore_errors=True)
        shutil.rmtree(staging, ignore_errors=True)
    print(summary_table(Archive(out)))


def release_counts(archive: Archive) -> list[dict]:
    rows = []
    for manifest in archive.releases():
        reader = CutoffReader(archive, manifest.cutoff)
        frame, _ = reader.gaf_frame(manifest.id)
        keep = frame["evidence"].isin(EXPERIMENTAL_CODES) & ~frame["qualifier"].str.contains("NOT")
        rows.append({
            "id": manifest.id, "as_of": manifest.as_of.isoformat(),
            "derived": "yes" + (f" (from {manifest.derived_from})" if manifest.derived_from else "")
            if manifest.derived else "no",
            "rows": len(frame), "proteins": frame["protein"].nunique(),
            "exp_rows": int(keep.sum()), "exp_proteins": frame.loc[keep, "protein"].nunique(),
            "obo": manifest.files_of("obo")[0].date.isoformat(),
        })
    return rows


def summary_table(archive: Archive) -> str:
    lines = ["| release | as_of | derived | GAF rows | proteins | experimental rows | "
             "proteins with experimental terms | OBO |", "|---|---|---|---|---|---|---|---|"]
    for r in release_counts(archive):
        lines.append(f"| {r['id']} | {r['as_of']} | {r['derived']} | {r['rows']:,} | "
                     f"{r['proteins']:,} | {r['exp_rows']:,} | {r['exp_proteins']:,} | {r['obo']} |")
    return "\n".join(lines)


def render_readme(root: Path, proteins: list[str], stats: dict) -> str:
    groups = "; ".join(f"{name} {n} (of {pool})" for name, (n, pool) in stats.items())
    return f"""# data/: the demo release archive

A small release archive of real data (human only) that the project's commands run on from the
repository alone; three of its five releases are reconstructions, marked `derived`.
It was built by `{SCRIPT}` through the archive API
(`tempo_assets.core.inputs.releases`), so every file is listed, dated and checksummed in its release's
`release.json`. Do not edit files by hand: readers verify the sha256 and refuse a mismatch.

## Releases

{summary_table(Archive(root))}

Two complete windows of four consecutive releases: 2014-09-29 / 2016-01-15 / 2017-06-15 /
2019-01-14 and 2016-01-15 / 2017-06-15 / 2019-01-14 / 2022-09-12. A release's as-of date (its
cutoff) is the latest date of any file in it, so 2014-09-29 is as of 2014-10-27 (its ontology)
and 2019-01-14 as of 2019-01-27.

## Where each file comes from

All files are subsets of `../shared/data/goa_archive` (see its `MANIFEST.tsv` for the upstream
origin and sha256 of each source file), restricted to **{len(proteins)} human proteins** that
have a Swiss-Prot 2014-01 sequence, sampled with seed {SEED} and stratified by how their
experimental annotation changes across the five snapshots: {groups}. Because they are subsets,
every file is marked `provenance: derived` with a note saying exactly what was done.

- **2014-09-29**: `goa_human_2014-09-29.gaf.gz` (UniProt-GOA, GAF 2.0, real) rows of the
  sampled proteins, verbatim; GO `go_2014-10-27.obo.gz` (real), pruned.
- **2016-01-15, 2017-06-15** (release `derived: true`): reconstructed from the 2019-01-14 release
  by keeping the GAF rows whose column-14 date is on or before the cutoff
  (`derive_release`); GO 2014-10-27, pruned. Cutting a later GAF is imperfect (annotations
  removed or re-dated before 2019 are missing; measured on the full human files at 2014-09-29:
  precision 0.93, recall 0.68 of the experimental annotations), so every number computed on these
  releases is a number on a derived snapshot.
- **2019-01-14**: `goa_human_2019-01-14.gaf.gz` (UniProt-GOA, GAF 2.1, real) rows of the
  sampled proteins, verbatim; GO `go_2019-01-27.obo.gz` (real), pruned.
- **2022-09-12** (release `derived: true`): `goa_human_2022-09-12.gaf.gz`, itself derived from
  NCBI gene2go as packaged in Bioconductor org.Hs.eg.db 3.16.0 (gene ids mapped to the
  2019-01 UniProt-GOA accessions; column 14 is the snapshot date); GO 2022-07-01, a format
  conversion of Bioconductor GO.db 3.16.0 (no definitions or synonyms), pruned.
- **Sequences** (every release): Swiss-Prot 2014-01 sequences of the sampled proteins, dated
  2014-01-31 (the month's last day).

GO pruning keeps, for each ontology, the `is_a`/`part_of` ancestor closure of every GO id the
sampled proteins are annotated with in any release (ids resolved through `alt_id`; obsolete
terms and their `replaced_by`/`consider` targets kept), with only the `id`, `name`,
`namespace`, `alt_id`, `is_a`, `relationship` (to kept terms), `is_obsolete`, `replaced_by` and
`consider` lines. Propagation, alt_id mapping and obsolete-term handling therefore give the same
results for these annotations as the full file.

## Licences and attribution

- Gene Ontology and UniProt-GOA data: CC BY 4.0. Cite the Gene Ontology Consortium (Ashburner
  et al. 2000; The Gene Ontology Consortium, Nucleic Acids Res.) and UniProt-GOA (Huntley et al.
  2015).
- UniProtKB/Swiss-Prot sequences: CC BY 4.0, the UniProt Consortium.
- The 2022 files are derived from Bioconductor GO.db / org.Hs.eg.db 3.16.0 (NCBI gene2go,
  2022-09-12; GO release 2022-07-01).

## Rebuild

```
.venv/bin/python {SCRIPT} --source ../shared/data/goa_archive --out data
.venv/bin/tempo release list data
```

The build is deterministic (seeded sample, timestamp-free gzip): rebuilding from the same
sources gives the same sha256 for every file.
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    repo = Path(__file__).resolve().parents[1]
    parser.add_argument("--source", type=Path, default=repo / ".." / "shared" / "data" / "goa_archive")
    parser.add_argument("--out", type=Path, default=repo / "data")
    args = parser.parse_args(argv)
    build(args.source, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
