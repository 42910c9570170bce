"""Swiss-Prot-scale window: every stage of Tempo timed beside its raw tool on the same data.

The window: KNN corpus and DIAMOND database = every sequence of ``--fasta`` (by default the
GO-annotated Swiss-Prot 2014-01, 516,371 sequences, from ``../shared/tools/swissprot_2014_fasta.sh``);
corpus labels = propagated experimental annotations of the human and mouse GOA 2014-09-29 files
(GO 2014-10-27); ground truth = their NK/LK/PK growth to the 2019-01-14 files (GO 2019-01-27).
``--proteins N`` query proteins (targets): the growth targets with a sequence first (a seeded
sample of them when N is smaller), then a seeded sample of the other sequences; ``all`` queries
every sequence.

Stages, each run once as Tempo's core call and once as its peer, in this process, on the same
inputs (the peer runs first; KNN alternates them chunk by chunk); per row: wall and CPU seconds (user + sys, children included),
ratio Tempo / peer, and peak RSS (of this process, and of the child for DIAMOND) sampled every
50 ms, with the RSS the process already had when the stage started:

- embedding: ``embed_proteins`` (digest, dedupe, cold ``EmbeddingCache``) vs ``KmerEmbedder.embed``
  on the unique sequences (the numpy vectorisation it wraps; there is no external tool);
- KNN: ``KnnIndex.build`` + ``search`` (exact ties, self excluded) vs faiss ``IndexFlatIP`` add +
  search alone on the same matrix (k + 1 neighbours, the self row included);
- features, KNN term scores: timed without a peer (Tempo's own code, no raw tool exists);
- LightGBM: ``train_reranker`` on the labelled candidate frame vs ``lightgbm.train`` alone on the
  same float64 matrix and labels, same parameters (one thread, deterministic);
- evaluation: the scoring stage's cell loop (``evaluation_cells`` / ``cell_curve``) vs the
  evaluator's core call ``evaluate_frames`` on the same per-cell frames, each side setting up its own
  ground truths (cafaeval itself is far slower: ``bench_eval.py`` compares them);
- DIAMOND: ``diamond_hits`` (``run_blastp``: FASTA writing, makedb, blastp; then parsing) vs
  ``diamond makedb`` + ``diamond blastp`` alone on FASTA files already written, same flags.

This is a timing benchmark: the reranker is trained on the targets' own growth labels, so no
score it prints is a result.

A long run survives being stopped: each finished stage, and each KNN chunk, writes its measured
row (and what later stages read) into ``--work``, and a rerun with the same window arguments
reads those rows back, says so, and measures only what is left (``--fresh`` starts over). To
afford ``--proteins all``, ``--peer-every N`` runs faiss on every N-th KNN chunk only (the ratio
is then over those chunks and printed as a sample), and ``--diamond-peer children`` takes as
DIAMOND's peer the DIAMOND processes inside Tempo's own stage (their rusage) instead of running
DIAMOND a second time. ``--knn-index ivf:NLIST:NPROBE`` searches with an inverted file (faiss
``IndexIVFFlat``, re-ranked exactly; its peer is ``IndexIVFFlat`` alone, trained on the same rows):
the KNN rows and those of the stages after it are kept apart by its name (``knn_ivf4096x32_chunk_0000``,
``scores_ivf4096x32``), beside the flat ones, and its recall@k against the flat chunks measured in
the same folder is printed.

    nice -n 10 .venv/bin/python benchmarks/bench_scale.py --proteins 50000 [--threads 2]
        [--fasta .cache/swissprot_2014-01.fasta.gz] [--stages embedding,knn,...]
        [--peer-every N] [--diamond-peer run|children] [--knn-index flat|ivf:NLIST:NPROBE]
        [--work bench_out/scale] [--fresh]
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))
from tempo_assets.core.base.io import atomic_write  # noqa: E402
ARCHIVE = REPO / ".." / "shared" / "data" / "goa_archive"
DEFAULT_FASTA = REPO / ".cache" / "swissprot_2014-01.fasta.gz"
STAGES = ("embedding", "knn", "features", "lightgbm", "scores", "evaluation", "diamond")
PEERS = {
    "embedding": "KmerEmbedder.embed (numpy) on unique sequences",
    "knn": "faiss IndexFlatIP add + search",
    "knn:ivf": "faiss IndexIVFFlat train + add + search (same nlist, nprobe, training rows, seed)",
    "features": "none",
    "lightgbm": "lightgbm.train on the same matrix",
    "scores": "none",
    "evaluation": "evaluate_frames per cell (core call)",
    "diamond": "diamond makedb + blastp, same flags",
    "diamond:children": "the diamond makedb + blastp child processes of Tempo's stage (their own rusage)",
}
# the graph's defaults (resources.EmbedderResource, SelectionResource's first LightGBM set, K_max)
KMER_K, KMER_DIM, K_MAX = 3, 256, 10
LGBM_PARAMS = {"num_leaves": 7, "learning_rate": 0.1, "min_data_in_leaf": 20, "n_estimators": 100}
BLAST = {"evalue": 1e-3, "max_target_seqs": 250, "sensitivity": None}
# the stages whose rows and outputs depend on the KNN index (kept apart by its name when not flat)
AFTER_KNN = ("knn", "features", "lightgbm", "scores", "evaluation")


def tagged(state: dict, name: str) -> str:
    """``name`` in the work folder for this run's KNN index: as is for the exact flat index, else
    with the inverted file's name (``scores`` -> ``scores_ivf4096x32``)."""
    return name + state.get("knn_tag", "")


# --------------------------------------------------------------------------- measuring


def _rss_kib(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as handle:
            for line in handle:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def _comm(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/comm") as handle:
            return handle.read().strip()
    except OSError:
        return ""


def _children(pid: int) -> list[int]:
    out: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for task in tasks:
        try:
            with open(f"/proc/{pid}/task/{task}/children") as handle:
                kids = [int(x) for x in handle.read().split()]
        except OSError:
            continue
        for kid in kids:
            out.append(kid)
            out.extend(_children(kid))
    return out


class _PeakSampler(threading.Thread):
    """Peak RSS of this process and (summed) of its descendants, sampled every ``interval`` s."""

    def __init__(self, interval: float = 0.05):
        super().__init__(daemon=True)
        self.interval = interval
        self.stop = threading.Event()
        self.start_kib = _rss_kib(os.getpid())
        self.self_kib = self.start_kib
        self.child_kib = 0
        self.child_wall = 0.0   # seconds during which a tool child was running (to the sampling interval)

    def run(self) -> None:
        pid = os.getpid()
        seen = time.perf_counter()
        while not self.stop.is_set():
            self.self_kib = max(self.self_kib, _rss_kib(pid))
            # a forked Python child before its exec() is a copy of this process, not the tool
            tools = [c for c in _children(pid) if not _comm(c).startswith("python")]
            self.child_kib = max(self.child_kib, sum(_rss_kib(c) for c in tools))
            now = time.perf_counter()
            if tools:
                self.child_wall += now - seen
            seen = now
            self.stop.wait(self.interval)


@dataclass
class Timing:
    wall: float
    cpu: float
    start_mib: float
    peak_mib: float
    child_mib: float
    child_cpu: float = 0.0    # of ``cpu``: the waited child processes' own user + sys
    child_wall: float = 0.0   # of ``wall``: while a (non-Python) child process was running


def _cpu(who: int) -> float:
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


def measure(fn, *args, **kwargs):
    """``(fn(*args, **kwargs), Timing)``: wall, CPU (user + sys, waited children too, from
    ``getrusage``) and peak RSS."""
    sampler = _PeakSampler()
    sampler.start()
    self_before, children_before = _cpu(resource.RUSAGE_SELF), _cpu(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    try:
        result = fn(*args, **kwargs)
    finally:
        wall = time.perf_counter() - started
        child_cpu = _cpu(resource.RUSAGE_CHILDREN) - children_before
        cpu = _cpu(resource.RUSAGE_SELF) - self_before + child_cpu
        sampler.stop.set()
        sampler.join()
    return result, Timing(wall, cpu, sampler.start_kib / 1024, sampler.self_kib / 1024,
                          sampler.child_kib / 1024, child_cpu, min(sampler.child_wall, wall))


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


# --------------------------------------------------------------------------- the record (resuming)


@dataclass
class Measured:
    """One stage's measurement: Tempo's whole stage, its peer, and Tempo on the part the peer ran
    (``paired``, the ratio's numerator; the whole stage unless the peer ran on a sample, which
    ``sample`` then names)."""

    tempo: Timing
    peer: Timing | None
    note: str
    paired: Timing | None = None
    sample: str = ""


class Record:
    """The work folder's finished measurements, so a stopped run can continue.

    Each finished stage (and each KNN chunk) writes its measured row as ``rows/<name>.json``, and
    the data later stages read (the embedding matrix, the chunk's neighbours, the labelled
    candidates, the scores) beside it, each file atomically and the row last: a row on disk
    means its stage is finished and its outputs are whole."""

    def __init__(self, folder: Path):
        self.folder = folder
        (folder / "rows").mkdir(parents=True, exist_ok=True)

    def row(self, name: str) -> dict | None:
        path = self.folder / "rows" / f"{name}.json"
        return json.loads(path.read_text()) if path.exists() else None

    def done(self) -> list[str]:
        return sorted(p.stem for p in (self.folder / "rows").glob("*.json"))

    def put_row(self, name: str, payload: dict) -> None:
        with atomic_write(self.folder / "rows" / f"{name}.json") as handle:
            json.dump({**payload, "measured_at": time.strftime("%Y-%m-%d %H:%M:%S")}, handle, indent=1)

    def put_array(self, name: str, array: np.ndarray) -> None:
        with atomic_write(self.folder / f"{name}.npy", mode="wb", encoding=None) as handle:
            np.save(handle, array, allow_pickle=False)

    def array(self, name: str) -> np.ndarray:
        return np.load(self.folder / f"{name}.npy", allow_pickle=False)

    def put_frame(self, name: str, frame: pd.DataFrame) -> None:
        with atomic_write(self.folder / f"{name}.parquet", mode="wb", encoding=None) as handle:
            frame.to_parquet(handle, index=False)

    def frame(self, name: str) -> pd.DataFrame:
        return pd.read_parquet(self.folder / f"{name}.parquet")


def timing_of(payload: dict | None) -> Timing | None:
    return None if payload is None else Timing(**payload)


def measured_payload(measured: Measured) -> dict:
    as_dict = lambda t: None if t is None else asdict(t)  # noqa: E731
    return {"tempo": as_dict(measured.tempo), "peer": as_dict(measured.peer), "note": measured.note,
            "paired": as_dict(measured.paired), "sample": measured.sample}


def measured_of(payload: dict) -> Measured:
    return Measured(timing_of(payload["tempo"]), timing_of(payload["peer"]), payload["note"],
                    timing_of(payload["paired"]), payload["sample"])


def open_record(work: Path, arguments: dict, fresh: bool) -> Record:
    """The work folder's record: continued when it was made with the same ``arguments``, else
    (or with ``fresh``) emptied first; says which."""
    import shutil

    saved = work / "arguments.json"
    if work.exists() and not fresh and saved.exists() and json.loads(saved.read_text()) == arguments:
        record = Record(work)
        done = record.done()
        print(f"resuming {work}: {len(done)} row(s) already measured there "
              f"({', '.join(done) if done else 'none'}); those are read back, not measured again", flush=True)
        return record
    if work.exists():
        why = "--fresh" if fresh else "its arguments differ from this run's"
        print(f"starting afresh in {work} ({why}): the earlier measurements there are removed", flush=True)
        shutil.rmtree(work)
    work.mkdir(parents=True)
    with atomic_write(saved) as handle:
        json.dump(arguments, handle, indent=1, sort_keys=True)
    return Record(work)


# --------------------------------------------------------------------------- the window


@dataclass
class Window:
    sequences: dict[str, str]           # corpus: every sequence of the FASTA
    corpus_annotations: pd.DataFrame    # protein, term, aspect (propagated, t-1)
    queries: list[str]                  # the N targets, sorted
    targets: pd.DataFrame               # growth targets among the queries: protein, aspect, mode
    ground_truth: pd.DataFrame          # protein, term, aspect, mode
    known: pd.DataFrame                 # protein, term, aspect
    new_obo: Path


def _experimental(gafs: list[Path], obo: Path):
    from tempo_assets.core.labels.annotations import experimental_annotations
    from tempo_assets.core.inputs.gaf import read_gaf
    from tempo_assets.core.inputs.ontology import parse_obo

    ontology = parse_obo(obo)
    frame = pd.concat([read_gaf(p) for p in gafs], ignore_index=True)
    propagated, _ = experimental_annotations(frame, ontology)
    return propagated, ontology


def build_window(args) -> Window:
    from tempo_assets.core.inputs.fasta import read_fasta
    from tempo_assets.core.labels.growth import align_terms, annotation_growth

    sequences = read_fasta(args.fasta)
    old, _ = _experimental(args.old_gaf, args.old_obo)
    new, new_ontology = _experimental(args.new_gaf, args.new_obo)
    aligned, _ = align_terms(old, new_ontology)
    growth = annotation_growth(aligned, new, sequences=set(sequences))
    rng = np.random.default_rng(args.seed)
    with_truth = np.array(sorted(set(growth.targets["protein"]) & set(sequences)), dtype=object)
    others = np.array(sorted(set(sequences) - set(with_truth)), dtype=object)
    n = len(sequences) if args.proteins == "all" else min(int(args.proteins), len(sequences))
    if n <= len(with_truth):
        queries = rng.choice(with_truth, size=n, replace=False)
    else:
        queries = np.concatenate([with_truth, rng.choice(others, size=n - len(with_truth), replace=False)])
    queries = sorted(queries.tolist())
    chosen = set(queries)
    keep = lambda frame: frame[frame["protein"].isin(chosen)].reset_index(drop=True)  # noqa: E731
    corpus_annotations = old[old["protein"].isin(set(sequences))][["protein", "term", "aspect"]]
    return Window(sequences, corpus_annotations.reset_index(drop=True), queries, keep(growth.targets),
                  keep(growth.ground_truth), keep(growth.known), args.new_obo)


# --------------------------------------------------------------------------- the stages


def stage_embedding(window: Window, work: Path, state: dict) -> Measured:
    from tempo_assets.core.inputs.embeddings import EmbeddingCache, embed_proteins
    from tempo_assets.core.inputs.embedders import KmerEmbedder, sequence_digest

    embedder = KmerEmbedder(k=KMER_K, dim=KMER_DIM)
    unique = sorted({sequence_digest(s): s for s in window.sequences.values()}.items())
    raw, peer = measure(embedder.embed, [s for _, s in unique])
    cache = EmbeddingCache(work / "embedding_cache")
    result, tempo = measure(embed_proteins, embedder, window.sequences, cache=cache)
    by_digest = dict(zip((d for d, _ in unique), raw))
    same = all(np.array_equal(by_digest[sequence_digest(window.sequences[a])], row)
               for a, row in zip(result.ids[:1000], result.matrix[:1000]))
    state["record"].put_array("embedding_matrix", np.asarray(result.matrix))
    state["record"].put_array("embedding_ids", np.asarray(list(result.ids), dtype=str))
    state["ids"], state["matrix"] = list(result.ids), result.matrix
    return Measured(tempo, peer, f"{len(window.sequences):,} sequences, {len(unique):,} unique; rows equal: {same}")


def restore_embedding(record: Record, state: dict) -> None:
    state["ids"], state["matrix"] = record.array("embedding_ids").tolist(), record.array("embedding_matrix")


def combine(parts: list[Timing]) -> Timing:
    """One Timing for consecutive measured parts: times summed, peaks maxed."""
    return Timing(sum(p.wall for p in parts), sum(p.cpu for p in parts), parts[0].start_mib,
                  max(p.peak_mib for p in parts), max(p.child_mib for p in parts),
                  sum(p.child_cpu for p in parts), sum(p.child_wall for p in parts))


def knn_queries(window: Window, state: dict) -> tuple[list[str], np.ndarray]:
    """The queries in the order the KNN chunks take them, and their rows: the copies of one
    embedding row next to each other, so each chunk's ``search`` sees a group of identical
    queries whole, as one search over every query (the graph's call) does."""
    from tempo_assets.core.inputs.embedders import normalize_rows
    from tempo_assets.core.neighbours.knn import identical_rows

    if "knn_queries" not in state:
        row_of = {a: i for i, a in enumerate(state["ids"])}
        rows = np.array([row_of[q] for q in window.queries], dtype=np.int64)
        groups = identical_rows(normalize_rows(state["matrix"][rows]))
        state["knn_distinct"] = len(groups)
        order = np.concatenate(groups)
        state["knn_queries"] = ([window.queries[i] for i in order], np.ascontiguousarray(state["matrix"][rows[order]]))
    return state["knn_queries"]


def knn_chunks(window: Window, chunk: int, tag: str = "") -> list[tuple[str, slice]]:
    return [(f"knn{tag}_chunk_{i:04d}", slice(start, start + chunk))
            for i, start in enumerate(range(0, len(window.queries), chunk))]


def raw_index(matrix: np.ndarray, threads: int, inverted):
    """faiss alone: ``IndexFlatIP``, or ``IndexIVFFlat`` trained on the rows ``inverted`` names,
    with its k-means seed, then searched at its ``nprobe``."""
    import faiss

    from tempo_assets.core.inputs.embedders import normalize_rows

    faiss.omp_set_num_threads(threads)
    rows, dim = normalize_rows(matrix), matrix.shape[1]
    if inverted is None:
        index = faiss.IndexFlatIP(dim)
    else:
        index = faiss.IndexIVFFlat(faiss.IndexFlatIP(dim), dim, inverted.nlist, faiss.METRIC_INNER_PRODUCT)
        index.cp.seed = inverted.seed
        index.train(rows[inverted.training_rows(len(rows))])
        index.nprobe = inverted.nprobe
    index.add(rows)
    return index


def knn_indexes(ids: list[str], matrix: np.ndarray, threads: int, state: dict):
    """faiss's and Tempo's index of the corpus, their build measured (once: a resumed run rebuilds
    them unmeasured and keeps the first run's row)."""
    from tempo_assets.core.neighbours.knn import KnnIndex

    record, inverted = state["record"], state.get("knn_index")
    raw, peer_build = measure(raw_index, matrix, threads, inverted)
    index, tempo_build = measure(KnnIndex.build, ids, matrix, threads=threads, inverted=inverted)
    if record.row(f"knn{state.get('knn_tag', '')}_build") is None:
        record.put_row(f"knn{state.get('knn_tag', '')}_build", {"tempo": asdict(tempo_build), "peer": asdict(peer_build)})
    else:
        print("  knn: indexes rebuilt to continue (this build is not counted; the first run's is)", flush=True)
    return raw, index


def stage_knn(window: Window, work: Path, state: dict, threads: int, chunk: int, peer_every: int) -> Measured:
    """Both indexes built once, then the queries in chunks; on the chunks the peer runs on (every
    ``peer_every``-th, from the first; none when 0) faiss first, then Tempo.

    Interleaving keeps the two sides under the same load; each chunk's row (and neighbours) is
    written as it finishes, so a stopped run continues at the first chunk without a row."""
    from tempo_assets.core.inputs.embedders import normalize_rows

    record, ids, matrix = state["record"], state["ids"], state["matrix"]
    names, queries = knn_queries(window, state)
    chunks = knn_chunks(window, chunk, state.get("knn_tag", ""))
    left = [(i, name, block) for i, (name, block) in enumerate(chunks) if record.row(name) is None]
    if len(left) < len(chunks):
        print(f"  knn: {len(chunks) - len(left)} of {len(chunks)} chunks already measured, continuing", flush=True)
    raw, index = knn_indexes(ids, matrix, threads, state) if left else (None, None)
    for i, name, block in left:
        peer = None
        if peer_every > 0 and i % peer_every == 0:
            (_, lab), peer = measure(lambda: raw.search(normalize_rows(queries[block]), K_MAX + 1))
            record.put_array(f"{name}_faiss", lab)
        frame, tempo = measure(index.search, names[block], queries[block], K_MAX, exclude_self=True)
        record.put_frame(name, frame)
        record.put_row(name, {"tempo": asdict(tempo), "peer": None if peer is None else asdict(peer)})
        print(f"  knn{state.get('knn_tag', '')} chunk {i + 1}/{len(chunks)} ({min(block.stop, len(window.queries)):,}"
              f"/{len(window.queries):,} queries): Tempo {tempo.wall:.1f} s (CPU {tempo.cpu:.1f})"
              + ("" if peer is None else f", faiss {peer.wall:.1f} s (CPU {peer.cpu:.1f})")
              + f"; load {_load()}", flush=True)
    return knn_measured(window, state, chunk, threads)


def knn_measured(window: Window, state: dict, chunk: int, threads: int) -> Measured:
    """The KNN row from the chunks' rows: Tempo over every chunk, the peer and the ratio over the
    chunks the peer ran on (named as a sample when that is not all of them)."""
    record = state["record"]
    chunks = knn_chunks(window, chunk, state.get("knn_tag", ""))
    build = record.row(f"knn{state.get('knn_tag', '')}_build")
    rows = [record.row(name) for name, _ in chunks]
    sampled = [i for i, r in enumerate(rows) if r["peer"] is not None]
    tempo = combine([Timing(**build["tempo"])] + [Timing(**r["tempo"]) for r in rows])
    paired = combine([Timing(**build["tempo"])] + [Timing(**rows[i]["tempo"]) for i in sampled])
    peer = combine([Timing(**build["peer"])] + [Timing(**rows[i]["peer"]) for i in sampled]) if sampled else None
    neighbours = pd.concat([record.frame(name) for name, _ in chunks], ignore_index=True)
    position = {q: i for i, q in enumerate(window.queries)}
    order = np.argsort(neighbours["query"].map(position).to_numpy(), kind="stable")
    state["neighbours"] = neighbours.iloc[order].reset_index(drop=True)
    agree = knn_agreement(window, state, [chunks[i] for i in sampled])
    sample = "" if len(sampled) == len(chunks) else f"{len(sampled)} of {len(chunks)} chunks"
    note = (knn_index_note(window, state, chunk)
            + f"{len(window.queries):,} queries ({state['knn_distinct']:,} distinct rows, copies in one chunk) x "
            f"{len(state['ids']):,} corpus, k={K_MAX}, {threads} threads, "
            f"chunks of {chunk:,}; index build Tempo {build['tempo']['wall']:.1f} s, faiss "
            f"{build['peer']['wall']:.1f} s; peer on {len(sampled)} of {len(chunks)} chunks"
            + ("" if peer is None else f" (the ratio is over those chunks and the builds); neighbour overlap "
               f"with faiss {agree:.4f}"))
    return Measured(tempo, peer, note, paired if peer is not None else None, sample)


def knn_index_note(window: Window, state: dict, chunk: int) -> str:
    """For an inverted file: its settings, and Tempo's recall@k against exact flat search on the
    queries of the chunks this folder also holds Tempo's flat answer for (the declared sample)."""
    inverted = state.get("knn_index")
    if inverted is None:
        return ""
    record, found, exact, queries = state["record"], 0, 0, 0
    for (flat, _), (name, _) in zip(knn_chunks(window, chunk), knn_chunks(window, chunk, state["knn_tag"])):
        if record.row(flat) is None:
            continue
        truth = record.frame(flat)[["query", "neighbour"]]
        found += len(truth.merge(record.frame(name)[["query", "neighbour"]], on=["query", "neighbour"]))
        exact, queries = exact + len(truth), queries + truth["query"].nunique()
    recall = (f"recall@{K_MAX} against exact flat search {found / exact:.4f} over {queries:,} queries "
              "(the chunks with Tempo's flat answer in this folder)" if exact else
              "recall not measured (no flat chunk in this folder)")
    rows = len(inverted.training_rows(len(state["ids"])))
    return (f"inverted file {inverted.name} (nlist {inverted.nlist}, nprobe {inverted.nprobe}, k-means on "
            f"{rows:,} rows drawn with seed {inverted.seed}); {recall}; ")


def knn_agreement(window: Window, state: dict, chunks: list[tuple[str, slice]]) -> float:
    """Share of Tempo's neighbours that are in faiss's top k (self row dropped), on a sample of the
    queries of ``chunks``."""
    if not chunks:
        return float("nan")
    id_arr = np.asarray(state["ids"], dtype=object)
    grouped = state["neighbours"].groupby("query", sort=False)["neighbour"].apply(set)
    shares = []
    for name, block in chunks:
        labels = state["record"].array(f"{name}_faiss")
        queries = knn_queries(window, state)[0][block]
        for j in range(0, len(queries), max(1, len(queries) // 2000)):
            found = set(id_arr[labels[j]]) - {queries[j]}
            shares.append(len(grouped.get(queries[j], set()) & found) / K_MAX)
    return float(np.mean(shares))


def stage_features(window: Window, work: Path, state: dict) -> Measured:
    from tempo_assets.core.recipe.features import candidate_features
    from tempo_assets.core.recipe.reranker import label_candidates

    features, tempo = measure(candidate_features, state["neighbours"], window.corpus_annotations, k=K_MAX)
    labelled = label_candidates(features, window.ground_truth, window.known)
    state["labelled"] = labelled
    state["record"].put_frame(tagged(state, "labelled"), labelled)
    return Measured(tempo, None, (f"{len(features):,} candidates; {len(labelled):,} of growth targets, "
                                  f"{int(labelled['label'].sum()):,} positive"))


def stage_lightgbm(window: Window, work: Path, state: dict) -> Measured:
    import lightgbm as lgb

    from tempo_assets.core.recipe.features import FEATURE_COLUMNS
    from tempo_assets.core.recipe.reranker import _split_params, train_reranker

    labelled = state["labelled"]
    x = labelled[list(FEATURE_COLUMNS)].to_numpy(dtype=np.float64)
    y = labelled["label"].to_numpy(dtype=np.float64)
    params, rounds = _split_params(LGBM_PARAMS, 0)

    def raw_train():
        data = lgb.Dataset(x, label=y, feature_name=list(FEATURE_COLUMNS), free_raw_data=True)
        return lgb.train(params, data, num_boost_round=rounds)

    booster, peer = measure(raw_train)
    model, tempo = measure(train_reranker, labelled, LGBM_PARAMS)
    same = booster.model_to_string() == model.booster.model_to_string()
    return Measured(tempo, peer, f"{len(labelled):,} rows x {len(FEATURE_COLUMNS)} features, {rounds} rounds; "
                    f"same model: {same}")


def stage_scores(window: Window, work: Path, state: dict) -> Measured:
    from tempo_assets.core.neighbours.knn import knn_term_scores

    scores, tempo = measure(knn_term_scores, state["neighbours"], window.corpus_annotations, k=K_MAX)
    state["scores"] = scores
    state["record"].put_frame(tagged(state, "scores"), scores)
    return Measured(tempo, None, f"{len(scores):,} (protein, term) scores")


def stage_evaluation(window: Window, work: Path, state: dict) -> Measured:
    from tempo_assets.core.evaluation import EvalOntology, evaluate_frames
    from tempo_assets.core.evaluation.cells import CellFrames
    from tempo_assets.core.evaluation.scoring import cell_curve

    ontology = EvalOntology.from_obo(window.new_obo)
    scores = state["scores"]
    growth = (window.targets, window.ground_truth, window.known)
    cut = CellFrames(growth, {"knn": scores})
    cells = cut.cells
    frames = {key: (cell.truth, cut.of("knn", key), cell.known) for key, cell in cells.items()}

    def raw_eval():
        return {key: evaluate_frames(ontology, truth, preds, known=known)
                for key, (truth, preds, known) in frames.items()}

    def tempo_eval():
        fresh = CellFrames(growth, {"knn": scores}, keep_frames=False)
        return {key: cell_curve(ontology, cell.aspect, cell.truth, fresh.of("knn", key), known=cell.known)
                for key, cell in fresh.cells.items()}

    # each side sets up its ground truths itself: a setup cached by the first would be read by the second
    ontology.caches.clear()
    raw, peer = measure(raw_eval)
    ontology.caches.clear()
    curves, tempo = measure(tempo_eval)
    fmax = {f"{m}/{a}": round(float(c["f"].max()), 3) for (m, a), c in curves.items() if len(c)}
    return Measured(tempo, peer, f"{len(cells)} cells, {window.targets['protein'].nunique():,} targets; "
                    f"KNN Fmax (not a result) {fmax}")


def stage_diamond(window: Window, work: Path, state: dict, threads: int, peer: str) -> Measured:
    """Tempo's ``diamond_hits`` against ``peer``: ``run``, DIAMOND alone on FASTA files already
    written, same flags, run first; ``children``, the DIAMOND child processes of Tempo's own stage
    (their rusage: the same binary, command lines and files, at the same moment), not run twice."""
    from tempo_assets.core.neighbours.blast import diamond_hits

    raw_lines, raw = diamond_alone(window, work, threads) if peer == "run" else (None, None)
    hits, tempo = measure(diamond_hits, {q: window.sequences[q] for q in window.queries}, window.sequences,
                          work / "diamond_tempo", threads=threads, **BLAST)
    if peer == "children":
        raw = Timing(tempo.child_wall, tempo.child_cpu, 0.0, tempo.child_mib, tempo.child_mib,
                     tempo.child_cpu, tempo.child_wall)
    lines = f"raw {raw_lines:,} lines, " if raw_lines is not None else ""
    lines += f"DIAMOND's child processes in Tempo's stage {tempo.child_cpu:.1f} CPU s, {tempo.child_wall:.1f} s; "
    return Measured(tempo, raw, (f"{len(window.queries):,} queries x {len(window.sequences):,}, default mode, "
                                 f"{threads} threads; {lines}Tempo {len(hits):,} hits (self dropped); peer: "
                                 + PEERS["diamond" if peer == "run" else "diamond:children"]))


def diamond_alone(window: Window, work: Path, threads: int) -> tuple[int, Timing]:
    """``diamond makedb`` + ``blastp`` alone, measured, on FASTA files written beforehand; the
    number of lines it wrote."""
    from tempo_assets.core.neighbours.blast import find_diamond
    from tempo_assets.core.inputs.fasta import write_fasta

    diamond = str(find_diamond())
    raw_dir = work / "diamond_raw"
    (raw_dir / "tmp").mkdir(parents=True, exist_ok=True)
    # sorted by accession, as run_blastp writes them
    write_fasta(raw_dir / "query.fasta", {q: window.sequences[q] for q in window.queries})
    write_fasta(raw_dir / "corpus.fasta", {a: window.sequences[a] for a in sorted(window.sequences)})
    flags = ["--evalue", repr(BLAST["evalue"]), "--max-target-seqs", str(BLAST["max_target_seqs"]),
             "--threads", str(threads)]

    def raw_diamond():
        for command in ([diamond, "makedb", "--in", "corpus.fasta", "--db", "corpus.dmnd", "--threads", str(threads)],
                        [diamond, "blastp", "--query", "query.fasta", "--db", "corpus.dmnd", "--out", "hits.tsv",
                         "--outfmt", "6", "qseqid", "sseqid", "pident", "bitscore", "evalue", *flags,
                         "--tmpdir", "tmp"]):
            subprocess.run(command, cwd=raw_dir, check=True, capture_output=True)
        return sum(1 for _ in open(raw_dir / "hits.tsv"))

    return measure(raw_diamond)


# --------------------------------------------------------------------------- output


HEADER = ("| stage | Tempo wall s | Tempo CPU s | peer | peer wall s | peer CPU s | ratio (wall) | "
          "ratio (CPU) | Tempo peak RSS MiB (start) | peer peak RSS MiB | child peak RSS MiB Tempo / peer |")


def peer_name(stage: str, measured: Measured) -> str:
    if stage == "knn" and measured.note.startswith("inverted file"):
        stage = "knn:ivf"
    if stage.startswith("knn") and measured.peer is None:
        return f"{PEERS[stage]}: not run (--peer-every 0)"
    if stage == "diamond":
        return PEERS["diamond:children"] if PEERS["diamond:children"] in measured.note else PEERS["diamond"]
    return PEERS[stage] + (f" — on a sample: {measured.sample}" if measured.sample else "")


def row(stage: str, measured: Measured) -> str:
    """The stage's table row; the ratio is Tempo on what the peer ran (``paired``) over the peer."""
    tempo, peer = measured.tempo, measured.peer
    paired = measured.paired or tempo
    cells = [stage, f"{tempo.wall:.1f}", f"{tempo.cpu:.1f}", peer_name(stage, measured)]
    if peer is None:
        cells += ["—", "—", "—", "—"]
    else:
        sampled = " (sample)" if measured.sample else ""
        cells += [f"{peer.wall:.1f}", f"{peer.cpu:.1f}", f"{paired.wall / max(peer.wall, 1e-9):.2f}x{sampled}",
                  f"{paired.cpu / max(peer.cpu, 1e-9):.2f}x{sampled}"]
    cells += [f"{tempo.peak_mib:,.0f} ({tempo.start_mib:,.0f})", "—" if peer is None else f"{peer.peak_mib:,.0f}"]
    cells.append("—" if stage != "diamond" else f"{tempo.child_mib:,.0f} / {peer.child_mib:,.0f}")
    return "| " + " | ".join(cells) + " |"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--proteins", default="50000", help="query proteins (targets): a number or 'all'")
    parser.add_argument("--fasta", type=Path, default=DEFAULT_FASTA)
    goa = ARCHIVE / "goa"
    parser.add_argument("--old-gaf", type=Path, nargs="+",
                        default=[goa / "goa_human_2014-09-29.gaf.gz", goa / "goa_mouse_2014-09-29.gaf.gz"])
    parser.add_argument("--new-gaf", type=Path, nargs="+",
                        default=[goa / "goa_human_2019-01-14.gaf.gz", goa / "goa_mouse_2019-01-14.gaf.gz"])
    parser.add_argument("--old-obo", type=Path, default=ARCHIVE / "go" / "go_2014-10-27.obo.gz")
    parser.add_argument("--new-obo", type=Path, default=ARCHIVE / "go" / "go_2019-01-27.obo.gz")
    parser.add_argument("--threads", type=int, default=2, help="faiss and DIAMOND threads (both sides)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--knn-chunk", type=int, default=50_000,
                        help="queries per KNN chunk (faiss and Tempo alternate chunk by chunk)")
    parser.add_argument("--peer-every", type=int, default=1,
                        help="run faiss on every N-th KNN chunk, from the first (0: never); the KNN ratio is "
                             "then over those chunks only, and says so")
    parser.add_argument("--diamond-peer", choices=("run", "children"), default="run",
                        help="DIAMOND's peer: 'run' DIAMOND alone first (as long again as Tempo's stage), "
                             "'children' the DIAMOND processes of Tempo's own stage (their rusage)")
    parser.add_argument("--stages", default=",".join(STAGES),
                        help=f"comma-separated subset of {','.join(STAGES)} (later stages need earlier ones)")
    parser.add_argument("--work", type=Path, default=REPO / "bench_out" / "scale",
                        help="measured rows are kept under it; a rerun with the same window arguments "
                             "continues from them")
    parser.add_argument("--knn-index", default="flat",
                        help="'flat' (exact, the default) or 'ivf:NLIST:NPROBE' (an inverted file trained on "
                             "50 x NLIST corpus rows drawn with --seed); its rows and those of the later "
                             "stages are kept apart by its name, and its recall against the flat chunks "
                             "measured in the same folder is printed")
    parser.add_argument("--fresh", action="store_true", help="forget earlier measurements in --work")
    args = parser.parse_args(argv)
    args.knn_index = knn_index_of(parser, args.knn_index, args.seed)
    if args.proteins != "all" and not (args.proteins.isdigit() and int(args.proteins) > 0):
        parser.error(f"--proteins must be a positive number or 'all', got {args.proteins!r}")
    args.stages = [s.strip() for s in args.stages.split(",") if s.strip()]
    unknown = [s for s in args.stages if s not in STAGES]
    if unknown:
        parser.error(f"unknown stage(s) {unknown}; choose from {', '.join(STAGES)}")
    if not args.fasta.exists():
        parser.error(f"{args.fasta} does not exist: run `bash ../shared/tools/swissprot_2014_fasta.sh {args.fasta}`")
    needs = {"knn": "embedding", "features": "knn", "lightgbm": "features", "scores": "knn", "evaluation": "scores"}
    for stage in args.stages:
        if stage in needs and needs[stage] not in args.stages:
            parser.error(f"stage {stage} needs stage {needs[stage]}")
    if args.peer_every < 0:
        parser.error("--peer-every must be >= 0")
    return args


def knn_index_of(parser: argparse.ArgumentParser, text: str, seed: int):
    """None for ``flat``; an ``InvertedFileSearch`` for ``ivf:NLIST:NPROBE``."""
    from tempo_assets.core.neighbours.knn import InvertedFileSearch

    if text == "flat":
        return None
    parts = text.split(":")
    if len(parts) != 3 or parts[0] != "ivf" or not all(p.isdigit() for p in parts[1:]):
        parser.error(f"--knn-index must be 'flat' or 'ivf:NLIST:NPROBE', got {text!r}")
    return InvertedFileSearch(int(parts[1]), int(parts[2]), seed=seed)


def window_arguments(args: argparse.Namespace) -> dict:
    """What the measurements in the work folder depend on (not the stages, peers or folder)."""
    keys = ("proteins", "fasta", "old_gaf", "new_gaf", "old_obo", "new_obo", "threads", "seed", "knn_chunk")
    return {key: [str(v) for v in value] if isinstance(value, list) else str(value)
            for key, value in vars(args).items() if key in keys}


def check_queries(record: Record, window: Window) -> None:
    """The window's queries kept beside the rows; a resumed run must have drawn the same ones."""
    if (record.folder / "queries.npy").exists():
        if record.array("queries").tolist() != window.queries:
            raise SystemExit(f"the queries drawn differ from those in {record.folder}: rerun with --fresh")
    else:
        record.put_array("queries", np.asarray(window.queries, dtype=str))


RESTORE = {
    "embedding": restore_embedding,
    "features": lambda record, state: state.update(labelled=record.frame(tagged(state, "labelled"))),
    "scores": lambda record, state: state.update(scores=record.frame(tagged(state, "scores"))),
}


def run_stage(stage: str, window: Window, work: Path, state: dict, args: argparse.Namespace) -> Measured:
    """The stage measured now, or its row read back from an earlier run in the same folder."""
    record = state["record"]
    name = tagged(state, stage) if stage in AFTER_KNN else stage
    saved = record.row(name)
    if saved is not None and stage != "knn":
        RESTORE.get(stage, lambda record, state: None)(record, state)
        print(f"{stage}: measured at {saved['measured_at']} by an earlier run, read back", flush=True)
        return measured_of(saved)
    extra = {}
    if stage == "knn":
        extra = {"threads": args.threads, "chunk": args.knn_chunk, "peer_every": args.peer_every}
    elif stage == "diamond":
        extra = {"threads": args.threads, "peer": args.diamond_peer}
    measured = globals()[f"stage_{stage}"](window, work, state, **extra)
    record.put_row(name, measured_payload(measured))
    return measured


def describe(stage: str, measured: Measured) -> str:
    tempo, peer, paired = measured.tempo, measured.peer, measured.paired or measured.tempo
    return (f"{stage}: Tempo {tempo.wall:.1f} s (CPU {tempo.cpu:.1f}, peak RSS {tempo.peak_mib:,.0f} MiB)"
            + ("" if peer is None else f", peer {peer.wall:.1f} s (CPU {peer.cpu:.1f}, peak RSS "
               f"{peer.peak_mib:,.0f} MiB), ratio {paired.wall / max(peer.wall, 1e-9):.2f}x wall, "
               f"{paired.cpu / max(peer.cpu, 1e-9):.2f}x CPU"
               + (f" (over a sample: {measured.sample})" if measured.sample else ""))
            + f"; {measured.note}; load {_load()}")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    # absolute: DIAMOND runs in its work folder, so a relative path would not resolve there
    work = args.work.absolute() / f"proteins_{args.proteins}"
    print(f"load average before: {_load()} ({os.cpu_count()} CPUs); --proteins {args.proteins} "
          f"--threads {args.threads}; {time.strftime('%Y-%m-%d %H:%M:%S')}", flush=True)
    record = open_record(work, window_arguments(args), args.fresh)
    window, setup = measure(build_window, args)
    print(f"window built in {setup.wall:.1f} s (peak RSS {setup.peak_mib:,.0f} MiB): corpus "
          f"{len(window.sequences):,} sequences, {window.corpus_annotations['protein'].nunique():,} annotated "
          f"({len(window.corpus_annotations):,} propagated rows); {len(window.queries):,} queries, of which "
          f"{window.targets['protein'].nunique():,} growth targets ({len(window.targets):,} protein-aspects)",
          flush=True)
    check_queries(record, window)
    state: dict = {"record": record, "knn_index": args.knn_index,
                   "knn_tag": "" if args.knn_index is None else f"_{args.knn_index.name}"}
    rows, notes, total = [], [], setup.wall
    for stage in args.stages:
        measured = run_stage(stage, window, work, state, args)
        rows.append(row(stage, measured))
        notes.append(f"- {stage}: {measured.note}")
        total += measured.tempo.wall
        print(describe(stage, measured), flush=True)
    print(f"\nload average after: {_load()}; Tempo's stages + window setup: {total:.1f} s "
          f"({total / 60:.1f} min, rows read back from an earlier run included); "
          f"{time.strftime('%Y-%m-%d %H:%M:%S')}\n")
    print(HEADER)
    print("|" + "---|" * (HEADER.count("|") - 1))
    for line in rows:
        print(line)
    print()
    for line in notes:
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
