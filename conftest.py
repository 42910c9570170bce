"""Test-session guards shared by the whole suite.

Every test runs with DAGSTER_HOME pointing at a temporary folder whose dagster.yaml turns
telemetry off, so no test can write to ~/.dagster or to the project's own instance.
"""
import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent
SHARED_DATA = REPO.parent / "shared" / "data"


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
