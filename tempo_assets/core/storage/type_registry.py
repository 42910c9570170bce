"""The types an artefact store can encode field by field: frozen dataclasses and codec pairs.

``core/storage/artefact_types.py`` registers the typed artefacts here; ``core/storage/artefacts.py``
encodes and decodes them. Kept apart so the two import one way.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable


TYPES: dict[str, type] = {}
CODECS: dict[str, tuple[type, Callable[[Any], dict], Callable[[dict], Any]]] = {}


def register_type(cls: type) -> type:
    """Register a frozen dataclass as a storable artefact type (its fields are encoded one by one)."""
    if not dataclasses.is_dataclass(cls):
        raise TypeError(f"{cls.__name__} is not a dataclass")
    TYPES[cls.__name__] = cls
    return cls


def register_codec(cls: type, to_fields: Callable[[Any], dict], from_fields: Callable[[dict], Any]) -> None:
    """Register a non-dataclass type by a pair of functions to and from a dict of encodable fields."""
    CODECS[cls.__name__] = (cls, to_fields, from_fields)


class ModelText(str):
    """A model in its library's own text format (LightGBM's model text): stored as a ``.txt`` part of its
    artefact, readable by that library directly, not escaped into the JSON manifest."""
