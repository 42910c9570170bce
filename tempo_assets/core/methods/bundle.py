"""The cutoff bundle: exactly what a third-party method may read at cutoff ``c``.

Layout of a bundle folder (documented in ``docs/methods.md``; every file UTF-8, tab-separated
files with a header line, rows sorted):

=========================  ==================================================================
``cutoff.txt``             the cutoff date, ISO ``YYYY-MM-DD``, one line
``targets.fasta``          the proteins to predict: every protein with a sequence at ``c``
``sequences.fasta``        every sequence available at ``c`` (the reference corpus)
``annotations.tsv``        ``protein term aspect evidence``: experimental annotations at ``c``
                           (NOT rows removed, alt_ids mapped, obsolete terms dropped; not
                           propagated)
``nonexp_annotations.tsv`` the same columns for the non-experimental annotations
``go.obo``                 the GO ontology of the cutoff's release, as shipped (decompressed)
``ia.tsv``                 ``term<TAB>ia``, no header (cafaeval's format): IA from the
                           experimental annotations at ``c``
``manifest.json``          written last: each file's sha256 and size, and the row counts
=========================  ==================================================================

Targets are every protein with a sequence at the cutoff, exactly as the CAFA submission does:
which proteins will gain annotations after ``c`` is what must not be revealed, so
``targets.fasta`` and ``sequences.fasta`` hold the same proteins for a single-FASTA release.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Mapping

import pandas as pd

from tempo_assets.core.base.errors import TempoInputError
from tempo_assets.core.inputs.fasta import read_fasta, write_fasta
from tempo_assets.core.base.io import open_binary, sha256_file

ANNOTATION_COLUMNS = ["protein", "term", "aspect", "evidence"]
FILES = ("cutoff.txt", "targets.fasta", "sequences.fasta", "annotations.tsv", "nonexp_annotations.tsv",
         "go.obo", "ia.tsv")
MANIFEST = "manifest.json"

__all__ = ["ANNOTATION_COLUMNS", "FILES", "BundleContent", "read_bundle_targets", "verify_bundle",
           "write_cutoff_bundle"]


def _annotation_rows(frame: pd.DataFrame, what: str) -> pd.DataFrame:
    missing = [c for c in ANNOTATION_COLUMNS if c not in frame.columns]
    if missing:
        raise TempoInputError(f"{what} lacks columns {missing} (has {list(frame.columns)})")
    rows = frame[ANNOTATION_COLUMNS].astype(str).drop_duplicates()
    return rows.sort_values(ANNOTATION_COLUMNS, kind="mergesort").reset_index(drop=True)


@dataclass(frozen=True)
class BundleContent:
    """What a cutoff bundle holds: the targets, every sequence, the experimental and
    non-experimental annotations, the release's OBO and the IA weights, all as of the cutoff."""

    targets: Mapping[str, str]
    sequences: Mapping[str, str]
    experimental: pd.DataFrame
    non_experimental: pd.DataFrame
    obo_path: str | Path
    ia: pd.Series


def _write_tree(folder: Path, cutoff: date, content: BundleContent) -> dict:
    targets, sequences = content.targets, content.sequences
    experimental, non_experimental = content.experimental, content.non_experimental
    (folder / "cutoff.txt").write_text(cutoff.isoformat() + "\n", encoding="utf-8")
    write_fasta(folder / "targets.fasta", {p: targets[p] for p in sorted(targets)})
    write_fasta(folder / "sequences.fasta", {p: sequences[p] for p in sorted(sequences)})
    counts = {"targets": len(targets), "sequences": len(sequences)}
    for name, frame, what in (("annotations.tsv", experimental, "experimental annotations"),
                              ("nonexp_annotations.tsv", non_experimental, "non-experimental annotations")):
        rows = _annotation_rows(frame, what)
        rows.to_csv(folder / name, sep="\t", index=False, lineterminator="\n")
        counts[name.removesuffix(".tsv")] = len(rows)
    with open_binary(Path(content.obo_path)) as source, open(folder / "go.obo", "wb") as target:
        shutil.copyfileobj(source, target)
    ia = content.ia.sort_index()
    with open(folder / "ia.tsv", "w", encoding="utf-8", newline="") as handle:
        handle.writelines(f"{term}\t{float(value)!r}\n" for term, value in ia.items())
    counts["ia_terms"] = len(ia)
    files = {name: {"sha256": sha256_file(folder / name), "bytes": (folder / name).stat().st_size} for name in FILES}
    return {"cutoff": cutoff.isoformat(), "files": files, "counts": counts}


def write_cutoff_bundle(root: str | Path, cutoff: date, content: BundleContent) -> dict:
    """Write the bundle under ``root/bundle-<digest>/`` atomically; return its manifest.

    The folder name is a digest of the content (the manifest's sha256s), so a rematerialisation
    with equal inputs reuses the folder and a changed one never overwrites the bundle a stored
    artefact points to. The manifest (``folder``, ``files`` with sha256 and bytes, ``counts``)
    is also written as ``manifest.json`` inside the folder.
    """
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".bundle-", dir=root))
    try:
        manifest = _write_tree(staging, cutoff, content)
        digest = hashlib.sha256(json.dumps(manifest, sort_keys=True).encode("utf-8")).hexdigest()
        manifest["folder"] = f"bundle-{digest[:16]}"
        (staging / MANIFEST).write_text(json.dumps(manifest, sort_keys=True, indent=1) + "\n", encoding="utf-8")
        for path in staging.iterdir():
            path.chmod(0o444)
        staging.chmod(0o755)
        final = root / manifest["folder"]
        if final.exists():
            verify_bundle(final, manifest)
        else:
            os.replace(staging, final)
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
    return manifest


def verify_bundle(folder: str | Path, manifest: Mapping) -> Path:
    """``folder`` when every file of ``manifest`` is there with its sha256; raises otherwise."""
    folder = Path(folder)
    for name, entry in manifest["files"].items():
        path = folder / name
        if not path.is_file():
            raise TempoInputError("bundle file missing", path=path)
        if sha256_file(path) != entry["sha256"]:
            raise TempoInputError(f"bundle file sha256 differs from its manifest ({entry['sha256']})", path=path)
    return folder


def read_bundle_targets(folder: str | Path) -> set[str]:
    """Accessions of ``targets.fasta``."""
    return set(read_fasta(Path(folder) / "targets.fasta"))


def prune_bundles(root: str | Path, keep: set[str]) -> list[str]:
    """Remove ``bundle-*`` folders under ``root`` not named in ``keep``; returns the removed names."""
    removed = []
    for path in sorted(Path(root).glob("bundle-*")):
        if path.is_dir() and path.name not in keep:
            for item in path.iterdir():
                item.chmod(0o644)
            shutil.rmtree(path)
            removed.append(path.name)
    return removed
