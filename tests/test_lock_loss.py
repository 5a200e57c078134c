"""Lock loss: the session lock's connection dies while the job runs.

Real ``pg_terminate_backend`` and a real PostgreSQL restart; the heartbeat must notice within
its interval, mark the run ``lock_lost``, send the signal, expose ``lock.lost``, and make
``runlocked`` exit 75, without disturbing the job's own connection.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from typing import Any

import pytest
from django.db import connection, connections
from django.test import override_settings

from django_advisory_cron import LockLost, advisory_lock, exitcodes, locked_task, registry, signals
from django_advisory_cron.core.keys import job_key
from django_advisory_cron.models import JobRun, RunStatus
from tests.jobsapp.models import Marker

from .pglocks import holders
from .pooling import wait_for

pytestmark = pytest.mark.usefixtures("transactional_db")


@pytest.fixture
def lost_signals() -> Iterator[list[tuple[Any, dict[str, Any]]]]:
    received: list[tuple[Any, dict[str, Any]]] = []

    def receiver(sender: Any, **kwargs: Any) -> None:
        received.append((sender, kwargs))

    signals.lock_lost.connect(receiver, weak=False)
    yield received
    signals.lock_lost.disconnect(receiver)


def terminate(observer: Any, pid: int) -> None:
    assert observer.execute("SELECT pg_terminate_backend(%s)", (pid,)).fetchone() == (True,)


def test_terminated_lock_backend_is_detected_within_the_heartbeat(
    raw_connect: Any, lost_signals: list[Any], caplog: pytest.LogCaptureFixture
) -> None:
    observer = raw_connect()
    with (
        override_settings(ADVISORY_CRON={"HEARTBEAT": 0.2}),
        caplog.at_level(logging.ERROR, logger="django_advisory_cron"),
    ):
        with advisory_lock("loss-plain", scope="session") as lock:
            assert lock.heartbeat is not None and lock.heartbeat.running
            (pid,) = holders(observer, lock.key)
            terminate(observer, pid)
            started = time.monotonic()
            assert wait_for(lambda: lock.lost, 3, interval=0.01)
            assert time.monotonic() - started < 0.2 + 0.5
            # The lock is really gone: another replica takes it now.
            with advisory_lock("loss-plain", scope="session") as other:
                assert other.acquired
            # The holder's next query through Django stops it: it can no longer prove it is
            # alone.
            with pytest.raises(LockLost, match="stops at its next database query"):
                Marker.objects.count()
        assert not lock.heartbeat.running
        # The body's own connection was not disturbed: outside the lock it works as before.
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            assert cursor.fetchone() == (1,)
    assert "lock lost while the job ran" in caplog.text
    assert len(lost_signals) == 1
    sender, kwargs = lost_signals[0]
    assert sender is None and kwargs["lock"] is lock and kwargs["run"] is None
    assert kwargs["error"] is not None


def test_job_run_marks_lock_lost_and_stops_at_the_next_query(
    raw_connect: Any, fresh_registry: None, lost_signals: list[Any]
) -> None:
    """The loss is recorded while the body still runs; the body's next query stops it."""
    observer = raw_connect()
    key = job_key("loss-job")
    seen: dict[str, Any] = {}
    status = "SELECT status FROM django_advisory_cron_jobrun WHERE job = 'loss-job'"

    @locked_task(name="loss-job", scope="session")
    def loss_job() -> str:
        (pid,) = holders(observer, key)
        terminate(observer, pid)
        seen["detected"] = bool(wait_for(lambda: lost_signals, 3, interval=0.01))
        # Recorded through a fresh connection while this job still runs.
        seen["status"] = observer.execute(status).fetchone()[0]
        Marker.objects.create(job="loss-job", pid=pid)  # raises: the run stops here
        seen["went on"] = True
        return "done"

    with override_settings(ADVISORY_CRON={"HEARTBEAT": 0.2}), pytest.raises(LockLost):
        loss_job.run()
    assert seen == {"detected": True, "status": RunStatus.LOCK_LOST}
    run = JobRun.objects.get(job="loss-job")
    assert run.status == RunStatus.LOCK_LOST and run.finished is not None
    assert "lock lost while the job ran" in run.error
    assert Marker.objects.filter(job="loss-job").count() == 0
    assert len(lost_signals) == 1
    sender, kwargs = lost_signals[0]
    result = kwargs["run"]
    assert sender is loss_job and result.status == RunStatus.LOCK_LOST and result.ran
    assert kwargs["lock"] is result.lock and result.lock.lost


def test_loss_after_the_last_heartbeat_is_caught_when_finishing(
    raw_connect: Any, fresh_registry: None, lost_signals: list[Any]
) -> None:
    observer = raw_connect()
    key = job_key("loss-at-finish")

    @locked_task(name="loss-at-finish", scope="session")
    def quick() -> None:
        (pid,) = holders(observer, key)
        terminate(observer, pid)
        gone = "SELECT 1 FROM pg_stat_activity WHERE pid = %s"
        assert wait_for(lambda: observer.execute(gone, (pid,)).fetchone() is None, 5)

    with override_settings(ADVISORY_CRON={"HEARTBEAT": 60}):
        result = quick.run()
    assert result.status == RunStatus.LOCK_LOST
    assert JobRun.objects.get(job="loss-at-finish").status == RunStatus.LOCK_LOST
    assert len(lost_signals) == 1


def test_failing_job_after_lock_loss_is_recorded_failed(
    raw_connect: Any, fresh_registry: None
) -> None:
    observer = raw_connect()
    key = job_key("loss-then-fail")

    @locked_task(name="loss-then-fail", scope="session")
    def doomed() -> None:
        (pid,) = holders(observer, key)
        terminate(observer, pid)
        time.sleep(0.5)
        raise RuntimeError("after the loss")

    with (
        override_settings(ADVISORY_CRON={"HEARTBEAT": 0.1}),
        pytest.raises(RuntimeError, match="after the loss"),
    ):
        doomed.run()
    run = JobRun.objects.get(job="loss-then-fail")
    assert run.status == RunStatus.FAILED
    assert "lock lost while the job ran" in run.error and "after the loss" in run.error


def test_healthy_job_keeps_its_lock_and_the_heartbeat_stops(
    raw_connect: Any, fresh_registry: None
) -> None:
    """The body runs until the heartbeat has beaten four times (a loaded machine may start
    its thread late: the test waits for the beats, not for a fixed time)."""
    observer = raw_connect()
    key = job_key("loss-healthy")
    started: list[Any] = []

    @locked_task(name="loss-healthy", scope="session")
    def healthy() -> int:
        lock = started[0].lock
        wait_for(lambda: lock.heartbeat is not None and lock.heartbeat.beats >= 4, 30)
        return len(holders(observer, key))

    def remember(sender: Any, run: Any, **kwargs: Any) -> None:
        started.append(run)

    signals.job_started.connect(remember, weak=False)
    try:
        with override_settings(ADVISORY_CRON={"HEARTBEAT": 0.1}):
            result = healthy.run()
    finally:
        signals.job_started.disconnect(remember)
    assert result.status == RunStatus.SUCCEEDED and result.value == 1
    assert result.lock is not None and not result.lock.lost
    heartbeat = result.lock.heartbeat
    assert heartbeat is not None
    assert heartbeat.beats >= 4 and not heartbeat.running
    assert holders(observer, key) == []


def test_transaction_scope_has_no_heartbeat(fresh_registry: None) -> None:
    with advisory_lock("loss-tx", scope="transaction") as lock:
        assert lock.acquired and lock.heartbeat is None


# -- real runlocked processes ---------------------------------------------------------------


def _running_sleepy(observer: Any, process: Any) -> int:
    """Wait until the spawned ``runlocked sleepy`` holds its lock; return the lock's pid."""
    key = registry.get("sleepy").key

    def held() -> list[int]:
        assert process.poll() is None, process.communicate()
        return holders(observer, key)

    pids = wait_for(held, 20)
    assert pids, "runlocked never took the lock"
    assert wait_for(lambda: Marker.objects.filter(job="sleepy").exists(), 10)
    return int(pids[0])


def _status() -> str | None:
    run = JobRun.objects.filter(job="sleepy").first()
    return None if run is None else str(run.status)


def test_runlocked_exits_75_when_its_lock_backend_is_terminated(
    spawn: Any, raw_connect: Any
) -> None:
    observer = raw_connect()
    process = spawn("runlocked", "sleepy", "9")
    pid = _running_sleepy(observer, process)
    assert _status() == RunStatus.RUNNING
    terminate(observer, pid)
    started = time.monotonic()
    # Default heartbeat (5 s): marked while the job is still sleeping.
    assert wait_for(lambda: _status() == RunStatus.LOCK_LOST, 8)
    detection = time.monotonic() - started
    assert detection <= 5 + 1.5
    assert process.poll() is None
    stdout, stderr = process.communicate(timeout=30)
    assert process.returncode == exitcodes.LOCK_LOST, (stdout, stderr)
    assert "lock's connection was lost" in stderr
    run = JobRun.objects.get(job="sleepy")
    assert run.status == RunStatus.LOCK_LOST and run.finished is not None
    assert Marker.objects.filter(job="sleepy").count() == 1


def test_runlocked_exits_75_when_postgresql_restarts(
    spawn: Any, raw_connect: Any, postgres_server: Any
) -> None:
    if postgres_server is None:
        pytest.skip("DATABASE_URL was supplied: this test needs the throwaway server to restart")
    process = spawn("runlocked", "sleepy", "9")
    _running_sleepy(raw_connect(), process)
    postgres_server.restart()
    started = time.monotonic()
    connections.close_all()  # this process's connections died with the server too
    assert wait_for(lambda: _status() == RunStatus.LOCK_LOST, 10)
    detection = time.monotonic() - started
    assert detection <= 5 + 2
    stdout, stderr = process.communicate(timeout=30)
    assert process.returncode == exitcodes.LOCK_LOST, (stdout, stderr)
    run = JobRun.objects.get(job="sleepy")
    assert run.status == RunStatus.LOCK_LOST and run.finished is not None


def test_lock_connection_has_tcp_keepalives() -> None:
    """A silently vanished peer is noticed by the kernel in ~25 s, not hours."""
    with advisory_lock("loss-keepalive", scope="session") as lock:
        assert lock.connection is not None
        parameters = lock.connection.connection.info.get_parameters()
    assert parameters["keepalives"] == "1"
    assert int(parameters["keepalives_idle"]) <= 60
    assert int(parameters["keepalives_count"]) >= 1
