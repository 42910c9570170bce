"""``tempo report [--window KEY] [--format tsv|md|html] [--out PATH] [--by identity]``: benchmark tables and pages.

Reads the stored ``benchmark`` artefacts (``$TEMPO_ARTEFACTS``) of the archive's windows
(``$TEMPO_ARCHIVE``) and, where ``$DAGSTER_HOME`` holds an instance, its failed runs. TSV and
Markdown go to stdout (or ``--out``); HTML is written to ``--out`` (default: beside the artefact,
``<artefacts>/benchmark/<window>/report.html``, or ``<artefacts>/benchmark_catalog/report.html``
for the whole archive) and the path written is printed. Every method is shown under both profiles
(``profile`` ``lafa`` and ``cafaeval``; LAFA's first in md/html). ``--by identity`` adds rows per
identity stratum (``identity_stratum`` ``<30``, ``30-60``, ``60-90``, ``>=90``: each TEST target's
maximum identity to a t0 training protein annotated in the aspect) with ``n_targets`` and F at
each method's VALID threshold; the HTML window report plots them. Every number on a derived
release is marked.

Before md or html is published the quality gate (``tempo gate``) judges the audit reports given
with ``--gate``: on a failure nothing is written and the command exits 1, unless
``--allow-failed-gate``, which publishes under a banner saying so; the verdict heads the report.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

# pandas and core are imported by the functions that use them: `tempo --help` builds every
# command's parser, and stays cheap (cli/main.py)
FORMATS = ("tsv", "md", "html")
GATE_REFUSED_EXIT_CODE = 1


def _instance():
    """The Dagster instance at ``$DAGSTER_HOME`` if there is one (failed runs), else None."""
    home = os.environ.get("DAGSTER_HOME")
    if not home or not (Path(home) / "dagster.yaml").exists():
        return None
    import dagster as dg

    from tempo_assets.postgres_pool import pool_connections
    from tempo_assets.runs import settle_dead_runs

    pool_connections()
    instance = dg.DagsterInstance.get()
    settle_dead_runs(instance, echo=lambda line: print(line, file=sys.stderr))
    return instance


def _emit(text: str, out: str | None, gate=None) -> None:
    if gate is not None:  # the gate's verdict first, above the title
        text = gate.markdown() + text
    if out:
        from tempo_assets.core.base.io import atomic_write

        with atomic_write(out) as handle:
            handle.write(text)
        print(f"wrote {out}", file=sys.stderr)
    else:
        sys.stdout.write(text)


def _window_text(value, window: str, derived: bool, fmt: str, by_identity: bool = False) -> str:
    import pandas as pd

    from tempo_assets.core.evaluation.benchmark import results_frame
    from tempo_assets.core.evaluation.report import provenance_markdown
    from tempo_assets.core.evaluation.results import (
        interval_table_markdown, markdown_legend, results_to_markdown, results_to_tsv,
        strata_frame, strata_to_markdown,
    )

    results = results_frame(value["summary"], window, derived)
    strata = strata_frame(value.get("strata", pd.DataFrame()), window, derived) if by_identity else None
    if fmt == "tsv":
        return results_to_tsv(results if strata is None else with_strata(results, strata))
    n_boot = value.get("n_boot") or None
    parts = [f"# Tempo benchmark report: window {window}\n", "## Provenance\n",
             provenance_markdown(window_provenance(value, window)), "## Results\n",
             results_to_markdown(results, legend=False)]
    if strata is not None:
        parts += ["## F at VALID tau by identity stratum\n", strata_to_markdown(strata)]
    if len(value.get("paired", [])):
        parts += ["\n## Paired bootstrap (F at each method's VALID tau, a - b, same resampled proteins and "
                  "clusters)\n", interval_table_markdown(value["paired"], n_boot), "\n"]
    if len(value.get("valid_taus", [])):
        parts += ["\n## VALID thresholds (chosen on VALID growth under each profile, read on TEST)\n",
                  interval_table_markdown(value["valid_taus"], n_boot), "\n"]
    if len(value.get("decay", [])):
        parts += ["\n## Decay (F at VALID tau, trained at t0 vs t-1, same TEST)\n",
                  interval_table_markdown(value["decay"], n_boot), "\n"]
    if len(value.get("methods", [])):
        from tempo_assets.core.evaluation.window_markdown import method_status_markdown

        parts += ["\n## Registered methods\n", method_status_markdown(value["methods"]), "\n"]
    parts += ["\n## Legend\n", markdown_legend(bool(derived))]
    return "\n".join(parts)


def window_provenance(value, window: str, status: str | None = None) -> dict:
    """What a window report states about its numbers: releases, profiles, bootstrap, clustering."""
    from tempo_assets.core.evaluation.window_markdown import homology_provenance

    out = {"window": window}
    if status is not None:
        out["status"] = status
    out.update({"derived_releases": value.get("derived_releases") or "none",
                "profiles": value.get("profiles") or "none",
                "bootstrap_samples": value.get("n_boot", ""),
                "lafa_dropped_protein_binding_targets": len(value.get("dropped_protein_binding") or []),
                **homology_provenance(value.get("homology") or {})})
    return out


def with_strata(results, strata):
    """The results rows (``identity_stratum`` ``all``) followed by the rows per identity stratum."""
    import pandas as pd

    return pd.concat([results.assign(identity_stratum="all"), strata], ignore_index=True)


def _all_strata(store, catalog):
    """Every stored benchmark's identity strata as report rows."""
    import pandas as pd

    from tempo_assets.core.evaluation.results import strata_frame

    frames = []
    for row in catalog.itertuples():
        if row.status in ("ready", "stale") and store.exists("benchmark", row.window):
            strata = store.open("benchmark", row.window).value.get("strata", pd.DataFrame())
            if len(strata):
                frames.append(strata_frame(strata, row.window, bool(row.derived)))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=["window"])


def way_forward(store, window: str) -> str:
    """What to run for a window with no benchmark: its TEST state's own command when TEST holds it
    (``core.storage.claims.TEST_STATES``), never a ``tempo materialize`` that would be refused."""
    from tempo_assets.graph_state import window_tests

    test = window_tests(store, [window], _instance())[window]
    if test.state in ("reading", "scoring", "dead", "burned"):
        return f"its TEST is {test.state}: {test.describe()}"
    return f"run `tempo materialize --window {window}`"


def _report(args) -> int:
    """``tempo report``: the gate first (md, html), then one window, two windows compared, or the archive."""
    from tempo_assets.cli.step_process import defs_state_of
    from tempo_assets.definitions import defs
    from tempo_assets.graph_state import DefinedGraph, build_catalog
    from tempo_assets.resources import default_archive_root, open_artefact_store

    gate = None
    if args.format in ("md", "html"):
        from tempo_assets.cli.gate_cmd import report_gate

        gate = report_gate(args)
        if gate.refuse:
            return GATE_REFUSED_EXIT_CODE
    store = open_artefact_store()
    store.location.check()  # an object store that is down fails here, naming its endpoint
    instance = _instance()
    with defs_state_of(instance):
        defined = DefinedGraph.of(defs.get_repository_def())
    built = build_catalog(store, default_archive_root(), defined, instance)
    if args.compare:
        return _report_compare(args, built["results"], gate if args.format == "md" else None)
    if args.window:
        return _report_window(args, store, built, gate)
    if args.format == "html":
        return _report_archive_html(args, store, built["results"], gate)
    return _report_archive_text(args, store, built, gate if args.format == "md" else None)


def _report_compare(args, results, md_gate) -> int:
    """The difference of two windows' results (``--compare A B``)."""
    from tempo_assets.core.base.errors import TempoInputError
    from tempo_assets.core.evaluation.benchmark import compare_windows

    table = compare_windows(results, *args.compare) if len(results) else None
    if table is None:
        raise TempoInputError("no window has a benchmark yet: run `tempo materialize --all`")
    text = (table.to_csv(sep="\t", index=False, lineterminator="\n", float_format="%.6g") if args.format == "tsv"
            else f"## {args.compare[1]} minus {args.compare[0]}\n\n" + table.round(4).to_markdown(index=False) + "\n")
    _emit(text, args.out, md_gate)
    return 0


def _report_window(args, store, built, gate) -> int:
    """One window's report (``--window``): refused without a benchmark, warned when not ready."""
    from tempo_assets.core.base.errors import TempoInputError

    catalog = built["catalog"]
    if args.window not in set(catalog["window"]):
        raise TempoInputError(f"unknown window {args.window!r} (see `tempo windows`)")
    row = catalog[catalog["window"] == args.window].iloc[0]
    if built["metas"].get(args.window) is None:
        raise TempoInputError(f"window {args.window} has no benchmark yet (status {row['status']}): "
                              f"{way_forward(store, args.window)}")
    if row["status"] != "ready":
        print(f"tempo: warning: window {args.window} is {row['status']}: {row['reasons']}", file=sys.stderr)
    value = store.open("benchmark", args.window).value
    if args.format == "html":
        return _report_window_html(args, store, value, row, gate)
    md_gate = gate if args.format == "md" else None
    _emit(_window_text(value, args.window, bool(row["derived"]), args.format, args.by == "identity"), args.out, md_gate)
    return 0


def _report_window_html(args, store, value, row, gate) -> int:
    """One window's HTML page, the gate's verdict at its head."""
    import pandas as pd

    from tempo_assets.core.evaluation.benchmark import results_frame
    from tempo_assets.core.evaluation.report import render_window_report, write_report
    from tempo_assets.core.evaluation.results import strata_frame
    from tempo_assets.core.evaluation.window_markdown import curve_groups
    from tempo_assets.core.pipeline.workflow import OLDER

    derived = bool(row["derived"])
    out = Path(args.out or store.folder("benchmark", args.window) / "report.html")
    curves = value["curves"]
    newest = curves[~curves["method"].str.endswith(OLDER)] if len(curves) else curves
    strata = value.get("strata", pd.DataFrame())
    write_report(out, gate.html(render_window_report(
        args.window, results_frame(value["summary"], args.window, derived), curve_groups(newest),
        window_provenance(value, args.window, row["status"]),
        strata=strata_frame(strata, args.window, derived) if len(strata) else None)))
    print(f"wrote {out}")
    return 0


def _report_archive_html(args, store, results, gate) -> int:
    """The archive's HTML page: the benchmark_catalog asset's, materialised so the UI has it too."""
    import dagster as dg

    from tempo_assets.cli.graph_cmd import BUILT, SKIPPED, run_steps
    from tempo_assets.core.base.errors import TempoInputError
    from tempo_assets.core.evaluation.report import write_report

    if results.empty:
        raise TempoInputError("no window has a benchmark yet: run `tempo materialize --all`")
    report = run_steps([("catalog_job", None)], _instance() or dg.DagsterInstance.ephemeral(), echo=lambda *_: None)
    if report[-1][2] not in (BUILT, SKIPPED):  # skipped: the stored catalog is what it would write
        raise TempoInputError("materialising benchmark_catalog failed (see the run in the Dagster UI)")
    written = store.folder("benchmark_catalog", None) / "report.html"
    # the gate's verdict heads the published page (the asset's own page carries none until then)
    out = Path(args.out or written)
    write_report(out, gate.html(written.read_text(encoding="utf-8")))
    print(f"wrote {out}")
    return 0


def _report_archive_text(args, store, built, md_gate) -> int:
    """Every window of the archive as TSV or Markdown: windows, results, strata, decay, registered methods."""
    from tempo_assets.core.evaluation.results import (
        interval_table_markdown, markdown_legend, results_to_markdown, results_to_tsv, strata_to_markdown,
    )
    from tempo_assets.core.evaluation.window_markdown import method_status_markdown

    catalog, results = built["catalog"], built["results"]
    strata = _all_strata(store, catalog) if args.by == "identity" else None
    if args.format == "tsv":
        text = results_to_tsv(results if strata is None or not len(strata) else with_strata(results, strata)) \
            if len(results) else ""
        _emit(text, args.out)
        return 0
    parts = ["# Tempo benchmark report: every window of the archive\n", "## Windows\n",
             catalog.to_markdown(index=False), "\n"]
    if len(results):
        parts += ["## Results\n", results_to_markdown(results, legend=False)]
    if strata is not None and len(strata):
        parts += ["## F at VALID tau by identity stratum\n", strata_to_markdown(strata)]
    if len(built["decay"]):
        n_boot = max((int(m.get("bootstrap_samples", 0) or 0) for m in built["metas"].values() if m), default=0)
        parts += ["\n## Decay (F at VALID tau, trained at t0 vs t-1, same TEST)\n",
                  interval_table_markdown(built["decay"], n_boot or None), "\n"]
    if len(built["methods"]):
        parts += ["\n## Registered methods (status per window)\n", method_status_markdown(built["methods"]), "\n"]
    parts += ["\n## Legend\n", markdown_legend(bool(len(results)) and bool(results["derived"].any()))]
    _emit("\n".join(parts), args.out, md_gate)
    return 0


def register(subparsers) -> None:
    parser = subparsers.add_parser("report", help="benchmark tables (tsv/md to stdout) or an HTML report")
    parser.add_argument("--window", metavar="KEY", help="one window (default: the whole archive)")
    parser.add_argument("--compare", nargs=2, metavar=("KEY_A", "KEY_B"),
                        help="metrics of two windows side by side (B - A) per mode, aspect and method (tsv/md)")
    parser.add_argument("--format", choices=FORMATS, default="md")
    parser.add_argument("--out", metavar="PATH", help="write here instead of stdout / the default HTML path "
                        "(the path written is printed)")
    parser.add_argument("--by", choices=("identity",), default=None,
                        help="identity: add rows per identity stratum (identity_stratum <30, 30-60, 60-90, >=90) "
                             "with n_targets and F at each method's VALID threshold")
    from tempo_assets.cli.gate_cmd import add_report_gate_arguments

    add_report_gate_arguments(parser)
    parser.set_defaults(func=_report)
