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
