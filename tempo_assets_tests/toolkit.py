"""The suite's one test toolkit: paths, guards on what a test needs from outside, runners, fixture rewrites.

- **Paths**: ``REPO``, the repository's ``DATA`` (the demo archive), and the lab's real files beside the
  repository: ``SHARED``, ``SHARED_DATA``, ``GOA_ARCHIVE``; :func:`shared` hands a path under them to a
  test, or says it is missing.
- **Guards**: a test that needs a program or file from outside the repository (diamond, chromium,
  bubblewrap, the cafaeval 1.3.0 venv, ``../shared``) is marked :func:`needs` (checked before any of its
  fixtures) or calls :func:`require` / :func:`shared`. When it is missing the test is skipped on a
  developer's machine and **fails under CI** (``CI`` set, as ``.ci/run`` exports it), naming what is
  missing and how to get it: nothing that guards a promise disappears from a CI run.
- **Runners**: :func:`tempo` and :func:`dagster` run the console scripts a user runs, from this
  interpreter's environment, in the repository.
- **Fixture rewrites**: :func:`rewrite_fixtures` writes regenerated fixtures or snapshots when asked
  (``TEMPO_WRITE_FIXTURES=1``, ``TEMPO_UPDATE_SNAPSHOT=1``) and then fails the test, so a rewrite is
  never a pass: the new files are reviewed and committed, and the next run compares against them.
"""
from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Callable, Mapping, NoReturn

import pytest

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "data"
SHARED = REPO.parent / "shared"
SHARED_DATA = SHARED / "data"
GOA_ARCHIVE = SHARED_DATA / "goa_archive"

SETUP_SYSTEM = "run `bash scripts/setup_system.sh` as root"
SETUP_SYSTEM_TEST = "run `bash scripts/setup_system.sh --test` as root"
CAFAEVAL_SETUP = ("create it with `bash scripts/setup.sh --test` (or python3 -m venv .venv-cafaeval && "
                  ".venv-cafaeval/bin/pip install cafaeval==1.3.0), or point $TEMPO_CAFAEVAL_PYTHON at one")


def in_ci() -> bool:
    """True when running under CI (``CI`` set to anything but empty, ``0`` or ``false``)."""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def unavailable(what: str, how: str) -> NoReturn:
    """Skip the current test because ``what`` is missing; under CI, fail it instead."""
    message = f"{what} is missing: {how}"
    if in_ci():
        pytest.fail(f"{message} (CI runs every test: it must be provided)", pytrace=False)
    pytest.skip(message)


def _chromium() -> str | None:
    return next((p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None)


def _cafaeval() -> str | None:
    path = Path(os.environ.get("TEMPO_CAFAEVAL_PYTHON", REPO / ".venv-cafaeval" / "bin" / "python"))
    return str(path) if path.exists() else None


def _console_script(name: str) -> Callable[[], str | None]:
    def find() -> str | None:
        path = Path(sys.executable).with_name(name)
        return str(path) if path.exists() else None
    return find


# name -> (how to find it: its path or None, what it is, how to get it)
REQUIREMENTS: dict[str, tuple[Callable[[], str | None], str, str]] = {
    "diamond": (lambda: shutil.which("diamond"), "diamond (Debian package diamond-aligner)", SETUP_SYSTEM),
    "chromium": (_chromium, "chromium (the report's browser test)", SETUP_SYSTEM_TEST),
    "bwrap": (lambda: shutil.which("bwrap"), "bubblewrap (the method fence)", SETUP_SYSTEM),
    "cafaeval": (_cafaeval, "the cafaeval 1.3.0 reference interpreter", CAFAEVAL_SETUP),
    "shared": (lambda: str(SHARED_DATA) if SHARED_DATA.is_dir() else None,
               f"../shared/data ({SHARED_DATA}), the lab's real files beside the repository",
               "clone or mount the lab's shared folder next to the repository"),
    "tempo-eval": (_console_script("tempo-eval"), "the tempo-eval console script",
                   "install the project: `bash scripts/setup.sh --test`"),
}


def require(name: str) -> str:
    """The path of requirement ``name`` (a key of ``REQUIREMENTS``); skips, or fails under CI, without it."""
    find, what, how = REQUIREMENTS[name]
    found = find()
    if found is None:
        unavailable(what, how)
    return found


def needs(*names: str) -> pytest.MarkDecorator:
    """``@needs("diamond", ...)``: the requirements are checked before the test's fixtures are set up."""
    unknown = [n for n in names if n not in REQUIREMENTS]
    if unknown:
        raise ValueError(f"unknown requirement(s) {unknown}; known: {sorted(REQUIREMENTS)}")
    return pytest.mark.needs(*names)


def check_needs(item: pytest.Item) -> None:
    """The ``needs`` markers of ``item`` (called by the root conftest's ``pytest_runtest_setup``)."""
    for marker in item.iter_markers("needs"):
        for name in marker.args:
            require(name)


needs_diamond = needs("diamond")
needs_chromium = needs("chromium")
needs_bwrap = needs("bwrap")
needs_cafaeval = needs("cafaeval")
needs_shared = needs("shared")


def shared(path: str | Path) -> Path:
    """``path`` (absolute, or relative to ``SHARED_DATA``) when it exists; skips, or fails under CI, when not."""
    path = SHARED_DATA / path if not Path(path).is_absolute() else Path(path)
    if not path.exists():
        try:
            shown = "../shared/" + str(path.relative_to(SHARED))
        except ValueError:
            shown = str(path)
        unavailable(f"{shown} ({path}), one of the lab's real files", "clone or mount the lab's shared folder "
                                                                       "next to the repository")
    return path


def cafaeval_python() -> Path:
    """The cafaeval 1.3.0 reference interpreter (``.venv-cafaeval`` or ``$TEMPO_CAFAEVAL_PYTHON``)."""
    return Path(require("cafaeval"))


def chromium() -> str:
    return require("chromium")


def script(name: str) -> str:
    """A console script of this interpreter's environment (``tempo``, ``dagster``, ``tempo-eval``)."""
    path = Path(sys.executable).with_name(name)
    if not path.exists():
        raise FileNotFoundError(f"{path}: install the project (`bash scripts/setup.sh --test`)")
    return str(path)


def load_benchmark(name: str):
    """The module ``benchmarks/<name>.py`` (registered in ``sys.modules``: its dataclasses look it up there)."""
    spec = importlib.util.spec_from_file_location(name, REPO / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _run(command: list[str], env: Mapping[str, str] | None, cwd: Path | str | None,
         timeout: float) -> subprocess.CompletedProcess:
    merged = dict(os.environ)
    merged.update(env or {})
    return subprocess.run(command, cwd=str(cwd or REPO), env=merged, capture_output=True, text=True,
                          timeout=timeout)


def tempo(*args: str, env: Mapping[str, str] | None = None, cwd: Path | str | None = None,
          timeout: float = 600) -> subprocess.CompletedProcess:
    """``tempo ARGS`` as a user runs it (the console script), with ``env`` over the current environment."""
    return _run([script("tempo"), *map(str, args)], env, cwd, timeout)


def dagster(*args: str, env: Mapping[str, str] | None = None, cwd: Path | str | None = None,
            timeout: float = 600) -> subprocess.CompletedProcess:
    """``dagster ARGS`` (the console script), with ``env`` over the current environment."""
    return _run([script("dagster"), *map(str, args)], env, cwd, timeout)


REWRITE_VARIABLES = ("TEMPO_WRITE_FIXTURES", "TEMPO_UPDATE_SNAPSHOT")


def rewrite_fixtures(variable: str, write: Callable[[], object], what: str) -> None:
    """When ``$variable`` is set, ``write()`` the regenerated ``what`` and fail the test.

    A rewrite compares the code with itself, so it must never pass: the test fails with "fixtures
    rewritten: review and commit", and the next run (without the variable) checks the code against
    the reviewed files.
    """
    if variable not in REWRITE_VARIABLES:
        raise ValueError(f"{variable} is not one of {REWRITE_VARIABLES}")
    if os.environ.get(variable, "").strip() in ("", "0"):
        return
    write()
    pytest.fail(f"fixtures rewritten: review and commit ({what}; {variable} set, so nothing was compared)",
                pytrace=False)


def wait_until(condition: Callable[[], bool], what: str, limit_s: float = 30, poll_s: float = 0.05) -> None:
    """Return as soon as ``condition()`` holds; fail naming ``what`` if it still does not after ``limit_s``.

    For events another process brings about (a killed process gone from ``/proc``, a server answering):
    the test proceeds on the event itself, and ``limit_s`` only bounds how long a broken build hangs.
    """
    import time

    deadline = time.monotonic() + limit_s
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"{what}: not after {limit_s:g} s")
        time.sleep(poll_s)


class Listener:
    """A TCP listener on 127.0.0.1 that counts every connection made to it, exactly.

    Nothing serves it while the clients run: the kernel completes each handshake and queues the
    connection in the backlog (a client's ``connect`` returns then), so once the clients are done,
    :meth:`drain` accepts every queued connection and reads what each sent until the client's end
    closed. No thread, and no connection missed.
    """

    def __init__(self, backlog: int = 64):
        import socket

        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(backlog)
        self.port: int = self.sock.getsockname()[1]
        self.accepted = 0
        self.received = b""

    def drain(self, at_least: int = 0, limit_s: float = 10) -> tuple[int, bytes]:
        """Accept every queued connection (waiting for one while fewer than ``at_least`` came in all)
        and read each until its client closed it; the totals so far ``(accepted, received)``."""
        import socket

        while True:
            self.sock.settimeout(limit_s if self.accepted < at_least else 0)
            try:
                conn, _ = self.sock.accept()
            except (BlockingIOError, socket.timeout):
                return self.accepted, self.received
            self.accepted += 1
            with conn:
                conn.settimeout(limit_s)
                while True:
                    try:
                        chunk = conn.recv(65536)
                    except (socket.timeout, ConnectionError):
                        break
                    if not chunk:
                        break
                    self.received += chunk

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> "Listener":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def error_chain(error) -> list[str]:
    """``"Class: message"`` of a Dagster ``SerializableErrorInfo`` and each of its causes, outermost first."""
    chain = []
    while error is not None:
        chain.append(f"{error.cls_name}: {error.message.strip()}")
        error = error.cause
    return chain


def step_failures(instance, run_id: str) -> dict[str, list[str]]:
    """Step key -> the :func:`error_chain` of its failure, for every failed step of run ``run_id``."""
    import dagster as dg

    return {entry.step_key: error_chain(entry.dagster_event.step_failure_data.error)
            for entry in instance.all_logs(run_id, of_type=dg.DagsterEventType.STEP_FAILURE)}
