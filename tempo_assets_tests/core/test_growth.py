from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from tempo_assets.core.base.errors import TempoInputError
from tempo_assets.core.labels.growth import (
    Growth,
    align_terms,
    annotation_growth,
    write_ground_truth,
    write_known,
)
from tempo_assets.core.inputs.ontology import parse_obo
from tempo_assets_tests.core.obo_fixtures import small_terms, write_obo

ASPECTS = ("BP", "MF", "CC")


def frame(rows):
    return pd.DataFrame(rows, columns=["protein", "term", "aspect"])


def reference_growth(old, new):
    """Loop-based NK/LK/PK over python sets: {(protein, aspect): mode}, gt, known."""
    old_terms: dict[str, dict[str, set]] = {}
    for p, t, a in old.itertuples(index=False, name=None):
        old_terms.setdefault(p, {}).setdefault(a, set()).add(t)
    new_terms: dict[str, dict[str, set]] = {}
    for p, t, a in new.itertuples(index=False, name=None):
        new_terms.setdefault(p, {}).setdefault(a, set()).add(t)
    modes, gt, known = {}, set(), set()
    for p, by_aspect in new_terms.items():
        for a, terms_b in by_aspect.items():
            if p not in old_terms:
                mode = "NK"
            elif a not in old_terms[p]:
                mode = "LK"
            elif terms_b - old_terms[p][a]:
                mode = "PK"
            else:
                continue
            modes[(p, a)] = mode
            gt |= {(p, t, a, mode) for t in terms_b}
            if mode == "PK":
                known |= {(p, t, a) for t in old_terms[p][a]}
    return modes, gt, known


def random_frames(seed):
    rng = np.random.default_rng(seed)
    vocab = {a: [f"GO:{a}{i}" for i in range(6)] for a in ASPECTS}

    def draw(n_proteins, density):
        rows = []
        for p in range(n_proteins):
            for a in ASPECTS:
                if rng.random() < density:
                    rows.append((f"P{p}", vocab[a][0], a))  # a "root": present when any term is
                    rows += [(f"P{p}", t, a) for t in vocab[a][1:] if rng.random() < 0.3]
        return frame(rows)

    return draw(30, 0.45), draw(40, 0.5)


@pytest.mark.parametrize("seed", range(5))
def test_growth_matches_loop_reference(seed):
    old, new = random_frames(seed)
    growth = annotation_growth(old, new)
    modes, gt, known = reference_growth(old, new)
    got_modes = {(p, a): m for p, a, m in growth.targets.itertuples(index=False, name=None)}
    assert got_modes == modes
    assert set(growth.ground_truth.itertuples(index=False, name=None)) == gt
    assert len(growth.ground_truth) == len(gt)
    assert set(growth.known.itertuples(index=False, name=None)) == known
    counts = growth.counts()
    for mode in ("NK", "LK", "PK"):
        for aspect in ASPECTS:
            expected = sum(1 for (p, a), m in modes.items() if m == mode and a == aspect)
            assert counts.loc[(mode, aspect), "targets"] == expected
            assert counts.loc[(mode, aspect), "gt_annotations"] == sum(
                1 for row in gt if row[3] == mode and row[2] == aspect)
    # invariant to row order
    again = annotation_growth(old.iloc[::-1], new.sample(frac=1.0, random_state=seed))
    pd.testing.assert_frame_equal(again.targets, growth.targets)
    pd.testing.assert_frame_equal(again.ground_truth, growth.ground_truth)
    doubled = annotation_growth(pd.concat([old, old]), pd.concat([new, new.iloc[::2]]))
    pd.testing.assert_frame_equal(doubled.ground_truth, growth.ground_truth)
    pd.testing.assert_frame_equal(doubled.known, growth.known)


def test_growth_on_empty_frames():
    old, new = scenario()
    assert annotation_growth(frame([]), frame([])).targets.empty
    only_new = annotation_growth(frame([]), new)
    assert set(only_new.targets["mode"]) == {"NK"}
    assert len(only_new.ground_truth) == len(new) and only_new.known.empty
    assert annotation_growth(old, frame([])).targets.empty


def scenario():
    old = frame([
        ("P2", "M", "MF"), ("P2", "M1", "MF"),                   # P2: MF only at a
        ("P3", "B", "BP"), ("P3", "B1", "BP"),                   # P3: nothing new at b
        ("P4", "B", "BP"), ("P4", "B1", "BP"), ("P4", "B2", "BP"),  # P4: b is a subset
        ("P5", "B", "BP"), ("P5", "B1", "BP"),                   # P5: gains B3
    ])
    new = frame([
        ("P1", "B", "BP"), ("P1", "B1", "BP"), ("P1", "C", "CC"),
        ("P2", "B", "BP"), ("P2", "M", "MF"), ("P2", "M1", "MF"), ("P2", "M2", "MF"),
        ("P3", "B", "BP"), ("P3", "B1", "BP"),
        ("P4", "B", "BP"), ("P4", "B1", "BP"),
        ("P5", "B", "BP"), ("P5", "B1", "BP"), ("P5", "B3", "BP"),
    ])
    return old, new


def test_scenario_modes_and_known_terms():
    old, new = scenario()
    growth = annotation_growth(old, new)
    assert list(growth.targets.itertuples(index=False, name=None)) == [
        ("P1", "BP", "NK"), ("P1", "CC", "NK"), ("P2", "BP", "LK"),
        ("P5", "BP", "PK"), ("P2", "MF", "PK")]
    gt = growth.ground_truth
    assert set(gt.loc[gt["protein"] == "P5", "term"]) == {"B", "B1", "B3"}
    assert set(map(tuple, growth.known.to_numpy())) == {
        ("P2", "M", "MF"), ("P2", "M1", "MF"), ("P5", "B", "BP"), ("P5", "B1", "BP")}
    # every PK target has a GT term outside its known terms
    for protein, aspect in [("P2", "MF"), ("P5", "BP")]:
        truth = set(gt.loc[(gt["protein"] == protein) & (gt["aspect"] == aspect), "term"])
        kn = growth.known
        known = set(kn.loc[(kn["protein"] == protein) & (kn["aspect"] == aspect), "term"])
        assert truth - known


def test_sequence_restriction_and_removed_counts():
    old, new = scenario()
    seq_a = {"P2": "MKV", "P5": "MAAA", "P9": "M"}
    seq_b = {"P2": "MKV", "P5": "MAAT"}
    growth = annotation_growth(old, new, sequences=seq_a, new_sequences=seq_b)
    assert list(growth.targets.itertuples(index=False, name=None)) == [
        ("P2", "BP", "LK"), ("P2", "MF", "PK")]
    assert set(growth.removed.itertuples(index=False, name=None)) == {
        ("P1", "BP", "NK", "no_sequence_at_a"), ("P1", "CC", "NK", "no_sequence_at_a"),
        ("P5", "BP", "PK", "sequence_changed")}
    removed = growth.removed_counts()
    assert removed.loc["no_sequence_at_a", "proteins"] == 1
    assert removed.loc["no_sequence_at_a", "NK"] == 2
    assert removed.loc["sequence_changed", "PK"] == 1
    assert set(growth.known["protein"]) == {"P2"}
    # a plain set of accessions restricts without change detection
    by_set = annotation_growth(old, new, sequences={"P1", "P5"})
    assert set(by_set.targets["protein"]) == {"P1", "P5"}


def test_sequence_arguments_are_checked():
    old, new = scenario()
    with pytest.raises(TempoInputError, match="new_sequences"):
        annotation_growth(old, new, new_sequences={"P1": "M"})
    with pytest.raises(TempoInputError, match="mapping"):
        annotation_growth(old, new, sequences={"P1"}, new_sequences={"P1": "M"})


def test_bad_frames_name_the_problem():
    old, new = scenario()
    with pytest.raises(TempoInputError, match="aspect"):
        annotation_growth(old.drop(columns="aspect"), new)
    with pytest.raises(TempoInputError, match="'X'"):
        annotation_growth(old, pd.concat([new, frame([("P7", "T", "X")])]))


def test_writers_emit_two_column_files_atomically(tmp_path):
    old, new = scenario()
    growth = annotation_growth(old, new)
    path = tmp_path / "gt_PK.tsv"
    assert write_ground_truth(path, growth, "PK") == 6
    lines = path.read_text().splitlines()
    assert lines[0] == "P2\tM" and len(lines) == 6
    for line in lines:
        protein, term = line.strip().split()  # what cafaeval's reader does
    assert write_ground_truth(path, growth, "PK", aspect="BP") == 3
    assert path.read_text() == "P5\tB\nP5\tB1\nP5\tB3\n"
    known = tmp_path / "known.tsv"
    assert write_known(known, growth, aspect="MF") == 2
    assert known.read_text() == "P2\tM\nP2\tM1\n"
    assert write_known(tmp_path / "known_nk.tsv", growth, mode="NK") == 0
    # a rejected call leaves the previous file in place
    with pytest.raises(TempoInputError, match="mode"):
        write_ground_truth(path, growth, "XX")
    assert path.read_text() == "P5\tB\nP5\tB1\nP5\tB3\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["gt_PK.tsv", "known.tsv",
                                                          "known_nk.tsv"]


def test_counts_has_every_mode_and_aspect():
    empty = Growth(targets=frame([]).rename(columns={"term": "mode"}),
                   ground_truth=pd.DataFrame(columns=["protein", "term", "aspect", "mode"]),
                   known=frame([]))
    counts = empty.counts()
    assert counts.shape == (9, 3) and int(counts.to_numpy().sum()) == 0


def test_align_terms_maps_alt_ids_drops_obsolete_and_recloses(tmp_path):
    # the "new" ontology gives GO:0000002 a new parent GO:0000001 (an edge added between
    # releases) and obsoletes nothing that the old frame lacks
    terms = small_terms()
    for term in terms:
        if term["id"] == "GO:0000002":
            term["is_a"] = ["GO:0000001"]
    ontology = parse_obo(write_obo(tmp_path / "new.obo", terms))
    old = frame([
        ("P1", "GO:0000044", "BP"), ("P1", "GO:0008150", "BP"),   # alt_id at b
        ("P2", "GO:0000005", "BP"), ("P2", "GO:0000001", "BP"), ("P2", "GO:0008150", "BP"),
        ("P3", "GO:0000002", "BP"), ("P3", "GO:0008150", "BP"),
    ])
    aligned, report = align_terms(old, ontology)
    got = {(p, t) for p, t, _ in aligned.itertuples(index=False, name=None)}
    assert ("P1", "GO:0000004") in got and ("P1", "GO:0000044") not in got
    assert ("P2", "GO:0000005") not in got and ("P2", "GO:0008150") in got
    assert ("P3", "GO:0000001") in got   # implied by the new edge
    assert report["alt_mapped"] == 1 and report["obsolete_dropped"] == 1
    assert report["rows_added_by_closure"] > 0
    assert list(report["dropped"].itertuples(index=False, name=None)) == [
        ("P2", "GO:0000005", "obsolete")]
    # P3 gaining GO:0000001 at b is not growth once the old terms are aligned
    new = frame([("P3", "GO:0000002", "BP"), ("P3", "GO:0000001", "BP"),
                 ("P3", "GO:0008150", "BP")])
    assert annotation_growth(old, new).targets["protein"].tolist() == ["P3"]
    assert annotation_growth(aligned, new).targets.empty
