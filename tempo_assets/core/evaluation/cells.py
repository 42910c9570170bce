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

    Parameters
    ----------
    targets : DataFrame ``protein, aspect, mode``
    ground_truth : DataFrame ``protein, term, aspect`` (propagated terms at the newer release)
    known : DataFrame ``protein, term, aspect`` (PK known terms) or None
    """
    require_columns(targets, ("protein", "aspect", "mode"), "targets")
    require_columns(ground_truth, ("protein", "term", "aspect"), "ground truth")
    out = {}
    for mode in modes:
        for aspect in aspects:
            cell = targets[(targets["mode"] == mode) & (targets["aspect"] == aspect)]
            if cell.empty and not keep_empty:
                continue
            keys = cell[["protein", "aspect"]].drop_duplicates()
            truth = ground_truth.merge(keys, on=["protein", "aspect"])[["protein", "term"]]
            kn = None
            if mode == "PK" and known is not None:
                kn = known[known["protein"].isin(cell["protein"]) & (known["aspect"] == aspect)][["protein", "term"]]
            out[(mode, aspect)] = Cell(mode, aspect, cell, truth, kn)
    return out


@dataclass(frozen=True)
class MethodRows:
    """Where one method's prediction rows fall among the cells of a growth (:func:`method_rows`).

    ``cell`` (n_rows,) each row's position in the cells (-1: in none), or None when a protein is a target
    of two cells of one aspect (then each cell compares its own proteins); ``aspects`` the aspects the
    method predicts in."""

    cell: np.ndarray | None
    aspects: frozenset


def method_rows(predictions: pd.DataFrame, cells: Mapping[tuple[str, str], Cell]) -> MethodRows:
    """Each prediction row's cell, by integer codes: the proteins and aspects factorised once, each cell's
    targets looked up among the distinct proteins (not every row compared with every cell's strings)."""
    a_codes, a_uniques = pd.factorize(predictions["aspect"])
    aspects = frozenset(a_uniques)
    p_codes, p_uniques = pd.factorize(predictions["protein"])
    proteins, code_of_aspect = pd.Index(p_uniques), {a: i for i, a in enumerate(a_uniques)}
    table = np.full((len(a_uniques), len(p_uniques)), -1, dtype=np.int64)
    for position, cell in enumerate(cells.values()):
        a = code_of_aspect.get(cell.aspect)
        if a is None:
            continue
        found = proteins.get_indexer(pd.unique(cell.proteins))
        found = found[found >= 0]
        if (table[a, found] >= 0).any():
            return MethodRows(None, aspects)
        table[a, found] = position
    rows = np.full(len(predictions), -1, dtype=np.int64)
    both = (a_codes >= 0) & (p_codes >= 0)
    rows[both] = table[a_codes[both], p_codes[both]]
    return MethodRows(rows, aspects)


def cell_predictions(predictions: pd.DataFrame, where: MethodRows, cell: Cell, position: int) -> pd.DataFrame:
    """``protein, term, score`` of the rows of ``predictions`` in ``cell`` (at ``position`` among the cells):
    rows of its aspect whose protein is one of its targets, in their order; ``where`` is
    :func:`method_rows` of the predictions (its ``cell`` None: each row compared with the cell's targets)."""
    if cell.aspect not in where.aspects:
        return pd.DataFrame(columns=["protein", "term", "score"])
    if where.cell is None:
        keep = (predictions["aspect"] == cell.aspect) & predictions["protein"].isin(cell.proteins)
        rows = np.flatnonzero(keep.to_numpy(dtype=bool))
    else:
        rows = np.flatnonzero(where.cell == position)
    return predictions[["protein", "term", "score"]].iloc[rows]


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
    ``keep_splits=True`` every method's row cells (one integer per prediction row).
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
