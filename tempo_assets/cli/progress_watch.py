"""``ProgressWatch``: while a launched run executes, the launcher prints the newest progress line of
each of its steps (``core/base/progress.py`` writes them to the run's event log)."""
from __future__ import annotations

import contextlib
import os


class ProgressWatch:
    """While a run executes, print the newest progress line of each of its steps (a thread that
    reads the run's new event-log records every ``$TEMPO_PROGRESS_POLL`` s, default 2).

    On a SQLite instance (``tempo init``'s) it reads the run's own event-log file, read-only, and
    decodes only the rows that can hold a progress line (no Dagster event, a step key); any other
    storage is read through ``get_records_for_run``, every record decoded."""

    def __init__(self, instance, run_id, echo, where: str):
        import threading

        self.instance, self.run_id, self.echo, self.where = instance, run_id, echo, where
        self.poll = float(os.environ.get("TEMPO_PROGRESS_POLL", "2"))
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._watch, name="tempo-progress", daemon=True)
        self.cursor = self.known = None  # the run's id, once found (asked of ``run_id`` until then)
        self.shown: dict[str, str] = {}

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        self.thread.join(10)

    def _watch(self) -> None:
        while not self.stop.wait(self.poll):
            with contextlib.suppress(Exception):  # a progress line is never worth failing the run
                self.read()

    def read(self) -> None:
        from tempo_assets.core.base.progress import PREFIX

        self.known = run_id = self.known or self.run_id()
        if run_id is None:
            return
        path = self.sqlite_file(run_id)
        for entries in ([self._sqlite_entries(path)] if path is not None else self._stored_entries(run_id)):
            latest: dict[str, str] = {}
            for entry in entries:
                message = entry.user_message or ""
                if entry.dagster_event is None and entry.step_key and message.startswith(PREFIX):
                    latest[entry.step_key] = message
            for step, line in latest.items():
                if self.shown.get(step) != line:
                    self.shown[step] = line
                    self.echo(f"{self.where}: {step}: {line}")

    def sqlite_file(self, run_id: str) -> str | None:
        """The run's event-log file when the instance keeps one SQLite file per run, else None."""
        from dagster._core.storage.event_log.sqlite.sqlite_event_log import SqliteEventLogStorage

        storage = self.instance.event_log_storage
        return storage.path_for_shard(run_id) if isinstance(storage, SqliteEventLogStorage) else None

    def _sqlite_entries(self, path: str) -> list:
        """The entries after the cursor that can be log lines of a step, read-only from the run's file
        (none while the run has not made it): a Dagster event, most of a run's records and some large
        (materialisation metadata), is not decoded."""
        import sqlite3

        from dagster import EventLogEntry
        from dagster._serdes import deserialize_value

        if not os.path.exists(path):
            return []
        with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30)) as db:
            rows = db.execute("select id, event from event_logs where id > ? and dagster_event_type is null "
                              "and step_key is not null order by id", (self.cursor or 0,)).fetchall()
        if rows:
            self.cursor = rows[-1][0]
        return [deserialize_value(event, EventLogEntry) for _, event in rows]

    def _stored_entries(self, run_id: str):
        """The entries after the cursor, 500 records at a time, through the event log storage."""
        while True:
            found = self.instance.get_records_for_run(run_id, cursor=self.cursor, limit=500)
            self.cursor = found.cursor
            yield [record.event_log_entry for record in found.records]
            if not found.has_more:
                return
