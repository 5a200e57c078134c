"""A scheduler killed while it enqueues a tick to the Tasks framework (after its claim, before
the backend answered): the tick is not lost from the history, and runs at most once.

Two real ``cronworker`` processes enqueue an every-2-s job to django-tasks-db; a test
connection holds its task table locked, so each enqueue waits inside its insert. The one
enqueueing the first claimed tick is killed with SIGKILL there. Its insert is then either cut
too (``pg_terminate_backend``: the task was never enqueued) or let through when the table is
released (the task was enqueued after all). Either way the other worker's next claim of the job,
once the enqueue's lease ran out, records the tick ``failed``, saying the sender died and the
task may or may not have been enqueued; a task that was enqueued then runs in a real
``db_worker``, finds its tick taken and skips (its result says so).
"""

from __future__ import annotations

import json
import os
import signal
from typing import Any

import psycopg
import pytest

from django_advisory_cron import exitcodes
from django_advisory_cron.models import EnqueuedTick, JobRun, RunStatus
from tests.test_tasks_delivery import RESULTS, SETTINGS, _drained, _sql, tasks_db
from tests.waiting import wait_for

__all__ = ["tasks_db"]  # fixture

pytestmark = pytest.mark.usefixtures("transactional_db")

JOB = "tasks_every2"


@pytest.mark.slow  # the enqueue's lease (5 s here) has to run out
@pytest.mark.parametrize("enqueued", [False, True], ids=["never_enqueued", "enqueued_anyway"])
def test_a_scheduler_killed_while_it_enqueues_leaves_one_failed_run(
    tasks_db: str, spawn: Any, enqueued: bool
) -> None:
    # The enqueue's lease: connect_timeout() (2 s at least) + STATEMENT_TIMEOUT + 1 s = 5 s.
    settings = {"JOBS_MODULE": "tasks_delivery", "MAX_SKEW": 0.9, "STATEMENT_TIMEOUT": 2}
    env = {"ADVISORY_CRON_JSON": json.dumps(settings)}
    with psycopg.connect(tasks_db) as holder:
        holder.execute(f"LOCK TABLE {RESULTS} IN ACCESS EXCLUSIVE MODE")
        workers = [spawn("cronworker", JOB, SETTINGS, "--grace", "5", env=env) for _ in range(2)]
        sending = wait_for(lambda: EnqueuedTick.objects.filter(job=JOB, task_id="").first())
        # Its insert, waiting for the table (the tick is in its text): killed only once it is
        # sent, so that the scheduler dies inside its enqueue, not between claim and insert.
        tick = sending.tick.isoformat()
        [[insert]] = wait_for(
            lambda: _sql(
                tasks_db,
                "SELECT pid FROM pg_stat_activity WHERE query LIKE %s",
                f"INSERT INTO%{JOB}%{tick[:19]}%",
            )
        )
        os.kill(sending.pid, signal.SIGKILL)
        [survivor] = [worker for worker in workers if worker.pid != sending.pid]
        if not enqueued:
            _sql(tasks_db, "SELECT pg_terminate_backend(%s)", insert)
    ended = wait_for(lambda: JobRun.objects.filter(job=JOB, tick=sending.tick).first(), timeout=30)
    print(f"\n{ended.status}: {ended.error}")
    assert (ended.status, ended.pid) == (RunStatus.FAILED, sending.pid)
    assert "died" in ended.error and "may or may not have been enqueued" in ended.error
    assert f"found by host {ended.host} pid {survivor.pid}" in ended.error
    task = _sql(
        tasks_db,
        f"SELECT id::text FROM {RESULTS} WHERE args_kwargs->'args'->>1 LIKE %s",
        f"{tick[:19]}%",
    )
    assert len(task) == int(enqueued)
    if enqueued:
        # The task enqueued by the dead scheduler runs, finds its tick taken, and skips.
        worker = spawn("db_worker", SETTINGS, "--no-startup-delay", "--interval", "0.1")
        wait_for(lambda: _drained(tasks_db))
        worker.send_signal(signal.SIGTERM)
        worker.communicate(timeout=30)
        [[status, value]] = _sql(
            tasks_db, f"SELECT status, return_value FROM {RESULTS} WHERE id::text = %s", *task[0]
        )
        print(f"its task: {status} {value}")
        assert (status, value["status"]) == ("SUCCESSFUL", RunStatus.SKIPPED_TICK)
    assert list(JobRun.objects.filter(job=JOB, tick=sending.tick)) == [ended]
    survivor.send_signal(signal.SIGTERM)
    _out, err = survivor.communicate(timeout=30)
    assert survivor.returncode == exitcodes.SIGTERM, err
    said = [line for line in err.splitlines() if "may or may not have been enqueued" in line]
    print("\n".join(said))
    assert len(said) == 1
