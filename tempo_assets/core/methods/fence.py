"""The fence: run a third-party method's command under bubblewrap, seeing only its cutoff bundle.

Inside the fence the command sees:

* ``/usr`` read-only (with the host's ``/bin``, ``/lib``... symlinks or read-only binds), so
  system programs (``python3``, ``diamond``) run;
* ``/method``: its own folder, read-only, and the working directory;
* ``$TEMPO_INPUT`` = ``/input``: the cutoff bundle, read-only;
* ``$TEMPO_OUTPUT`` = ``/output``: an empty writable folder (the only writable place besides a
  private, size-limited ``/tmp``);
* a minimal generated ``/etc`` (``passwd``/``group`` naming the sandbox user, ``hosts`` for
  localhost; the host's ``ld.so.cache`` and ``alternatives`` symlinks, nothing else);
* a fresh ``/proc`` and a minimal ``/dev``.

Nothing else: no network (a new network namespace holds only its own loopback), no archive,
artefact store, ``DAGSTER_HOME`` or home directory, and a cleared environment. The command runs
in new user, pid, ipc, uts and cgroup namespaces as an unprivileged uid, in a new session, and
dies with its parent. Limits: wall time (the process group is killed), address space
(``RLIMIT_AS``), file size (``RLIMIT_FSIZE``) plus a watcher that kills the run when the output
folder grows past its limit, and the ``/tmp`` tmpfs size.

The command (``/bin/sh -c``) is the pid namespace's first process itself (``--as-pid-1``, no bwrap
init above it), so bwrap waits for it: its CPU, and that of every process it waited for, reaches the
``RUSAGE_CHILDREN`` of the process that ran the fence (a step's ``tempo/children_cpu_s``). With bwrap's init,
bwrap exits on the init's report of the command's exit without waiting for the init, and no waiting
parent was ever charged with the sandbox's CPU.
"""
from __future__ import annotations

import os
import resource
import shlex
import shutil
import signal
import subprocess
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping

from tempo_assets.core.base.errors import TempoInputError
from tempo_assets.core.base.liveness import owned_temporary_folder

INPUT, OUTPUT, METHOD = "/input", "/output", "/method"
SANDBOX_UID = 65534  # nobody
TOP_LEVEL_LINKS = ("bin", "sbin", "lib", "lib32", "lib64", "libx32")
HOST_ETC = ("ld.so.cache", "alternatives")
TAIL_LINES = 20

__all__ = ["FenceLimits", "FenceResult", "MissingBubblewrap", "fence_command", "find_bwrap", "run_fenced"]


class MissingBubblewrap(TempoInputError):
    """bubblewrap is not installed: the message says how to install it."""


@dataclass(frozen=True)
class FenceLimits:
    """Limits of one fenced run: wall seconds, address space, output bytes and files, /tmp bytes, threads."""

    timeout_s: float = 3600
    memory_bytes: int = 4 << 30
    output_bytes: int = 1 << 30
    tmp_bytes: int = 1 << 30
    threads: int = 1
    poll_s: float = 0.1
    output_files: int = 10_000  # bytes alone do not bound inodes

    def __post_init__(self):
        for name in ("timeout_s", "memory_bytes", "output_bytes", "tmp_bytes", "threads", "output_files"):
            if getattr(self, name) <= 0:
                raise TempoInputError(f"fence limit {name} must be > 0, got {getattr(self, name)}")


@dataclass
class FenceResult:
    """What a fenced run did: exit code, why it stopped, its output folder and its log's tail."""

    returncode: int | None
    seconds: float
    output: Path
    timed_out: bool = False
    output_exceeded: bool = False
    stdout_tail: list[str] = field(default_factory=list)
    stderr_tail: list[str] = field(default_factory=list)

    @property
    def failure(self) -> str | None:
        """Why the run failed, or None when it exited 0 within its limits."""
        if self.timed_out:
            return f"timed out after {self.seconds:.0f} s"
        if self.output_exceeded:
            return "output exceeded its size or file-count limit (killed)"
        if self.returncode != 0:
            how = (f"killed by signal {signal.Signals(-self.returncode).name}" if self.returncode and self.returncode < 0
                   else f"exited with status {self.returncode}")
            tail = " | ".join(self.stderr_tail[-3:])
            return f"{how}" + (f"; stderr: {tail}" if tail else "")
        return None


def find_bwrap() -> str:
    found = shutil.which("bwrap")
    if found is None:
        raise MissingBubblewrap(
            "third-party methods run inside bubblewrap, which is not installed: `apt-get install bubblewrap` "
            "(Debian/Ubuntu package `bubblewrap`) or run `bash scripts/setup_system.sh` as root", path="bwrap")
    return found


def _etc_files(folder: Path) -> dict[str, Path]:
    """Generated /etc files: the sandbox user and localhost, nothing from the host's accounts."""
    files = {
        "passwd": f"tempo:x:{SANDBOX_UID}:{SANDBOX_UID}:tempo method:/tmp:/usr/sbin/nologin\n",
        "group": f"tempo:x:{SANDBOX_UID}:\n",
        "hosts": "127.0.0.1 localhost\n::1 localhost\n",
        "hostname": "tempo-fence\n",
    }
    out = {}
    for name, text in files.items():
        path = folder / name
        path.write_text(text, encoding="utf-8")
        out[f"/etc/{name}"] = path
    return out


@dataclass(frozen=True)
class FenceSpec:
    """What runs in the fence: ``command`` (through ``/bin/sh -c``) with the method's folder
    (read-only, the working directory), the bundle (read-only) and the output folder (writable)."""

    command: str
    method_dir: Path
    bundle_dir: Path
    output_dir: Path


def fence_command(spec: FenceSpec, etc_dir: Path, limits: FenceLimits, env: Mapping[str, str] | None = None,
                  bwrap: str | None = None) -> list[str]:
    """The argv running ``spec.command`` (through ``/bin/sh -c``) in the fence, limits included."""
    bwrap = bwrap or find_bwrap()
    argv = []
    prlimit = shutil.which("prlimit")
    limits_args = [f"--as={int(limits.memory_bytes)}", f"--fsize={int(limits.output_bytes) + 1}"]
    if prlimit:  # util-linux; without it run_fenced sets the same limits in the child before exec
        argv += [prlimit, *limits_args, "--"]
    argv += [bwrap, "--unshare-all", "--unshare-user", "--as-pid-1", "--uid", str(SANDBOX_UID),
             "--gid", str(SANDBOX_UID), "--hostname", "tempo-fence", "--die-with-parent", "--new-session", "--clearenv",
             "--ro-bind", "/usr", "/usr"]
    argv += _system_binds(etc_dir)
    argv += ["--proc", "/proc", "--dev", "/dev", "--size", str(int(limits.tmp_bytes)), "--tmpfs", "/tmp",
             "--ro-bind", str(spec.method_dir), METHOD, "--ro-bind", str(spec.bundle_dir), INPUT,
             "--bind", str(spec.output_dir), OUTPUT, "--chdir", METHOD]
    argv += _environment_args(limits, env)
    return argv + ["--", "/bin/sh", "-c", spec.command]


def _system_binds(etc_dir: Path) -> list[str]:
    """The top-level links and folders of ``/``, the host's harmless ``/etc`` files and the fence's own."""
    argv = []
    for name in TOP_LEVEL_LINKS:
        path = Path("/") / name
        if path.is_symlink():
            argv += ["--symlink", os.readlink(path), str(path)]
        elif path.is_dir():
            argv += ["--ro-bind", str(path), str(path)]
    for name in HOST_ETC:
        if (Path("/etc") / name).exists():
            argv += ["--ro-bind", f"/etc/{name}", f"/etc/{name}"]
    for dest, path in _etc_files(etc_dir).items():
        argv += ["--ro-bind", str(path), dest]
    return argv


def _environment_args(limits: FenceLimits, env: Mapping[str, str] | None) -> list[str]:
    """``--setenv`` for the fence's whole environment (nothing of the host's), sorted."""
    threads = str(limits.threads)
    environment = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/tmp", "TMPDIR": "/tmp", "LANG": "C.UTF-8",
                   "USER": "tempo", "TEMPO_INPUT": INPUT, "TEMPO_OUTPUT": OUTPUT, "TEMPO_THREADS": threads,
                   "OMP_NUM_THREADS": threads, "PYTHONDONTWRITEBYTECODE": "1", **(env or {})}
    argv = []
    for key, value in sorted(environment.items()):
        argv += ["--setenv", key, str(value)]
    return argv


def _rlimits(limits: FenceLimits) -> Callable[[], None]:
    """The address-space and file-size limits, set in the child (when there is no ``prlimit``)."""
    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (int(limits.memory_bytes),) * 2)
        resource.setrlimit(resource.RLIMIT_FSIZE, (int(limits.output_bytes) + 1,) * 2)

    return apply


def _folder_usage(folder: Path) -> tuple[int, int]:
    """``(bytes, entries)`` under ``folder`` (files, folders and links all take an inode)."""
    total, entries = 0, 0
    for root, dirs, files in os.walk(folder):
        entries += len(dirs) + len(files)
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except FileNotFoundError:
                continue
    return total, entries


def _over(folder: Path, limits: FenceLimits) -> bool:
    size, entries = _folder_usage(folder)
    return size > limits.output_bytes or entries > limits.output_files


def _pump(stream, name: str, tail: deque, on_line: Callable[[str, str], None] | None, max_lines: int) -> None:
    lines = 0
    for raw in iter(stream.readline, b""):
        line = raw.decode("utf-8", "replace").rstrip("\n")
        tail.append(line)
        lines += 1
        if on_line is not None and lines <= max_lines:
            on_line(name, line)
        elif on_line is not None and lines == max_lines + 1:
            on_line(name, f"... more {name} not logged (over {max_lines} lines)")
    stream.close()


def _kill_group(process: subprocess.Popen) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def run_fenced(spec: FenceSpec, limits: FenceLimits = FenceLimits(), env: Mapping[str, str] | None = None,
               on_line: Callable[[str, str], None] | None = None, max_logged_lines: int = 2000) -> FenceResult:
    """Run ``spec.command`` in the fence; stream its stdout/stderr lines to ``on_line(stream, line)``.

    ``spec.output_dir`` must exist and be empty (it becomes ``$TEMPO_OUTPUT``). The run is killed
    (its whole process group, and with it the sandbox's pid namespace) when it outlives
    ``limits.timeout_s`` or its output folder grows past ``limits.output_bytes``.
    """
    method_dir, bundle_dir, output_dir = (Path(p).resolve() for p in (spec.method_dir, spec.bundle_dir,
                                                                       spec.output_dir))
    for what, folder in (("method folder", method_dir), ("bundle", bundle_dir), ("output folder", output_dir)):
        if not folder.is_dir():
            raise TempoInputError(f"{what} does not exist", path=folder)
    if any(output_dir.iterdir()):
        raise TempoInputError("output folder must start empty", path=output_dir)
    resolved = FenceSpec(spec.command, method_dir, bundle_dir, output_dir)
    with owned_temporary_folder("tempo_fence_etc_") as etc:  # a killed run's is swept by the next run
        argv = fence_command(resolved, Path(etc), limits, env)
        started = time.monotonic()
        preexec = None if argv[0].endswith("prlimit") else _rlimits(limits)
        process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   start_new_session=True, close_fds=True, preexec_fn=preexec)
        tails = {"stdout": deque(maxlen=TAIL_LINES), "stderr": deque(maxlen=TAIL_LINES)}
        pumps = [threading.Thread(target=_pump, args=(getattr(process, n), n, tails[n], on_line, max_logged_lines),
                                  daemon=True) for n in tails]
        for pump in pumps:
            pump.start()
        timed_out = exceeded = False
        try:
            while process.poll() is None:
                if time.monotonic() - started > limits.timeout_s:
                    timed_out = True
                elif _over(output_dir, limits):
                    exceeded = True
                if timed_out or exceeded:
                    _kill_group(process)
                    break
                time.sleep(limits.poll_s)
        finally:
            if process.poll() is None:
                _kill_group(process)
            process.wait()
            for pump in pumps:
                pump.join(timeout=10)
    seconds = time.monotonic() - started
    # a file stopped by RLIMIT_FSIZE sits exactly at the limit; the size watcher may not have seen it
    exceeded = exceeded or _over(output_dir, limits)
    return FenceResult(returncode=process.returncode, seconds=seconds, output=output_dir, timed_out=timed_out,
                       output_exceeded=exceeded, stdout_tail=list(tails["stdout"]), stderr_tail=list(tails["stderr"]))


def describe_fence(limits: FenceLimits) -> str:
    """One line for logs: what the fence allows."""
    return (f"bwrap fence: {METHOD} ro, {INPUT} ro, {OUTPUT} rw, /usr ro, private /tmp, no network; "
            f"timeout {limits.timeout_s:g}s, memory {limits.memory_bytes >> 20} MiB, "
            f"output {limits.output_bytes >> 20} MiB")


def quote(argv: list[str]) -> str:
    return " ".join(shlex.quote(a) for a in argv)
