"""The VALID grid: the default one the demo runs, and ``--grid full`` for real runs."""
import json
import subprocess
import sys

from tempo_assets.core.recipe.candidates import FEATURE_SETS, parse_sources
from tempo_assets.core.recipe.valid_grid import SelectionGrid
from tempo_assets.resources import GRIDS, GridResource


def test_default_and_full_grids_are_valid_and_full_is_wider():
    small = SelectionGrid.coerce(GridResource().selection_grid())
    full = SelectionGrid.coerce(GridResource.full().selection_grid())
    assert set(small.ks) < set(full.ks)
    assert set(small.candidate_sets) < set(full.candidate_sets)
    assert set(small.feature_sets) <= set(full.feature_sets) == set(FEATURE_SETS)
    assert len(full.lgbm_params) > len(small.lgbm_params)
    assert all("knn" in parse_sources(c) for c in full.candidate_sets)
    # the wide set is in the default grid: the demo can select every source
    assert "knn+diamond+goa+prior" in small.candidate_sets
    assert GRIDS["full"]().selection_grid() == GridResource.full().selection_grid()
    assert json.loads(GridResource.full(ks=[7]).lgbm_params_json) == list(full.lgbm_params)
    assert GridResource.full(ks=[7]).ks == [7]


def test_materialize_takes_grid_full_and_refuses_another(tmp_path):
    env = {"DAGSTER_HOME": str(tmp_path / "home"), "PATH": "/usr/bin:/bin"}
    base = [sys.executable, "-m", "tempo_assets.cli.main", "materialize", "--window", "no-such-window"]
    done = subprocess.run(base + ["--grid", "full"], capture_output=True, text=True, env={**env, **_py()})
    assert done.returncode == 2 and "unknown window 'no-such-window'" in done.stderr
    done = subprocess.run(base + ["--grid", "huge"], capture_output=True, text=True, env={**env, **_py()})
    assert done.returncode == 2 and "invalid choice: 'huge'" in done.stderr
    done = subprocess.run(base + ["--select-under", "cafaeval"], capture_output=True, text=True, env={**env, **_py()})
    assert done.returncode == 2 and "unknown window 'no-such-window'" in done.stderr
    done = subprocess.run(base + ["--select-under", "cafa"], capture_output=True, text=True, env={**env, **_py()})
    assert done.returncode == 2 and "invalid choice: 'cafa'" in done.stderr


def _py() -> dict:
    import os

    return {k: v for k, v in os.environ.items() if k in ("PYTHONPATH", "HOME", "TEMPO_ARCHIVE")}


def test_selection_profile_is_lafa_by_default_and_a_bad_one_is_named():
    """VALID selection (and test_score) score under LAFA's conventions unless the grid says cafaeval."""
    import pytest

    from tempo_assets.core.base.errors import TempoInputError

    assert GridResource().profile() == "lafa" and GridResource.full().profile() == "lafa"
    assert GridResource(profile_name="cafaeval").profile() == "cafaeval"
    with pytest.raises(TempoInputError, match="grid profile 'cafa' is not one of") as info:
        GridResource(profile_name="cafa").profile()
    assert "resources.grid.config.profile_name" in str(info.value)
