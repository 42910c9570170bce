"""``core.base.progress``: lines at most every N seconds, with done/total, elapsed and rate."""
from __future__ import annotations

import logging
import sys

import pytest

from tempo_assets.core.base.errors import TempoInputError
from tempo_assets.core.base.progress import LOGGER, Progress, run_reporting, track


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_lines_are_throttled_to_the_interval_and_say_done_total_elapsed_rate():
    clock, lines = Clock(), []
    progress = Progress("knn search", 1000, "queries", every=30, emit=lines.append, clock=clock)
    for _ in range(10):  # 10 updates within 29 s: no line yet
        clock.now += 2.9
        progress.advance(10)
    assert lines == []
    clock.now += 1.0  # 30 s after the start
    progress.advance(100)
    assert lines == ["progress knn search: 200/1000 queries (20.0%), elapsed 30s, 6.7/s, about 120s left"]
    clock.now += 10
    progress.advance(100)  # 10 s after the last line: silent
    assert len(lines) == 1
    clock.now += 20
    progress.update(1000)
    progress.finish()
    assert lines[1] == "progress knn search: 1000/1000 queries (100.0%), elapsed 60s, 16.7/s"
    assert lines[2].endswith(", done")


def test_a_short_loop_stays_silent_and_the_default_goes_to_logging(caplog, monkeypatch):
    monkeypatch.setenv("TEMPO_PROGRESS_SECONDS", "0.000001")
    with caplog.at_level(logging.INFO, logger=LOGGER):
        assert list(track(range(3), "bootstrap", unit="replicates")) == [0, 1, 2]
    messages = [r.getMessage() for r in caplog.records if r.name == LOGGER]
    assert messages and all(m.startswith("progress bootstrap: ") for m in messages)
    assert messages[-1].startswith("progress bootstrap: 3/3 replicates (100.0%)")
    monkeypatch.setenv("TEMPO_PROGRESS_SECONDS", "60")
    lines = []
    with Progress("quick", 5, emit=lines.append) as progress:
        progress.advance(5)
    assert lines == []


@pytest.mark.parametrize("value", ["0", "-3", "soon"])
def test_a_bad_interval_is_refused_naming_the_variable(monkeypatch, value):
    monkeypatch.setenv("TEMPO_PROGRESS_SECONDS", value)
    with pytest.raises(TempoInputError, match="TEMPO_PROGRESS_SECONDS"):
        Progress("x", 1)


def test_a_subprocess_is_polled_while_it_runs(tmp_path):
    out = tmp_path / "out.bin"
    script = ("import time, pathlib\np = pathlib.Path(__import__('sys').argv[1])\n"
              "for i in range(4):\n    p.write_bytes(b'x' * (i + 1) * (1 << 20)); time.sleep(0.25)\n"
              "print('finished')")
    lines = []
    done = run_reporting([sys.executable, "-c", script, str(out)], tmp_path, "writer", watch=out,
                         every=0.2, emit=lines.append)
    assert done.returncode == 0 and done.stdout.strip() == "finished"
    assert len(lines) >= 3 and all(line.startswith("progress writer: ") for line in lines)
    assert "MB written" in lines[-2] and lines[-1].endswith(", done")
