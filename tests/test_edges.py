"""Once per tick at its edges: long waits, lost locks, signals mid-statement, lost transactions,
silent servers, failing on_commit callbacks, exit codes. Real processes, real signals,
``pg_terminate_backend``, a real server; nothing is mocked.
"""

from __future__ import annotations

import importlib
import json
import signal
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.db import connection
from django.test import override_settings

from django_advisory_cron import exitcodes, registry
from django_advisory_cron.core.keys import job_key
from django_advisory_cron.models import JobRun, RunStatus
from tests.jobsapp.models import Marker
from tests.pglocks import holders
from tests.waiting import CLAIM, wait_for

pytestmark = pytest.mark.usefixtures("transactional_db")

TABLE = "django_advisory_cron_jobrun"


@pytest.fixture
def edge_jobs(fresh_registry: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """The edge jobs, registered here and in every subprocess the test starts."""
    import tests.jobsapp.edge_tasks as module

    importlib.reload(module)  # registers them again after an earlier test's cleanup
    monkeypatch.setenv("ADVISORY_CRON_JSON", json.dumps({"JOBS_MODULE": "edge_tasks"}))


def subprocess_settings(monkeypatch: pytest.MonkeyPatch, **values: Any) -> None:
    monkeypatch.setenv("ADVISORY_CRON_JSON", json.dumps({"JOBS_MODULE": "edge_tasks", **values}))


def statuses(job: str) -> list[str]:
    return list(JobRun.objects.filter(job=job).order_by("id").values_list("status", flat=True))


def db_second(observer: Any) -> float:
    return float(observer.execute("SELECT extract(second FROM now())").fetchone()[0])


def away_from_the_half_minute(observer: Any) -> None:
    """With an every-minute schedule the nearest tick flips at :30; keep clear of it."""
    while 25 <= db_second(observer) <= 36:
        time.sleep(0.5)


def slow_statement(observer: Any, when: str, seconds: float) -> None:
    """Make our own statement on the run-history table slow, through a real trigger."""
    observer.execute(
        f"""
        CREATE OR REPLACE FUNCTION edge_slow() RETURNS trigger AS $$
        BEGIN PERFORM pg_sleep({seconds}); RETURN NEW; END $$ LANGUAGE plpgsql;
        DROP TRIGGER IF EXISTS edge_slow ON {TABLE};
        CREATE TRIGGER edge_slow BEFORE {when} ON {TABLE} FOR EACH ROW
        WHEN (NEW.job LIKE 'edge_%%' AND NEW.status IN ('running', 'succeeded'))
        EXECUTE FUNCTION edge_slow();
        """
    )


@pytest.fixture
def observer(raw_connect: Any) -> Iterator[Any]:
    conn = raw_connect()
    yield conn
    conn.execute(f"DROP TRIGGER IF EXISTS edge_slow ON {TABLE}")


def latest_query(observer: Any, pid: int) -> str:
    """The statement the backend ``pid`` runs, or ran last."""
    row = observer.execute("SELECT query FROM pg_stat_activity WHERE pid = %s", (pid,)).fetchone()
    return str(row[0]) if row else ""


def in_statement(observer: Any, text: str) -> bool:
    """Some backend is running one of our statements containing ``text`` right now."""
    row = observer.execute(
        "SELECT count(*) FROM pg_stat_activity WHERE state = 'active' AND query LIKE %s "
        "AND pid <> pg_backend_pid()",
        (f"%{text}%",),
    ).fetchone()
    return bool(row[0])


# -- 1. a wait that outlasts MAX_SKEW keeps the tick it started for ---------------------------


@pytest.mark.slow
def test_a_wait_longer_than_max_skew_keeps_the_tick_it_started_for(
    edge_jobs: None, observer: Any, tmp_path: Path
) -> None:
    """B starts one moment after A, waits longer than MAX_SKEW, and must not run A's firing
    again (before: its reference time moved past the tolerance and it ran unscheduled)."""
    job = registry.get("edge_hold_every10")
    release = tmp_path / "release"
    outcomes: dict[str, Any] = {}

    def replica(name: str, wait: float) -> None:
        outcomes[name] = job.run(str(release), wait=wait)
        connection.close()

    with override_settings(ADVISORY_CRON={"MAX_SKEW": 3}):
        # Start two seconds before a tick (every 10 s): both replicas belong to that tick.
        wait_for(lambda: 7.8 <= db_second(observer) % 10 < 8.3, timeout=15, interval=0.05)
        a = threading.Thread(target=replica, args=("a", 0))
        a.start()
        wait_for(lambda: statuses("edge_hold_every10") == ["running"], timeout=5)
        b = threading.Thread(target=replica, args=("b", 15))
        b.start()
        time.sleep(5.5)  # B's clock is now beyond MAX_SKEW of the tick it started for
        release.touch()
        a.join(20)
        b.join(20)
    assert outcomes["a"].status == RunStatus.SUCCEEDED and outcomes["a"].tick is not None
    assert outcomes["b"].status == RunStatus.SKIPPED_TICK
    assert outcomes["b"].tick == outcomes["a"].tick
    assert Marker.objects.filter(job="edge_hold_every10").count() == 1


# -- 2. a lost lock does not hand a live run's tick to a waiter -------------------------------


def test_a_waiter_does_not_take_the_tick_of_a_run_whose_lock_connection_died(
    edge_jobs: None, observer: Any, spawn: Any, tmp_path: Path
) -> None:
    """A's lock connection is terminated while its body runs; B is waiting for the lock.

    Before: B got the lock at once, marked A's row interrupted, ran the same tick alongside
    A. Now: A's row is alive (its lease), so B waits; A's heartbeat sees the loss, A stops
    and records lock_lost (exit 75); B then finds the tick taken and skips.
    """
    away_from_the_half_minute(observer)
    release = tmp_path / "release"
    a = spawn("runlocked", "edge_hold_scheduled", str(release))
    wait_for(lambda: statuses("edge_hold_scheduled") == ["running"])
    b = spawn("runlocked", "-w", "30", "edge_hold_scheduled", str(release))
    time.sleep(0.5)  # B is polling for the lock
    (pid,) = holders(observer, job_key("edge_hold_scheduled"))
    observer.execute("SELECT pg_terminate_backend(%s)", (pid,))
    terminated = time.monotonic()
    _out, a_err = a.communicate(timeout=30)
    stopped_after = time.monotonic() - terminated
    assert a.returncode == exitcodes.LOCK_LOST, a_err
    assert stopped_after < 2 + 8  # HEARTBEAT (2 s) plus slack for a busy host
    release.touch()
    b_out, b_err = b.communicate(timeout=30)
    assert b.returncode == 0, b_err
    assert "already ran" in b_out
    assert Marker.objects.filter(job="edge_hold_scheduled").count() == 1
    assert statuses("edge_hold_scheduled") == ["lock_lost"]  # B's skip wrote nothing


# -- 3 and 6. signals are deferred around our statements --------------------------------------


@pytest.mark.parametrize(
    ("signum", "code"), [(signal.SIGINT, exitcodes.SIGINT), (signal.SIGTERM, exitcodes.SIGTERM)]
)
def test_a_signal_during_the_finishing_statement_keeps_the_tick(
    edge_jobs: None, observer: Any, spawn: Any, manage: Any, signum: int, code: int
) -> None:
    """Before: SIGINT cancelled the finish + unlock statement: the unlock had happened, the
    update rolled back, the row ended interrupted and the tick was free again; SIGTERM left a
    false "lock lost". Now the statement completes, then the signal is acted on."""
    slow_statement(observer, "UPDATE", 1.5)
    process = spawn("runlocked", "edge_quick_scheduled")
    # The finish (update and unlock in one statement); the claim names pg_advisory_unlock too.
    finishing = 'WITH w AS (UPDATE "django_advisory_cron_jobrun"'
    wait_for(lambda: in_statement(observer, finishing), timeout=20, interval=0.01)
    process.send_signal(signum)
    _out, err = process.communicate(timeout=30)
    assert process.returncode == code, err
    assert "recorded as succeeded" in err
    assert "lock lost" not in err and "PgBouncer" not in err
    assert statuses("edge_quick_scheduled") == ["succeeded"]
    assert not holders(observer, job_key("edge_quick_scheduled"))
    observer.execute(f"DROP TRIGGER edge_slow ON {TABLE}")
    # The scheduled call for the tick it took (as cronworker makes it), however late: still
    # taken. (Without --tick it is the nearest tick then, the next one past the half minute.)
    [run] = JobRun.objects.filter(job="edge_quick_scheduled")
    assert run.tick is not None
    again = manage("runlocked", f"--tick={run.tick.isoformat()}", "edge_quick_scheduled")
    assert again.returncode == 0 and "already ran" in again.stdout, again.stderr
    assert Marker.objects.filter(job="edge_quick_scheduled").count() == 1


def test_sigterm_while_the_lock_is_being_taken_records_the_run_interrupted(
    edge_jobs: None, observer: Any, spawn: Any
) -> None:
    """Before: the client died mid-statement, the server finished the INSERT, and a
    ``running`` row stayed behind although exit 143 promised "recorded as interrupted"."""
    slow_statement(observer, "INSERT", 1.5)
    process = spawn("runlocked", "edge_quick_scheduled")
    # The claim (pg_stat_activity shows its call of the claim function).
    wait_for(lambda: in_statement(observer, CLAIM), timeout=20, interval=0.01)
    process.send_signal(signal.SIGTERM)
    _out, err = process.communicate(timeout=30)
    assert process.returncode == exitcodes.SIGTERM, err
    assert "recorded as interrupted" in err
    assert statuses("edge_quick_scheduled") == ["interrupted"]
    assert Marker.objects.filter(job="edge_quick_scheduled").count() == 0
    assert not holders(observer, job_key("edge_quick_scheduled"))


# -- 5. transaction scope: the connection is lost mid-job -------------------------------------


def test_a_lost_transaction_is_recorded_and_exits_75(
    edge_jobs: None, observer: Any, spawn: Any
) -> None:
    process = spawn("runlocked", "edge_sleep_transaction", "3")
    key = job_key("edge_sleep_transaction")
    wait_for(lambda: holders(observer, key), timeout=20)
    (pid,) = holders(observer, key)
    # The body has begun: its own write is the backend's latest statement (the lock shows in
    # pg_locks before the client has read the answer that took it; cut then, nothing started).
    wait_for(lambda: Marker._meta.db_table in latest_query(observer, pid), timeout=20)
    observer.execute("SELECT pg_terminate_backend(%s)", (pid,))
    _out, err = process.communicate(timeout=30)
    assert process.returncode == exitcodes.LOCK_LOST, err
    assert "recorded as lock lost" in err
    (run,) = JobRun.objects.filter(job="edge_sleep_transaction")
    assert run.status == RunStatus.LOCK_LOST and run.finished is not None
    assert "database work was rolled back" in run.error
    # The job's own write went with the transaction.
    assert Marker.objects.filter(job="edge_sleep_transaction").count() == 0


def test_a_lost_transaction_leaves_a_long_lived_process_usable(
    edge_jobs: None, observer: Any
) -> None:
    """Before: the thread stayed inside the lock's atomic() block; every later
    transaction-scoped job raised LockScopeError and plain ORM queries failed."""
    from django_advisory_cron import LockLost

    key = job_key("edge_sleep_transaction")

    def idle_holder() -> int | None:
        # Holding the lock, and the acquiring round trip answered: the job has started (the
        # lock shows in pg_locks while that round trip is still in flight).
        pids = holders(observer, key)
        state = "SELECT state FROM pg_stat_activity WHERE pid = %s"
        row = observer.execute(state, pids).fetchone() if pids else None
        return pids[0] if row and row[0] == "idle in transaction" else None

    def terminate() -> None:
        pid = wait_for(idle_holder, timeout=20, interval=0.005)
        observer.execute("SELECT pg_terminate_backend(%s)", (pid,))

    killer = threading.Thread(target=terminate)
    killer.start()
    with pytest.raises(LockLost, match="rolled back"):
        registry.get("edge_sleep_transaction").run("1")
    killer.join()
    assert not connection.in_atomic_block and not connection.needs_rollback
    assert Marker.objects.count() == 0  # plain ORM queries work again
    again = registry.get("edge_sleep_transaction").run("0")
    assert again.status == RunStatus.SUCCEEDED
    assert statuses("edge_sleep_transaction") == ["lock_lost", "succeeded"]


# -- 7. no server answer: bounded time, exit 69 ------------------------------------------------


def test_a_server_that_never_answers_gives_exit_69_in_bounded_time(
    edge_jobs: None, manage: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before: runlocked hung forever on a server that accepts TCP and says nothing."""
    subprocess_settings(monkeypatch, CONNECT_TIMEOUT=2)
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(16)  # the kernel completes the handshake; nobody ever answers
        port = silent.getsockname()[1]
        started = time.monotonic()
        result = manage(
            "runlocked", "edge_quick_scheduled", url=f"postgresql://u@127.0.0.1:{port}/x"
        )
        elapsed = time.monotonic() - started
    assert result.returncode == exitcodes.DATABASE_UNAVAILABLE, result.stderr
    assert elapsed < 2 + 20  # the connect timeout, plus Django's start-up on a busy host
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and f"127.0.0.1:{port}" in lines[0], result.stderr


@pytest.mark.pgbouncer
def test_a_statement_stuck_in_a_pooler_queue_gives_exit_69_in_bounded_time(
    edge_jobs: None,
    pgbouncer_session: Any,
    raw_connect: Any,
    manage: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A session-pooling PgBouncer whose pool is taken: the login succeeds, the first query
    waits in its queue (for 120 s by default). Our statements have a deadline."""
    from tests.pooling import bouncer_url

    url = bouncer_url(pgbouncer_session)
    for _ in range(3):  # the fixture's pool size: every server connection is taken
        raw_connect(url).execute("SELECT 1")
    subprocess_settings(monkeypatch, CONNECT_TIMEOUT=2, STATEMENT_TIMEOUT=2)
    started = time.monotonic()
    result = manage("runlocked", "edge_quick_scheduled", url=url)
    elapsed = time.monotonic() - started
    assert result.returncode == exitcodes.DATABASE_UNAVAILABLE, result.stderr
    assert elapsed < 2 + 2 + 20  # plus Django's start-up on a busy host
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert statuses("edge_quick_scheduled") == []


# -- 8. an on_commit callback that raises -------------------------------------------------------


def test_a_failing_on_commit_callback_fails_the_run_and_the_exit_code(
    edge_jobs: None, manage: Any
) -> None:
    """Before: exit 1 "run recorded as failed" while the row said succeeded."""
    result = manage("runlocked", "edge_commit_hook_fails")
    assert result.returncode == exitcodes.JOB_FAILED, result.stderr
    assert "on_commit exploded" in result.stderr
    (run,) = JobRun.objects.filter(job="edge_commit_hook_fails")
    assert run.status == RunStatus.FAILED
    assert "on_commit callback raised" in run.error and "on_commit exploded" in run.error
    assert Marker.objects.filter(job="edge_commit_hook_fails").count() == 1  # it did commit


# -- 10. one exit-code mapping, from the recorded outcome ---------------------------------------


def test_a_body_that_raises_lock_not_acquired_is_a_failure(
    edge_jobs: None, manage: Any, observer: Any
) -> None:
    """Before: recorded failed, yet exit 0 and "skipped: skipped: locked by another
    process"."""
    key = job_key("edge_inner_raise")
    observer.execute("SELECT pg_advisory_lock(%s, %s)", (key.namespace, key.objid))
    try:
        result = manage("runlocked", "edge_calls_held_job")
    finally:
        observer.execute("SELECT pg_advisory_unlock(%s, %s)", (key.namespace, key.objid))
    assert result.returncode == exitcodes.JOB_FAILED, result.stderr
    assert "LockNotAcquired" in result.stderr and "recorded as failed" in result.stderr
    assert "skipped: skipped" not in result.stdout + result.stderr
    assert statuses("edge_calls_held_job") == ["failed"]


# -- 11. session-scoped jobs behind transaction pooling keep one run per tick -----------------


@pytest.mark.pgbouncer
def test_session_jobs_behind_transaction_pooling_run_once_per_tick(
    pgbouncer_transaction: Any, spawn: Any, observer: Any
) -> None:
    """Before: the acquiring statement took every ``running`` row for dead, and behind a
    transaction-pooling PgBouncer (where session locks leak between clients) 10 processes x
    20 jobs gave 28 runs for 20 ticks. Now a live row's lease keeps its tick."""
    from tests.pooling import bouncer_url

    processes, jobs = 8, 20
    tick = "2026-06-01T08:00:00+00:00"
    started = [
        spawn("race_ticks", str(jobs), tick, url=bouncer_url(pgbouncer_transaction))
        for _ in range(processes)
    ]
    try:
        for process in started:
            _out, err = process.communicate(timeout=120)
            assert process.returncode == 0, err
    finally:
        # Session locks leak onto the pooler's server connections here (that is the hazard):
        # end those backends so that later tests start from a server without them.
        keys = [job_key(f"race_{n}").objid & 0xFFFFFFFF for n in range(jobs)]
        observer.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory' "
            "AND objid::bigint = ANY(%s) AND pid <> pg_backend_pid()",
            (keys,),
        )
    assert Marker.objects.filter(job__startswith="race_").count() == jobs
    ran = JobRun.objects.filter(
        job__startswith="race_", status__in=[RunStatus.SUCCEEDED, RunStatus.LOCK_LOST]
    )
    assert ran.count() == jobs
    assert sorted(ran.values_list("job", flat=True)) == sorted(f"race_{n}" for n in range(jobs))
