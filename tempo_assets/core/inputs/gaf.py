"""GAF (GO Annotation File) 2.0 / 2.1 / 2.2 reading and writing.

The fast path hands the file to pandas' C tokenizer and validates whole columns at once; only
when that validation fails does a slow line-by-line pass run, to name the first offending line.
Header lines (``!...``) are only allowed before the first data row, as the GAF specification
places them.
"""
from __future__ import annotations

import gzip
import re
from datetime import date
from pathlib import Path
from typing import IO, Iterable, Iterator, Sequence

import numpy as np
import pandas as pd

from tempo_assets.core.base.errors import DamagedFileError, TempoInputError
from tempo_assets.core.base.io import atomic_write, numbered_lines, open_binary

#: GAF 2.x has 17 tab-separated columns; the last two (annotation extension, gene product form)
#: are optional and some writers drop them, so 15 or 16 columns are accepted as well.
GAF_MAX_COLUMNS = 17
GAF_MIN_COLUMNS = 15

#: The columns ``read_gaf`` returns, in order.
GAF_COLUMNS = (
    "db", "protein", "symbol", "qualifier", "term", "evidence", "aspect", "taxon", "date",
    "assigned_by",
)

# 0-based GAF column index of each returned column
_COLUMN_INDEX = {
    "db": 0, "protein": 1, "symbol": 2, "qualifier": 3, "term": 4, "evidence": 6, "aspect": 8,
    "taxon": 12, "date": 13, "assigned_by": 14,
}
_REQUIRED = ("db", "protein", "term", "evidence", "aspect", "taxon", "date", "assigned_by")
ASPECT_CODES = {"P": "BP", "F": "MF", "C": "CC"}
SUPPORTED_VERSIONS = ("2.0", "2.1", "2.2")

_VERSION_LINE = re.compile(r"^!\s*gaf-version\s*:\s*(\S+)", re.IGNORECASE)
_GENERATED_LINE = re.compile(
    r"^!\s*(?:Generated|date-generated)\s*:\s*(\d{4})-(\d{2})-(\d{2})", re.IGNORECASE
)
_GO_ID = re.compile(r"^GO:\d{7}$")
_DATE8 = re.compile(r"^\d{8}$")


class GafFormatError(TempoInputError):
    """A GAF file is malformed; the message names the file and the 1-based line."""


def read_gaf_header(path: str | Path) -> list[str]:
    """Return the header lines (those starting with ``!`` before the first data row), with their
    ``!`` but without line endings."""
    return _read_header(path)[0]


def _read_header(path: str | Path) -> tuple[list[str], int]:
    """Header lines and the number of physical lines they span (blank lines among them too)."""
    header: list[str] = []
    consumed = 0
    for _number, line in numbered_lines(path):
        if line.startswith("!"):
            header.append(line.rstrip("\r\n"))
        elif line.strip():
            break
        consumed += 1
    return header, consumed


def gaf_version(path: str | Path) -> str | None:
    """The ``!gaf-version:`` of a GAF file (``"2.1"``), or None when the header has none."""
    for line in read_gaf_header(path):
        match = _VERSION_LINE.match(line)
        if match:
            return match.group(1)
    return None


def gaf_generated_date(path: str | Path) -> date | None:
    """The date a GAF file was generated, from ``!Generated: 2019-01-14 09:47`` or GAF 2.2's
    ``!date-generated: 2022-09-12``; None when the header carries neither."""
    return header_generated_date(read_gaf_header(path), path)


def header_generated_date(header: Sequence[str], path: str | Path | None = None) -> date | None:
    """The generated date found in already-read header lines (see ``gaf_generated_date``)."""
    for number, line in enumerate(header, start=1):
        match = _GENERATED_LINE.match(line)
        if match:
            try:
                return date(*(int(part) for part in match.groups()))
            except ValueError:
                raise GafFormatError(f"invalid generated date in header: {line!r}", path, number)
    return None


def read_gaf(path: str | Path) -> pd.DataFrame:
    """Read a GAF 2.x file (plain or gzip, detected by magic bytes) into a frame.

    Returns
    -------
    pandas.DataFrame
        One row per annotation line, columns ``GAF_COLUMNS``: strings, except ``aspect``
        (``BP``/``MF``/``CC`` from GAF ``P``/``F``/``C``) and ``date`` (int32 ``yyyymmdd``, GAF
        column 14). ``taxon`` is kept as written (``taxon:9606``, or ``taxon:9606|taxon:562``).

    Raises
    ------
    GafFormatError
        Empty file, no ``!gaf-version`` header, an unsupported version, no data rows, or a
        malformed row (column count, missing required field, bad aspect, bad date, bad GO id);
        the message names the file and the 1-based line.
    DamagedFileError
        A gzip stream that is truncated or corrupt; the message names the file and the line.
    """
    path = Path(path)
    header, skip = _read_header(path)
    _check_header(path, header)
    names = list(range(GAF_MAX_COLUMNS))
    try:
        with open_binary(path) as handle:
            raw = pd.read_csv(
                # every column is read (no usecols): only then does the C tokenizer reject a row
                # with too many fields instead of silently truncating it
                handle, sep="\t", header=None, names=names, skiprows=skip,
                dtype=str, na_filter=False, quoting=3, engine="c", encoding="utf-8",
                encoding_errors="replace", skip_blank_lines=True,
            )
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError, DamagedFileError):
        _raise_first_bad_line(path)  # names the line (a truncated gzip: the line it stops in)
        raise  # pragma: no cover - the slow pass always finds the line pandas choked on
    if raw.empty:
        raise GafFormatError("no data rows after the header", path, skip + 1)
    frame = pd.DataFrame({name: raw[index] for name, index in _COLUMN_INDEX.items()})
    if not _frame_is_valid(frame):
        _raise_first_bad_line(path)
        raise GafFormatError("malformed rows (fast validation failed)", path)  # pragma: no cover
    frame["aspect"] = frame["aspect"].map(ASPECT_CODES).astype(str)
    frame["date"] = frame["date"].astype(np.int32)
    return frame.reset_index(drop=True)


def _check_header(path: Path, header: list[str]) -> None:
    if not header:
        with open_binary(path) as handle:
            empty = not handle.read(1)
        if empty:
            raise GafFormatError("empty file (expected a '!gaf-version:' header)", path, 1)
        raise GafFormatError("missing '!gaf-version:' header line", path, 1)
    for number, line in enumerate(header, start=1):
        match = _VERSION_LINE.match(line)
        if match:
            if match.group(1) not in SUPPORTED_VERSIONS:
                raise GafFormatError(
                    f"unsupported GAF version {match.group(1)!r} "
                    f"(supported: {', '.join(SUPPORTED_VERSIONS)})", path, number,
                )
            return
    raise GafFormatError("missing '!gaf-version:' header line", path, 1)


def _frame_is_valid(frame: pd.DataFrame) -> bool:
    for name in _REQUIRED:
        if (frame[name] == "").any():
            return False
    if not frame["aspect"].isin(list(ASPECT_CODES)).all():
        return False
    if not frame["term"].str.fullmatch(r"GO:\d{7}").all():
        return False
    # validate each distinct date once: there are few of them
    return all(_valid_date8(value) for value in pd.unique(frame["date"]))


def _valid_date8(value: str) -> bool:
    if not _DATE8.match(value):
        return False
    try:
        date(int(value[:4]), int(value[4:6]), int(value[6:]))
    except ValueError:
        return False
    return True


def iter_gaf_lines(path: str | Path) -> Iterator[tuple[int, str, list[str] | None]]:
    """Yield ``(line_number, line, fields)`` for every line; ``fields`` is None for header lines.

    Blank lines are skipped. Data rows are validated as ``read_gaf`` does (``GafFormatError``
    naming the line). Used by the slow error path and by release derivation, which must copy
    rows verbatim.
    """
    in_header = True
    for number, line in numbered_lines(path):
        line = line.rstrip("\r\n")
        if line.startswith("!"):
            if not in_header:
                raise GafFormatError("header line ('!') after data rows", path, number)
            yield number, line, None
            continue
        if not line.strip():
            continue
        in_header = False
        yield number, line, check_gaf_fields(line, path, number)


def check_gaf_fields(line: str, path: str | Path | None = None, number: int | None = None) -> list[str]:
    """Split one GAF data line and validate it; ``GafFormatError`` names what is wrong."""
    fields = line.split("\t")
    if not GAF_MIN_COLUMNS <= len(fields) <= GAF_MAX_COLUMNS:
        raise GafFormatError(
            f"expected {GAF_MIN_COLUMNS} to {GAF_MAX_COLUMNS} tab-separated columns, "
            f"found {len(fields)}", path, number,
        )
    for name in _REQUIRED:
        if fields[_COLUMN_INDEX[name]] == "":
            raise GafFormatError(
                f"empty required column {_COLUMN_INDEX[name] + 1} ({name})", path, number
            )
    aspect = fields[8]
    if aspect not in ASPECT_CODES:
        raise GafFormatError(f"bad aspect {aspect!r} in column 9 (expected P, F or C)", path, number)
    if not _GO_ID.match(fields[4]):
        raise GafFormatError(f"bad GO id {fields[4]!r} in column 5", path, number)
    if not _valid_date8(fields[13]):
        raise GafFormatError(f"bad date {fields[13]!r} in column 14 (expected YYYYMMDD)", path, number)
    return fields


def _raise_first_bad_line(path: Path) -> None:
    seen_data = False
    for _number, _line, fields in iter_gaf_lines(path):
        seen_data = seen_data or fields is not None
    if not seen_data:
        raise GafFormatError("no data rows after the header", path)


def write_gaf_rows(
    path: str | Path, header_lines: Iterable[str], rows: Iterable[str | Sequence[str]]
) -> int:
    """Write a GAF atomically: the header lines, then the rows; gzip when ``path`` ends ``.gz``.

    ``rows`` are raw lines (without newline) or sequences of column values. The gzip stream has
    no timestamp, so the same content always gives the same bytes (and sha256). Returns the
    number of data rows written.
    """
    path = Path(path)
    count = 0
    with atomic_write(path, mode="wb") as raw:
        stream: IO[bytes] = gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, filename="") \
            if path.name.endswith(".gz") else raw
        try:
            for line in header_lines:
                if not line.startswith("!"):
                    line = "!" + line
                stream.write(line.encode("utf-8") + b"\n")
            for row in rows:
                text = row if isinstance(row, str) else "\t".join(row)
                stream.write(text.encode("utf-8") + b"\n")
                count += 1
        finally:
            if stream is not raw:
                stream.close()
    return count
