"""Errors raised on bad input, on reads past a cutoff, and on storage that cannot be written."""
from __future__ import annotations

import errno
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


class DamagedFileError(TempoInputError):
    """A compressed file whose stream is truncated or corrupt (a partial download or copy)."""

    def __init__(self, path: str | Path, cause: BaseException, line: int | None = None):
        if isinstance(cause, EOFError):
            what = "the gzip stream ends before its end-of-stream marker: the file is truncated"
        else:
            what = f"the gzip stream is corrupt ({cause})"
        super().__init__(f"{what}; download or copy it again", path=path, line=line)
        self.cause = cause

    def __reduce__(self):  # picklable across processes, like StorageWriteError
        return (type(self), (self.path, self.cause, self.line))


#: the command that installs the production path's packages (pyproject's ``production`` extra)
PRODUCTION_SETUP = "bash scripts/setup.sh --production"


class MissingExtraError(TempoInputError):
    """A setting of the production path (celery, PostgreSQL, S3) whose packages are not installed."""

    def __init__(self, setting: str, missing: ImportError | str):
        what = missing if isinstance(missing, str) else (
            f"{missing.name} is not installed" if missing.name else str(missing))
        super().__init__(f"{setting} needs the production extra ({what}): run `{PRODUCTION_SETUP}`")
        self.setting, self.what = setting, what

    def __reduce__(self):  # picklable across processes, like DamagedFileError
        return (type(self), (self.setting, self.what))


#: what to do when a write fails, by errno
_WRITE_ADVICE = {
    errno.ENOSPC: "free space on that filesystem (or point the store elsewhere) and run again",
    errno.EDQUOT: "free space within your quota (or point the store elsewhere) and run again",
    errno.EFBIG: "the file exceeds the size limit of this process or filesystem (ulimit -f); raise it",
    errno.EACCES: "make the folder writable for this user and run again",
    errno.EPERM: "make the folder writable for this user and run again",
    errno.EROFS: "the filesystem is read-only; point the store at a writable folder",
}


class StorageWriteError(OSError):
    """A file could not be written (full disk, no permission, read-only filesystem).

    An ``OSError`` with the errno of its cause and ``filename`` set to the path it meant to write;
    its message names that path, the reason and what to do, and says that what was there before
    was left as it was (writes are atomic).
    """

    def __init__(self, path: str | Path, cause: OSError):
        super().__init__(cause.errno, cause.strerror or str(cause), str(path))
        advice = _WRITE_ADVICE.get(cause.errno, "check the filesystem and run again")
        self.message = (f"cannot write {path}: {cause.strerror or cause}; {advice} "
                        "(the previous version, if any, is unchanged)")

    def __str__(self) -> str:
        return self.message

    def __reduce__(self):  # picklable across processes (Dagster's multiprocess executor)
        return (_rebuild_write_error, (self.filename, self.errno, self.strerror, self.message))


def _rebuild_write_error(filename, code, strerror, message) -> StorageWriteError:
    error = StorageWriteError(filename, OSError(code, strerror))
    error.message = message
    return error
