"""Which registered methods a window may score, and their prediction frames (the training-date rule).

A method declared trained until ``D`` (for precomputed predictions: produced at ``D``) saw every
label dated ``<= D``. On window ``(t-1, t0, t1)`` it is scored on TEST ``(t0, t1]`` only when
``t0 >= D``; for an earlier window it saw that window's TEST labels and is ``excluded: trained
after t0``. A method without a declared date is scored but every number it gets is marked
``training date undeclared``. A method whose run at ``t0`` failed is listed as ``failed: <reason>``
(never silently absent). Its VALID threshold needs its predictions at ``t-1`` on VALID
``(t-1, t0]``, usable only when the run at ``t-1`` succeeded and ``t-1 >= D``.

``records`` map ``(cutoff, method key)`` to what ``method_predictions[cutoff|key]`` stored: the
sidecar (``meta``, with ``status`` and ``reason``) and the value (``value["predictions"]``);
``core``-side code takes any object with ``.meta`` / ``.value`` (an ``Artefact``) or a plain
dict holding the sidecar.
"""
from __future__ import annotations

from datetime import date
from typing import Any, Iterable, Mapping

import pandas as pd

from tempo_assets.core.base.dates import parse_date
from tempo_assets.core.base.windows import cutoff_method_key

STATUS_OK = "ok"
STATUS_FAILED = "failed"
UNDECLARED = "training date undeclared"
EXCLUDED = "excluded: trained after t0"
ELIGIBILITY_COLUMNS = ["method", "name", "version", "kind", "window", "t0", "t_minus_1", "trained_until",
                       "eligible", "status", "reason", "valid_tau_available", "valid_tau_note"]

NO_T_MINUS_1 = "no predictions at t-1: headline not available"
# a registered method's rows in the benchmark are named ``method:<registration key>`` (``NAME`` or
# ``NAME@VERSION``), beside the baselines' plain names; trained at t-1 they carry the OLDER suffix too
METHOD_PREFIX = "method:"

__all__ = ["ELIGIBILITY_COLUMNS", "EXCLUDED", "METHOD_PREFIX", "NO_T_MINUS_1", "UNDECLARED", "benchmark_methods",
           "collect_records", "method_catalog", "method_eligibility", "method_prediction_frames", "trained_after",
           "window_method_keys"]


def _meta(record: Any) -> Mapping[str, Any]:
    return getattr(record, "meta", record)


def _run_state(records: Mapping[tuple[str, str], Any], cutoff: str, key: str) -> tuple[str, str]:
    """``(state, reason)`` of the method's run at ``cutoff``: ok, failed or pending."""
    record = records.get((cutoff, key))
    if record is None:
        return "pending", f"pending: no method_predictions[{cutoff}|{key}] yet"
    meta = _meta(record)
    if meta.get("status") == STATUS_OK:
        return STATUS_OK, ""
    return STATUS_FAILED, f"failed: {meta.get('reason') or 'no reason recorded'}"


def trained_after(spec: Any, cutoff_date: date) -> bool:
    """Whether ``spec`` declares a training date after ``cutoff_date`` (it saw labels dated after it)."""
    bound = spec.training_bound
    return bound is not None and cutoff_date < bound


def window_method_keys(methods: Iterable[Any], window: Any, release_dates: Mapping[str, date | str]) -> list[str]:
    """Keys of the registered methods ``window``'s benchmark scores by the training-date rule alone
    (trained until its t0 at the latest, or undeclared): what a benchmark built now must hold."""
    t0_date = parse_date(release_dates[window.t0])
    return [spec.key for spec in methods if not trained_after(spec, t0_date)]


def method_eligibility(methods: Iterable[Any], records: Mapping[tuple[str, str], Any], window: Any,
                       release_dates: Mapping[str, date | str]) -> pd.DataFrame:
    """One row per registered method: may ``window`` score it, and why not.

    Parameters
    ----------
    methods : ``core.methods.registry.MethodSpec`` (``key``, ``name``, ``version``, ``kind``,
        ``training_bound``), e.g. ``load_registry(archive).methods``
    records : ``{(cutoff, method_key): stored record}`` of ``method_predictions``
    window : anything with ``key``, ``t0`` and ``t_minus_1`` release ids (``partitions.Window``)
    release_dates : release id -> its as-of date (the cutoff date the training date is compared to)

    Returns
    -------
    DataFrame with :data:`ELIGIBILITY_COLUMNS`. ``status`` is ``eligible``, ``excluded``,
    ``failed`` or ``pending``; ``reason`` is ``excluded: trained after t0``, ``failed: <why>``,
    ``pending: ...``, ``training date undeclared`` (eligible, marked) or empty (eligible).
    ``valid_tau_available`` says whether the run at ``t-1`` can fix the method's VALID threshold.
    """
    t0_date, tm1_date = parse_date(release_dates[window.t0]), parse_date(release_dates[window.t_minus_1])
    rows = []
    for spec in methods:
        bound = spec.training_bound
        state, why = _run_state(records, window.t0, spec.key)
        if trained_after(spec, t0_date):
            status, reason = "excluded", EXCLUDED
        elif state != STATUS_OK:
            status, reason = state, why
        else:
            status, reason = "eligible", "" if bound is not None else UNDECLARED
        valid_state, valid_why = _run_state(records, window.t_minus_1, spec.key)
        if trained_after(spec, tm1_date):
            valid_ok, valid_note = False, "trained after t-1: no VALID threshold"
        elif valid_state != STATUS_OK:
            valid_ok, valid_note = False, f"no VALID threshold: {valid_why}"
        else:
            valid_ok, valid_note = True, ""
        rows.append({"method": spec.key, "name": spec.name, "version": spec.version or "", "kind": spec.kind,
                     "window": window.key, "t0": window.t0, "t_minus_1": window.t_minus_1,
                     "trained_until": bound.isoformat() if bound is not None else "",
                     "eligible": status == "eligible", "status": status, "reason": reason,
                     "valid_tau_available": status == "eligible" and valid_ok,
                     "valid_tau_note": valid_note if status == "eligible" else ""})
    return pd.DataFrame(rows, columns=ELIGIBILITY_COLUMNS)


def method_prediction_frames(eligibility: pd.DataFrame, records: Mapping[tuple[str, str], Any]
                             ) -> dict[str, dict[str, pd.DataFrame | None]]:
    """``{method key: {"t0": frame, "t-1": frame or None}}`` for the eligible methods.

    Frames have the baselines' columns ``protein, term, aspect, score`` (validated at storage:
    targets of the bundle, primary GO ids with their aspect, scores in (0, 1], one row per pair).
    ``"t-1"`` holds the predictions at the window's ``t-1`` (for the method's VALID threshold on
    ``(t-1, t0]``) when ``valid_tau_available``, else None.
    """
    out: dict[str, dict[str, pd.DataFrame | None]] = {}
    for row in eligibility[eligibility["eligible"]].itertuples(index=False):
        frames: dict[str, pd.DataFrame | None] = {
            "t0": records[(row.t0, row.method)].value["predictions"], "t-1": None}
        if row.valid_tau_available:
            frames["t-1"] = records[(row.t_minus_1, row.method)].value["predictions"]
        out[row.method] = frames
    return out


def method_catalog(methods: Iterable[Any], records: Mapping[tuple[str, str], Any], windows: Iterable[Any],
                   release_dates: Mapping[str, date | str]) -> pd.DataFrame:
    """Each method's status on every window (the catalog's view): :func:`method_eligibility` stacked."""
    methods = list(methods)
    frames = [method_eligibility(methods, records, w, release_dates) for w in windows]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=ELIGIBILITY_COLUMNS)


def collect_records(by_cutoff: Mapping[str, Any], keys: Iterable[str]) -> dict[tuple[str, str], Any]:
    """``{(cutoff, key): artefact}`` of the stored ``method_predictions`` a window may read.

    ``by_cutoff`` maps each cutoff to the role-gated set it is read through (anything with
    ``exists(partition)`` and ``get(partition)``, e.g. ``core.storage.artefacts.ArtefactSet``): the
    window's ``t0`` through its refit set, its ``t-1`` through the TRAIN-bounded one. A partition
    never materialised is absent (``pending``).
    """

    records = {}
    for cutoff, artefacts in by_cutoff.items():
        for key in keys:
            partition = cutoff_method_key(cutoff, key)
            if artefacts.exists(partition):
                records[(cutoff, key)] = artefacts.get(partition)
    return records


def benchmark_methods(eligibility: pd.DataFrame, records: Mapping[tuple[str, str], Any]
                      ) -> tuple[dict[str, pd.DataFrame], dict[str, pd.DataFrame], dict[str, str]]:
    """``(at_t0, at_t_minus_1, notes)`` keyed by benchmark name ``method:<key>`` for the eligible methods.

    ``at_t0`` goes beside the baselines trained at t0, ``at_t_minus_1`` (only the methods with a
    usable run at t-1) beside the baselines trained at t-1; ``notes`` says, per name, what marks its
    numbers: ``training date undeclared`` and/or ``no predictions at t-1: headline not available``.
    """
    frames = method_prediction_frames(eligibility, records)
    reasons = dict(zip(eligibility["method"], eligibility["reason"]))
    at_t0, older, notes = {}, {}, {}
    for key, pair in frames.items():
        name = f"{METHOD_PREFIX}{key}"
        at_t0[name] = pair["t0"]
        marks = [UNDECLARED] if reasons.get(key) == UNDECLARED else []
        if pair["t-1"] is None:
            marks.append(NO_T_MINUS_1)
        else:
            older[name] = pair["t-1"]
        notes[name] = "; ".join(marks)
    return at_t0, older, notes
