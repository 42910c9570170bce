"""A growth cut into evaluation cells, one per (mode, aspect), and each method's predictions cut to them.

:func:`evaluation_cells` slices a growth's targets and ground truth into :class:`Cell` s;
:class:`CellFrames` cuts each method's predictions to the cells once (integer codes, :func:`method_rows`)
for every pass that scores them (``core.evaluation.scoring``: the profiles, the bootstrap, the strata).
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Iterable, Mapping

import numpy as np
import pandas as pd

from tempo_assets.core.base.arrays import grouped_order, values_in
from tempo_assets.core.base.errors import TempoInputError
from tempo_assets.core.base.vocabulary import ASPECTS, MODES
from tempo_assets.core.evaluation.metrics import PREDICTION_KEY_COLUMNS, content_key
from tempo_assets.core.labels.annotations import require_columns


@dataclass(frozen=True, eq=False)
class Cell:
    """One (mode, aspect) of a growth: its targets, their ground truth and (PK) known terms.

    ``setups``: a ``core.evaluation.SetupCache`` for the evaluator's set-up ground truth; None uses
    the evaluation ontology's own, keyed by content, so every method, bootstrap and paired bootstrap
    scored on an equal cell (from this or another ``evaluation_cells`` call) shares one setup.
    """

    mode: str
    aspect: str
    targets: pd.DataFrame
    truth: pd.DataFrame
    known: pd.DataFrame | None
    setups: Any = field(default=None, compare=False, repr=False)

    @property
    def proteins(self) -> pd.Series:
        return self.targets["protein"]

    @cached_property
    def truth_sha256(self) -> str:
        return frame_digest(self.truth)


def frame_digest(frame: pd.DataFrame) -> str:
    """sha256 of a frame's rows, sorted (order-free identity of a target or truth set).

    A row is its values as ``str`` joined by tabs; the columns are read as Python values once
    (``tolist``: what iterating the rows gives, without pandas building each row from Arrow).
    """
    if len(frame.columns) == 0:
        rows = ["" for _ in range(len(frame))]
    else:
        columns = [map(str, frame.iloc[:, i].tolist()) for i in range(frame.shape[1])]
        rows = ["\t".join(row) for row in zip(*columns)]
    text = "\n".join(sorted(rows))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def evaluation_cells(targets: pd.DataFrame, ground_truth: pd.DataFrame, known: pd.DataFrame | None,
                     modes: Iterable[str] = MODES, aspects: Iterable[str] = ASPECTS,
                     keep_empty: bool = False) -> dict[tuple[str, str], Cell]:
    """Per (mode, aspect) with targets (all of them with ``keep_empty``): its :class:`Cell`.

    A cell's truth is the ground truth's rows of its targets' (protein, aspect), in their order (index from
    0); its known terms (PK) those of its targets in its aspect (their own index). Each row's cell is
    looked up once by integer codes (:func:`row_cells`), not by a merge per cell.

    Parameters
    ----------
    targets : DataFrame ``protein, aspect, mode``
    ground_truth : DataFrame ``protein, term, aspect`` (propagated terms at the newer release)
    known : DataFrame ``protein, term, aspect`` (PK known terms) or None
    """
    require_columns(targets, ("protein", "aspect", "mode"), "targets")
    require_columns(ground_truth, ("protein", "term", "aspect"), "ground truth")
    chosen = {}
    for mode in modes:
        for aspect in aspects:
            cell = targets[(targets["mode"] == mode) & (targets["aspect"] == aspect)]
            if not cell.empty or keep_empty:
                chosen[(mode, aspect)] = cell
    truth_cells = row_cells(ground_truth, [(aspect, cell["protein"]) for (_, aspect), cell in chosen.items()])
    pk = [key for key in chosen if key[0] == "PK"] if known is not None else []
    known_cells = row_cells(known, [(key[1], chosen[key]["protein"]) for key in pk]) if pk else None
    if truth_cells is not None:  # the cells' rows cut once, grouped by cell: each cell's a slice of them
        order, truth_bounds = grouped_order(truth_cells, len(chosen))
        truth_rows = ground_truth[["protein", "term"]].iloc[order]
    if known_cells is not None:
        order, known_bounds = grouped_order(known_cells, len(pk))
        known_rows = known[["protein", "term"]].iloc[order]
    out = {}
    for position, ((mode, aspect), cell) in enumerate(chosen.items()):
        if truth_cells is None:  # a protein a target of two cells of one aspect: each cell its own merge
            keys = cell[["protein", "aspect"]].drop_duplicates()
            truth = ground_truth.merge(keys, on=["protein", "aspect"])[["protein", "term"]]
        else:
            truth = truth_rows.iloc[truth_bounds[position]:truth_bounds[position + 1]].reset_index(drop=True)
        kn = None
        if (mode, aspect) in pk:
            at = pk.index((mode, aspect))
            kn = known_rows.iloc[known_bounds[at]:known_bounds[at + 1]]
        out[(mode, aspect)] = Cell(mode, aspect, cell, truth, kn)
    return out


def _cell_table(aspect_codes: Mapping[str, int], proteins: pd.Index,
                cells: Iterable[tuple[str, pd.Series]]) -> np.ndarray | None:
    """(n_aspects, n_proteins) each (aspect, protein) code's position among ``cells`` ((aspect, target
    proteins), -1: in none); None when a protein is a target of two cells of one aspect."""
    table = np.full((len(aspect_codes), len(proteins)), -1, dtype=np.int64)
    for position, (aspect, targets) in enumerate(cells):
        a = aspect_codes.get(aspect)
        if a is None:
            continue
        found = proteins.get_indexer(pd.unique(targets))
        found = found[found >= 0]
        if (table[a, found] >= 0).any():
            return None
        table[a, found] = position
    return table


def row_cells(frame: pd.DataFrame, cells: list[tuple[str, pd.Series]]) -> np.ndarray | None:
    """(n_rows,) each row's (``protein, aspect``) position among ``cells`` ((aspect, target proteins), -1:
    in none), by integer codes; None when a protein is a target of two cells of one aspect."""
    a_codes, a_uniques = pd.factorize(frame["aspect"])
    p_codes, p_uniques = pd.factorize(frame["protein"])
    table = _cell_table({a: i for i, a in enumerate(a_uniques)}, pd.Index(p_uniques), cells)
    if table is None:
        return None
    rows = np.full(len(frame), -1, dtype=np.int64)
    both = (a_codes >= 0) & (p_codes >= 0)
    rows[both] = table[a_codes[both], p_codes[both]]
    return rows


# a method's rows of the cells' targets cut out once (and each cell from them) when they are at most this
# share of its rows: every cut of a many-chunked Arrow column by positions costs a pass over all of it
_KEPT_SHARE = 0.25


@dataclass(frozen=True)
class MethodRows:
    """Where one method's prediction rows fall among the cells of a growth (:func:`method_rows`).

    ``kept`` the rows whose protein is a target of some cell (``protein, term, score``) when they are at most
    :data:`_KEPT_SHARE` of the predictions, else None; ``cell`` each row's position among the cells (-1: in
    none), of ``kept``'s rows or (``kept`` None) of every prediction row, or None when a protein is a target
    of two cells of one aspect (then each cell compares its own proteins); ``aspects`` the aspects the method
    predicts in (all of them, or those of ``kept`` when these hold every cell's aspect)."""

    cell: np.ndarray | None
    aspects: frozenset
    kept: pd.DataFrame | None = None


def method_rows(predictions: pd.DataFrame, cells: Mapping[tuple[str, str], Cell]) -> MethodRows:
    """Each prediction row's cell, by integer codes: the rows of the cells' targets found in one pass,
    then their proteins and aspects factorised once (only theirs when they are few) and each cell's
    targets looked up among the distinct proteins (not every row compared with every cell's strings)."""
    targets = pd.unique(pd.concat([cell.proteins for cell in cells.values()], ignore_index=True)) if cells else []
    of_targets = values_in(predictions["protein"], targets)
    few = np.count_nonzero(of_targets) <= _KEPT_SHARE * len(predictions)
    rows = None if few else np.flatnonzero(of_targets)
    if few:
        kept = _masked(predictions, of_targets, ("protein", "term", "score", "aspect"))
        (p_codes, p_uniques), (a_codes, a_uniques) = (pd.factorize(kept[c]) for c in ("protein", "aspect"))
        kept, aspects = kept[["protein", "term", "score"]], set(a_uniques)
        if {cell.aspect for cell in cells.values()} - aspects:  # an aspect of no target's row: any other row's?
            aspects |= set(pd.factorize(predictions["aspect"])[1])
    else:
        (p_codes, p_uniques), (a_codes, a_uniques) = (pd.factorize(predictions[c]) for c in ("protein", "aspect"))
        p_codes, a_codes, kept, aspects = p_codes[rows], a_codes[rows], None, set(a_uniques)
    table = _cell_table({a: i for i, a in enumerate(a_uniques)}, pd.Index(p_uniques),
                        [(cell.aspect, cell.proteins) for cell in cells.values()])
    if table is None:
        return MethodRows(None, frozenset(aspects))
    cell_of = np.full(len(kept) if few else len(predictions), -1, dtype=np.int64)
    both = (a_codes >= 0) & (p_codes >= 0)
    cell_of[both if few else rows[both]] = table[a_codes[both], p_codes[both]]
    return MethodRows(cell_of, frozenset(aspects), kept)


def cell_predictions(predictions: pd.DataFrame, where: MethodRows, cell: Cell, position: int) -> pd.DataFrame:
    """``protein, term, score`` of the rows of ``predictions`` in ``cell`` (at ``position`` among the cells):
    rows of its aspect whose protein is one of its targets, in their order; ``where`` is
    :func:`method_rows` of the predictions (its ``cell`` None: each row compared with the cell's targets)."""
    if cell.aspect not in where.aspects:
        return pd.DataFrame(columns=["protein", "term", "score"])
    if where.cell is None:
        keep = (predictions["aspect"] == cell.aspect) & predictions["protein"].isin(cell.proteins)
        return predictions[["protein", "term", "score"]].iloc[np.flatnonzero(keep.to_numpy(dtype=bool))]
    if where.kept is not None:
        return _masked(where.kept, where.cell == position, ("protein", "term", "score"))
    return predictions[["protein", "term", "score"]].iloc[np.flatnonzero(where.cell == position)]


def _masked(frame: pd.DataFrame, mask: np.ndarray, columns: tuple[str, ...]) -> pd.DataFrame:
    """``frame[list(columns)]``'s rows where ``mask``, column by column: an Arrow column is filtered chunk by
    chunk, where a cut by positions first joins its chunks (a pass over all of it)."""
    return pd.DataFrame({c: frame[c].array[mask] for c in columns}, index=frame.index[mask], copy=False)


class CellFrames:
    """Each method's predictions cut to each cell of one growth once, for every pass that scores them.

    Built from ``growth`` ``(targets, ground_truth, known)`` and ``methods`` (name -> predictions): the
    cells (:func:`evaluation_cells`) and, per (method, cell), :func:`cell_predictions` of the method
    (each row's cell found once per method, :func:`method_rows`). :func:`score_profile` and ``core.evaluation.benchmark.paired_differences``
    given the same object (``frames=``) read its cells and frames instead of cutting them again; each
    first checks that it was built from the very growth and predictions it scores. Shared, it holds
    every cut frame (about the methods' predictions of the targets) until it is dropped, and one
    method's row cells at a time: the summary cuts every cell of a method before the next. A pass
    alone holds what it held when it cut its own: ``keep_frames=False`` holds no cut frame,
    ``keep_splits=True`` every method's row cells (one integer per prediction row, or per row of a cell's
    target with those rows themselves where they are at most a quarter of them: :class:`MethodRows`).
    """

    def __init__(self, growth: tuple, methods: Mapping[str, pd.DataFrame], keep_frames: bool = True,
                 keep_splits: bool = False) -> None:
        self.growth, self.methods = tuple(growth), methods
        self.keep_frames, self.keep_splits = keep_frames, keep_splits
        self.cells = evaluation_cells(*self.growth)
        self._position = {key: i for i, key in enumerate(self.cells)}
        self._split: dict[str, MethodRows] = {}
        self._frames: dict[tuple, pd.DataFrame] = {}
        self._contents: dict[tuple, tuple] = {}

    def check(self, growth: tuple, methods: Mapping[str, pd.DataFrame]) -> CellFrames:
        """This object, when built from ``growth`` and ``methods`` themselves; else a clear error."""
        same_growth = len(growth) == len(self.growth) and all(a is b for a, b in zip(growth, self.growth))
        if not same_growth or any(self.methods.get(name) is not frame for name, frame in methods.items()):
            raise TempoInputError("frames: cut from other targets, ground truth or predictions than those scored")
        return self

    def of(self, name: str, key: tuple[str, str]) -> pd.DataFrame:
        """``protein, term, score`` of method ``name`` in the cell ``key`` (mode, aspect)."""
        if (name, key) in self._frames:
            return self._frames[(name, key)]
        if name not in self._split:
            if not self.keep_splits:
                self._split.clear()
            self._split[name] = method_rows(self.methods[name], self.cells)
        frame = cell_predictions(self.methods[name], self._split[name], self.cells[key], self._position[key])
        if self.keep_frames:
            self._frames[(name, key)] = frame
        return frame

    def content(self, name: str, key: tuple[str, str]) -> tuple:
        """The evaluator's content key of :meth:`of` ``(name, key)`` (``core.evaluation.metrics.frame_key``),
        digested once while the frame is held: the curve, the intervals and the pairs of a cell read the
        same frame."""
        if (name, key) not in self._contents:
            content = content_key(self.of(name, key), PREDICTION_KEY_COLUMNS)
            if not self.keep_frames:
                return content
            self._contents[(name, key)] = content
        return self._contents[(name, key)]
