"""The run list and the Jobs page read a bounded part of the history, whatever its size.

Asserted on the statements the pages send (captured from real requests) and on their plans
(``EXPLAIN`` on a history of 20,000 rows), never on timings: those are in
``benchmarks/bench_admin_pages.py``.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from django_advisory_cron import locked_task
from django_advisory_cron.admin.runs import BoundedCountPaginator, RunQuerySet
from django_advisory_cron.core.statuses import SKIPS
from django_advisory_cron.db import sql
from django_advisory_cron.models import JobRun
from tests.admin_users import VIEWING, logged_in

RUNS_URL = reverse("admin:django_advisory_cron_jobrun_changelist")
JOBS_URL = reverse("admin:django_advisory_cron_registeredjob_changelist")
TABLE = '"django_advisory_cron_jobrun"'
JOBS = [f"size.job{number}" for number in range(10)]
ROWS = 20_000

#: One row every 30 seconds back from ``now``, the jobs in turn; one row in ten failed, three skips.
FILL = """
INSERT INTO django_advisory_cron_jobrun (job, tick, host, pid, started, finished, status, error)
SELECT (%(jobs)s::text[])[1 + g %% 10], at, 'web', g, at, at + interval '1 second',
       (ARRAY['succeeded', 'failed', 'skipped_tick', 'skipped_locked', 'skipped_paused',
              'succeeded', 'succeeded', 'succeeded', 'succeeded', 'succeeded'])[1 + g / 10 %% 10],
       ''
FROM (SELECT g, %(now)s::timestamptz - make_interval(secs => 30 * g) AS at
      FROM generate_series(1, %(rows)s) AS g) AS rows
"""


@pytest.fixture
def jobs(fresh_registry: None) -> list[str]:
    for name in JOBS:
        locked_task(name=name)(lambda: None)
    return JOBS


@pytest.fixture
def history(db_url: str, jobs: list[str]) -> datetime:
    """ROWS rows of the registered jobs, analysed; returns the newest row's start."""
    now = timezone.now().replace(microsecond=0)
    with connection.cursor() as cursor:
        cursor.execute(FILL, {"jobs": jobs, "now": now, "rows": ROWS})
        cursor.execute("ANALYZE django_advisory_cron_jobrun")
    return now - timedelta(minutes=1)


@pytest.fixture
def viewer(db_url: str, django_user_model: Any) -> Client:
    return logged_in(django_user_model, "size", VIEWING)


def history_queries(client: Client, url: str, query: dict[str, Any]) -> tuple[str, list[str]]:
    """The page, and the statements it sent that read the run history."""
    with CaptureQueriesContext(connection) as captured:
        response = client.get(url, query)
    assert response.status_code == 200
    return response.content.decode(), [
        q["sql"] for q in captured.captured_queries if TABLE in q["sql"]
    ]


def plan(statement: str, params: Any = None) -> str:
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN " + statement, params)
        return "\n".join(row[0] for row in cursor.fetchall())


def month_of(moment: datetime) -> dict[str, int]:
    local = timezone.localtime(moment)
    return {"started__year": local.year, "started__month": local.month}


@pytest.fixture
def run_list_views(history: datetime) -> list[tuple[str, dict[str, Any]]]:
    """The run list plain, filtered, drilled down and searched."""
    day = timezone.localtime(history - timedelta(days=2))
    return [
        ("plain", {}),
        ("job", {"job": JOBS[3]}),
        ("status", {"status__exact": "failed"}),
        ("skips shown", {"skips": "show"}),
        ("month", month_of(history)),
        ("day", {**month_of(day), "started__day": day.day}),
        ("search", {"q": "web"}),
    ]


def test_run_list_counts_at_most_a_page_limit_and_never_distinct(
    viewer: Client, run_list_views: list[tuple[str, dict[str, Any]]]
) -> None:
    limit = BoundedCountPaginator.limit
    for label, query in run_list_views:
        page, statements = history_queries(viewer, RUNS_URL, query)
        assert statements, label
        for statement in statements:
            assert "DISTINCT" not in statement.upper(), (label, statement)
            if "COUNT(" in statement.upper():
                assert f"LIMIT {limit + 1}" in statement, (label, statement)
        assert f"more than {limit:,} job runs" in page, label


def test_run_list_pages_walk_an_index(viewer: Client, history: datetime) -> None:
    """Each view's page of rows is read newest first from an index, not sorted from a scan."""
    for query in ({}, {"job": JOBS[3]}, {"status__exact": "failed"}):
        _page, statements = history_queries(viewer, RUNS_URL, query)
        (rows,) = [s for s in statements if "ORDER BY" in s and "LIMIT 100" in s]
        shape = plan(rows)
        assert "Index Scan" in shape and "Seq Scan" not in shape, (query, shape)


def test_a_short_history_is_counted_exactly(viewer: Client, jobs: list[str]) -> None:
    JobRun.objects.create(job=jobs[0], host="h", pid=1, started=timezone.now(), status="failed")
    page = viewer.get(RUNS_URL).content.decode()
    assert "1 job run" in page and "more than" not in page


@pytest.mark.parametrize("zone", ["UTC", "Europe/Paris", "America/Chicago"])
def test_date_drill_down_lists_what_django_lists(db_url: str, jobs: list[str], zone: str) -> None:
    """The years, months and days offered are those of Django's own ``datetimes()``, in the
    current time zone, including runs either side of a local midnight and a new year."""
    utc = ZoneInfo("UTC")
    moments = [
        datetime(2025, 12, 31, 22, 59, tzinfo=utc),
        datetime(2025, 12, 31, 23, 30, tzinfo=utc),
        datetime(2026, 1, 1, 0, 30, tzinfo=utc),
        datetime(2026, 2, 28, 23, 59, 59, tzinfo=utc),
        datetime(2026, 3, 1, 5, 0, tzinfo=utc),
        datetime(2026, 3, 29, 0, 30, tzinfo=utc),
        datetime(2026, 3, 29, 1, 30, tzinfo=utc),
    ]
    for number, moment in enumerate(moments):
        status = "skipped_tick" if number == 4 else "succeeded"
        JobRun.objects.create(job=jobs[0], host="h", pid=1, started=moment, status=status)
    with timezone.override(ZoneInfo(zone)):
        for kind in ("year", "month", "day"):
            for kept in (JobRun.objects.all(), JobRun.objects.exclude(status__in=SKIPS)):
                ours = RunQuerySet(JobRun, query=kept.query.chain())
                assert list(ours.datetimes("started", kind)) == list(
                    kept.datetimes("started", kind)
                ), (zone, kind)
                assert list(ours.datetimes("started", kind, order="DESC")) == list(
                    kept.datetimes("started", kind, order="DESC")
                ), (zone, kind)


def test_month_drill_down_links_each_day_with_runs(viewer: Client, history: datetime) -> None:
    page, _statements = history_queries(viewer, RUNS_URL, month_of(history))
    days = {int(day) for day in re.findall(r"started__day=(\d+)", page.split('id="changelist"')[1])}
    expected = {
        moment.day
        for moment in JobRun.objects.exclude(status__in=SKIPS)
        .filter(**month_of(history))
        .datetimes("started", "day")
    }
    assert days == expected


def test_job_filter_lists_the_registered_jobs(viewer: Client, jobs: list[str]) -> None:
    for job in (jobs[0], "size.gone"):
        JobRun.objects.create(job=job, host="h", pid=1, started=timezone.now(), status="failed")
    page, _statements = history_queries(viewer, RUNS_URL, {})
    assert all(f"?job={job}" in page for job in jobs)
    assert "size.gone" not in page.split('id="changelist-filter"')[1]
    gone, _ = history_queries(viewer, RUNS_URL, {"job": "size.gone"})
    assert "1 job run" in gone and "?job=size.gone" in gone


def test_jobs_page_reads_each_job_through_its_index(viewer: Client, history: datetime) -> None:
    """No statement of the Jobs page scans the history or walks it by start time: the chart
    runs walk the ``(job, started)`` index, the held locks' runs the ``running`` rows, and
    each job's last run and last success are descents of ``(job, status, started, id)``, even
    for a job that never succeeded."""
    JobRun.objects.filter(job=JOBS[0], status="succeeded").update(status="failed")
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE django_advisory_cron_jobrun")  # as autovacuum would
    _page, statements = history_queries(viewer, JOBS_URL, {})
    per_job = [statement for statement in statements if "unnest(" in statement]
    assert len(per_job) == 2
    for statement in statements:
        shape = plan(statement)
        assert "Seq Scan on django_advisory_cron_jobrun" not in shape, shape
        assert statement not in per_job or "advisory_cron_started" not in shape, shape
    (summaries,) = [statement for statement in per_job if "jsonb_object_agg" in statement]
    assert "advisory_cron_job_status_started" in plan(summaries), plan(summaries)


def test_catch_up_read_walks_each_jobs_index(history: datetime) -> None:
    """The catch-up's read of each job's latest tick does not walk the whole history by start
    time, past other jobs' rows, to find a job that ran long ago."""
    shape = plan(*sql.latest_recorded_ticks(JOBS))
    assert "advisory_cron_started" not in shape, shape


@pytest.mark.parametrize("count", [10, 200])
def test_the_jobs_page_sends_as_many_queries_for_200_jobs_as_for_10(
    viewer: Client, fresh_registry: None, count: int, django_assert_max_num_queries: Any
) -> None:
    """A page of jobs reads the schedules, the history (twice: the summaries, the charts), the
    locks, the states and the workers once each, whatever the number of jobs; Django adds the
    session, the user and the user's two permission reads."""
    for number in range(count):
        locked_task(name=f"count.job{number}", schedule=f"{number % 60} * * * *")(lambda: None)
    with django_assert_max_num_queries(6 + 4):
        assert viewer.get(JOBS_URL).status_code == 200
