"""Deterministic kills for recovery tests and ``scripts/chaos.sh``: ``TEMPO_FAULT_AT=<asset>:<point>``.

When the variable names the point a process reaches, the process sends itself ``SIGKILL`` there,
as the OOM killer or a ``kill -9`` would: nothing runs after it (no ``finally``, no Dagster event).
Points: ``claimed`` (a TEST claim taken, nothing of TEST read yet), ``written`` (the artefact
stored, its checks not run yet), ``started`` (the asset's body began). Unset, it costs one lookup.
"""
from __future__ import annotations

import os
import signal

FAULT_VARIABLE = "TEMPO_FAULT_AT"
POINTS = ("claimed", "written", "started")


def fault_point(asset: str, point: str) -> None:
    """Kill this process with SIGKILL when ``$TEMPO_FAULT_AT`` is ``<asset>:<point>``."""
    if os.environ.get(FAULT_VARIABLE) == f"{asset}:{point}":
        os.kill(os.getpid(), signal.SIGKILL)
