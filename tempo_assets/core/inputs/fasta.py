"""Protein FASTA reading and writing, keyed by UniProt accession."""
from __future__ import annotations

import gzip
import hashlib
import re
from pathlib import Path
from typing import IO, Mapping

from tempo_assets.core.base.errors import TempoInputError
from tempo_assets.core.base.io import atomic_write, numbered_lines

# one-letter amino-acid codes, including the ambiguity / rare letters B J O U X Z
_RESIDUES = re.compile(r"^[A-Za-z]*\*?$")
_UNIPROT_DBS = ("sp", "tr")


class FastaFormatError(TempoInputError):
    """A FASTA file is malformed; the message names the file and the 1-based line."""


def header_accession(header: str) -> str:
    """The accession a FASTA header names.

    ``>sp|P12345|NAME_HUMAN desc`` and ``>tr|...`` give ``P12345``; a bare ``>P12345 desc``
    gives ``P12345``. Returns ``""`` when the header names nothing.
    """
    token = header.lstrip(">").split(None, 1)[0] if header.lstrip(">").strip() else ""
    if "|" in token:
        parts = token.split("|")
        if parts[0] in _UNIPROT_DBS and len(parts) >= 2:
            return parts[1]
    return token


def read_fasta(path: str | Path) -> dict[str, str]:
    """Read a protein FASTA (plain or gzip) into ``{accession: sequence}``, in file order.

    Sequences are upper-cased and a single terminal ``*`` (stop) is dropped.

    Raises
    ------
    FastaFormatError
        Sequence before the first header, a header naming no accession, an empty sequence, a
        duplicate accession, or a character that is not a residue letter; the message names the
        file and the 1-based line.
    """
    path = Path(path)
    sequences: dict[str, str] = {}
    accession: str | None = None
    header_line = 0
    chunks: list[str] = []
    stop_line: int | None = None

    def finish() -> None:
        if accession is None:
            return
        if not chunks:
            raise FastaFormatError(f"empty sequence for {accession!r}", path, header_line)
        sequences[accession] = "".join(chunks).upper()

    number = 0
    for number, line in numbered_lines(path):
        line = line.strip()
        if not line:
            continue
        if line.startswith(">"):
            finish()
            accession = header_accession(line)
            if not accession:
                raise FastaFormatError("header names no accession", path, number)
            if accession in sequences:
                raise FastaFormatError(f"duplicate accession {accession!r}", path, number)
            header_line, chunks, stop_line = number, [], None
            continue
        if accession is None:
            raise FastaFormatError("sequence data before the first '>' header", path, number)
        if stop_line is not None:
            raise FastaFormatError(
                f"'*' (stop) inside the sequence of {accession!r}; only allowed at its end",
                path, stop_line,
            )
        if not _RESIDUES.match(line):
            _refuse_illegal_character(line, accession, path, number)
        if line.endswith("*"):
            stop_line = number
            line = line[:-1]
        if line:
            chunks.append(line)
    finish()
    if not sequences:
        raise FastaFormatError("no sequences", path, number or 1)
    return sequences


def _refuse_illegal_character(line: str, accession: str, path: Path, number: int) -> None:
    """Raise naming the first character of a sequence line that is not a residue letter."""
    bad = next(
        (c for i, c in enumerate(line)
         if not (c.isascii() and c.isalpha()) and not (c == "*" and i == len(line) - 1)),
        line[0],
    )
    raise FastaFormatError(
        f"illegal character {bad!r} in the sequence of {accession!r} "
        "(expected residue letters, '*' only at the end)", path, number,
    )


def write_fasta(
    path: str | Path,
    sequences: Mapping[str, str],
    width: int = 60,
    headers: Mapping[str, str] | None = None,
) -> None:
    """Write ``{accession: sequence}`` atomically, ``width`` residues a line; gzip (with no
    timestamp, so the bytes are reproducible) when ``path`` ends ``.gz``.

    Each header is ``>`` plus ``headers[accession]`` when given, else the bare accession.
    """
    path = Path(path)
    with atomic_write(path, mode="wb") as raw:
        stream: IO[bytes] = gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, filename="") \
            if path.name.endswith(".gz") else raw
        try:
            for accession, sequence in sequences.items():
                if not sequence:
                    raise FastaFormatError(f"empty sequence for {accession!r}", path)
                title = headers.get(accession, accession) if headers else accession
                stream.write(f">{title}\n".encode("utf-8"))
                for start in range(0, len(sequence), width):
                    stream.write(sequence[start:start + width].encode("ascii") + b"\n")
        finally:
            if stream is not raw:
                stream.close()


def sequence_sha256(sequence: str) -> str:
    """Hex sha256 of a sequence's upper-case residues (a trailing ``*`` ignored)."""
    return hashlib.sha256(sequence.strip().rstrip("*").upper().encode("ascii")).hexdigest()
