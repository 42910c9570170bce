"""Test-session guards shared by the whole suite.

Every test runs with DAGSTER_HOME pointing at a temporary folder whose dagster.yaml turns
telemetry off, so no test can write to ~/.dagster or to the project's own instance.

The run's temporary folders (``tmp_path``, the session builds, every test's Dagster instances and
artefact stores) are on the memory filesystem ``/dev/shm`` where it has room: Dagster's SQLite
storages commit every event, and each commit waits for the disk (about 2 ms here, against 0.2 ms
in memory); a materialising test spent about a third of its time blocked on them. ``--basetemp``
given on the command line is used as it is. A run's folder is removed when it passes; a failed
run's is kept (and named) until the next run starts, which also removes a killed run's
(``tempo_assets_tests/memory_basetemp.py``: a folder no live run holds the lock of).
"""
import os
import shutil
from pathlib import Path

import pytest

from tempo_assets_tests.memory_basetemp import RUN, claim_folder, remove_abandoned

MEMORY_FS = Path("/dev/shm")
MEMORY_FS_ROOM = 8 << 30  # free bytes it needs for a full run's folders (about 4.5 GB in CI16) with a margin


@pytest.hookimpl(tryfirst=True)  # before pytest's own pytest_configure reads --basetemp
def pytest_configure(config):
    """The run's base temporary folder on ``/dev/shm`` (a new one per run, so concurrent runs never share
    it), unless ``--basetemp`` was given, this is an xdist worker (it gets its folder from the
    controller), or ``/dev/shm`` is missing or short of room."""
    if config.option.basetemp or hasattr(config, "workerinput") or not MEMORY_FS.is_dir():
        return
    for folder in remove_abandoned(MEMORY_FS):
        print(f"removed {folder}: an earlier test run's temporary folders (that run failed or was killed)")
    if shutil.disk_usage(MEMORY_FS).free < MEMORY_FS_ROOM:
        return
    folder, config._tempo_memory_owner = claim_folder(MEMORY_FS)
    # pytest empties the base folder it is given, so the owner lock stays beside it, not in it
    config.option.basetemp = str(folder / RUN)
    config._tempo_memory_basetemp = folder


def pytest_unconfigure(config):
    """The memory folder is removed after a run that passed, and kept (and named) after one that did not."""
    folder = getattr(config, "_tempo_memory_basetemp", None)
    if folder is None:
        return
    if getattr(config, "_tempo_failed", True):
        print(f"\nthis run's temporary folders are kept in {folder} (in memory, until the next test run starts)")
    else:
        shutil.rmtree(folder, ignore_errors=True)


def pytest_sessionfinish(session, exitstatus):
    session.config._tempo_failed = exitstatus not in (0, 5)  # 5: no test collected


@pytest.fixture(scope="session", autouse=True)
def _isolated_dagster_home(tmp_path_factory):
    home = tmp_path_factory.mktemp("dagster_home")
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    previous = os.environ.get("DAGSTER_HOME")
    os.environ["DAGSTER_HOME"] = str(home)
    os.environ.setdefault("TEMPO_ARTEFACTS", str(home / "artefacts"))
    yield home
    if previous is None:
        os.environ.pop("DAGSTER_HOME", None)
    else:
        os.environ["DAGSTER_HOME"] = previous


def pytest_runtest_setup(item):
    """A test marked ``needs(...)`` is skipped without what it needs, and fails under CI (before its fixtures)."""
    from tempo_assets_tests.toolkit import check_needs

    check_needs(item)


@pytest.fixture(autouse=True)
def _no_ambient_defs_state_storage():
    """Each test starts without the defs-state storage an earlier test's instance left in context.

    ``DagsterInstance.__enter__`` sets a context variable that Dagster's definition loading
    reads; an instance that was entered and garbage-collected elsewhere must not leak into
    the next test's ``materialize``.
    """
    from dagster._core.storage.defs_state.base import set_defs_state_storage

    with set_defs_state_storage(None):
        yield
