"""``executors.check_celery``, the launcher's preflight, against a stand-in for celery's app: how long it
listens for the workers' replies. A broadcast's replies are collected until none came for the timeout
given to ``inspect``, so that timeout is waited in full every time: the preflight gives it the short
reply window and asks again, until its own timeout, while no worker of the queue has answered.
(The real broker and workers: test_celery_executor.py, test_production_faults.py.)"""
import sys
import types

import pytest

from tempo_assets.core.base.errors import TempoInputError
from tempo_assets.executors import CELERY_QUEUE, CELERY_REPLY_WINDOW_SECONDS, check_celery


class Clock:
    """``time.monotonic`` for the preflight: moves only when a fake broadcast waits."""

    def __init__(self):
        self.now = 0.0

    def monotonic(self) -> float:
        return self.now


def fake_celery(monkeypatch, answers: list[dict]) -> tuple[list[float], Clock]:
    """A ``celery`` module whose app answers each ``inspect(...).active_queues()`` with the next of
    ``answers`` (the last one again once they run out); returns the timeouts asked for and the clock."""
    from tempo_assets import executors

    asked, clock = [], Clock()

    class Inspect:
        def __init__(self, timeout):
            self.timeout = timeout

        def active_queues(self):
            asked.append(self.timeout)
            clock.now += self.timeout  # the broadcast waits its timeout after the last reply
            return answers[min(len(asked), len(answers)) - 1]

    class Connection:
        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def ensure_connection(self, **kwargs):
            pass

    class Celery:
        def __init__(self, *args, **kwargs):
            self.conf = types.SimpleNamespace()
            self.control = types.SimpleNamespace(inspect=lambda timeout, destination: Inspect(timeout))

        def connection_for_write(self):
            return Connection()

        def close(self):
            pass

    monkeypatch.setitem(sys.modules, "celery", types.SimpleNamespace(Celery=Celery))
    monkeypatch.setattr(executors, "time", types.SimpleNamespace(monotonic=clock.monotonic))
    monkeypatch.setenv("TEMPO_BROKER_URL", "redis://127.0.0.1:1/0")
    return asked, clock


def queues(*names: str) -> list[dict]:
    return [{"name": name} for name in names]


def test_workers_that_answer_are_listened_for_one_reply_window(monkeypatch):
    asked, clock = fake_celery(monkeypatch, [{"w2@h": queues(CELERY_QUEUE), "w1@h": queues(CELERY_QUEUE, "other"),
                                              "x@h": queues("other")}])
    assert check_celery(timeout=5.0) == ["w1@h", "w2@h"]
    assert asked == [CELERY_REPLY_WINDOW_SECONDS] and CELERY_REPLY_WINDOW_SECONDS <= 1.0
    assert clock.now == CELERY_REPLY_WINDOW_SECONDS


def test_the_preflight_asks_again_until_a_worker_of_the_queue_answers(monkeypatch):
    asked, _ = fake_celery(monkeypatch, [{}, {"x@h": queues("other")}, {"w1@h": queues(CELERY_QUEUE)}])
    assert check_celery(timeout=5.0) == ["w1@h"]
    assert asked == [CELERY_REPLY_WINDOW_SECONDS] * 3


def test_no_worker_of_the_queue_within_the_timeout_is_an_error(monkeypatch):
    asked, clock = fake_celery(monkeypatch, [{"x@h": queues("other")}])
    with pytest.raises(TempoInputError, match=f"no celery worker listens on queue '{CELERY_QUEUE}'"):
        check_celery(timeout=5.0, window=1.0)
    assert asked == [1.0] * 5 and clock.now == 5.0
