"""Tiny OBO files written by tests (parsed with the real ``parse_obo``, not mocked)."""
from __future__ import annotations

from pathlib import Path

NAMESPACES = {"BP": "biological_process", "MF": "molecular_function",
              "CC": "cellular_component"}
ROOTS = {"BP": "GO:0008150", "MF": "GO:0003674", "CC": "GO:0005575"}


def write_obo(path: Path, terms: list[dict], data_version: str = "releases/2019-01-27") -> Path:
    """Write ``terms`` (dicts: id, aspect, is_a=[], part_of=[], alt_ids=[], obsolete=False)."""
    lines = ["format-version: 1.2", f"data-version: {data_version}", ""]
    for term in terms:
        lines += ["[Term]", f"id: {term['id']}", f"name: {term['id']} name",
                  f"namespace: {NAMESPACES[term['aspect']]}"]
        lines += [f"alt_id: {alt}" for alt in term.get("alt_ids", [])]
        lines += [f"is_a: {parent} ! parent" for parent in term.get("is_a", [])]
        lines += [f"relationship: part_of {parent} ! parent" for parent in term.get("part_of", [])]
        if term.get("obsolete"):
            lines.append("is_obsolete: true")
        lines.append("")
    path.write_text("\n".join(lines), encoding="utf-8")
    return path


def small_terms() -> list[dict]:
    """Three namespaces; a two-parent term, an alt_id, an obsolete term, a cross-namespace edge."""
    return [
        {"id": ROOTS["BP"], "aspect": "BP"},
        {"id": "GO:0000001", "aspect": "BP", "is_a": [ROOTS["BP"]]},
        {"id": "GO:0000002", "aspect": "BP", "is_a": [ROOTS["BP"]]},
        {"id": "GO:0000003", "aspect": "BP", "is_a": ["GO:0000001"], "part_of": ["GO:0000002"]},
        {"id": "GO:0000004", "aspect": "BP", "is_a": ["GO:0000003"], "alt_ids": ["GO:0000044"]},
        {"id": "GO:0000005", "aspect": "BP", "is_a": ["GO:0000001"], "obsolete": True},
        {"id": ROOTS["MF"], "aspect": "MF"},
        {"id": "GO:0000010", "aspect": "MF", "is_a": [ROOTS["MF"]]},
        {"id": "GO:0000011", "aspect": "MF", "is_a": ["GO:0000010"]},
        {"id": "GO:0000012", "aspect": "MF", "is_a": ["GO:0000010"], "part_of": ["GO:0000001"]},
        {"id": ROOTS["CC"], "aspect": "CC"},
        {"id": "GO:0000020", "aspect": "CC", "is_a": [ROOTS["CC"]]},
        {"id": "GO:0000021", "aspect": "CC", "part_of": ["GO:0000020"]},
        {"id": "GO:0000022", "aspect": "CC", "is_a": ["GO:0000021", "GO:0000020"]},
    ]


def random_terms(rng, n_per_aspect: int = 12) -> list[dict]:
    """A random DAG per namespace: each term picks 1-3 parents among earlier terms."""
    terms: list[dict] = []
    counter = 100
    for aspect, root in ROOTS.items():
        ids = [root]
        terms.append({"id": root, "aspect": aspect})
        for _ in range(n_per_aspect):
            counter += 1
            term = f"GO:{counter:07d}"
            k = int(rng.integers(1, min(3, len(ids)) + 1))
            parents = [str(p) for p in rng.choice(ids, size=k, replace=False)]
            split = int(rng.integers(0, k + 1))
            terms.append({"id": term, "aspect": aspect, "is_a": parents[:split] or parents[:1],
                          "part_of": parents[split:] if split else parents[1:]})
            ids.append(term)
    return terms
