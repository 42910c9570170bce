"""Test-session guards shared by the whole suite.

Every test runs with DAGSTER_HOME pointing at a temporary folder whose dagster.yaml turns
telemetry off, so no test can write to ~/.dagster or to the project's own instance.
"""
import os

import pytest


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
