"""NK/LK/PK growth on the real archive: human GOA 2014-09-29 -> 2019-01-14.

Numbers and their explanation: docs/growth_report.md.
"""
from __future__ import annotations


import pytest

from tempo_assets.core.labels.annotations import experimental_annotations, split_by_evidence
from tempo_assets.core.labels.growth import align_terms, annotation_growth, write_ground_truth
from tempo_assets.core.labels.ia import information_accretion
from tempo_assets_tests.conftest import run_folder
from tempo_assets_tests.core.real_archive import real_fasta, real_gaf, real_obo

ASPECTS = ("BP", "MF", "CC")

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def real(tmp_path_factory):
    folder = run_folder(tmp_path_factory)  # the files parsed once per run (real_archive.py)
    gaf_a = real_gaf(folder, "goa_human_2014-09-29.gaf.gz")
    gaf_b = real_gaf(folder, "goa_human_2019-01-14.gaf.gz")
    obo_a = real_obo(folder, "go_2014-10-27.obo.gz")
    obo_b = real_obo(folder, "go_2019-01-27.obo.gz")
    sequences = real_fasta(folder)
    old, report_a = experimental_annotations(gaf_a, obo_a)
    new, report_b = experimental_annotations(gaf_b, obo_b)
    aligned, align_report = align_terms(old, obo_b)
    growth = annotation_growth(aligned, new, sequences=sequences)
    print("\na:", {k: v for k, v in report_a.items() if k != "dropped"})
    print("b:", {k: v for k, v in report_b.items() if k != "dropped"})
    print("a aligned to b:", {k: v for k, v in align_report.items() if k != "dropped"})
    print(growth.counts().to_string())
    print(growth.removed_counts().to_string())
    return {"gaf_a": gaf_a, "obo_a": obo_a, "old": old, "aligned": aligned, "new": new,
            "growth": growth, "sequences": sequences}


def test_every_mode_nonempty_in_every_aspect(real):
    counts = real["growth"].counts()
    for mode in ("NK", "LK", "PK"):
        for aspect in ASPECTS:
            assert counts.loc[(mode, aspect), "targets"] > 0, (mode, aspect)
            assert counts.loc[(mode, aspect), "gt_annotations"] >= counts.loc[
                (mode, aspect), "targets"]
    # on a well-studied proteome most growth lands on proteins already known in that aspect
    for aspect in ASPECTS:
        per_mode = counts.xs(aspect, level="aspect")["targets"]
        assert per_mode["PK"] > per_mode["NK"] and per_mode["PK"] > per_mode["LK"]


def test_modes_are_disjoint_per_aspect(real):
    targets = real["growth"].targets
    assert not targets.duplicated(["protein", "aspect"]).any()
    nk = set(targets.loc[targets["mode"] == "NK", "protein"])
    known_at_a = set(targets.loc[targets["mode"] != "NK", "protein"])
    assert not nk & known_at_a   # NK is a property of the protein, not of the aspect


def test_pk_targets_gain_a_term_outside_their_known_terms(real):
    growth = real["growth"]
    gt = growth.ground_truth.loc[growth.ground_truth["mode"] == "PK"]
    marked = gt.merge(growth.known.assign(_known=True), on=["protein", "term", "aspect"],
                      how="left")
    gained = marked.loc[marked["_known"].isna()].groupby(["protein", "aspect"]).size()
    pk = growth.targets.loc[growth.targets["mode"] == "PK"].set_index(["protein", "aspect"])
    assert pk.index.isin(gained.index).all()
    assert len(growth.known) > 0 and set(growth.known["protein"]) <= set(pk.index.get_level_values(0))


def test_nk_and_lk_against_the_raw_old_gaf(real):
    targets = real["growth"].targets
    experimental, _ = split_by_evidence(real["gaf_a"])
    exp_aspects = experimental.groupby("protein")["aspect"].agg(set)
    nk = set(targets.loc[targets["mode"] == "NK", "protein"])
    assert not nk & set(exp_aspects.index)
    lk = targets.loc[targets["mode"] == "LK"]
    for protein, aspect in zip(lk["protein"], lk["aspect"]):
        assert aspect not in exp_aspects[protein]
    assert set(targets["protein"]) <= set(real["sequences"])
    removed = real["growth"].removed
    assert len(removed) > 0 and not set(removed["protein"]) & set(real["sequences"])


def test_ground_truth_file_and_ia_on_real_terms(real, tmp_path):
    growth = real["growth"]
    counts = growth.counts()
    path = tmp_path / "gt_NK_MF.tsv"
    assert write_ground_truth(path, growth, "NK", "MF") == counts.loc[("NK", "MF"),
                                                                        "gt_annotations"]
    ia = information_accretion(real["old"], real["obo_a"])
    print(f"IA over {real['old']['protein'].nunique()} proteins, {len(ia)} terms: "
          f"{int((ia > 0).sum())} terms with IA > 0")
    assert (ia >= 0).all() and ia.max() < 20
    assert ia["GO:0008150"] == 0 and ia["GO:0003674"] == 0 and ia["GO:0005575"] == 0
    assert (ia > 0).sum() > 1000
