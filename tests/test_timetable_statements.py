"""A worker that slept through ticks asks the run history about all its jobs that fell behind
in one statement, not one per job (at 100 replicas x 1,000 jobs such reads were 38 of the 43
statements a replica sent per tick)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from django_advisory_cron import locked_task
from django_advisory_cron.db.execute import database_now
from django_advisory_cron.jobs.job import Job
from django_advisory_cron.worker.timetable import Timetable

pytestmark = pytest.mark.usefixtures("transactional_db", "fresh_registry")

JOBS = 12


def nothing() -> None:
    return None


def test_jobs_that_fell_behind_are_looked_up_in_one_statement() -> None:
    jobs: dict[str, Job[..., object]] = {
        f"behind_{n}": locked_task(name=f"behind_{n}", every=1, catch_up="latest")(nothing)
        for n in range(JOBS)
    }
    timetable = Timetable(jobs, "test-worker")
    now = database_now()
    timetable.plan(connection, now)
    later = now + timedelta(seconds=5)  # slept through four ticks of every job
    with CaptureQueriesContext(connection) as queries:
        due = list(timetable.due(connection, list(jobs), later))
    assert len(due) == JOBS and all(len(ticks) == 1 for _job, ticks in due)  # the latest
    assert len(queries.captured_queries) == 1, [q["sql"][:80] for q in queries]
