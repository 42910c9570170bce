"""BLAST transfer: each target inherits the GO terms of its DIAMOND hits among annotated proteins.

score(target, term) = max percent identity / 100 over the hits (the target itself excluded)
annotated with the term or a descendant of it (terms propagated up is_a/part_of in go.obo).
Reads only the cutoff bundle ($TEMPO_INPUT, layout in docs/methods.md), runs /usr/bin/diamond
(Debian's diamond-aligner) in $TMPDIR, writes $TEMPO_OUTPUT/predictions.tsv. Standard library only.
"""
import collections
import csv
import os
import subprocess
import sys
import tempfile

INPUT, OUTPUT = os.environ["TEMPO_INPUT"], os.environ["TEMPO_OUTPUT"]
THREADS = os.environ.get("TEMPO_THREADS", "1")
NAMESPACES = {"biological_process": "BP", "molecular_function": "MF", "cellular_component": "CC"}


def read_parents(path):
    """term -> (aspect, is_a/part_of parents) of the non-obsolete terms of go.obo."""
    terms, current = {}, None
    with open(path, encoding="utf-8") as handle:
        for raw in handle:
            line = raw.split(" ! ")[0].strip()
            if line.startswith("["):
                current = {"id": None, "ns": None, "parents": [], "obsolete": False} if line == "[Term]" else None
                continue
            if current is None or ":" not in line:
                continue
            key, value = (part.strip() for part in line.split(":", 1))
            if key == "id":
                current["id"] = value
                terms[value] = current
            elif key == "namespace":
                current["ns"] = NAMESPACES.get(value)
            elif key == "is_a":
                current["parents"].append(value.split()[0])
            elif key == "relationship" and value.startswith("part_of "):
                current["parents"].append(value.split()[1])
            elif key == "is_obsolete" and value == "true":
                current["obsolete"] = True
    return {t: (v["ns"], [p for p in v["parents"] if p in terms and terms[p]["ns"] == v["ns"]])
            for t, v in terms.items() if not v["obsolete"] and v["ns"]}


def ancestors(term, parents, cache):
    if term not in cache:
        seen = {term}
        for parent in parents[term][1]:
            seen |= ancestors(parent, parents, cache)
        cache[term] = seen
    return cache[term]


def read_fasta(path):
    sequences, name = {}, None
    for line in open(path, encoding="utf-8"):
        if line.startswith(">"):
            name = line[1:].split()[0]
            sequences[name] = []
        elif name:
            sequences[name].append(line.strip())
    return {k: "".join(v) for k, v in sequences.items()}


def main():
    parents, cache = read_parents(os.path.join(INPUT, "go.obo")), {}
    annotations = collections.defaultdict(set)
    with open(os.path.join(INPUT, "annotations.tsv"), encoding="utf-8") as handle:
        for row in csv.DictReader(handle, delimiter="\t"):
            if row["term"] in parents:
                annotations[row["protein"]] |= ancestors(row["term"], parents, cache)
    sequences = read_fasta(os.path.join(INPUT, "sequences.fasta"))
    work = tempfile.mkdtemp()
    corpus = os.path.join(work, "corpus.fasta")
    with open(corpus, "w", encoding="utf-8") as out:
        out.writelines(f">{p}\n{sequences[p]}\n" for p in sorted(annotations) if p in sequences)
    db, hits = os.path.join(work, "corpus"), os.path.join(work, "hits.tsv")
    subprocess.run(["diamond", "makedb", "--in", corpus, "--db", db, "--threads", THREADS, "--quiet"], check=True)
    subprocess.run(["diamond", "blastp", "--query", os.path.join(INPUT, "targets.fasta"), "--db", db,
                    "--out", hits, "--outfmt", "6", "qseqid", "sseqid", "pident", "--evalue", "0.001",
                    "--max-target-seqs", "50", "--threads", THREADS, "--block-size", "0.5", "--quiet"], check=True)
    best = {}
    for line in open(hits, encoding="utf-8"):
        query, subject, pident = line.split("\t")
        if query == subject:
            continue
        score = float(pident) / 100
        for term in annotations.get(subject, ()):
            if score > best.get((query, term), 0.0):
                best[(query, term)] = score
    with open(os.path.join(OUTPUT, "predictions.tsv"), "w", encoding="utf-8") as out:
        out.write("AUTHOR tempo-example\nMODEL 1\nKEYWORDS sequence alignment.\n")
        out.writelines(f"{q}\t{t}\t{s:.2f}\n" for (q, t), s in sorted(best.items()) if s >= 0.005)
        out.write("END\n")
    print(f"blast transfer: {len({q for q, _ in best})} targets with hits, {len(best)} predictions", file=sys.stderr)


if __name__ == "__main__":
    main()
