"""A transaction-scoped run whose connection dies, at each moment it can die.

The loss is placed deterministically: the job waits on an event that the test sets only once
the server has ended the job's backend (``pg_terminate_backend``, and the backend gone from
``pg_stat_activity``). Afterwards the long-lived process must be out of the lock's
``atomic()`` block with a working default connection, whatever the moment was. Real server,
real termination; nothing is mocked.
"""

from __future__ import annotations

import json
import signal
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.db import DatabaseError, connection

from django_advisory_cron import LockLost, exitcodes, locked_task
from django_advisory_cron.core.keys import job_key
from django_advisory_cron.models import JobRun, RunStatus
from tests.jobsapp.models import Marker
from tests.pglocks import holders
from tests.waiting import wait_for

pytestmark = pytest.mark.usefixtures("transactional_db")

JOB = "race_lost_transaction"
TABLE = "django_advisory_cron_jobrun"


@pytest.fixture
def observer(raw_connect: Any) -> Any:
    return raw_connect()


class Loss:
    """Ends the job's backend from another thread when the job says it is ready."""

    def __init__(self, observer: Any) -> None:
        self.observer = observer
        self.ready = threading.Event()
        self.done = threading.Event()

    def kill(self) -> None:
        self.ready.wait(30)
        (pid,) = holders(self.observer, job_key(JOB))
        self.observer.execute("SELECT pg_terminate_backend(%s)", (pid,))
        wait_for(lambda: not self._alive(pid), timeout=20, interval=0.01)
        self.done.set()

    def _alive(self, pid: int) -> bool:
        row = self.observer.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE pid = %s", (pid,)
        ).fetchone()
        return bool(row[0])

    def now(self) -> None:
        """In the job: let the loss happen, and return once the backend is gone."""
        self.ready.set()
        assert self.done.wait(30), "the job's backend was never terminated"


def _query_fails() -> None:
    with pytest.raises(DatabaseError):
        Marker.objects.create(job=JOB, pid=0)


def before_the_first_query(loss: Loss) -> None:
    """Lost before the job's first query: that query finds the connection dead."""
    loss.now()
    _query_fails()


def after_its_queries(loss: Loss) -> None:
    """Lost after the job's queries: only the release finds the connection dead."""
    Marker.objects.create(job=JOB, pid=0)
    loss.now()


def failure_swallowed(loss: Loss) -> None:
    """Lost between two queries; the job swallows the failure and returns normally."""
    Marker.objects.create(job=JOB, pid=0)
    loss.now()
    _query_fails()


#: What the job does around the loss: each is one moment the connection can die.
BODIES: dict[str, Callable[[Loss], None]] = {
    "before the first query": before_the_first_query,
    "after its queries": after_its_queries,
    "failure swallowed": failure_swallowed,
}


@pytest.fixture
def job(fresh_registry: None) -> Callable[..., Any]:
    actions: list[Callable[[], None]] = []

    @locked_task(name=JOB, scope="transaction")
    def race_lost_transaction() -> str:
        if actions:
            actions.pop()()
        return "committed"

    def run(action: Callable[[], None] | None = None) -> Any:
        if action is not None:
            actions.append(action)
        return race_lost_transaction.run()

    return run


def statuses() -> list[str]:
    return list(JobRun.objects.filter(job=JOB).order_by("id").values_list("status", flat=True))


@pytest.mark.parametrize("moment", list(BODIES))
def test_a_lost_transaction_leaves_the_process_out_of_atomic(
    job: Callable[..., Any], observer: Any, moment: str
) -> None:
    """Before: with the loss before the job's next query, the release could not start its
    pipeline on the dead connection, the body's savepoint was never ended, and the lock's
    ``atomic()`` exit took the savepoint for its own: the thread stayed inside ``atomic()``
    (later ORM queries: "the connection is closed")."""
    loss = Loss(observer)
    killer = threading.Thread(target=loss.kill, daemon=True)
    killer.start()
    with pytest.raises(LockLost, match="rolled back"):
        job(lambda: BODIES[moment](loss))
    killer.join(30)
    assert not connection.in_atomic_block and not connection.needs_rollback
    assert connection.savepoint_ids == [] and connection.atomic_blocks == []
    assert Marker.objects.count() == 0  # plain ORM queries work; the job's write rolled back
    again = job()
    assert again.status == RunStatus.SUCCEEDED
    assert statuses() == ["lock_lost", "succeeded"]
    assert not holders(observer, job_key(JOB))


def test_a_transaction_lost_while_the_lock_is_taken_leaves_the_process_usable(
    job: Callable[..., Any], observer: Any
) -> None:
    """The connection dies while the acquiring round trip is in flight (the lock already
    shows in ``pg_locks``): the job never starts, nothing is recorded, a database error is
    raised (Django's, not the driver's), and the process goes on outside ``atomic()``."""
    observer.execute(
        f"""
        CREATE OR REPLACE FUNCTION race_slow_start() RETURNS trigger AS $$
        BEGIN PERFORM pg_sleep(10); RETURN NEW; END $$ LANGUAGE plpgsql;
        CREATE TRIGGER race_slow_start BEFORE INSERT ON {TABLE} FOR EACH ROW
        WHEN (NEW.job = '{JOB}') EXECUTE FUNCTION race_slow_start();
        """
    )

    def kill() -> None:
        pid = wait_for(lambda: holders(observer, job_key(JOB)), timeout=30, interval=0.01)[0]
        wait_for(lambda: sleeping(observer), timeout=30, interval=0.01)
        observer.execute("SELECT pg_terminate_backend(%s)", (pid,))
        # Only now: dropping it waits for the sleeping INSERT's table lock.
        observer.execute(f"DROP TRIGGER race_slow_start ON {TABLE}")

    killer = threading.Thread(target=kill, daemon=True)
    killer.start()
    ran: list[bool] = []
    with pytest.raises(DatabaseError):
        job(lambda: ran.append(True))
    killer.join(30)
    assert not ran
    assert not connection.in_atomic_block and not connection.needs_rollback
    assert connection.savepoint_ids == [] and connection.atomic_blocks == []
    assert statuses() == []
    assert job().status == RunStatus.SUCCEEDED
    assert statuses() == ["succeeded"]


# -- a signal while the release statement runs ------------------------------------------------


@pytest.fixture
def edge_jobs(monkeypatch: pytest.MonkeyPatch) -> None:
    """The edge jobs, registered in every ``runlocked`` subprocess the test starts."""
    monkeypatch.setenv("ADVISORY_CRON_JSON", json.dumps({"JOBS_MODULE": "edge_tasks"}))


@pytest.fixture
def slow_finish(raw_connect: Any) -> Iterator[Any]:
    """Make the statement finishing a run (its row set to ``succeeded``) take 1.5 s, through a
    real trigger; yields the observing connection."""
    observer = raw_connect()
    observer.execute(
        f"""
        CREATE OR REPLACE FUNCTION race_slow() RETURNS trigger AS $$
        BEGIN PERFORM pg_sleep(1.5); RETURN NEW; END $$ LANGUAGE plpgsql;
        CREATE TRIGGER race_slow BEFORE UPDATE ON {TABLE} FOR EACH ROW
        WHEN (NEW.job = 'edge_sleep_transaction' AND NEW.status = 'succeeded')
        EXECUTE FUNCTION race_slow();
        """
    )
    yield observer
    observer.execute(f"DROP TRIGGER IF EXISTS race_slow ON {TABLE}")


def sleeping(observer: Any) -> bool:
    row = observer.execute(
        "SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'PgSleep' "
        "AND pid <> pg_backend_pid()"
    ).fetchone()
    return bool(row[0])


def test_sigterm_while_a_transaction_scoped_run_is_being_finished_commits_it(
    edge_jobs: None, slow_finish: Any, spawn: Any
) -> None:
    """SIGTERM arrives while the run's finishing statement runs: it is held until the
    transaction has committed, then passed on. Before: it was passed on between the finishing
    statement and the commit, so the commit never ran (the thread stayed inside the lock's
    ``atomic()``) and the row the exit message called recorded was rolled back."""
    process = spawn("runlocked", "edge_sleep_transaction", "0")
    wait_for(lambda: sleeping(slow_finish), timeout=30, interval=0.01)
    process.send_signal(signal.SIGTERM)
    _out, err = process.communicate(timeout=30)
    assert process.returncode == exitcodes.SIGTERM, err
    assert "recorded as succeeded" in err, err
    assert list(
        JobRun.objects.filter(job="edge_sleep_transaction").values_list("status", flat=True)
    ) == ["succeeded"]
    assert Marker.objects.filter(job="edge_sleep_transaction").count() == 1
    assert not holders(slow_finish, job_key("edge_sleep_transaction"))
