"""Cosine nearest neighbours (faiss: exact flat search, or an inverted file's proposal re-ranked
exactly) and the plain KNN term predictor."""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd

from tempo_assets.core.inputs.embedders import normalize_rows
from tempo_assets.core.base.errors import TempoInputError
from tempo_assets.core.base.io import atomic_write
from tempo_assets.core.base.progress import Progress

NEIGHBOUR_COLUMNS = ["query", "neighbour", "similarity", "rank"]
SCORE_COLUMNS = ["protein", "term", "aspect", "score"]
_FORMAT = "tempo-knn-index-1"
# two float32 similarities closer than this are treated as a possible tie when deciding
# whether the candidate list is long enough to break ties by neighbour id
_TIE_EPS = 1e-5


class KnnIndexError(TempoInputError):
    """A KNN index file or its inputs are unusable."""


@dataclass(frozen=True)
class InvertedFileSearch:
    """Settings of an inverted-file proposal (faiss ``IndexIVFFlat``, inner product).

    The corpus is cut into ``nlist`` lists by spherical k-means (faiss's, seeded with ``seed``,
    10 iterations) trained on ``train_rows`` corpus rows drawn without replacement with
    ``numpy.random.default_rng(seed)`` (None: ``min(corpus rows, 50 * nlist)``); a query scans the
    ``nprobe`` lists whose centroids are nearest. Only the proposal changes: a neighbour in no
    probed list is missed (recall is lost), every reported similarity is still exact.
    """

    nlist: int
    nprobe: int
    train_rows: int | None = None
    seed: int = 0

    @property
    def name(self) -> str:
        return f"ivf{self.nlist}x{self.nprobe}"

    def training_rows(self, corpus_rows: int) -> np.ndarray:
        """Sorted corpus row positions k-means trains on; KnnIndexError names a bad setting."""
        for setting in ("nlist", "nprobe"):
            if int(getattr(self, setting)) < 1:
                raise KnnIndexError(f"inverted file: {setting} must be >= 1, got {getattr(self, setting)}")
        if self.nprobe > self.nlist:
            raise KnnIndexError(f"inverted file: nprobe {self.nprobe} exceeds nlist {self.nlist}")
        if self.nlist > corpus_rows:
            raise KnnIndexError(f"inverted file: nlist {self.nlist} exceeds the corpus's {corpus_rows} rows")
        rows = min(corpus_rows, 50 * self.nlist) if self.train_rows is None else int(self.train_rows)
        if not self.nlist <= rows <= corpus_rows:
            raise KnnIndexError(f"inverted file: train_rows {rows} must lie between nlist {self.nlist} "
                                f"and the corpus's {corpus_rows} rows")
        return np.sort(np.random.default_rng(self.seed).choice(corpus_rows, size=rows, replace=False))


def _check_matrix(ids: Sequence[str], matrix: np.ndarray, what: str) -> tuple[np.ndarray, np.ndarray]:
    ids = np.asarray([str(x) for x in ids], dtype=object)
    matrix = np.asarray(matrix)
    if matrix.ndim != 2:
        raise KnnIndexError(f"{what} matrix has shape {matrix.shape}, expected (n, dim)")
    if matrix.shape[0] != len(ids):
        raise KnnIndexError(f"{what}: {len(ids)} ids but {matrix.shape[0]} rows")
    if not np.isfinite(matrix).all():
        bad = int(np.flatnonzero(~np.isfinite(matrix).all(axis=1))[0])
        raise KnnIndexError(f"{what}: row for {ids[bad]!r} has non-finite values")
    return ids, normalize_rows(matrix)


class KnnIndex:
    """Cosine search over L2-normalised float32 rows: faiss ``IndexFlatIP`` (exact, the default) or,
    with ``inverted``, ``IndexIVFFlat`` proposing from ``nprobe`` lists (re-ranked exactly).

    Build with :meth:`build`; persist with :meth:`save` / :meth:`load` (one file holding the
    serialised faiss index and the ids, written atomically).
    """

    def __init__(self, index, ids: np.ndarray, matrix: np.ndarray, threads: int = 1,
                 inverted: InvertedFileSearch | None = None):
        self.index = index
        self.ids = ids
        self.matrix = matrix
        self.threads = int(threads)
        self.inverted = inverted

    @property
    def dim(self) -> int:
        return int(self.matrix.shape[1])

    def __len__(self) -> int:
        return len(self.ids)

    @classmethod
    def build(cls, ids: Sequence[str], matrix: np.ndarray, threads: int = 1,
              inverted: InvertedFileSearch | None = None) -> "KnnIndex":
        """Index the corpus.

        Parameters
        ----------
        ids : sequence of str, length n, unique
        matrix : ndarray, shape (n, dim); rows are L2-normalised here (zero rows stay zero)
        threads : int
            faiss OpenMP threads for training and searches (1 keeps tests deterministic and polite).
        inverted : InvertedFileSearch, optional
            Propose candidates from an inverted file (trained here) instead of the exact flat scan.
        """
        ids, matrix = _check_matrix(ids, matrix, "corpus")
        if len(set(ids.tolist())) != len(ids):
            seen, dup = set(), None
            for key in ids:
                if key in seen:
                    dup = key
                    break
                seen.add(key)
            raise KnnIndexError(f"corpus id {dup!r} appears more than once")
        made = cls(None, ids, matrix, threads, inverted)
        made.index = made._with_threads(made._new_index)
        return made

    def _new_index(self):
        import faiss

        dim = int(self.matrix.shape[1])
        if self.inverted is None:
            index = faiss.IndexFlatIP(dim)
        else:
            sample = self.inverted.training_rows(len(self.matrix))
            index = faiss.IndexIVFFlat(faiss.IndexFlatIP(dim), dim, self.inverted.nlist, faiss.METRIC_INNER_PRODUCT)
            index.cp.seed = self.inverted.seed
            index.train(self.matrix[sample])
            index.nprobe = self.inverted.nprobe
        if len(self.matrix):
            index.add(self.matrix)
        return index

    def save(self, path: str | Path) -> None:
        """Write index and ids into one ``.npz`` file, atomically."""
        import faiss

        blob = faiss.serialize_index(self.index)
        fields = {} if self.inverted is None else {"inverted_file": np.asarray(json.dumps(asdict(self.inverted)))}
        with atomic_write(path, mode="wb") as handle:
            np.savez(
                handle,
                format=np.asarray(_FORMAT),
                faiss_index=np.asarray(blob, dtype=np.uint8),
                ids=np.asarray(self.ids.tolist(), dtype=str),
                **fields,
            )

    @classmethod
    def load(cls, path: str | Path, threads: int = 1) -> "KnnIndex":
        """Read an index written by :meth:`save`."""
        import faiss

        path = Path(path)
        try:
            with np.load(path, allow_pickle=False) as data:
                if str(data["format"]) != _FORMAT:
                    raise KnnIndexError(f"format {str(data['format'])!r}, expected {_FORMAT!r}", path=path)
                blob = data["faiss_index"]
                ids = np.asarray(data["ids"].tolist(), dtype=object)
                settings = json.loads(str(data["inverted_file"])) if "inverted_file" in data else None
        except (OSError, ValueError, KeyError, EOFError) as exc:
            raise KnnIndexError(f"cannot read KNN index: {exc}", path=path) from exc
        index = faiss.deserialize_index(blob)
        if index.ntotal != len(ids):
            raise KnnIndexError(f"index holds {index.ntotal} vectors but {len(ids)} ids", path=path)
        if settings is not None:
            faiss.extract_index_ivf(index).make_direct_map()
        matrix = index.reconstruct_n(0, index.ntotal) if index.ntotal else np.zeros((0, index.d), np.float32)
        inverted = None if settings is None else InvertedFileSearch(**settings)
        return cls(index, ids, np.ascontiguousarray(matrix, dtype=np.float32), threads, inverted)

    def _with_threads(self, call, *args):
        import faiss

        previous = faiss.omp_get_max_threads()
        faiss.omp_set_num_threads(self.threads)
        try:
            return call(*args)
        finally:
            faiss.omp_set_num_threads(previous)

    def _faiss_search(self, queries: np.ndarray, depth: int) -> tuple[np.ndarray, np.ndarray]:
        return self._with_threads(self.index.search, queries, depth)

    def search(
        self,
        query_ids: Sequence[str],
        query_matrix: np.ndarray,
        k: int,
        exclude_self: bool = True,
        batch_size: int = 4096,
    ) -> pd.DataFrame:
        """The k most cosine-similar corpus proteins of each query.

        faiss proposes candidates; similarities of the candidates are then recomputed in float64
        and ranked by (similarity desc, neighbour id asc), so ties (duplicate sequences are
        common) are broken by neighbour id whatever faiss's internal order. When the proposed
        list may cut a tie group (its last similarity is within 1e-5 of the k-th kept one),
        the query is searched again with a longer list. With an inverted file faiss proposes only
        rows of the ``nprobe`` probed lists (a shorter list than asked means they are exhausted,
        so no longer list is asked for); the ranking, ties, self exclusion and k are the same.

        Queries with bit-identical normalised rows (duplicate sequences) are proposed by faiss
        once per distinct row, at the same list lengths a query alone would get; each query then
        drops its own id and is ranked and cut on its own, so every query's answer is the one it
        gets when searched by itself.

        Parameters
        ----------
        query_ids : sequence of str, length q
        query_matrix : ndarray, shape (q, dim)
        k : int, neighbours per query (fewer when the corpus is smaller)
        exclude_self : bool
            Drop the corpus row whose id equals the query id (only that one), then rank 1..k.
        batch_size : int, distinct query rows per faiss call

        Returns
        -------
        DataFrame
            Columns ``query`` (str), ``neighbour`` (str), ``similarity`` (float64), ``rank``
            (int32, 1..k), sorted by query (input order) then rank.
        """
        if int(k) < 1:
            raise ValueError(f"k must be >= 1, got {k}")
        k = int(k)
        qids, queries = _check_matrix(query_ids, query_matrix, "query")
        if queries.shape[1] != self.dim and len(self):
            raise KnnIndexError(f"query dim {queries.shape[1]} differs from corpus dim {self.dim}")
        if len(self) == 0 or len(qids) == 0:
            return _empty_neighbours()
        found = _Found(len(qids), min(k, len(self)))
        groups = identical_rows(queries)
        progress, done = Progress("knn search", len(qids), "queries"), 0
        for start in range(0, len(groups), batch_size):
            batch = groups[start:start + batch_size]
            self._search_groups(qids, queries, batch, k, exclude_self, found)
            done += sum(len(members) for members in batch)
            progress.update(done)
        return found.frame(qids, self.ids)

    def _search_groups(self, qids: np.ndarray, queries: np.ndarray, groups: list[np.ndarray], k: int,
                       exclude_self: bool, found: "_Found") -> None:
        """Search each group of identical query rows with one faiss list per round; each member
        leaves the rounds when its own (self-excluded) list is long enough, as it would alone."""
        n = len(self)
        depth = min(n, k + (1 if exclude_self else 0) + 4)
        pending = list(groups)
        while pending:
            sims32, labels = self._faiss_search(queries[[members[0] for members in pending]], depth)
            again = []
            for local, members in enumerate(pending):
                keep = labels[local] >= 0
                lab, s32 = labels[local][keep], sims32[local][keep]
                # a list shorter than asked holds every row faiss can propose (an inverted file's
                # probed lists): a longer one would add nothing
                cut = depth < n and len(lab) == depth
                left = [q for q in members
                        if not self._rank_candidates(qids, queries, int(q), (lab, s32, cut), k,
                                                     exclude_self, found)]
                if left:
                    again.append(np.asarray(left, dtype=np.int64))
            pending = again
            depth = min(n, depth * 2)

    def _rank_candidates(self, qids: np.ndarray, queries: np.ndarray, q: int, proposed: tuple, k: int,
                         exclude_self: bool, found: "_Found") -> bool:
        """Rank query ``q``'s proposed candidates ``(labels, float32 sims, list was cut)`` into
        ``found``; False when the list is too short or may cut a tie group (search deeper)."""
        lab, s32, cut = proposed
        if exclude_self:
            not_self = self.ids[lab] != qids[q]
            lab_ns, s32_ns = lab[not_self], s32[not_self]
        else:
            lab_ns, s32_ns = lab, s32
        # enough candidates unless the k-th similarity ties with the list's end
        if cut and (len(s32_ns) < k or s32[-1] >= s32_ns[k - 1] - _TIE_EPS):
            return False
        sims = self.matrix[lab_ns].astype(np.float64) @ queries[q].astype(np.float64)
        order = np.lexsort((self.ids[lab_ns].astype(str), -sims))[:k]
        found.put(q, lab_ns[order], sims[order])
        return True


def identical_rows(matrix: np.ndarray) -> list[np.ndarray]:
    """Row positions of ``matrix`` grouped by identical bytes, each group ascending, the groups in
    the order of their first row."""
    if matrix.shape[1] == 0:
        return [np.arange(len(matrix), dtype=np.int64)]
    rows = np.ascontiguousarray(matrix).view(np.dtype((np.void, matrix.dtype.itemsize * matrix.shape[1])))
    _, first, inverse = np.unique(rows.ravel(), return_index=True, return_inverse=True)
    by_first = np.argsort(first, kind="stable")
    rank_of = np.empty_like(by_first)
    rank_of[by_first] = np.arange(len(by_first))
    group_of = rank_of[inverse.ravel()]
    members = np.argsort(group_of, kind="stable")
    return np.split(members, np.cumsum(np.bincount(group_of))[:-1])


class _Found:
    """Each query's ranked neighbours (corpus row labels and float64 similarities), at most k."""

    def __init__(self, queries: int, k: int):
        self.labels = np.zeros((queries, k), dtype=np.int64)
        self.sims = np.zeros((queries, k), dtype=np.float64)
        self.counts = np.zeros(queries, dtype=np.int64)

    def put(self, q: int, labels: np.ndarray, sims: np.ndarray) -> None:
        self.labels[q, :len(labels)] = labels
        self.sims[q, :len(labels)] = sims
        self.counts[q] = len(labels)

    def frame(self, qids: np.ndarray, corpus_ids: np.ndarray) -> pd.DataFrame:
        """``query, neighbour, similarity, rank`` in query order then rank."""
        kept = np.arange(self.labels.shape[1])[None, :] < self.counts[:, None]
        ranks = np.broadcast_to(np.arange(1, self.labels.shape[1] + 1, dtype=np.int32), self.labels.shape)
        return pd.DataFrame(
            {
                "query": np.repeat(qids, self.counts).astype(str).astype(object),
                "neighbour": corpus_ids[self.labels[kept]].astype(str).astype(object),
                "similarity": self.sims[kept].astype(np.float64),
                "rank": ranks[kept].astype(np.int32),
            }
        )


def _empty_neighbours() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "query": pd.Series([], dtype=object),
            "neighbour": pd.Series([], dtype=object),
            "similarity": pd.Series([], dtype=np.float64),
            "rank": pd.Series([], dtype=np.int32),
        }
    )


def knn_term_scores(
    neighbours: pd.DataFrame,
    corpus_annotations: pd.DataFrame,
    k: int | None = None,
    method: str = "max",
) -> pd.DataFrame:
    """Transfer the neighbours' GO terms to each query: the plain KNN predictor.

    For query ``q`` with neighbours ``N_k(q)`` (ranks ``1..k``; all ranks when ``k`` is None)
    and similarities ``s_n``:

    - ``method="max"``: ``score(q, t) = max { s_n : n in N_k(q), n annotated with t }``.
    - ``method="weighted"``: ``score(q, t) = sum_{n annotated with t} s_n / sum_{n in N_k(q)} s_n``
      with negative similarities counted as 0 (a similarity-weighted vote).

    Scores are clipped into (0, 1]: pairs scoring <= 0 are dropped, scores above 1 (float
    rounding on duplicate sequences) become 1.

    Parameters
    ----------
    neighbours : DataFrame ``query, neighbour, similarity, rank`` (from :meth:`KnnIndex.search`)
    corpus_annotations : DataFrame ``protein, term, aspect``, propagated (duplicates ignored)
    k : int, optional, only neighbours with ``rank <= k``
    method : "max" or "weighted"

    Returns
    -------
    DataFrame ``protein, term, aspect, score`` (``protein`` = query), sorted by protein,
    aspect, term.
    """
    for column in ("query", "neighbour", "similarity", "rank"):
        if column not in neighbours.columns:
            raise TempoInputError(f"neighbours frame lacks column {column!r}")
    for column in ("protein", "term", "aspect"):
        if column not in corpus_annotations.columns:
            raise TempoInputError(f"corpus annotations lack column {column!r}")
    if method not in {"max", "weighted"}:
        raise ValueError(f"method must be 'max' or 'weighted', got {method!r}")
    nb = neighbours[["query", "neighbour", "similarity", "rank"]]
    if k is not None:
        nb = nb[nb["rank"] <= int(k)]
    nb = nb.assign(similarity=nb["similarity"].astype(np.float64))
    ann = corpus_annotations[["protein", "term", "aspect"]].drop_duplicates()
    pairs = nb.merge(ann, left_on="neighbour", right_on="protein", how="inner")
    grouped = pairs.groupby(["query", "term", "aspect"], sort=False, observed=True)["similarity"]
    if method == "max":
        scores = grouped.max()
    else:
        weights = nb.assign(similarity=nb["similarity"].clip(lower=0.0))
        pairs = pairs.assign(similarity=pairs["similarity"].clip(lower=0.0))
        total = weights.groupby("query", observed=True)["similarity"].sum()
        numerator = pairs.groupby(["query", "term", "aspect"], sort=False, observed=True)["similarity"].sum()
        denominator = total.reindex(numerator.index.get_level_values("query")).to_numpy()
        with np.errstate(divide="ignore", invalid="ignore"):
            scores = pd.Series(numerator.to_numpy() / denominator, index=numerator.index)
    out = scores.rename("score").reset_index().rename(columns={"query": "protein"})
    out = out[out["score"] > 0].copy()
    out["score"] = out["score"].clip(upper=1.0)
    out = out.sort_values(["protein", "aspect", "term"], kind="mergesort").reset_index(drop=True)
    return out[SCORE_COLUMNS]
