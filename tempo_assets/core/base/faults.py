"""Deterministic kills for recovery tests and ``scripts/chaos.sh``: ``TEMPO_FAULT_AT=<asset>:<point>``.

When the variable names the point a process reaches, the process sends itself ``SIGKILL`` there,
as the OOM killer or a ``kill -9`` would: nothing runs after it (no ``finally``, no Dagster event).
A step that Dagster's multiprocess executor started (the ``dagster`` CLI, the UI) kills its run's
orchestrating process (its ``multiprocessing`` parent, ``liveness.orchestrating_parent``) first, as
``kill -9`` of the run's process group would: otherwise the orchestrator would see its step die and
end the run itself.
Points: ``claimed`` (a TEST claim taken, nothing of TEST read yet), ``written`` (the artefact
stored, its checks not run yet), ``started`` (the asset's body began). Unset, it costs one lookup.
"""
from __future__ import annotations

import os
import signal

from tempo_assets.core.base.liveness import orchestrating_parent

FAULT_VARIABLE = "TEMPO_FAULT_AT"
POINTS = ("claimed", "written", "started")


def fault_point(asset: str, point: str) -> None:
    """Kill this process with SIGKILL when ``$TEMPO_FAULT_AT`` is ``<asset>:<point>``."""
    if os.environ.get(FAULT_VARIABLE) == f"{asset}:{point}":
        orchestrator = orchestrating_parent()
        if orchestrator is not None:
            os.kill(orchestrator.pid, signal.SIGKILL)
        os.kill(os.getpid(), signal.SIGKILL)
