"""Progress of long loops: ``done/total, elapsed, rate``, at most once every N seconds.

A loop makes a :class:`Progress` with its total and calls ``advance(n)`` (or ``update(done)``)
as it goes; a line is emitted when at least ``every`` seconds passed since the last one (default
``$TEMPO_PROGRESS_SECONDS`` or 30), and once at ``finish()``. Lines go to ``emit`` when given,
else to the ``logging`` logger ``tempo.progress`` at INFO. The Dagster instances Tempo writes
(``tempo init``, ``docs/deploy/dagster.yaml``) list ``tempo.progress`` under
``python_logs.managed_python_loggers``, so inside a step every line becomes an event of that
step in the run's log (``tempo materialize`` prints the latest one per running step).

Every line starts with ``progress `` and reads, e.g.::

    progress knn search: 12000/35000 (34.3%), elapsed 31s, 387.1/s, about 59s left

Pure Python: no dagster import.
"""
from __future__ import annotations

import logging
import os
import subprocess
import time
from pathlib import Path
from typing import Callable

from tempo_assets.core.base.errors import TempoInputError

LOGGER = "tempo.progress"
PREFIX = "progress "
DEFAULT_EVERY = 30.0


def default_every() -> float:
    """``$TEMPO_PROGRESS_SECONDS`` (a positive number of seconds), else 30."""
    raw = os.environ.get("TEMPO_PROGRESS_SECONDS", "").strip()
    if not raw:
        return DEFAULT_EVERY
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if value <= 0:

        raise TempoInputError(f"TEMPO_PROGRESS_SECONDS={raw!r} is not a positive number of seconds")
    return value


def _log(line: str) -> None:
    logging.getLogger(LOGGER).info(line)


class Progress:
    """``done`` of ``total`` units of ``what``; emits a line at most every ``every`` seconds."""

    def __init__(self, what: str, total: int | None, unit: str = "", every: float | None = None,
                 emit: Callable[[str], None] | None = None, clock: Callable[[], float] = time.monotonic):
        self.what, self.total, self.unit = what, total, unit
        self.every = default_every() if every is None else float(every)
        self.emit = emit or _log
        self.clock = clock
        self.started = self.last = clock()
        self.done = 0
        self.lines = 0

    def advance(self, n: int = 1) -> None:
        self.update(self.done + n)

    def update(self, done: int) -> None:
        self.done = done
        now = self.clock()
        if now - self.last >= self.every:
            self._emit(now)

    def finish(self) -> None:
        """The last line (``done/total`` as reached) when the loop ran long enough to report at
        all (a line was emitted, or ``every`` seconds passed); short loops stay silent."""
        now = self.clock()
        if self.lines or now - self.started >= self.every:
            self._emit(now, final=True)

    def line(self, now: float | None = None, final: bool = False) -> str:
        now = self.clock() if now is None else now
        elapsed = max(now - self.started, 0.0)
        unit = f" {self.unit}" if self.unit else ""
        if self.total:
            share = f"{self.done}/{self.total}{unit} ({100.0 * self.done / self.total:.1f}%)"
        else:
            share = f"{self.done}{unit}"
        rate = self.done / elapsed if elapsed > 0 else 0.0
        text = f"{PREFIX}{self.what}: {share}, elapsed {elapsed:.0f}s, {rate:.1f}/s"
        if final:
            return text + ", done"
        if self.total and rate > 0 and self.done < self.total:
            text += f", about {(self.total - self.done) / rate:.0f}s left"
        return text

    def _emit(self, now: float, final: bool = False) -> None:
        self.emit(self.line(now, final))
        self.last = now
        self.lines += 1

    def __enter__(self) -> "Progress":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.finish()


def track(iterable, what: str, total: int | None = None, unit: str = "", every: float | None = None,
          emit: Callable[[str], None] | None = None):
    """``iterable``'s items, reporting one unit of progress per item."""
    if total is None and hasattr(iterable, "__len__"):
        total = len(iterable)
    with Progress(what, total, unit, every, emit) as progress:
        for item in iterable:
            yield item
            progress.advance()


def run_reporting(command: list[str], cwd, what: str, watch=None, every: float | None = None,
                  emit: Callable[[str], None] | None = None):
    """``subprocess.run(command, cwd=cwd, capture_output=True, text=True)``, polled: while it runs,
    a progress line (elapsed, and the size of the file ``watch`` when it exists) every ``every`` s.

    Returns the ``CompletedProcess``; raises ``OSError`` when the program cannot be started.
    """
    progress = Progress(what, None, "MB written" if watch is not None else "", every, emit)
    proc = subprocess.Popen(command, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    while True:
        try:
            stdout, stderr = proc.communicate(timeout=progress.every)
            break
        except subprocess.TimeoutExpired:
            size = Path(watch).stat().st_size if watch is not None and Path(watch).exists() else 0
            progress.update(size >> 20)
        except BaseException:
            proc.kill()
            proc.wait()
            raise
    if progress.lines:
        progress.finish()
    return subprocess.CompletedProcess(command, proc.returncode, stdout, stderr)
