"""The project run from another folder (a second clone, a moved checkout, CI's fresh clone) stores
the same bytes and says the same ``tempo status`` (issue 20, "Why": the moved checkout).

A copy of the materialised ``data/`` graph lives under another folder (archive, artefacts, instance,
warehouse) and a copy of this checkout's files under a third; that checkout re-runs ``release_job``
on the first release. Before the fix the ontology's stored value held the OBO's absolute path, so
its sha256 changed, and every window's frozen_recipe, test_score and benchmark went stale for good.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import dagster as dg
import pytest
from dagster._core.definitions.data_version import StaleStatus
from dagster._utils.test.data_versions import get_stale_status_resolver

from tempo_assets.definitions import ASSETS
from tempo_assets_tests.cli_here import tempo_here
from tempo_assets_tests.conftest import REPO, graph_from, subprocess_env

pytestmark = pytest.mark.slow


def checkout_copy(target: Path) -> Path:
    """This checkout's files (tracked, and untracked ones git does not ignore) copied to ``target``."""
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=REPO, check=True,
                            capture_output=True).stdout.decode().split("\0")
    for name in filter(None, listed):
        source = REPO / name
        if source.is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            (target / name).write_bytes(source.read_bytes())
    return target


def run_in(checkout: Path, graph, *args: str) -> subprocess.CompletedProcess:
    """``python ARGS`` in ``checkout`` (its own ``tempo_assets`` first on the path) against ``graph``."""
    run = subprocess.run([sys.executable, *args], cwd=checkout, env=subprocess_env(graph), capture_output=True,
                         text=True, timeout=1800)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    return run


def stored(graph) -> dict[str, tuple[str, str]]:
    """``asset[partition] -> (sha256, fingerprint)`` of every stored artefact."""
    out = {}
    for sidecar in sorted(graph.artefacts.glob("*/*/artefact.json")):
        meta = json.loads(sidecar.read_text(encoding="utf-8"))
        out[f"{meta['asset']}[{meta['partition']}]"] = (meta["sha256"], meta.get("fingerprint"))
    return out


def status_lines(checkout: Path, graph) -> list[str]:
    return run_in(checkout, graph, "-m", "tempo_assets.cli.main", "status").stdout.splitlines()


def status_here(graph) -> list[str]:
    """``tempo status`` of this checkout against ``graph``, in this process (its code is the one imported)."""
    done = tempo_here("status", env={**os.environ, **graph.env})
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return done.stdout.splitlines()


RERUN = """
import dagster as dg
from tempo_assets.definitions import defs
print(__import__("tempo_assets").__file__)
result = defs.resolve_job_def("release_job").execute_in_process(partition_key={release!r}, instance=dg.DagsterInstance.get())
assert result.success
"""


def test_a_moved_checkout_reruns_a_release_job_to_the_same_bytes_and_status(demo_build, tmp_path):
    here = graph_from(demo_build, tmp_path / "here" / "graph")
    there = graph_from(demo_build, tmp_path / "somewhere" / "else" / "graph")
    clone = checkout_copy(tmp_path / "another" / "checkout")
    try:
        release = here.plan.releases[0]
        before, status_before = stored(here), status_here(here)
        assert before and all(" ok " in line or " missing " in line for line in status_before), status_before
        rerun = run_in(clone, there, "-c", RERUN.format(release=release))
        assert str(clone / "tempo_assets") in rerun.stdout  # the moved checkout's code ran
        runs = there.instance.get_runs(limit=1)
        assert runs[0].job_name == "release_job" and runs[0].tags.get("dagster/partition") == release
        after = stored(there)
        assert sorted(after) == sorted(before)
        moved = {k: (before[k], after[k]) for k in before if before[k] != after[k]}
        assert not moved, f"artefacts whose sha256 or fingerprint depends on where they live: {moved}"
        assert status_lines(clone, there) == status_before
        # the UI agrees: rebuilt to the same bytes, nothing downstream is Unsynced
        resolver = get_stale_status_resolver(there.instance, ASSETS)
        for window in there.plan.windows:
            for asset in ("valid_selection", "frozen_recipe", "test_growth", "test_score", "benchmark"):
                assert resolver.get_status(dg.AssetKey(asset), window) == StaleStatus.FRESH, (asset, window)
    finally:
        here.instance.dispose()
        there.instance.dispose()
