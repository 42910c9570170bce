"""One line for every error a command meets: what failed, where (file, line, key or endpoint), what to do.

``tempo`` and ``tempo-eval`` run their commands through :func:`run_command`: any exception becomes
one line on stderr and exit status 2; ``TEMPO_LOG_LEVEL=DEBUG`` lets it through with its traceback.
"""
from __future__ import annotations

import errno
import os
import shutil
import sys
from typing import Callable, Iterator

#: exit status of a command that stopped on an error
ERROR_EXIT = 2
#: exit status of a command stopped by Ctrl-C (SIGINT) or SIGTERM, as a shell reports SIGINT
INTERRUPTED_EXIT = 130
# the audit and gate commands' exit status for a bad input file (their 2 means "investigate")
INPUT_ERROR_EXIT_CODE = 3


def exit_3_on_usage_error(parser, command: str) -> None:
    """Make ``parser`` print its usage and exit ``INPUT_ERROR_EXIT_CODE`` on a usage error (argparse
    would exit 2, which the audit and gate commands use for "investigate")."""
    def usage_error(message: str) -> None:
        parser.print_usage(sys.stderr)
        print(f"tempo {command}: usage error: {message}", file=sys.stderr)
        sys.exit(INPUT_ERROR_EXIT_CODE)

    parser.error = usage_error

# what to do about a file the command could not read or write, by errno
_OS_ADVICE = {
    errno.ENOENT: "check the path",
    errno.ENOTDIR: "check the path",
    errno.EISDIR: "pass a file, not a folder",
    errno.EACCES: "check its permissions for this user",
    errno.EPERM: "check its permissions for this user",
    errno.ENOSPC: "free space on that filesystem and run again",
    errno.EDQUOT: "free space within your quota and run again",
    errno.EROFS: "the filesystem is read-only: use a writable folder",
}

# what to do about an SQLite database of the instance, by a phrase of SQLite's message
_SQLITE_ADVICE = (
    (("disk is full", "disk i/o error"), "free space on that filesystem, then run the command again"),
    (("not a database", "malformed"), "a database file there is corrupt: restore DAGSTER_HOME from a backup, "
                                      "or move it aside and run `tempo init` for a fresh instance"),
    (("unable to open",), "check that the folder exists and is writable"),
    (("readonly",), "make the folder and its .db files writable"),
    (("locked",), "another process holds the database: wait for it, then run again"),
)


class ReportedError(Exception):
    """An error already said in one line (:func:`error_line`), by another process: a step's run
    process under ``tempo materialize --jobs N``; reported as it is."""


def debugging() -> bool:
    """``TEMPO_LOG_LEVEL=DEBUG``: errors keep their traceback."""
    return os.environ.get("TEMPO_LOG_LEVEL", "").strip().upper() == "DEBUG"


def run_command(prog: str, call: Callable[[], int | None]) -> int:
    """``call()``'s exit status; an exception becomes ``<prog>: error: <one line>`` on stderr and 2."""
    try:
        return int(call() or 0)
    except KeyboardInterrupt as exc:  # Ctrl-C, or SIGTERM where the command turns it into one
        said = one_line(exc) or "a run under way is ended as failed (`tempo status`)"
        print(f"{prog}: interrupted: {said}", file=sys.stderr)
        return INTERRUPTED_EXIT
    except BrokenPipeError:
        # the reader went away (`tempo status | head`): nothing to say, and nowhere to say it
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except Exception as exc:  # noqa: BLE001 - every error a user meets is reported the same way
        if debugging():
            raise
        print(f"{prog}: error: {error_line(exc)}", file=sys.stderr)
        return ERROR_EXIT


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """``exc`` and the exceptions it was raised from or while handling, outermost first."""
    seen: list[BaseException] = []
    while exc is not None and not any(exc is other for other in seen):
        seen.append(exc)
        yield exc
        exc = exc.__cause__ or exc.__context__ or getattr(exc, "user_exception", None)


def one_line(text: str) -> str:
    return " ".join(part.strip() for part in str(text).splitlines() if part.strip())


def error_line(exc: BaseException) -> str:
    """The one line that says what failed, where, and what to do."""
    from tempo_assets.core.base.errors import StorageWriteError, TempoInputError

    for error in _chain(exc):
        if isinstance(error, (TempoInputError, StorageWriteError, ReportedError)):
            return one_line(error)
    storage = instance_storage_failure(exc)
    if storage is not None:
        return storage
    for error in _chain(exc):
        if isinstance(error, OSError) and error.filename:
            advice = _OS_ADVICE.get(error.errno)
            return one_line(f"{error.filename}: {error.strerror or error}" + (f"; {advice}" if advice else ""))
    return one_line(f"{type(exc).__name__}: {exc}") + \
        " (an unexpected error: run again with TEMPO_LOG_LEVEL=DEBUG for the traceback, and report it)"


def instance_storage_failure(exc: BaseException) -> str | None:
    """The line for Dagster's instance storage failing, naming where it lives, else None.

    PostgreSQL that is down or refuses the credentials: Dagster's storage retries, then raises
    its own exception from the driver's ``OperationalError``, whose message names the host and
    port (never the password). SQLite under ``$DAGSTER_HOME`` (a full disk, a corrupt file):
    ``sqlite3``'s message names no file, so the line names the instance folder and its free space.
    """
    home = os.environ.get("DAGSTER_HOME", "")
    for error in _chain(exc):
        if type(error).__name__ not in ("OperationalError", "DatabaseError"):
            continue
        driver = getattr(error, "orig", None) or error
        reason = one_line(str(driver).strip().splitlines()[0] if str(driver).strip() else type(driver).__name__)
        if "connection to server" in reason:
            return f"cannot reach Dagster's instance storage ({home}/dagster.yaml): {reason}"
        if type(driver).__module__ == "sqlite3":
            advice = next((text for phrases, text in _SQLITE_ADVICE
                           if any(phrase in reason.lower() for phrase in phrases)), "check DAGSTER_HOME")
            return (f"Dagster's instance at DAGSTER_HOME={home} cannot be used: SQLite says {reason!r} "
                    f"({free_space(home)} free there); {advice}")
    return None


def free_space(path: str) -> str:
    """Free space on the filesystem of ``path`` (or its nearest existing parent), e.g. ``'12.0 MiB'``."""
    free = free_mib(path)
    return "unknown space" if free is None else f"{free:.1f} MiB"


def free_mib(path: str) -> float | None:
    """MiB free on the filesystem of ``path`` (or its nearest existing parent); None if unknown."""
    while path and not os.path.exists(path):
        path = os.path.dirname(path.rstrip("/"))
    try:
        return shutil.disk_usage(path or ".").free / (1 << 20)
    except OSError:
        return None


def require_free_space(**folders: str) -> None:
    """Refuse to start runs when a folder's filesystem has less than ``$TEMPO_MIN_FREE_MB``
    (default 64) MiB free, naming it.

    A run writes its event log under ``DAGSTER_HOME`` and its artefacts under the store; on a
    full disk SQLite fails half-way (a run left ``STARTED``, or the process killed by SIGBUS
    when SQLite's shared-memory file cannot grow), so the check comes before the first run.
    """
    from tempo_assets.core.base.errors import TempoInputError

    try:
        need = float(os.environ.get("TEMPO_MIN_FREE_MB", "64"))
    except ValueError:
        raise TempoInputError("TEMPO_MIN_FREE_MB must be a number of MiB") from None
    for name, folder in folders.items():
        free = free_mib(folder)
        if free is not None and free < need:
            raise TempoInputError(
                f"only {free:.1f} MiB free on the filesystem of {name}, under the {need:g} MiB a run needs "
                "(TEMPO_MIN_FREE_MB); free space there, then run again", path=folder)
