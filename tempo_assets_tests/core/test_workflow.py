"""core/workflow and core/scoring on small frames: growth honours the sequence restriction (docs/PROTOCOL.md)."""
import numpy as np
import pandas as pd
import pytest

from tempo_assets.core.pipeline.window_growth import growth_between, sequence_map
from tempo_assets.core.inputs.ontology import parse_obo
from tempo_assets_tests.assets.tiny_archive import write_obo


def propagated(ontology, rows):
    out = [(p, a, ontology.aspect(t)) for p, t in rows for a in sorted(ontology.ancestors(t))]
    return {"experimental": pd.DataFrame(out, columns=["protein", "term", "aspect"])}


def test_growth_excludes_proteins_whose_sequence_changed_or_was_missing(tmp_path):
    write_obo(tmp_path / "go.obo", "2020-01-01")
    onto = parse_obo(tmp_path / "go.obo")
    old = propagated(onto, [("P1", "GO:0000011")])  # P1 known in MF only
    new = propagated(onto, [("P1", "GO:0000011"), ("P1", "GO:0000002"), ("P2", "GO:0000003"),
                            ("P3", "GO:0000021"), ("P4", "GO:0000022")])
    old_seqs = pd.DataFrame({"protein": ["P1", "P2", "P3"], "sequence_sha256": ["a", "b", "c"]})
    new_seqs = pd.DataFrame({"protein": ["P1", "P2", "P3", "P4"], "sequence_sha256": ["a", "b", "c-changed", "d"]})

    growth = growth_between(old, new, onto, sequence_map(old_seqs), sequence_map(new_seqs))
    targets = {(r.protein, r.aspect): r.mode for r in growth.targets.itertuples()}
    assert targets == {("P1", "BP"): "LK", ("P2", "BP"): "NK"}
    removed = {(r.protein, r.reason) for r in growth.removed.itertuples()}
    assert removed == {("P3", "sequence_changed"), ("P4", "no_sequence_at_a")}

    # without the later sequences the changed one is kept: the restriction comes from new_sequences
    kept = growth_between(old, new, onto, sequence_map(old_seqs))
    assert ("P3", "CC") in {(r.protein, r.aspect) for r in kept.targets.itertuples()}


def test_sequence_map_restricts_to_embedded_proteins():
    frame = pd.DataFrame({"protein": ["P1", "P2"], "sequence": ["AA", "CC"], "sequence_sha256": ["h1", "h2"]})
    assert sequence_map(frame) == {"P1": "h1", "P2": "h2"}
    assert sequence_map(frame, ["P2", "P9"]) == {"P2": "h2"}


def test_scores_at_tau_reads_the_frozen_threshold_row_not_the_best():
    import pandas as pd

    from tempo_assets.core.evaluation.scoring import recipe_valid_taus, scores_at_tau

    tau_grid = np.arange(0.01, 1, 0.01)
    curve = pd.DataFrame({"tau": tau_grid, "pr": np.linspace(0.2, 0.9, 99),
                          "rc": np.linspace(0.9, 0.1, 99)})
    curve["f"] = 2 * curve["pr"] * curve["rc"] / (curve["pr"] + curve["rc"])
    frozen = tau_grid[56]  # the grid value printed as 0.57, with its float error
    got = scores_at_tau(curve, float(frozen))
    assert got["f_at_valid_tau"] == curve["f"].iloc[56] and got["valid_tau"] == float(frozen)
    assert got["f_at_valid_tau"] < curve["f"].max()
    # a threshold past the last covered row scores zero rather than vanishing
    assert scores_at_tau(curve[curve["tau"] < 0.5], float(frozen))["f_at_valid_tau"] == 0.0
    recipe = {"aspects": {"BP": {"tau": 0.3, "tau_by_mode": {"NK": 0.4}}, "MF": {"tau": None}}}
    assert recipe_valid_taus(recipe, by_mode=False) == {("recipe", m, "BP"): 0.3 for m in ("NK", "LK", "PK")}
    assert recipe_valid_taus(recipe)[("recipe", "NK", "BP")] == 0.4
    assert recipe_valid_taus(recipe)[("recipe", "LK", "BP")] == 0.3


def _growth_of(targets, truth, known):
    from tempo_assets.core.labels.growth import Growth

    frame = lambda rows, columns: pd.DataFrame(rows, columns=columns).astype("string")  # noqa: E731
    return Growth(targets=frame(targets, ["protein", "aspect", "mode"]),
                  ground_truth=frame(truth, ["protein", "term", "aspect", "mode"]),
                  known=frame(known, ["protein", "term", "aspect"]), removed=pd.DataFrame())


def _differences_by_rows(sql, python) -> dict[str, int]:
    """The reference: rows of one growth missing from the other, one row at a time."""
    out = {}
    for name in ("targets", "ground_truth", "known"):
        a = [tuple(map(str, row)) for row in getattr(sql, name).itertuples(index=False)]
        b = [tuple(map(str, row)) for row in getattr(python, name).itertuples(index=False)]
        out[f"{name}_only_sql"] = len({r for r in a if r not in b})
        out[f"{name}_only_python"] = len({r for r in b if r not in a})
    return out


GROWTH = ([("P1", "MF", "PK"), ("P2", "CC", "NK")],
          [("P1", "GO:1", "MF", "PK"), ("P2", "GO:2", "CC", "NK"), ("P2", "GO:3", "CC", "NK")],
          [("P1", "GO:4", "MF")])


@pytest.mark.parametrize("other", [
    GROWTH,  # the same rows in the same order: the row-for-row path
    tuple(rows[::-1] for rows in GROWTH),  # the same rows in another order
    (GROWTH[0], GROWTH[1][:2], GROWTH[2]),  # a ground-truth row missing
    (GROWTH[0] + [("P3", "BP", "LK")], GROWTH[1], []),  # a target more, the known term gone
])
def test_growth_differences_count_the_rows_of_one_growth_missing_from_the_other(other):
    from tempo_assets.core.pipeline.window_growth import growth_differences

    sql, python = _growth_of(*GROWTH), _growth_of(*other)
    assert growth_differences(sql, python) == _differences_by_rows(sql, python)
    assert growth_differences(python, sql) == _differences_by_rows(python, sql)
