"""Can DIAMOND search each distinct query sequence once and give its copies the same hits?

Two questions, on a sample of Swiss-Prot 2014-01 query sequences rich in duplicates, against the
whole FASTA as database (``diamond blastp``, bench_scale's flags: default mode, e-value 1e-3, 250
targets per query, 2 threads):

1. In one run, does every copy of a sequence get its first copy's hits (each with its own self hit
   dropped, as Tempo's ``best_hsps`` does)?
2. Does a query's list stay the same when its copies are left out of the query set?

Deduplicating DIAMOND's queries is exact only if both hold for every query; the script counts
the queries where they do not, with examples.

    nice -n 5 .venv/bin/python benchmarks/diamond_duplicates.py [--groups 600] [--singles 1500] [--seed 0]
"""
from __future__ import annotations

import argparse
import collections
import random
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))
from tempo_assets.core.inputs.fasta import read_fasta, write_fasta  # noqa: E402

FLAGS = ["--outfmt", "6", "qseqid", "sseqid", "pident", "bitscore", "evalue", "--evalue", "0.001",
         "--max-target-seqs", "250", "--threads", "2"]


def hits_of(path: Path) -> dict[str, list[tuple[str, ...]]]:
    out = collections.defaultdict(list)
    for line in open(path):
        query, *rest = line.rstrip("\n").split("\t")
        out[query].append(tuple(rest))
    return out


def blastp(work: Path, name: str, sequences: dict[str, str]) -> dict[str, list[tuple[str, ...]]]:
    write_fasta(work / f"{name}.fasta", sequences)
    subprocess.run(["diamond", "blastp", "--query", str(work / f"{name}.fasta"), "--db", str(work / "corpus.dmnd"),
                    "--out", str(work / f"{name}.tsv"), *FLAGS, "--tmpdir", str(work)], check=True, capture_output=True)
    return hits_of(work / f"{name}.tsv")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fasta", type=Path, default=REPO / ".cache" / "swissprot_2014-01.fasta.gz")
    parser.add_argument("--groups", type=int, default=600, help="groups of identical sequences among the queries")
    parser.add_argument("--singles", type=int, default=1500, help="queries whose sequence is unique")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--work", type=Path, default=REPO / "bench_out" / "diamond_duplicates")
    args = parser.parse_args(argv)
    sequences = read_fasta(args.fasta)
    by_sequence = collections.defaultdict(list)
    for accession, sequence in sequences.items():
        by_sequence[sequence].append(accession)
    rng = random.Random(args.seed)
    groups = [sorted(v) for v in by_sequence.values() if len(v) > 1]
    rng.shuffle(groups)
    groups = groups[:args.groups]
    singles = rng.sample([v[0] for v in by_sequence.values() if len(v) == 1], args.singles)
    args.work.mkdir(parents=True, exist_ok=True)
    if not (args.work / "corpus.dmnd").exists():
        write_fasta(args.work / "corpus.fasta", sequences)
        subprocess.run(["diamond", "makedb", "--in", str(args.work / "corpus.fasta"), "--db",
                        str(args.work / "corpus.dmnd"), "--threads", "2"], check=True, capture_output=True)
    every = blastp(args.work, "every", {a: sequences[a] for g in groups for a in g} | {a: sequences[a] for a in singles})
    firsts = [g[0] for g in groups] + singles
    alone = blastp(args.work, "distinct", {a: sequences[a] for a in firsts})
    print(f"{sum(map(len, groups)) + len(singles):,} queries ({len(groups)} groups of identical sequences, "
          f"largest {max(map(len, groups))}; {len(singles):,} unique) against {len(sequences):,}")
    moved = [a for a in firsts if sorted(every.get(a, [])) != sorted(alone.get(a, []))]
    print(f"1. distinct queries whose hits change when their copies are left out: {len(moved)} of {len(firsts):,}")
    differ = []
    for group in groups:
        for member in group[1:]:
            own = {h for h in every.get(member, []) if h[0] != member}
            via_first = {h for h in every.get(group[0], []) if h[0] != member}
            if own != via_first:
                differ.append((group[0], member, len(group), sorted({h[0] for h in own ^ via_first})[:4]))
    print(f"2. copies whose hits (self dropped) differ from their first copy's (the copy dropped): {len(differ)} "
          f"of {sum(len(g) - 1 for g in groups):,}")
    for first, member, size, subjects in differ[:3]:
        print(f"   e.g. {member} (copy of {first}, group of {size}): subjects in one list only {subjects}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
