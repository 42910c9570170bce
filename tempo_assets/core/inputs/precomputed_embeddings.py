"""Precomputed per-protein embeddings: reading an ``.npz``, HDF5 (as UniProt ships ProtT5) or
parquet file, validated (unique non-empty ids, finite numeric rows of one width), and
``PrecomputedEmbedder``, which serves a file's rows as an embedder.
"""
from __future__ import annotations

import re
import zipfile
from pathlib import Path
from typing import Iterable

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from tempo_assets.core.base.io import sha256_file
from tempo_assets.core.inputs.embedders import EmbeddingFormatError, normalize_rows


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
