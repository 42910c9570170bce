"""Reading release files at a cutoff: ``CutoffReader`` refuses (``CutoffViolation``) any file
dated after its cutoff, drops GAF rows whose column-14 date is after it, verifies every file's
sha256 on read, and records what it read so assets can publish ``sources`` and
``max_source_date``.
"""
from __future__ import annotations

from datetime import date
from pathlib import Path

import pandas as pd

from tempo_assets.core.base.dates import date_to_int, parse_date
from tempo_assets.core.base.errors import CutoffViolation
from tempo_assets.core.inputs.fasta import read_fasta
from tempo_assets.core.inputs.gaf import read_gaf
from tempo_assets.core.inputs.ontology import parse_obo
from tempo_assets.core.inputs.releases import (
    Archive, ArchiveError, MANIFEST_NAME, RELEASES_DIR, ReleaseManifest, _verify_sha256,
)


class CutoffReader:
    """Reads release files at a cutoff, refusing anything dated after it.

    Every read checks the file's date (``CutoffViolation`` when after the cutoff) and sha256,
    and is recorded in ``sources``. GAF rows whose column-14 date is after the cutoff are dropped
    and counted (``dropped_by_file``).
    """

    def __init__(self, archive: Archive | str | Path, cutoff: date | str):
        self.archive = archive if isinstance(archive, Archive) else Archive(archive)
        self.cutoff = parse_date(cutoff)
        self.sources: list[dict] = []
        self.dropped_by_file: dict[str, int] = {}

    def __repr__(self) -> str:
        return f"CutoffReader({self.archive!r}, cutoff={self.cutoff.isoformat()})"

    @property
    def max_source_date(self) -> date | None:
        """The latest date of any file read so far (None before the first read)."""
        dates = [parse_date(source["date"]) for source in self.sources]
        return max(dates) if dates else None

    def release(self, release_id: str) -> ReleaseManifest:
        """The manifest (reading a manifest reads no data, so it is not cutoff-checked)."""
        return self.archive.release(release_id)

    def _open(self, release_id: str, kind: str, required: bool = True) -> list[Path]:
        manifest = self.archive.release(release_id)
        entries = manifest.files_of(kind)
        if not entries and required:
            raise ArchiveError(f"release {release_id!r} has no {kind} file", manifest.folder / MANIFEST_NAME)
        paths = []
        for entry in entries:
            path = manifest.file_path(entry)
            if entry.date > self.cutoff:
                raise CutoffViolation(path, entry.date, self.cutoff, what=f"{kind} file")
            _verify_sha256(path, entry.sha256)
            record = {
                "release": manifest.id,
                "path": f"{RELEASES_DIR}/{manifest.id}/{entry.path}",
                "kind": kind,
                "sha256": entry.sha256,
                "date": entry.date.isoformat(),
                "provenance": entry.provenance,
            }
            if record not in self.sources:
                self.sources.append(record)
            paths.append(path)
        return paths

    def gaf_frame(self, release_id: str) -> tuple[pd.DataFrame, int]:
        """All GAF rows of a release dated on or before the cutoff, concatenated.

        Returns
        -------
        (frame, dropped)
            ``frame`` has ``read_gaf``'s columns; ``dropped`` counts rows removed because
            their column-14 date is after the cutoff (per file in ``dropped_by_file``).
        """
        limit = date_to_int(self.cutoff)
        frames = []
        dropped = 0
        for path in self._open(release_id, "gaf"):
            frame = read_gaf(path)
            keep = frame["date"].to_numpy() <= limit
            count = int((~keep).sum())
            key = f"{RELEASES_DIR}/{release_id}/{path.name}"
            self.dropped_by_file[key] = count
            dropped += count
            frames.append(frame[keep] if count else frame)
        frame = frames[0] if len(frames) == 1 else pd.concat(frames, ignore_index=True)
        return frame.reset_index(drop=True), dropped

    def ontology(self, release_id: str):
        """The release's GO ontology (``tempo_assets.core.inputs.ontology.parse_obo``)."""
        paths = self._open(release_id, "obo")
        return parse_obo(paths[0])

    def obo_path(self, release_id: str) -> Path:
        """The release's OBO file path (checked and recorded like any read)."""
        return self._open(release_id, "obo")[0]

    def sequences(self, release_id: str) -> dict[str, str]:
        """``{accession: sequence}`` from the release's FASTA file(s)."""
        sequences: dict[str, str] = {}
        for path in self._open(release_id, "fasta"):
            sequences.update(read_fasta(path))
        return sequences

    def embeddings_path(self, release_id: str) -> Path:
        """The release's embeddings file (checked and recorded; the caller loads it)."""
        return self._open(release_id, "embeddings")[0]

    def has(self, release_id: str, kind: str) -> bool:
        """Whether the release has a file of ``kind`` (reads nothing)."""
        return bool(self.archive.release(release_id).files_of(kind))
