"""Which executor runs the steps of Tempo's jobs: in the launching process, in processes of their
own, or on dagster-celery workers.

``TEMPO_EXECUTOR`` picks it. ``in_process``: ``tempo materialize`` runs every step in its own
process, one after the other. ``multiprocess`` (the default on a machine with two cores or more):
``tempo materialize`` runs the steps that do not depend on one another at once, each run in a
process of its own, at most ``--jobs N`` (default: the cores) at once (``cli/concurrent_steps.py``;
``--jobs 1`` is ``in_process``). Either way the ``dagster`` CLI and the UI use Dagster's default
multiprocess executor. ``celery`` puts every step on the celery queue ``dagster`` of the broker
``TEMPO_BROKER_URL`` (``redis://...``, printed by ``scripts/dev_services.sh start``), where worker
processes (``scripts/dev_services.sh workers N``) pick them up. The workers share nothing with the launcher
but the Dagster instance's PostgreSQL storage and the artefact store (``TEMPO_ARTEFACTS=s3://...``).

The broker URL is given to Dagster as ``{"env": "TEMPO_BROKER_URL"}``, so a password in it is
never stored in a run's config; messages name the broker with its password masked.
"""
from __future__ import annotations

import os
import time
from urllib.parse import urlsplit, urlunsplit

import dagster as dg

from tempo_assets.core.base.errors import MissingExtraError, TempoInputError

EXECUTORS = ("in_process", "multiprocess", "celery")
CELERY_QUEUE = "dagster"
# how often the launcher of a celery run asks the result backend which submitted steps ended (and
# so when it submits the steps that waited on them); dagster-celery's own loop sleeps 1 s, which
# on short steps is most of the wait between one step and the next
CELERY_POLL_SECONDS = 0.2
# the preflight's wait for more replies after the last one (kombu collects a broadcast's replies until
# none came for that long, so all of it is waited each time); a worker that is up answers in
# milliseconds. Celery's own `celery inspect` waits 1 s.
CELERY_REPLY_WINDOW_SECONDS = 1.0


def cpu_count() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def executor_kind() -> str:
    """``$TEMPO_EXECUTOR``; unset, ``multiprocess`` with two cores or more, else ``in_process``.
    Anything else is an error naming it."""
    default = "multiprocess" if cpu_count() >= 2 else "in_process"
    kind = (os.environ.get("TEMPO_EXECUTOR") or default).strip().lower().replace("-", "_")
    if kind not in EXECUTORS:
        raise TempoInputError(f"TEMPO_EXECUTOR={os.environ.get('TEMPO_EXECUTOR')!r} is not one of "
                              f"{', '.join(EXECUTORS)}")
    return kind


def broker_url() -> str:
    url = os.environ.get("TEMPO_BROKER_URL", "").strip()
    if not url:
        raise TempoInputError("TEMPO_EXECUTOR=celery needs TEMPO_BROKER_URL (the broker, e.g. "
                              "redis://127.0.0.1:6379/0; `scripts/dev_services.sh start` prints it)")
    return url


def masked(url: str) -> str:
    """``url`` with its password replaced by ``***``."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = f"{parts.username or ''}:***@{parts.hostname}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))


def tempo_executor() -> dg.ExecutorDefinition | None:
    """The executor ``$TEMPO_EXECUTOR`` names; ``None`` for Dagster's default."""
    if executor_kind() != "celery":
        return None
    try:
        from dagster_celery import celery_executor, core_execution_loop
    except ModuleNotFoundError as missing:
        raise MissingExtraError("TEMPO_EXECUTOR=celery", missing) from None

    core_execution_loop.TICK_SECONDS = celery_poll_seconds()

    # results travel back through the broker's redis too (the default rpc:// needs AMQP)
    return celery_executor.configured({
        "broker": {"env": "TEMPO_BROKER_URL"},
        "backend": {"env": "TEMPO_BROKER_URL"},
        "config_source": {"worker_prefetch_multiplier": 1, "task_track_started": True,
                          "broker_connection_retry_on_startup": False},
    }, name="celery")


def celery_poll_seconds() -> float:
    """``$TEMPO_CELERY_POLL_SECONDS`` (default ``CELERY_POLL_SECONDS``): a positive number of seconds."""
    given = os.environ.get("TEMPO_CELERY_POLL_SECONDS", "").strip()
    try:
        seconds = float(given) if given else CELERY_POLL_SECONDS
    except ValueError:
        seconds = -1.0
    if not 0 < seconds <= 60:
        raise TempoInputError(f"TEMPO_CELERY_POLL_SECONDS={given!r} is not a number of seconds in (0, 60]")
    return seconds


def check_celery(timeout: float = 5.0, window: float = CELERY_REPLY_WINDOW_SECONDS) -> list[str]:
    """The names of the celery workers answering on the broker; raise naming the broker when it is
    down or no worker listens on the queue within ``timeout`` s (a run would otherwise wait for ever
    on its first step). Each ask collects replies until none came for ``window`` s; it is asked again
    until a worker of the queue answered or ``timeout`` s passed."""
    try:
        from celery import Celery
    except ModuleNotFoundError as missing:
        raise MissingExtraError("TEMPO_EXECUTOR=celery", missing) from None

    url = broker_url()
    app = Celery("tempo-check", broker=url, backend=url)
    app.conf.broker_connection_retry_on_startup = False
    app.conf.broker_connection_max_retries = 1
    deadline = time.monotonic() + timeout
    try:
        with app.connection_for_write() as conn:
            conn.ensure_connection(max_retries=1, timeout=timeout)
        while True:
            replies = app.control.inspect(timeout=window, destination=None).active_queues() or {}
            workers = sorted(name for name, queues in replies.items()
                             if any(q.get("name") == CELERY_QUEUE for q in queues or []))
            if workers or time.monotonic() >= deadline:
                break
    except Exception as exc:  # noqa: BLE001 - every transport error means the same here
        raise TempoInputError(f"cannot reach the celery broker: {type(exc).__name__}: "
                              f"{str(exc).replace(url, masked(url))}", path=masked(url)) from None
    finally:
        app.close()
    if not workers:
        raise TempoInputError(f"no celery worker listens on queue {CELERY_QUEUE!r} of this broker: start "
                              "some (`scripts/dev_services.sh workers 2`) or unset TEMPO_EXECUTOR",
                              path=masked(url))
    return workers
