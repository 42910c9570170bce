"""File helpers: atomic writes, checksums, transparent gzip reading.

A gzip file that ends early or is corrupt raises :class:`~tempo_assets.core.base.errors.DamagedFileError`
naming the file (and, through :func:`numbered_lines`, the line) instead of a bare ``EOFError``;
a write that fails (full disk, no permission) raises
:class:`~tempo_assets.core.base.errors.StorageWriteError` naming the path it meant to write.
"""
from __future__ import annotations

import contextlib
import errno
import gzip
import hashlib
import io
import json
import os
import tempfile
import uuid
import zlib
from pathlib import Path
from typing import IO, Iterator

from tempo_assets.core.base.errors import DamagedFileError, StorageWriteError

# the repository (a checkout) that holds the tempo_assets package: tempo_assets/core/base/io.py
REPO_ROOT = Path(__file__).resolve().parents[3]

#: what reading a damaged gzip stream raises: truncated (EOFError), corrupt (zlib.error, BadGzipFile)
GZIP_ERRORS = (EOFError, zlib.error, gzip.BadGzipFile)


@contextlib.contextmanager
def atomic_write(path: str | Path, mode: str = "w", encoding: str | None = "utf-8") -> Iterator[IO]:
    """Write to a temporary file beside ``path`` and rename it into place on success.

    A failure inside the block leaves any previous ``path`` untouched. A write the filesystem refuses (full disk, no permission, read-only) raises
    :class:`StorageWriteError` naming ``path``; any other error of the block passes unchanged.
    """
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        raise _write_error(path, exc) from exc
    # mkstemp creates 0600 files; give the result the permissions a plain open() would.
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)
    try:
        kwargs = {} if "b" in mode else {"encoding": encoding, "newline": ""}
        with os.fdopen(fd, mode, **kwargs) as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        # a write to this file the filesystem refused (a handle's error names no file)
        if isinstance(exc, OSError) and exc.filename in (None, tmp) and exc.errno in WRITE_ERRNOS:
            raise _write_error(path, exc) from exc
        raise


#: errnos that say the filesystem refused a write, not that the caller's code is wrong
WRITE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EACCES, errno.EPERM,
                          errno.EROFS, errno.EIO})


def _write_error(path: Path, exc: OSError) -> OSError:
    return exc if isinstance(exc, StorageWriteError) else StorageWriteError(path, exc)


def sha256_file(path: str | Path, chunk: int = 1 << 20) -> str:
    """Hex sha256 of a file's bytes."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(chunk), b""):
            digest.update(block)
    return digest.hexdigest()


def is_gzip(path: str | Path) -> bool:
    with open(path, "rb") as handle:
        return handle.read(2) == b"\x1f\x8b"


class _GunzipNamingDamage(io.RawIOBase):
    """A gzip file's decompressed bytes; a truncated or corrupt stream raises
    :class:`DamagedFileError` naming the file (the one place that turns gzip's bare errors into it)."""

    def __init__(self, path: str | Path):
        self._path = path
        self._stream = gzip.open(path, "rb")

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        try:
            return self._stream.readinto(buffer)
        except GZIP_ERRORS as exc:
            raise DamagedFileError(self._path, exc) from None

    def close(self) -> None:
        if not self.closed:
            self._stream.close()
        super().close()


def open_text(path: str | Path) -> IO[str]:
    """Open a text file for reading, gunzipping when its magic bytes say gzip."""
    if is_gzip(path):
        return io.TextIOWrapper(open_binary(path), encoding="utf-8", errors="replace")
    return open(path, encoding="utf-8", errors="replace")


def open_binary(path: str | Path) -> IO[bytes]:
    """Open a file for reading bytes, gunzipping when its magic bytes say gzip."""
    if is_gzip(path):
        return io.BufferedReader(_GunzipNamingDamage(path), buffer_size=1 << 16)
    return open(path, "rb")


def numbered_lines(path: str | Path) -> Iterator[tuple[int, str]]:
    """``(1-based line number, line)`` of a plain or gzipped text file, line endings kept.

    A damaged gzip stream raises :class:`DamagedFileError` naming the file and the line it
    stopped in.
    """
    number = 0
    with open_text(path) as handle:
        try:
            for number, line in enumerate(handle, start=1):
                yield number, line
        except DamagedFileError as exc:
            raise DamagedFileError(path, exc.cause, number + 1) from None


def digest_json(value) -> str:
    """The compact canonical JSON a content hash is taken of (sorted keys, no spaces, ASCII, no NaN)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False)


def _fsync_folder(folder: Path) -> None:
    with contextlib.suppress(OSError):  # not every filesystem lets a folder be opened
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def create_bytes_if_absent(path: Path, data: bytes) -> bool:
    """Write ``data`` at ``path`` only if nothing is there; ``False`` if something is.

    Atomic with its content: the bytes go to a fsynced temporary file that is hard-linked to
    ``path`` (``link`` refuses an existing name). On a filesystem without hard links the name is
    created with ``O_CREAT | O_EXCL`` and then written (a crash may leave it empty, which still
    counts as taken: the safe side). Raises ``OSError`` when the folder cannot be written.
    """
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    with open(tmp, "xb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    try:
        os.link(tmp, path)
    except FileExistsError:
        return False
    except OSError as exc:
        if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV, errno.EMLINK):
            raise
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            return False
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
    _fsync_folder(path.parent)
    return True
