"""``tempo materialize``'s progress lines: core/base/progress.py's lines inside a step become events of
that step (``python_logs`` of the instance tempo writes) and the watcher prints the newest one."""
from __future__ import annotations

import time

import dagster as dg
import pytest

from tempo_assets.cli.graph_cmd import ensure_dagster_home
from tempo_assets.cli.progress_watch import ProgressWatch
from tempo_assets.core.base.progress import Progress


@dg.asset
def slow_loop() -> int:
    progress = Progress("slow loop", 8, "items", every=0.2)
    for _ in range(8):
        time.sleep(0.25)
        progress.advance()
    return 8


@pytest.mark.parametrize("storage", ["sqlite file", "event log storage"])
def test_the_newest_progress_line_of_a_running_step_is_printed(tmp_path, monkeypatch, storage):
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))
    if storage == "event log storage":  # the path of an instance without one SQLite file per run (PostgreSQL)
        monkeypatch.setattr(ProgressWatch, "sqlite_file", lambda self, run_id: None)
    monkeypatch.setenv("TEMPO_PROGRESS_POLL", "0.3")
    home = ensure_dagster_home()
    assert "tempo.progress" in (home / "dagster.yaml").read_text()
    printed: list[str] = []
    with dg.DagsterInstance.get() as instance:
        run_id = "0f1e2d3c-0000-4000-8000-000000000001"
        with ProgressWatch(instance, lambda: run_id, printed.append, "[1/1] test_job") as watch:
            result = dg.Definitions(assets=[slow_loop]).resolve_implicit_global_asset_job_def().execute_in_process(
                instance=instance, run_id=run_id)
        assert result.success
        assert printed, "the watcher printed nothing while the step ran"  # its thread polled during the run
        watch.read()  # one more poll after the step's last line (the thread has stopped)
        stored = [e.user_message for e in instance.all_logs(run_id) if e.dagster_event is None
                  and e.step_key == "slow_loop" and e.user_message.startswith("progress slow loop: ")]
    assert len(stored) >= 3, stored
    assert printed and all(line.startswith("[1/1] test_job: slow_loop: progress slow loop: ") for line in printed)
    assert "/8 items (" in printed[0] and ", elapsed " in printed[0] and "/s" in printed[0]
    assert printed[-1].endswith(stored[-1])


def test_the_sqlite_watch_decodes_only_the_records_that_can_be_progress_lines(tmp_path, monkeypatch):
    """A run's Dagster events (most of its records, materialisations' metadata the largest) are not
    decoded by the watch: only the step's log lines are."""
    import dagster._serdes as serdes

    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))
    ensure_dagster_home()
    with dg.DagsterInstance.get() as instance:
        run_id = "0f1e2d3c-0000-4000-8000-000000000002"
        assert dg.Definitions(assets=[slow_loop]).resolve_implicit_global_asset_job_def().execute_in_process(
            instance=instance, run_id=run_id).success
        logs = instance.all_logs(run_id)
        lines = [e for e in logs if e.dagster_event is None and e.step_key]
        decoded, decode = [], serdes.deserialize_value
        monkeypatch.setattr(serdes, "deserialize_value", lambda *a, **k: decoded.append(1) or decode(*a, **k))
        printed: list[str] = []
        watch = ProgressWatch(instance, lambda: run_id, printed.append, "w")
        watch.read()
        watch.read()  # nothing new: nothing decoded again
    assert len(logs) > 2 * len(lines) > 0 and len(decoded) == len(lines), (len(logs), len(lines), len(decoded))
    assert printed == [f"w: slow_loop: {lines[-1].user_message}"]
