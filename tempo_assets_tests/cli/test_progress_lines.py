"""``tempo materialize``'s progress lines: core/base/progress.py's lines inside a step become events of
that step (``python_logs`` of the instance tempo writes) and the watcher prints the newest one."""
from __future__ import annotations

import time

import dagster as dg

from tempo_assets.cli.graph_cmd import ProgressWatch, ensure_dagster_home
from tempo_assets.core.base.progress import Progress


@dg.asset
def slow_loop() -> int:
    progress = Progress("slow loop", 8, "items", every=0.2)
    for _ in range(8):
        time.sleep(0.25)
        progress.advance()
    return 8


def test_the_newest_progress_line_of_a_running_step_is_printed(tmp_path, monkeypatch):
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))
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
