"""TEST is read once: durable, atomic claims per window, taken before any TEST data is read or scored.

Two assets touch a window's TEST: ``test_growth`` (the only reader of raw TEST data) and
``test_score`` (which scores the frozen recipe on test_growth's value). Each takes its own claim
on the window, so each is materialised at most once, whichever selection launched it.

Why an object in the artefact store, not a database row
-------------------------------------------------------
The claim must hold on the embedded default (a local folder + a SQLite Dagster instance) and on
the production deployment (Postgres + an object store) alike, whatever launches the run: the
``dagster`` CLI, ``tempo materialize``, the UI, the sensor or a backfill, in parallel or later.
The Dagster instance's database is not ours to add a table to, and its event log has no
"insert if absent" we can rely on; the artefact store is ours and every deployment has one. A
claim is therefore a **create-if-absent object** in the artefact store, beside the artefacts:

``<artefact root>/_test_claims/<window>.<asset>.claim.json`` (asset ``test_growth`` or ``test_score``)
    the claim: window, asset, run id, when, host and pid. Locally it is written to a temporary file
    (fsynced) and then ``os.link``-ed to its final name; ``link`` fails with ``EEXIST`` when the
    name exists, so exactly one of any number of concurrent claimants wins, and the winner's
    file appears complete (no reader ever sees half a claim). On an object store the same
    operation is a conditional PUT (``If-None-Match: *``), which S3 and GCS answer with 412 for
    every writer but the first.
``<artefact root>/_test_claims/<window>.burned.json``
    written (create-if-absent too) by ``tempo test-claim release``: the window's TEST was read
    and never reported. A burned window is never claimed again by either asset, so never re-scored.
``<artefact root>/_test_claims/test_claims.log``
    append-only JSON lines: every claim, refusal and release, with who and why.

A claim that cannot be taken (the folder is unwritable, the store is down) raises
:class:`ClaimUnavailable`: the caller refuses to score; it never scores unclaimed. A claim held by
another run, or a burned window, raises :class:`ClaimRefused` before anything of TEST is read.

States a window is shown in (``tempo test-claim list``): ``claimed`` (a claim, no stored score: in
flight, or its run died after reading TEST), ``read`` (TEST growth stored, the scoring never
started: ``tempo materialize`` scores it; nothing to release), ``scored`` (a stored TEST score),
``burned`` (released: TEST read, not reported). :data:`TEST_STATES` refines them into the window's TEST lifecycle, each
state with the one command that moves it on (``tempo status``, ``tempo audit-cutoffs``).
"""
from __future__ import annotations

import contextlib
import getpass
import json
import os
import re
import socket
import uuid
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterable

from tempo_assets.core.base.errors import TempoInputError
from tempo_assets.core.base.io import create_bytes_if_absent
from tempo_assets.core.storage.artefacts import open_location

CLAIMS_FOLDER = "_test_claims"
LOG_NAME = "test_claims.log"
STATES = ("claimed", "read", "scored", "burned")
CLAIMED_ASSETS = ("test_growth", "test_score")  # the TEST read, then the scoring
_SAFE_KEY = re.compile(r"^[0-9A-Za-z][0-9A-Za-z_.\-]*$")


class ClaimUnavailable(TempoInputError):
    """The claim store cannot be written or read: TEST must not be scored (it would be unclaimed)."""


class ClaimRefused(TempoInputError):
    """The window is claimed by another run, or burned: TEST must not be read again."""

    def __init__(self, message: str, window: str, state: str, path: str | Path | None = None):
        super().__init__(message, path=path)
        self.window = window
        self.state = state


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="microseconds")


def _who() -> str:
    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no passwd entry in some containers
        user = str(os.getuid()) if hasattr(os, "getuid") else "unknown"
    return f"{user}@{socket.gethostname()}"


@dataclass(frozen=True)
class TestClaim:
    """One window's claim: which run took it, when, and where that run ran."""

    __test__ = False  # not a pytest class

    window: str
    run_id: str
    claimed_at: str
    host: str
    pid: int
    asset: str = "test_growth"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any], path: Path) -> "TestClaim":
        try:
            return cls(window=str(data["window"]), run_id=str(data["run_id"]), claimed_at=str(data["claimed_at"]),
                       host=str(data["host"]), pid=int(data["pid"]), asset=str(data.get("asset", "test_growth")))
        except (KeyError, TypeError, ValueError) as exc:
            raise TempoInputError(f"claim lacks or mangles key {exc}", path=path) from exc


@dataclass(frozen=True)
class Burn:
    """A released claim: the window's TEST was read and is never reported nor re-scored."""

    window: str
    reason: str
    released_at: str
    released_by: str
    claim_run_id: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class TestState:
    """One state of a window's TEST lifecycle: what it means and the one command that moves it on."""

    __test__ = False  # not a pytest class

    name: str
    meaning: str
    next_step: str


# The TEST lifecycle of a window (docs/PROTOCOL.md: TEST growth is read once by test_growth and
# scored once by test_score with the frozen recipe). Every state but the last two has a way
# forward; {window}, {run}, {asset} and {reason} are filled in by WindowTest.describe.
TEST_STATES: dict[str, TestState] = {state.name: state for state in (
    TestState("unread", "TEST not read yet", "tempo materialize --window {window}"),
    TestState("reading", "test_growth is reading TEST in run {run}, which is still running",
              "wait for run {run} to end (tempo status)"),
    TestState("read", "TEST growth read and stored by test_growth, not scored yet",
              "tempo materialize --window {window} (test_score scores it, once)"),
    TestState("scoring", "test_score is scoring TEST in run {run}, which is still running",
              "wait for run {run} to end (tempo status)"),
    TestState("dead", "claimed by run {run}, which ended without storing {asset}: TEST may have been read",
              "tempo test-claim release {window} --reason TEXT (burns the window: TEST read, not reported)"),
    TestState("scored", "TEST scored once with the frozen recipe", "tempo report --window {window}"),
    TestState("burned", "TEST read, not reported (released: {reason})", "none: a burned window is never re-scored"),
)}


@dataclass(frozen=True)
class WindowTest:
    """A window's place in :data:`TEST_STATES`, with the run and asset it concerns."""

    __test__ = False  # not a pytest class

    window: str
    state: str
    run: str = ""
    asset: str = ""
    reason: str = ""

    def describe(self) -> str:
        """``<meaning>; next: <command>`` with the window's run, asset and reason filled in."""
        state = TEST_STATES[self.state]
        fields = {"window": self.window, "run": self.run or "unknown", "asset": self.asset, "reason": self.reason}
        return f"{state.meaning.format(**fields)}; next: {state.next_step.format(**fields)}"


def window_test_state(window: str, claims: dict[str, TestClaim], burn: Burn | None, stored: Iterable[str],
                      ended: Callable[[TestClaim], bool | None]) -> WindowTest:
    """Where ``window`` stands in :data:`TEST_STATES`.

    ``stored``: which of ``test_growth``/``test_score`` the artefact store holds for the window;
    ``ended(claim)``: whether the claiming run is over (``None`` when it cannot be told, e.g. a run
    on another host: then it is taken to be running).
    """
    stored = set(stored)
    if burn is not None:
        return WindowTest(window, "burned", burn.claim_run_id, reason=burn.reason)
    if "test_score" in stored:
        return WindowTest(window, "scored", asset="test_score")
    held = claims.get("test_score") or (claims.get("test_growth") if "test_growth" not in stored else None)
    if held is not None:
        running = "scoring" if held.asset == "test_score" else "reading"
        return WindowTest(window, "dead" if ended(held) else running, held.run_id, held.asset)
    return WindowTest(window, "read" if "test_growth" in stored else "unread")


@dataclass(frozen=True)
class ClaimStatus:
    """A window's claims with its state (``claimed``, ``scored`` or ``burned``) and why.

    ``claims`` maps each claimed asset (``test_growth``, ``test_score``) to its claim; ``claim`` is
    the first of them (the TEST read's when there is one).
    """

    window: str
    state: str
    claims: dict[str, TestClaim]
    burn: Burn | None
    reason: str

    @property
    def claim(self) -> TestClaim | None:
        return next((self.claims[a] for a in CLAIMED_ASSETS if a in self.claims), None)

    def line(self) -> str:
        """``test_score[<window>] <state> <reason>`` (the ``tempo status`` line)."""
        return f"test_score[{self.window}] {self.state} {self.reason}"

    def to_dict(self) -> dict[str, Any]:
        return {"window": self.window, "state": self.state, "reason": self.reason,
                "claim": self.claim.to_dict() if self.claim else None,
                "claims": {a: c.to_dict() for a, c in self.claims.items()},
                "burn": self.burn.to_dict() if self.burn else None}


def create_if_absent(path: Path, document: dict[str, Any]) -> bool:
    """Write ``document`` as JSON at ``path`` only if nothing is there; ``False`` if something is."""
    return create_bytes_if_absent(path, _document(document))


class _FolderFiles:
    """The claim files in a local folder; the log is one ``O_APPEND`` file."""

    def __init__(self, root: Path):
        self.root = root

    def where(self, name: str) -> Path:
        return self.root / name

    def read_text(self, name: str) -> str:  # FileNotFoundError when absent
        return (self.root / name).read_text(encoding="utf-8")

    def create(self, name: str, data: bytes) -> bool:
        return create_bytes_if_absent(self.root / name, data)

    def names(self) -> list[str]:
        return [p.name for p in self.root.iterdir()] if self.root.is_dir() else []

    def ensure(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)

    @property
    def log_where(self) -> Path:
        return self.root / LOG_NAME

    def append_log(self, line: bytes) -> None:
        fd = os.open(self.log_where, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line)
            os.fsync(fd)
        finally:
            os.close(fd)

    def log_lines(self) -> list[tuple[str, str]]:
        """``(where, line)`` of every log entry, oldest first."""
        try:
            lines = self.log_where.read_text(encoding="utf-8").splitlines()
        except FileNotFoundError:
            return []
        return [(f"{self.log_where}:{n}", line) for n, line in enumerate(lines, start=1)]


class _ObjectFiles:
    """The claim files on an object store (a ``core.storage.artefacts`` Location under the claims prefix).

    A claim or burn is a conditional create (``If-None-Match: *``); an object store has no
    append, so every log entry is its own object ``test_claims.log/<time>-<uuid>.json``,
    created once and never rewritten, read back in name (time) order.
    """

    def __init__(self, location):
        self.location = location

    def where(self, name: str) -> str:
        return f"{self.location}/{name}"

    def read_text(self, name: str) -> str:
        try:
            return self.location.read_bytes(name).decode("utf-8")
        except FileNotFoundError:
            raise
        except Exception as exc:  # noqa: BLE001 - a client error: the store cannot be read
            raise OSError(f"{type(exc).__name__}: {exc}") from None

    def create(self, name: str, data: bytes) -> bool:
        try:
            return self.location.create(name, data)
        except FileExistsError:
            return False
        except OSError:
            raise
        except Exception as exc:  # noqa: BLE001
            raise OSError(f"{type(exc).__name__}: {exc}") from None

    def names(self) -> list[str]:
        return self.location.list("")

    def ensure(self) -> None:
        """An object store has no folders to create."""

    @property
    def log_where(self) -> str:
        return self.where(LOG_NAME)

    def append_log(self, line: bytes) -> None:
        stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S%fZ")
        self.create(f"{LOG_NAME}/{stamp}-{uuid.uuid4().hex}.json", line)

    def log_lines(self) -> list[tuple[str, str]]:
        names = sorted(n for n in self.location.list(LOG_NAME) if n.endswith(".json"))
        return [(self.where(f"{LOG_NAME}/{n}"), self.location.read_bytes(f"{LOG_NAME}/{n}").decode("utf-8").strip())
                for n in names]


class ClaimStore:
    """The TEST claims of one artefact store (see the module docstring for the layout).

    ``root``: the claims folder, or a ``core.storage.artefacts`` Location of the claims prefix on an
    object store (``ClaimStore.of`` / ``ClaimStore.beside`` pick the right one).
    """

    def __init__(self, root):
        if isinstance(root, (str, os.PathLike)) and "://" not in str(root):
            self.root = Path(root)
            self._files = _FolderFiles(self.root)
        elif isinstance(root, str):
            self.root = root.rstrip("/")
            self._files = _ObjectFiles(open_location(self.root))
        else:
            self.root = str(root)
            self._files = _ObjectFiles(root)

    @classmethod
    def of(cls, store) -> "ClaimStore":
        """The claims of a ``core.storage.artefacts.ArtefactStore``, in the store itself (its folder, or its
        object store: every machine that shares the store shares its claims)."""
        if store.root is not None:
            return cls.beside(store.root)
        return cls.beside(str(store.location))

    @classmethod
    def beside(cls, artefacts_root: str | Path) -> "ClaimStore":
        """The claims kept in the artefact store at ``artefacts_root`` (a folder or a URL)."""
        if isinstance(artefacts_root, str) and "://" in artefacts_root:
            return cls(f"{artefacts_root.rstrip('/')}/{CLAIMS_FOLDER}")
        return cls(Path(artefacts_root) / CLAIMS_FOLDER)

    @property
    def log_path(self) -> Path | str:
        return self._files.log_where

    def claim_path(self, window: str, asset: str = "test_growth") -> Path | str:
        return self._files.where(self._claim_name(window, asset))

    @staticmethod
    def _claim_name(window: str, asset: str) -> str:
        if asset not in CLAIMED_ASSETS:
            raise TempoInputError(f"{asset!r} takes no TEST claim (only {', '.join(CLAIMED_ASSETS)})")
        return f"{_checked(window)}.{asset}.claim.json"

    def burn_path(self, window: str) -> Path | str:
        return self._files.where(self._burn_name(window))

    @staticmethod
    def _burn_name(window: str) -> str:
        return f"{_checked(window)}.burned.json"

    # --- reading ---------------------------------------------------------------------------

    def _read(self, name: str) -> dict[str, Any] | None:
        path = self._files.where(name)
        try:
            text = self._files.read_text(name)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise ClaimUnavailable(f"cannot read the claim store: {exc}", path=path) from exc
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            if not text.strip():  # created without link support and killed before its write
                return {}
            raise TempoInputError(f"corrupt claim file: {exc}", path=path, line=exc.lineno) from exc
        if not isinstance(data, dict):
            raise TempoInputError("claim file is not a JSON object", path=path)
        return data

    def get(self, window: str, asset: str = "test_growth") -> TestClaim | None:
        """``asset``'s claim on ``window``, if one was taken."""
        path = self.claim_path(window, asset)
        data = self._read(self._claim_name(window, asset))
        if data is None:
            return None
        if not data:
            return TestClaim(window, run_id="unknown", claimed_at="unknown", host="unknown", pid=-1, asset=asset)
        return TestClaim.from_dict(data, path)

    def claims_of(self, window: str) -> dict[str, TestClaim]:
        """Every claim taken on ``window``, by asset."""
        found = {a: self.get(window, a) for a in CLAIMED_ASSETS}
        return {a: c for a, c in found.items() if c is not None}

    def burn_of(self, window: str) -> Burn | None:
        """The release that burned ``window``, if any."""
        path = self.burn_path(window)
        data = self._read(self._burn_name(window))
        if data is None:
            return None
        try:
            return Burn(**{k: str(data.get(k, "unknown")) for k in Burn.__dataclass_fields__})
        except TypeError as exc:  # pragma: no cover - every field has a default above
            raise TempoInputError(f"corrupt burn record: {exc}", path=path) from exc

    def windows(self) -> list[str]:
        """Every window with a claim or a burn, sorted."""
        try:
            names = self._files.names()
        except OSError as exc:
            raise ClaimUnavailable(f"cannot list the claim store: {exc}", path=str(self.root)) from exc
        suffixes = [f".{a}.claim.json" for a in CLAIMED_ASSETS] + [".burned.json"]
        keys = {name[:-len(s)] for name in names if not name.startswith(".")
                for s in suffixes if name.endswith(s)}
        return sorted(keys)

    def status(self, window: str, is_scored: Callable[[str], bool],
               growth_stored: Callable[[str], bool] = lambda window: False) -> ClaimStatus | None:
        """``window``'s claim state, or ``None`` when it was never claimed.

        ``is_scored(window)`` says whether the artefact store holds the window's TEST score,
        ``growth_stored(window)`` whether it holds its TEST growth: a window whose growth is stored and
        whose scoring never started is ``read`` (:data:`TEST_STATES`), not a claim to release.
        """
        claims, burn = self.claims_of(window), self.burn_of(window)
        if burn is not None:
            return ClaimStatus(window, "burned", claims, burn,
                               f"TEST read, not reported: released {burn.released_at} by {burn.released_by} "
                               f"(claim of run {burn.claim_run_id}): {burn.reason}")
        if not claims:
            return None
        where = "; ".join(f"claimed by run {c.run_id} at {c.claimed_at} on {c.host} pid {c.pid} ({asset})"
                          for asset, c in claims.items())
        if is_scored(window):
            return ClaimStatus(window, "scored", claims, None, f"{where}; TEST score stored")
        stored = ["test_growth"] if growth_stored(window) else []
        test = window_test_state(window, claims, None, stored, ended=lambda claim: True)
        if test.state == "read":
            return ClaimStatus(window, "read", claims, None, f"{where}; {test.describe()}")
        return ClaimStatus(window, "claimed", claims, None,
                           f"{where}; no TEST score stored (in flight, or the run died after "
                           f"reading TEST: `tempo test-claim release {window} --reason TEXT` burns it)")

    def claims(self, is_scored: Callable[[str], bool], windows: Iterable[str] | None = None,
               growth_stored: Callable[[str], bool] = lambda window: False) -> list[ClaimStatus]:
        """The state of every claimed or burned window (or of ``windows``), sorted by window."""
        keys = self.windows() if windows is None else sorted(set(windows))
        found = (self.status(w, is_scored, growth_stored) for w in keys)
        return [s for s in found if s is not None]

    # --- writing ---------------------------------------------------------------------------

    def append_log(self, event: str, window: str, **fields: Any) -> None:
        """Append one JSON line to the log (``O_APPEND``: concurrent writers never interleave a line)."""
        entry = {"at": _now(), "event": event, "window": window, "by": _who(), "pid": os.getpid(), **fields}
        self._files.append_log((json.dumps(entry, sort_keys=True) + "\n").encode("utf-8"))

    def log(self) -> list[dict[str, Any]]:
        """Every entry of the log, oldest first."""
        entries = []
        for where, line in self._files.log_lines():
            try:
                entries.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise TempoInputError(f"corrupt log line: {exc}", path=where) from exc
        return entries

    def _ensure_root(self) -> None:
        try:
            self._files.ensure()
        except OSError as exc:
            raise ClaimUnavailable(f"cannot create the claim store: {exc}; refusing to read or score TEST unclaimed",
                                   path=self.root) from exc

    def claim(self, window: str, run_id: str, asset: str = "test_growth") -> TestClaim:
        """Take ``asset``'s claim on ``window`` for ``run_id``, or raise.

        Raises :class:`ClaimRefused` when the window is burned or ``asset`` already claimed it (by
        any run, this one included: a retried step would read TEST a second time), and
        :class:`ClaimUnavailable` when the store cannot be written.
        """
        path = self.claim_path(window, asset)
        self._ensure_root()
        burn = self.burn_of(window)
        if burn is not None:
            self._log_quietly("refused", window, asset=asset, run_id=run_id, state="burned")
            raise ClaimRefused(
                f"{asset}[{window}] is burned: its TEST was read and not reported (released "
                f"{burn.released_at}: {burn.reason}); it is never re-scored (docs/PROTOCOL.md)",
                window, "burned", path=self.burn_path(window))
        claim = TestClaim(window=window, run_id=str(run_id), claimed_at=_now(), host=socket.gethostname(),
                          pid=os.getpid(), asset=asset)
        try:
            taken = self._files.create(self._claim_name(window, asset), _document(claim.to_dict()))
        except OSError as exc:
            raise ClaimUnavailable(f"cannot write the claim: {exc}; refusing to read or score TEST unclaimed",
                                   path=path) from exc
        if not taken:
            held = self.get(window, asset)
            self._log_quietly("refused", window, asset=asset, run_id=run_id, state="claimed",
                              held_by=held.run_id if held else None)
            raise ClaimRefused(
                f"{asset}[{window}] is already claimed by run {held.run_id} (at {held.claimed_at} on "
                f"{held.host} pid {held.pid}); TEST is read and scored once per window (docs/PROTOCOL.md). "
                "Nothing of TEST was read by this run", window, "claimed", path=path)
        self._log_quietly("claimed", window, asset=asset, run_id=run_id)
        return claim

    def _log_quietly(self, event: str, window: str, **fields: Any) -> None:
        # the claim file is the durable record; a log that cannot be appended does not undo it
        with contextlib.suppress(OSError):
            self.append_log(event, window, **fields)

    def release(self, window: str, reason: str, is_scored: Callable[[str], bool],
                growth_stored: Callable[[str], bool] = lambda window: False) -> Burn:
        """Burn ``window``'s claims: an explicit, logged act; neither asset is claimed afterwards.

        Only a ``claimed`` window (a claim, no stored score) can be released; ``reason`` is
        required. A ``read`` window (its TEST growth stored by a run that died before the scoring
        started) is refused: nothing of TEST was lost, and ``test_score`` scores the stored growth
        once (docs/PROTOCOL.md's TEST states). Raises :class:`TempoInputError` otherwise,
        :class:`ClaimUnavailable` when the store cannot be written.
        """
        if not reason or not reason.strip():
            raise TempoInputError(f"releasing TEST of window {window} needs a --reason")
        state = self.status(window, is_scored, growth_stored)
        if state is None:
            raise TempoInputError(f"TEST of window {window} was never claimed: nothing to release", path=self.root)
        if state.state == "read":
            raise TempoInputError(f"TEST of window {window} is read, not claimed: test_growth stored its TEST growth "
                                  f"and nothing was lost, so there is no claim to release; `tempo materialize "
                                  f"--window {window}` scores it once, without reading TEST again")
        if state.state != "claimed":
            raise TempoInputError(f"TEST of window {window} is {state.state}, not claimed: {state.reason}",
                                  path=self.claim_path(window))
        burn = Burn(window=window, reason=reason.strip(), released_at=_now(), released_by=_who(),
                    claim_run_id=state.claim.run_id)
        path = self.burn_path(window)
        try:
            if not self._files.create(self._burn_name(window), _document(burn.to_dict())):
                raise TempoInputError(f"TEST of window {window} was burned meanwhile", path=path)
            self.append_log("released", window, reason=burn.reason, claim_run_id=burn.claim_run_id,
                            state="burned")
        except OSError as exc:
            raise ClaimUnavailable(f"cannot record the release: {exc}", path=path) from exc
        return burn


def _document(document: dict[str, Any]) -> bytes:
    return (json.dumps(document, sort_keys=True, indent=1) + "\n").encode("utf-8")


def _checked(window: str) -> str:
    if not isinstance(window, str) or not _SAFE_KEY.match(window):
        raise TempoInputError(f"{window!r} is not a partition key a claim can be stored under")
    return window
