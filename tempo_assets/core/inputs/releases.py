"""The release archive: dated bundles of GAF, OBO, FASTA and embedding files, and the only
sanctioned way to read them at a cutoff.

Layout: ``ROOT/releases/<id>/release.json`` plus the release's files in that folder. The
manifest records each file's own date (GAF ``!Generated:``, OBO ``data-version``, or a declared
date) and sha256; a release's ``as_of`` is the latest of its files' dates (docs/PROTOCOL.md), and that
is its cutoff. ``CutoffReader`` (``cutoff_reader.py``) refuses (``CutoffViolation``) to read any
file dated after its cutoff; ``add_release`` and ``derive_release`` (``new_releases.py``) are how a
release enters the archive.
"""
from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Mapping, Sequence

from tempo_assets.core.base.dates import parse_date
from tempo_assets.core.base.errors import TempoInputError
from tempo_assets.core.base.io import sha256_file

MANIFEST_NAME = "release.json"
RELEASES_DIR = "releases"
FILE_KINDS = ("gaf", "obo", "fasta", "embeddings")
PROVENANCES = ("real", "derived")
_RELEASE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
_GENERATED = re.compile(r"^!\s*(Generated|date-generated)\s*:", re.IGNORECASE)


class ArchiveError(TempoInputError):
    """The archive, a manifest or a release request is invalid."""


@dataclass(frozen=True)
class ReleaseFile:
    """One file of a release, as its manifest lists it."""

    path: str
    kind: str
    date: date
    sha256: str
    provenance: str
    note: str | None = None

    def to_dict(self) -> dict:
        return {
            "path": self.path, "kind": self.kind, "date": self.date.isoformat(),
            "sha256": self.sha256, "provenance": self.provenance, "note": self.note,
        }


@dataclass(frozen=True)
class ReleaseManifest:
    """A release's manifest; ``folder`` is where its files live (not stored in the JSON)."""

    id: str
    as_of: date
    derived: bool
    derived_from: str | None
    species: tuple[str, ...]
    files: tuple[ReleaseFile, ...]
    folder: Path = field(compare=False)
    declared_date: date | None = None

    @property
    def cutoff(self) -> date:
        """A release's cutoff is its as-of date."""
        return self.as_of

    def files_of(self, kind: str) -> list[ReleaseFile]:
        """The files of one kind (``gaf``, ``obo``, ``fasta``, ``embeddings``), in manifest order."""
        if kind not in FILE_KINDS:
            raise ArchiveError(f"unknown file kind {kind!r} (expected one of {', '.join(FILE_KINDS)})")
        return [entry for entry in self.files if entry.kind == kind]

    def file_path(self, entry: ReleaseFile) -> Path:
        return self.folder / entry.path

    def to_dict(self) -> dict:
        return {
            "id": self.id,
            "as_of": self.as_of.isoformat(),
            "declared_date": self.declared_date.isoformat() if self.declared_date else None,
            "derived": self.derived,
            "derived_from": self.derived_from,
            "species": list(self.species),
            "files": [entry.to_dict() for entry in self.files],
        }

    @classmethod
    def load(cls, manifest_path: str | Path) -> "ReleaseManifest":
        """Read and validate ``release.json``; errors name the file and the key at fault."""
        manifest_path = Path(manifest_path)
        if not manifest_path.is_file():
            raise ArchiveError("release manifest is missing", manifest_path)
        try:
            data = json.loads(manifest_path.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise ArchiveError(f"release manifest is not valid JSON ({exc})", manifest_path) from None
        if not isinstance(data, dict):
            raise ArchiveError("release manifest must be a JSON object", manifest_path)
        return cls.from_dict(data, manifest_path)

    @classmethod
    def from_dict(cls, data: Mapping, manifest_path: Path) -> "ReleaseManifest":
        release_id = _need(data, "id", str, manifest_path)
        folder = manifest_path.parent
        if release_id != folder.name:
            raise ArchiveError(
                f"key 'id' is {release_id!r} but the release folder is {folder.name!r}", manifest_path
            )
        as_of = _manifest_date(_need(data, "as_of", str, manifest_path), "as_of", manifest_path)
        declared = data.get("declared_date")
        declared_date = _manifest_date(declared, "declared_date", manifest_path) if declared is not None else None
        derived = _need(data, "derived", bool, manifest_path)
        derived_from = data.get("derived_from")
        if derived_from is not None and not isinstance(derived_from, str):
            raise ArchiveError(f"key 'derived_from' has the wrong type ({derived_from!r})", manifest_path)
        species = _need(data, "species", list, manifest_path)
        files_data = _need(data, "files", list, manifest_path)
        if not files_data:
            raise ArchiveError("key 'files' is empty", manifest_path)
        files = [_manifest_file(item, index, manifest_path) for index, item in enumerate(files_data)]
        _check_manifest_files(files, as_of, manifest_path)
        return cls(
            id=release_id, as_of=as_of, derived=derived, derived_from=derived_from,
            species=tuple(str(s) for s in species), files=tuple(files), folder=folder,
            declared_date=declared_date,
        )


def _need(container: Mapping, key: str, types, manifest_path: Path, where: str = ""):
    """``container[key]``, refused when missing or of the wrong type (naming ``where + key``)."""
    if key not in container:
        raise ArchiveError(f"missing key '{where}{key}'", manifest_path)
    value = container[key]
    if not isinstance(value, types):
        raise ArchiveError(f"key '{where}{key}' has the wrong type ({value!r})", manifest_path)
    return value


def _manifest_date(value: str, key: str, manifest_path: Path) -> date:
    try:
        return parse_date(value)
    except ValueError:
        raise ArchiveError(f"key {key!r} is not a date: {value!r}", manifest_path) from None


def _manifest_file(item, index: int, manifest_path: Path) -> ReleaseFile:
    """One entry of a manifest's ``files`` list, validated key by key."""
    where = f"files[{index}]."
    if not isinstance(item, dict):
        raise ArchiveError(f"key 'files[{index}]' must be an object", manifest_path)
    kind = _need(item, "kind", str, manifest_path, where)
    if kind not in FILE_KINDS:
        raise ArchiveError(f"key '{where}kind' is {kind!r}, not one of {FILE_KINDS}", manifest_path)
    provenance = _need(item, "provenance", str, manifest_path, where)
    if provenance not in PROVENANCES:
        raise ArchiveError(
            f"key '{where}provenance' is {provenance!r}, not one of {PROVENANCES}", manifest_path
        )
    rel_path = _need(item, "path", str, manifest_path, where)
    if Path(rel_path).is_absolute() or ".." in Path(rel_path).parts:
        raise ArchiveError(f"key '{where}path' must stay inside the release folder", manifest_path)
    sha = _need(item, "sha256", str, manifest_path, where)
    if not re.fullmatch(r"[0-9a-f]{64}", sha):
        raise ArchiveError(f"key '{where}sha256' is not a hex sha256: {sha!r}", manifest_path)
    note = item.get("note")
    file_date = _manifest_date(_need(item, "date", str, manifest_path, where), where + "date", manifest_path)
    return ReleaseFile(
        path=rel_path, kind=kind, date=file_date,
        sha256=sha, provenance=provenance, note=note if note is None else str(note),
    )


def _check_manifest_files(files: Sequence[ReleaseFile], as_of: date, manifest_path: Path) -> None:
    """``as_of`` is the latest file date, and the release has a GAF."""
    latest = max(entry.date for entry in files)
    if as_of != latest:
        raise ArchiveError(
            f"key 'as_of' is {as_of.isoformat()} but the latest file date is {latest.isoformat()}; "
            "a release's as-of date is the latest date of any file it uses", manifest_path,
        )
    if not any(entry.kind == "gaf" for entry in files):
        raise ArchiveError("key 'files' lists no GAF", manifest_path)


class Archive:
    """A release archive rooted at ``root`` (``root/releases/<id>/release.json``)."""

    def __init__(self, root: str | Path):
        self.root = Path(root)
        if not self.root.is_dir():
            raise ArchiveError("archive folder does not exist", self.root)

    def __repr__(self) -> str:
        return f"Archive({str(self.root)!r})"

    @property
    def releases_dir(self) -> Path:
        return self.root / RELEASES_DIR

    def releases(self) -> list[ReleaseManifest]:
        """Every release, oldest first (by as-of date, then id)."""
        if not self.releases_dir.is_dir():
            return []
        manifests = [
            ReleaseManifest.load(folder / MANIFEST_NAME)
            for folder in self.releases_dir.iterdir()
            if folder.is_dir() and not folder.name.startswith(".")
        ]
        return sorted(manifests, key=lambda m: (m.as_of, m.id))

    def _folder_names(self) -> list[str]:
        if not self.releases_dir.is_dir():
            return []
        return sorted(p.name for p in self.releases_dir.iterdir() if p.is_dir() and not p.name.startswith("."))

    def ids(self) -> list[str]:
        return [manifest.id for manifest in self.releases()]

    def release(self, release_id: str) -> ReleaseManifest:
        folder = self.releases_dir / str(release_id)
        if not _RELEASE_ID.match(str(release_id)) or not folder.is_dir():
            known = ", ".join(self._folder_names()) or "none"
            raise ArchiveError(f"no release {release_id!r} in this archive (known: {known})", self.root)
        return ReleaseManifest.load(folder / MANIFEST_NAME)

    def cutoff_of(self, release_id: str) -> date:
        """The cutoff of a release: its as-of date."""
        return self.release(release_id).as_of

    def releases_as_of(self, cutoff: date | str) -> list[ReleaseManifest]:
        """The releases whose as-of date is on or before ``cutoff``, oldest first."""
        cutoff = parse_date(cutoff)
        return [m for m in self.releases() if m.as_of <= cutoff]


# ----------------------------------------------------------------------------------------------
# a file against its manifest (read at a cutoff, cut into a derived release)


def _verify_sha256(path: Path, expected: str) -> None:
    if not path.is_file():
        raise ArchiveError("release file is missing", path)
    actual = sha256_file(path)
    if actual != expected:
        raise ArchiveError(
            f"sha256 mismatch: the manifest expects {expected}, the file has {actual}; "
            "the file changed after it was archived", path,
        )


# --------------------------------------------------------------------------------------------
# one cached Archive per root


def _manifest_stamp(root: str) -> tuple:
    folder = Path(root) / "releases"
    if not folder.is_dir():
        return ()
    stamps = [(str(m), m.stat().st_mtime_ns) for m in sorted(folder.glob("*/release.json"))]
    windows = Path(root) / "windows.yaml"
    if windows.exists():
        stamps.append((str(windows), windows.stat().st_mtime_ns))
    return tuple(stamps)


@functools.lru_cache(maxsize=16)
def _open_archive(root: str, stamp: tuple) -> Archive:
    return Archive(root)


def open_archive(root: str | Path) -> Archive:
    """The :class:`Archive` at ``root`` (cached until a manifest or ``windows.yaml`` changes)."""
    root = str(root)
    if not (Path(root) / "releases").is_dir():
        raise TempoInputError("not a release archive (no releases/ folder)", path=root)
    return _open_archive(root, _manifest_stamp(root))


def archive_release_dates(root: str | Path) -> tuple[list[str], dict[str, date]]:
    """Release ids oldest first and each release's as-of date (its cutoff)."""
    manifests = open_archive(root).releases()
    return [m.id for m in manifests], {m.id: parse_date(m.as_of) for m in manifests}
