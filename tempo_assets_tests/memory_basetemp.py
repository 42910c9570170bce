"""The test run's base folder on the memory filesystem, and what earlier runs left there.

A run's folder lives in RAM (``/dev/shm``) and holds a few GB (the background builds, every test's
instances). The run that made it holds an exclusive ``flock`` on ``owner.lock`` inside it for as long
as it lives; the kernel drops that lock when the process ends, however it ends (``kill -9``
included). A folder whose lock can be taken therefore belongs to no live run: a killed run's, or a
failed run's kept for inspection. Before such a folder is removed, the servers its run started
(``services.dev_services``: PostgreSQL, moto, redis, celery workers, recorded in ``run/services``) are
stopped by their recorded pids, as the run itself would have at its end. (The run's base folder is a subfolder: pytest empties the
folder it is given as ``--basetemp``, which would unlink the lock file.) Each new run removes those before it makes its own, so killed
and failed runs do not pile up in memory until the machine restarts.
"""
from __future__ import annotations

import fcntl
import os
import shutil
import tempfile
from pathlib import Path
from typing import IO

OWNER_LOCK = "owner.lock"
RUN = "run"  # the run's base folder (``--basetemp``) inside its folder


def folder_prefix() -> str:
    """The name every run's folder starts with (one user's runs only)."""
    return f"tempo-tests-{os.getuid()}-"


def _held_by_a_live_run(folder: Path) -> bool:
    try:
        handle = open(folder / OWNER_LOCK)
    except OSError:  # no lock file (a folder from before this scheme, or not ours to open): leave it
        return True
    with handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(handle, fcntl.LOCK_UN)
        return False


def remove_abandoned(root: Path) -> list[Path]:
    """Remove the folders under ``root`` that earlier runs made and no live run holds (their servers
    stopped first); return them."""
    from tempo_assets_tests import services

    removed = []
    for folder in sorted(root.glob(folder_prefix() + "*")):
        if folder.is_dir() and not _held_by_a_live_run(folder):
            services.stop_run_services(folder / RUN)
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(folder)
    return removed


def claim_folder(root: Path) -> tuple[Path, IO]:
    """A new run folder under ``root`` with its owner lock taken; keep the handle open for the run's life."""
    folder = Path(tempfile.mkdtemp(prefix=folder_prefix(), dir=root))
    # locked under another name, then renamed: a run starting beside this one never sees the lock file
    # unlocked (the lock belongs to the file, which the rename keeps)
    handle = open(folder / f".{OWNER_LOCK}.new", "a")
    fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    os.rename(folder / f".{OWNER_LOCK}.new", folder / OWNER_LOCK)
    return folder, handle
