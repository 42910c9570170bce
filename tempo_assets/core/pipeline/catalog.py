"""The longitudinal view behind the ``benchmark_catalog`` asset and ``tempo report``: every window of the
archive with its benchmark's state, the stored benchmarks' results and decay over all windows, and each
registered method's status per window.

The states come in from the caller (``graph_state.GraphState``, the one rule for stale, failed and
superseded, as ``tempo status`` states them); nothing here knows Dagster.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable, Mapping

import pandas as pd

from tempo_assets.core.base.windows import parse_window_key
from tempo_assets.core.evaluation.benchmark import catalog_frame, results_frame
from tempo_assets.core.evaluation.plots import plot_longitudinal
from tempo_assets.core.evaluation.report import render_archive_report, write_report
from tempo_assets.core.evaluation.window_markdown import inline_png, method_status_markdown
from tempo_assets.core.inputs.releases import Archive, archive_release_dates
from tempo_assets.core.methods.eligibility import method_catalog
from tempo_assets.core.methods.registry import load_registry
from tempo_assets.core.pipeline.workflow import OLDER
from tempo_assets.core.storage.artefact_types import BenchmarkCatalog
from tempo_assets.core.storage.artefacts import ArtefactStore, refuse_flagged
from tempo_assets.core.storage.staleness import window_releases


def method_records(store: ArtefactStore, cutoffs: Iterable[str], method_keys: Iterable[str]) -> dict:
    """``{(cutoff, key): Artefact}`` of the stored ``method_predictions`` among ``cutoffs x method_keys``.

    The ``records`` argument of ``core.methods.eligibility.method_eligibility`` and
    ``method_prediction_frames``; a (cutoff, key) never materialised is absent (``pending``).
    """
    method_keys = list(method_keys)
    return {(c, k): refuse_flagged(store.open("method_predictions", f"{c}|{k}"))
            for c in cutoffs for k in method_keys if store.exists("method_predictions", f"{c}|{k}")}


def registered_catalog(store: ArtefactStore, archive_root: str, windows: Iterable[str]) -> pd.DataFrame:
    """Each registered method's status on every window: eligible, excluded (trained after t0),
    failed (with its reason), pending, and whether its numbers are marked (training date undeclared)."""
    specs = load_registry(archive_root).methods
    ids, as_of = archive_release_dates(archive_root)
    records = method_records(store, ids, [spec.key for spec in specs])
    return method_catalog(specs, records, [parse_window_key(w) for w in windows], as_of)


def stored_benchmarks(store: ArtefactStore, windows: Iterable[str], derived_ids: set[str]):
    """``(metas, results, decays)`` of the windows' stored benchmarks (``None`` meta: none stored)."""
    metas, results, decays = {}, [], []
    for window in windows:
        if not store.exists("benchmark", window):
            metas[window] = None
            continue
        artefact = store.open("benchmark", window)
        metas[window] = artefact.meta
        value = artefact.value
        derived = bool(set(parse_window_key(window).releases) & derived_ids)
        results.append(results_frame(value["summary"], window, derived))
        if len(value.get("decay", [])):
            decays.append(value["decay"].assign(window=window))
    return metas, results, decays


def collect_catalog(store: ArtefactStore, archive: Archive, windows: list[str],
                    states: Mapping[str, tuple[str, str]], superseded: Mapping[str, str]) -> dict[str, Any]:
    """Catalog of every window of the archive, results of the stored benchmarks, and their decay.

    ``states``: each window's benchmark ``(state, reason)`` as ``tempo status`` states it; ``superseded``:
    window -> reason for windows the archive no longer has (a release inserted inside them), history
    whose results stay out of the tables. Returns ``{"catalog", "metas", "methods", "results",
    "decay"}``: the catalog frame (status per window), each window's benchmark sidecar, the registered
    methods' status per window, the tidy results table over every window with a stored benchmark
    (stale ones included and flagged by the catalog), and the decay rows with a ``window`` column.
    """
    derived_ids = {m.id for m in archive.releases() if m.derived}
    metas, results, decays = stored_benchmarks(store, windows, derived_ids)
    states = {**states, **{w: ("superseded", reason) for w, reason in superseded.items()}}
    history = list(superseded)
    derived = {w: bool(set(window_releases(w)) & derived_ids) for w in windows + history}
    catalog = catalog_frame(windows + history, states, derived)
    for window in history:
        metas[window] = store.read_meta("benchmark", window) if store.exists("benchmark", window) else None
    return {"catalog": catalog, "metas": metas, "methods": registered_catalog(store, str(archive.root), windows),
            "results": pd.concat(results, ignore_index=True) if results else pd.DataFrame(),
            "decay": pd.concat(decays, ignore_index=True) if decays else pd.DataFrame()}


def catalog_value(built: Mapping[str, Any]) -> BenchmarkCatalog:
    """The ``benchmark_catalog`` artefact's value of a collected catalog (:func:`collect_catalog`)."""
    return BenchmarkCatalog(catalog=built["catalog"], results=built["results"], decay=built["decay"],
                            methods=built["methods"])


def catalog_pages(built: Mapping[str, Any], folder: Path) -> dict[str, str]:
    """What the catalog shows: ``table`` and ``methods`` (Markdown), and with any stored results the
    ``longitudinal`` plot (Markdown, its PNG in ``folder``) and the archive's HTML ``report`` (its path)."""
    catalog, results, methods = built["catalog"], built["results"], built["methods"]
    pages = {"table": catalog.to_markdown(index=False)}
    if len(methods):
        pages["methods"] = method_status_markdown(methods)
    if not len(results):
        return pages
    main = results[~results["method"].str.endswith(OLDER)]
    longitudinal = plot_longitudinal(main, "f_at_valid_tau", folder / "longitudinal_f_at_valid_tau.png")
    pages["longitudinal"] = inline_png(longitudinal, "F at the VALID threshold by window")
    provenance = {"catalog": catalog.to_dict("records")}
    if len(methods):  # each registered method's status per window
        provenance["registered methods"] = methods[["window", "method", "status", "reason", "valid_tau_note"]].to_dict(
            "records")
    statuses = {row.window: (row.status, row.reasons) for row in catalog.itertuples()}
    write_report(folder / "report.html", render_archive_report(main, provenance, statuses,
                                                                drawn={"f_at_valid_tau": longitudinal}))
    pages["report"] = str(folder / "report.html")
    return pages


def latest_catalog_release(metas: Mapping[str, Mapping[str, Any] | None], release_ids: list[str]) -> str:
    """The latest t1 of the stored benchmarks' windows (a superseded window's may no longer be a release;
    the archive's latest release when none is stored)."""
    ends = [parse_window_key(m["partition"]).t1 for m in metas.values() if m]
    return max((t1 for t1 in ends if t1 in release_ids), default=release_ids[-1], key=release_ids.index)
