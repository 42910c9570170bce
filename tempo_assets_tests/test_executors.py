"""``executors``: the executor ``$TEMPO_EXECUTOR`` names, and the celery launcher's poll interval."""
import sys

import pytest

from tempo_assets.core.base.errors import MissingExtraError, TempoInputError
from tempo_assets.executors import CELERY_POLL_SECONDS, tempo_executor


@pytest.fixture
def celery_env(monkeypatch):
    from dagster_celery import core_execution_loop

    monkeypatch.setenv("TEMPO_EXECUTOR", "celery")
    monkeypatch.setenv("TEMPO_BROKER_URL", "redis://127.0.0.1:1/0")
    monkeypatch.delenv("TEMPO_CELERY_POLL_SECONDS", raising=False)
    # the launcher's loop sleeps dagster-celery's module constant between polls of its steps: restored after
    monkeypatch.setattr(core_execution_loop, "TICK_SECONDS", core_execution_loop.TICK_SECONDS)
    return core_execution_loop


def test_the_celery_launcher_polls_its_steps_every_poll_interval(celery_env, monkeypatch):
    assert tempo_executor().name == "celery"
    assert celery_env.TICK_SECONDS == CELERY_POLL_SECONDS == 0.2
    monkeypatch.setenv("TEMPO_CELERY_POLL_SECONDS", "1.5")
    tempo_executor()
    assert celery_env.TICK_SECONDS == 1.5


@pytest.mark.parametrize("given", ["0", "-1", "soon", "61"])
def test_a_poll_interval_that_is_not_a_duration_is_refused(celery_env, monkeypatch, given):
    monkeypatch.setenv("TEMPO_CELERY_POLL_SECONDS", given)
    with pytest.raises(TempoInputError, match="TEMPO_CELERY_POLL_SECONDS"):
        tempo_executor()


def test_other_executors_leave_dagster_celery_alone(celery_env, monkeypatch):
    before = celery_env.TICK_SECONDS = 1
    monkeypatch.setenv("TEMPO_EXECUTOR", "in_process")
    assert tempo_executor() is None
    assert celery_env.TICK_SECONDS == before


@pytest.mark.parametrize("module, call", [("dagster_celery", "tempo_executor"), ("celery", "check_celery")])
def test_celery_without_the_production_extra_names_the_setup_command(celery_env, monkeypatch, module, call):
    from tempo_assets import executors

    monkeypatch.setitem(sys.modules, module, None)  # as on a machine set up without --production
    with pytest.raises(MissingExtraError, match=rf"^TEMPO_EXECUTOR=celery needs the production extra "
                                                rf"\({module} is not installed\): run `bash scripts/setup.sh --production`$"):
        getattr(executors, call)()
