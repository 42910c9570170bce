"""Is the process that launched a run, or took a TEST claim, still alive?

A process is named by its host, its pid and its start time (seconds since the epoch, as the
kernel records it): a pid that the kernel has handed to a newer process after the original died
is not mistaken for it. Only a process on this host can be checked; for one on another host the
answer is ``None`` (unknown), and callers say so instead of guessing.

A temporary folder a process keeps for its life (:func:`owned_temporary_folder`) names that process
in it, so the folder of a process that died without its exit functions (SIGKILL) is removed by the
next process that makes one of the same kind.
"""
from __future__ import annotations

import glob
import json
import multiprocessing
import os
import shutil
import socket
import tempfile
from dataclasses import dataclass
from pathlib import Path

import psutil

from tempo_assets.core.base.io import atomic_write

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


# the file in an owned temporary folder that names its owner
OWNER_FILE = "owner.json"


def owned_temporary_folder(prefix: str) -> tempfile.TemporaryDirectory:
    """A new temporary folder (``prefix`` and a random tail, in ``tempfile``'s folder) that names its
    owner, this process, in :data:`OWNER_FILE` (host, pid, start time). The folders of that prefix
    whose owner is dead go first (:func:`sweep_dead_owners`): a process killed by SIGKILL runs no exit
    function, so its folder stays behind until then."""
    sweep_dead_owners(Path(tempfile.gettempdir()), prefix)
    made = tempfile.TemporaryDirectory(prefix=prefix)
    owner = this_process()
    with atomic_write(Path(made.name) / OWNER_FILE) as handle:
        json.dump({"host": owner.host, "pid": owner.pid, "started": owner.started}, handle)
    return made


def sweep_dead_owners(parent: Path, prefix: str) -> list[Path]:
    """Remove the folders ``parent/prefix*`` whose :data:`OWNER_FILE` names a process of this host that
    is gone; returns them. A folder without that file (not made by :func:`owned_temporary_folder`, or
    being made), another user's, a link, another host's or a living owner's stays."""
    swept = []
    for folder in sorted(Path(parent).glob(glob.escape(prefix) + "*")):
        owner = _folder_owner(folder)
        if owner is not None and is_alive(owner) is False:
            shutil.rmtree(folder, ignore_errors=True)  # another process may be sweeping it too
            swept.append(folder)
    return swept


def _folder_owner(folder: Path) -> ProcessIdentity | None:
    """The process an owned temporary folder names, or ``None`` when it names none."""
    try:
        if folder.is_symlink() or not folder.is_dir() or folder.stat().st_uid != os.getuid():
            return None
        record = json.loads((folder / OWNER_FILE).read_text(encoding="utf-8"))
        started = record["started"]
        return ProcessIdentity(str(record["host"]), int(record["pid"]), None if started is None else float(started))
    except (OSError, ValueError, KeyError, TypeError):
        return None


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
