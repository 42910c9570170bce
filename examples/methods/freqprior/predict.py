"""Frequency prior: every target gets its aspect's most frequent GO terms at the cutoff.

Reads only the cutoff bundle ($TEMPO_INPUT, layout in docs/methods.md) and writes
$TEMPO_OUTPUT/predictions.tsv. Standard library only, so the system python3 runs it in the fence.
Usage: python3 predict.py [TOP_TERMS_PER_ASPECT]
"""
import collections
import csv
import os
import sys

INPUT, OUTPUT = os.environ["TEMPO_INPUT"], os.environ["TEMPO_OUTPUT"]
TOP = int(sys.argv[1]) if len(sys.argv) > 1 else 30
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


def main():
    parents, cache = read_parents(os.path.join(INPUT, "go.obo")), {}
    by_aspect = collections.defaultdict(lambda: collections.defaultdict(set))
    with open(os.path.join(INPUT, "annotations.tsv"), encoding="utf-8") as handle:
        for row in csv.DictReader(handle, delimiter="\t"):
            if row["term"] in parents:
                for term in ancestors(row["term"], parents, cache):
                    by_aspect[parents[term][0]][term].add(row["protein"])
    prior = []
    for aspect, terms in sorted(by_aspect.items()):
        annotated = len(set().union(*terms.values()))
        ranked = sorted(terms.items(), key=lambda item: (-len(item[1]), item[0]))[:TOP]
        prior += [(term, len(proteins) / annotated) for term, proteins in ranked]
    targets = [line[1:].split()[0] for line in open(os.path.join(INPUT, "targets.fasta"), encoding="utf-8")
               if line.startswith(">")]
    with open(os.path.join(OUTPUT, "predictions.tsv"), "w", encoding="utf-8") as out:
        out.write("AUTHOR tempo-example\nMODEL 1\nKEYWORDS naive.\n")
        for target in targets:
            out.writelines(f"{target}\t{term}\t{score:.2f}\n" for term, score in prior if score >= 0.005)
        out.write("END\n")
    print(f"frequency prior: {len(targets)} targets x {len(prior)} terms", file=sys.stderr)


if __name__ == "__main__":
    main()
