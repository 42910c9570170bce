"""Every number Tempo produces on ``data/`` equals the stored fixtures (issue 8: refactor-safe).

The fixtures under ``fixtures/numbers/`` were written from the code *before* the architecture
refactor (``TEMPO_WRITE_FIXTURES=1`` rewrites them from the current code): per window the
``test_score`` summary, the ``benchmark`` summary, paired and decay tables and the frozen recipe;
per cutoff the CAFA submission text (its sha256 and line count: the text is 20 MB). Columns
renamed since are mapped back through ``RENAMED``; floats compare at 1e-9.

Issue 9.2 (every method's VALID threshold) changed numbers deliberately and the fixtures were
regenerated from that code; every other column kept its pre-change value (checked column by
column against the previous fixtures before committing them):

* ``test_score_summary``: the recipe's ``tau_valid/f_at_tau/pr_at_tau/rc_at_tau`` now read each
  mode's VALID threshold (``tau_by_mode``, as ``benchmark`` did) instead of the aspect's mean
  ``tau``; new columns ``wf_at_valid_tau, s_at_valid_tau, f_at_valid_tau_low/high``.
* ``benchmark_summary``: every baseline and ``@t-1`` variant now has ``tau`` (= ``valid_tau``) and
  ``f_at_tau`` (were empty); new ``p/r/wf/s_at_valid_tau``, ``f_at_valid_tau_low/high``.
* ``benchmark_paired`` and ``benchmark_decay``: on the headline (F at each method's VALID
  threshold) instead of the oracle Fmax (``metric`` f_at_valid_tau; decay columns
  ``f_at_valid_tau_newer/older``).
Issue 11 added the ``lafa`` profile beside ``cafaeval`` (rows with ``profile`` ``lafa``) and new columns
(``profile``, ``f_micro_w_at_valid_tau``, ``*_cluster_low/high``, ``cluster_p_value``, ``n_clusters``); the
``cafaeval`` rows did not move. Since the recipe is selected under ``lafa`` the benchmark fixtures hold both
profiles' rows (keyed by ``profile``).
The recipe's prior blend (``assets.recipe`` step 4: each aspect's chosen cell blended with the naive
prior at the weight VALID prefers) changed the recipe's numbers deliberately and the fixtures were
regenerated from that code: the frozen recipes (``prior_weight`` per aspect, the grid's
``prior_weights``; an aspect with ``prior_weight`` > 0 has new ``tau_by_mode``/``valid_fmax_by_mode``/
``valid_objective``), the recipe's rows (and ``recipe@t-1``'s) of every table and the submission; every
baseline's row kept its value (checked against the previous fixtures before committing them), and the
regenerated files hold the columns added since (``profile``, the cluster intervals, ``note``). The
recipe's scores are also made consistent with the candidates' ontology (``Ontology.propagate_max``):
under cafaeval's ``max`` that moves only what the ``t1`` ontology treats differently from ``t0``'s.
Unchanged: ``fmax``/``fmax_oracle`` and its CIs, ``tau_test``/``tau_oracle``, wfmax, smin,
f_micro_w, coverage, counts, recipes, submissions.
VALID selection under LAFA's conventions (the grid's ``profile_name``, ``lafa`` by default; ``test_score``
scores the recipe under the profile it was selected under) changed the recipes deliberately and the
fixtures were regenerated from that code: the frozen recipes (``profile`` ``lafa``, other cells in W1 CC and
W2 MF, every aspect's ``tau_by_mode``/``valid_*``), ``test_score``'s rows (now under ``lafa``), the recipe's
rows of the benchmark tables and the submission; every baseline's row kept its value.

Each asset declares its code version (``code_version=`` on ``@dg.asset``); ``fixtures/code_versions.json``
records the code versions the fixtures were written under. A fixture that changed while the asset
that writes it and every asset upstream of it kept its recorded code version fails with "bump
code_version of X": a changed output needs a new code version, or ``tempo status`` and the UI would
keep calling the old artefacts current. A bumped code version is recorded when the fixtures are
rewritten (``TEMPO_WRITE_FIXTURES=1``); one bumped without rewriting them fails too.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tempo_assets.core.methods.eligibility import METHOD_PREFIX
from tempo_assets_tests.toolkit import rewrite_fixtures

pytestmark = pytest.mark.slow

FIXTURES = Path(__file__).parent / "fixtures" / "numbers"
# per table: the name the fixtures were written with -> today's column name
RENAMED: dict[str, dict[str, str]] = {
    "test_score_summary": {"targets": "n_targets", "fmax": "fmax_oracle", "tau": "tau_oracle", "tau_valid": "valid_tau",
                           "pr_at_tau": "p_at_valid_tau", "rc_at_tau": "r_at_valid_tau", "f_at_tau": "f_at_valid_tau",
                           "fmax_low": "fmax_oracle_low", "fmax_high": "fmax_oracle_high"},
    "benchmark_summary": {"fmax": "fmax_oracle", "tau_test": "tau_oracle", "tau": "valid_tau",
                          "f_at_tau": "f_at_valid_tau", "fmax_low": "fmax_oracle_low", "fmax_high": "fmax_oracle_high"},
    "benchmark_paired": {},
    "benchmark_decay": {},
}
# values renamed with their column (the paired bootstrap's metric is now the headline f_at_valid_tau)
RENAMED_VALUES = {"benchmark_paired": {"metric": {"fmax_oracle": "fmax"}}}
KEYS = {"test_score_summary": ["method", "mode", "aspect"], "benchmark_summary": ["profile", "method", "mode", "aspect"],
        "benchmark_paired": ["profile", "a", "b", "mode", "aspect", "metric"],
        "benchmark_decay": ["profile", "method", "mode", "aspect"]}


def _frame(value, name: str) -> pd.DataFrame:
    """The table ``name`` of a stored value (a dict of frames or a typed artefact)."""
    field = name.split("_", 1)[1] if name.startswith("benchmark_") else "summary"
    table = value[field] if isinstance(value, dict) else getattr(value, field)
    if name.startswith("benchmark_") and "profile" not in table.columns:
        table = table.assign(profile="cafaeval")  # a benchmark stored before profiles existed
    table = table.rename(columns={new: old for old, new in RENAMED[name].items()})
    for column, values in RENAMED_VALUES.get(name, {}).items():
        table = table.assign(**{column: table[column].replace(values)})
    # rows of the methods registered in data/methods.yaml are new (tested in test_methods_materialize);
    # the fixtures hold the recipe's and the baselines' numbers, which must not move
    for column in ("method", "a", "b"):
        if column in table.columns:
            table = table[~table[column].astype(str).str.startswith(METHOD_PREFIX)]
    return table.reset_index(drop=True)


def current_numbers(store, plan) -> dict[str, object]:
    """``{fixture file name: frame or text}`` read from a materialised store."""
    out: dict[str, object] = {}
    for window in plan.windows:
        score, bench = store.open("test_score", window).value, store.open("benchmark", window).value
        out[f"{window}.test_score_summary.tsv"] = _frame(score, "test_score_summary")
        for name in ("benchmark_summary", "benchmark_paired", "benchmark_decay"):
            out[f"{window}.{name}.tsv"] = _frame(bench, name)
        recipe = store.open("frozen_recipe", window).value
        recipe = recipe["recipe"] if isinstance(recipe, dict) else recipe.recipe
        out[f"{window}.recipe.json"] = json.dumps(recipe, sort_keys=True, indent=1) + "\n"
    for cutoff in plan.cutoffs:
        if store.exists("submission", cutoff):
            text = store.open("submission", cutoff).value
            text = text if isinstance(text, str) else text.text
            digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
            out[f"{cutoff}.submission.sha256"] = f"{digest}  lines={text.count(chr(10))}\n"
    return out


def _tidy(frame: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    frame = frame.copy()
    for column in frame.columns:
        if frame[column].dtype.kind == "f":
            frame[column] = frame[column].round(9)
    return frame.sort_values(keys, kind="mergesort").reset_index(drop=True)


def _kind(name: str) -> str:
    return name.split(".")[1]


CODE_VERSIONS = FIXTURES.parent / "code_versions.json"
# the asset whose artefact each kind of fixture is read from
FIXTURE_ASSET = {"test_score_summary": "test_score", "benchmark_summary": "benchmark", "benchmark_paired": "benchmark",
                 "benchmark_decay": "benchmark", "recipe": "frozen_recipe", "submission": "submission"}


def current_code_versions() -> dict[str, str]:
    from tempo_assets.definitions import ASSETS
    from tempo_assets.fingerprints import code_versions

    return code_versions(ASSETS)


def upstream_closure(asset: str, deps: dict[str, set[str]]) -> list[str]:
    """``asset`` and every asset it reads, directly or not."""
    seen, todo = set(), [asset]
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo += sorted(deps.get(name, ()))
    return sorted(seen)


def code_version_verdict(changed: list[str], recorded: dict[str, str], current: dict[str, str],
                         deps: dict[str, set[str]]) -> list[str]:
    """What the fixtures' code-version record says about the fixture files in ``changed``.

    For each asset whose fixture changed: "bump code_version of X" when neither it nor anything
    upstream of it has a code version other than the recorded one; else the bumped ones, to be
    recorded with the regenerated fixtures. With nothing changed, code versions that differ from
    the record (bumped without rewriting the fixtures) are reported too.
    """
    messages = []
    for asset in sorted({FIXTURE_ASSET[_kind(name)] for name in changed}):
        files = ", ".join(sorted(n for n in changed if FIXTURE_ASSET[_kind(n)] == asset))
        bumped = [f"{a} {recorded.get(a)} -> {current.get(a)}" for a in upstream_closure(asset, deps)
                  if recorded.get(a) != current.get(a)]
        if bumped:
            messages.append(f"{files} changed with code versions bumped ({', '.join(bumped)}): if the change is "
                            "deliberate, regenerate the fixtures with TEMPO_WRITE_FIXTURES=1")
        else:
            messages.append(f"{files} changed while the code version of {asset} and of everything upstream of it is "
                            f"still the recorded one: bump code_version of {asset} (or of the upstream asset whose "
                            "output changed), then regenerate the fixtures with TEMPO_WRITE_FIXTURES=1")
    if not changed:
        drift = sorted(a for a in set(recorded) | set(current) if recorded.get(a) != current.get(a))
        if drift:
            moved = ", ".join(f"{a} {recorded.get(a)} -> {current.get(a)}" for a in drift)
            messages.append(f"code versions differ from {CODE_VERSIONS.name} ({moved}) with every number unchanged: "
                            "record them with TEMPO_WRITE_FIXTURES=1")
    return messages


def write_fixtures(numbers: dict[str, object]) -> None:
    FIXTURES.mkdir(parents=True, exist_ok=True)
    CODE_VERSIONS.write_text(json.dumps(current_code_versions(), indent=1, sort_keys=True) + "\n", encoding="utf-8")
    for name, value in numbers.items():
        if isinstance(value, pd.DataFrame):
            _tidy(value, KEYS[_kind(name)]).to_csv(FIXTURES / name, sep="\t", index=False, float_format="%.9f")
        else:
            (FIXTURES / name).write_text(value, encoding="utf-8")


def test_numbers_equal_the_fixtures(demo_graph):
    compare(current_numbers(demo_graph.store(), demo_graph.plan))


def compare(numbers: dict[str, object]) -> None:
    rewrite_fixtures("TEMPO_WRITE_FIXTURES", lambda: write_fixtures(numbers), f"the number fixtures in {FIXTURES}")
    stored = sorted(p.name for p in FIXTURES.iterdir())
    assert sorted(numbers) == stored, "windows or cutoffs differ from the fixtures"
    from tempo_assets.definitions import ASSETS
    from tempo_assets.graph_state import asset_deps

    recorded = json.loads(CODE_VERSIONS.read_text(encoding="utf-8"))
    failures: dict[str, str] = {}
    for name, value in numbers.items():
        try:
            compare_one(name, value)
        except AssertionError as exc:
            failures[name] = str(exc)
    verdict = code_version_verdict(sorted(failures), recorded, current_code_versions(), asset_deps(ASSETS))
    assert not failures and not verdict, "\n".join(verdict + [f"{n}: {why}" for n, why in sorted(failures.items())])


def compare_one(name: str, value: object) -> None:
    """Assert the fixture ``name`` equals ``value`` (text exactly, tables column by column)."""
    path = FIXTURES / name
    if not isinstance(value, pd.DataFrame):
        assert value == path.read_text(encoding="utf-8"), f"{name} changed"
        return
    expected = pd.read_csv(path, sep="\t", keep_default_na=True)
    missing = [c for c in expected.columns if c not in value.columns]
    assert not missing, f"{name}: columns {missing} gone (have {list(value.columns)})"
    actual = _tidy(value[list(expected.columns)], KEYS[_kind(name)])
    assert len(actual) == len(expected), f"{name}: {len(actual)} rows, fixture has {len(expected)}"
    for column in expected.columns:
        want, got = expected[column], actual[column]
        if got.dtype.kind not in "fiub":  # text (an all-empty text column reads back as NaN)
            assert got.astype(str).tolist() == want.where(want.notna(), "").astype(str).tolist(), \
                f"{name} column {column}"
        elif want.dtype.kind == "f" or got.dtype.kind == "f":
            np.testing.assert_allclose(got.to_numpy(dtype=float), want.to_numpy(dtype=float), rtol=0,
                                       atol=2e-9, equal_nan=True, err_msg=f"{name} column {column}")
        else:
            assert got.astype(str).tolist() == want.astype(str).tolist(), f"{name} column {column}"


PICKLE_MAGIC = tuple(bytes([0x80, protocol]) for protocol in range(2, 6))
OPEN_SUFFIXES = {".parquet", ".npy", ".npz", ".json", ".txt"}


def test_no_artefact_in_the_store_is_a_pickle(demo_graph):
    """After the whole graph ran, every stored value is parquet, npy/npz, JSON or text; nothing unpickles."""
    files = [p for p in demo_graph.artefacts.rglob("*") if p.is_file()]
    values = [p for p in files if "versions" in p.parts]
    assert len(values) > 50
    for path in files:
        with open(path, "rb") as handle:
            assert handle.read(2) not in PICKLE_MAGIC, f"{path} is a pickle"
        assert path.suffix != ".pkl", path
    assert {p.suffix for p in values} <= OPEN_SUFFIXES, {p.suffix for p in values} - OPEN_SUFFIXES
    formats = {json.loads(p.read_text())["format"] for p in demo_graph.artefacts.glob("*/*/artefact.json")}
    assert formats <= {"parquet", "txt", "json", "typed"} and "typed" in formats
