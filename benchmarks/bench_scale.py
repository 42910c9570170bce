"""Swiss-Prot-scale window: every stage of Tempo timed beside its raw tool on the same data.

The window: KNN corpus and DIAMOND database = every sequence of ``--fasta`` (by default the
GO-annotated Swiss-Prot 2014-01, 516,371 sequences, from ``../shared/tools/swissprot_2014_fasta.sh``);
corpus labels = propagated experimental annotations of the human and mouse GOA 2014-09-29 files
(GO 2014-10-27); ground truth = their NK/LK/PK growth to the 2019-01-14 files (GO 2019-01-27).
``--proteins N`` query proteins (targets): the growth targets with a sequence first (a seeded
sample of them when N is smaller), then a seeded sample of the other sequences; ``all`` queries
every sequence.

Stages, each run once as Tempo's core call and once as its peer, in this process, on the same
inputs (the peer runs first); per row: wall and CPU seconds (user + sys, children included),
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
  evaluator's core call ``evaluate_frames`` on the same per-cell frames (cafaeval itself is far
  slower: ``bench_eval.py`` compares them);
- DIAMOND: ``diamond_hits`` (``run_blastp``: FASTA writing, makedb, blastp; then parsing) vs
  ``diamond makedb`` + ``diamond blastp`` alone on FASTA files already written, same flags.

This is a timing benchmark: the reranker is trained on the targets' own growth labels, so no
score it prints is a result.

    nice -n 10 .venv/bin/python benchmarks/bench_scale.py --proteins 50000 [--threads 2]
        [--fasta .cache/swissprot_2014-01.fasta.gz] [--stages embedding,knn,...]
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))
ARCHIVE = REPO / ".." / "shared" / "data" / "goa_archive"
DEFAULT_FASTA = REPO / ".cache" / "swissprot_2014-01.fasta.gz"
STAGES = ("embedding", "knn", "features", "lightgbm", "scores", "evaluation", "diamond")
PEERS = {
    "embedding": "KmerEmbedder.embed (numpy) on unique sequences",
    "knn": "faiss IndexFlatIP add + search",
    "features": "none",
    "lightgbm": "lightgbm.train on the same matrix",
    "scores": "none",
    "evaluation": "evaluate_frames per cell (core call)",
    "diamond": "diamond makedb + blastp, same flags",
}
# the graph's defaults (resources.EmbedderResource, SelectionResource's first LightGBM set, K_max)
KMER_K, KMER_DIM, K_MAX = 3, 256, 10
LGBM_PARAMS = {"num_leaves": 7, "learning_rate": 0.1, "min_data_in_leaf": 20, "n_estimators": 100}
BLAST = {"evalue": 1e-3, "max_target_seqs": 250, "sensitivity": None}


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

    def run(self) -> None:
        pid = os.getpid()
        while not self.stop.is_set():
            self.self_kib = max(self.self_kib, _rss_kib(pid))
            # a forked Python child before its exec() is a copy of this process, not the tool
            tools = [c for c in _children(pid) if not _comm(c).startswith("python")]
            self.child_kib = max(self.child_kib, sum(_rss_kib(c) for c in tools))
            self.stop.wait(self.interval)


@dataclass
class Timing:
    wall: float
    cpu: float
    start_mib: float
    peak_mib: float
    child_mib: float


def measure(fn, *args, **kwargs):
    """``(fn(*args, **kwargs), Timing)``: wall, CPU (user + sys, children too) and peak RSS."""
    sampler = _PeakSampler()
    sampler.start()
    before, started = os.times(), time.perf_counter()
    try:
        result = fn(*args, **kwargs)
    finally:
        wall = time.perf_counter() - started
        after = os.times()
        sampler.stop.set()
        sampler.join()
    cpu = sum(after[i] - before[i] for i in range(4))
    return result, Timing(wall, cpu, sampler.start_kib / 1024, sampler.self_kib / 1024,
                          sampler.child_kib / 1024)


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


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


def stage_embedding(window: Window, work: Path, state: dict):
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
    state["ids"], state["matrix"] = list(result.ids), result.matrix
    return tempo, peer, f"{len(window.sequences):,} sequences, {len(unique):,} unique; rows equal: {same}"


def combine(parts: list[Timing]) -> Timing:
    """One Timing for consecutive measured parts: times summed, peaks maxed."""
    return Timing(sum(p.wall for p in parts), sum(p.cpu for p in parts), parts[0].start_mib,
                  max(p.peak_mib for p in parts), max(p.child_mib for p in parts))


def stage_knn(window: Window, work: Path, state: dict, threads: int, chunk: int):
    """Both indexes built once, then the queries in chunks, faiss then Tempo on each chunk.

    Interleaving keeps the two sides under the same load, and a run stopped early has measured
    ratios and rates for the chunks done (printed as it goes)."""
    import faiss

    from tempo_assets.core.inputs.embedders import normalize_rows
    from tempo_assets.core.neighbours.knn import KnnIndex

    ids, matrix = state["ids"], state["matrix"]
    row_of = {a: i for i, a in enumerate(ids)}
    qrows = np.array([row_of[q] for q in window.queries], dtype=np.int64)
    queries = np.ascontiguousarray(matrix[qrows])

    def raw_build():
        faiss.omp_set_num_threads(threads)
        index = faiss.IndexFlatIP(matrix.shape[1])
        index.add(normalize_rows(matrix))
        return index

    raw_index, peer_build = measure(raw_build)
    index, tempo_build = measure(KnnIndex.build, ids, matrix, threads=threads)
    peers, tempos, labels, frames = [peer_build], [tempo_build], [], []
    for start in range(0, len(window.queries), chunk):
        block = slice(start, start + chunk)
        (_, lab), peer = measure(lambda: raw_index.search(normalize_rows(queries[block]), K_MAX + 1))
        frame, tempo = measure(index.search, window.queries[block], queries[block], K_MAX, exclude_self=True)
        peers.append(peer)
        tempos.append(tempo)
        labels.append(lab)
        frames.append(frame)
        done = min(start + chunk, len(window.queries))
        print(f"  knn {done:,}/{len(window.queries):,} queries: this chunk Tempo {tempo.wall:.1f} s "
              f"(CPU {tempo.cpu:.1f}), faiss {peer.wall:.1f} s (CPU {peer.cpu:.1f}); so far Tempo "
              f"{combine(tempos).wall:.1f} s, faiss {combine(peers).wall:.1f} s "
              f"(builds {tempo_build.wall:.1f} / {peer_build.wall:.1f} s); load {_load()}", flush=True)
    neighbours = pd.concat(frames, ignore_index=True)
    labels = np.concatenate(labels)
    state["neighbours"] = neighbours
    # agreement: the faiss top-k without the self row, as neighbour sets
    id_arr = np.asarray(ids, dtype=object)
    sample = range(0, len(window.queries), max(1, len(window.queries) // 2000))
    grouped = neighbours.groupby("query", sort=False)["neighbour"].apply(set)
    agree = np.mean([len(grouped.get(window.queries[i], set())
                         & (set(id_arr[labels[i]]) - {window.queries[i]})) / K_MAX for i in sample])
    return combine(tempos), combine(peers), (
        f"{len(window.queries):,} queries x {len(ids):,} corpus, k={K_MAX}, {threads} threads, "
        f"chunks of {chunk:,}; index build Tempo {tempo_build.wall:.1f} s, faiss {peer_build.wall:.1f} s; "
        f"neighbour overlap with faiss {agree:.4f}")


def stage_features(window: Window, work: Path, state: dict):
    from tempo_assets.core.recipe.features import candidate_features
    from tempo_assets.core.recipe.reranker import label_candidates

    features, tempo = measure(candidate_features, state["neighbours"], window.corpus_annotations, k=K_MAX)
    labelled = label_candidates(features, window.ground_truth, window.known)
    state["labelled"] = labelled
    return tempo, None, (f"{len(features):,} candidates; {len(labelled):,} of growth targets, "
                         f"{int(labelled['label'].sum()):,} positive")


def stage_lightgbm(window: Window, work: Path, state: dict):
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
    return tempo, peer, f"{len(labelled):,} rows x {len(FEATURE_COLUMNS)} features, {rounds} rounds; same model: {same}"


def stage_scores(window: Window, work: Path, state: dict):
    from tempo_assets.core.neighbours.knn import knn_term_scores

    scores, tempo = measure(knn_term_scores, state["neighbours"], window.corpus_annotations, k=K_MAX)
    state["scores"] = scores
    return tempo, None, f"{len(scores):,} (protein, term) scores"


def stage_evaluation(window: Window, work: Path, state: dict):
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

    raw, peer = measure(raw_eval)
    curves, tempo = measure(tempo_eval)
    fmax = {f"{m}/{a}": round(float(c["f"].max()), 3) for (m, a), c in curves.items() if len(c)}
    return tempo, peer, f"{len(cells)} cells, {window.targets['protein'].nunique():,} targets; KNN Fmax (not a result) {fmax}"


def stage_diamond(window: Window, work: Path, state: dict, threads: int):
    from tempo_assets.core.neighbours.blast import diamond_hits, find_diamond
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

    raw_lines, peer = measure(raw_diamond)
    hits, tempo = measure(diamond_hits, {q: window.sequences[q] for q in window.queries}, window.sequences,
                          work / "diamond_tempo", threads=threads, **BLAST)
    return tempo, peer, (f"{len(window.queries):,} queries x {len(window.sequences):,}, default mode, "
                         f"{threads} threads; raw {raw_lines:,} lines, Tempo {len(hits):,} hits (self dropped)")


# --------------------------------------------------------------------------- output


HEADER = ("| stage | Tempo wall s | Tempo CPU s | peer | peer wall s | peer CPU s | ratio (wall) | "
          "ratio (CPU) | Tempo peak RSS MiB (start) | peer peak RSS MiB | child peak RSS MiB Tempo / peer |")


def row(stage: str, tempo: Timing, peer: Timing | None) -> str:
    def mib(t: Timing | None) -> str:
        return "—" if t is None else f"{t.peak_mib:,.0f}"

    cells = [stage, f"{tempo.wall:.1f}", f"{tempo.cpu:.1f}", PEERS[stage]]
    if peer is None:
        cells += ["—", "—", "—", "—"]
    else:
        cells += [f"{peer.wall:.1f}", f"{peer.cpu:.1f}", f"{tempo.wall / peer.wall:.2f}x",
                  f"{tempo.cpu / max(peer.cpu, 1e-9):.2f}x"]
    cells += [f"{tempo.peak_mib:,.0f} ({tempo.start_mib:,.0f})", mib(peer)]
    cells.append("—" if stage != "diamond" else f"{tempo.child_mib:,.0f} / {peer.child_mib:,.0f}")
    return "| " + " | ".join(cells) + " |"


def main(argv: list[str] | None = None) -> int:
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
    parser.add_argument("--stages", default=",".join(STAGES),
                        help=f"comma-separated subset of {','.join(STAGES)} (later stages need earlier ones)")
    parser.add_argument("--work", type=Path, default=REPO / "bench_out" / "scale")
    args = parser.parse_args(argv)
    if args.proteins != "all" and not (args.proteins.isdigit() and int(args.proteins) > 0):
        parser.error(f"--proteins must be a positive number or 'all', got {args.proteins!r}")
    stages = [s.strip() for s in args.stages.split(",") if s.strip()]
    unknown = [s for s in stages if s not in STAGES]
    if unknown:
        parser.error(f"unknown stage(s) {unknown}; choose from {', '.join(STAGES)}")
    if not args.fasta.exists():
        parser.error(f"{args.fasta} does not exist: run `bash ../shared/tools/swissprot_2014_fasta.sh {args.fasta}`")
    needs = {"knn": "embedding", "features": "knn", "lightgbm": "features", "scores": "knn", "evaluation": "scores"}
    for stage in stages:
        if stage in needs and needs[stage] not in stages:
            parser.error(f"stage {stage} needs stage {needs[stage]}")
    work = args.work / f"proteins_{args.proteins}"
    if work.exists():
        import shutil

        shutil.rmtree(work)
    work.mkdir(parents=True)

    print(f"load average before: {_load()} ({os.cpu_count()} CPUs); --proteins {args.proteins} "
          f"--threads {args.threads}; {time.strftime('%Y-%m-%d %H:%M:%S')}", flush=True)
    window, setup = measure(build_window, args)
    print(f"window built in {setup.wall:.1f} s (peak RSS {setup.peak_mib:,.0f} MiB): corpus "
          f"{len(window.sequences):,} sequences, {window.corpus_annotations['protein'].nunique():,} annotated "
          f"({len(window.corpus_annotations):,} propagated rows); {len(window.queries):,} queries, of which "
          f"{window.targets['protein'].nunique():,} growth targets ({len(window.targets):,} protein-aspects)",
          flush=True)
    state: dict = {}
    rows, notes, total = [], [], setup.wall
    for stage in stages:
        fn = globals()[f"stage_{stage}"]
        extra = {"threads": args.threads} if stage in ("knn", "diamond") else {}
        if stage == "knn":
            extra["chunk"] = args.knn_chunk
        tempo, peer, note = fn(window, work, state, **extra)
        rows.append(row(stage, tempo, peer))
        notes.append(f"- {stage}: {note}")
        total += tempo.wall
        print(f"{stage}: Tempo {tempo.wall:.1f} s (CPU {tempo.cpu:.1f}, peak RSS {tempo.peak_mib:,.0f} MiB)"
              + ("" if peer is None else f", peer {peer.wall:.1f} s (CPU {peer.cpu:.1f}, peak RSS "
                 f"{peer.peak_mib:,.0f} MiB), ratio {tempo.wall / peer.wall:.2f}x wall, "
                 f"{tempo.cpu / max(peer.cpu, 1e-9):.2f}x CPU")
              + f"; {note}; load {_load()}", flush=True)
    print(f"\nload average after: {_load()}; Tempo's stages + window setup: {total:.1f} s "
          f"({total / 60:.1f} min); {time.strftime('%Y-%m-%d %H:%M:%S')}\n")
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
