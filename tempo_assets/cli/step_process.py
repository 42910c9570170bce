"""One step's Dagster run, executed in the launching process or in a child process of its own.

``tempo materialize`` runs a step (``release_job`` on a release, ``window_job`` on a window, ...)
with ``execute_in_process`` on the job of :func:`definitions_for`. With ``--jobs N > 1``
(``concurrent_steps.py``) each run executes in a child forked from a forkserver that preloaded
this module (dagster, pandas and the code location already imported), so the child pays no
import time. The child

- dies with its launcher (:func:`die_with_launcher`): after a ``kill -9`` of ``tempo materialize``
  the run a child leaves ``STARTED`` names the child in its tags, and the next ``tempo`` command
  marks it failed (``runs.fail_dead_runs``);
- names itself in the run's tags (``runs.launch_tags``: the process that executes the run);
- records its CPU seconds and peak RSS on the run (:data:`CPU_TAG`, :data:`PEAK_RSS_TAG`), which
  the memory estimate for concurrent window runs and ``benchmarks/bench_graph.py`` read back, and
  the CPU seconds of the processes the run started and waited for (:data:`CHILDREN_CPU_TAG`: DIAMOND,
  a fenced method's sandbox), which its own CPU leaves out.

Resources given in code (a test's ``GridResource(bootstrap_samples=20)``) travel to the child as
their class and field values (:func:`encode_resources`): Dagster's resources do not pickle.
"""
from __future__ import annotations

import contextlib
import ctypes
import importlib
import os
import resource
import signal
import sys
import threading
import time
from dataclasses import dataclass
from multiprocessing import forkserver
from multiprocessing.connection import Connection

import dagster as dg
from dagster._core.events import RunFailureReason
from dagster._core.storage.defs_state.base import set_defs_state_storage

from tempo_assets.assets.methods import METHOD_JOBS
from tempo_assets.cli.errors import ERROR_EXIT, INTERRUPTED_EXIT, debugging, error_line
from tempo_assets.core.base.liveness import SELF_ORCHESTRATED, ProcessIdentity, is_alive
from tempo_assets.definitions import ASSET_CHECKS, ASSETS
from tempo_assets.runs import launch_tags
from tempo_assets.sensors import JOBS

CPU_TAG, PEAK_RSS_TAG = "tempo/cpu_s", "tempo/peak_rss_mb"
CHILDREN_CPU_TAG = "tempo/children_cpu_s"
PR_SET_PDEATHSIG = 1  # linux/prctl.h
LAUNCHER_POLL_S = 1.0


def definitions_for(resources: dict) -> dg.Definitions:
    """Every asset, check and job of Tempo bound to ``resources`` (without sensors or schedules)."""
    return dg.Definitions(assets=ASSETS, asset_checks=ASSET_CHECKS, jobs=JOBS + METHOD_JOBS, resources=resources)


@dataclass(frozen=True)
class RunOrder:
    """What one step's run executes: ``job`` on partition ``key``, building ``selection``."""

    job: str
    key: str | None
    selection: tuple[str, ...]
    run_id: str
    run_config: dict


@dataclass(frozen=True)
class EndedRun:
    """A step's run once it ended: its id, whether it succeeded, and its wall seconds."""

    run_id: str
    success: bool
    seconds: float


@dataclass(frozen=True)
class Usage:
    """CPU seconds (user + system, every thread) and peak RSS of this process so far, and the CPU seconds
    of its children that ended and were waited for (a child's own waited children included)."""

    cpu_s: float
    peak_rss_mb: float
    children_cpu_s: float

    @classmethod
    def now(cls) -> "Usage":
        own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        return cls(own.ru_utime + own.ru_stime, own.ru_maxrss / 1024.0,  # Linux: KiB
                   children.ru_utime + children.ru_stime)


def defs_state_of(instance):
    """A context in which definitions load against ``instance``'s defs-state storage, as ``with instance:``
    would set it, not whatever storage an earlier instance of this process left in Dagster's context
    variable (one whose instance is gone fails every load: "Attempted to resolve undefined DagsterInstance
    weakref")."""
    return set_defs_state_storage(getattr(instance, "defs_state_storage", None))


def execute_order(defs: dg.Definitions, instance, order: RunOrder):
    """Run ``order`` in this process, tagged with this process's identity; its CPU and peak RSS
    recorded on the run. Returns Dagster's ``ExecuteInProcessResult``; raises ``KeyboardInterrupt``
    when the run ended because this process got SIGINT or SIGTERM."""
    before = Usage.now()
    with defs_state_of(instance):
        result = defs.resolve_job_def(order.job).execute_in_process(
            run_config=order.run_config, instance=instance, partition_key=order.key, raise_on_error=False,
            run_id=order.run_id, asset_selection=[dg.AssetKey(n) for n in order.selection], tags=launch_tags())
    after = Usage.now()
    instance.add_run_tags(order.run_id, {CPU_TAG: f"{after.cpu_s - before.cpu_s:.2f}",
                                         PEAK_RSS_TAG: f"{after.peak_rss_mb:.0f}",
                                         CHILDREN_CPU_TAG: f"{after.children_cpu_s - before.children_cpu_s:.2f}"})
    if was_interrupted(result):  # Ctrl-C or SIGTERM: whoever asked for the run stops too, starting nothing more
        raise KeyboardInterrupt(f"run {order.run_id} ({order.job} {order.key or ''}) was interrupted and is failed; "
                                "`tempo materialize` again builds what is missing")
    return result


def was_interrupted(result) -> bool:
    """Whether a run executed in this process (``execute_order``'s result) ended because the process
    got SIGINT or SIGTERM: Dagster turns either into an interruption of the run, which it ends as
    failed with the reason "unexpected termination"."""
    if result.success:
        return False
    return any(getattr(event.event_specific_data, "failure_reason", None) == RunFailureReason.UNEXPECTED_TERMINATION
               for event in result.all_events if event.event_type == dg.DagsterEventType.RUN_FAILURE)


def encode_resources(resources: dict) -> dict:
    """``resources`` as plain data a child process rebuilds them from (:func:`decode_resources`)."""
    def encode(value):
        fields = getattr(type(value), "model_fields", None)
        if fields is None:
            return ("value", value)
        return ("resource", type(value).__module__, type(value).__qualname__,
                {name: encode(getattr(value, name)) for name in fields})

    return {name: encode(value) for name, value in resources.items()}


def decode_resources(encoded: dict) -> dict:
    def decode(item):
        if item[0] == "value":
            return item[1]
        _, module, name, fields = item
        return getattr(importlib.import_module(module), name)(**{k: decode(v) for k, v in fields.items()})

    return {name: decode(item) for name, item in encoded.items()}


def die_with_launcher(launcher: ProcessIdentity) -> None:
    """End this process (SIGKILL) when ``launcher``, the ``tempo materialize`` that asked for it, is gone.

    Three ways, so that none depends on the others: this child lets go of the forkserver's
    "launcher alive" pipe it inherited (the forkserver then exits when the launcher dies), the
    kernel kills it when its parent, the forkserver, dies (``PR_SET_PDEATHSIG``, Linux), and a
    daemon thread looks for the launcher every second.
    """
    server = forkserver._forkserver
    if getattr(server, "_forkserver_alive_fd", None) is not None:
        os.close(server._forkserver_alive_fd)
        server._forkserver_alive_fd = None
    parent = os.getppid()
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:  # the parent died before the call: nothing would ever kill this process
        os.kill(os.getpid(), signal.SIGKILL)

    def watch() -> None:
        while is_alive(launcher) is not False:
            time.sleep(LAUNCHER_POLL_S)
        os.kill(os.getpid(), signal.SIGKILL)

    threading.Thread(target=watch, name="tempo-launcher-watch", daemon=True).start()


def child_main(launcher: ProcessIdentity, instance_ref, encoded_resources: dict, order: RunOrder,
               errors: Connection) -> None:
    """A child process's whole life: run ``order``; exit 0 when the run succeeded, 1 when not, and
    ``ERROR_EXIT`` after sending ``errors`` the one line of an error that stopped it (as ``tempo``
    would print it: the in-process path's exception ends the command the same way)."""
    try:  # a stop may land from the first line on (the forkserver's children take SIGINT as Ctrl-C)
        die_with_launcher(launcher)
        os.environ[SELF_ORCHESTRATED] = str(os.getpid())  # it runs its run in process: no orchestrator above it
        with dg.DagsterInstance.from_ref(instance_ref) as instance:
            result = execute_order(definitions_for(decode_resources(encoded_resources)), instance, order)
    except KeyboardInterrupt:  # Ctrl-C, or the launcher stopping its children: it says what happened
        sys.exit(INTERRUPTED_EXIT)
    except Exception as exc:  # noqa: BLE001 - every error is reported the same way (cli/errors.py)
        if debugging():
            raise
        errors.send(error_line(exc))
        sys.exit(ERROR_EXIT)
    sys.stdout.flush()
    sys.exit(0 if result.success else 1)
