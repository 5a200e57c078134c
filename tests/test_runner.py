"""The runner: once per tick, run records, failures, interruptions, signals, the decorator."""

from __future__ import annotations

import signal
from datetime import datetime, timedelta, timezone

import pytest
from django.test import override_settings

from django_advisory_cron import SKIPPED, LockNotAcquired, locked_task, registry, signals
from django_advisory_cron.core.keys import LockKey
from django_advisory_cron.core.scopes import Scope
from django_advisory_cron.models import JobRun, RunStatus
from tests.jobsapp.models import Marker

pytestmark = pytest.mark.usefixtures("transactional_db", "fresh_registry")

TICK = datetime(2026, 3, 1, 10, 0, tzinfo=timezone.utc)


def at(seconds: float) -> datetime:
    return TICK + timedelta(seconds=seconds)


def test_same_tick_runs_once_even_with_skewed_clocks() -> None:
    """Replica A fires 3 s early, replica B 3 s late: both land on the 10:00 tick."""
    job = registry.get("quick_scheduled")
    first = job.run(now=at(-3))
    second = job.run(now=at(3))
    assert first.status == RunStatus.SUCCEEDED and first.tick == TICK
    assert second.status == RunStatus.SKIPPED_TICK and second.tick == TICK
    assert Marker.objects.filter(job="quick_scheduled").count() == 1
    statuses = list(JobRun.objects.filter(tick=TICK).values_list("status", flat=True))
    assert statuses == ["succeeded"]  # the late replica wrote nothing


def test_next_tick_runs_again() -> None:
    job = registry.get("quick_scheduled")
    assert job.run(now=at(1)).status == RunStatus.SUCCEEDED
    later = job.run(now=at(5 * 60 + 2))
    assert later.status == RunStatus.SUCCEEDED
    assert later.tick == TICK + timedelta(minutes=5)
    assert Marker.objects.filter(job="quick_scheduled").count() == 2


def test_a_call_far_from_any_tick_is_an_unscheduled_run() -> None:
    job = registry.get("quick_scheduled")
    first, second = job.run(now=at(150)), job.run(now=at(151))
    assert first.tick is None and second.tick is None
    assert first.status == second.status == RunStatus.SUCCEEDED


@override_settings(ADVISORY_CRON={"MAX_SKEW": 10})
def test_max_skew_setting_narrows_the_tolerance() -> None:
    assert registry.get("quick_scheduled").run(now=at(20)).tick is None
    assert registry.get("quick_scheduled").run(now=at(9)).tick == TICK


def test_database_clock_decides_the_tick() -> None:
    """Without ``now`` the reference time is the server's now(), reported back."""
    result = registry.get("sleepy").run("0")
    assert result.reference is not None
    assert abs((result.reference - datetime.now(timezone.utc)).total_seconds()) < 5


def test_failure_is_recorded_and_takes_the_tick() -> None:
    job = registry.get("failing")
    with pytest.raises(RuntimeError, match="boom"):
        job.run(now=at(0))
    run = JobRun.objects.get(job="failing")
    assert run.status == RunStatus.FAILED and run.tick == TICK
    assert "RuntimeError: boom" in run.error and run.finished is not None
    assert job.run(now=at(30)).status == RunStatus.SKIPPED_TICK


def test_transaction_scope_failure_rolls_back_the_job_but_keeps_the_record() -> None:
    job = registry.get("failing")
    with pytest.raises(RuntimeError):
        job.run(now=at(0), scope="transaction")
    assert Marker.objects.filter(job="failing").count() == 0  # the job's write rolled back
    run = JobRun.objects.get(job="failing")
    assert run.status == RunStatus.FAILED and "boom" in run.error


def test_transaction_scope_success_commits_job_and_record_together() -> None:
    result = registry.get("transactional").run()
    assert result.status == RunStatus.SUCCEEDED and result.value == "committed"
    assert Marker.objects.filter(job="transactional").count() == 1
    assert result.run_id is not None
    assert JobRun.objects.get(id=result.run_id).status == RunStatus.SUCCEEDED


@pytest.mark.parametrize("scope", ["session", "transaction"])
def test_interruption_is_recorded_and_gives_the_tick_back(scope: Scope) -> None:
    @locked_task(name="interrupted_job", schedule="0 * * * *", scope=scope)
    def interrupted_job() -> None:
        signal.raise_signal(signal.SIGINT)  # a real signal, not the body's own exception

    with pytest.raises(KeyboardInterrupt):
        interrupted_job.run(now=at(0))
    assert JobRun.objects.get(job="interrupted_job").status == RunStatus.INTERRUPTED

    @locked_task(name="interrupted_job", schedule="0 * * * *", scope=scope)
    def interrupted_job_fixed() -> str:
        return "ok"

    registry.unregister("interrupted_job")
    registry.register(interrupted_job_fixed)
    assert interrupted_job_fixed.run(now=at(10)).status == RunStatus.SUCCEEDED


def test_dead_running_row_is_marked_interrupted_and_its_tick_rerun() -> None:
    """What a kill -9 leaves behind: a running row. The next holder cleans it up."""
    JobRun.objects.create(
        job="quick_scheduled", tick=TICK, host="gone", pid=1, started=TICK, status="running"
    )
    result = registry.get("quick_scheduled").run(now=at(5))
    assert result.interrupted_runs == 1
    assert result.status == RunStatus.SUCCEEDED
    dead = JobRun.objects.get(host="gone")
    assert dead.status == RunStatus.INTERRUPTED and "ended without recording its end" in dead.error


@override_settings(ADVISORY_CRON={"RECORD_SKIPS": True})
def test_locked_skip_is_recorded_with_record_skips(raw_connect) -> None:
    holder = raw_connect()
    holder.execute(
        "SELECT pg_advisory_lock(%(lock_ns)s, %(lock_id)s)", LockKey("quick_scheduled").params
    )
    result = registry.get("quick_scheduled").run(now=at(0))
    assert result.status == RunStatus.SKIPPED_LOCKED and not result.ran
    assert JobRun.objects.get(job="quick_scheduled").status == RunStatus.SKIPPED_LOCKED
    assert Marker.objects.count() == 0


def test_decorated_call_returns_value_or_skipped(raw_connect) -> None:
    @locked_task(name="adder")
    def adder(a: int, b: int = 1) -> int:
        return a + b

    assert adder(2, b=3) == 5
    holder = raw_connect()
    holder.execute("SELECT pg_advisory_lock(%(lock_ns)s, %(lock_id)s)", LockKey("adder").params)
    assert adder(2) is SKIPPED
    assert not SKIPPED


def test_on_locked_raise(raw_connect) -> None:
    @locked_task(name="strict", on_locked="raise")
    def strict() -> None:
        raise AssertionError("must not run")

    raw_connect().execute(
        "SELECT pg_advisory_lock(%(lock_ns)s, %(lock_id)s)", LockKey("strict").params
    )
    with pytest.raises(LockNotAcquired, match="strict"):
        strict()


def test_signals_are_sent() -> None:
    seen: list[tuple[str, str]] = []

    def receiver(signal_name: str):
        def handle(sender, run, **kwargs) -> None:
            seen.append((signal_name, run.status))

        return handle

    handlers = {name: receiver(name) for name in ("job_started", "job_finished", "job_skipped")}
    for name, handler in handlers.items():
        getattr(signals, name).connect(handler)
    failed: list[BaseException] = []

    def on_failed(sender, exception, **kwargs) -> None:
        failed.append(exception)

    signals.job_failed.connect(on_failed)
    try:
        registry.get("quick_scheduled").run(now=at(0))
        registry.get("quick_scheduled").run(now=at(1))
        with pytest.raises(RuntimeError):
            registry.get("failing").run()
    finally:
        for name, handler in handlers.items():
            getattr(signals, name).disconnect(handler)
        signals.job_failed.disconnect(on_failed)
    assert seen == [
        ("job_started", "running"),
        ("job_finished", "succeeded"),
        ("job_skipped", "skipped_tick"),
        ("job_started", "running"),
    ]
    assert [str(error) for error in failed] == ["boom"]


def test_decorator_validates_its_arguments() -> None:
    with pytest.raises(ValueError, match="scope"):
        locked_task(scope="global")  # type: ignore[call-overload]
    with pytest.raises(ValueError, match="on_locked"):
        locked_task(on_locked="wait")  # type: ignore[call-overload]
    with pytest.raises(ValueError, match="max_runtime"):
        locked_task(max_runtime=0)


@pytest.mark.parametrize("scope", ["session", "transaction"])
def test_interruption_before_the_job_starts_is_recorded(scope: Scope) -> None:
    """A signal that lands after the run row is written but before the job body starts."""

    def interrupt(sender, run, **kwargs) -> None:
        signal.raise_signal(signal.SIGINT)  # a real signal, not the body's own exception

    signals.job_started.connect(interrupt)
    try:
        with pytest.raises(KeyboardInterrupt):
            registry.get("quick_scheduled").run(now=at(0), scope=scope)
    finally:
        signals.job_started.disconnect(interrupt)
    run = JobRun.objects.get(job="quick_scheduled")
    assert run.status == RunStatus.INTERRUPTED and run.finished is not None
    assert Marker.objects.count() == 0
    assert registry.get("quick_scheduled").run(now=at(1), scope=scope).status == "succeeded"
