"""Audit a declared evaluation split design (``tempo-evaluation-design/v1``).

A design file names an evaluation table, the column holding each row's partition, the identity
of an entity and the rules the split must obey. :func:`audit_design` checks the supplied records
against those rules and returns a report whose per-check status is ``pass``, ``fail``,
``investigate`` or ``not_testable``. A negative audit is scoped: it covers the supplied records
and the declared rules, nothing else (see ``docs/design_audit.md``).

The design and its parsing live in ``design_spec.py``, the checks in ``design_checks.py``; this
module takes files in and writes the report out, and exports Tempo's own windows as a design.
"""
from __future__ import annotations

import json
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from tempo_assets.core.base.io import atomic_write, sha256_file
from tempo_assets.core.base.windows import split_window_key
from tempo_assets.core.audits.design_spec import DesignError, SCHEMA_VERSION, load_design
from tempo_assets.core.audits.design_checks import _is_missing, audit_design, read_reference, read_table


# --------------------------------------------------------------------------------------------
# files in, report out


def audit_design_files(
    design_path: str | Path,
    reference_path: str | Path | None = None,
    reference_complete: bool = False,
    max_examples: int = 5,
) -> dict:
    """Load the design, its table and the optional reference; audit; return the report."""
    if reference_complete and reference_path is None:
        raise DesignError("--reference-complete declares a reference complete, but no reference was given")
    design = load_design(design_path)
    table_path = design.table_path
    table = read_table(table_path)
    reference = read_reference(reference_path, design) if reference_path is not None else None
    inputs = [
        {"role": "design", "path": str(design_path), "sha256": sha256_file(design_path)},
        {"role": "table", "path": str(table_path), "sha256": sha256_file(table_path)},
    ]
    if reference_path is not None:
        inputs.append({"role": "reference", "path": str(reference_path),
                       "sha256": sha256_file(reference_path)})
    return audit_design(design, table, reference, reference_complete, max_examples,
                        inputs=inputs, reference_path=reference_path)


def write_audit_report(report: dict, path: str | Path) -> None:
    """Write the report as indented, key-sorted JSON, atomically."""
    with atomic_write(path) as handle:
        json.dump(report, handle, indent=2, sort_keys=True)
        handle.write("\n")


def format_audit_summary(report: dict) -> str:
    """A plain-text summary holding statuses and counts only (never an identifier)."""
    lines = [f"design audit: {report['status']} (rules sha256 {report['rules_sha256'][:12]})"]
    table = report["table"]
    parts = ", ".join(f"{k} {v}" for k, v in table["partition_rows"].items())
    lines.append(f"  table rows {table['rows']} ({parts})")
    for check in report["checks"]:
        counts = _flatten_counts(check["counts"]) or "all counts 0"
        lines.append(f"  {check['name']:<28} {check['status']:<13} {counts}")
    if report["not_requested"]:
        lines.append("  not requested: " + ", ".join(report["not_requested"]))
    return "\n".join(lines)


def _flatten_counts(counts: dict, prefix: str = "") -> str:
    items = []
    for key, value in counts.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            items.append(_flatten_counts(value, prefix=f"{name}."))
        elif isinstance(value, (int, float)) and not isinstance(value, bool) and value:
            items.append(f"{name}={value}")
    return " ".join(item for item in items if item)


# --------------------------------------------------------------------------------------------
# Tempo's own windows as a design

WINDOW_ROLES = {"train": "train", "valid": "validation", "test": "test"}


def export_window_design(
    window_key: str,
    rows: pd.DataFrame,
    table_name: str = "window_table.csv",
) -> tuple[pd.DataFrame, dict]:
    """Export one Tempo window as an evaluation table and its ``tempo-evaluation-design/v1``.

    Parameters
    ----------
    window_key : str
        ``t-2__t-1__t0__t1`` (ISO dates joined by ``__``), as the ``windows`` partitions write it.
    rows : DataFrame, shape (n, >=4)
        Columns ``protein``, ``term``, ``aspect``, ``window_role`` (``train`` = the corpus's
        propagated terms at t-1, ``valid`` = scored VALID ground truth, ``test`` = scored TEST
        ground truth, known PK terms already removed); optional ``mode`` (NK/LK/PK) and ``date``
        (the annotation date: ``YYYYMMDD`` int or ISO string).

    Returns
    -------
    (DataFrame, dict)
        The table (one row per (protein, term, window_role), sorted) and the design mapping whose
        ``table`` is ``table_name``. The identity is (protein, term): a protein may be a train
        protein and a PK target, but a scored (protein, term) pair must never be a training label.
        With a ``date`` column, chronology requires train dated on or before t-1, validation in
        (t-1, t0] and test after t0 (cutoffs are the days after t-1 and t0).
    """
    _t_2, t_1, t0, t1 = _window_dates(window_key)
    table = _window_table(rows)
    design: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "description": (f"Tempo window {window_key}: train = corpus at t-1 ({t_1}), validation = "
                        f"growth ({t_1}, {t0}], test = growth ({t0}, {t1}]"),
        "table": table_name,
        "split_column": "window_role",
        "partitions": {"train": ["train"], "validation": ["valid"], "test": ["test"]},
        "forbidden_pairs": [["train", "validation"], ["train", "test"], ["validation", "test"]],
        "entity_columns": ["protein", "term"],
        "group_columns": [],
        "repeated_entities": "fail",
    }
    if "date" in table.columns:
        design["chronology"] = {
            "column": "date",
            "cutoff": (t_1 + timedelta(days=1)).isoformat(),
            "test_cutoff": (t0 + timedelta(days=1)).isoformat(),
            "strictly_before": True,
            "timezone": "UTC",
            "validation_precedes_test": True,
        }
    return table, design


def _window_dates(window_key: str) -> tuple[date, date, date, date]:
    """The window's four release dates t-2 < t-1 < t0 < t1, from its key."""
    parts = split_window_key(window_key)
    if parts is None:
        raise DesignError(f"window key {window_key!r} is not t-2__t-1__t0__t1")
    try:
        t_2, t_1, t0, t1 = (date.fromisoformat(p) for p in parts)
    except ValueError as exc:
        raise DesignError(f"window key {window_key!r}: {exc}") from exc
    if not t_2 < t_1 < t0 < t1:
        raise DesignError(f"window key {window_key!r}: releases are not in increasing order")
    return t_2, t_1, t0, t1


def _window_table(rows: pd.DataFrame) -> pd.DataFrame:
    """The window's rows as an evaluation table: one row per (protein, term, window_role), ISO
    dates, sorted."""
    required = ["protein", "term", "aspect", "window_role"]
    missing = [c for c in required if c not in rows.columns]
    if missing:
        raise DesignError(f"window rows lack column {missing[0]!r} (need {', '.join(required)})")
    bad = ~rows["window_role"].isin(list(WINDOW_ROLES))
    if bad.any():
        value = rows.loc[bad, "window_role"].iloc[0]
        raise DesignError(f"window rows: unknown window_role {value!r} on {int(bad.sum())} row(s) "
                          f"(allowed: {', '.join(WINDOW_ROLES)})")
    keep = required + [c for c in ("mode", "date") if c in rows.columns]
    table = rows.loc[:, keep].copy()
    if "date" in table.columns:
        table["date"] = table["date"].map(_iso_day)
    table = table.drop_duplicates().sort_values(["window_role", "protein", "term"], kind="stable")
    return table.reset_index(drop=True)


def _iso_day(value: Any) -> str | None:
    if _is_missing(value):
        return None
    text = str(value).strip()
    if text.isdigit() and len(text) == 8:
        return f"{text[:4]}-{text[4:6]}-{text[6:]}"
    return text


def write_window_design(out_dir: str | Path, window_key: str, rows: pd.DataFrame) -> dict[str, Path]:
    """Write ``window_table.csv``, ``design.yaml`` and ``reference.csv`` (the train pairs).

    The reference lists the (protein, term) training labels of the t-1 corpus, so
    ``tempo audit-design --design design.yaml --reference reference.csv --reference-complete``
    audits the window with a complete reference.
    """
    out_dir = Path(out_dir)
    table, design = export_window_design(window_key, rows)
    paths = {"table": out_dir / design["table"], "design": out_dir / "design.yaml",
             "reference": out_dir / "reference.csv"}
    with atomic_write(paths["table"]) as handle:
        table.to_csv(handle, index=False)
    with atomic_write(paths["reference"]) as handle:
        table.loc[table["window_role"] == "train", ["protein", "term"]].to_csv(handle, index=False)
    with atomic_write(paths["design"]) as handle:
        yaml.safe_dump(design, handle, sort_keys=False)
    return paths
