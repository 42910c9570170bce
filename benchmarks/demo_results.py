"""VALID and TEST numbers of the demo archive: the selected recipe vs plain KNN vs the naive baseline.

For each window and aspect, on NK targets: Fmax (and its tau), coverage at Fmax, weighted Fmax and
Smin of the three methods on VALID (t-1, t0] (from ``valid_selection``: the recipe refit on TRAIN
labels, applied to VALID) and on TEST (t0, t1] (from ``benchmark``: every method at its VALID
threshold; the recipe's rows equal ``test_score``'s). The three methods of one split are scored on the same targets and ground truth
(checked here by the truth's sha256). Writes ``docs/demo_results.md``.

    .venv/bin/python benchmarks/demo_results.py                 # materialise data/ in a tmp instance
    .venv/bin/python benchmarks/demo_results.py --artefacts DIR # read an already materialised store
"""
from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

REPO = Path(__file__).resolve().parents[1]
METHODS = ("recipe", "knn", "naive")
COLUMNS = ["window", "split", "aspect", "method", "n_targets", "truth_pairs", "f_at_valid_tau", "valid_tau",
           "fmax_oracle", "tau_oracle", "coverage", "wfmax", "smin"]
NUMBERS = ("f_at_valid_tau", "valid_tau", "fmax_oracle", "tau_oracle", "coverage", "wfmax", "smin")


def split_summaries(store, window: str) -> dict[str, pd.DataFrame]:
    """``{"VALID": frame, "TEST": frame}`` of one window's per-(method, mode, aspect) scores.

    On VALID each method's threshold is, by the protocol's rule, the one maximising F there, so
    F at the VALID threshold is the VALID curve's best; on TEST every method is read at its own
    VALID threshold (the ``benchmark``, whose recipe rows equal ``test_score``'s).
    """
    valid = store.open("valid_selection", window).value["valid_summary"].copy()
    valid["f_at_valid_tau"], valid["valid_tau"] = valid["fmax_oracle"], valid["tau_oracle"]
    from tempo_assets.core.recipe.selection import recipe_profile

    test = store.open("benchmark", window).value["summary"]
    # VALID selection scores under the recipe's profile (lafa by default): the TEST rows of the same
    test = of_profile(test, recipe_profile(store.open("frozen_recipe", window).value["recipe"]))
    return {"VALID": valid, "TEST": test}


def demo_results_table(store, windows, mode: str = "NK") -> pd.DataFrame:
    """One row per (window, split, aspect, method) on ``mode`` targets; raises if methods' targets differ."""
    rows = []
    for window in windows:
        for split, summary in split_summaries(store, window).items():
            part = summary[summary["mode"] == mode]
            part = part[part["method"].isin(METHODS)]
            for aspect, group in part.groupby("aspect", sort=False):
                if group["truth_sha256"].nunique() != 1 or set(group["method"]) != set(METHODS):
                    raise ValueError(f"{window} {split} {aspect}: methods not scored on identical targets")
                for method in METHODS:
                    row = group[group["method"] == method].iloc[0]
                    rows.append({"window": window, "split": split, **{c: row.get(c) for c in COLUMNS[2:]}})
    return pd.DataFrame(rows, columns=COLUMNS)


BASELINES = ("naive", "blast", "knn", "goa_nonexp")
PAIRED_COLUMNS = ["window", "mode", "aspect", "baseline", "n_targets", "recipe", "baseline_f", "delta", "low", "high",
                  "cluster_low", "cluster_high", "verdict"]
PROFILES = ("lafa", "cafaeval")
PROFILE_TEXT = {"lafa": "LAFA's conventions (terms of interest in both ontologies, known terms for PK, prop fill, "
                        "no orphans, MF targets whose only new term is protein binding dropped)",
                "cafaeval": "cafaeval 1.3.0's defaults"}


def of_profile(frame: pd.DataFrame, profile: str) -> pd.DataFrame:
    """The rows of one profile (a benchmark stored before profiles existed is ``cafaeval``)."""
    if "profile" not in frame.columns:
        return frame if profile == "cafaeval" else frame.iloc[0:0]
    return frame[frame["profile"] == profile]


def paired_table(store, windows, profile: str = "lafa") -> pd.DataFrame:
    """Per window, mode, aspect and baseline: both F at VALID tau on TEST and the paired bootstrap of recipe - baseline.

    ``verdict``: ``recipe >`` when the paired CI (proteins resampled) lies above 0, ``baseline >`` when
    below, ``n.s.`` otherwise; ``cluster_low/high`` is the same difference resampling sequence clusters.
    """
    rows = []
    for window in windows:
        bench = store.open("benchmark", window).value
        summary, paired = of_profile(bench["summary"], profile), of_profile(bench["paired"], profile)
        paired = paired[(paired["a"] == "recipe") & (paired["metric"] == "f_at_valid_tau")]
        f = summary.set_index(["method", "mode", "aspect"])
        for (mode, aspect), group in paired.groupby(["mode", "aspect"], sort=False):
            for baseline in BASELINES:
                hit = group[group["b"] == baseline]
                if hit.empty:
                    continue
                row = hit.iloc[0]
                verdict = "recipe >" if row["low"] > 0 else ("baseline >" if row["high"] < 0 else "n.s.")
                rows.append({"window": window, "mode": mode, "aspect": aspect, "baseline": baseline,
                             "n_targets": int(f.loc[("recipe", mode, aspect), "n_targets"]),
                             "recipe": f.loc[("recipe", mode, aspect), "f_at_valid_tau"],
                             "baseline_f": f.loc[(baseline, mode, aspect), "f_at_valid_tau"],
                             "delta": row["delta"], "low": row["low"], "high": row["high"],
                             "cluster_low": row.get("cluster_low"), "cluster_high": row.get("cluster_high"),
                             "verdict": verdict})
    return pd.DataFrame(rows, columns=PAIRED_COLUMNS)


def paired_markdown(table: pd.DataFrame, profile: str) -> list[str]:
    """The recipe against every baseline, per window, mode and aspect (markdown lines)."""
    lines = [f"## TEST, profile `{profile}`: the recipe against every baseline (paired bootstrap)", "",
             f"Profile `{profile}`: {PROFILE_TEXT[profile]}. F at each method's VALID threshold on TEST "
             "(`recipe`, `baseline_f`), the paired bootstrap difference recipe - baseline on the same targets "
             "(`delta`, 95% CI `low`-`high` resampling proteins, `cluster_low`-`cluster_high` resampling sequence "
             "clusters; the benchmark's `paired` table). `recipe >`: protein CI above 0; `baseline >`: below 0; "
             "`n.s.`: it holds 0. Every recipe choice (candidate set, features, K, LightGBM setting, deploy, tau) "
             "was made on VALID by `valid_selection`; no TEST number was looked at to make it.", ""]
    for window, group in table.groupby("window", sort=False):
        lines += [f"### Window `{window}`", ""]
        shown = group.drop(columns=["window"]).copy()
        for column in ("recipe", "baseline_f", "delta", "low", "high", "cluster_low", "cluster_high"):
            shown[column] = shown[column].map(lambda v: "" if pd.isna(v) else f"{v:.3f}")
        lines += [shown.to_markdown(index=False), ""]
    nk = table[table["mode"] == "NK"]
    naive = nk[nk["baseline"] == "naive"]
    met = naive[naive["recipe"] >= naive["baseline_f"]]
    lines += [f"Goal (recipe F at VALID tau >= naive's in every NK aspect), profile `{profile}`: met in {len(met)} "
              f"of {len(naive)} (window, aspect) cells"
              + ("" if len(met) == len(naive) else ": not met in " + ", ".join(
                  f"{r.window.split('__')[0]} {r.aspect} ({r.recipe:.3f} < {r.baseline_f:.3f})"
                  for r in naive[naive["recipe"] < naive["baseline_f"]].itertuples())) + ".", ""]
    return lines


def profile_sections(store, windows) -> tuple[list[str], dict[str, pd.DataFrame]]:
    """Both profiles' paired tables, ``lafa`` first (markdown lines, and the tables)."""
    lines, tables = [], {}
    for profile in PROFILES:
        tables[profile] = paired_table(store, windows, profile)
        lines += paired_markdown(tables[profile], profile)
    return lines, tables


def recipe_choices(recipe: dict) -> str:
    """One aspect's choice after another: variant, K, candidates and features, the prior's blend weight."""
    return "; ".join(f"{a}: {c.get('variant')} k={c.get('k')}"
                     + (f" candidates={c.get('candidates')} features={c.get('features')}" if c.get("variant") == "lgbm"
                        else "")
                     + (f" prior_weight={c['prior_weight']:g}" if c.get("prior_weight") else "")
                     for a, c in sorted(recipe.get("aspects", {}).items()))


def to_markdown(table: pd.DataFrame, recipes: dict[str, dict], note: str, paired: list[str] | None = None) -> str:
    lines = ["# Demo results: recipe vs plain KNN vs naive, VALID and TEST (NK targets)", "",
             "Generated by `benchmarks/demo_results.py` from the materialised demo graph (`data/`). "
             "Releases 2016-01-15, 2017-06-15 and 2022-09-12 are **derived** snapshots, so every number "
             "here is a number on derived data. VALID numbers are the recipe as selected on VALID "
             "(optimistic by construction); TEST is scored once with the frozen recipe at t0 (the t0 corpus; its rerankers the ones VALID scored). "
             "`knn` is plain KNN at the smallest K of the grid; `naive` scores every target with its "
             "aspect's corpus term frequencies. The headline is `f_at_valid_tau`: F at the threshold each "
             "method fixed on VALID (`valid_tau`, per mode and aspect: the threshold maximising F on VALID "
             "growth, the method trained at t-1; on VALID it is therefore the curve's best). "
             "`fmax_oracle`/`tau_oracle` on TEST: best threshold on TEST — not a protocol number, shown beside it "
             "(`wfmax`, `smin` likewise oracle). Fmax/wFmax/Smin as cafaeval computes them "
             "(wFmax/Smin weighted by the window's IA). The VALID and TEST tables are scored under the "
             "profile the recipe was selected under (its `profile`: `lafa`, LAFA's conventions, by default); "
             "the paired TEST tables after them give both profiles.", "", note, ""]
    for window, group in table.groupby("window", sort=False):
        lines += [f"## Window `{window}`", ""]
        recipe = recipes.get(window, {})
        lines += [f"Frozen recipe: {recipe_choices(recipe) or 'n/a'}", ""]
        shown = group.drop(columns=["window"]).copy()
        for column in NUMBERS:
            shown[column] = shown[column].map(lambda v: "" if pd.isna(v) else f"{v:.3f}")
        lines += [shown.to_markdown(index=False), ""]
    lines += paired or []
    return "\n".join(lines) + "\n"


def materialise_demo(root: Path, source: Path | None = None):
    """``source`` (default ``data/``) copied under ``root`` and materialised; returns the store and its windows."""
    import dagster as dg
    from dagster._core.instance.ref import InstanceRef

    from tempo_assets.cli.graph_cmd import plan_steps, run_steps
    from tempo_assets.definitions import build_resources
    from tempo_assets.core.storage.artefacts import ArtefactStore
    from tempo_assets.partitions import plan_partitions, register_partitions
    from tempo_assets.resources import open_archive

    archive = root / "archive"
    shutil.copytree(source or REPO / "data", archive)
    home = root / "home"
    home.mkdir()
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n", encoding="utf-8")
    instance = dg.DagsterInstance.from_ref(InstanceRef.from_dir(str(home)))
    plan = plan_partitions(open_archive(archive))
    register_partitions(instance, plan)
    resources = build_resources(str(archive), str(root / "artefacts"), "sqlite:///" + str(root / "wh.sqlite"),
                                str(root / "cache"))
    report = run_steps(plan_steps(plan, "all"), instance, resources, echo=print)
    if any(status == "FAILED" for _, _, status, _ in report):
        raise SystemExit("materialisation failed")
    return ArtefactStore(root / "artefacts"), plan.windows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--artefacts", type=Path, help="an existing artefact store (default: materialise data/)")
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "demo_results.md")
    parser.add_argument("--mouse", type=int, metavar="N", default=0,
                        help="also build a seeded sample of N mouse proteins from ../shared/data/goa_archive "
                             "(the mouse archive of tempo_assets_tests/test_materialize_mouse.py, never seen by "
                             "the code) and report it after data/")
    args = parser.parse_args()
    from tempo_assets.core.storage.artefacts import ArtefactStore
    from tempo_assets.partitions import plan_partitions
    from tempo_assets.resources import open_archive

    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        if args.artefacts:
            store, windows = ArtefactStore(args.artefacts), plan_partitions(open_archive(REPO / "data")).windows
        else:
            store, windows = materialise_demo(Path(tmp))
        table = demo_results_table(store, windows)
        paired_lines, paired = profile_sections(store, windows)
        recipes = {w: store.open("frozen_recipe", w).value["recipe"] for w in windows}
        mouse_lines: list[str] = []
        if args.mouse:
            sys.path.insert(0, str(REPO))
            from tempo_assets_tests.test_materialize_mouse import build_mouse_archive

            build = Path(tmp) / "mouse_build"
            build.mkdir()
            mouse_started = time.perf_counter()
            m_store, m_windows = materialise_demo(Path(tmp) / "mouse", source=build_mouse_archive(build, args.mouse))
            m_lines, m_paired = profile_sections(m_store, m_windows)
            m_recipes = {w: m_store.open("frozen_recipe", w).value["recipe"] for w in m_windows}
            mouse_lines = [f"# Mouse: a seeded sample of {args.mouse} mouse proteins (an archive the code never saw)", "",
                           "Built by `build_mouse_archive` of `tempo_assets_tests/test_materialize_mouse.py` "
                           f"(`tempo release add/derive`; 2016-01-15 and 2017-06-15 derived from the 2019 GAF), "
                           f"materialised with the same code and grid; {time.perf_counter() - mouse_started:.0f} s.",
                           ""]
            for window, recipe in m_recipes.items():
                mouse_lines += [f"Frozen recipe of `{window}`: {recipe_choices(recipe)}", ""]
            mouse_lines += m_lines
            for profile, frame in m_paired.items():
                print(f"mouse, profile {profile}:\n{frame.to_string(index=False)}")
    how = "read from an already materialised store" if args.artefacts else "materialised in a fresh tmp instance"
    command = "`.venv/bin/python benchmarks/" + " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]) + "`"
    note = (f"Command: {command}. Artefacts {how} (default grid: K in (5, 10), one LightGBM setting, candidate sets knn and "
            "knn+diamond+goa+prior, every feature, prior weights 0 to 1 by 0.25; kmer embeddings); "
            f"{time.perf_counter() - started:.0f} s.")
    from tempo_assets.core.base.io import atomic_write

    with atomic_write(args.out) as handle:
        handle.write(to_markdown(table, recipes, note, paired_lines + mouse_lines))
    print(table.to_string(index=False))
    for profile, frame in paired.items():
        print(f"profile {profile}:\n{frame.to_string(index=False)}")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
