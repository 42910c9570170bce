"""Is the process that launched a run, or took a TEST claim, still alive?

A process is named by its host, its pid and its start time (seconds since the epoch, as the
kernel records it): a pid that the kernel has handed to a newer process after the original died
is not mistaken for it. Only a process on this host can be checked; for one on another host the
answer is ``None`` (unknown), and callers say so instead of guessing.
"""
from __future__ import annotations

import multiprocessing
import os
import socket
from dataclasses import dataclass

import psutil

# a process started this long after the recorded start time is another process with a reused pid
_START_TOLERANCE_S = 1.0


@dataclass(frozen=True)
class ProcessIdentity:
    """One process: ``host`` (``socket.gethostname()``), ``pid`` and ``started`` (epoch seconds or None)."""

    host: str
    pid: int
    started: float | None = None

    def describe(self) -> str:
        return f"pid {self.pid} on {self.host}"


def this_process() -> ProcessIdentity:
    """The calling process's identity."""
    return process_identity(os.getpid())


def process_identity(pid: int) -> ProcessIdentity:
    """The identity of process ``pid`` on this host (no start time when it is already gone)."""
    try:
        started = psutil.Process(pid).create_time()
    except psutil.Error:
        started = None
    return ProcessIdentity(socket.gethostname(), pid, started)


def is_alive(process: ProcessIdentity, started_before: float | None = None) -> bool | None:
    """``True`` when ``process`` still runs, ``False`` when it is gone, ``None`` when it is on another host.

    ``started_before`` (epoch seconds): when the identity has no start time, a process with that
    pid that started after this moment is a reuse of the pid, so the original is gone.
    """
    if process.host != socket.gethostname():
        return None
    if process.pid <= 0:
        return False
    try:
        running = psutil.Process(process.pid)
        started = running.create_time()
        if running.status() == psutil.STATUS_ZOMBIE:
            return False
    except (psutil.NoSuchProcess, psutil.ZombieProcess):
        return False
    except psutil.AccessDenied:  # it exists; another user's
        return True
    if process.started is not None:
        return abs(started - process.started) <= _START_TOLERANCE_S
    if started_before is not None:
        return started <= started_before + _START_TOLERANCE_S
    return True


# set (to its own pid) by a process that orchestrates the run it executes although it is a
# multiprocessing child: ``tempo materialize --jobs N``'s step processes (cli/step_process.py)
SELF_ORCHESTRATED = "TEMPO_ORCHESTRATES_ITS_RUN"


def orchestrating_parent() -> multiprocessing.process.BaseProcess | None:
    """The ``multiprocessing`` parent that orchestrates this process's run (a step that Dagster's
    multiprocess executor started, with ``spawn`` and ``forkserver`` alike), or ``None`` when this
    process orchestrates its run itself (in process, or a ``tempo`` step process)."""
    if os.environ.get(SELF_ORCHESTRATED) == str(os.getpid()):
        return None
    return multiprocessing.parent_process()
