"""A full disk for tests: a small ext4 image mounted with ``mount -o loop`` (root only).

No tmpfs or quota is needed and nothing is faked: writes on it fail with the kernel's own
``ENOSPC``. Where the tests do not run as root, or ``mount`` is not allowed, they are skipped
with that reason on a developer's machine and fail under CI (``toolkit.unavailable``): CI runs as
root, as the README's commands do.
"""
from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from tempo_assets_tests.toolkit import unavailable


@pytest.fixture
def small_filesystem(tmp_path):
    """A 24 MiB ext4 filesystem (no blocks reserved for root) mounted on ``tmp_path/fs``;
    ``fill()`` leaves it with no free block."""
    if os.geteuid() != 0:
        unavailable("root (a full disk is simulated with a loop-mounted ext4 image)", "run the tests as root")
    if shutil.which("mkfs.ext4") is None:
        unavailable("mkfs.ext4 (e2fsprogs)", "apt-get install e2fsprogs")
    image, mount_point = tmp_path / "fs.img", tmp_path / "fs"
    mount_point.mkdir()
    with open(image, "wb") as handle:
        handle.truncate(24 << 20)
    subprocess.run(["mkfs.ext4", "-q", "-F", "-m", "0", str(image)], check=True, capture_output=True)
    mounted = subprocess.run(["mount", "-o", "loop", str(image), str(mount_point)], capture_output=True, text=True)
    if mounted.returncode != 0:
        unavailable(f"mount -o loop ({mounted.stderr.strip()})", "run the tests where root may mount a loop device")

    class FileSystem:
        path = mount_point

        @staticmethod
        def fill(leave_kib: int = 0) -> None:
            """Take every free block but ``leave_kib`` KiB."""
            fd = os.open(mount_point / "filler", os.O_WRONLY | os.O_CREAT, 0o644)
            try:
                stat = os.statvfs(mount_point)
                size = stat.f_bavail * stat.f_frsize - (leave_kib << 10)
                while size > 0:
                    try:
                        os.posix_fallocate(fd, 0, size)
                        break
                    except OSError:  # the file's own metadata blocks: ask for a little less
                        size -= 64 << 10
                if not leave_kib:
                    for chunk in (1 << 12, 1):  # what is left of the last blocks
                        try:
                            while True:
                                os.pwrite(fd, b"\0" * chunk, os.fstat(fd).st_size)
                        except OSError:
                            continue
            finally:
                os.close(fd)

        @staticmethod
        def free_up() -> None:
            (mount_point / "filler").unlink()

    try:
        yield FileSystem
    finally:
        subprocess.run(["umount", str(mount_point)], check=False, capture_output=True)
