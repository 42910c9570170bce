"""The names every stage shares: GO aspects, their namespaces, and the knowledge modes of a target."""
from __future__ import annotations

ASPECTS: tuple[str, ...] = ("BP", "MF", "CC")
MODES: tuple[str, ...] = ("NK", "LK", "PK")
NAMESPACE_TO_ASPECT: dict[str, str] = {
    "biological_process": "BP",
    "molecular_function": "MF",
    "cellular_component": "CC",
}
ASPECT_TO_NAMESPACE: dict[str, str] = {aspect: ns for ns, aspect in NAMESPACE_TO_ASPECT.items()}
NAMESPACES = ASPECT_TO_NAMESPACE

# Non-experimental evidence codes in groups (the recipe's non-experimental GOA features, one per group).
# ``iea``: electronic annotation; ``similarity``: ISS-like sequence/structure similarity and orthology
# transfers; ``computational``: the other computational analyses (phylogenetic IBA/IBD/IKR/IRD, genomic
# context, reviewed computational analysis); ``author``: curator and author statements without direct
# evidence (NAS; ND marks "no data" and annotates the aspect's root). A code not listed falls in
# ``computational`` (GO adds computational codes more often than any other kind).
EVIDENCE_GROUPS: dict[str, tuple[str, ...]] = {
    "iea": ("IEA",),
    "similarity": ("ISS", "ISO", "ISA", "ISM"),
    "computational": ("IBA", "IBD", "IKR", "IRD", "IGC", "RCA"),
    "author": ("NAS", "ND"),
}
DEFAULT_EVIDENCE_GROUP = "computational"


def evidence_group(code: str) -> str:
    """The group (a key of ``EVIDENCE_GROUPS``) of a non-experimental evidence code."""
    for group, codes in EVIDENCE_GROUPS.items():
        if str(code) in codes:
            return group
    return DEFAULT_EVIDENCE_GROUP
