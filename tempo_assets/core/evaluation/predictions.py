"""Ground truth and predictions as sparse cells: reading, grouping, max propagation by term height.

Part of the evaluator package (see ``tempo_assets/core/evaluation/__init__.py``)."""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.csv as pa_csv

from tempo_assets.core.base.arrays import concat_ranges as _ranges
from tempo_assets.core.base.io import open_binary, open_text
from tempo_assets.core.evaluation.ontology import EvalOntology, EvaluationInputError, _Namespace
from tempo_assets.core.evaluation.propagation import _Cells, _propagate, _propagated_keys

logger = logging.getLogger(__name__)


# --------------------------------------------------------------------------------------------
# ground truth, predictions, propagation


@dataclass
class _Truth:
    """Propagated ground truth of one namespace; rows in cafaeval's protein order."""

    proteins: list[str]
    row_of: dict[str, int]
    keys: np.ndarray  # sorted int64 row * n_terms + term

    @cached_property
    def rows_index(self) -> pd.Index:
        """The proteins as an index (position = row), to look many up at once."""
        return pd.Index(self.proteins, dtype=object)


def _read_pairs(path: str | Path, what: str) -> tuple[list[str], list[str]]:
    proteins: list[str] = []
    terms: list[str] = []
    seen = False
    with open_text(path) as handle:
        for lineno, raw in enumerate(handle, start=1):
            parts = raw.split()
            if not parts:
                continue
            seen = True
            if len(parts) < 2:
                raise EvaluationInputError(f"{what} line needs 'protein term'", path, lineno)
            proteins.append(parts[0])
            terms.append(parts[1])
    if not seen:
        raise EvaluationInputError(f"empty {what} file", path)
    return proteins, terms


def _group_pairs(ontology: EvalOntology, proteins: Iterable[str], terms: Iterable[str],
                 ) -> dict[str, tuple[list[str], np.ndarray, np.ndarray]]:
    """cafaeval's ``gt_parser`` grouping, on factorised ids.

    Returns
    -------
    dict
        ``ns -> (proteins, rows, cols)`` for the namespaces that got a pair: ``proteins`` in
        first-seen order within the namespace (cafaeval's row order), ``rows`` and ``cols``
        int64 (n_pairs,) a row and a term index per pair (an alt id adds one pair per primary).
        A term goes to the first namespace whose primaries, then alt ids, know it.
    """
    p_codes, p_uniques = pd.factorize(np.asarray(list(proteins), dtype=object))
    t_codes, t_uniques = pd.factorize(np.asarray(list(terms), dtype=object))
    names = list(ontology.namespaces)
    ns_of = np.full(len(t_uniques), -1, dtype=np.int64)
    columns: list[tuple[int, ...]] = []
    for t, term in enumerate(t_uniques):
        hit = ontology.term_namespace_first(term)
        if hit is None:
            columns.append(())
        else:
            ns_of[t] = names.index(hit[0])
            columns.append(hit[1])
    sizes = np.array([len(c) for c in columns], dtype=np.int64)
    flat_cols = np.fromiter((c for cs in columns for c in cs), dtype=np.int64,
                            count=int(sizes.sum()))
    starts = np.cumsum(sizes) - sizes
    row_ns = ns_of[t_codes]
    dropped = int(np.count_nonzero(row_ns < 0))
    if dropped:
        logger.info("%d annotation rows with terms unknown to the ontology dropped", dropped)
    grouped: dict[str, tuple[list[str], np.ndarray, np.ndarray]] = {}
    for k, name in enumerate(names):
        sel = np.flatnonzero(row_ns == k)
        if sel.size == 0:
            continue
        pc = p_codes[sel]
        uniq, first = np.unique(pc, return_index=True)
        in_order = uniq[np.argsort(first, kind="stable")]
        row_of = np.empty(len(p_uniques), dtype=np.int64)
        row_of[in_order] = np.arange(in_order.size)
        tc = t_codes[sel]
        counts = sizes[tc]
        cols = flat_cols[_ranges(starts[tc], counts)]
        rows = np.repeat(row_of[pc], counts)
        grouped[name] = ([p_uniques[c] for c in in_order], rows, cols)
    return grouped


def _build_truths(ontology: EvalOntology, proteins, terms) -> dict[str, _Truth]:
    grouped = _group_pairs(ontology, proteins, terms)
    truths: dict[str, _Truth] = {}
    for name in ontology.namespaces:  # cafaeval: gts in ontology order
        if name not in grouped:
            continue
        ns = ontology.namespaces[name]
        ids, rows, cols = grouped[name]
        keys = _propagated_keys(rows, cols, ns)
        truths[name] = _Truth(ids, {p: i for i, p in enumerate(ids)}, keys)
        logger.info("Ground truth: %s, proteins %d, annotations %d", name, len(ids), keys.size)
    return truths


@dataclass
class _Raw:
    """Prediction rows in file order, before namespace routing, as codes into uniques."""

    protein_codes: np.ndarray  # int32 or int64 (n,)
    proteins: np.ndarray  # object (n_proteins,)
    term_codes: np.ndarray  # int32 or int64 (n,)
    terms: np.ndarray  # object (n_terms,)
    score_codes: np.ndarray | None  # int32 or int64 (n,) into score_text, for text input
    score_text: np.ndarray | None  # object (n_distinct,) score strings, parsed once each
    scores: np.ndarray | None  # float64 (n,), for frame input
    lines: np.ndarray | None  # int64 (n,) line numbers or row positions; None: not known yet
    path: str | None = None

    @classmethod
    def from_values(cls, proteins, terms, scores, lines, path) -> "_Raw":
        p_codes, p_uniques = pd.factorize(np.asarray(proteins, dtype=object))
        t_codes, t_uniques = pd.factorize(np.asarray(terms, dtype=object))
        scores = np.asarray(scores)
        if scores.dtype == object:
            s_codes, s_uniques = pd.factorize(scores)
            return cls(p_codes.astype(np.int64), np.asarray(p_uniques, dtype=object),
                       t_codes.astype(np.int64), np.asarray(t_uniques, dtype=object),
                       s_codes.astype(np.int64), np.asarray(s_uniques, dtype=object), None,
                       np.asarray(lines, dtype=np.int64), path)
        return cls(p_codes.astype(np.int64), np.asarray(p_uniques, dtype=object),
                   t_codes.astype(np.int64), np.asarray(t_uniques, dtype=object), None, None,
                   scores.astype(np.float64), np.asarray(lines, dtype=np.int64), path)


_PLAIN_BYTES = bytes([9, 10, *range(32, 127)])


def _read_prediction_file(path: str | Path, n_threads: int = 1) -> _Raw:
    """Rows of lines with more than two whitespace-separated fields (cafaeval's rule).

    Plain-ASCII files whose lines all split into exactly three non-empty fields on tabs (after
    spaces become tabs) go through Arrow's CSV reader, which dictionary-encodes the three
    columns in C++ (no Python string per row); ``n_threads > 1`` lets it parse blocks in
    parallel. Anything else (non-ASCII, carriage returns, other control characters, runs of
    separators, lines with fewer or more fields) takes a line loop with ``str.split``, the
    rule's own definition. Line numbers are recovered by the loop when an error must name one.
    """
    with open_binary(path) as handle:
        data = handle.read()
    raw = _read_prediction_arrow(data, str(path), n_threads) if data else None
    return raw if raw is not None else _read_prediction_lines(path)


def _read_prediction_arrow(data: bytes, path: str, n_threads: int) -> _Raw | None:
    """Arrow fast path of :func:`_read_prediction_file`; None when its preconditions fail."""
    # only printable ASCII, tabs and newlines: then str.split() splits on tabs and spaces only
    # (translate deletes the allowed bytes in one C pass without a file-sized temporary)
    if data.translate(None, _PLAIN_BYTES):
        return None
    if data.find(b" ") >= 0:
        data = data.replace(b" ", b"\t")
    # With tab as the only separator, a run of separators or a leading/trailing one shows up
    # as an empty field (checked below) or as a 4th column (a parse error), and a line with
    # fewer than three fields is a parse error too; then the loop decides. A line that
    # splits into three non-empty tab fields splits into the same three on whitespace.
    as_dict = pa.dictionary(pa.int32(), pa.string())
    names = ["protein", "term", "score"]
    try:
        table = pa_csv.read_csv(
            pa.py_buffer(data),
            read_options=pa_csv.ReadOptions(
                use_threads=n_threads > 1, column_names=names,
                # one block single-threaded (one dictionary per column, no unification)
                block_size=(len(data) + 1 if n_threads <= 1
                            else max(1 << 22, len(data) // (4 * n_threads)))),
            parse_options=pa_csv.ParseOptions(delimiter="\t", quote_char=False,
                                               double_quote=False, escape_char=False,
                                               newlines_in_values=False, ignore_empty_lines=True),
            convert_options=pa_csv.ConvertOptions(column_types={n: as_dict for n in names},
                                                  strings_can_be_null=False))
    except (pa.ArrowInvalid, pa.ArrowException):
        return None
    columns = []
    for name in names:
        chunked = table.column(name)
        if chunked.num_chunks > 1:
            chunked = chunked.unify_dictionaries()
        if chunked.num_chunks == 0:
            return None
        uniques = chunked.chunk(0).dictionary.to_numpy(zero_copy_only=False).astype(object)
        if (uniques == "").any():
            return None
        parts = [c.indices.to_numpy(zero_copy_only=False) for c in chunked.chunks]
        codes = parts[0] if len(parts) == 1 else np.concatenate(parts)  # int32, read-only
        columns.append((codes, uniques))
    (p_codes, proteins), (t_codes, terms), (s_codes, score_text) = columns
    return _Raw(p_codes, proteins, t_codes, terms, s_codes, score_text, None, None, path)


def _read_prediction_lines(path: str | Path) -> _Raw:
    proteins: list[str] = []
    terms: list[str] = []
    scores: list[str] = []
    lines: list[int] = []
    with open_text(path) as handle:
        for lineno, raw in enumerate(handle, start=1):
            parts = raw.split()
            if len(parts) > 2:
                proteins.append(parts[0])
                terms.append(parts[1])
                scores.append(parts[2])
                lines.append(lineno)
    return _Raw.from_values(np.array(proteins, dtype=object), np.array(terms, dtype=object),
                            np.array(scores, dtype=object), lines, str(path))


def _score_bins(raw: _Raw, sel: np.ndarray, tau: np.ndarray) -> tuple[np.ndarray, int]:
    """Threshold bins of the scores of rows ``sel``, parsed with Python's ``float``.

    Returns
    -------
    bins : int64 (n_sel,)
        0 for a score that never counts (``<= 0`` or NaN: cafaeval's ``max`` starting from 0),
        else ``1 + #{tau <= score}``.
    n_nan : int
        Rows whose score is NaN.

    Text scores are parsed and binned once per distinct string (a prediction file holds few),
    and only the strings that rows ``sel`` use: a bad score elsewhere is never read, as in
    cafaeval.
    """
    if raw.scores is not None:
        values, codes = raw.scores[sel], None
    else:
        codes = raw.score_codes[sel]
        values = np.full(raw.score_text.size, np.nan)
        for code in np.flatnonzero(np.bincount(codes, minlength=raw.score_text.size)):
            try:
                values[code] = float(raw.score_text[code])
            except ValueError:
                pos = sel[np.flatnonzero(codes == code)[0]]
                line = int(raw.lines[pos]) if raw.lines is not None else -1
                if line < 0 and raw.path:  # fast reader: find the line number now
                    line = int(_read_prediction_lines(raw.path).lines[pos])
                raise EvaluationInputError(f"score is not a number: {raw.score_text[code]!r}",
                                           raw.path, line) from None
    nan = np.isnan(values)
    bins = np.where(values > 0, 1 + np.searchsorted(tau, values, side="right"), 0)
    if codes is None:
        return bins.astype(np.int64), int(nan.sum())
    return bins.astype(np.int64)[codes], int(np.count_nonzero(nan[codes]))


def _routes(ontology: EvalOntology, names: list[str]) -> dict[str, int]:
    """cafaeval's ns_dict over ``names``: primaries then alt ids, last one wins; built once per ontology."""
    key = tuple(names)
    routes = ontology.routes.get(key)
    if routes is None:
        routes = {}
        for k, name in enumerate(names):
            ns = ontology.namespaces[name]
            routes.update(dict.fromkeys(ns.terms, k))
            routes.update(dict.fromkeys(ns.alt, k))
        ontology.routes[key] = routes
    return routes


def _namespace_of_rows(ontology: EvalOntology, names: list[str], raw: _Raw) -> np.ndarray:
    """Index in ``names`` of each raw row's namespace (-1: none with ground truth)."""
    routes = _routes(ontology, names)
    uniq_ns = np.array([routes.get(t, -1) for t in raw.terms], dtype=np.int16)
    return uniq_ns[raw.term_codes] if raw.term_codes.size else np.zeros(0, dtype=np.int64)


def _term_columns(ns: _Namespace, raw: _Raw, sel: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
    """(columns, per-row repeat counts or None) of rows ``sel``: an alt id (checked first, as
    cafaeval does) expands to its primaries."""
    term_codes, term_uniques = raw.term_codes, raw.terms
    tcode = term_codes[sel]
    uniq_t = np.flatnonzero(np.bincount(tcode, minlength=term_uniques.size))
    primaries, columns, alt_ids = ns.lookup
    wanted = np.asarray(term_uniques[uniq_t], dtype=object)
    hit = primaries.get_indexer(wanted)
    if (hit >= 0).all() and (not len(alt_ids) or (alt_ids.get_indexer(wanted) < 0).all()):
        flat_cols, sizes = columns[hit], np.ones(uniq_t.size, dtype=np.int64)  # primary ids only: no loop
    else:
        col_lists = []
        for t in uniq_t:
            term = term_uniques[t]
            alts = ns.alt.get(term)
            col_lists.append(alts if alts is not None else (ns.index[term],))
        sizes = np.array([len(c) for c in col_lists], dtype=np.int64)
        flat_cols = np.fromiter((c for cl in col_lists for c in cl), dtype=np.int64, count=int(sizes.sum()))
    # flat_cols is ordered by uniq_t; each unique term code's slice starts here
    starts_by_code = np.zeros(term_uniques.size, dtype=np.int64)
    starts_by_code[uniq_t] = np.cumsum(sizes) - sizes
    if (sizes == 1).all():  # no alt id with several primaries: one column per row
        return flat_cols[starts_by_code[tcode]], None
    lens = np.zeros(term_uniques.size, dtype=np.int64)
    lens[uniq_t] = sizes
    counts = lens[tcode]
    return flat_cols[_ranges(starts_by_code[tcode], counts)], counts


def _namespace_entries(ns: _Namespace, truth: _Truth, raw: _Raw, in_ns: np.ndarray, tau: np.ndarray,
                       max_terms: int | None) -> tuple[tuple | None, int]:
    """((rows, cols, bins) of the namespace's positive entries, or None), NaN scores skipped."""
    uniq_rows = truth.rows_index.get_indexer(np.asarray(raw.proteins, dtype=object)).astype(np.int64)
    rows = uniq_rows[raw.protein_codes[in_ns]]
    keep = rows >= 0
    sel = in_ns[keep]
    rows = rows[keep]
    if sel.size == 0:
        return None, 0
    bins, n_nan = _score_bins(raw, sel, tau)
    cols, counts = _term_columns(ns, raw, sel)
    if counts is not None:
        rows, bins = np.repeat(rows, counts), np.repeat(bins, counts)
    if max_terms is not None:
        allowed = _max_terms_mask(rows, cols, bins, ns.n_terms, int(max_terms))
        rows, cols, bins = rows[allowed], cols[allowed], bins[allowed]
    if rows.size == 0:
        return None, n_nan  # nothing inserted: cafaeval does not evaluate this namespace
    positive = bins > 0
    return (rows[positive], cols[positive], bins[positive]), n_nan


def _build_predictions(ontology: EvalOntology, truths: dict[str, _Truth], raw: _Raw,
                       tau: np.ndarray, prop: str, max_terms: int | None,
                       n_threads: int = 1) -> dict[str, _Cells]:
    """Route, map, bin and propagate one method's predictions, per namespace (cafaeval order).

    ``n_threads > 1`` propagates the namespaces in a thread pool.
    """
    if prop not in ("max", "fill"):
        raise EvaluationInputError(f"prop must be 'max' or 'fill', got {prop!r}")
    names = list(truths)
    row_ns = _namespace_of_rows(ontology, names, raw) if raw.term_codes.size else None
    if row_ns is None:
        return {}
    jobs: dict[str, tuple] = {}
    skipped_nan = 0
    for k, name in enumerate(names):
        in_ns = np.flatnonzero(row_ns == k)
        if in_ns.size == 0:
            continue
        ns, truth = ontology.namespaces[name], truths[name]
        entries, n_nan = _namespace_entries(ns, truth, raw, in_ns, tau, max_terms)
        skipped_nan += n_nan
        if entries is not None:
            jobs[name] = (*entries, ns, prop, truth.keys)
    if skipped_nan:
        logger.warning("%s: %d NaN scores ignored (as cafaeval does)", raw.path, skipped_nan)
    if n_threads > 1 and len(jobs) > 1:
        # namespaces are independent and numpy releases the GIL in the kernel's big calls
        with ThreadPoolExecutor(max_workers=min(n_threads, len(jobs))) as pool:
            done = dict(zip(jobs, pool.map(lambda args: _propagate(*args), jobs.values())))
    else:
        done = {name: _propagate(*args) for name, args in jobs.items()}
    for name, cells in done.items():
        logger.info("Prediction: %s, %s, annotations %d", raw.path, name, cells.rows.size)
    return done


def _max_terms_mask(rows, cols, scores, n_terms, max_terms) -> np.ndarray:
    """cafaeval's insertion rule: insert while the raw row has ``<= max_terms`` non-zeros.

    Rows are in file order; a term becomes non-zero at its first positive score.
    """
    order = np.argsort(rows, kind="stable")
    r, c, s = rows[order], cols[order], scores[order]
    key = r * np.int64(n_terms) + c
    positive = s > 0
    # first positive occurrence of each (row, term), in file order
    pos_idx = np.flatnonzero(positive)
    _, first = np.unique(key[pos_idx], return_index=True)
    is_first = np.zeros(r.size, dtype=np.int64)
    is_first[pos_idx[first]] = 1
    cum = np.cumsum(is_first)
    group_start = np.flatnonzero(np.r_[True, r[1:] != r[:-1]])
    base = np.repeat(np.r_[0, cum][group_start], np.diff(np.r_[group_start, r.size]))
    before = cum - is_first - base
    allowed_sorted = before <= max_terms
    allowed = np.empty(rows.size, dtype=bool)
    allowed[order] = allowed_sorted
    return allowed


def _frame_truth(ground_truth: pd.DataFrame) -> tuple[list[str], list[str]]:
    if not {"protein", "term"} <= set(ground_truth.columns):
        raise EvaluationInputError("ground_truth needs 'protein' and 'term' columns")
    if len(ground_truth) == 0:
        raise EvaluationInputError("empty ground truth")
    return ground_truth["protein"].astype(str).tolist(), ground_truth["term"].astype(str).tolist()


def _prediction_columns(predictions: pd.DataFrame) -> None:
    if not {"protein", "term", "score"} <= set(predictions.columns):
        raise EvaluationInputError("predictions need 'protein', 'term' and 'score' columns")


def _string_codes(column: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """(int64 codes, object uniques) of a column's values as strings, in first-seen order.

    ``pd.factorize`` of the column as Python strings; a string column without missing values is
    factorised as it is held (Arrow's dictionary encoding, no Python string per row): the same
    codes and uniques.
    """
    if isinstance(column.dtype, pd.StringDtype) and not column.hasnans:
        codes, uniques = pd.factorize(column)
    else:
        codes, uniques = pd.factorize(column.astype(str).to_numpy(dtype=object))
    return codes.astype(np.int64), np.asarray(uniques, dtype=object)


def _frame_raw(predictions: pd.DataFrame) -> _Raw:
    _prediction_columns(predictions)
    (p_codes, proteins), (t_codes, terms) = _string_codes(predictions["protein"]), _string_codes(predictions["term"])
    scores = pd.to_numeric(predictions["score"], errors="raise").to_numpy(dtype=np.float64)
    return _Raw(p_codes, proteins, t_codes, terms, None, None, scores,
                np.arange(len(predictions), dtype=np.int64), "<predictions frame>")


# --------------------------------------------------------------------------------------------
# terms of interest and known terms (LAFA)


def _toi_masks(ontology: EvalOntology, toi) -> dict[str, np.ndarray]:
    """cafaeval-protea's ``update_toi``: per namespace, a mask of the listed terms.

    The masks of a set of terms (not a file) are built once per ontology and shared: never write to them.
    """
    if isinstance(toi, (str, Path)):
        return _read_toi_masks(ontology, toi)
    key = frozenset(toi)
    if key not in ontology.toi_masks:
        ontology.toi_masks[key] = _read_toi_masks(ontology, key)
    return ontology.toi_masks[key]


def _read_toi_masks(ontology: EvalOntology, toi) -> dict[str, np.ndarray]:
    if isinstance(toi, (str, Path)):
        terms = []
        with open_text(toi) as handle:
            for raw in handle:
                parts = raw.split()
                if parts:
                    terms.append(parts[0])
        if not terms:
            raise EvaluationInputError("empty terms-of-interest file", toi)
    else:
        terms = list(toi)
    masks = {name: np.zeros(ns.n_terms, dtype=bool) for name, ns in ontology.namespaces.items()}
    for term in terms:
        for name, ns in ontology.namespaces.items():
            i = ns.index.get(term)
            if i is not None:
                masks[name][i] = True
            elif term in ns.alt:
                masks[name][list(ns.alt[term])] = True
    return masks


def _known_keys(ontology: EvalOntology, truths: dict[str, _Truth], known) -> dict[str, np.ndarray]:
    if isinstance(known, (str, Path)):
        proteins, terms = _read_pairs(known, "known-terms")
    else:
        if not {"protein", "term"} <= set(known.columns):
            raise EvaluationInputError("known frame needs 'protein' and 'term' columns")
        proteins, terms = known["protein"].tolist(), known["term"].tolist()
    grouped = _group_pairs(ontology, proteins, terms)
    out: dict[str, np.ndarray] = {}
    for name, truth in truths.items():
        ns = ontology.namespaces[name]
        if name not in grouped:
            out[name] = np.zeros(0, dtype=np.int64)
            continue
        ids, rows, cols = grouped[name]
        # known rows -> ground-truth rows; pairs of proteins without ground truth are dropped
        truth_row = np.array([truth.row_of.get(p, -1) for p in ids], dtype=np.int64)
        rows = truth_row[rows]
        keep = rows >= 0
        out[name] = _propagated_keys(rows[keep], cols[keep], ns)
    return out
