"""The forkserver ``tempo materialize --jobs N`` forks its step processes from (``concurrent_steps.py``).

This module imports nothing heavy (no dagster, pandas or tempo_assets' code location), so the launcher
can start the forkserver first of all (:func:`start_forkserver`): the forkserver, a fresh interpreter,
then imports :data:`PRELOAD` (about 5 CPU s) on the other core while the launcher imports dagster,
opens its instance and plans the first steps, instead of after them, when the first step process is
asked for (docs/performance.md, "Start-up of a command that computes nothing"). A forkserver imports
all of :data:`PRELOAD` before it looks whether its launcher is still there, so the launcher stops it
(:func:`stop_forkserver`) once it knows it will fork no step process: when no planned step has anything
to build, and when the launch ends (an error at its start included).
"""
from __future__ import annotations

import contextlib
import multiprocessing
import multiprocessing.forkserver
import os
import signal
import threading

# forked children start from a server that imported these once (an import that fails is skipped): the
# code location, and the SQLite storage a local instance opens (else each child imported it in
# DagsterInstance.from_ref: 0.5 CPU s, 1.7 s wall on the loaded 2-core machine, of every run); what
# every run's execute_in_process imports; and the libraries the code location imports only where used
# (core.IMPORTED_WHERE_USED, so that `tempo status` does not) that step runs use: lightgbm with the
# scikit-learn and scipy it pulls in, faiss, matplotlib's Figure on the Agg canvas. Importing them
# starts no OpenMP thread (those start at a fit or search, never in the server), so forking stays
# safe; before, each step process imported them again (docs/performance.md, `--jobs`)
PRELOAD = ["tempo_assets.cli.step_process", "dagster._core.storage.sqlite_storage",
           "dagster._core.execution.execute_in_process", "dagster._core.instance.factory",
           "dagster._core.secrets.env_file", "dagster._core.storage.local_compute_log_manager",
           "upath", "pyarrow.dataset", "scipy.sparse.csgraph",
           "lightgbm", "faiss", "matplotlib.figure", "matplotlib.lines", "matplotlib.style",
           "matplotlib.backends.backend_agg"]


def forkserver_context(start: bool = False):
    """The multiprocessing context step processes are forked from: a forkserver that preloads :data:`PRELOAD`,
    started now with ``start`` (else with the first step process; a running one is kept).

    Its step processes take SIGINT as Ctrl-C (``KeyboardInterrupt``) from the moment they are forked,
    also under a launch that ignores it (``tempo materialize --all &`` run from a script): the stop
    ``ConcurrentSteps.stop_all`` sends them is SIGINT, and one that landed while a child was still
    starting was lost (the child killed after ``STOP_GRACE_S``). A forkserver hands its children the
    SIGINT handling it started with, so it is started with Python's own; the launcher's stays as it was.
    The forkserver's environment is the launcher's when it starts: start it after ``$DAGSTER_HOME`` is set.
    """
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(PRELOAD)
    main_thread = threading.current_thread() is threading.main_thread()
    if main_thread and signal.getsignal(signal.SIGINT) == signal.SIG_IGN:  # else it starts with the first child
        signal.signal(signal.SIGINT, signal.default_int_handler)
        try:
            multiprocessing.forkserver.ensure_running()
        finally:
            signal.signal(signal.SIGINT, signal.SIG_IGN)
    elif start:
        multiprocessing.forkserver.ensure_running()
    return context


def start_forkserver() -> None:
    """Start the step processes' forkserver now, so that it imports :data:`PRELOAD` while this process
    goes on (``tempo materialize`` with more than one job, before it plans its steps)."""
    forkserver_context(start=True)


def stop_forkserver() -> None:
    """Stop the step processes' forkserver this process started, if one runs and none of its step processes
    is alive (they die with it: ``step_process.die_with_launcher``): a forkserver still importing
    :data:`PRELOAD` for a launch that will fork nothing goes on for seconds of CPU (and holds the launch's
    stdout open till then). A step process asked for later starts a new one."""
    server = multiprocessing.forkserver._forkserver
    with server._lock:
        pid = server._forkserver_pid
        if pid is None or any(p._start_method == "forkserver" for p in multiprocessing.active_children()):
            return
        with contextlib.suppress(ProcessLookupError):  # it only imports, or waits: nothing to clean up
            os.kill(pid, signal.SIGKILL)  # (closing its pipe alone, as ``_stop`` does, waits for its imports)
        # the standard library's own reset: closes the pipe, reaps it, forgets its address (the next child
        # starts a new one)
        server._stop_unlocked()
