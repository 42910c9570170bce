"""Errors raised on bad input and on reads past a cutoff."""
from __future__ import annotations

from datetime import date
from pathlib import Path


class TempoInputError(ValueError):
    """Bad input: the message names the file and the line (or key) at fault."""

    def __init__(self, message: str, path: str | Path | None = None, line: int | None = None):
        where = ""
        if path is not None:
            where = f"{path}"
            if line is not None:
                where += f":{line}"
            where += ": "
        super().__init__(where + message)
        self.path = str(path) if path is not None else None
        self.line = line


class CutoffViolation(TempoInputError):
    """Something dated after the cutoff was about to be read."""

    def __init__(self, path: str | Path, file_date: date, cutoff: date, what: str = "file"):
        self.file_date = file_date
        self.cutoff = cutoff
        super().__init__(
            f"{what} is dated {file_date.isoformat()}, after the cutoff {cutoff.isoformat()}; "
            "reading it would leak the future into this artefact",
            path=path,
        )
