"""The BLAST (DIAMOND) baseline: real ``diamond`` runs, the transfer rule against a loop reference."""
from __future__ import annotations

import gzip
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tempo_assets.core.neighbours import blast
from tempo_assets.core.neighbours.blast import (
    HIT_COLUMNS,
    DiamondError,
    MissingToolError,
    blast_term_scores,
    diamond_hits,
    find_diamond,
)
from tempo_assets.core.base.errors import TempoInputError
from tempo_assets.core.base.liveness import OWNER_FILE, owned_temporary_folder
from tempo_assets.core.inputs.fasta import read_fasta
from tempo_assets_tests.toolkit import GOA_ARCHIVE, needs_diamond, shared

AMINO = "ACDEFGHIKLMNPQRSTVWY"


def _random_protein(rng: np.random.Generator, length: int) -> str:
    return "M" + "".join(rng.choice(list(AMINO), size=length - 1))


def _mutate(rng: np.random.Generator, seq: str, n_changes: int) -> str:
    chars = list(seq)
    for pos in rng.choice(np.arange(1, len(seq)), size=n_changes, replace=False):
        chars[pos] = next(a for a in rng.permutation(list(AMINO)) if a != chars[pos])
    return "".join(chars)


def reference_term_scores(hits: pd.DataFrame, annotations: pd.DataFrame) -> dict:
    """Slow loop version of the BLAST transfer rule: {(protein, term, aspect): score}."""
    terms_of: dict[str, set] = {}
    for protein, term, aspect in annotations[["protein", "term", "aspect"]].itertuples(index=False):
        terms_of.setdefault(protein, set()).add((term, aspect))
    scores: dict = {}
    for query, subject, pident in hits[["query", "subject", "pident"]].itertuples(index=False):
        if query == subject or pident <= 0:
            continue
        for term, aspect in terms_of.get(subject, ()):
            key = (query, term, aspect)
            scores[key] = max(scores.get(key, 0.0), min(pident / 100.0, 1.0))
    return scores


def _as_dict(scores: pd.DataFrame) -> dict:
    return {(p, t, a): s for p, t, a, s in scores.itertuples(index=False)}


# --------------------------------------------------------------------------------------------
# transfer rule (no diamond needed)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_blast_term_scores_matches_loop_reference(seed):
    rng = np.random.default_rng(seed)
    proteins = [f"P{i:03d}" for i in range(25)]
    terms = [(f"GO:{i:07d}", ("BP", "MF", "CC")[i % 3]) for i in range(30)]
    hits = pd.DataFrame({
        "query": rng.choice(proteins, size=120), "subject": rng.choice(proteins, size=120),
        "pident": np.round(rng.uniform(20, 100, size=120), 1),
        "bitscore": rng.uniform(40, 900, size=120), "evalue": rng.uniform(0, 1e-3, size=120),
    })
    picks = rng.integers(0, len(terms), size=200)
    annotations = pd.DataFrame({
        "protein": rng.choice(proteins, size=200),
        "term": [terms[i][0] for i in picks], "aspect": [terms[i][1] for i in picks],
    })
    got = blast_term_scores(hits, annotations)
    assert list(got.columns) == ["protein", "term", "aspect", "score"]
    assert _as_dict(got) == pytest.approx(reference_term_scores(hits, annotations))
    assert not got.duplicated(["protein", "term"]).any()
    assert got.equals(got.sort_values(["protein", "aspect", "term"]).reset_index(drop=True))
    # invariance: shuffled inputs give the same frame
    shuffled = blast_term_scores(hits.sample(frac=1, random_state=seed),
                                 annotations.sample(frac=1, random_state=seed))
    pd.testing.assert_frame_equal(shuffled, got)


def test_blast_term_scores_ignores_self_pairs_and_takes_max():
    hits = pd.DataFrame({"query": ["A", "A", "A", "B"], "subject": ["A", "B", "C", "C"],
                         "pident": [100.0, 40.0, 75.5, 90.0]})
    annotations = pd.DataFrame({"protein": ["A", "B", "C", "C"],
                                "term": ["GO:1", "GO:2", "GO:2", "GO:3"],
                                "aspect": ["BP", "MF", "MF", "CC"]})
    got = _as_dict(blast_term_scores(hits, annotations))
    # A's own GO:1 never comes back through its self pair
    assert got == {("A", "GO:2", "MF"): 0.755, ("A", "GO:3", "CC"): 0.755,
                   ("B", "GO:2", "MF"): 0.90, ("B", "GO:3", "CC"): 0.90}


def test_blast_term_scores_rejects_bad_frames():
    annotations = pd.DataFrame({"protein": ["B"], "term": ["GO:1"], "aspect": ["BP"]})
    with pytest.raises(TempoInputError, match="pident"):
        blast_term_scores(pd.DataFrame({"query": ["A"], "subject": ["B"]}), annotations)
    with pytest.raises(TempoInputError, match="percentage"):
        blast_term_scores(pd.DataFrame({"query": ["A"], "subject": ["B"], "pident": [140.0]}),
                          annotations)
    with pytest.raises(TempoInputError, match="aspects"):
        blast_term_scores(pd.DataFrame({"query": ["A"], "subject": ["B"], "pident": [50.0]}),
                          annotations.assign(aspect="X"))


# --------------------------------------------------------------------------------------------
# the diamond binary


def _diamond_lines(rng: np.random.Generator) -> list[str]:
    """Tabular hits as DIAMOND writes them: each query's together, queries in sorted order; some pairs
    with several HSPs (apart, ties of bitscore broken by pident then evalue), self hits, and a query whose
    only hit is itself."""
    lines = []
    for q in [f"Q{i:02d}" for i in range(12)]:
        hits = [(q, q, 100.0, 900.0, 1e-200)] if q in ("Q03", "Q07") else []
        if q != "Q07":
            for s in rng.choice([f"S{j}" for j in range(9)], size=int(rng.integers(1, 7)), replace=False):
                for _ in range(int(rng.integers(1, 4))):  # HSPs of the pair
                    bits = float(rng.choice([150.0, 300.0, 301.0]))
                    hits.append((q, s, float(rng.choice([40.0, 55.5, 97.1])), bits, float(rng.choice([1e-30, 2e-30]))))
        order = rng.permutation(len(hits))
        lines += ["\t".join([a, b, f"{p:g}", f"{bits:g}", f"{e:.3g}"]) for a, b, p, bits, e in (hits[i] for i in order)]
    return lines


def _best_hsps_by_loop(lines: list[str]) -> pd.DataFrame:
    """Each pair's best HSP (bitscore, then pident, then the lower evalue), self hits dropped, by a loop."""
    best: dict = {}
    for line in lines:
        q, s, p, bits, e = line.split("\t")
        if q != s and ((q, s) not in best or (float(bits), float(p), -float(e)) > best[(q, s)][0]):
            best[(q, s)] = ((float(bits), float(p), -float(e)), (float(p), float(bits), float(e)))
    rows = sorted(((q, s, *values) for (q, s), (_, values) in best.items()), key=lambda r: (r[0], -r[3], r[1]))
    return pd.DataFrame(rows, columns=HIT_COLUMNS)


@pytest.mark.parametrize("piece_lines", [1, 2, 7, 1000])
@pytest.mark.parametrize("order", ["diamond", "shuffled"])
def test_diamond_output_read_in_pieces_keeps_each_pair_s_best_hsp(tmp_path, monkeypatch, piece_lines, order):
    """``best_hsps`` reads the output a piece at a time: the pairs' best HSPs equal a loop's, whatever the
    piece size, with DIAMOND's order (a query's hits together: the pieces joined as they are) and without
    it (reduced again as one frame)."""
    joined = []
    monkeypatch.setattr(blast, "_joined", lambda *a, real=blast._joined: joined.append(1) or real(*a))
    rng = np.random.default_rng(4)
    lines = _diamond_lines(rng)
    if order == "shuffled":
        lines = [lines[i] for i in rng.permutation(len(lines))]
    output = tmp_path / "hits.tsv"
    output.write_text("\n".join(lines) + "\n")
    got = blast.best_hsps(output, HIT_COLUMNS, piece_lines=piece_lines)
    pd.testing.assert_frame_equal(got, _best_hsps_by_loop(lines), check_exact=True)
    assert joined == ([1] if order == "diamond" else [])
    pd.testing.assert_frame_equal(got, blast.best_hsps(output, HIT_COLUMNS, piece_lines=len(lines)), check_exact=True)
    only_self = tmp_path / "self.tsv"
    only_self.write_text("A\tA\t100\t50\t1e-10\nB\tB\t100\t60\t1e-12\n")
    assert blast.best_hsps(only_self, HIT_COLUMNS, piece_lines=piece_lines).empty
    lines[6] = lines[6].replace("\t", "\tx", 2).replace("\tx", "\t", 1)  # line 7: a non-numeric pident
    output.write_text("\n".join(lines) + "\n")
    with pytest.raises(DiamondError, match="non-numeric pident") as info:
        blast.best_hsps(output, HIT_COLUMNS, piece_lines=piece_lines)
    assert info.value.line == 7


def test_missing_diamond_raises_clear_error(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))  # an empty folder: nothing to find
    with pytest.raises(MissingToolError, match="apt-get install diamond-aligner") as info:
        find_diamond()
    assert "setup_system.sh" in str(info.value)
    assert isinstance(info.value, TempoInputError)
    with pytest.raises(MissingToolError):
        diamond_hits({"A": "MKV"}, {"B": "MKV"}, tmp_path / "work")


def test_bad_sequences_rejected_before_running(tmp_path):
    with pytest.raises(TempoInputError, match="whitespace"):
        diamond_hits({"A B": "MKV"}, {"C": "MKV"}, tmp_path)
    with pytest.raises(TempoInputError, match="empty"):
        diamond_hits({"A": ""}, {"C": "MKV"}, tmp_path)
    with pytest.raises(TempoInputError, match="sensitivity"):
        diamond_hits({"A": "MKV"}, {"C": "MKV"}, tmp_path, sensitivity="--turbo")


@needs_diamond
def test_diamond_failure_carries_its_stderr(tmp_path):
    with pytest.raises(DiamondError, match="exited with status") as info:
        blast._run([str(find_diamond()), "blastp", "--no-such-option"], tmp_path)
    assert "no-such-option" in str(info.value)


@needs_diamond
def test_diamond_hits_on_synthetic_family(tmp_path):
    rng = np.random.default_rng(7)
    a = _random_protein(rng, 300)
    b = _mutate(rng, a, 15)  # 95% identical
    c = _random_protein(rng, 300)  # unrelated
    queries = {"QA": a, "QC": c}
    corpus = {"QA": a, "SB": b, "SC": c}
    hits = diamond_hits(queries, corpus, tmp_path / "run1")
    assert list(hits.columns) == HIT_COLUMNS
    assert not (hits["query"] == hits["subject"]).any()
    pairs = {(q, s): p for q, s, p in hits[["query", "subject", "pident"]].itertuples(index=False)}
    assert pairs[("QA", "SB")] == pytest.approx(95.0, abs=0.5)
    assert ("QA", "SC") not in pairs and ("QC", "SB") not in pairs
    again = diamond_hits(dict(reversed(queries.items())), dict(reversed(corpus.items())),
                         tmp_path / "run2")
    pd.testing.assert_frame_equal(again, hits)
    assert diamond_hits({}, corpus, tmp_path / "run3").empty


@needs_diamond
def test_a_relative_workdir_is_the_folder_below_the_current_one(tmp_path, monkeypatch):
    """DIAMOND runs inside the workdir, so a relative workdir's file names must not reach it relative
    (bench_scale's default ``--work bench_out/scale`` failed at makedb: 'Error opening file')."""
    rng = np.random.default_rng(11)
    a = _random_protein(rng, 200)
    queries, corpus = {"QA": a}, {"QA": a, "SB": _mutate(rng, a, 10)}
    monkeypatch.chdir(tmp_path)
    relative = diamond_hits(queries, corpus, Path("bench_out") / "diamond")
    assert (tmp_path / "bench_out" / "diamond" / "query.fasta").exists()
    pd.testing.assert_frame_equal(relative, diamond_hits(queries, corpus, tmp_path / "absolute"))
    assert list(relative["subject"]) == ["SB"]


@needs_diamond
def test_homology_hits_carry_coverage_and_keep_top_others(tmp_path):
    from tempo_assets.core.neighbours.blast import HOMOLOGY_COLUMNS, homology_hits

    rng = np.random.default_rng(11)
    a = _random_protein(rng, 300)
    corpus = {"QA": a, **{f"S{i}": _mutate(rng, a, 10 + 10 * i) for i in range(4)},
              "HALF": a[:150] + _random_protein(rng, 150)}
    hits = homology_hits({"QA": a}, corpus, tmp_path / "h", top=3)
    assert list(hits.columns) == HOMOLOGY_COLUMNS
    # the query itself is never a hit, and three others are kept although it is in the corpus
    assert hits["subject"].tolist() == ["S0", "S1", "S2"]
    assert (hits["qcov"] > 95).all() and (hits["scov"] > 95).all()
    full = homology_hits({"QA": a}, corpus, tmp_path / "h2", top=10).set_index("subject")
    assert full.loc["HALF", "qcov"] == pytest.approx(50.0, abs=3) and full.loc["HALF", "scov"] > 45
    assert homology_hits({}, corpus, tmp_path / "h3").empty


# --------------------------------------------------------------------------------------------
# real Swiss-Prot 2014-01 sequences: human proteins and their mouse orthologs (shared symbol)


def _unique_symbols(gaf: Path, sequences: dict) -> dict[str, str]:
    accessions: dict[str, set] = {}
    with gzip.open(gaf, "rt") as handle:
        for line in handle:
            if line.startswith("!"):
                continue
            fields = line.split("\t", 3)
            if fields[1] in sequences:
                accessions.setdefault(fields[2].upper(), set()).add(fields[1])
    return {symbol: next(iter(accs)) for symbol, accs in accessions.items() if len(accs) == 1}


@pytest.fixture(scope="module")
def orthologs(tmp_path_factory):
    sequences = read_fasta(shared(GOA_ARCHIVE / "uniprot" / "uniprot_sprot_2014-01-31_human_mouse.fasta.gz"))
    human = _unique_symbols(shared(GOA_ARCHIVE / "goa" / "goa_human_2014-09-29.gaf.gz"), sequences)
    mouse = _unique_symbols(shared(GOA_ARCHIVE / "goa" / "goa_mouse_2014-09-29.gaf.gz"), sequences)
    symbols = sorted(set(human) & set(mouse))[:150]
    pairs = {human[s]: mouse[s] for s in symbols}
    queries = {h: sequences[h] for h in pairs}
    corpus = dict(queries)
    corpus.update({m: sequences[m] for m in pairs.values()})
    hits = diamond_hits(queries, corpus, tmp_path_factory.mktemp("diamond"), threads=1)
    return pairs, sequences, hits


@pytest.mark.slow
@needs_diamond
def test_real_orthologs_found_and_self_hits_dropped(orthologs):
    pairs, sequences, hits = orthologs
    assert not hits.empty
    assert not (hits["query"] == hits["subject"]).any()
    assert set(hits["query"]) <= set(pairs)
    # every query sits in the corpus, so without the drop its best hit would be itself
    pident = {(q, s): p for q, s, p in hits[["query", "subject", "pident"]].itertuples(index=False)}
    found = [pident[(h, m)] for h, m in pairs.items() if (h, m) in pident]
    assert len(found) >= 0.95 * len(pairs)
    identical = [h for h, m in pairs.items() if sequences[h] == sequences[m]]
    assert identical, "the sample should hold some identical human/mouse orthologs"
    for h in identical:
        assert pident[(h, pairs[h])] == pytest.approx(100.0)
    near = [h for h, m in pairs.items() if (h, m) in pident and pident[(h, m)] >= 98]
    assert len(near) >= len(identical)
    assert (hits["evalue"] <= 1e-3).all()
    assert hits.equals(hits.sort_values(["query", "bitscore", "subject"],
                                        ascending=[True, False, True]).reset_index(drop=True))


@pytest.mark.slow
@needs_diamond
def test_real_hits_transfer_like_reference(orthologs):
    pairs, _, hits = orthologs
    rng = np.random.default_rng(3)
    corpus = sorted(set(pairs) | set(pairs.values()))
    rows = [(p, f"GO:{int(t):07d}", ("BP", "MF", "CC")[int(t) % 3])
            for p in corpus for t in rng.choice(60, size=4, replace=False)]
    annotations = pd.DataFrame(rows, columns=["protein", "term", "aspect"])
    got = blast_term_scores(hits, annotations)
    assert _as_dict(got) == pytest.approx(reference_term_scores(hits, annotations))
    assert ((got["score"] > 0) & (got["score"] <= 1)).all()


@needs_diamond
def test_one_database_per_corpus_reused_by_every_search(tmp_path, monkeypatch):
    """``diamond makedb`` runs once per corpus content: a second search (other queries, other
    settings) against the same corpus reads the same database; another corpus gets its own."""
    made = []
    real_run = blast._run
    monkeypatch.setattr(blast, "DATABASES", blast.DiamondDatabases(tmp_path / "dbs"))
    monkeypatch.setattr(blast, "_run", lambda command, workdir: (made.append(command[1]), real_run(command, workdir)))
    corpus = {"C1": "MKTAYIAKQRQISFVKSHFSRQLEERLGLIEVQAPILSRVGDGTQDNLSGAEKAVQVKVKALPDAQ",
              "C2": "MSDNGPQNQRNAPRITFGGPSDSTGSNQNGERSGARSKQRRPQGLPNNTASWFTALTQHGK"}
    query = {"Q1": corpus["C1"][:50]}
    first = blast.diamond_hits(query, corpus, tmp_path / "a")
    second = blast.homology_hits(query, corpus, tmp_path / "b")
    assert made.count("makedb") == 1 and made.count("blastp") == 2
    assert first["subject"].tolist() == ["C1"] and second["subject"].tolist() == ["C1"]
    blast.diamond_hits(query, {"C1": corpus["C1"]}, tmp_path / "c")
    assert made.count("makedb") == 2
    assert len(list((tmp_path / "dbs").glob("*.dmnd"))) == 2
    assert not list((tmp_path / "dbs").glob(".*"))  # no half-built database left behind


def _private_database_folder(answer) -> None:
    answer.put(str(blast.DATABASES.folder))


@pytest.mark.parametrize("method", ["forkserver", "spawn"])
def test_the_private_database_folder_goes_when_a_step_process_exits(method):
    """A step process is a multiprocessing child (``tempo materialize --jobs N``); it ends with
    ``os._exit``, which skips atexit handlers, so a folder removed only by one stayed in /tmp."""
    import multiprocessing

    context = multiprocessing.get_context(method)
    answer = context.Queue()
    child = context.Process(target=_private_database_folder, args=(answer,))
    child.start()
    folder = Path(answer.get(timeout=60))
    child.join(timeout=60)
    assert child.exitcode == 0
    assert folder.name.startswith("tempo_diamond_db_") and not folder.exists()


def _hold_private_database_folder(answer) -> None:
    answer.put(str(blast.DATABASES.folder))
    time.sleep(120)  # until it is killed (in no lock: one it held, a queue's too, would stay held)


def test_the_private_database_folder_of_a_killed_process_is_swept_by_the_next(tmp_path, monkeypatch):
    """A process killed by SIGKILL runs no exit function, so its private folder stays (25+ were left in
    /tmp); the next process that makes one removes it, but never the folder of a process still alive
    (this one's), nor one that names no owner (not Tempo's, or being made)."""
    import multiprocessing

    monkeypatch.setenv("TMPDIR", str(tmp_path))  # the spawned children's temporary folder
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # this process's
    context = multiprocessing.get_context("spawn")
    unowned = tmp_path / f"{blast.PRIVATE_PREFIX}unowned"
    unowned.mkdir()
    with owned_temporary_folder(blast.PRIVATE_PREFIX) as living:
        answer = context.Queue()
        killed = context.Process(target=_hold_private_database_folder, args=(answer,))
        killed.start()
        dead_folder = Path(answer.get(timeout=60))
        killed.kill()
        killed.join(timeout=60)
        assert dead_folder.parent == tmp_path and (dead_folder / OWNER_FILE).is_file()  # left behind
        answer = context.Queue()  # not the killed process's: it may hold its lock
        next_user = context.Process(target=_private_database_folder, args=(answer,))
        next_user.start()
        next_folder = Path(answer.get(timeout=60))
        next_user.join(timeout=60)
        assert not dead_folder.exists()
        assert Path(living).is_dir() and unowned.is_dir()
    assert next_user.exitcode == 0 and not next_folder.exists()  # removed at its exit


def test_a_forked_child_makes_its_own_private_database_folder(tmp_path, monkeypatch):
    """A private folder names the process that made it: a forked child makes its own rather than use its
    parent's, which goes when the parent exits (or is swept once the parent is killed)."""
    import multiprocessing

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(blast, "DATABASES", blast.DiamondDatabases())
    parents = blast.DATABASES.folder
    context = multiprocessing.get_context("fork")
    answer = context.Queue()
    child = context.Process(target=_private_database_folder, args=(answer,))
    child.start()
    childs = Path(answer.get(timeout=60))
    child.join(timeout=60)
    assert child.exitcode == 0 and childs.parent == parents.parent == tmp_path
    assert childs != parents and not childs.exists() and parents.is_dir()  # the child's went at its exit
