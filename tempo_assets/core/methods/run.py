"""One registered method at one cutoff: run it in the fence (or read its precomputed file), validate.

The outcome is always a record: ``ok`` with the validated predictions, or ``failed`` with the
reason (non-zero exit, timeout, output over its size limit, no or empty ``predictions.tsv``, a
mostly invalid file, precomputed predictions produced after the cutoff or missing for it). A
failure is stored like a success, so it never silently disappears from a window.
"""
from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import shutil
import tempfile
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any, Callable

import pandas as pd

from tempo_assets.core.base.errors import TempoInputError
from tempo_assets.core.methods.fence import FenceLimits, FenceSpec, run_fenced
from tempo_assets.core.methods.output import PREDICTION_COLUMNS, PredictionCheck, RejectedPredictions, validate_predictions
from tempo_assets.core.base.io import sha256_file
from tempo_assets.core.base.liveness import owned_temporary_folder

PREDICTIONS_FILE = "predictions.tsv"
# provenance that says where a method's code or file lives: recorded beside the value, not in it
LOCATION_KEYS = ("method_dir", "predictions_file")

__all__ = ["MethodCall", "MethodOutcome", "folder_digest", "run_method"]


@dataclass
class MethodOutcome:
    """``status`` (``ok``/``failed``), ``reason``, the validated predictions and what was run."""

    method: str
    cutoff: str
    status: str
    reason: str
    predictions: pd.DataFrame
    check: PredictionCheck | None = None
    seconds: float = 0.0
    returncode: int | None = None
    provenance: dict[str, Any] = field(default_factory=dict)

    def value(self) -> dict[str, Any]:
        """What ``method_predictions`` stores: the predictions and what identifies the method's code
        or file (sha256), nothing of where it lived or how long it ran (the sidecar records those)."""
        identity = {k: v for k, v in self.provenance.items() if k not in LOCATION_KEYS}
        return {"method": self.method, "cutoff": self.cutoff, "status": self.status, "reason": self.reason,
                "predictions": self.predictions, "rows_read": self.check.rows if self.check else 0,
                "counts": dict(self.check.counts) if self.check else {}, "returncode": self.returncode,
                **identity}


def _empty() -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series([], dtype=float if c == "score" else object) for c in PREDICTION_COLUMNS})


def folder_digest(folder: str | Path) -> str:
    """sha256 over a folder's relative paths and file contents (what a method's code was)."""
    folder = Path(folder)
    digest = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file() and not p.is_symlink()):
        digest.update(str(path.relative_to(folder)).encode("utf-8") + b"\0" + sha256_file(path).encode() + b"\n")
    return digest.hexdigest()


def _validated(method: str, cutoff: str, path: Path, targets, ontology, max_invalid_fraction: float,
               **extra: Any) -> MethodOutcome:
    try:
        check = validate_predictions(path, targets, ontology, max_invalid_fraction=max_invalid_fraction)
    except RejectedPredictions as exc:
        return MethodOutcome(method, cutoff, "failed", str(exc), _empty(), **extra)
    return MethodOutcome(method, cutoff, "ok", "", check.predictions, check=check, **extra)


@dataclass(frozen=True)
class MethodCall:
    """One run of a method: the bundle it reads, the cutoff (partition key and date) and what
    its predictions are checked against (the bundle's targets, the cutoff's ontology)."""

    bundle: str | Path
    cutoff_key: str
    cutoff: date
    targets: Any
    ontology: Any


def run_method(spec: Any, call: MethodCall, limits: FenceLimits | None = None, *,
               on_line: Callable[[str, str], None] | None = None, max_invalid_fraction: float = 0.5,
               scratch: str | Path | None = None) -> MethodOutcome:
    """Run ``spec`` (a ``MethodSpec``) at ``call.cutoff_key`` on ``call.bundle``; never raises for a
    method's fault.

    ``limits`` default to the spec's timeout and memory; ``scratch`` is where the empty output
    folder is made, removed afterwards; by default it is made in an owned temporary folder
    (:func:`~tempo_assets.core.base.liveness.owned_temporary_folder`), which the next run sweeps when this
    process was killed before removing it.
    """
    if spec.kind == "precomputed":
        return _read_precomputed(spec, call, max_invalid_fraction)
    if spec.kind != "command":
        raise TempoInputError(f"method {spec.key!r}: unknown kind {spec.kind!r}")
    limits = limits or FenceLimits()
    limits = dataclasses.replace(limits, timeout_s=spec.timeout_s, memory_bytes=int(spec.memory_gb * (1 << 30)))
    with contextlib.ExitStack() as stack:
        if scratch is None:
            scratch = stack.enter_context(owned_temporary_folder("tempo_method_out_"))
        return _run_command(spec, call, limits, Path(tempfile.mkdtemp(prefix="output_", dir=scratch)),
                            on_line, max_invalid_fraction)


def _run_command(spec: Any, call: MethodCall, limits: FenceLimits, output: Path,
                 on_line: Callable[[str, str], None] | None, max_invalid_fraction: float) -> MethodOutcome:
    """Run a command method's fence with ``output`` its (empty) output folder, removed afterwards."""
    method, cutoff_key = spec.key, call.cutoff_key
    provenance = {"method_dir": spec.dir, "command": spec.command, "method_sha256": folder_digest(spec.dir)}
    try:
        result = run_fenced(FenceSpec(spec.command, spec.dir, call.bundle, output), limits,
                            env={"TEMPO_CUTOFF": call.cutoff.isoformat(), "TEMPO_METHOD": method}, on_line=on_line)
        extra = {"seconds": result.seconds, "returncode": result.returncode, "provenance": provenance}
        if result.failure is not None:
            return MethodOutcome(method, cutoff_key, "failed", result.failure, _empty(), **extra)
        return _validated(method, cutoff_key, output / PREDICTIONS_FILE, call.targets, call.ontology,
                          max_invalid_fraction, **extra)
    finally:
        shutil.rmtree(output, ignore_errors=True)


def _read_precomputed(spec: Any, call: MethodCall, max_invalid_fraction: float) -> MethodOutcome:
    """A precomputed method's file for the cutoff, refused when produced after the cutoff."""
    method, cutoff_key, cutoff = spec.key, call.cutoff_key, call.cutoff
    source = Path(spec.predictions) / f"{cutoff_key}.tsv"
    provenance = {"predictions_file": str(source), "produced_at": spec.produced_at.isoformat()}
    if spec.produced_at > cutoff:
        return MethodOutcome(method, cutoff_key, "failed",
                             f"refused: produced at {spec.produced_at.isoformat()}, after the cutoff "
                             f"{cutoff.isoformat()} (it could have seen TEST labels)", _empty(),
                             provenance=provenance)
    if not source.is_file():
        return MethodOutcome(method, cutoff_key, "failed", f"no precomputed file {source}", _empty(),
                             provenance=provenance)
    provenance["predictions_sha256"] = sha256_file(source)
    return _validated(method, cutoff_key, source, call.targets, call.ontology, max_invalid_fraction,
                      provenance=provenance)
