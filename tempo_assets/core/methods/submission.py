"""CAFA submission files: ``target<TAB>term<TAB>score``, two decimals, capped per aspect."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Iterable

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from tempo_assets.core.base.errors import TempoInputError
from tempo_assets.core.base.io import atomic_write, open_text

_GO_ID = re.compile(r"^GO:\d{7}$")
_SCORE_TEXT = re.compile(r"[01]?\.\d{1,2}|[01]\.?")


class SubmissionFormatError(TempoInputError):
    """A prediction frame or submission file breaks the CAFA format."""


def score_cents(scores: np.ndarray) -> np.ndarray:
    """Round scores in [0, 1] to hundredths, half up, as the decimal number reads.

    ``floor(x * 100 + 0.5)`` alone rounds 0.995 down (its binary value is 0.99499999...);
    rounding ``x * 100`` to 6 decimals first absorbs that representation error, so a score
    within 5e-9 of a half-hundredth is treated as the half.

    Parameters
    ----------
    scores : ndarray, shape (n,), float

    Returns
    -------
    ndarray, shape (n,), int64: the score in hundredths (0..100).
    """
    scaled = np.round(np.asarray(scores, dtype=np.float64) * 100.0, 6)
    return np.floor(scaled + 0.5).astype(np.int64)


_CENTS_TEXT = pa.array([f"{c // 100}.{c % 100:02d}" for c in range(101)])


def _lines(protein: pd.Series, term: pd.Series, cents: np.ndarray, rows: np.ndarray) -> list[str]:
    """``protein<TAB>term<TAB>score`` of ``rows``, joined by Arrow (not a Python step per field)."""
    rows = pa.array(rows, type=pa.int64())
    fields = [pa.array(protein, type=pa.string()).take(rows), pa.array(term, type=pa.string()).take(rows),
              _CENTS_TEXT.take(pa.array(cents).take(rows))]
    return pc.binary_join_element_wise(*fields, "\t").to_pylist()


def write_cafa_submission(
    predictions: pd.DataFrame | Iterable[pd.DataFrame],
    path: str | Path,
    max_terms_per_aspect: int = 1500,
    author: str | None = None,
    model: int = 1,
    keywords: str | Iterable[str] | None = None,
) -> dict:
    """Write predictions as a CAFA submission file (atomically, byte-identical for equal input).

    Rules: scores are rounded half up to two decimals (:func:`score_cents`); rows that round to
    0.00 are dropped and counted; a score above 1, below 0 or non-finite is an error; a
    (target, term) pair given twice keeps its highest score; at most ``max_terms_per_aspect``
    rows per target and aspect are kept (highest rounded score first, ties by term id). Rows
    are ordered by target, rounded score descending, term. With ``author``, the file starts
    with ``AUTHOR``, ``MODEL`` and (optionally) ``KEYWORDS`` lines and ends with ``END``.

    Parameters
    ----------
    predictions : DataFrame ``protein, term, aspect, score``, or an iterable of such frames
        Frames are written one at a time (a chunked submission never holds every target's rows):
        each holds whole targets, every target of a frame sorting after those of the one before,
        so the file is the one the concatenated frame would give.
    path : output file
    max_terms_per_aspect : int
    author, model, keywords : CAFA header fields (``keywords`` a string or a list of phrases)

    Returns
    -------
    dict ``rows, targets, dropped_zero, truncated, duplicates``
    """
    if keywords is not None and author is None:
        raise ValueError("keywords go in the CAFA header, which is written only when author is given")
    if int(max_terms_per_aspect) < 1:
        raise ValueError("max_terms_per_aspect must be >= 1")
    chunks = [predictions] if isinstance(predictions, pd.DataFrame) else predictions
    header = _cafa_header(author, model, keywords)
    totals = {"rows": 0, "targets": 0, "dropped_zero": 0, "truncated": 0, "duplicates": 0}
    last: str | None = None
    with atomic_write(path, mode="w") as handle:
        if header:
            handle.write("\n".join(header) + "\n")
        for i, chunk in enumerate(chunks):
            lines, counts, first, final = _submission_lines(chunk, int(max_terms_per_aspect))
            if first is not None:
                if last is not None and first <= last:
                    raise SubmissionFormatError(f"prediction chunk {i} starts at target {first!r}, not after "
                                                f"{last!r} where the chunk before ended: chunks must hold whole "
                                                "targets in sorted order")
                last = final
            for key, value in counts.items():
                totals[key] += value
            if len(lines):
                handle.write("\n".join(lines) + "\n")
        if author is not None:
            handle.write("END\n")
    return totals


def _cafa_header(author: str | None, model: int, keywords: str | Iterable[str] | None) -> list[str]:
    """The ``AUTHOR``, ``MODEL`` and (optional) ``KEYWORDS`` lines; none without an author."""
    header: list[str] = []
    if author is not None:
        header.append(f"AUTHOR\t{author}")
        header.append(f"MODEL\t{int(model)}")
        if keywords is not None:
            text = keywords if isinstance(keywords, str) else ", ".join(keywords)
            header.append(f"KEYWORDS\t{text.rstrip('.')}.")
    return header


def _submission_lines(predictions: pd.DataFrame, max_terms_per_aspect: int
                      ) -> tuple[list[str], dict[str, int], str | None, str | None]:
    """One frame's CAFA lines (the rules of :func:`write_cafa_submission`), its counts, first and last target."""
    missing = [c for c in ("protein", "term", "aspect", "score") if c not in predictions.columns]
    if missing:
        raise SubmissionFormatError(f"predictions lack columns {missing}")
    frame = predictions[["protein", "term", "aspect", "score"]]
    scores = pd.to_numeric(frame["score"], errors="coerce").to_numpy(dtype=np.float64)
    bad = ~np.isfinite(scores) | (scores < 0) | (scores > 1)
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        raise SubmissionFormatError(
            f"score {frame['score'].iloc[row]!r} for ({frame['protein'].iloc[row]}, "
            f"{frame['term'].iloc[row]}) is outside [0, 1]; {int(bad.sum())} such rows"
        )
    ids = {column: frame[column].astype(str) for column in ("protein", "term")}
    ranks = {}
    for column, values in ids.items():
        codes, distinct = pd.factorize(values, sort=True)  # a missing id: code -1
        odd = np.asarray(distinct.str.contains(r"[\s]", regex=True) | (distinct == ""), dtype=bool)
        bad = np.append(odd, True)[codes]
        if bad.any():  # the first such row's id, as the rows give them
            value = values.iloc[int(bad.argmax())]
            raise SubmissionFormatError(f"a row's {column} is missing" if pd.isna(value)
                                        else f"{column} {value!r} is empty or contains whitespace")
        ranks[column] = codes
    cents = score_cents(scores)
    written, removed = submission_rows(ranks["protein"], ranks["term"], frame["aspect"].astype(str),
                                       cents, max_terms_per_aspect)
    lines = _lines(ids["protein"], ids["term"], cents, written)
    proteins = ranks["protein"][written]
    counts = {"rows": int(len(written)), "targets": int(len(np.unique(proteins))),
              "dropped_zero": int(len(removed["zero"])), "truncated": int(len(removed["truncated"])),
              "duplicates": int(len(removed["duplicate"]))}
    first = str(ids["protein"].iloc[written[0]]) if len(written) else None
    final = str(ids["protein"].iloc[written[-1]]) if len(written) else None
    return lines, counts, first, final


def _ranks(values: np.ndarray) -> np.ndarray:
    """Each value's rank among the distinct values, missing ones last: a stable sort on the ranks
    orders rows as pandas' stable ``sort_values`` on the values does (``na_position="last"``)."""
    codes, uniques = pd.factorize(values, sort=True)
    return np.where(codes < 0, len(uniques), codes)


def _run_starts(*keys: np.ndarray) -> np.ndarray:
    """True where a row's ``keys`` differ from the row before (the first row included)."""
    starts = np.zeros(len(keys[0]), dtype=bool)
    starts[:1] = True
    for key in keys:
        starts[1:] |= key[1:] != key[:-1]
    return starts


def _stable_order(*keys: tuple[np.ndarray, int]) -> np.ndarray:
    """The stable sort of rows on ``keys`` (first key first), each a ``(ranks, n_ranks)`` pair of
    ranks in ``[0, n_ranks)``: one stable argsort of the keys packed into one int64, or
    ``np.lexsort`` where they do not fit in 62 bits."""
    if np.prod([float(size) for _, size in keys]) >= 2.0 ** 62:
        return np.lexsort([ranks for ranks, _ in reversed(keys)])
    packed = np.zeros(len(keys[0][0]), dtype=np.int64)
    for ranks, size in keys:
        packed *= size
        packed += ranks
    return np.argsort(packed, kind="stable")


def submission_rows(protein: np.ndarray, term: np.ndarray, aspect: np.ndarray, cents: np.ndarray,
                    max_terms_per_aspect: int) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """The rules of :func:`write_cafa_submission` on row positions: which rows it writes, in file order,
    and which it leaves out, by rule.

    Ids are ranked once (equal ids, equal ranks) and each of the three orderings is one stable
    sort of the rows' ranks packed into an integer, instead of sorting the strings three times.

    Parameters
    ----------
    protein, term, aspect : array-like, shape (n,): ids (strings, or integer ranks of them)
    cents : ndarray, shape (n,), int64: the scores in hundredths (:func:`score_cents`)
    max_terms_per_aspect : int

    Returns
    -------
    written : ndarray of int64, shape (n_written,)
        Positions of the rows written, ordered by protein, score descending, term.
    removed : dict ``duplicate, zero, truncated`` of ndarray of int64
        Positions of a (protein, term)'s lower-scored repeats (ordered by protein, term, score
        descending), of the rows rounding to 0.00 (by protein, term) and of the rows past
        ``max_terms_per_aspect`` per (protein, aspect) (by protein, aspect, score descending, term).
    """
    cents = np.asarray(cents, dtype=np.int64)
    empty = np.zeros(0, dtype=np.int64)
    if not len(cents):
        return empty, {"duplicate": empty, "zero": empty, "truncated": empty}
    proteins, terms, aspects = ((ranks, int(ranks.max()) + 1) for ranks in map(_ranks, (protein, term, aspect)))
    highest = int(cents.max())
    descending = (highest - cents, highest - int(cents.min()) + 1)  # rank 0: the highest score
    order = _stable_order(proteins, terms, descending)
    first = _run_starts(proteins[0][order], terms[0][order])
    duplicate, order = order[~first], order[first]
    zero = cents[order] == 0
    zeros, order = order[zero], order[~zero]

    def _sub(key: tuple[np.ndarray, int]) -> tuple[np.ndarray, int]:
        return key[0][order], key[1]

    order = order[_stable_order(_sub(proteins), _sub(aspects), _sub(descending), _sub(terms))]
    starts = np.flatnonzero(_run_starts(proteins[0][order], aspects[0][order]))
    position = np.arange(len(order)) - np.repeat(starts, np.diff(np.append(starts, len(order))))
    keep = position < int(max_terms_per_aspect)
    truncated, order = order[~keep], order[keep]
    written = order[_stable_order(_sub(proteins), _sub(descending), _sub(terms))]
    return written, {"duplicate": duplicate, "zero": zeros, "truncated": truncated}


def read_cafa_submission(path: str | Path) -> pd.DataFrame:
    """Read and validate a CAFA submission file.

    Accepts optional ``AUTHOR``/``MODEL``/``KEYWORDS`` lines before the first prediction and an
    ``END`` line after the last; fields may be separated by tabs or spaces. Each prediction
    needs a target, a ``GO:nnnnnnn`` term and a score in (0, 1] with at most two decimals;
    a repeated (target, term) pair is an error.

    Returns
    -------
    DataFrame ``protein, term, score`` in file order; ``.attrs["header"]`` holds the header
    fields (``AUTHOR``, ``MODEL``, ``KEYWORDS``) found.

    Raises
    ------
    SubmissionFormatError naming the file and line.
    """
    path = Path(path)
    header: dict[str, str] = {}
    proteins, terms, scores = [], [], []
    seen: dict[tuple[str, str], int] = {}
    ended = False
    with open_text(path) as handle:
        for number, raw in enumerate(handle, start=1):
            line = raw.rstrip("\r\n")
            if not line.strip():
                continue
            if ended:
                raise SubmissionFormatError("content after END", path=path, line=number)
            fields = line.split()
            key = fields[0]
            if key in {"AUTHOR", "MODEL", "KEYWORDS"}:
                if proteins:
                    raise SubmissionFormatError(f"{key} line after predictions", path=path, line=number)
                if key in header:
                    raise SubmissionFormatError(f"second {key} line", path=path, line=number)
                header[key] = _header_value(key, line, path, number)
                continue
            if key == "END" and len(fields) == 1:
                ended = True
                continue
            target, term, score = _prediction(fields, path, number)
            pair = (target, term)
            if pair in seen:
                raise SubmissionFormatError(
                    f"{target} {term} already given on line {seen[pair]}", path=path, line=number
                )
            seen[pair] = number
            proteins.append(target)
            terms.append(term)
            scores.append(score)
    if "AUTHOR" in header and not ended:
        raise SubmissionFormatError("file has an AUTHOR header but no END line", path=path)
    out = pd.DataFrame({"protein": proteins, "term": terms, "score": np.asarray(scores, dtype=np.float64)})
    out.attrs["header"] = header
    return out


def _header_value(key: str, line: str, path: Path, number: int) -> str:
    """The value of an ``AUTHOR``/``MODEL``/``KEYWORDS`` line (a MODEL must be a number)."""
    value = line[len(key):].strip()
    if key == "MODEL" and not value.isdigit():
        raise SubmissionFormatError(
            f"MODEL must be a number, got {value!r}", path=path, line=number
        )
    return value


def _prediction(fields: list[str], path: Path, number: int) -> tuple[str, str, float]:
    """``target, term, score`` of a prediction line: a GO id and a score in (0, 1] with at most
    two decimals."""
    if len(fields) != 3:
        raise SubmissionFormatError(
            f"expected 'target term score', got {len(fields)} fields", path=path, line=number
        )
    target, term, score_text = fields
    if not _GO_ID.match(term):
        raise SubmissionFormatError(f"term {term!r} is not a GO id", path=path, line=number)
    if not _SCORE_TEXT.fullmatch(score_text):
        raise SubmissionFormatError(
            f"score {score_text!r} is not a number with at most two decimals", path=path, line=number
        )
    score = float(score_text)
    if not 0.0 < score <= 1.0:
        raise SubmissionFormatError(f"score {score_text} is outside (0, 1]", path=path, line=number)
    return target, term, score
