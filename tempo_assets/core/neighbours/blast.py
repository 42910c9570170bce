"""The BLAST baseline of CAFA/LAFA, run with DIAMOND (Debian's ``diamond-aligner``).

The baseline (Radivojac et al. 2013, CAFA1; kept as a reference method in every CAFA and in
LAFA) aligns each target against the annotated corpus and transfers every term of every hit,
scoring a term by the highest percent identity among the hits that carry it:

    score(q, t) = max { pident(q, s) / 100 : s a hit of q, s annotated with t }

DIAMOND stands in for BLASTP (its sensitive modes are built to approach BLASTP's sensitivity,
and Debian ships it). The alignment runs in a subprocess with a fixed thread count,
and every output is sorted, so equal inputs give equal frames.
"""
from __future__ import annotations

import multiprocessing.util
import os
import re
import shutil
import threading
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from tempo_assets.core.base.errors import TempoInputError
from tempo_assets.core.base.io import atomic_write, sha256_file
from tempo_assets.core.base.liveness import owned_temporary_folder
from tempo_assets.core.base.progress import run_reporting

__all__ = [
    "HIT_COLUMNS",
    "SENSITIVITIES",
    "DiamondDatabases",
    "DiamondError",
    "MissingToolError",
    "blast_term_scores",
    "diamond_hits",
    "find_diamond",
    "best_hsps",
    "homology_hits",
]

HIT_COLUMNS = ["query", "subject", "pident", "bitscore", "evalue"]
SCORE_COLUMNS = ["protein", "term", "aspect", "score"]
SENSITIVITIES = (None, "--fast", "--mid-sensitive", "--sensitive", "--more-sensitive",
                 "--very-sensitive", "--ultra-sensitive")
_ASPECTS = ("BP", "MF", "CC")
# DIAMOND reads the first word of a header as the id; an id must survive that unchanged.
_ID_OK = re.compile(r"^[^\s>]+$")
_STDERR_TAIL = 4000
# the private database folders' names start so (a folder of a killed process is swept by this prefix)
PRIVATE_PREFIX = "tempo_diamond_db_"


class MissingToolError(TempoInputError):
    """An external program Tempo needs is not installed (the message says how to install it)."""


class DiamondError(TempoInputError):
    """DIAMOND exited with an error; the message carries the command and DIAMOND's stderr."""


def find_diamond() -> Path:
    """Path of the ``diamond`` executable on ``PATH``.

    Raises
    ------
    MissingToolError
        When no ``diamond`` is on ``PATH``; the message says how to install it.
    """
    found = shutil.which("diamond")
    if found is None:
        raise MissingToolError(
            "the BLAST baseline needs the `diamond` aligner, which is not on PATH. Install it "
            "with `apt-get install diamond-aligner` (Debian/Ubuntu) or run "
            "`bash scripts/setup_system.sh` as root; other systems: install DIAMOND 2.x and put "
            "`diamond` on PATH",
            path="diamond",
        )
    return Path(found)


def _check_sequences(sequences: Mapping[str, str], what: str) -> None:
    if not isinstance(sequences, Mapping):
        raise TempoInputError(f"{what} must be a mapping accession -> sequence, "
                              f"got {type(sequences).__name__}")
    for key, seq in sequences.items():
        if not isinstance(key, str) or not _ID_OK.match(key):
            raise TempoInputError(f"{what}: accession {key!r} is empty or holds whitespace or '>'",
                                  path=what)
        if not isinstance(seq, str) or not seq.strip():
            raise TempoInputError(f"{what}: sequence of {key!r} is empty or not a string", path=what)


def _write_fasta(path: Path, sequences: Mapping[str, str]) -> None:
    with atomic_write(path) as handle:
        for key in sorted(sequences):
            seq = sequences[key].strip().upper().rstrip("*")
            handle.write(f">{key}\n")
            for start in range(0, len(seq), 60):
                handle.write(seq[start:start + 60] + "\n")


def _out_of(command: list[str]) -> Path | None:
    return Path(command[command.index("--out") + 1]) if "--out" in command else None


def _run(command: list[str], workdir: Path) -> None:
    try:
        done = run_reporting(command, workdir, f"diamond {command[1]}", watch=_out_of(command))
    except OSError as exc:  # the binary vanished or is not executable
        raise DiamondError(f"could not run {command[0]}: {exc}", path=command[0]) from exc
    if done.returncode != 0:
        stderr = (done.stderr or "").strip()[-_STDERR_TAIL:]
        raise DiamondError(
            f"`{' '.join(command)}` exited with status {done.returncode}; diamond said:\n{stderr}",
            path=workdir,
        )


def _empty_frame(names: Sequence[str]) -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series([], dtype=object if c in ("query", "subject") else np.float64) for c in names})


# lines of DIAMOND's output parsed at a time: bounds the parser's transient strings to a piece's
_PIECE_LINES = 1_000_000


def best_hsps(output: Path | None, names: Sequence[str], piece_lines: int = _PIECE_LINES) -> pd.DataFrame:
    """DIAMOND's tabular ``output`` (columns ``names``: query, subject, then numeric ones) as one row per
    (query, subject) pair, self hits dropped: the pair's best HSP by bitscore (then pident, then
    evalue where present), sorted by query, bitscore descending, subject. ``None`` or an empty file
    gives an empty frame; a non-numeric value raises :class:`DiamondError` naming file and line.

    The file is read ``piece_lines`` lines at a time. DIAMOND writes each query's hits together, in
    the order of the (sorted) query FASTA, so a piece that holds whole queries is reduced on its own
    (the last query of a piece waits for the next one) and the pieces are joined without copying their
    strings; output in any other order is reduced again as one frame, to the same result.
    """
    names = list(names)
    if output is None or output.stat().st_size == 0:
        return _empty_frame(names)
    pieces, held = [], None
    with pd.read_csv(output, sep="\t", header=None, names=names, dtype={"query": str, "subject": str},
                     keep_default_na=False, engine="c", chunksize=int(piece_lines)) as reader:
        for chunk in reader:
            chunk = _numeric(chunk, names, output)
            if held is not None:
                chunk = pd.concat([held, chunk])
            waits = (chunk["query"] == chunk["query"].iloc[-1]).to_numpy()
            held = chunk[waits]
            pieces.append(_columns(_reduced(chunk[~waits], names)))
    if held is None:  # no line to read
        return _empty_frame(names)
    last = _reduced(held, names)
    pieces = [piece for piece in [*pieces, _columns(last)] if len(piece["query"])]
    if not pieces:
        return last
    if any(before["query"].iloc[-1] >= after["query"].iloc[0] for before, after in zip(pieces, pieces[1:])):
        # not grouped by query in order: reduced again as one frame
        return _reduced(pd.concat([pd.DataFrame(piece, copy=False) for piece in pieces]), names)
    return _joined(pieces, names)


def _numeric(frame: pd.DataFrame, names: list[str], output: Path) -> pd.DataFrame:
    for column in names[2:]:
        values = pd.to_numeric(frame[column], errors="coerce")
        if values.isna().any():
            at = int(np.flatnonzero(values.isna().to_numpy())[0])
            raise DiamondError(f"diamond output has a non-numeric {column} "
                               f"{frame[column].iloc[at]!r}", path=output, line=int(frame.index[at]) + 1)
        frame[column] = values.astype(np.float64)
    return frame


def _reduced(frame: pd.DataFrame, names: list[str]) -> pd.DataFrame:
    """``frame``'s rows without self hits, one per (query, subject) (its best HSP), sorted."""
    frame = frame[frame["query"] != frame["subject"]]
    ties = ["bitscore", "pident"] + (["evalue"] if "evalue" in names else [])
    frame = frame.sort_values(["query", "subject", *ties], ascending=[True, True, False, False, True][:2 + len(ties)],
                              kind="mergesort").drop_duplicates(["query", "subject"], keep="first")
    frame = frame.sort_values(["query", "bitscore", "subject"], ascending=[True, False, True], kind="mergesort")
    return frame[names].reset_index(drop=True)


def _columns(frame: pd.DataFrame) -> dict:
    """``frame``'s columns apart (each numeric one copied out of the frame's block, so it can be let go alone)."""
    return {name: frame[name] if name in ("query", "subject") else frame[name].to_numpy(copy=True)
            for name in frame.columns}


def _joined(pieces: list[dict], names: list[str]) -> pd.DataFrame:
    """The pieces one after the other: the id columns' Arrow strings are chained, not copied; each numeric
    column is joined and its pieces let go before the next (the numbers are held twice one column at a time)."""
    columns = {}
    for name in names:
        parts = [piece.pop(name) for piece in pieces]
        columns[name] = pd.concat(parts, ignore_index=True) if name in ("query", "subject") else np.concatenate(parts)
        del parts
    return pd.DataFrame(columns, copy=False)


@dataclass(frozen=True)
class DiamondSearch:
    """DIAMOND ``blastp`` settings: ``--threads`` (fixed, so runs repeat exactly), ``--evalue``,
    ``--max-target-seqs`` (``0`` = all) and a sensitivity flag of :data:`SENSITIVITIES` (``None`` =
    DIAMOND's default fast mode)."""

    threads: int = 1
    evalue: float = 1e-3
    max_target_seqs: int = 25
    sensitivity: str | None = None

    def check(self) -> None:
        if self.sensitivity not in SENSITIVITIES:
            raise TempoInputError(f"sensitivity must be one of {SENSITIVITIES}, got {self.sensitivity!r}")
        if int(self.threads) < 1:
            raise TempoInputError(f"threads must be >= 1, got {self.threads!r}")
        if not (float(self.evalue) > 0):
            raise TempoInputError(f"evalue must be > 0, got {self.evalue!r}")
        if int(self.max_target_seqs) < 0:
            raise TempoInputError(f"max_target_seqs must be >= 0, got {self.max_target_seqs!r}")


class DiamondDatabases:
    """DIAMOND databases by the sha256 of their corpus FASTA: ``diamond makedb`` runs once per corpus
    and every search against that corpus reads the same database (the recipe's hits at t-1 and t0,
    the BLAST baseline, the homology clusters...).

    A database is built under a temporary name and renamed into place, so a search never reads a
    half-built one; two processes may build the same one at once (the later rename wins, the bytes
    are the same). ``folder`` ``None``: a private temporary folder of this process (a forked child
    makes its own), removed when the process exits (a multiprocessing child's exit included) or, when
    it was killed without its exit functions (SIGKILL), by the next process that makes one
    (:func:`~tempo_assets.core.base.liveness.owned_temporary_folder`).
    """

    def __init__(self, folder: str | Path | None = None):
        self._folder = Path(folder) if folder is not None else None
        self._private_of = None  # the pid whose private folder ``_folder`` is
        self._lock = threading.Lock()

    @property
    def folder(self) -> Path:
        with self._lock:
            if self._folder is None or self._private_of not in (None, os.getpid()):
                made = owned_temporary_folder(PRIVATE_PREFIX)
                # removed at exit by multiprocessing's exit function: it runs at a normal exit of this
                # interpreter (it is an atexit handler) and also in a multiprocessing child (a step process),
                # which ends with os._exit and so never runs atexit handlers (hundreds of folders were left in /tmp)
                self._made = made
                multiprocessing.util.Finalize(made, made.cleanup, exitpriority=0)
                self._folder, self._private_of = Path(made.name), os.getpid()
            self._folder.mkdir(parents=True, exist_ok=True)
            return self._folder

    def database(self, corpus_fasta: Path, diamond: Path, threads: str, workdir: Path) -> Path:
        """The database of ``corpus_fasta`` (built now when no search made it before)."""
        database = self.folder / f"{sha256_file(corpus_fasta)}.dmnd"
        if not database.exists():
            building = database.with_name(f".{database.stem}.{uuid.uuid4().hex}.dmnd")
            try:
                _run([str(diamond), "makedb", "--in", str(corpus_fasta), "--db", str(building),
                      "--threads", threads], workdir)
                os.replace(building, database)
            finally:
                building.unlink(missing_ok=True)
        return database


DATABASES = DiamondDatabases()


def run_blastp(query_sequences: Mapping[str, str], corpus_sequences: Mapping[str, str], workdir: str | Path,
               columns: Sequence[str], output_name: str, search: DiamondSearch = DiamondSearch()) -> Path | None:
    """Run ``diamond blastp`` of ``query_sequences`` against ``corpus_sequences`` in ``workdir``.

    The corpus's database comes from :data:`DATABASES` (``diamond makedb`` once per corpus content).
    Output format 6 with ``qseqid sseqid`` and then ``columns``; returns the output file, or
    ``None`` when either side is empty. Raises like :func:`diamond_hits`.
    """
    _check_sequences(query_sequences, "query sequences")
    _check_sequences(corpus_sequences, "corpus sequences")
    search.check()
    diamond = find_diamond()
    if not query_sequences or not corpus_sequences:
        return None

    workdir = Path(workdir).resolve()  # DIAMOND runs in workdir: relative file names would point below it
    workdir.mkdir(parents=True, exist_ok=True)
    query_fasta, corpus_fasta = workdir / "query.fasta", workdir / "corpus.fasta"
    output = workdir / output_name
    tmpdir = workdir / "tmp"
    tmpdir.mkdir(exist_ok=True)
    _write_fasta(query_fasta, query_sequences)
    _write_fasta(corpus_fasta, corpus_sequences)
    output.unlink(missing_ok=True)

    threads = str(int(search.threads))
    database = DATABASES.database(corpus_fasta, diamond, threads, workdir)
    command = [str(diamond), "blastp", "--query", str(query_fasta), "--db", str(database),
               "--out", str(output), "--outfmt", "6", "qseqid", "sseqid", *columns,
               "--evalue", repr(float(search.evalue)), "--max-target-seqs", str(int(search.max_target_seqs)),
               "--threads", threads, "--tmpdir", str(tmpdir)]
    if search.sensitivity:
        command.append(search.sensitivity)
    _run(command, workdir)
    if not output.exists():
        raise DiamondError("diamond blastp finished without writing its output", path=output)

    return output


def diamond_hits(
    query_sequences: Mapping[str, str],
    corpus_sequences: Mapping[str, str],
    workdir: str | Path,
    threads: int = 1,
    sensitivity: str | None = "--sensitive",
    evalue: float = 1e-3,
    max_target_seqs: int = 250,
) -> pd.DataFrame:
    """Align queries against a corpus with ``diamond blastp``; self-hits dropped.

    Writes ``query.fasta`` and ``corpus.fasta`` into ``workdir``, takes the corpus's database from
    :data:`DATABASES` (``diamond makedb`` once per corpus) and runs ``diamond blastp --outfmt 6 qseqid
    sseqid pident bitscore evalue``. A hit whose subject is the query itself (same accession) is dropped, so a
    protein present in both sets never transfers its own terms. When DIAMOND reports several
    HSPs for one pair, the one with the highest bitscore is kept.

    Parameters
    ----------
    query_sequences, corpus_sequences : mapping accession -> amino-acid sequence
        Accessions may not contain whitespace or ``>``.
    workdir : folder for DIAMOND's inputs, database, output and temporary files (created).
    threads : DIAMOND ``--threads``; fixed so runs repeat exactly.
    sensitivity : one of :data:`SENSITIVITIES` (``None`` = DIAMOND's default fast mode).
    evalue : report hits with e-value at most this (CAFA's BLAST baseline uses 1e-3).
    max_target_seqs : at most this many subjects per query (``0`` = all).

    Returns
    -------
    DataFrame ``query, subject, pident, bitscore, evalue`` (one row per (query, subject) pair),
    sorted by query, bitscore descending, subject.

    Raises
    ------
    MissingToolError : no ``diamond`` on ``PATH``.
    DiamondError : DIAMOND failed (its stderr is in the message).
    TempoInputError : bad accessions or sequences, or bad parameters.
    """
    output = run_blastp(query_sequences, corpus_sequences, workdir, ("pident", "bitscore", "evalue"),
                        "hits.tsv", DiamondSearch(threads, evalue, max_target_seqs, sensitivity))
    return best_hsps(output, HIT_COLUMNS)


def blast_term_scores(hits: pd.DataFrame, corpus_annotations: pd.DataFrame) -> pd.DataFrame:
    """Transfer the terms of each query's hits: the CAFA/LAFA BLAST baseline.

    ``score(q, t) = max { pident(q, s) / 100 : (q, s) in hits, (s, t) in corpus_annotations }``
    (Radivojac et al. 2013). Self pairs (``query == subject``) are ignored even if present, so
    a protein never inherits its own labels; scores are clipped into (0, 1].

    Parameters
    ----------
    hits : DataFrame ``query, subject, pident`` (n_hits rows; other columns ignored), as from
        :func:`diamond_hits`; ``pident`` in [0, 100].
    corpus_annotations : DataFrame ``protein, term, aspect`` (n_annotations rows; propagated
        when the baseline should score ancestors; duplicates ignored).

    Returns
    -------
    DataFrame ``protein, term, aspect, score`` (``protein`` = query), one row per
    (protein, term), sorted by protein, aspect, term. Queries without hits have no rows.
    """
    for column in ("query", "subject", "pident"):
        if column not in hits.columns:
            raise TempoInputError(f"hits frame lacks column {column!r} (has {list(hits.columns)})")
    for column in ("protein", "term", "aspect"):
        if column not in corpus_annotations.columns:
            raise TempoInputError(f"corpus annotations lack column {column!r} "
                                  f"(has {list(corpus_annotations.columns)})")
    pident = pd.to_numeric(hits["pident"], errors="coerce")
    if pident.isna().any() or (pident < 0).any() or (pident > 100).any():
        row = int(np.flatnonzero((pident.isna() | (pident < 0) | (pident > 100)).to_numpy())[0])
        raise TempoInputError(f"hits row {row}: pident {hits['pident'].iloc[row]!r} is not a "
                              "percentage in [0, 100]", path="hits")
    bad_aspects = set(corpus_annotations["aspect"].astype(str).unique()) - set(_ASPECTS)
    if bad_aspects:
        raise TempoInputError(f"corpus annotations have unknown aspects {sorted(bad_aspects)}; "
                              "expected BP, MF, CC")

    pairs = pd.DataFrame({"query": hits["query"].astype(str), "subject": hits["subject"].astype(str),
                          "pident": pident.astype(np.float64)})
    pairs = pairs[(pairs["query"] != pairs["subject"]) & (pairs["pident"] > 0)]
    pairs = pairs.groupby(["query", "subject"], sort=False)["pident"].max().reset_index()
    annotations = corpus_annotations[["protein", "term", "aspect"]].astype(str).drop_duplicates()
    joined = pairs.merge(annotations, left_on="subject", right_on="protein", how="inner")
    if joined.empty:
        return pd.DataFrame({c: pd.Series([], dtype=np.float64 if c == "score" else object)
                             for c in SCORE_COLUMNS})
    best = joined.groupby(["query", "term", "aspect"], sort=False)["pident"].max().reset_index()
    best["score"] = np.clip(best["pident"].to_numpy() / 100.0, 0.0, 1.0)
    best = best.rename(columns={"query": "protein"})
    best = best.sort_values(["protein", "aspect", "term"], kind="mergesort")
    return best[SCORE_COLUMNS].reset_index(drop=True)


HOMOLOGY_COLUMNS = ["query", "subject", "pident", "bitscore", "qcov", "scov"]


def homology_hits(query_sequences: Mapping[str, str], corpus_sequences: Mapping[str, str], workdir: str | Path,
                  threads: int = 1, sensitivity: str | None = None, top: int = 25,
                  evalue: float = 1e-3) -> pd.DataFrame:
    """DIAMOND hits of ``query_sequences`` in ``corpus_sequences`` for the recipe's homology features.

    Like :func:`diamond_hits` (self hits dropped, one row per pair: its best HSP by bitscore) with
    the HSP's query and subject coverage (``qcovhsp``, ``scovhsp``, percent) and at most ``top``
    subjects per query besides the query itself (DIAMOND is asked for ``top + 1``, so a query
    that is in the corpus keeps ``top`` others whether or not it is).

    Returns ``query, subject, pident, bitscore, qcov, scov`` sorted by query, bitscore desc, subject.
    """
    output = run_blastp(query_sequences, corpus_sequences, workdir, ("pident", "bitscore", "qcovhsp", "scovhsp"),
                        "homology.tsv", DiamondSearch(threads, evalue, int(top) + 1, sensitivity))
    return best_hsps(output, HOMOLOGY_COLUMNS).groupby("query", sort=False).head(int(top)).reset_index(drop=True)
